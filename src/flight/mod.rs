//! The Flight SQL service: handshake, ad hoc and prepared statements, updates, and
//! results streamed batch by batch. What is not supported answers `UNIMPLEMENTED`.

mod auth;
mod metadata;
mod poll;
pub mod prepared;
pub mod results;
mod session;
mod sql_info;
pub mod store;
mod upload;

use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;

use arrow_flight::encode::FlightDataEncoderBuilder;
use arrow_flight::error::FlightError;
use arrow_flight::flight_service_server::FlightServiceServer;
use arrow_flight::sql::metadata::{SqlInfoData, SqlInfoDataBuilder, XdbcTypeInfoData};
use arrow_flight::sql::server::{FlightSqlService, PeekableFlightDataStream};
use arrow_flight::sql::{
    ActionCancelQueryRequest, ActionCancelQueryResult, CommandStatementIngest, TableExistsOption,
    TableNotExistOption,
};
use arrow_flight::sql::{
    ActionClosePreparedStatementRequest, ActionCreatePreparedStatementRequest,
    ActionCreatePreparedStatementResult, CommandGetCatalogs, CommandGetCrossReference,
    CommandGetDbSchemas, CommandGetExportedKeys, CommandGetImportedKeys, CommandGetPrimaryKeys,
    CommandGetSqlInfo, CommandGetTableTypes, CommandGetTables, CommandGetXdbcTypeInfo,
    CommandPreparedStatementQuery, CommandPreparedStatementUpdate, CommandStatementQuery,
    CommandStatementUpdate, DoPutPreparedStatementResult, ProstMessageExt, SqlInfo,
    TicketStatementQuery,
};
use arrow_flight::{
    CancelFlightInfoRequest, CancelFlightInfoResult, CancelStatus, FlightDescriptor,
    FlightEndpoint, FlightInfo, HandshakeRequest, HandshakeResponse, IpcMessage, SchemaAsIpc,
    Ticket,
};
use datafusion::arrow::ipc::writer::IpcWriteOptions;
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::common::ScalarValue;
use futures::{Stream, StreamExt, TryStreamExt};
use prost::Message;
use tonic::metadata::MetadataValue;
use tonic::transport::server::TcpIncoming;
use tonic::{Request, Response, Status, Streaming};

use crate::arrow_compat::{client_schema, conform_batch};
use crate::auth::{Authenticator, Identity};
use crate::config::{AuthConfig, TlsConfig};
use crate::error::FloeError;
pub use crate::error::status;
use crate::ops::statements::{self, Running};
use crate::sql::ingest::{IfExists, IfMissing, IngestTarget};
use crate::sql::{Caller, Engine, Outcome, StatementKind};
use auth::NewSession;
use prepared::PreparedStatements;
use results::{Cancelled, PendingResults};
use session::{SessionHandle, Sessions};

/// The Flight action that cancels the statements of a FlightInfo.
const CANCEL_FLIGHT_INFO: &str = "CancelFlightInfo";

pub struct FloeFlightService {
    engine: Arc<Engine>,
    authenticator: Arc<Authenticator>,
    pending: PendingResults,
    polls: poll::Polls,
    prepared: PreparedStatements,
    sessions: Arc<Sessions>,
    sql_info: SqlInfoData,
    /// SqlInfo for users who may not change anything.
    read_only_sql_info: SqlInfoData,
    xdbc_type_info: XdbcTypeInfoData,
}

impl FloeFlightService {
    pub fn new(engine: Arc<Engine>, authenticator: Arc<Authenticator>) -> Result<Self, FloeError> {
        Ok(Self {
            engine,
            authenticator,
            pending: PendingResults::default(),
            polls: poll::Polls::default(),
            prepared: PreparedStatements::default(),
            sessions: Arc::default(),
            sql_info: sql_info::sql_info(false)?,
            read_only_sql_info: sql_info::sql_info(true)?,
            xdbc_type_info: metadata::xdbc_type_info()?,
        })
    }

