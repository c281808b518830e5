//! Authentication as a tower layer around the Flight service: every call but
//! Handshake must carry a valid bearer token (`auth::Authenticator::identify`); the
//! caller it names travels to the handlers in the request's extensions. Handshake logs
//! in (`FloeFlightService::do_handshake`).

use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll};

use tonic::body::Body;
use tonic::codegen::http::{HeaderMap, HeaderValue, Request, Response};
use tonic::codegen::{BoxFuture, Service};
use tonic::server::NamedService;

use crate::auth::{Authenticator, Identity, new_session_id};

/// The one call that needs no token: it is how a client gets one.
const HANDSHAKE_PATH: &str = "/arrow.flight.protocol.FlightService/Handshake";

/// The cookie a session travels in (the name the Flight SQL spec suggests).
pub const SESSION_COOKIE: &str = "arrow_flight_session_id";

/// Wraps a service so that its calls are authenticated.
#[derive(Clone)]
pub struct Authenticated<S> {
    inner: S,
    authenticator: Arc<Authenticator>,
}

impl<S> Authenticated<S> {
    pub fn new(inner: S, authenticator: Arc<Authenticator>) -> Self {
        Self {
            inner,
            authenticator,
        }
    }
}

impl<S: NamedService> NamedService for Authenticated<S> {
    const NAME: &'static str = S::NAME;
}

impl<S> Service<Request<Body>> for Authenticated<S>
where
    S: Service<Request<Body>, Response = Response<Body>> + Clone + Send + 'static,
    S::Future: Send + 'static,
{
    type Response = Response<Body>;
    type Error = S::Error;
    type Future = BoxFuture<Self::Response, Self::Error>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: Request<Body>) -> Self::Future {
        let mut opened = None;
        if request.uri().path() != HANDSHAKE_PATH {
            match self.identify(request.headers()) {
                Ok(identity) => {
                    if identity.session_id.is_none() {
                        let session = NewSession::default();
                        request.extensions_mut().insert(session.clone());
                        opened = Some((session, identity.clone()));
                    }
                    request.extensions_mut().insert(identity);
                }
                Err(status) => return Box::pin(async move { Ok(status.into_http()) }),
            }
        }
        // The clone that was made ready is the one that serves the call.
        let ready = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, ready);
        let response = inner.call(request);
        let authenticator = self.authenticator.clone();
        Box::pin(async move {
            let mut response = response.await?;
            if let Some((session, identity)) = opened
                && let Err(status) =
                    hand_over(&mut response, &authenticator, &identity, &session.open())
            {
                return Ok(status.into_http());
            }
            Ok(response)
        })
    }
}

/// The session of a call that came without one. A handler that keeps a session for the
/// caller takes its id from [`NewSession::open`]. Whether or not a handler did, the
/// response hands the id to the client, as the session cookie and inside a new bearer
/// token (for clients without cookies), so that its next calls belong to the session;
/// nothing is stored for a session until a handler keeps something in it.
///
/// Handing it over on every call, not only on the one that sets an option, is what
/// makes sessions reliable with the Go Flight client of the ADBC driver: it can drop
/// the headers of a streamed call (DoAction, where SetSessionOptions travels) when the
/// stream's end races with its context's cancellation, but it reads those of a unary
/// call (GetFlightInfo, made when it connects) every time.
#[derive(Clone, Default)]
pub struct NewSession {
    id: Arc<OnceLock<String>>,
}

impl NewSession {
    /// The new session's id (made on the first call).
    pub fn open(&self) -> String {
        self.id.get_or_init(new_session_id).clone()
    }
}

fn hand_over(
    response: &mut Response<Body>,
    authenticator: &Authenticator,
    identity: &Identity,
    session_id: &str,
) -> Result<(), tonic::Status> {
    let token = authenticator
        .session_token(identity, session_id)
        .map_err(super::status)?;
    let header = |value: String| {
        HeaderValue::try_from(value)
            .map_err(|_| tonic::Status::internal("a session that is not a header value"))
    };
    let headers = response.headers_mut();
    headers.insert("authorization", header(format!("Bearer {token}"))?);
    let cookie = format!("{SESSION_COOKIE}={session_id}; HttpOnly");
    headers.insert("set-cookie", header(cookie)?);
    Ok(())
}

impl<S> Authenticated<S> {
    fn identify(&self, headers: &HeaderMap) -> Result<Identity, tonic::Status> {
        let authorization = headers
            .get("authorization")
            .and_then(|value| value.to_str().ok());
        let mut identity = self
            .authenticator
            .identify(authorization)
            .map_err(super::status)?;
        if let Some(session) = session_cookie(headers) {
            identity.session_id = Some(session);
        }
        Ok(identity)
    }
}

/// The session cookie's value, if the call carries one.
fn session_cookie(headers: &HeaderMap) -> Option<String> {
    headers
        .get_all("cookie")
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|cookies| cookies.split(';'))
        .filter_map(|cookie| cookie.trim().split_once('='))
        .find(|(name, _)| *name == SESSION_COOKIE)
        .map(|(_, value)| value.to_string())
}
