//! Ballista embedding: the scheduler inside the coordinator, in-process and remote
//! executors, job submission, cancellation and result streams.
//!
//! Statements are planned on a `SessionContext` of the coordinator (a clone of the
//! session the scheduler's own builder makes), so live table providers stay in the
//! coordinator (no logical plan round trip); the embedded scheduler plans physically
//! with that context, cuts stages and ships them to executors through
//! [`FloePhysicalCodec`](crate::codec::FloePhysicalCodec).

mod activity;
mod aggregate_reduction;
mod balanced_conditions;
pub(crate) mod cast_label;
mod coordinator_service;
mod datetime_text;
pub mod decimal_arithmetic;
mod empty_projections;
mod engine;
mod executor;
mod explain;
mod expression_rule;
mod filter_estimates;
mod filter_order;
mod float_zeros;
mod frame_aggregates;
mod grouping_aggregates;
mod held_outputs;
pub mod interval_times;
mod jobs;
mod join_order;
mod join_projections;
mod joins;
pub(crate) mod like_segments;
mod median;
mod node_rule;
mod not_in_filters;
mod ntile;
mod number_semantics;
mod projection_filters;
mod range_frames;
mod replace;
mod result_files;
mod rounded_avg;
mod shuffle_files;
pub(crate) mod signed;
pub(crate) mod single_row;
mod statistics_answers;
mod table_functions;
mod task_errors;
mod topk_nulls;
mod window_sorts;
mod window_variants;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ballista_core::config::TaskSchedulingPolicy;
use ballista_core::extension::SessionConfigExt;
use ballista_scheduler::cluster::{BallistaCluster, JobState};
use ballista_scheduler::config::{SchedulerConfig, TaskDistributionPolicy};
use ballista_scheduler::scheduler_process::create_scheduler;
use ballista_scheduler::scheduler_server::SchedulerServer;
use datafusion::catalog::MemoryCatalogProviderList;
use datafusion::common::tree_node::Transformed;
use datafusion::execution::{FunctionRegistry, SessionState, SessionStateBuilder};
use datafusion::logical_expr::{AggregateUDF, Expr, LogicalPlan, ScalarUDF, Window, WindowUDF};
use datafusion::optimizer::{Analyzer, AnalyzerRule, Optimizer, OptimizerConfig, OptimizerRule};
use datafusion::physical_optimizer::optimizer::PhysicalOptimizer;
use datafusion::prelude::{SessionConfig, SessionContext};
use datafusion_proto::protobuf::{LogicalPlanNode, PhysicalPlanNode};
use tokio::task::JoinHandle;

pub use activity::TaskCounts;
pub use executor::{ExecutorOptions, memory_share, run_executor};
pub use jobs::{Deadline, failed_job_error, recurses};
pub use joins::BROADCAST_ROWS;
pub use shuffle_files::ShuffleCompression;

use crate::catalog::DEFAULT_NAMESPACE;
use crate::codec::FloePhysicalCodec;
use crate::error::{FloeError, Result};

type Scheduler = SchedulerServer<LogicalPlanNode, PhysicalPlanNode>;

/// Largest gRPC message between coordinator and executors (stage plans carry file lists).
pub const MAX_MESSAGE_SIZE: usize = 64 * 1024 * 1024;

/// How often executors tell the scheduler they are alive (unless `floe executor
/// --heartbeat-secs` says otherwise).
pub const HEARTBEAT: Duration = Duration::from_secs(3);

/// How long executors keep a finished job's results: a query's job runs when its
/// result is fetched, and a slow client may take this long to read it all.
pub const RESULT_RETENTION: Duration = Duration::from_secs(1800);

/// The embedded scheduler and what statements need from it.
#[derive(Clone)]
pub struct Cluster {
    scheduler: Scheduler,
    jobs: Arc<jobs::ActiveJobs>,
    /// Every statement's session starts as a clone of this: building one registers
    /// every function again (about a tenth of a `SELECT 1`'s CPU on the coordinator).
    session_template: Arc<SessionState>,
    scheduler_addr: SocketAddr,
    local_results: Arc<result_files::LocalResultFiles>,
    /// Where finished jobs' execution graphs are kept (for EXPLAIN ANALYZE).
    job_state: Arc<dyn JobState>,
    /// Longest a running job waits while no executor is alive.
    executor_wait: Duration,
}

pub struct ClusterOptions {
    pub scheduler_addr: SocketAddr,
    pub catalog_name: String,
    pub target_partitions: usize,
    /// Longest a running job waits while no executor is alive before its statement
    /// fails with `UNAVAILABLE`.
    pub executor_wait: Duration,
    /// An executor not heard from for this long is lost (its tasks run elsewhere).
    pub executor_timeout: Duration,
}