    /// Who makes the call (the authentication layer put it in the request).
    fn identity<'a, T>(&self, request: &'a Request<T>) -> Result<&'a Identity, Status> {
        request
            .extensions()
            .get::<Identity>()
            .ok_or_else(|| Status::unauthenticated("the call was not authenticated"))
    }

    /// Who makes the call, in their session's schema.
    fn caller<T>(&self, request: &Request<T>) -> Result<Caller, Status> {
        let identity = self.identity(request)?;
        let new_session = request.extensions().get::<NewSession>().cloned();
        let session = SessionHandle::new(self.sessions.clone(), identity.clone(), new_session);
        Ok(Caller {
            access: identity.access.clone(),
            schema: self.sessions.schema(identity),
            session: Some(Arc::new(session)),
        })
    }

    /// Admits a statement of `caller` (see `ops::statements`).
    async fn admit(&self, caller: &Caller, sql: &str) -> Result<Running, Status> {
        self.engine
            .statements()
            .admit(caller.access.user(), sql)
            .await
            .map_err(status)
    }

    /// Runs (DDL, INSERT) or plans (queries) a statement and describes its result.
    async fn flight_info(
        &self,
        caller: &Caller,
        sql: &str,
        params: &[ScalarValue],
        descriptor: FlightDescriptor,
    ) -> Result<FlightInfo, Status> {
        let mut running = self.admit(caller, sql).await?;
        let outcome = running
            .scope()
            .run(self.engine.execute(caller, sql, params))
            .await;
        match outcome {
            Ok(outcome @ Outcome::Query(_)) => {
                running.release_place();
                self.describe(outcome, Some(running), descriptor)
            }
            Ok(outcome) => {
                running.end(Ok(outcome.rows()));
                self.describe(outcome, None, descriptor)
            }
            Err(e) => {
                running.end(Err(&e));
                Err(status(e))
            }
        }
    }

    /// Keeps `outcome` for the DoGet of the ticket in the answer.
    fn describe(
        &self,
        outcome: Outcome,
        running: Option<Running>,
        descriptor: FlightDescriptor,
    ) -> Result<FlightInfo, Status> {
        describe(&self.pending, outcome, running, descriptor)
    }

    /// Cancels the statements whose results `info` describes; true if any was waiting
    /// or streaming.
    fn cancel(&self, info: Option<&FlightInfo>) -> bool {
        let handles = info
            .into_iter()
            .flat_map(|info| &info.endpoint)
            .filter_map(|endpoint| endpoint.ticket.as_ref())
            .filter_map(|ticket| arrow_flight::sql::Any::decode(ticket.ticket.clone()).ok())
            .filter_map(|any| any.unpack::<TicketStatementQuery>().ok().flatten());
        let mut cancelled = false;
        for ticket in handles {
            cancelled |= self.pending.cancel(&ticket.statement_handle) != Cancelled::Nothing;
        }
        cancelled
    }

    /// Runs a statement sent as an update; returns the affected row count.
    async fn update(
        &self,
        caller: &Caller,
        sql: &str,
        params: &[ScalarValue],
    ) -> Result<i64, Status> {
        let update = async {
            let outcome = self.engine.execute(caller, sql, params).await;
            outcome.and_then(Outcome::affected)
        };
        self.run_update(caller, sql, update).await
    }

    /// Runs an admitted update and ends its statement.
    async fn run_update(
        &self,
        caller: &Caller,
        sql: &str,
        update: impl Future<Output = Result<i64, FloeError>>,
    ) -> Result<i64, Status> {
        let running = self.admit(caller, sql).await?;
        let result = running.scope().run(update).await;
        running.end(result.as_ref().map(|n| *n as u64));
        result.map_err(status)
    }
}

/// Keeps `outcome` in `pending` for the DoGet of the ticket in the answer.
fn describe(
    pending: &PendingResults,
    outcome: Outcome,
    running: Option<Running>,
    descriptor: FlightDescriptor,
) -> Result<FlightInfo, Status> {
    let schema = match &outcome {
        Outcome::Query(query) => client_schema(&query.schema()),
        Outcome::Started(stream) => client_schema(&stream.schema()),
        Outcome::Done { rows, .. } => rows.schema(),
    };
    let handle = pending.insert(outcome, running);
    let ticket = TicketStatementQuery {
        statement_handle: handle.into(),
    };
    FlightInfo::new()
        .try_with_schema(&schema)
        .map_err(|e| Status::internal(e.to_string()))
        .map(|info| {
            info.with_descriptor(descriptor)
                .with_endpoint(
                    FlightEndpoint::new().with_ticket(Ticket::new(ticket.as_any().encode_to_vec())),
                )
                .with_ordered(true)
        })
}

/// A schema as Flight SQL carries it in prepared statement results.
fn schema_bytes(schema: &datafusion::arrow::datatypes::Schema) -> Result<bytes::Bytes, Status> {
    let message: IpcMessage = SchemaAsIpc::new(schema, &IpcWriteOptions::default())
        .try_into()
        .map_err(|e: datafusion::arrow::error::ArrowError| Status::internal(e.to_string()))?;
    Ok(message.0)
}

