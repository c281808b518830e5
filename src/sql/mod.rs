//! Statement routing: DDL runs against the Iceberg catalog here; queries and INSERTs
//! are planned on a per-statement context and run as Ballista jobs; writes are
//! committed here, once.

pub mod ddl;
pub mod parse;
pub mod resolve;

use std::sync::Arc;

use datafusion::arrow::array::{Int64Array, RecordBatch};
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::execution::SendableRecordBatchStream;
use datafusion::logical_expr::dml::InsertOp;
use datafusion::logical_expr::{DmlStatement, LogicalPlan, WriteOp};
use datafusion::prelude::SessionContext;
use datafusion::sql::parser::Statement as DfStatement;
use datafusion::sql::sqlparser::ast::{ObjectType, Statement};
use futures::TryStreamExt;
use iceberg::Catalog;

use crate::catalog::DEFAULT_NAMESPACE;
use crate::cluster::{Cluster, fetch_results};
use crate::error::{FloeError, Result};
use crate::table::commit::{WrittenFile, written_files};
use crate::table::write::descriptor_schema;
use crate::table::write_protocol::{commit_write, discard_writes};
use ddl::Names;
use parse::{ParsedStatement, parse};
use resolve::{Resolution, StatementCatalog, resolve};

/// Runs SQL statements against one Iceberg catalog on one cluster.
#[derive(Clone)]
pub struct Engine {
    catalog: Arc<dyn Catalog>,
    catalog_name: String,
    cluster: Cluster,
}

/// A statement ready to produce rows.
pub enum Outcome {
    /// A query, planned and pinned to its snapshots, not yet run.
    Query(Box<Query>),
    /// A statement that already ran; `rows` is what it returns (nothing for DDL, the
    /// row count for INSERT).
    Done { rows: RecordBatch, affected: i64 },
}

pub struct Query {
    ctx: Arc<SessionContext>,
    plan: LogicalPlan,
    /// information_schema queries run on the coordinator (their tables are not
    /// distributable).
    local: bool,
}

impl Query {
    pub fn schema(&self) -> SchemaRef {
        Arc::new(self.plan.schema().as_arrow().clone())
    }
}

/// What preparing a statement tells a client before it runs.
pub enum StatementKind {
    Query(SchemaRef),
    Update,
}

impl Engine {
    pub fn new(catalog: Arc<dyn Catalog>, catalog_name: String, cluster: Cluster) -> Self {
        Self {
            catalog,
            catalog_name,
            cluster,
        }
    }

