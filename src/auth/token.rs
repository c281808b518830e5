//! Bearer tokens: JWTs signed with HS256 by this server, naming the user (`sub`) and
//! the session (`sid`), valid for the configured lifetime.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use serde::{Deserialize, Serialize};

use crate::error::{FloeError, Result};

const ISSUER: &str = "floe";

#[derive(Debug, Serialize, Deserialize)]
pub struct Claims {
    pub iss: String,
    pub sub: String,
    pub iat: u64,
    pub exp: u64,
    pub sid: String,
}

/// Issues and checks tokens. Holds the signing key, so it has no `Debug`.
pub struct Tokens {
    encoding: EncodingKey,
    decoding: DecodingKey,
    validation: Validation,
    ttl: Duration,
}

impl Tokens {
    pub fn new(secret: &[u8], ttl: Duration) -> Result<Self> {
        if secret.len() < 32 {
            return Err(FloeError::invalid(
                "auth: the JWT signing secret must be at least 32 bytes",
            ));
        }
        Ok(Self::with_key(secret, ttl))
    }

    fn with_key(secret: &[u8], ttl: Duration) -> Self {
        let mut validation = Validation::new(Algorithm::HS256);
        validation.set_issuer(&[ISSUER]);
        validation.set_required_spec_claims(&["exp", "iss", "sub"]);
        // One server signs and checks: there is no clock skew to allow for.
        validation.leeway = 0;
        Self {
            encoding: EncodingKey::from_secret(secret),
            decoding: DecodingKey::from_secret(secret),
            validation,
            ttl,
        }
    }

    /// Signed with a key made now: its tokens are good until the process ends.
    pub fn with_random_key(ttl: Duration) -> Self {
        let key: Vec<u8> = (0..2)
            .flat_map(|_| *uuid::Uuid::new_v4().as_bytes())
            .collect();
        Self::with_key(&key, ttl)
    }

    pub fn issue(&self, user: &str, session_id: &str) -> Result<String> {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_err(|e| FloeError::internal(format!("the clock is before 1970: {e}")))?
            .as_secs();
        let claims = Claims {
            iss: ISSUER.to_string(),
            sub: user.to_string(),
            iat: now,
            exp: now + self.ttl.as_secs(),
            sid: session_id.to_string(),
        };
        jsonwebtoken::encode(&Header::new(Algorithm::HS256), &claims, &self.encoding)
            .map_err(|e| FloeError::internal(format!("signing a token: {e}")))
    }

    /// The claims of a token this server signed that has not expired.
    pub fn verify(&self, token: &str) -> Result<Claims> {
        use jsonwebtoken::errors::ErrorKind as K;
        jsonwebtoken::decode::<Claims>(token, &self.decoding, &self.validation)
            .map(|data| data.claims)
            .map_err(|e| {
                FloeError::unauthenticated(match e.kind() {
                    K::ExpiredSignature => "the bearer token has expired: log in again",
                    _ => "the bearer token is not valid",
                })
            })
    }
}
