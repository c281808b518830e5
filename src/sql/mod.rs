//! Statement routing: DDL runs against the Iceberg catalog here; queries and INSERTs
//! are planned on a per-statement context and run as Ballista jobs; writes are
//! committed here, once.

mod aggregate_filters;
pub mod alter;
pub mod alter_forms;
mod calls;
mod chains;
mod correlated_in;
mod date_parts;
pub mod ddl;
pub mod dialect;
mod distant_references;
mod distinct_order;
mod expr_rewrite;
mod fetch;
mod formats;
mod grouping_sets;
mod having_joins;
mod inequality_subqueries;
pub mod ingest;
mod intervals;
mod lateral;
pub mod like;
pub mod merge;
pub mod metadata;
mod numbers;
mod outer_names;
mod output_names;
pub mod params;
pub mod parse;
mod positional;
pub mod procedures;
mod recursive;
pub mod refs;
pub mod resolve;
mod row_in;
pub mod row_level;
pub mod running;
mod scalar_subqueries;
pub mod session;
mod set_operations;
mod shared_subplans;
mod show;
mod show_create;
mod small;
mod subqueries_below;
mod subquery_names;
mod subquery_values;
mod subscripts;
pub mod time_travel;
pub mod types;
mod using_joins;
pub mod uuids;
mod windows;

use std::sync::Arc;
use std::time::Duration;

use ballista_core::serde::protobuf::PartitionLocation;
use datafusion::arrow::array::{ArrayRef, Int64Array, RecordBatch, StringArray};
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::common::tree_node::{Transformed, TreeNode, TreeNodeRecursion};
use datafusion::common::{DFSchema, ParamValues, ScalarValue};
use datafusion::execution::SendableRecordBatchStream;
use datafusion::execution::runtime_env::{RuntimeEnv, RuntimeEnvBuilder};
use datafusion::execution::{SessionState, TaskContext};
use datafusion::logical_expr::dml::InsertOp;
use datafusion::logical_expr::{DmlStatement, LogicalPlan, Values, WriteOp};
use datafusion::physical_plan::execute_stream;
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::prelude::SessionContext;
use datafusion::sql::parser::Statement as DfStatement;
use datafusion::sql::sqlparser::ast::{
    CreateTable, Function, Merge, ObjectName, ObjectType, ShowCreateObject, Statement,
};
use futures::TryStreamExt;

use crate::auth::Access;
use crate::catalog::DEFAULT_NAMESPACE;
use crate::catalog::commit::FloeCatalog;
use crate::cluster::{Cluster, Deadline};
use crate::error::{ErrorKind, FloeError, Result};
use crate::ops::metrics::metrics;
use crate::ops::statements::{Statements, note_tables};
use crate::table::commit::{WrittenFile, written_files};
use crate::table::overwrite::{Overwrite, Removal};
use crate::table::write::descriptor_schema;
use crate::table::write_protocol::{WriteCommit, commit_write, discard_writes};
use alter_forms::AlterForm;
use ddl::Names;
use parse::parse;
use resolve::{Resolution, StatementCatalog, resolve};

/// Runs SQL statements against one Iceberg catalog on one cluster.
#[derive(Clone)]
pub struct Engine {
    catalog: Arc<dyn FloeCatalog>,
    catalog_name: String,
    cluster: Cluster,
    statement_timeout: Option<Duration>,
    statements: Arc<Statements>,
    /// Queries whose scans read at most this many bytes run on the coordinator.
    local_query_max_bytes: u64,
    /// What those queries run with: a memory pool as large as an in-process executor's,
    /// shared by all of them.
    local_runtime: Option<Arc<RuntimeEnv>>,
}

/// Who runs a statement: what they may read and change, and the schema their
/// unqualified table names mean (their session's, `default` unless they chose one).
#[derive(Debug, Clone)]
pub struct Caller {
    pub access: Arc<Access>,
    pub schema: String,
    /// Where `USE` sets the schema; `None` for Floe's own statements.
    pub session: Option<Arc<dyn session::SessionSchema>>,
}

impl Caller {
    /// Every grant, in the default schema: callers when authentication is off.
    pub fn unrestricted() -> Self {
        Self {
            access: Arc::new(Access::unrestricted()),
            schema: DEFAULT_NAMESPACE.to_string(),
            session: None,
        }
    }
}

/// A statement ready to produce rows.
pub enum Outcome {
    /// A query, planned and pinned to its snapshots, not yet run.
    Query(Box<Query>),
    /// A statement that already ran; `rows` is what it returns (nothing for DDL, the
    /// row count for INSERT).
    Done { rows: RecordBatch, affected: i64 },
    /// A query whose job runs already (started by PollFlightInfo): its rows as they come.
    Started(SendableRecordBatchStream),
}

impl Outcome {
    /// A statement that returns nothing and changes no row (DDL, `USE`).
    fn nothing() -> Self {
        Outcome::Done {
            rows: RecordBatch::new_empty(Arc::new(Schema::empty())),
            affected: 0,
        }
    }

    /// An update's outcome: it affected `count` rows.
    fn count(count: u64) -> Result<Self> {
        Ok(Outcome::Done {
            rows: count_batch(count)?,
            affected: count as i64,
        })
    }

    /// The rows a statement that ran affected or returned (for the query log).
    pub fn rows(&self) -> u64 {
        match self {
            Outcome::Done { rows, affected } => (*affected).max(rows.num_rows() as i64) as u64,
            Outcome::Query(_) | Outcome::Started(_) => 0,
        }
    }