type BoxStream<T> = Pin<Box<dyn Stream<Item = Result<T, Status>> + Send + 'static>>;

#[tonic::async_trait]
impl FlightSqlService for FloeFlightService {
    type FlightService = FloeFlightService;

    async fn do_handshake(
        &self,
        request: Request<Streaming<HandshakeRequest>>,
    ) -> Result<Response<BoxStream<HandshakeResponse>>, Status> {
        let authorization = request
            .metadata()
            .get("authorization")
            .and_then(|value| value.to_str().ok())
            .map(str::to_string);
        // Checking a password takes tens of milliseconds of CPU: off the async workers.
        let authenticator = self.authenticator.clone();
        let login =
            tokio::task::spawn_blocking(move || authenticator.login(authorization.as_deref()))
                .await
                .map_err(|e| Status::internal(format!("login task failed: {e}")))?
                .map_err(status)?;
        let reply = HandshakeResponse {
            protocol_version: 0,
            payload: login.token.clone().into_bytes().into(),
        };
        let mut response: Response<BoxStream<HandshakeResponse>> =
            Response::new(Box::pin(futures::stream::iter([Ok(reply)])));
        set_bearer(&mut response, &login.token)?;
        Ok(response)
    }

    async fn get_flight_info_statement(
        &self,
        query: CommandStatementQuery,
        request: Request<FlightDescriptor>,
    ) -> Result<Response<FlightInfo>, Status> {
        let caller = self.caller(&request)?;
        let info = self
            .flight_info(&caller, &query.query, &[], request.into_inner())
            .await?;
        Ok(Response::new(info))
    }

    async fn get_flight_info_prepared_statement(
        &self,
        query: CommandPreparedStatementQuery,
        request: Request<FlightDescriptor>,
    ) -> Result<Response<FlightInfo>, Status> {
        let caller = self.caller(&request)?;
        let handle = self
            .prepared
            .get(&query.prepared_statement_handle, caller.access.user())?;
        let params = prepared::query_row(handle.parameters.as_ref())?;
        let descriptor = request.into_inner();
        let fresh = self
            .prepared
            .take_fresh_plan(&query.prepared_statement_handle, caller.access.user());
        let info = match fresh {
            Some(plan) => {
                let mut running = self.admit(&caller, &handle.sql).await?;
                running.scope().note_tables(plan.tables());
                running.release_place();
                self.describe(Outcome::Query(plan), Some(running), descriptor)?
            }
            None => {
                self.flight_info(&caller, &handle.sql, &params, descriptor)
                    .await?
            }
        };
        Ok(Response::new(info))
    }

    async fn do_get_statement(
        &self,
        ticket: TicketStatementQuery,
        _request: Request<Ticket>,
    ) -> Result<
        Response<<Self as arrow_flight::flight_service_server::FlightService>::DoGetStream>,
        Status,
    > {
        let taken = self
            .pending
            .take(&ticket.statement_handle)
            .map_err(status)?;
        let (streaming, mut running) = (taken.streaming, taken.running);
        let token = streaming.token.clone();
        let scope = running.as_ref().map(Running::scope).unwrap_or_default();
        let (schema, started) = match taken.outcome {
            Outcome::Done { rows, .. } => {
                let schema = rows.schema();
                let stream = futures::stream::iter([Ok(rows)]).boxed();
                let batches = until_cancelled(stream, streaming);
                return Ok(Response::new(encoded(batches.boxed(), schema)));
            }
            // Dropping the job's future cancels the Ballista job.
            Outcome::Query(query) => {
                let schema = client_schema(&query.schema());
                let run = async {
                    if let Some(running) = running.as_mut() {
                        running.take_place().await?;
                    }
                    self.engine.run_query(query).await
                };
                let started = tokio::select! {
                    stream = scope.clone().run(run) => stream,
                    _ = token.cancelled() => Err(results::cancelled()),
                    _ = scope.cancelled() => Err(statements::killed()),
                };
                (schema, started)
            }
            Outcome::Started(stream) => (client_schema(&stream.schema()), Ok(stream)),
        };
        let stream = match started {
            Ok(stream) => stream,
            Err(e) => {
                if let Some(running) = running {
                    running.end(Err(&e));
                }
                return Err(status(e));
            }
        };
        let target = schema.clone();
        let stream = stream
            .map_err(|e| FlightError::ExternalError(Box::new(FloeError::from(e))))
            .and_then(move |batch| {
                futures::future::ready(conform_batch(&batch, &target).map_err(FlightError::Arrow))
            });
        let batches = match running {
            Some(running) => counted(stream, running).boxed(),
            None => stream.boxed(),
        };
        let batches = until_cancelled(batches, streaming);
        Ok(Response::new(encoded(batches.boxed(), schema)))
    }

