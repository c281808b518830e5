//! Who may do what. Users log in with a password (checked against an argon2id hash)
//! and get a signed bearer token (a JWT); every later call carries the token. Each user
//! may read and change the namespaces their grants name.
//!
//! Without an `[auth]` section everyone is the anonymous user with every grant; tokens
//! are still issued (signed with a key made at start), because a token also names the
//! caller's session (`sid`) for clients that send no cookies.

pub mod password;
pub mod token;

use std::collections::HashMap;
use std::sync::Arc;

use base64::Engine as _;
use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};

use crate::config::{AuthConfig, UserConfig};
use crate::error::{FloeError, Result};
use token::{Claims, Tokens};

/// The user everyone is when authentication is off.
pub const ANONYMOUS: &str = "anonymous";

/// The namespaces one user may read and change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Access {
    user: String,
    read: Grants,
    write: Grants,
}

/// Namespaces named by a grant list: `"*"` is every namespace; `"sales"` is `sales`
/// and the namespaces below it (`sales.eu`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grants(Vec<String>);

impl Grants {
    pub fn new(names: &[String]) -> Self {
        Self(names.to_vec())
    }

    fn all() -> Self {
        Self(vec!["*".to_string()])
    }

    fn covers(&self, namespace: &str) -> bool {
        self.0.iter().any(|grant| {
            grant == "*"
                || namespace == grant
                || namespace
                    .strip_prefix(grant.as_str())
                    .is_some_and(|rest| rest.starts_with('.'))
        })
    }

    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl Access {
    pub fn new(user: impl Into<String>, read: Grants, write: Grants) -> Self {
        Self {
            user: user.into(),
            read,
            write,
        }
    }

    /// Every grant: what everyone has when authentication is off.
    pub fn unrestricted() -> Self {
        Self::new(ANONYMOUS, Grants::all(), Grants::all())
    }

    pub fn user(&self) -> &str {
        &self.user
    }

    pub fn can_read(&self, namespace: &str) -> bool {
        self.read.covers(namespace)
    }

    /// May the user change anything at all (SqlInfo's read-only flag is its negation).
    pub fn can_write_somewhere(&self) -> bool {
        !self.write.is_empty()
    }

    /// May the user see and cancel statements of `user`: their own, and everyone's
    /// for a user who may change every namespace (`write = ["*"]`).
    pub fn may_manage_statements_of(&self, user: &str) -> bool {
        self.user == user || self.write.0.iter().any(|grant| grant == "*")
    }

    pub fn check_read(&self, namespace: &str) -> Result<()> {
        match self.read.covers(namespace) {
            true => Ok(()),
            false => Err(self.denied("read", namespace)),
        }
    }

    pub fn check_write(&self, namespace: &str) -> Result<()> {
        match self.write.covers(namespace) {
            true => Ok(()),
            false => Err(self.denied("change", namespace)),
        }
    }

    fn denied(&self, what: &str, namespace: &str) -> FloeError {
        FloeError::permission_denied(format!(
            "user '{}' may not {what} schema '{namespace}'",
            self.user
        ))
    }
}

/// An authenticated caller: who, and which session (if any) the call belongs to.
#[derive(Debug, Clone)]
pub struct Identity {
    pub access: Arc<Access>,
    /// The session the call belongs to: the session cookie, else the token's `sid`.
    pub session_id: Option<String>,
}

/// A successful login: the token to hand back (a new one for a password, the same
/// one for a bearer).
pub struct Login {
    pub token: String,
}

/// Checks passwords and tokens.
pub struct Authenticator {
    /// `None`: authentication is off.
    users: Option<HashMap<String, User>>,
    tokens: Tokens,
}

struct User {
    password_hash: String,
    access: Arc<Access>,
}

impl Authenticator {
    /// From the `[auth]` section; `None` turns authentication off.
    pub fn new(config: Option<&AuthConfig>) -> Result<Self> {
        let Some(config) = config else {
            return Ok(Self {
                users: None,
                tokens: Tokens::with_random_key(std::time::Duration::from_secs(24 * 3600)),
            });
        };
        let users = config
            .users
            .iter()
            .map(|user| (user.name.clone(), User::from_config(user)))
            .collect();
        Ok(Self {
            users: Some(users),
            tokens: Tokens::new(config.jwt_secret.expose().as_bytes(), config.token_ttl)?,
        })
    }

    pub fn enabled(&self) -> bool {
        self.users.is_some()
    }