    /// The rows an update affected; a query has no such count.
    pub fn affected(self) -> Result<i64> {
        match self {
            Outcome::Done { affected, .. } => Ok(affected),
            Outcome::Query(_) | Outcome::Started(_) => Err(FloeError::invalid(
                "a query was sent as an update; execute it as a query",
            )),
        }
    }
}

pub struct Query {
    ctx: Arc<SessionContext>,
    catalog: Arc<StatementCatalog>,
    plan: LogicalPlan,
    /// Runs on the coordinator: information_schema and metadata table queries (their
    /// tables are not distributable), and constant queries (`SELECT 1`), which a job
    /// would only slow.
    local: bool,
    /// Of the rows it answers (see [`Query::new`]).
    schema: SchemaRef,
}

impl Query {
    /// `plan` to run, with the schema of the rows it answers. That is the schema of the
    /// plan *analyzed*: DataFusion's SQL planner gives a `CASE` the type of its first
    /// branch and a `UNION` its first input's types, and only its analyzer coerces them
    /// to a common type, so rows cast to the planner's schema lost their fractions
    /// (`CASE WHEN k < 2 THEN 1 ELSE 2.5 END` answered 2).
    fn new(
        ctx: Arc<SessionContext>,
        catalog: Arc<StatementCatalog>,
        plan: LogicalPlan,
        local: bool,
    ) -> Result<Query> {
        let analyzed = {
            let state = ctx.state_ref();
            let state = state.read();
            state
                .analyzer()
                .execute_and_check(plan.clone(), state.config_options(), |_, _| {})?
        };
        Ok(Query {
            schema: Arc::new(analyzed.schema().as_arrow().clone()),
            ctx,
            catalog,
            plan,
            local,
        })
    }

    pub fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    /// The tables the query reads, as `namespace.table`.
    pub fn tables(&self) -> Vec<String> {
        self.catalog.table_names()
    }
}

/// What preparing a statement tells a client before it runs.
pub struct Prepared {
    pub kind: StatementKind,
    /// One field per parameter, `$1` first; `Null` where the type is not known.
    pub parameters: SchemaRef,
    /// The query as planned now, when it takes no parameters: its first run may follow
    /// at once (see `flight::prepared`).
    pub query: Option<Box<Query>>,
}

pub enum StatementKind {
    Query(SchemaRef),
    Update,
}

impl Engine {
    pub fn new(
        catalog: Arc<dyn FloeCatalog>,
        catalog_name: String,
        cluster: Cluster,
        statement_timeout: Option<Duration>,
        statements: Arc<Statements>,
    ) -> Self {
        Self {
            catalog,
            catalog_name,
            cluster,
            statement_timeout,
            statements,
            local_query_max_bytes: 0,
            local_runtime: None,
        }
    }

    /// Runs queries whose scans read at most `bytes` on the coordinator, without a job
    /// (see `small`), all of them within `memory` bytes if given; `bytes` 0: never.
    pub fn with_local_queries(mut self, bytes: u64, memory: Option<u64>) -> Result<Self> {
        self.local_query_max_bytes = bytes;
        if let Some(memory) = memory {
            let runtime = RuntimeEnvBuilder::new()
                .with_memory_limit(memory as usize, 1.0)
                .build_arc()?;
            self.local_runtime = Some(runtime);
        }
        Ok(self)
    }

    /// The statements running now.
    pub fn statements(&self) -> &Arc<Statements> {
        &self.statements
    }

    /// The metrics, with the cluster's and the statements' gauges read now.
    pub async fn metrics_text(&self) -> String {
        metrics().render(self.cluster.gauges().await, self.statements.gauges())
    }

    /// How far the jobs of a statement have got (finished tasks of all their stages,
    /// 0 to 1); `None` while none of them is running.
    pub async fn progress(&self, jobs: &[String]) -> Option<f64> {
        let mut counts = crate::cluster::TaskCounts::default();
        let mut any = false;
        for job in jobs {
            if let Some(c) = self.cluster.task_counts(job).await {
                any = true;
                counts.done += c.done;
                counts.total += c.total;
            }
        }
        any.then(|| counts.fraction())
    }