    async fn do_put_statement_update(
        &self,
        command: CommandStatementUpdate,
        request: Request<PeekableFlightDataStream>,
    ) -> Result<i64, Status> {
        let caller = self.caller(&request)?;
        self.update(&caller, &command.query, &[]).await
    }

    async fn do_put_prepared_statement_update(
        &self,
        command: CommandPreparedStatementUpdate,
        request: Request<PeekableFlightDataStream>,
    ) -> Result<i64, Status> {
        let caller = self.caller(&request)?;
        let handle = self
            .prepared
            .get(&command.prepared_statement_handle, caller.access.user())?;
        // executemany sends its rows here; bound parameters apply otherwise.
        let sent = prepared::read_parameters(request.into_inner()).await?;
        let rows = prepared::rows(sent.as_ref().or(handle.parameters.as_ref()))?;
        if rows.is_empty() {
            return self.update(&caller, &handle.sql, &[]).await;
        }
        let update = self.engine.execute_many(&caller, &handle.sql, &rows);
        self.run_update(&caller, &handle.sql, update).await
    }

    async fn do_put_statement_ingest(
        &self,
        command: CommandStatementIngest,
        request: Request<PeekableFlightDataStream>,
    ) -> Result<i64, Status> {
        if command.temporary {
            return Err(Status::unimplemented(
                "ingest into a temporary table is not supported",
            ));
        }
        if command.transaction_id.is_some() {
            return Err(Status::unimplemented("Floe has no transactions"));
        }
        let caller = self.caller(&request)?;
        let options = command.table_definition_options.unwrap_or_default();
        let if_missing = match TableNotExistOption::try_from(options.if_not_exist) {
            Ok(TableNotExistOption::Create) => IfMissing::Create,
            _ => IfMissing::Fail,
        };
        let if_exists = match TableExistsOption::try_from(options.if_exists) {
            Ok(TableExistsOption::Append) => IfExists::Append,
            Ok(TableExistsOption::Replace) => IfExists::Replace,
            _ => IfExists::Fail,
        };
        let upload = upload::upload_stream(request.into_inner())
            .await?
            .ok_or_else(|| Status::invalid_argument("ingest: no data was sent"))?;
        let what = format!(
            "INGEST INTO {}",
            [
                command.catalog.as_deref(),
                command.schema.as_deref(),
                Some(&command.table)
            ]
            .into_iter()
            .flatten()
            .collect::<Vec<_>>()
            .join(".")
        );
        let target = IngestTarget {
            catalog: command.catalog,
            schema: command.schema,
            table: command.table,
        };
        let ingest = self
            .engine
            .ingest(&caller, target, if_missing, if_exists, upload);
        self.run_update(&caller, &what, ingest).await
    }

    async fn do_put_prepared_statement_query(
        &self,
        query: CommandPreparedStatementQuery,
        request: Request<PeekableFlightDataStream>,
    ) -> Result<DoPutPreparedStatementResult, Status> {
        let caller = self.caller(&request)?;
        let handle = query.prepared_statement_handle;
        let parameters = prepared::read_parameters(request.into_inner()).await?;
        self.prepared
            .bind(&handle, caller.access.user(), parameters)?;
        Ok(DoPutPreparedStatementResult {
            prepared_statement_handle: Some(handle),
        })
    }

    async fn do_action_create_prepared_statement(
        &self,
        query: ActionCreatePreparedStatementRequest,
        request: Request<arrow_flight::Action>,
    ) -> Result<ActionCreatePreparedStatementResult, Status> {
        let caller = self.caller(&request)?;
        // Queries report their result schema; DDL and DML an empty one, which tells
        // JDBC-style clients to send them as updates.
        let prepared = match self.engine.prepare(&caller, &query.query).await {
            Ok(prepared) => prepared,
            Err(e) => {
                let statements = self.engine.statements();
                statements.failed_early(caller.access.user(), &query.query, &e);
                return Err(status(e));
            }
        };
        let dataset_schema = match prepared.kind {
            StatementKind::Query(schema) => schema_bytes(&client_schema(&schema))?,
            StatementKind::Update => Default::default(),
        };
        let parameter_schema = match prepared.parameters.fields().is_empty() {
            true => Default::default(),
            false => schema_bytes(&prepared.parameters)?,
        };
        Ok(ActionCreatePreparedStatementResult {
            prepared_statement_handle: self.prepared.create(
                caller.access.user(),
                &query.query,
                prepared.query,
            )?,
            dataset_schema,
            parameter_schema,
        })
    }

