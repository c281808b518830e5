//! What the coordinator serves on the scheduler port besides Ballista's scheduler: Flight
//! actions for executors (see `coordinator_link`), to renew a table's vended storage
//! credentials (`catalog::credentials`) and to fetch a big scan's task group
//! (`codec::task_groups`). Executors already reach that port, and an action needs no
//! other credential than the unguessable id the plan carried.

use std::net::SocketAddr;

use arrow_flight::flight_service_server::{FlightService, FlightServiceServer};
use arrow_flight::{
    Action, ActionType, Criteria, Empty, FlightData, FlightDescriptor, FlightInfo,
    HandshakeRequest, HandshakeResponse, PollInfo, PutResult, SchemaResult, Ticket,
};
use ballista_core::serde::protobuf::scheduler_grpc_server::SchedulerGrpcServer;
use bytes::Bytes;
use futures::stream::{self, BoxStream};
use tonic::{Request, Response, Status, Streaming};

use super::{MAX_MESSAGE_SIZE, Scheduler};
use crate::catalog::credentials::{self, RENEW_ACTION};
use crate::codec::task_groups;

/// Ballista's scheduler call by which an executor registers.
const REGISTER_EXECUTOR: &str = "/ballista.protobuf.SchedulerGrpc/RegisterExecutor";

/// An executor registering once the in-process ones have is of another process: before
/// the scheduler may give it a task that fetches a held stage output, the held ones go to
/// their files (`held_outputs`).
async fn note_registration<B>(request: axum::http::Request<B>) -> axum::http::Request<B> {
    if request.uri().path() == REGISTER_EXECUTOR {
        super::held_outputs::held_outputs().note_registration();
    }
    request
}

/// Serves the scheduler and the coordinator's own actions on `listener` (as Ballista's own
/// `start_grpc_service` does, with the peer address that executors registering from
/// an unspecified host need).
pub async fn serve(listener: tokio::net::TcpListener, scheduler: Scheduler) -> std::io::Result<()> {
    let scheduler = SchedulerGrpcServer::new(scheduler)
        .max_decoding_message_size(MAX_MESSAGE_SIZE)
        .max_encoding_message_size(MAX_MESSAGE_SIZE);
    let mut routes = tonic::service::RoutesBuilder::default();
    routes
        .add_service(scheduler)
        .add_service(FlightServiceServer::new(CoordinatorService));
    let router = routes
        .routes()
        .into_axum_router()
        .layer(axum::middleware::map_request(note_registration));
    axum::serve(
        listener,
        router.into_make_service_with_connect_info::<SocketAddr>(),
    )
    .await
}

struct CoordinatorService;

async fn renew_credentials(body: &[u8]) -> Result<Vec<Bytes>, Status> {
    let id = String::from_utf8_lossy(body).into_owned();
    let renew = credentials::renew_here(&id)
        .ok_or_else(|| Status::permission_denied("unknown or ended storage credential lease"))?;
    let props = renew()
        .await
        .map_err(|e| Status::unavailable(format!("cannot renew the storage credentials: {e}")))?;
    let body = serde_json::to_vec(&props).map_err(|e| Status::internal(e.to_string()))?;
    Ok(vec![body.into()])
}

type Stream<T> = BoxStream<'static, Result<T, Status>>;

fn only_actions<T>() -> Result<T, Status> {
    Err(Status::unimplemented(
        "the scheduler port serves Floe's executors; clients connect to the Flight SQL port",
    ))
}

#[tonic::async_trait]
impl FlightService for CoordinatorService {
    type HandshakeStream = Stream<HandshakeResponse>;
    type ListFlightsStream = Stream<FlightInfo>;
    type DoGetStream = Stream<FlightData>;
    type DoPutStream = Stream<PutResult>;
    type DoExchangeStream = Stream<FlightData>;
    type DoActionStream = Stream<arrow_flight::Result>;
    type ListActionsStream = Stream<ActionType>;

    async fn do_action(
        &self,
        request: Request<Action>,
    ) -> Result<Response<Self::DoActionStream>, Status> {
        let action = request.into_inner();
        let answers = match action.r#type.as_str() {
            RENEW_ACTION => renew_credentials(&action.body).await?,
            task_groups::FETCH_ACTION => {
                task_groups::serve(&action.body).map_err(crate::error::status)?
            }
            _ => return only_actions(),
        };
        let answers = answers
            .into_iter()
            .map(|body| Ok(arrow_flight::Result { body }));
        Ok(Response::new(Box::pin(stream::iter(answers))))
    }

    async fn handshake(
        &self,
        _: Request<Streaming<HandshakeRequest>>,
    ) -> Result<Response<Self::HandshakeStream>, Status> {
        only_actions()
    }
    async fn list_flights(
        &self,
        _: Request<Criteria>,
    ) -> Result<Response<Self::ListFlightsStream>, Status> {
        only_actions()
    }
    async fn get_flight_info(
        &self,
        _: Request<FlightDescriptor>,
    ) -> Result<Response<FlightInfo>, Status> {
        only_actions()
    }
    async fn poll_flight_info(
        &self,
        _: Request<FlightDescriptor>,
    ) -> Result<Response<PollInfo>, Status> {
        only_actions()
    }
    async fn get_schema(
        &self,
        _: Request<FlightDescriptor>,
    ) -> Result<Response<SchemaResult>, Status> {
        only_actions()
    }
    async fn do_get(&self, _: Request<Ticket>) -> Result<Response<Self::DoGetStream>, Status> {
        only_actions()
    }
    async fn do_put(
        &self,
        _: Request<Streaming<FlightData>>,
    ) -> Result<Response<Self::DoPutStream>, Status> {
        only_actions()
    }
    async fn do_exchange(
        &self,
        _: Request<Streaming<FlightData>>,
    ) -> Result<Response<Self::DoExchangeStream>, Status> {
        only_actions()
    }
    async fn list_actions(
        &self,
        _: Request<Empty>,
    ) -> Result<Response<Self::ListActionsStream>, Status> {
        only_actions()
    }
}