    /// Whether statements can run: an executor is alive and the catalog answers.
    pub async fn readiness(&self) -> std::result::Result<(), String> {
        if self.cluster.registered_executors().await == 0 {
            return Err("no executor is alive".to_string());
        }
        let listing = self.catalog.list_namespaces(None);
        match tokio::time::timeout(READINESS_TIMEOUT, listing).await {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(e)) => Err(format!("the catalog does not answer: {e}")),
            Err(_) => Err(format!(
                "the catalog did not answer within {} s",
                READINESS_TIMEOUT.as_secs()
            )),
        }
    }

    /// Runs a statement's job on the cluster, within the statement timeout (past it,
    /// the job is cancelled).
    async fn run_job(
        &self,
        ctx: &Arc<SessionContext>,
        plan: &LogicalPlan,
        name: &str,
        catalog: &StatementCatalog,
    ) -> Result<Vec<PartitionLocation>> {
        self.within_timeout(self.cluster.run_job(ctx, plan, name))
            .await
            .map_err(|e| planning_failure(ctx, plan, catalog, e))
    }

    /// `job`, cancelled (dropped) past the statement timeout.
    async fn within_timeout<T>(&self, job: impl Future<Output = Result<T>>) -> Result<T> {
        match self.statement_timeout {
            None => job.await,
            Some(limit) => tokio::time::timeout(limit, job)
                .await
                .unwrap_or_else(|_| Err(FloeError::statement_timeout(limit))),
        }
    }

    fn names<'a>(&'a self, caller: &'a Caller) -> Names<'a> {
        Names {
            catalog_name: &self.catalog_name,
            default_namespace: &caller.schema,
            access: &caller.access,
        }
    }

    /// Classifies a statement without running it (queries are planned for their
    /// schema), and names the types of its parameters (`$1`, `?`).
    pub async fn prepare(&self, caller: &Caller, sql: &str) -> Result<Prepared> {
        if running::is_show_statements(sql) {
            return Ok(Prepared {
                kind: StatementKind::Query(running::statements_schema()),
                parameters: Arc::new(Schema::empty()),
                query: None,
            });
        }
        if alter_forms::parse_alter_form(sql)?.is_some() {
            return Ok(Prepared {
                kind: StatementKind::Update,
                parameters: Arc::new(Schema::empty()),
                query: None,
            });
        }
        let statement = parse_statement(sql)?;
        if as_show_create_table(&statement).is_some() {
            return Ok(Prepared {
                kind: StatementKind::Query(show_create::result_schema()),
                parameters: Arc::new(Schema::empty()),
                query: None,
            });
        }
        if as_ddl(&statement).is_some()
            || matches!(
                as_sql(&statement),
                Some(Statement::Kill { .. } | Statement::Use(_))
            )
            || as_merge(&statement).is_some()
            || as_call(&statement).is_some()
        {
            return Ok(Prepared {
                kind: StatementKind::Update,
                parameters: Arc::new(Schema::empty()),
                query: None,
            });
        }
        let (_, planned, parameters) = self.plan(caller, statement, &[]).await?;
        let (kind, query) = match planned {
            Planned::Query(query) => {
                let schema = query.schema();
                let reusable = parameters.fields().is_empty().then_some(query);
                (StatementKind::Query(schema), reusable)
            }
            Planned::Write(..) => (StatementKind::Update, None),
        };
        Ok(Prepared {
            kind,
            parameters,
            query,
        })
    }

    /// Runs DDL and INSERT to completion; plans queries (run them with
    /// [`Self::run_query`]). `params` are the values of `$1`, `$2`, … (or `?`).
    pub async fn execute(
        &self,
        caller: &Caller,
        sql: &str,
        params: &[ScalarValue],
    ) -> Result<Outcome> {
        if running::is_show_statements(sql) {
            let rows = self.show_statements(caller).await?;
            return Ok(Outcome::Done { rows, affected: 0 });
        }
        if let Some(form) = alter_forms::parse_alter_form(sql)? {
            self.run_alter_form(caller, &form).await?;
            return Ok(Outcome::Done {
                rows: RecordBatch::new_empty(Arc::new(Schema::empty())),
                affected: 0,
            });
        }
        self.execute_statement(caller, parse_statement(sql)?, params)
            .await
    }

    /// Runs an update once per parameter row (`executemany`); returns the rows affected
    /// in all. `INSERT … VALUES (…)` takes every row in one statement: one job, one
    /// commit, one snapshot.
    pub async fn execute_many(
        &self,
        caller: &Caller,
        sql: &str,
        rows: &[Vec<ScalarValue>],
    ) -> Result<i64> {
        let mut statement = parse_statement(sql)?;
        params::number_placeholders(&mut statement);
        if let Some(params) = params::expand_insert_values(&mut statement, rows) {
            return self
                .execute_statement(caller, statement, &params)
                .await?
                .affected();
        }
        let mut affected = 0;
        for row in rows {
            affected += self
                .execute_statement(caller, statement.clone(), row)
                .await?
                .affected()?;
        }
        Ok(affected)
    }

    async fn execute_statement(
        &self,
        caller: &Caller,
        statement: DfStatement,
        params: &[ScalarValue],
    ) -> Result<Outcome> {
        if let Some(Statement::Kill { id, .. }) = as_sql(&statement) {
            self.kill(caller, *id)?;
            return Outcome::count(1);
        }
        if let Some(name) = as_show_create_table(&statement) {
            let rows = self.show_create_table(caller, name).await?;
            return Ok(Outcome::Done { rows, affected: 0 });
        }
        if let Some(Statement::Use(target)) = as_sql(&statement) {
            self.use_schema(caller, target).await?;
            return Ok(Outcome::nothing());
        }
        if let Some(call) = as_call(&statement) {
            if !params.is_empty() {
                return Err(FloeError::invalid("CALL takes no parameters"));
            }
            let (engine, caller, call) = (self.clone(), caller.clone(), call.clone());
            let rows = to_the_end(async move { engine.call(&caller, &call).await }).await?;
            return Ok(Outcome::Done { rows, affected: 0 });
        }
        if let Some(merge) = as_merge(&statement) {
            let (engine, caller, merge, params) =
                (self.clone(), caller.clone(), merge.clone(), params.to_vec());
            let count =
                to_the_end(async move { engine.merge(&caller, &merge, &params).await }).await?;
            return Outcome::count(count);
        }
        if let Some(create) = as_create_table_as(&statement) {
            let count = self.create_table_as(caller, create, params).await?;
            return Outcome::count(count);
        }
        if let Some(ddl) = as_ddl(&statement) {
            if !params.is_empty() {
                return Err(FloeError::invalid("DDL statements take no parameters"));
            }
            self.execute_ddl(caller, ddl).await?;
            return Ok(Outcome::nothing());
        }
        match self.plan(caller, statement, params).await? {
            (_, Planned::Query(query), _) => Ok(Outcome::Query(query)),
            (catalog, Planned::Write(ctx, dml), _) => {
                let engine = self.clone();
                let count = to_the_end(async move {
                    match dml.op {
                        WriteOp::Delete | WriteOp::Update => {
                            engine.run_row_level(&ctx, dml, &catalog).await
                        }
                        _ => engine.run_insert(&ctx, dml, &catalog).await,
                    }
                })
                .await?;
                Outcome::count(count)
            }
        }
    }

    /// Runs a planned query and streams its result batch by batch.
    pub async fn run_query(&self, query: Box<Query>) -> Result<SendableRecordBatchStream> {
        let schema = query.schema();
        if query.local {
            let frame = query.ctx.execute_logical_plan(query.plan).await?;
            return Ok(frame.execute_stream().await?);
        }
        if let LogicalPlan::Analyze(analyze) = &query.plan {
            // The jobs that run first are not shown; the statement's job reads what they
            // computed.
            let explain = async {
                let input = self
                    .with_first_jobs_computed(&query.ctx, &analyze.input, None)
                    .await?;
                self.cluster.explain_analyze(&query.ctx, &input).await
            };
            let rows = self
                .within_timeout(explain)
                .await
                .map_err(|e| planning_failure(&query.ctx, &analyze.input, &query.catalog, e))?;
            let batch = explain_batch(schema.clone(), rows)?;
            let stream = futures::stream::iter([Ok(batch)]);
            return Ok(Box::pin(RecordBatchStreamAdapter::new(schema, stream)));
        }
        if let Some(stream) = self.run_if_small(&query).await? {
            return Ok(stream);
        }
        if crate::cluster::recurses(&query.plan) {
            let state = query.ctx.state();
            let plan = state
                .create_physical_plan(&query.plan)
                .await
                .map_err(|e| planning_failure(&query.ctx, &query.plan, &query.catalog, e.into()))?;
            let task = self.coordinator_task(&state);
            return recursive::run_on_coordinator(plan, task, self.statement_timeout);
        }
        // One deadline for the statement's jobs.
        let deadline = self.statement_timeout.map(Deadline::after);
        let plan = self
            .with_first_jobs_computed(&query.ctx, &query.plan, deadline)
            .await
            .map_err(|e| planning_failure(&query.ctx, &query.plan, &query.catalog, e))?;
        self.cluster
            .run_query(&query.ctx, &plan, schema, deadline)
            .await
            .map_err(|e| planning_failure(&query.ctx, &plan, &query.catalog, e))
    }

    /// `plan` with what jobs of their own compute first in its place: a repeated
    /// subquery or join, then the `HAVING` subqueries its joins filter on.
    async fn with_first_jobs_computed(
        &self,
        ctx: &Arc<SessionContext>,
        plan: &LogicalPlan,
        deadline: Option<Deadline>,
    ) -> Result<LogicalPlan> {
        let shared = self
            .with_shared_subquery_computed(ctx, plan, deadline)
            .await?;
        let plan = shared.as_ref().unwrap_or(plan);
        let filtered = self
            .with_having_subqueries_computed(ctx, plan, deadline)
            .await?;
        Ok(filtered.unwrap_or_else(|| plan.clone()))
    }

    /// Runs `query` on the coordinator, without a job, if it is small (see `small`).
    async fn run_if_small(&self, query: &Query) -> Result<Option<SendableRecordBatchStream>> {
        // A join rules the query out before the physical plan would.
        if self.local_query_max_bytes == 0
            || matches!(query.plan, LogicalPlan::Explain(_))
            || !small::may_be_small(&query.plan)
        {
            return Ok(None);
        }
        // One copy of the session state for both (each copy copies its function registries).
        let state = query.ctx.state();
        let planned = state.create_physical_plan(&query.plan).await;
        let plan = planned
            .map_err(|e| planning_failure(&query.ctx, &query.plan, &query.catalog, e.into()))?;
        if !small::is_small(&plan, self.local_query_max_bytes) {
            return Ok(None);
        }
        Ok(Some(execute_stream(plan, self.coordinator_task(&state))?))
    }

    /// A task context for running a plan on the coordinator, within its memory limit
    /// for queries run there, if one is set.
    fn coordinator_task(&self, state: &SessionState) -> Arc<TaskContext> {
        let task = TaskContext::from(state);
        match &self.local_runtime {
            Some(runtime) => Arc::new(task.with_runtime(runtime.clone())),
            None => Arc::new(task),
        }
    }

    async fn run_alter_form(&self, caller: &Caller, form: &AlterForm) -> Result<()> {
        let (catalog, names) = (self.catalog.as_ref(), self.names(caller));
        match form {
            AlterForm::Ref(statement) => self.run_ref_statement(caller, statement).await,
            AlterForm::Partitioning { table, change } => {
                alter::evolve_partitioning(catalog, &names, table, change).await
            }
            AlterForm::UnsetProperties {
                table,
                if_exists,
                keys,
            } => alter::unset_properties(catalog, &names, table, *if_exists, keys).await,
            AlterForm::NestedColumn { table, change } => {
                alter::alter_nested_column(catalog, &names, table, change).await
            }
        }
    }

    async fn execute_ddl(&self, caller: &Caller, ddl: &Statement) -> Result<()> {
        let catalog = self.catalog.as_ref();
        let names = self.names(caller);
        match ddl {
            Statement::CreateSchema {
                schema_name,
                if_not_exists,
                ..
            } => ddl::create_schema(catalog, &names, schema_name, *if_not_exists).await,
            Statement::CreateTable(create) => ddl::create_table(catalog, &names, create).await,
            Statement::AlterTable(alter) => alter::alter_table(catalog, &names, alter).await,
            Statement::Drop {
                object_type: ObjectType::Schema,
                if_exists,
                names: schemas,
                cascade,
                ..
            } => ddl::drop_schemas(catalog, &names, schemas, *if_exists, *cascade).await,
            Statement::Drop {
                object_type: ObjectType::Table,
                if_exists,
                names: tables,
                ..
            } => ddl::drop_tables(catalog, &names, tables, *if_exists).await,
            _ => Err(FloeError::unimplemented(format!(
                "statement not supported: {ddl}"
            ))),
        }
    }

    /// `CREATE TABLE t … AS SELECT …`: creates `t` with the query's columns, then fills
    /// it as `INSERT INTO t SELECT …` would. If the insert fails, `t` is dropped again:
    /// the statement leaves a table only with its rows. Returns the row count.
    async fn create_table_as(
        &self,
        caller: &Caller,
        create: &CreateTable,
        params: &[ScalarValue],
    ) -> Result<u64> {
        ddl::refuse_unhonoured_clauses_of_ctas(create)?;
        let query = create
            .query
            .as_ref()
            .ok_or_else(|| FloeError::internal("CREATE TABLE AS without a query"))?;
        let ident = self.names(caller).table(&create.name)?;
        let catalog = self.catalog.as_ref();
        if !ddl::may_create(catalog, &ident, create.if_not_exists).await? {
            return Ok(0);
        }
        let select = DfStatement::Statement(Box::new(Statement::Query(query.clone())));
        let columns = match self.plan(caller, select, params).await? {
            (_, Planned::Query(planned), _) => planned.schema(),
            _ => return Err(FloeError::internal("AS SELECT planned as a write")),
        };
        let schema = crate::table::iceberg_schema_of(&columns).map_err(|e| {
            FloeError::invalid(format!(
                "CREATE TABLE AS: the query's columns have no Iceberg form: {e}"
            ))
        })?;
        catalog
            .create_table(ident.namespace(), ddl::creation(create, &ident, schema)?)
            .await?;
        let insert = parse(&format!(
            "INSERT INTO {}.{} {query}",
            quoted(&ident.namespace().to_url_string()),
            quoted(ident.name())
        ))?;
        let filled = Box::pin(self.execute_statement(caller, insert, params)).await;
        match filled.and_then(Outcome::affected) {
            Ok(count) => Ok(count as u64),
            Err(e) => {
                if let Err(dropped) = catalog.purge_table(&ident).await {
                    tracing::warn!(
                        "CREATE TABLE AS: dropping {ident} after a failed insert: {dropped}"
                    );
                }
                Err(e)
            }
        }
    }

    /// Resolves the statement's tables and plans it on a fresh context.
    async fn plan(
        &self,
        caller: &Caller,
        mut statement: DfStatement,
        params: &[ScalarValue],
    ) -> Result<(Arc<StatementCatalog>, Planned, SchemaRef)> {
        show::rewrite(&mut statement, &self.catalog_name)?;
        rewrite_before_resolving(&mut statement)?;
        let ctx = self.cluster.statement_context(&caller.schema);
        let user = caller.access.user();
        session::register_functions(&ctx, user, &self.catalog_name, &caller.schema);
        let Resolution {
            catalog,
            uses_information_schema,
            uses_metadata_tables,
        } = resolve(
            &self.catalog,
            &self.catalog_name,
            caller,
            &statement,
            &ctx.state(),
        )
        .await?;
        ctx.register_catalog(&self.catalog_name, catalog.clone());
        let (plan, parameters) = plan_resolved(&ctx, &catalog, caller, statement, params).await?;
        note_tables(catalog.table_names());
        let planned = match plan {
            LogicalPlan::Dml(mut dml) if is_write(&dml) => {
                // Fully qualified: the write finds its table whatever the caller's schema.
                let target = dml.table_name.resolve(&self.catalog_name, &caller.schema);
                // Also checked while resolving; this holds whatever form the name took.
                caller.access.check_write(&target.schema)?;
                dml.table_name = target.into();
                Planned::Write(ctx, dml)
            }
            LogicalPlan::Dml(dml) => {
                return Err(FloeError::unimplemented(format!(
                    "{} is not supported yet",
                    dml.op
                )));
            }
            // It would write files that nothing commits.
            LogicalPlan::Analyze(analyze) if matches!(*analyze.input, LogicalPlan::Dml(_)) => {
                return Err(FloeError::unimplemented(
                    "EXPLAIN ANALYZE of INSERT, DELETE or UPDATE is not supported",
                ));
            }
            LogicalPlan::Ddl(_) | LogicalPlan::Statement(_) | LogicalPlan::Copy(_) => {
                return Err(FloeError::unimplemented(format!(
                    "statement not supported: {}",
                    plan.display()
                )));
            }
            plan => {
                let local = uses_information_schema || uses_metadata_tables || is_constant(&plan);
                Planned::Query(Box::new(Query::new(ctx, catalog.clone(), plan, local)?))
            }
        };
        Ok((catalog, planned, parameters))
    }

    /// Runs the write job, then commits its files in one snapshot, following the write
    /// protocol (`table::write_protocol`): a failed job's files are deleted, a commit's
    /// outcome decides what happens to them.
    ///
    /// `INSERT OVERWRITE` replaces, in the same snapshot, the whole table if it is
    /// unpartitioned, else exactly the partitions the query writes to (dynamic partition
    /// overwrite, Spark's default).
    async fn run_insert(
        &self,
        ctx: &Arc<SessionContext>,
        mut dml: DmlStatement,
        catalog: &StatementCatalog,
    ) -> Result<u64> {
        let how = if dml.op == WriteOp::Insert(InsertOp::Overwrite) {
            self.catalog.check_commit_changes()?;
            let target = catalog.target_of(&dml)?;
            let spec = target.table().metadata().default_partition_spec();
            let removal = match spec.is_unpartitioned() {
                true => Removal::All,
                false => Removal::Partitions,
            };
            // The files are written as for any INSERT; the commit replaces.
            dml.op = WriteOp::Insert(InsertOp::Append);
            WriteCommit::Overwrite(Overwrite::of(removal))
        } else {
            WriteCommit::Append
        };
        self.run_write(ctx, dml, catalog, &how, &|| Ok(())).await
    }

    /// As [`Self::run_insert`], committing the files as `how` says, and only if
    /// `may_commit` agrees once the job has written them (if not, they are deleted).
    async fn run_write(
        &self,
        ctx: &Arc<SessionContext>,
        dml: DmlStatement,
        catalog: &StatementCatalog,
        how: &WriteCommit,
        may_commit: &(dyn Fn() -> Result<()> + Send + Sync),
    ) -> Result<u64> {
        let provider = catalog.target_of(&dml)?;
        let (write_id, files) = self.write_files(ctx, dml, catalog).await?;
        if let Err(e) = may_commit() {
            discard_writes(provider.table(), &[write_id]).await;
            return Err(e);
        }
        commit_write(
            self.catalog.as_ref(),
            provider.table(),
            &write_id,
            &files,
            how,
        )
        .await
    }

    /// Runs the job of one write (`dml`, an INSERT); returns its id and the files its
    /// tasks wrote, not committed. If the job fails, its files are deleted.
    async fn write_files(
        &self,
        ctx: &Arc<SessionContext>,
        dml: DmlStatement,
        catalog: &StatementCatalog,
    ) -> Result<(String, Vec<WrittenFile>)> {
        let provider = catalog.target_of(&dml)?;
        let planned_before = provider.planned_writes().len();
        let plan = LogicalPlan::Dml(dml);
        // The writes are planned (and their ids known) when the job's plan is built.
        let job = self.run_write_job(ctx, &plan, catalog).await;
        let write_ids = provider.planned_writes().split_off(planned_before);
        let files = match job {
            Ok(files) => files,
            Err(e) => {
                discard_writes(provider.table(), &write_ids).await;
                return Err(e);
            }
        };
        let Ok([write_id]) = <[String; 1]>::try_from(write_ids.clone()) else {
            discard_writes(provider.table(), &write_ids).await;
            return Err(FloeError::internal(format!(
                "expected exactly one write per INSERT, planned {}",
                write_ids.len()
            )));
        };
        Ok((write_id, files))
    }

    /// Runs the write job; returns the files its tasks wrote.
    async fn run_write_job(
        &self,
        ctx: &Arc<SessionContext>,
        plan: &LogicalPlan,
        catalog: &StatementCatalog,
    ) -> Result<Vec<WrittenFile>> {
        let locations = self.run_job(ctx, plan, "insert", catalog).await?;
        let batches: Vec<RecordBatch> = self
            .cluster
            .fetch_results(descriptor_schema(), locations)
            .try_collect()
            .await?;
        written_files(&batches)
    }
}

