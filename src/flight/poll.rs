//! PollFlightInfo: long statements with progress.
//!
//! The first call names a statement (a query or a prepared statement); Floe starts it in
//! the background — a query's job runs at once — and answers with a descriptor to poll
//! and the fraction of the job's tasks finished. A later poll with that descriptor
//! answers the same way until the statement is done, then with its FlightInfo (the
//! ticket whose DoGet streams the rows) and no descriptor. Each call first waits a
//! moment for the statement to finish, so a short one takes a single call.
//!
//! arrow-flight routes PollFlightInfo to no FlightSqlService method, so [`FloeFlight`]
//! wraps the service: every call but this one goes to it unchanged.

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use arrow_flight::flight_service_server::FlightService;
use arrow_flight::sql::{Any, Command};
use arrow_flight::{
    Action, ActionType, Criteria, Empty, FlightData, FlightDescriptor, FlightInfo,
    HandshakeRequest, HandshakeResponse, PollInfo, PutResult, SchemaResult, Ticket,
};
use datafusion::common::ScalarValue;
use futures::Stream;
use prost::Message;
use tokio::sync::Notify;
use tonic::{Request, Response, Status, Streaming};

use super::{FloeFlightService, describe, prepared, status};
use crate::ops::statements::Scope;
use crate::sql::{Caller, Outcome};

/// The type of the commands Floe hands out to poll again.
const POLL_TYPE: &str = "type.googleapis.com/floe.PollStatement";

/// How long a poll waits for its statement to finish before it answers with progress.
const POLL_WAIT: Duration = Duration::from_millis(250);

/// How long a started statement waits for its next poll.
const POLL_TTL: Duration = Duration::from_secs(600);

/// Statements started by PollFlightInfo, by poll handle.
#[derive(Default)]
pub struct Polls {
    entries: Mutex<HashMap<Vec<u8>, Arc<Polled>>>,
}

struct Polled {
    created: Instant,
    scope: Scope,
    done: Notify,
    outcome: Mutex<Option<Result<FlightInfo, Status>>>,
}

impl Polled {
    fn finish(&self, outcome: Result<FlightInfo, Status>) {
        if let Ok(mut slot) = self.outcome.lock() {
            *slot = Some(outcome);
        }
        self.done.notify_waiters();
    }

    fn outcome(&self) -> Option<Result<FlightInfo, Status>> {
        self.outcome.lock().ok().and_then(|slot| slot.clone())
    }

    /// The outcome, once there is one or `POLL_WAIT` has passed.
    async fn outcome_soon(&self) -> Option<Result<FlightInfo, Status>> {
        let done = self.done.notified();
        if let Some(outcome) = self.outcome() {
            return Some(outcome);
        }
        let _ = tokio::time::timeout(POLL_WAIT, done).await;
        self.outcome()
    }
}

impl Polls {
    fn add(&self, polled: Arc<Polled>) -> Vec<u8> {
        let handle = uuid::Uuid::new_v4().as_bytes().to_vec();
        if let Ok(mut entries) = self.entries.lock() {
            entries.retain(|_, p| p.created.elapsed() < POLL_TTL);
            entries.insert(handle.clone(), polled);
        }
        handle
    }

    fn get(&self, handle: &[u8]) -> Option<Arc<Polled>> {
        self.entries.lock().ok()?.get(handle).cloned()
    }

    fn remove(&self, handle: &[u8]) {
        if let Ok(mut entries) = self.entries.lock() {
            entries.remove(handle);
        }
    }
}

impl FloeFlightService {
    async fn poll(&self, request: Request<FlightDescriptor>) -> Result<PollInfo, Status> {
        if let Some(handle) = poll_handle(request.get_ref()) {
            return self.poll_again(handle).await;
        }
        let caller = self.caller(&request)?;
        let descriptor = request.into_inner();
        let (sql, params) = self.statement_of(&descriptor, &caller)?;
        let running = self.admit(&caller, &sql).await?;
        let polled = Arc::new(Polled {
            created: Instant::now(),
            scope: running.scope(),
            done: Notify::new(),
            outcome: Mutex::default(),
        });
        let handle = self.polls.add(polled.clone());
        let (engine, pending) = (self.engine.clone(), self.pending.clone());
        let started = polled.clone();
        let statement = async move {
            let outcome = match engine.execute(&caller, &sql, &params).await {
                Ok(Outcome::Query(query)) => engine.run_query(query).await.map(Outcome::Started),
                other => other,
            };
            let info = match outcome {
                Ok(outcome @ Outcome::Started(_)) => {
                    describe(&pending, outcome, Some(running), descriptor)
                }
                Ok(outcome) => {
                    running.end(Ok(outcome.rows()));
                    describe(&pending, outcome, None, descriptor)
                }
                Err(e) => {
                    running.end(Err(&e));
                    Err(status(e))
                }
            };
            started.finish(info);
        };
        tokio::spawn(polled.scope.clone().run(statement));
        self.poll_again(handle).await
    }