    /// Handshake: Basic credentials earn a new token (and a new session); a bearer
    /// token is checked and handed back as it is.
    pub fn login(&self, authorization: Option<&str>) -> Result<Login> {
        match parse_authorization(authorization)? {
            Credentials::Basic { user, password } => {
                let access = self.check_password(&user, &password)?;
                Ok(Login {
                    token: self.tokens.issue(access.user(), &new_session_id())?,
                })
            }
            Credentials::Bearer(token) => {
                self.identity_of_token(&token)?;
                Ok(Login { token })
            }
            Credentials::None if !self.enabled() => Ok(Login {
                token: self.tokens.issue(ANONYMOUS, &new_session_id())?,
            }),
            Credentials::None => Err(FloeError::unauthenticated(
                "log in with a user name and password (Basic) or a bearer token",
            )),
        }
    }

    /// Any call but Handshake: the caller the bearer token names. Without
    /// authentication, a call with no (or a foreign) token is the anonymous user.
    pub fn identify(&self, authorization: Option<&str>) -> Result<Identity> {
        let credentials = parse_authorization(authorization);
        if !self.enabled() {
            let session_id = match credentials {
                Ok(Credentials::Bearer(token)) => self.tokens.verify(&token).ok().map(|c| c.sid),
                _ => None,
            };
            return Ok(Identity {
                access: Arc::new(Access::unrestricted()),
                session_id,
            });
        }
        match credentials? {
            Credentials::Bearer(token) => self.identity_of_token(&token),
            Credentials::Basic { .. } => Err(FloeError::unauthenticated(
                "log in with Handshake first, then send its bearer token",
            )),
            Credentials::None => Err(FloeError::unauthenticated(
                "no bearer token: log in with Handshake first",
            )),
        }
    }

    /// A token for a new session of `identity`'s user (clients without cookies keep
    /// their session through it).
    pub fn session_token(&self, identity: &Identity, session_id: &str) -> Result<String> {
        self.tokens.issue(identity.access.user(), session_id)
    }

    fn identity_of_token(&self, token: &str) -> Result<Identity> {
        let Claims { sub, sid, .. } = self.tokens.verify(token)?;
        let access = match &self.users {
            None => Arc::new(Access::unrestricted()),
            Some(users) => users
                .get(&sub)
                .map(|user| user.access.clone())
                .ok_or_else(|| FloeError::unauthenticated("the token's user no longer exists"))?,
        };
        Ok(Identity {
            access,
            session_id: Some(sid),
        })
    }

    fn check_password(&self, user: &str, password: &str) -> Result<Arc<Access>> {
        let Some(users) = &self.users else {
            return Ok(Arc::new(Access::unrestricted()));
        };
        let found = users.get(user);
        // Verify against some hash even for an unknown user, so that timing does not
        // tell which user names exist.
        let hash = found.map_or(password::dummy_hash(), |u| u.password_hash.as_str());
        let valid = password::verify(password, hash);
        match (found, valid) {
            (Some(user), true) => Ok(user.access.clone()),
            _ => Err(FloeError::unauthenticated("wrong user name or password")),
        }
    }
}

impl User {
    fn from_config(config: &UserConfig) -> Self {
        Self {
            password_hash: config.password_hash.expose().to_string(),
            access: Arc::new(Access::new(
                config.name.clone(),
                Grants::new(&config.read),
                Grants::new(&config.write),
            )),
        }
    }
}

pub fn new_session_id() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}

enum Credentials {
    None,
    Basic { user: String, password: String },
    Bearer(String),
}

/// Reads an `authorization` header. Basic credentials may come with or without base64
/// padding (Go clients, and so ADBC, leave it out).
fn parse_authorization(header: Option<&str>) -> Result<Credentials> {
    let Some(header) = header.map(str::trim).filter(|h| !h.is_empty()) else {
        return Ok(Credentials::None);
    };
    let (scheme, value) = header.split_once(' ').unwrap_or((header, ""));
    let value = value.trim();
    if scheme.eq_ignore_ascii_case("bearer") {
        return Ok(Credentials::Bearer(value.to_string()));
    }
    if !scheme.eq_ignore_ascii_case("basic") {
        return Err(FloeError::unauthenticated(
            "the authorization header must be Basic or Bearer",
        ));
    }
    let lenient = GeneralPurpose::new(
        &base64::alphabet::STANDARD,
        GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
    );
    let undecodable = || FloeError::unauthenticated("the Basic credentials are not valid base64");
    let decoded = lenient.decode(value).map_err(|_| undecodable())?;
    let text = String::from_utf8(decoded).map_err(|_| undecodable())?;
    let (user, password) = text
        .split_once(':')
        .ok_or_else(|| FloeError::unauthenticated("the Basic credentials have no ':'"))?;
    Ok(Credentials::Basic {
        user: user.to_string(),
        password: password.to_string(),
    })
}