    async fn do_action_close_prepared_statement(
        &self,
        query: ActionClosePreparedStatementRequest,
        request: Request<arrow_flight::Action>,
    ) -> Result<(), Status> {
        let caller = self.caller(&request)?;
        self.prepared
            .close(&query.prepared_statement_handle, caller.access.user())
    }

    async fn do_action_fallback(
        &self,
        request: Request<arrow_flight::Action>,
    ) -> Result<
        Response<<Self as arrow_flight::flight_service_server::FlightService>::DoActionStream>,
        Status,
    > {
        match request.get_ref().r#type.as_str() {
            CANCEL_FLIGHT_INFO => {}
            session::SET_SESSION_OPTIONS => return self.set_session_options(request).await,
            session::GET_SESSION_OPTIONS => return self.get_session_options(request),
            session::CLOSE_SESSION => return self.close_session(request),
            other => {
                return Err(Status::unimplemented(format!(
                    "action {other} is not supported"
                )));
            }
        }
        let action = request.into_inner();
        // A Flight action: its body is the request itself, not an `Any`.
        let request = CancelFlightInfoRequest::decode(action.body)
            .map_err(|e| Status::invalid_argument(format!("{CANCEL_FLIGHT_INFO}: {e}")))?;
        let status = match self.cancel(request.info.as_ref()) {
            true => CancelStatus::Cancelled,
            false => CancelStatus::NotCancellable,
        };
        let result = CancelFlightInfoResult {
            status: status as i32,
        };
        Ok(action_result(result.encode_to_vec()))
    }

    async fn do_action_cancel_query(
        &self,
        query: ActionCancelQueryRequest,
        _request: Request<arrow_flight::Action>,
    ) -> Result<ActionCancelQueryResult, Status> {
        let info = FlightInfo::decode(query.info)
            .map_err(|e| Status::invalid_argument(format!("CancelQuery: {e}")))?;
        // CancelResult (not exported by arrow-flight) numbers its values as CancelStatus.
        let result = match self.cancel(Some(&info)) {
            true => CancelStatus::Cancelled,
            false => CancelStatus::NotCancellable,
        };
        Ok(ActionCancelQueryResult {
            result: result as i32,
        })
    }

    async fn get_flight_info_sql_info(
        &self,
        query: CommandGetSqlInfo,
        request: Request<FlightDescriptor>,
    ) -> Result<Response<FlightInfo>, Status> {
        let info = listing_info(query.as_any(), SqlInfoDataBuilder::schema(), request)?;
        Ok(Response::new(info))
    }

    async fn do_get_sql_info(
        &self,
        query: CommandGetSqlInfo,
        request: Request<Ticket>,
    ) -> Result<Response<DoGetStream>, Status> {
        let caller = self.caller(&request)?;
        let info = match caller.access.can_write_somewhere() {
            true => &self.sql_info,
            false => &self.read_only_sql_info,
        };
        let batch = query
            .into_builder(info)
            .build()
            .map_err(|e| Status::internal(e.to_string()))?;
        Ok(one_batch(batch))
    }

    async fn get_flight_info_catalogs(
        &self,
        query: CommandGetCatalogs,
        request: Request<FlightDescriptor>,
    ) -> Result<Response<FlightInfo>, Status> {
        let info = listing_info(query.as_any(), &metadata::catalogs_schema(), request)?;
        Ok(Response::new(info))
    }

    async fn do_get_catalogs(
        &self,
        query: CommandGetCatalogs,
        _request: Request<Ticket>,
    ) -> Result<Response<DoGetStream>, Status> {
        Ok(one_batch(
            metadata::catalogs(&self.engine, query).map_err(status)?,
        ))
    }

    async fn get_flight_info_schemas(
        &self,
        query: CommandGetDbSchemas,
        request: Request<FlightDescriptor>,
    ) -> Result<Response<FlightInfo>, Status> {
        let info = listing_info(query.as_any(), &metadata::db_schemas_schema(), request)?;
        Ok(Response::new(info))
    }

    async fn do_get_schemas(
        &self,
        query: CommandGetDbSchemas,
        request: Request<Ticket>,
    ) -> Result<Response<DoGetStream>, Status> {
        let caller = self.caller(&request)?;
        let batch = metadata::db_schemas(&self.engine, &caller, query).await;
        Ok(one_batch(batch.map_err(status)?))
    }

    async fn get_flight_info_tables(
        &self,
        query: CommandGetTables,
        request: Request<FlightDescriptor>,
    ) -> Result<Response<FlightInfo>, Status> {
        let schema = metadata::tables_schema(query.include_schema);
        let info = listing_info(query.as_any(), &schema, request)?;
        Ok(Response::new(info))
    }

    async fn do_get_tables(
        &self,
        query: CommandGetTables,
        request: Request<Ticket>,
    ) -> Result<Response<DoGetStream>, Status> {
        let caller = self.caller(&request)?;
        let batch = metadata::tables(&self.engine, &caller, query).await;
        Ok(one_batch(batch.map_err(status)?))
    }

    async fn get_flight_info_table_types(
        &self,
        query: CommandGetTableTypes,
        request: Request<FlightDescriptor>,
    ) -> Result<Response<FlightInfo>, Status> {
        let info = listing_info(query.as_any(), &metadata::table_types_schema(), request)?;
        Ok(Response::new(info))
    }

    async fn do_get_table_types(
        &self,
        query: CommandGetTableTypes,
        _request: Request<Ticket>,
    ) -> Result<Response<DoGetStream>, Status> {
        Ok(one_batch(metadata::table_types(query).map_err(status)?))
    }

    async fn get_flight_info_primary_keys(
        &self,
        query: CommandGetPrimaryKeys,
        request: Request<FlightDescriptor>,
    ) -> Result<Response<FlightInfo>, Status> {
        let info = listing_info(query.as_any(), &metadata::primary_keys_schema(), request)?;
        Ok(Response::new(info))
    }

    async fn do_get_primary_keys(
        &self,
        _query: CommandGetPrimaryKeys,
        _request: Request<Ticket>,
    ) -> Result<Response<DoGetStream>, Status> {
        Ok(one_batch(RecordBatch::new_empty(
            metadata::primary_keys_schema(),
        )))
    }

    async fn get_flight_info_exported_keys(
        &self,
        query: CommandGetExportedKeys,
        request: Request<FlightDescriptor>,
    ) -> Result<Response<FlightInfo>, Status> {
        let info = listing_info(query.as_any(), &metadata::foreign_keys_schema(), request)?;
        Ok(Response::new(info))
    }

    async fn do_get_exported_keys(
        &self,
        _query: CommandGetExportedKeys,
        _request: Request<Ticket>,
    ) -> Result<Response<DoGetStream>, Status> {
        Ok(one_batch(RecordBatch::new_empty(
            metadata::foreign_keys_schema(),
        )))
    }

    async fn get_flight_info_imported_keys(
        &self,
        query: CommandGetImportedKeys,
        request: Request<FlightDescriptor>,
    ) -> Result<Response<FlightInfo>, Status> {
        let info = listing_info(query.as_any(), &metadata::foreign_keys_schema(), request)?;
        Ok(Response::new(info))
    }

    async fn do_get_imported_keys(
        &self,
        _query: CommandGetImportedKeys,
        _request: Request<Ticket>,
    ) -> Result<Response<DoGetStream>, Status> {
        Ok(one_batch(RecordBatch::new_empty(
            metadata::foreign_keys_schema(),
        )))
    }

    async fn get_flight_info_cross_reference(
        &self,
        query: CommandGetCrossReference,
        request: Request<FlightDescriptor>,
    ) -> Result<Response<FlightInfo>, Status> {
        let info = listing_info(query.as_any(), &metadata::foreign_keys_schema(), request)?;
        Ok(Response::new(info))
    }

    async fn do_get_cross_reference(
        &self,
        _query: CommandGetCrossReference,
        _request: Request<Ticket>,
    ) -> Result<Response<DoGetStream>, Status> {
        Ok(one_batch(RecordBatch::new_empty(
            metadata::foreign_keys_schema(),
        )))
    }

    async fn get_flight_info_xdbc_type_info(
        &self,
        query: CommandGetXdbcTypeInfo,
        request: Request<FlightDescriptor>,
    ) -> Result<Response<FlightInfo>, Status> {
        let schema = query.into_builder(&self.xdbc_type_info).schema();
        let info = listing_info(query.as_any(), &schema, request)?;
        Ok(Response::new(info))
    }

    async fn do_get_xdbc_type_info(
        &self,
        query: CommandGetXdbcTypeInfo,
        _request: Request<Ticket>,
    ) -> Result<Response<DoGetStream>, Status> {
        let batch = query
            .into_builder(&self.xdbc_type_info)
            .build()
            .map_err(|e| Status::internal(e.to_string()))?;
        Ok(one_batch(batch))
    }

    async fn register_sql_info(&self, _id: i32, _result: &SqlInfo) {}
}