/// Runs a statement that writes to its end (commit, or clean-up) even if the client
/// goes away: dropping it half-way would leave its files behind.
async fn to_the_end<T: Send + 'static>(
    write: impl Future<Output = Result<T>> + Send + 'static,
) -> Result<T> {
    crate::ops::statements::spawn(write)
        .await
        .map_err(|e| FloeError::internal(format!("a write's task failed: {e}")))?
}

/// A statement's text parsed, with the forms Floe runs as others rewritten
/// (`UPDATE … FROM` as MERGE).
fn parse_statement(sql: &str) -> Result<DfStatement> {
    let mut statement = parse(sql)?;
    merge::update_from_as_merge(&mut statement)?;
    Ok(statement)
}

/// The rewrites of a statement's text that come before its tables are resolved.
fn rewrite_before_resolving(statement: &mut DfStatement) -> Result<()> {
    types::microsecond_timestamps(statement);
    numbers::read_as_other_engines_do(statement);
    distinct_order::orders_by_select_items(statement);
    time_travel::rewrite(statement)?;
    recursive::named_columns(statement);
    row_level::truncate_as_delete(statement)?;
    row_level::delete_alias_as_table(statement);
    row_level::using_as_exists(statement)?;
    params::number_placeholders(statement);
    row_in::row_in_as_exists(statement)?;
    intervals::interval_products_as_calls(statement);
    calls::mod_as_remainder(statement);
    subscripts::aggregate_subscripts_as_elements(statement);
    fetch::fetch_as_limit(statement);
    grouping_sets::empty_groupings_as_sets(statement);
    windows::named_windows_resolved(statement)?;
    using_joins::qualify_merged_columns(statement);
    lateral::unnest_columns_named(statement);
    positional::defaults_as_nulls(statement);
    positional::nested_values_as_selects(statement)?;
    positional::unique_insert_names(statement);
    Ok(())
}