    fn names(&self) -> Names<'_> {
        Names {
            catalog_name: &self.catalog_name,
            default_namespace: DEFAULT_NAMESPACE,
        }
    }

    /// Classifies a statement without running it (queries are planned for their schema).
    pub async fn prepare(&self, sql: &str) -> Result<StatementKind> {
        let parsed = parse(sql)?;
        if as_ddl(&parsed.statement).is_some() {
            return Ok(StatementKind::Update);
        }
        match self.plan(parsed.statement).await? {
            (_, Planned::Query(query)) => Ok(StatementKind::Query(query.schema())),
            (_, Planned::Insert(..)) => Ok(StatementKind::Update),
        }
    }

    /// Runs DDL and INSERT to completion; plans queries (run them with [`Self::run_query`]).
    pub async fn execute(&self, sql: &str) -> Result<Outcome> {
        let parsed = parse(sql)?;
        if let Some(ddl) = as_ddl(&parsed.statement) {
            self.execute_ddl(ddl, &parsed).await?;
            return Ok(Outcome::Done {
                rows: RecordBatch::new_empty(Arc::new(Schema::empty())),
                affected: 0,
            });
        }
        match self.plan(parsed.statement).await? {
            (_, Planned::Query(query)) => Ok(Outcome::Query(query)),
            (catalog, Planned::Insert(ctx, dml)) => {
                // A write runs to its end (commit, or clean-up) even if the client goes
                // away: dropping it half-way would leave its files behind.
                let engine = self.clone();
                let count =
                    tokio::spawn(async move { engine.run_insert(&ctx, dml, &catalog).await })
                        .await
                        .map_err(|e| FloeError::internal(format!("INSERT task failed: {e}")))??;
                Ok(Outcome::Done {
                    rows: count_batch(count)?,
                    affected: count as i64,
                })
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
        let locations = self
            .cluster
            .run_job(&query.ctx, &query.plan, "query")
            .await?;
        Ok(fetch_results(schema, locations))
    }

    async fn execute_ddl(&self, ddl: &Statement, parsed: &ParsedStatement) -> Result<()> {
        let catalog = self.catalog.as_ref();
        let names = self.names();
        match ddl {
            Statement::CreateSchema {
                schema_name,
                if_not_exists,
                ..
            } => ddl::create_schema(catalog, &names, schema_name, *if_not_exists).await,
            Statement::CreateTable(create) => {
                ddl::create_table(catalog, &names, create, parsed.partitioned_by.as_deref()).await
            }
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

    /// Resolves the statement's tables and plans it on a fresh context.
    async fn plan(&self, statement: DfStatement) -> Result<(Arc<StatementCatalog>, Planned)> {
        let ctx = self.cluster.statement_context().await?;
        let Resolution {
            catalog,
            uses_information_schema,
        } = resolve(
            &self.catalog,
            &self.catalog_name,
            DEFAULT_NAMESPACE,
            &statement,
            &ctx.state(),
        )
        .await?;
        ctx.register_catalog(&self.catalog_name, catalog.clone());
        let plan = ctx.state().statement_to_plan(statement).await?;
        let planned = match plan {
            LogicalPlan::Dml(dml) if dml.op == WriteOp::Insert(InsertOp::Append) => {
                Planned::Insert(ctx, dml)
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
                    "EXPLAIN ANALYZE of INSERT is not supported",
                ));
            }
            LogicalPlan::Ddl(_) | LogicalPlan::Statement(_) | LogicalPlan::Copy(_) => {
                return Err(FloeError::unimplemented(format!(
                    "statement not supported: {}",
                    plan.display()
                )));
            }
            plan => Planned::Query(Box::new(Query {
                ctx,
                plan,
                local: uses_information_schema,
            })),
        };
        Ok((catalog, planned))
    }

    /// Runs the write job, then commits its files in one snapshot, following the write
    /// protocol (`table::write_protocol`): a failed job's files are deleted, a commit's
    /// outcome decides what happens to them.
    async fn run_insert(
        &self,
        ctx: &Arc<SessionContext>,
        dml: DmlStatement,
        catalog: &StatementCatalog,
    ) -> Result<u64> {
        let provider = catalog
            .provider(&dml.table_name, DEFAULT_NAMESPACE)
            .ok_or_else(|| {
                FloeError::internal(format!("INSERT target {} was not resolved", dml.table_name))
            })?;
        let plan = LogicalPlan::Dml(dml);
        // The writes are planned (and their ids known) when the job's plan is built.
        let job = self.run_write_job(ctx, &plan).await;
        let write_ids = provider.planned_writes();
        let files = match job {
            Ok(files) => files,
            Err(e) => {
                discard_writes(provider.table(), &write_ids).await;
                return Err(name_not_null_violation(e, &plan));
            }
        };
        let Ok([write_id]) = <[String; 1]>::try_from(write_ids.clone()) else {
            discard_writes(provider.table(), &write_ids).await;
            return Err(FloeError::internal(format!(
                "expected exactly one write per INSERT, planned {}",
                write_ids.len()
            )));
        };
        commit_write(self.catalog.as_ref(), provider.table(), &write_id, &files).await
    }

    /// Runs the write job; returns the files its tasks wrote.
    async fn run_write_job(
        &self,
        ctx: &Arc<SessionContext>,
        plan: &LogicalPlan,
    ) -> Result<Vec<WrittenFile>> {
        let locations = self.cluster.run_job(ctx, plan, "insert").await?;
        let batches: Vec<RecordBatch> = fetch_results(descriptor_schema(), locations)
            .try_collect()
            .await?;
        written_files(&batches)
    }
}

enum Planned {
    Query(Box<Query>),
    Insert(Arc<SessionContext>, DmlStatement),
}

/// The statement if Floe executes it as DDL itself.
fn as_ddl(statement: &DfStatement) -> Option<&Statement> {
    let DfStatement::Statement(statement) = statement else {
        return None;
    };
    match statement.as_ref() {
        Statement::CreateSchema { .. } | Statement::CreateTable(_) => Some(statement),
        Statement::Drop {
            object_type: ObjectType::Schema | ObjectType::Table,
            ..
        } => Some(statement),
        _ => None,
    }
}

/// DataFusion types `INSERT … VALUES` rows with the table's nullability, so a NULL for
/// a NOT NULL column fails inside Arrow naming the VALUES column (`column1`). Report it
/// as the user's error, naming the table column.
fn name_not_null_violation(error: FloeError, plan: &LogicalPlan) -> FloeError {
    const MARK: &str = "is declared as non-nullable but contains null values";
    let Some(pos) = error.message.find(MARK) else {
        return error;
    };
    let Some(source) = error.message[..pos]
        .rsplit("Column '")
        .next()
        .and_then(|s| s.split('\'').next())
    else {
        return error;
    };
    let column = match plan.inputs().first() {
        Some(LogicalPlan::Projection(projection)) => projection
            .expr
            .iter()
            .zip(projection.schema.fields())
            .find(|(expr, _)| expr.column_refs().iter().any(|c| c.name == source))
            .map(|(_, field)| field.name().clone()),
        _ => None,
    };
    FloeError::invalid(format!(
        "NULL value in NOT NULL column '{}'",
        column.as_deref().unwrap_or(source)
    ))
}

/// The one-row result of an INSERT.
fn count_batch(count: u64) -> Result<RecordBatch> {
    let schema = Arc::new(Schema::new(vec![Field::new(
        "count",
        DataType::Int64,
        false,
    )]));
    RecordBatch::try_new(schema, vec![Arc::new(Int64Array::from(vec![count as i64]))])
        .map_err(|e| FloeError::internal(e.to_string()))
}