/// Ends `batches` with CANCELLED once CancelFlightInfo names its result; the result
/// stays registered as streaming until the stream ends.
fn until_cancelled(
    batches: futures::stream::BoxStream<'static, Result<RecordBatch, FlightError>>,
    streaming: results::Streaming,
) -> impl Stream<Item = Result<RecordBatch, FlightError>> + Send + 'static {
    let token = streaming.token.clone();
    let end = futures::stream::once(async move {
        let cancelled = streaming.token.is_cancelled();
        drop(streaming);
        cancelled.then(|| FlightError::ExternalError(Box::new(results::cancelled())))
    })
    .filter_map(|error| futures::future::ready(error.map(Err)));
    batches.take_until(token.cancelled_owned()).chain(end)
}

/// `batches`, counted into their statement, which ends with the stream (dropped
/// early: the client went away or cancelled).
fn counted(
    batches: impl Stream<Item = Result<RecordBatch, FlightError>> + Send + 'static,
    running: Running,
) -> impl Stream<Item = Result<RecordBatch, FlightError>> + Send + 'static {
    futures::stream::unfold(
        (Box::pin(batches), Some(running)),
        |(mut batches, mut running)| async move {
            let next = batches.next().await;
            match &next {
                Some(Ok(batch)) => {
                    if let Some(running) = running.as_mut() {
                        let bytes = batch.get_array_memory_size() as u64;
                        running.returned(batch.num_rows() as u64, bytes);
                    }
                }
                Some(Err(e)) => {
                    if let Some(running) = running.take() {
                        running.end(Err(&flight_error_floe(e)));
                    }
                }
                None => {
                    if let Some(running) = running.take() {
                        running.end(Ok(0));
                    }
                }
            }
            next.map(|item| (item, (batches, running)))
        },
    )
}

