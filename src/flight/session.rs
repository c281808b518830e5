//! Flight sessions (SetSessionOptions, GetSessionOptions, CloseSession): per-client
//! state that outlives one call. A session is named by the `arrow_flight_session_id`
//! cookie or, for clients without cookies, by the `sid` of the caller's bearer token; a
//! call with neither may open one (`auth::NewSession`), whose id its response hands to
//! the client. SQL's `USE` sets the schema through [`SessionHandle`].
//! Options: `catalog` (Floe serves one) and `schema` (where unqualified table names
//! are; ADBC's current db_schema, JDBC's `schema`).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use arrow_flight::Action;
use prost::Message;
use tonic::{Request, Response, Status};

use super::auth::NewSession;
use super::store::Store;
use super::{DoActionStream, action_result, status};
use crate::auth::Identity;
use crate::catalog::DEFAULT_NAMESPACE;
use crate::error::FloeError;
use crate::sql::session::SessionSchema;

pub const SET_SESSION_OPTIONS: &str = "SetSessionOptions";
pub const GET_SESSION_OPTIONS: &str = "GetSessionOptions";
pub const CLOSE_SESSION: &str = "CloseSession";

/// A session unused this long is forgotten.
pub const IDLE: Duration = Duration::from_secs(8 * 3600);
/// At most this many sessions are kept (all users together).
pub const CAPACITY: usize = 10_000;

/// What a session remembers.
#[derive(Debug, Clone, Default)]
pub struct Session {
    /// `None`: the default schema.
    pub schema: Option<String>,
}

pub struct Sessions(Store<Session>);

impl Default for Sessions {
    fn default() -> Self {
        Self(Store::new("sessions", IDLE, CAPACITY))
    }
}

impl Sessions {
    /// The schema unqualified names mean for this caller.
    pub fn schema(&self, identity: &Identity) -> String {
        identity
            .session_id
            .as_deref()
            .and_then(|id| {
                self.0
                    .with(id, identity.access.user(), |session| session.schema.clone())
            })
            .flatten()
            .unwrap_or_else(|| DEFAULT_NAMESPACE.to_string())
    }

    /// The caller's session (a fresh one if the session is unknown).
    pub fn get(&self, id: &str, identity: &Identity) -> Session {
        self.0
            .with(id, identity.access.user(), |session| session.clone())
            .unwrap_or_default()
    }

    pub fn put(&self, id: &str, identity: &Identity, session: Session) -> crate::error::Result<()> {
        self.0
            .insert(id.to_string(), identity.access.user(), session)
    }

    pub fn close(&self, id: &str, identity: &Identity) -> bool {
        self.0.remove(id, identity.access.user())
    }
}

/// One caller's session, as the SQL layer sets its schema (`USE`).
pub struct SessionHandle {
    sessions: Arc<Sessions>,
    identity: Identity,
    /// The session to open if the caller has none.
    new_session: Option<NewSession>,
}

impl SessionHandle {
    pub fn new(
        sessions: Arc<Sessions>,
        identity: Identity,
        new_session: Option<NewSession>,
    ) -> Self {
        Self {
            sessions,
            identity,
            new_session,
        }
    }
}

impl SessionSchema for SessionHandle {
    fn set(&self, schema: String) -> crate::error::Result<()> {
        let id = session_id(&self.identity, self.new_session.as_ref())
            .ok_or_else(|| FloeError::internal("a call without a session"))?;
        let mut session = self.sessions.get(&id, &self.identity);
        session.schema = Some(schema);
        self.sessions.put(&id, &self.identity, session)
    }
}

/// The caller's session id: theirs, else that of the session the call opens.
fn session_id(identity: &Identity, new_session: Option<&NewSession>) -> Option<String> {
    identity
        .session_id
        .clone()
        .or_else(|| new_session.map(NewSession::open))
}

/// Names the session's user only: its id opens it.
impl std::fmt::Debug for SessionHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionHandle")
            .field("user", &self.identity.access.user())
            .finish_non_exhaustive()
    }
}

/// Flight.proto's session messages (arrow-flight does not have them).
pub mod proto {
    use super::HashMap;

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct SessionOptionValue {
        #[prost(oneof = "OptionValue", tags = "1, 2, 3, 4, 5")]
        pub option_value: Option<OptionValue>,
    }