/// Plans a statement whose tables `catalog` resolved (and `ctx` knows), with `params`
/// bound; also returns the types of its parameters.
async fn plan_resolved(
    ctx: &SessionContext,
    catalog: &StatementCatalog,
    caller: &Caller,
    mut statement: DfStatement,
    params: &[ScalarValue],
) -> Result<(LogicalPlan, SchemaRef)> {
    uuids::rewrite_statement(&mut statement, catalog, &caller.schema)?;
    let merging_joins = using_joins::merging_joins_of_star(&statement);
    outer_names::outer_names_kept(&mut statement);
    let plan = match ctx.state().statement_to_plan(statement.clone()).await {
        Err(e) if output_names::repeats_a_name(&e) => {
            output_names::name_select_lists(&mut statement);
            ctx.state().statement_to_plan(statement).await?
        }
        planned => planned?,
    };
    let parameters = params::parameter_schema(&plan)?;
    let plan = match plan {
        LogicalPlan::Dml(mut dml) if is_insert(&dml) => {
            dml.input = Arc::new(nullable_values(Arc::unwrap_or_clone(dml.input))?);
            LogicalPlan::Dml(dml)
        }
        plan => plan,
    };
    params::check_not_null(&plan, params)?;
    let plan = match params {
        [] => plan,
        values => plan.with_param_values(ParamValues::from(values.to_vec()))?,
    };
    let plan = uuids::rewrite_comparisons(like::rewrite_escapes(plan)?)?;
    let plan = aggregate_filters::rewrite_filters(plan)?;
    let plan = grouping_sets::with_sql_grouping_sets(plan)?;
    formats::check_formats(&plan)?;
    let plan = date_parts::with_sql_date_parts(plan)?;
    let plan = intervals::dates_with_times_as_timestamps(plan)?;
    let plan = set_operations::with_multiset_intersect_and_except(plan)?;
    let plan = lateral::lateral_unnests_as_plain(plan)?;
    // Most statements hold no subquery: the passes for them are skipped, as they would
    // only walk the plan.
    let subqueries = expr_rewrite::holds_subqueries(&plan);
    let plan = match subqueries {
        true => lateral::lateral_subqueries_joined(plan)?,
        false => plan,
    };
    let plan = windows::windows_in_sorts_computed(plan)?;
    let plan = match subqueries {
        true => windows::subquery_filters_under_windows_projected(plan)?,
        false => plan,
    };
    let plan = using_joins::with_merged_using_columns(plan)?;
    let plan = match &merging_joins {
        Some(naturals) => using_joins::merged_columns_first(plan, naturals)?,
        None => plan,
    };
    let plan = match subqueries {
        true => with_subqueries_planned(plan)?,
        false => plan,
    };
    Ok((plan, parameters))
}