/// The Floe error inside a stream's error, for the query log.
fn flight_error_floe(e: &FlightError) -> FloeError {
    match e {
        FlightError::ExternalError(inner) => match inner.downcast_ref::<FloeError>() {
            Some(floe) => floe.clone(),
            None => FloeError::internal(inner.to_string()),
        },
        FlightError::Tonic(status) => FloeError::internal(status.message().to_string()),
        other => FloeError::internal(other.to_string()),
    }
}

type DoGetStream =
    <FloeFlightService as arrow_flight::flight_service_server::FlightService>::DoGetStream;

/// A FlightInfo whose one ticket is the (`Any`-packed) listing command itself.
fn listing_info(
    command: arrow_flight::sql::Any,
    schema: &datafusion::arrow::datatypes::Schema,
    request: Request<FlightDescriptor>,
) -> Result<FlightInfo, Status> {
    let ticket = Ticket::new(command.encode_to_vec());
    Ok(FlightInfo::new()
        .try_with_schema(schema)
        .map_err(|e| Status::internal(e.to_string()))?
        .with_endpoint(FlightEndpoint::new().with_ticket(ticket))
        .with_descriptor(request.into_inner()))
}

type DoActionStream =
    <FloeFlightService as arrow_flight::flight_service_server::FlightService>::DoActionStream;

/// A DoAction answer of one result.
fn action_result(body: Vec<u8>) -> Response<DoActionStream> {
    let body = arrow_flight::Result::new(body);
    Response::new(Box::pin(futures::stream::iter([Ok(body)])))
}

/// Hands the client a bearer token to send from now on.
fn set_bearer<T>(response: &mut Response<T>, token: &str) -> Result<(), Status> {
    let value = MetadataValue::try_from(format!("Bearer {token}"))
        .map_err(|_| Status::internal("a token that is not a header value"))?;
    response.metadata_mut().insert("authorization", value);
    Ok(())
}