    /// The statement's FlightInfo once it is done; else how far it has got.
    async fn poll_again(&self, handle: Vec<u8>) -> Result<PollInfo, Status> {
        let polled = self
            .polls
            .get(&handle)
            .ok_or_else(|| Status::not_found("unknown or expired poll"))?;
        if let Some(outcome) = polled.outcome_soon().await {
            self.polls.remove(&handle);
            let info = outcome?;
            return Ok(PollInfo {
                info: Some(info),
                flight_descriptor: None,
                progress: Some(1.0),
                expiration_time: None,
            });
        }
        let progress = self.engine.progress(&polled.scope.jobs()).await;
        let descriptor = poll_descriptor(handle);
        Ok(PollInfo {
            // ADBC wants an info on every poll: no endpoint yet.
            info: Some(FlightInfo::new().with_descriptor(descriptor.clone())),
            flight_descriptor: Some(descriptor),
            progress: Some(progress.unwrap_or(0.0)),
            expiration_time: None,
        })
    }

    /// The SQL and parameters of a statement command.
    fn statement_of(
        &self,
        descriptor: &FlightDescriptor,
        caller: &Caller,
    ) -> Result<(String, Vec<ScalarValue>), Status> {
        let any = Any::decode(descriptor.cmd.clone())
            .map_err(|e| Status::invalid_argument(format!("PollFlightInfo: {e}")))?;
        match Command::try_from(any).map_err(|e| Status::invalid_argument(e.to_string()))? {
            Command::CommandStatementQuery(query) => Ok((query.query, Vec::new())),
            Command::CommandPreparedStatementQuery(query) => {
                let handle = self
                    .prepared
                    .get(&query.prepared_statement_handle, caller.access.user())?;
                let params = prepared::query_row(handle.parameters.as_ref())?;
                Ok((handle.sql.clone(), params))
            }
            other => Err(Status::unimplemented(format!(
                "PollFlightInfo of {} is not supported",
                other.type_url()
            ))),
        }
    }
}

fn poll_descriptor(handle: Vec<u8>) -> FlightDescriptor {
    let command = Any {
        type_url: POLL_TYPE.to_string(),
        value: handle.into(),
    };
    FlightDescriptor::new_cmd(command.encode_to_vec())
}

fn poll_handle(descriptor: &FlightDescriptor) -> Option<Vec<u8>> {
    let any = Any::decode(descriptor.cmd.clone()).ok()?;
    (any.type_url == POLL_TYPE).then(|| any.value.to_vec())
}

/// The Flight SQL service with PollFlightInfo.
pub struct FloeFlight(pub Arc<FloeFlightService>);

type Inner = FloeFlightService;
type BoxStream<T> = Pin<Box<dyn Stream<Item = Result<T, Status>> + Send + 'static>>;

#[tonic::async_trait]
impl FlightService for FloeFlight {
    type HandshakeStream = <Inner as FlightService>::HandshakeStream;
    type ListFlightsStream = <Inner as FlightService>::ListFlightsStream;
    type DoGetStream = <Inner as FlightService>::DoGetStream;
    type DoPutStream = <Inner as FlightService>::DoPutStream;
    type DoActionStream = <Inner as FlightService>::DoActionStream;
    type ListActionsStream = <Inner as FlightService>::ListActionsStream;
    type DoExchangeStream = <Inner as FlightService>::DoExchangeStream;

    async fn handshake(
        &self,
        request: Request<Streaming<HandshakeRequest>>,
    ) -> Result<Response<BoxStream<HandshakeResponse>>, Status> {
        FlightService::handshake(self.0.as_ref(), request).await
    }

    async fn list_flights(
        &self,
        request: Request<Criteria>,
    ) -> Result<Response<BoxStream<FlightInfo>>, Status> {
        FlightService::list_flights(self.0.as_ref(), request).await
    }

    async fn get_flight_info(
        &self,
        request: Request<FlightDescriptor>,
    ) -> Result<Response<FlightInfo>, Status> {
        FlightService::get_flight_info(self.0.as_ref(), request).await
    }

    async fn poll_flight_info(
        &self,
        request: Request<FlightDescriptor>,
    ) -> Result<Response<PollInfo>, Status> {
        self.0.poll(request).await.map(Response::new)
    }

    async fn get_schema(
        &self,
        request: Request<FlightDescriptor>,
    ) -> Result<Response<SchemaResult>, Status> {
        FlightService::get_schema(self.0.as_ref(), request).await
    }

    async fn do_get(
        &self,
        request: Request<Ticket>,
    ) -> Result<Response<BoxStream<FlightData>>, Status> {
        FlightService::do_get(self.0.as_ref(), request).await
    }

    async fn do_put(
        &self,
        request: Request<Streaming<FlightData>>,
    ) -> Result<Response<BoxStream<PutResult>>, Status> {
        FlightService::do_put(self.0.as_ref(), request).await
    }

    async fn do_exchange(
        &self,
        request: Request<Streaming<FlightData>>,
    ) -> Result<Response<BoxStream<FlightData>>, Status> {
        FlightService::do_exchange(self.0.as_ref(), request).await
    }

    async fn do_action(
        &self,
        request: Request<Action>,
    ) -> Result<Response<BoxStream<arrow_flight::Result>>, Status> {
        FlightService::do_action(self.0.as_ref(), request).await
    }

    async fn list_actions(
        &self,
        request: Request<Empty>,
    ) -> Result<Response<BoxStream<ActionType>>, Status> {
        FlightService::list_actions(self.0.as_ref(), request).await
    }
}