/// `plan` with its subqueries in the shapes DataFusion decorrelates and runs.
fn with_subqueries_planned(plan: LogicalPlan) -> Result<LogicalPlan> {
    let plan = subqueries_below::with_subqueries_computed_below(plan)?;
    let plan = distant_references::with_distant_references_carried(plan)?;
    let plan = scalar_subqueries::with_single_row_scalar_subqueries(plan)?;
    let plan = subquery_values::with_subqueries_as_counts(plan)?;
    // A DELETE's or UPDATE's subqueries are joined in the plans its steps build
    // (`row_level`), which read its condition and values apart.
    let plan = match row_level::is_row_level(&plan) {
        true => plan,
        false => inequality_subqueries::with_inequality_subqueries_joined(plan)?,
    };
    let plan = correlated_in::with_correlated_in_as_exists(plan)?;
    subquery_names::with_subquery_values_renamed(plan)
}

enum Planned {
    Query(Box<Query>),
    /// An INSERT, DELETE or UPDATE.
    Write(Arc<SessionContext>, DmlStatement),
}

/// Whether `plan` only computes on literals (`SELECT 1`, `VALUES …`): its work is
/// bounded by the statement's text, so it needs no job nor timeout.
fn is_constant(plan: &LogicalPlan) -> bool {
    let mut constant = true;
    let _ = plan.apply_with_subqueries(|node| {
        constant = matches!(
            node,
            LogicalPlan::Projection(_)
                | LogicalPlan::Values(_)
                | LogicalPlan::EmptyRelation(_)
                | LogicalPlan::SubqueryAlias(_)
                | LogicalPlan::Filter(_)
                | LogicalPlan::Limit(_)
                | LogicalPlan::Sort(_)
        );
        Ok(if constant {
            TreeNodeRecursion::Continue
        } else {
            TreeNodeRecursion::Stop
        })
    });
    constant
}

