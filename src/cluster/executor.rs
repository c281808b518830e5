//! Executors: Ballista's executor process with Floe's codec and functions. The same
//! code runs in-process (`floe serve --local-executors N`) and as `floe executor`.
//! Executors get storage properties inside the plans they run, never catalog access.

use std::net::{SocketAddr, TcpListener};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use ballista_core::config::TaskSchedulingPolicy;
use ballista_core::registry::BallistaFunctionRegistry;
use ballista_executor::executor_process::{ExecutorProcessConfig, start_executor_process};
use datafusion::functions_nested::all_default_nested_functions;
use tokio::task::JoinHandle;

use super::engine::FloeEngine;
use super::shuffle_files::ShuffleCompression;
use super::{MAX_MESSAGE_SIZE, RESULT_RETENTION};
use crate::codec::FloePhysicalCodec;
use crate::error::{FloeError, Result};

#[derive(Clone)]
pub struct ExecutorOptions {
    /// Scheduler to register with (`HOST:PORT`).
    pub scheduler_host: String,
    pub scheduler_port: u16,
    /// Address of the executor's Flight service (result and shuffle reads).
    pub bind: SocketAddr,
    /// Port the scheduler pushes tasks to.
    pub grpc_port: u16,
    pub slots: usize,
    /// Memory all tasks may hold, in bytes, shared equally by the slots: an operator that
    /// cannot spill (a hash join's build side) fails its statement beyond its share
    /// (`RESOURCE_EXHAUSTED`) instead of the process running out. `None`: no limit.
    pub memory_limit: Option<u64>,
    /// Where stage outputs are written; `None`: a temporary directory.
    pub work_dir: Option<PathBuf>,
    /// How often the executor tells the scheduler it is alive.
    pub heartbeat: Duration,
    /// How stage outputs are compressed.
    pub shuffle_compression: ShuffleCompression,
}

fn process_config(options: &ExecutorOptions) -> ExecutorProcessConfig {
    let bind_host = options.bind.ip();
    ExecutorProcessConfig {
        bind_host: bind_host.to_string(),
        // An unspecified bind address lets the scheduler use the peer address it sees.
        external_host: (!bind_host.is_unspecified()).then(|| bind_host.to_string()),
        port: options.bind.port(),
        grpc_port: options.grpc_port,
        scheduler_host: options.scheduler_host.clone(),
        scheduler_port: options.scheduler_port,
        concurrent_tasks: options.slots,
        memory_pool_size: options.memory_limit,
        // Job outputs live as long as the scheduler keeps the job's results; what is
        // left (a coordinator that went away) is swept, and everything at shutdown.
        job_data_ttl_seconds: RESULT_RETENTION.as_secs(),
        job_data_clean_up_interval_seconds: JOB_DATA_SWEEP.as_secs(),
        work_dir: options
            .work_dir
            .as_ref()
            .map(|dir| dir.to_string_lossy().into_owned()),
        task_scheduling_policy: TaskSchedulingPolicy::PushStaged,
        executor_heartbeat_interval_seconds: options.heartbeat.as_secs().max(1),
        grpc_max_decoding_message_size: MAX_MESSAGE_SIZE as u32,
        grpc_max_encoding_message_size: MAX_MESSAGE_SIZE as u32,
        override_physical_codec: Some(Arc::new(FloePhysicalCodec::default())),
        override_function_registry: Some(Arc::new(function_registry())),
        override_execution_engine: Some(Arc::new(FloeEngine::new(options.shuffle_compression))),
        ..Default::default()
    }
}

/// DataFusion's functions, including the nested (array, map) ones that Ballista's
/// default executor registry leaves out, and Floe's own.
fn function_registry() -> BallistaFunctionRegistry {
    let mut registry = BallistaFunctionRegistry::default();
    let floe = super::floe_functions();
    for f in all_default_nested_functions()
        .into_iter()
        .chain(floe.scalar)
    {
        registry.scalar_functions.insert(f.name().to_string(), f);
    }
    for f in floe.aggregate {
        registry.aggregate_functions.insert(f.name().to_string(), f);
    }
    for f in floe.window {
        registry.window_functions.insert(f.name().to_string(), f);
    }
    registry
}