/// The session settings every statement starts from.
pub fn session_config(catalog_name: &str, target_partitions: usize) -> SessionConfig {
    let mut config = SessionConfig::new_with_ballista()
        .with_information_schema(true)
        .with_create_default_catalog_and_schema(false)
        .with_default_catalog_and_schema(catalog_name, DEFAULT_NAMESPACE)
        .with_target_partitions(target_partitions);
    // Plain Utf8 for string literals: clients and Iceberg columns use it.
    config.options_mut().sql_parser.map_string_types_to_utf8view = false;
    // `0.1` is a DECIMAL, as in PostgreSQL, DuckDB, Trino and Spark (`src/sql/numbers.rs`).
    config.options_mut().sql_parser.parse_float_as_decimal = true;
    joins::configure(&mut config);
    // Ballista's hash-partitioned stage writer, which executors replace with
    // `shuffle_files`; its sort-based one is the default.
    if let Err(e) = config
        .options_mut()
        .set("ballista.shuffle.sort_based.enabled", "false")
    {
        tracing::warn!("cannot turn off Ballista's sort-based shuffle: {e}");
    }
    config
}

/// Window functions Floe computes itself (`src/cluster/frame_aggregates.rs`,
/// `src/cluster/window_variants.rs`), put in after the rest of the optimizer has run:
/// each replacement is aliased to the name it replaces, and DataFusion's optimizer gave a
/// window of aliased and plain expressions over an expression partition (`PARTITION BY
/// k % 3`) different sort keys, which the physical planner's assertion refused.
#[derive(Debug)]
struct FloeWindowFunctions;

impl OptimizerRule for FloeWindowFunctions {
    fn name(&self) -> &str {
        "floe_window_functions"
    }

    fn rewrite(
        &self,
        plan: LogicalPlan,
        _config: &dyn OptimizerConfig,
    ) -> datafusion::error::Result<Transformed<LogicalPlan>> {
        plan.transform_up_with_subqueries(|node| {
            let LogicalPlan::Window(window) = node else {
                return Ok(Transformed::no(node));
            };
            let mut changed = false;
            let exprs = (window.window_expr.iter())
                .map(|expr| match floe_window_function(expr) {
                    Some(replacement) => {
                        changed = true;
                        replacement.alias(expr.schema_name().to_string())
                    }
                    None => expr.clone(),
                })
                .collect();
            if !changed {
                return Ok(Transformed::no(LogicalPlan::Window(window)));
            }
            let window = Window::try_new(exprs, window.input)?;
            Ok(Transformed::yes(LogicalPlan::Window(window)))
        })
    }
}

/// The window function Floe computes in place of `expr` (under an alias the optimizer
/// may have given it).
fn floe_window_function(expr: &Expr) -> Option<Expr> {
    match expr {
        Expr::Alias(alias) => floe_window_function(&alias.expr),
        expr => frame_aggregates::framed(expr).or_else(|| window_variants::ignoring_nulls(expr)),
    }
}

fn analyzer_rules() -> Vec<Arc<dyn AnalyzerRule + Send + Sync>> {
    let mut rules = Analyzer::new().rules;
    let coercion = (rules.iter().position(|r| r.name() == "type_coercion")).unwrap_or(rules.len());
    rules.insert(coercion, Arc::new(number_semantics::DecimalsAsDoubles));
    rules.insert(coercion + 1, Arc::new(range_frames::DecimalRangeFrames));
    rules.push(Arc::new(number_semantics::RoundedIntegerCasts));
    rules.push(Arc::new(datetime_text::DatetimeText));
    rules
}

fn optimizer_rules() -> Vec<Arc<dyn OptimizerRule + Send + Sync>> {
    let rules = not_in_filters::with_not_in_kept(Optimizer::new().rules);
    let mut rules = grouping_aggregates::with_grouping_id_kept(rules);
    rules.push(Arc::new(FloeWindowFunctions));
    rules.push(Arc::new(float_zeros::FloatZeroComparisons));
    rules.push(Arc::new(decimal_arithmetic::DecimalOperations));
    rules.push(Arc::new(balanced_conditions::BalancedConditions));
    rules
}