/// EXPLAIN ANALYZE's answer: `(plan_type, plan)` rows.
fn explain_batch(schema: SchemaRef, rows: Vec<(String, String)>) -> Result<RecordBatch> {
    let (titles, texts): (Vec<String>, Vec<String>) = rows.into_iter().unzip();
    RecordBatch::try_new(
        schema,
        vec![
            Arc::new(StringArray::from(titles)),
            Arc::new(StringArray::from(texts)),
        ],
    )
    .map_err(|e| FloeError::internal(e.to_string()))
}

/// Ballista plans a job on its scheduler (in this process) and reports a planning
/// failure only as text. A failed job whose error has no kind learns it here, off the
/// hot path: a scan's error from the statement's providers, an optimizer's (a constant
/// `1/0` is the user's error) by optimizing the plan again, a physical planner's from
/// its text.
fn planning_failure(
    ctx: &SessionContext,
    plan: &LogicalPlan,
    catalog: &StatementCatalog,
    error: FloeError,
) -> FloeError {
    if error.kind != ErrorKind::Internal {
        return error;
    }
    if let Some(scan_error) = catalog.planning_error() {
        return scan_error;
    }
    match ctx.state().optimize(plan) {
        Err(optimizer_error) => optimizer_error.into(),
        // The physical planner's refusal of the SQL (an invalid window frame), as
        // `DataFusionError::Plan` writes itself.
        Ok(_) if error.message.contains("Error during planning: ") => {
            FloeError::invalid(error.message)
        }
        Ok(_) => error,
    }
}