    #[derive(Clone, PartialEq, prost::Oneof)]
    pub enum OptionValue {
        #[prost(string, tag = "1")]
        String(String),
        #[prost(bool, tag = "2")]
        Bool(bool),
        #[prost(sfixed64, tag = "3")]
        Int64(i64),
        #[prost(double, tag = "4")]
        Double(f64),
        #[prost(message, tag = "5")]
        StringList(StringListValue),
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct StringListValue {
        #[prost(string, repeated, tag = "1")]
        pub values: Vec<String>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct SetSessionOptionsRequest {
        #[prost(map = "string, message", tag = "1")]
        pub session_options: HashMap<String, SessionOptionValue>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct SetSessionOptionsResult {
        #[prost(map = "string, message", tag = "1")]
        pub errors: HashMap<String, SetSessionOptionsError>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct SetSessionOptionsError {
        #[prost(int32, tag = "1")]
        pub value: i32,
    }

    /// `SetSessionOptionsResult.ErrorValue`.
    pub const INVALID_NAME: i32 = 1;
    pub const INVALID_VALUE: i32 = 2;

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct GetSessionOptionsResult {
        #[prost(map = "string, message", tag = "1")]
        pub session_options: HashMap<String, SessionOptionValue>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct CloseSessionResult {
        #[prost(int32, tag = "1")]
        pub status: i32,
    }

    /// `CloseSessionResult.Status`.
    pub const CLOSED: i32 = 1;

    pub fn string(value: &str) -> SessionOptionValue {
        SessionOptionValue {
            option_value: Some(OptionValue::String(value.to_string())),
        }
    }
}

impl super::FloeFlightService {
    /// SetSessionOptions: sets what it can, reports per option what it could not. A
    /// caller without a session gets a new one: its id as a cookie and, for clients
    /// without cookies, in a new bearer token.
    pub(super) async fn set_session_options(
        &self,
        request: Request<Action>,
    ) -> Result<Response<DoActionStream>, Status> {
        let identity = self.identity(&request)?.clone();
        let options = proto::SetSessionOptionsRequest::decode(request.get_ref().body.clone())
            .map_err(|e| Status::invalid_argument(format!("{SET_SESSION_OPTIONS}: {e}")))?
            .session_options;
        let new_session = request.extensions().get::<NewSession>();
        let id = session_id(&identity, new_session)
            .ok_or_else(|| Status::internal("a call without a session"))?;
        let mut session = self.sessions.get(&id, &identity);
        let mut errors = HashMap::new();
        for (name, value) in options {
            if let Err(value) = self
                .set_option(&identity, &mut session, &name, value.option_value)
                .await?
            {
                errors.insert(name, proto::SetSessionOptionsError { value });
            }
        }
        self.sessions.put(&id, &identity, session).map_err(status)?;
        let result = proto::SetSessionOptionsResult { errors };
        let response = action_result(result.encode_to_vec());
        Ok(response)
    }

    /// Sets one option; `Ok(Err(code))` is the protocol's per-option error.
    async fn set_option(
        &self,
        identity: &Identity,
        session: &mut Session,
        name: &str,
        value: Option<proto::OptionValue>,
    ) -> Result<Result<(), i32>, Status> {
        use proto::OptionValue::String as Text;
        Ok(match (name, value) {
            ("catalog", None) => Ok(()),
            ("catalog", Some(Text(catalog))) if catalog == self.engine.catalog_name() => Ok(()),
            ("schema", None) => {
                session.schema = None;
                Ok(())
            }
            ("schema", Some(Text(schema))) => {
                let visible = self.engine.schema_visible(&identity.access, &schema);
                if visible.await.map_err(status)? {
                    session.schema = Some(schema);
                    Ok(())
                } else {
                    Err(proto::INVALID_VALUE)
                }
            }
            ("catalog" | "schema", Some(_)) => Err(proto::INVALID_VALUE),
            _ => Err(proto::INVALID_NAME),
        })
    }

    /// GetSessionOptions: the catalog and the schema in effect.
    pub(super) fn get_session_options(
        &self,
        request: Request<Action>,
    ) -> Result<Response<DoActionStream>, Status> {
        let identity = self.identity(&request)?;
        let options = HashMap::from([
            (
                "catalog".to_string(),
                proto::string(self.engine.catalog_name()),
            ),
            (
                "schema".to_string(),
                proto::string(&self.sessions.schema(identity)),
            ),
        ]);
        let result = proto::GetSessionOptionsResult {
            session_options: options,
        };
        Ok(action_result(result.encode_to_vec()))
    }

    /// CloseSession: forgets the caller's session (closing none is not an error).
    pub(super) fn close_session(
        &self,
        request: Request<Action>,
    ) -> Result<Response<DoActionStream>, Status> {
        let identity = self.identity(&request)?;
        if let Some(id) = &identity.session_id {
            self.sessions.close(id, identity);
        }
        let result = proto::CloseSessionResult {
            status: proto::CLOSED,
        };
        Ok(action_result(result.encode_to_vec()))
    }
}