/// A plain DataFusion state: the scheduler plans physically with it.
fn session_builder(config: SessionConfig) -> datafusion::error::Result<SessionState> {
    let rules = statistics_answers::with_statistics_answers(PhysicalOptimizer::new().rules);
    let rules = join_projections::with_one_sided_joins_kept(rules);
    let rules = joins::with_join_guards(rules);
    let mut rules = projection_filters::with_filters_below_repeated_names(rules);
    rules.push(Arc::new(like_segments::LIKE_SEGMENTS));
    rules.push(Arc::new(filter_order::FILTER_ORDER));
    rules.push(Arc::new(window_sorts::WINDOW_SORTS));
    rules.push(Arc::new(topk_nulls::TOP_GROUPS_WITH_NULLS));
    rules.push(Arc::new(
        empty_projections::ONE_COLUMN_FOR_EMPTY_PROJECTIONS,
    ));
    let mut state = SessionStateBuilder::new()
        .with_default_features()
        .with_table_functions(table_functions::table_functions())
        .with_config(config)
        .with_physical_optimizer_rules(rules)
        .with_optimizer_rules(optimizer_rules())
        .with_analyzer_rules(analyzer_rules())
        .build();
    let functions = floe_functions();
    for udwf in functions.window {
        state.register_udwf(udwf)?;
    }
    for udaf in functions.aggregate {
        state.register_udaf(udaf)?;
    }
    for udf in functions.scalar {
        state.register_udf(udf)?;
    }
    with_common_names(&mut state)?;
    Ok(state)
}

/// Floe's own functions, which its plans name: every session and every executor has
/// them.
struct FloeFunctions {
    scalar: Vec<Arc<ScalarUDF>>,
    aggregate: Vec<Arc<AggregateUDF>>,
    window: Vec<Arc<WindowUDF>>,
}

/// `avg` (rounding decimals), `median`, `floe_single_row`, `floe_interval_times`,
/// `floe_datetime_text`, `floe_cast_label`, `replace`, the `floe_decimal_*` operations,
/// `row_number`, `rank`, `dense_rank`, `ntile`, `cardinality`, `array_length`,
/// `array_ndims` and `array_position` as BIGINT, the `floe_frame_*` and
/// `floe_sliding_*` aggregates over moving frames and the variants of `lag`, `lead`,
/// `first_value`, `last_value` and `nth_value`.
fn floe_functions() -> FloeFunctions {
    let scalar = [
        interval_times::interval_times(),
        cast_label::cast_label(),
        datetime_text::datetime_text(),
        number_semantics::round_half_even(),
        replace::replace(),
    ];
    let aggregate = [
        rounded_avg::avg(),
        median::median(),
        single_row::single_row(),
    ];
    FloeFunctions {
        scalar: scalar
            .into_iter()
            .chain(signed::signed_scalar_functions())
            .chain(decimal_arithmetic::decimal_functions())
            .collect(),
        aggregate: aggregate
            .into_iter()
            .chain(frame_aggregates::sliding_aggregates())
            .collect(),
        window: signed::signed_window_functions()
            .into_iter()
            .chain(frame_aggregates::frame_aggregates())
            .chain(window_variants::window_variants())
            .collect(),
    }
}

/// Names other engines give DataFusion's functions: `sign` (`signum`), `variance`
/// (`var_samp`) and SQL's `every` (`bool_and`). Only the lookup changes: plans still name
/// the functions as DataFusion does, so executors need nothing more.
fn with_common_names(state: &mut SessionState) -> datafusion::error::Result<()> {
    for (name, alias) in [("signum", "sign")] {
        if let Some(f) = state.scalar_functions().get(name).cloned() {
            state.register_udf(Arc::new(f.as_ref().clone().with_aliases([alias])))?;
        }
    }
    for (name, alias) in [("var_samp", "variance"), ("bool_and", "every")] {
        if let Some(f) = state.aggregate_functions().get(name).cloned() {
            state.register_udaf(Arc::new(f.as_ref().clone().with_aliases([alias])))?;
        }
    }
    Ok(())
}