/// `INSERT INTO` and `INSERT OVERWRITE`.
fn is_insert(dml: &DmlStatement) -> bool {
    matches!(
        dml.op,
        WriteOp::Insert(InsertOp::Append | InsertOp::Overwrite)
    )
}

/// The statements that write a table: INSERTs, `DELETE` and `UPDATE`.
fn is_write(dml: &DmlStatement) -> bool {
    is_insert(dml) || matches!(dml.op, WriteOp::Delete | WriteOp::Update)
}

/// A double-quoted identifier, as written for the name it is.
fn quoted(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// The table of a `SHOW CREATE TABLE`.
fn as_show_create_table(statement: &DfStatement) -> Option<&ObjectName> {
    match as_sql(statement)? {
        Statement::ShowCreate {
            obj_type: ShowCreateObject::Table,
            obj_name,
        } => Some(obj_name),
        _ => None,
    }
}

/// The SQL statement `statement` is, unless it is one of DataFusion's own.
fn as_sql(statement: &DfStatement) -> Option<&Statement> {
    match statement {
        DfStatement::Statement(statement) => Some(statement.as_ref()),
        _ => None,
    }
}

/// How long `/ready` waits for the catalog.
const READINESS_TIMEOUT: Duration = Duration::from_secs(5);

fn as_call(statement: &DfStatement) -> Option<&Function> {
    match as_sql(statement)? {
        Statement::Call(call) => Some(call),
        _ => None,
    }
}

fn as_merge(statement: &DfStatement) -> Option<&Merge> {
    match as_sql(statement)? {
        Statement::Merge(merge) => Some(merge),
        _ => None,
    }
}

fn as_create_table_as(statement: &DfStatement) -> Option<&CreateTable> {
    match as_sql(statement)? {
        Statement::CreateTable(create) if create.query.is_some() => Some(create),
        _ => None,
    }
}

/// The statement if Floe executes it as DDL itself.
fn as_ddl(statement: &DfStatement) -> Option<&Statement> {
    let DfStatement::Statement(statement) = statement else {
        return None;
    };
    match statement.as_ref() {
        Statement::CreateSchema { .. } | Statement::CreateTable(_) | Statement::AlterTable(_) => {
            Some(statement)
        }
        Statement::Drop {
            object_type: ObjectType::Schema | ObjectType::Table,
            ..
        } => Some(statement),
        _ => None,
    }
}

/// DataFusion types `INSERT … VALUES` rows with the table's nullability, so a NULL for
/// a NOT NULL column would fail while Ballista plans the job, as text naming the VALUES
/// column (`column1`). Typed nullable, the rows reach the write, which refuses the NULL
/// naming the table's column, as it does for `INSERT … SELECT`.
fn nullable_values(plan: LogicalPlan) -> Result<LogicalPlan> {
    let plan = plan.transform_up(|node| match node {
        LogicalPlan::Values(Values { schema, values }) => {
            let fields = schema
                .iter()
                .map(|(qualifier, field)| {
                    let field = field.as_ref().clone().with_nullable(true);
                    (qualifier.cloned(), Arc::new(field))
                })
                .collect();
            let schema = DFSchema::new_with_metadata(fields, schema.metadata().clone())?;
            Ok(Transformed::yes(LogicalPlan::Values(Values {
                schema: Arc::new(schema),
                values,
            })))
        }
        node => node.recompute_schema().map(Transformed::yes),
    })?;
    Ok(plan.data)
}

/// The one-row result of an INSERT.
fn count_batch(count: u64) -> Result<RecordBatch> {
    counts_batch(&["count"], &[count])
}

/// One row of named counts (a statement's answer).
fn counts_batch(names: &[&str], values: &[u64]) -> Result<RecordBatch> {
    let fields: Vec<Field> = names
        .iter()
        .map(|name| Field::new(*name, DataType::Int64, false))
        .collect();
    let columns: Vec<ArrayRef> = values
        .iter()
        .map(|v| Arc::new(Int64Array::from(vec![*v as i64])) as ArrayRef)
        .collect();
    Ok(RecordBatch::try_new(
        Arc::new(Schema::new(fields)),
        columns,
    )?)
}