/// Runs an executor until SIGINT/SIGTERM.
pub async fn run_executor(mut options: ExecutorOptions) -> Result<()> {
    let coordinator = format!("{}:{}", options.scheduler_host, options.scheduler_port);
    crate::coordinator_link::set(coordinator).map_err(FloeError::invalid)?;
    // Without a work directory, one of its own, removed when it stops.
    let temporary = options
        .work_dir
        .is_none()
        .then(|| std::env::temp_dir().join(format!("floe-executor-{}", uuid::Uuid::new_v4())));
    let work_dir = options
        .work_dir
        .get_or_insert_with(|| temporary.clone().unwrap_or_default());
    std::fs::create_dir_all(&*work_dir).map_err(|e| {
        FloeError::invalid(format!(
            "--work-dir: cannot create {}: {e}",
            work_dir.display()
        ))
    })?;
    // Ballista drains on SIGTERM, but tells the scheduler first, and waits out its RPC
    // timeouts when the coordinator is gone: the process ends after a grace period.
    let stop_grace = async {
        crate::server::shutdown_signal().await;
        tokio::time::sleep(STOP_GRACE).await;
        tracing::warn!("the executor did not stop within {STOP_GRACE:?} of the signal; exiting");
    };
    let result = tokio::select! {
        result = run_executor_with(|| Ok(options.clone())) => result,
        () = stop_grace => Ok(()),
    };
    if let Some(dir) = temporary {
        let _ = std::fs::remove_dir_all(dir);
    }
    result
}

/// Runs an executor with the options `options` gives; asks again if registration is
/// refused (a port taken meanwhile can be traded for a fresh one).
async fn run_executor_with(options: impl Fn() -> Result<ExecutorOptions>) -> Result<()> {
    let mut attempt = 1;
    loop {
        let config = Arc::new(process_config(&options()?));
        match start_executor_process(config).await {
            Ok(()) => return Ok(()),
            // Ballista 53 registers before its task service listens, and the scheduler
            // calls that service back at once: the first registration can be refused.
            Err(e) if e.to_string().contains("registration") && attempt < REGISTRATION_ATTEMPTS => {
                tracing::warn!(attempt, "executor registration refused, retrying: {e}");
                tokio::time::sleep(Duration::from_millis(200 * attempt as u64)).await;
                attempt += 1;
            }
            // The coordinator is not up (yet, or again): wait for it rather than exit,
            // so executors may start first and outlive a coordinator restart.
            Err(e) if e.to_string().contains("connect to scheduler") => {
                tracing::warn!("cannot reach the coordinator's scheduler yet; retrying: {e}");
                tokio::select! {
                    _ = tokio::time::sleep(SCHEDULER_RETRY) => {}
                    _ = crate::server::shutdown_signal() => return Ok(()),
                }
            }
            Err(e) => return Err(FloeError::internal(format!("executor stopped: {e}"))),
        }
    }
}

const REGISTRATION_ATTEMPTS: u32 = 5;

/// How long an executor may take to stop after SIGINT/SIGTERM.
const STOP_GRACE: Duration = Duration::from_secs(20);

/// How long an executor waits before it tries an unreachable scheduler again.
const SCHEDULER_RETRY: Duration = Duration::from_secs(2);

/// How often an executor looks for job outputs older than [`RESULT_RETENTION`].
const JOB_DATA_SWEEP: Duration = Duration::from_secs(300);

/// Starts an in-process executor on free loopback ports; it runs until SIGINT/SIGTERM,
/// then finishes (or drops) its running tasks and ends.
pub(super) fn spawn_local_executor(
    scheduler: SocketAddr,
    slots: usize,
    memory_limit: Option<u64>,
    shuffle_compression: ShuffleCompression,
    work_dir: PathBuf,
) -> JoinHandle<()> {
    let options = move || {
        Ok(ExecutorOptions {
            scheduler_host: scheduler_host(scheduler),
            scheduler_port: scheduler.port(),
            bind: SocketAddr::from(([127, 0, 0, 1], free_port()?)),
            grpc_port: free_port()?,
            slots,
            memory_limit,
            work_dir: Some(work_dir.clone()),
            heartbeat: super::HEARTBEAT,
            shuffle_compression,
        })
    };
    tokio::spawn(async move {
        if let Err(e) = run_executor_with(options).await {
            tracing::error!("in-process executor: {e}");
        }
    })
}

/// Executors reach a scheduler that listens on all interfaces through loopback.
fn scheduler_host(addr: SocketAddr) -> String {
    if addr.ip().is_unspecified() {
        "127.0.0.1".to_string()
    } else {
        addr.ip().to_string()
    }
}

fn free_port() -> Result<u16> {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| FloeError::internal(format!("no free port for an executor: {e}")))
}

/// `fraction` of the machine's memory (`MemTotal`), if it can be read.
pub fn memory_share(fraction: f64) -> Option<u64> {
    let meminfo = std::fs::read_to_string("/proc/meminfo").ok()?;
    let kib: u64 = meminfo
        .lines()
        .find_map(|line| line.strip_prefix("MemTotal:"))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some((kib as f64 * 1024.0 * fraction) as u64)
}
