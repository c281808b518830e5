//! `floe serve` and `floe executor`.

use std::io::IsTerminal;
use std::net::SocketAddr;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use floe::cluster::{ExecutorOptions, ShuffleCompression, memory_share, run_executor};
use floe::config::{ServeArgs, ServeConfig, cpus};
use floe::error::{FloeError, Result};

#[derive(Parser)]
#[command(
    name = "floe",
    version,
    about = "Arrow Flight SQL server for Apache Iceberg tables"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
// Parsed once at start: the size difference between the variants does not matter.
#[allow(clippy::large_enum_variant)]
enum Command {
    /// Run the coordinator: Flight SQL, the embedded scheduler and in-process executors.
    Serve(ServeArgs),
    /// Run an executor that joins a coordinator's scheduler.
    Executor(ExecutorArgs),
    /// Print the argon2id hash of a password read from stdin, for `[[auth.users]]`.
    HashPassword,
}

#[derive(clap::Args)]
struct ExecutorArgs {
    /// The coordinator's scheduler address (HOST:PORT).
    #[arg(long, env = "FLOE_SCHEDULER")]
    scheduler: String,
    /// Address of this executor's Flight service (the next port takes scheduled tasks).
    #[arg(long, env = "FLOE_EXECUTOR_BIND", default_value = "127.0.0.1:50051")]
    bind: SocketAddr,
    /// Concurrent tasks (default: number of CPUs).
    #[arg(long, env = "FLOE_EXECUTOR_SLOTS")]
    slots: Option<usize>,
    /// Memory all tasks may hold, in MiB, shared equally by the slots (default: three
    /// quarters of the machine's memory).
    #[arg(long, env = "FLOE_EXECUTOR_MEMORY_MB", value_parser = clap::value_parser!(u64).range(1..))]
    memory_mb: Option<u64>,
    /// Where stage outputs (shuffle and result files) are written (default: a directory
    /// under the system's temporary directory).
    #[arg(long, env = "FLOE_EXECUTOR_WORK_DIR")]
    work_dir: Option<std::path::PathBuf>,
    /// Seconds between the heartbeats that tell the coordinator this executor is alive
    /// (default 3; keep it well below the coordinator's executor_timeout_secs).
    #[arg(long, env = "FLOE_EXECUTOR_HEARTBEAT_SECS", value_parser = clap::value_parser!(u64).range(1..))]
    heartbeat_secs: Option<u64>,
    /// How this executor compresses the stage outputs it writes (default lz4: other
    /// machines fetch them as they are on disk).
    #[arg(
        long,
        env = "FLOE_SHUFFLE_COMPRESSION",
        value_enum,
        default_value = "lz4"
    )]
    shuffle_compression: ShuffleCompression,
}

/// Each runtime thread's stack. DataFusion plans and optimizes by recursion, as deep as a
/// plan is, and a thread that overflows its stack aborts the whole process: with the
/// default 2 MiB, a select list of 30 scalar subqueries did. (Only what a thread
/// touches is backed by memory.)
const PLANNING_STACK_BYTES: usize = 32 * 1024 * 1024;

fn main() -> ExitCode {
    library_backtraces_off_unless_asked();
    let cli = Cli::parse();
    init_logging();
    // rustls cannot pick a default when both ring and aws-lc-rs are linked in; `Err`
    // only says one is installed already.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_stack_size(PLANNING_STACK_BYTES)
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("floe: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async {
        match cli.command {
            Command::Serve(args) => floe::server::serve(ServeConfig::resolve(&args)?).await,
            Command::Executor(args) => executor(args).await,
            Command::HashPassword => hash_password(),
        }
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("floe: error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// iceberg captures a backtrace in every error it makes, and it makes some on ordinary
/// paths (one per manifest when it plans a scan): with `RUST_BACKTRACE=1`, set in many
/// containers, planning a table of 500 manifests took twice as long. Backtraces of
/// errors are off unless `RUST_LIB_BACKTRACE` asks for them; panics still print theirs
/// as `RUST_BACKTRACE` says.
fn library_backtraces_off_unless_asked() {
    if std::env::var_os("RUST_LIB_BACKTRACE").is_none() {
        // SAFETY: the first thing `main` does, before any other thread exists.
        unsafe { std::env::set_var("RUST_LIB_BACKTRACE", "0") };
    }
}

async fn executor(args: ExecutorArgs) -> Result<()> {
    let (host, port) = args
        .scheduler
        .rsplit_once(':')
        .and_then(|(h, p)| Some((h.to_string(), p.parse::<u16>().ok()?)))
        .ok_or_else(|| {
            FloeError::invalid(format!(
                "--scheduler: '{}' is not HOST:PORT",
                args.scheduler
            ))
        })?;
    let grpc_port =
        args.bind.port().checked_add(1).ok_or_else(|| {
            FloeError::invalid("--bind: the port must leave room for the next one")
        })?;
    run_executor(ExecutorOptions {
        scheduler_host: host,
        scheduler_port: port,
        bind: args.bind,
        grpc_port,
        slots: args.slots.unwrap_or_else(cpus),
        memory_limit: args
            .memory_mb
            .map(|mb| mb * 1024 * 1024)
            .or_else(|| memory_share(0.75)),
        work_dir: args.work_dir,
        heartbeat: args
            .heartbeat_secs
            .map_or(floe::cluster::HEARTBEAT, std::time::Duration::from_secs),
        shuffle_compression: args.shuffle_compression,
    })
    .await
}

/// Reads one line (the password) from stdin and prints its hash.
fn hash_password() -> Result<()> {
    let mut line = String::new();
    std::io::stdin()
        .read_line(&mut line)
        .map_err(|e| FloeError::invalid(format!("reading the password from stdin: {e}")))?;
    let password = line.strip_suffix('\n').unwrap_or(&line);
    let password = password.strip_suffix('\r').unwrap_or(password);
    println!("{}", floe::auth::password::hash(password)?);
    Ok(())
}

const SECRET_LOGGING_TARGETS: &[&str] = &["reqsign", "reqsign_core", "reqsign_aws_v4"];

fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| {
        tracing_subscriber::EnvFilter::new(
            "info,ballista=warn,ballista_core=warn,ballista_scheduler=warn,ballista_executor=warn,datafusion=warn,iceberg=warn,sqlx=warn,h2=warn,tower=warn",
        )
    });
    // These libraries print credentials at debug level (reqsign: the S3 key pair it
    // signs with), so they never log below info, whatever RUST_LOG says.
    let filter = SECRET_LOGGING_TARGETS
        .iter()
        .fold(filter, |filter, target| {
            match format!("{target}=info").parse() {
                Ok(directive) => filter.add_directive(directive),
                Err(_) => filter,
            }
        });
    let logs = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    // FLOE_LOG_FORMAT=json: one JSON object per line, for log collectors.
    match std::env::var("FLOE_LOG_FORMAT").as_deref() {
        Ok("json") => logs.json().init(),
        _ => logs.with_ansi(std::io::stderr().is_terminal()).init(),
    }
}