impl Cluster {
    /// Starts the scheduler; executors register at `options.scheduler_addr`.
    pub async fn start(options: &ClusterOptions) -> Result<Self> {
        let (catalog_name, partitions) = (options.catalog_name.clone(), options.target_partitions);
        let config: Arc<dyn Fn() -> SessionConfig + Send + Sync> =
            Arc::new(move || session_config(&catalog_name, partitions));
        let session_template = Arc::new(
            session_builder(config())
                .map_err(|e| FloeError::internal(format!("building the session: {e}")))?,
        );
        let addr = options.scheduler_addr;
        let scheduler_config = SchedulerConfig {
            bind_host: addr.ip().to_string(),
            bind_port: addr.port(),
            external_host: addr.ip().to_string(),
            scheduling_policy: TaskSchedulingPolicy::PushStaged,
            task_distribution: TaskDistributionPolicy::RoundRobin,
            grpc_server_max_decoding_message_size: MAX_MESSAGE_SIZE as u32,
            grpc_server_max_encoding_message_size: MAX_MESSAGE_SIZE as u32,
            override_config_producer: Some(config.clone()),
            override_session_builder: Some(Arc::new(session_builder)),
            override_physical_codec: Some(Arc::new(FloePhysicalCodec::default())),
            finished_job_data_clean_up_interval_seconds: RESULT_RETENTION.as_secs(),
            executor_timeout_seconds: options.executor_timeout.as_secs(),
            expire_dead_executor_interval_seconds: 1,
            ..Default::default()
        };
        let cluster = BallistaCluster::new_from_config(&scheduler_config)
            .await
            .map_err(|e| FloeError::internal(format!("starting the scheduler: {e}")))?;
        let job_state = cluster.job_state();
        let scheduler: Scheduler = create_scheduler(cluster, Arc::new(scheduler_config))
            .await
            .map_err(|e| FloeError::internal(format!("starting the scheduler: {e}")))?;
        // Listening before this returns: executors connect as soon as they start.
        let listener = tokio::net::TcpListener::bind(addr).await.map_err(|e| {
            FloeError::invalid(format!("scheduler_addr: cannot listen on {addr}: {e}"))
        })?;
        let service = scheduler.clone();
        tokio::spawn(async move {
            if let Err(e) = coordinator_service::serve(listener, service).await {
                tracing::error!("scheduler service stopped: {e}");
            }
        });
        Ok(Self {
            scheduler,
            jobs: Arc::default(),
            session_template,
            scheduler_addr: addr,
            local_results: Arc::default(),
            job_state,
            executor_wait: options.executor_wait,
        })
    }

    /// Starts an in-process executor with its own work directory (whose result files
    /// this coordinator then reads directly); it runs until SIGINT/SIGTERM.
    pub fn spawn_local_executor(
        &self,
        slots: usize,
        memory_limit: Option<u64>,
        shuffle_compression: ShuffleCompression,
    ) -> Result<JoinHandle<()>> {
        let work_dir = std::env::temp_dir().join(format!("floe-work-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&work_dir)
            .map_err(|e| FloeError::internal(format!("creating {}: {e}", work_dir.display())))?;
        self.local_results.add_work_dir(work_dir.clone());
        Ok(executor::spawn_local_executor(
            self.scheduler_addr,
            slots,
            memory_limit,
            shuffle_compression,
            work_dir,
        ))
    }

    /// Lets the in-process executors keep up to `budget` bytes of stage outputs in memory
    /// (`held_outputs`), written as `compression` says should they have to leave it.
    pub fn hold_stage_outputs(&self, budget: u64, compression: ShuffleCompression) -> Result<()> {
        let options = compression.ipc_options().map_err(|e| {
            FloeError::internal(format!("shuffle compression {compression:?}: {e}"))
        })?;
        let budget = usize::try_from(budget).unwrap_or(usize::MAX);
        let cluster = self.clone();
        let result_stage: held_outputs::ResultStageLookup = Arc::new(move |job| {
            let cluster = cluster.clone();
            Box::pin(async move { cluster.result_stage(&job).await })
        });
        held_outputs::held_outputs().configure(budget, options, result_stage);
        Ok(())
    }

    /// Removes the in-process executors' work directories (on shutdown).
    pub fn remove_local_work_dirs(&self) {
        for dir in self.local_results.take_work_dirs() {
            if let Err(e) = std::fs::remove_dir_all(&dir) {
                tracing::debug!("removing {}: {e}", dir.display());
            }
        }
    }

    pub(crate) async fn registered_executors(&self) -> usize {
        self.executor_ids().await.len()
    }

    /// The in-process executors are registered: an executor registering later is of
    /// another process.
    pub fn local_executors_registered(&self) {
        held_outputs::held_outputs().local_executors_registered();
    }

    /// Waits until at least `n` executors are registered.
    pub async fn wait_for_executors(&self, n: usize, timeout: Duration) -> Result<()> {
        let start = Instant::now();
        loop {
            let registered = self.registered_executors().await;
            if registered >= n {
                return Ok(());
            }
            if start.elapsed() > timeout {
                return Err(FloeError::internal(format!(
                    "only {registered} of {n} executors registered after {timeout:?}"
                )));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// A fresh context for one statement, whose unqualified table names are in
    /// `default_schema`.
    pub fn statement_context(&self, default_schema: &str) -> Arc<SessionContext> {
        let mut state = SessionState::clone(&self.session_template);
        // Clones share the catalog list, and each statement registers its own catalog.
        state.register_catalog_list(Arc::new(MemoryCatalogProviderList::new()));
        state.config_mut().options_mut().catalog.default_schema = default_schema.to_string();
        Arc::new(SessionContext::new_with_state(state))
    }
}