/// Batches encoded as Flight data; the schema goes first even when there are none.
fn encoded(
    batches: futures::stream::BoxStream<'static, Result<RecordBatch, FlightError>>,
    schema: datafusion::arrow::datatypes::SchemaRef,
) -> DoGetStream {
    let encoder = FlightDataEncoderBuilder::new().with_schema(schema);
    Box::pin(encoder.build(batches).map_err(flight_error_status))
}

fn one_batch(batch: RecordBatch) -> Response<DoGetStream> {
    let schema = batch.schema();
    Response::new(encoded(futures::stream::iter([Ok(batch)]).boxed(), schema))
}

fn flight_error_status(e: FlightError) -> Status {
    match e {
        FlightError::ExternalError(inner) => match inner.downcast::<FloeError>() {
            Ok(floe) => status(*floe),
            Err(other) => Status::internal(other.to_string()),
        },
        FlightError::Tonic(status) => *status,
        other => Status::internal(other.to_string()),
    }
}

/// Serves Flight SQL on `addr` until `shutdown` completes; in-flight calls finish first.
/// Calls are authenticated as `auth` says (`None`: everyone is the anonymous user).
pub async fn serve(
    engine: Arc<Engine>,
    addr: SocketAddr,
    auth: Option<&AuthConfig>,
    tls: Option<&TlsConfig>,
    shutdown: impl std::future::Future<Output = ()> + Send,
) -> Result<(), FloeError> {
    let authenticator = Arc::new(Authenticator::new(auth)?);
    let flight = FloeFlightService::new(engine, authenticator.clone())?;
    let service = FlightServiceServer::new(poll::FloeFlight(Arc::new(flight)))
        .max_decoding_message_size(64 * 1024 * 1024)
        .max_encoding_message_size(64 * 1024 * 1024);
    let service = auth::Authenticated::new(service, authenticator);
    let mut builder = tonic::transport::Server::builder();
    if let Some(tls) = tls {
        builder = builder
            .tls_config(server_tls(tls)?)
            .map_err(|e| FloeError::invalid(format!("tls: {e}")))?;
    }
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| FloeError::invalid(format!("flight_addr: cannot listen on {addr}: {e}")))?;
    let scheme = if tls.is_some() { "grpc+tls" } else { "grpc" };
    let users = auth.map_or(0, |auth| auth.users.len());
    tracing::info!(
        authentication = auth.is_some(),
        users,
        "Flight SQL listening on {scheme}://{addr}"
    );
    println!("Floe is serving Flight SQL on {scheme}://{addr}");
    let stopping = Arc::new(tokio::sync::Notify::new());
    let signal = {
        let stopping = stopping.clone();
        async move {
            shutdown.await;
            stopping.notify_one();
        }
    };
    let server = builder.add_service(service).serve_with_incoming_shutdown(
        // Without TCP_NODELAY every small response waits out a delayed ACK (~40 ms).
        TcpIncoming::from(listener).with_nodelay(Some(true)),
        signal,
    );
    // In-flight calls get a grace period after the signal, not forever.
    let grace = async {
        stopping.notified().await;
        tokio::time::sleep(SHUTDOWN_GRACE).await;
    };
    tokio::select! {
        result = server => result.map_err(|e| FloeError::internal(format!("Flight SQL server: {e}"))),
        _ = grace => {
            tracing::warn!("statements still running after {SHUTDOWN_GRACE:?}; stopping anyway");
            Ok(())
        }
    }
}

/// The listener's certificate and, for mutual TLS, the authority client certificates
/// must be signed by.
fn server_tls(tls: &TlsConfig) -> Result<tonic::transport::ServerTlsConfig, FloeError> {
    let read = |what: &str, path: &std::path::Path| {
        std::fs::read(path)
            .map_err(|e| FloeError::invalid(format!("{what}: cannot read {}: {e}", path.display())))
    };
    let identity = tonic::transport::Identity::from_pem(
        read("tls_cert", &tls.cert)?,
        read("tls_key", &tls.key)?,
    );
    let mut config = tonic::transport::ServerTlsConfig::new().identity(identity);
    if let Some(ca) = &tls.client_ca {
        config = config.client_ca_root(tonic::transport::Certificate::from_pem(read(
            "tls_client_ca",
            ca,
        )?));
    }
    Ok(config)
}

/// How long in-flight statements may run on after SIGINT/SIGTERM.
const SHUTDOWN_GRACE: std::time::Duration = std::time::Duration::from_secs(30);
