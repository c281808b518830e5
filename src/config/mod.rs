//! Configuration of `floe serve`: built-in defaults, then a TOML file (`--config`),
//! then `FLOE_…` environment variables, then command-line flags, each overriding the
//! one before. Unknown keys and bad values are refused at start with a message that
//! names the key.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use crate::cluster::ShuffleCompression;
use crate::error::{FloeError, Result};

/// The file form: every key optional, unknown keys refused.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileConfig {
    pub data_dir: Option<PathBuf>,
    pub flight_addr: Option<String>,
    pub scheduler_addr: Option<String>,
    pub local_executors: Option<usize>,
    pub executor_slots: Option<usize>,
    pub executor_memory_mb: Option<u64>,
    pub shuffle_compression: Option<ShuffleCompression>,
    pub shuffle_memory_mb: Option<u64>,
    pub target_partitions: Option<usize>,
    pub statement_timeout_secs: Option<u64>,
    pub executor_wait_secs: Option<u64>,
    pub executor_timeout_secs: Option<u64>,
    pub max_concurrent_statements: Option<usize>,
    pub statement_queue_timeout_secs: Option<u64>,
    pub local_query_max_bytes: Option<u64>,
    pub metrics_addr: Option<String>,
    pub tls_cert: Option<PathBuf>,
    pub tls_key: Option<PathBuf>,
    pub tls_client_ca: Option<PathBuf>,
    pub catalog: Option<CatalogFileConfig>,
    pub auth: Option<AuthFileConfig>,
}

/// `[auth]`: present means every call must be authenticated.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuthFileConfig {
    pub jwt_secret_file: Option<PathBuf>,
    pub token_ttl_secs: Option<u64>,
    #[serde(default)]
    pub users: Vec<UserConfig>,
}

/// `[[auth.users]]`: a user, their password hash and their grants.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UserConfig {
    pub name: String,
    /// argon2id PHC string, as `floe hash-password` prints it.
    pub password_hash: Secret,
    /// Namespaces the user may read; `"*"` is all.
    #[serde(default)]
    pub read: Vec<String>,
    /// Namespaces the user may change (DDL and DML); `"*"` is all.
    #[serde(default)]
    pub write: Vec<String>,
}

/// A value that must never be printed: `Debug` shows only that it is there.
#[derive(Clone, Deserialize)]
#[serde(transparent)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }

    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(redacted)")
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CatalogFileConfig {
    #[serde(rename = "type")]
    pub kind: Option<String>,
    pub name: Option<String>,
    pub uri: Option<String>,
    pub warehouse: Option<String>,
    /// Extra catalog properties passed through to the catalog implementation.
    #[serde(default)]
    pub properties: BTreeMap<String, String>,
}

/// Values given on the command line or through `FLOE_…` variables (clap reads both).
#[derive(Debug, Default, Clone, clap::Args)]
pub struct ServeArgs {
    /// TOML configuration file.
    #[arg(long, env = "FLOE_CONFIG")]
    pub config: Option<PathBuf>,
    /// Directory of the embedded default: `catalog.db` and `warehouse/` (default ./floe-data).
    #[arg(long, env = "FLOE_DATA_DIR")]
    pub data_dir: Option<PathBuf>,
    /// Flight SQL listen address (default 127.0.0.1:32010).
    #[arg(long, env = "FLOE_FLIGHT_ADDR")]
    pub flight_addr: Option<String>,
    /// Address where remote executors register (default 127.0.0.1:50050).
    #[arg(long, env = "FLOE_SCHEDULER_ADDR")]
    pub scheduler_addr: Option<String>,
    /// In-process executors (default 1; 0 = only remote executors).
    #[arg(long, env = "FLOE_LOCAL_EXECUTORS")]
    pub local_executors: Option<usize>,
    /// Task slots of each in-process executor (default: number of CPUs).
    #[arg(long, env = "FLOE_EXECUTOR_SLOTS")]
    pub executor_slots: Option<usize>,
    /// Memory all in-process executors' tasks may hold, in MiB, shared equally by their
    /// slots (default: half the machine's memory).
    #[arg(long, env = "FLOE_EXECUTOR_MEMORY_MB")]
    pub executor_memory_mb: Option<u64>,
    /// How in-process executors compress the stage outputs they write (default none: the
    /// tasks and the coordinator of this machine read them from the page cache)
    #[arg(long, env = "FLOE_SHUFFLE_COMPRESSION", value_enum)]
    pub shuffle_compression: Option<ShuffleCompression>,
    /// Memory in MiB that in-process executors may keep stage outputs (the jobs' results
    /// aside) in, instead of files, for the tasks of this process to read (default: an
    /// eighth of the machine's memory; 0 = always files).
    #[arg(long, env = "FLOE_SHUFFLE_MEMORY_MB")]
    pub shuffle_memory_mb: Option<u64>,
    /// Partitions a scan is split into at most (default: number of CPUs).
    #[arg(long, env = "FLOE_TARGET_PARTITIONS")]
    pub target_partitions: Option<usize>,
    /// Longest a statement's job may run, in seconds (default 0: no limit).
    #[arg(long, env = "FLOE_STATEMENT_TIMEOUT_SECS")]
    pub statement_timeout_secs: Option<u64>,
    /// How long a running statement waits while no executor is alive before it fails
    /// with UNAVAILABLE, in seconds (default 30).
    #[arg(long, env = "FLOE_EXECUTOR_WAIT_SECS")]
    pub executor_wait_secs: Option<u64>,
    /// An executor not heard from for this long is lost: its tasks run elsewhere, in
    /// seconds (default 15; executors send a heartbeat every 3).
    #[arg(long, env = "FLOE_EXECUTOR_TIMEOUT_SECS")]
    pub executor_timeout_secs: Option<u64>,
    /// Statements that run at once; more wait for a place (default 64; 0: no limit).
    #[arg(long, env = "FLOE_MAX_CONCURRENT_STATEMENTS")]
    pub max_concurrent_statements: Option<usize>,
    /// How long a statement waits for a place before it is refused with
    /// RESOURCE_EXHAUSTED, in seconds (default 30).
    #[arg(long, env = "FLOE_STATEMENT_QUEUE_TIMEOUT_SECS")]
    pub statement_queue_timeout_secs: Option<u64>,
    /// A query whose scans read at most this many bytes (of the columns it reads, in the
    /// data files left after pruning) runs on the coordinator instead of as a job
    /// (default 16 MiB; 0: every query is a job).
    #[arg(long, env = "FLOE_LOCAL_QUERY_MAX_BYTES")]
    pub local_query_max_bytes: Option<u64>,
    /// HTTP address of /metrics, /health and /ready (default 127.0.0.1:9464; off: none).
    #[arg(long, env = "FLOE_METRICS_ADDR")]
    pub metrics_addr: Option<String>,
    /// PEM certificate chain: serve Flight SQL over TLS (with --tls-key).
    #[arg(long, env = "FLOE_TLS_CERT")]
    pub tls_cert: Option<PathBuf>,
    /// PEM private key of --tls-cert.
    #[arg(long, env = "FLOE_TLS_KEY")]
    pub tls_key: Option<PathBuf>,
    /// PEM CA certificates: clients must present a certificate they signed (mTLS).
    #[arg(long, env = "FLOE_TLS_CLIENT_CA")]
    pub tls_client_ca: Option<PathBuf>,
    /// File holding the secret that signs bearer tokens ([auth]; or FLOE_JWT_SECRET).
    #[arg(long, env = "FLOE_JWT_SECRET_FILE")]
    pub jwt_secret_file: Option<PathBuf>,
    /// Lifetime of bearer tokens in seconds ([auth]; default 3600).
    #[arg(long, env = "FLOE_TOKEN_TTL_SECS")]
    pub token_ttl_secs: Option<u64>,
    /// Catalog implementation: sql, rest or memory (default sql).
    #[arg(long, env = "FLOE_CATALOG_TYPE")]
    pub catalog_type: Option<String>,
    /// Catalog name, also the SQL catalog name (default floe).
    #[arg(long, env = "FLOE_CATALOG_NAME")]
    pub catalog_name: Option<String>,
    /// Catalog URI (sql: a sqlite:/ URI; default DATA_DIR/catalog.db).
    #[arg(long, env = "FLOE_CATALOG_URI")]
    pub catalog_uri: Option<String>,
    /// Warehouse location (default file://DATA_DIR/warehouse).
    #[arg(long, env = "FLOE_CATALOG_WAREHOUSE")]
    pub catalog_warehouse: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CatalogKind {
    Sql,
    Rest,
    Memory,
}

/// Catalog settings. `Debug` is written by hand: properties may hold secrets.
#[derive(Clone)]
pub struct CatalogConfig {
    pub kind: CatalogKind,
    pub name: String,
    pub uri: String,
    pub warehouse: String,
    pub properties: BTreeMap<String, String>,
}

impl std::fmt::Debug for CatalogConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CatalogConfig")
            .field("kind", &self.kind)
            .field("name", &self.name)
            .field("uri", &redacted_uri(&self.uri))
            .field("warehouse", &self.warehouse)
            .field("properties", &self.properties.keys().collect::<Vec<_>>())
            .finish()
    }
}

/// `uri` without the password it may carry (`postgres://user:secret@host/db`).
pub fn redacted_uri(uri: &str) -> String {
    let Some((scheme, rest)) = uri.split_once("://") else {
        return uri.to_string();
    };
    let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    match authority.rsplit_once('@') {
        Some((user_info, host)) => match user_info.split_once(':') {
            Some((user, _password)) => format!("{scheme}://{user}:***@{host}{path}"),
            None => uri.to_string(),
        },
        None => uri.to_string(),
    }
}

/// `[auth]`, resolved.
#[derive(Debug, Clone)]
pub struct AuthConfig {
    pub jwt_secret: Secret,
    pub token_ttl: Duration,
    pub users: Vec<UserConfig>,
}

/// TLS for the Flight SQL listener.
#[derive(Debug, Clone)]
pub struct TlsConfig {
    pub cert: PathBuf,
    pub key: PathBuf,
    /// Clients must present a certificate signed by one of these.
    pub client_ca: Option<PathBuf>,
}

/// The shortest `executor_timeout_secs`: a few missed heartbeats.
const MIN_EXECUTOR_TIMEOUT: Duration = Duration::from_secs(6);

/// The environment variable that may hold the token signing secret itself.
const JWT_SECRET_ENV: &str = "FLOE_JWT_SECRET";

/// The resolved configuration of `floe serve`.
#[derive(Debug, Clone)]
pub struct ServeConfig {
    pub data_dir: PathBuf,
    pub flight_addr: SocketAddr,
    pub scheduler_addr: SocketAddr,
    pub local_executors: usize,
    pub executor_slots: usize,
    /// Memory the tasks of each in-process executor may hold, in bytes; `None`: no limit.
    pub executor_memory: Option<u64>,
    pub shuffle_compression: ShuffleCompression,
    /// Bytes in-process executors may keep stage outputs in (0: none).
    pub shuffle_memory: u64,
    pub target_partitions: usize,
    /// Longest a statement's job may run; `None`: no limit.
    pub statement_timeout: Option<Duration>,
    /// Longest a running statement waits while no executor is alive.
    pub executor_wait: Duration,
    /// An executor not heard from for this long is lost.
    pub executor_timeout: Duration,
    /// Statements that run at once (0: no limit).
    pub max_concurrent_statements: usize,
    /// Longest a statement waits for a place.
    pub statement_queue_timeout: Duration,
    /// Queries reading at most this many bytes run on the coordinator (0: none).
    pub local_query_max_bytes: u64,
    /// Where /metrics, /health and /ready are served; `None`: nowhere.
    pub metrics_addr: Option<SocketAddr>,
    pub catalog: CatalogConfig,
    /// `None`: authentication is off (only allowed on a loopback address).
    pub auth: Option<AuthConfig>,
    pub tls: Option<TlsConfig>,
}

pub fn cpus() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
}

impl ServeConfig {
    /// Resolves defaults, the config file (if any), environment and flags.
    pub fn resolve(args: &ServeArgs) -> Result<Self> {
        let file = match &args.config {
            Some(path) => read_file_config(path)?,
            None => FileConfig::default(),
        };
        let catalog_file = file.catalog.unwrap_or_default();

        let data_dir = args
            .data_dir
            .clone()
            .or(file.data_dir)
            .unwrap_or_else(|| PathBuf::from("floe-data"));
        let data_dir = absolute(&data_dir)?;

        let flight_addr = parse_addr(
            "flight_addr",
            args.flight_addr.clone().or(file.flight_addr),
            "127.0.0.1:32010",
        )?;
        let scheduler_addr = parse_addr(
            "scheduler_addr",
            args.scheduler_addr.clone().or(file.scheduler_addr),
            "127.0.0.1:50050",
        )?;
        let local_executors = args.local_executors.or(file.local_executors).unwrap_or(1);
        let executor_slots = positive(
            "executor_slots",
            args.executor_slots
                .or(file.executor_slots)
                .unwrap_or_else(cpus),
        )?;
        let executor_memory = match args.executor_memory_mb.or(file.executor_memory_mb) {
            Some(0) => return Err(FloeError::invalid("executor_memory_mb: must be at least 1")),
            Some(mb) => Some(mb * 1024 * 1024),
            None => crate::cluster::memory_share(0.5),
        }
        .map(|total| total / local_executors.max(1) as u64);
        let target_partitions = positive(
            "target_partitions",
            args.target_partitions
                .or(file.target_partitions)
                .unwrap_or_else(cpus),
        )?;

        let statement_timeout = args
            .statement_timeout_secs
            .or(file.statement_timeout_secs)
            .filter(|secs| *secs > 0)
            .map(Duration::from_secs);
        let executor_wait = Duration::from_secs(positive(
            "executor_wait_secs",
            args.executor_wait_secs
                .or(file.executor_wait_secs)
                .unwrap_or(30) as usize,
        )? as u64);

        let executor_timeout = Duration::from_secs(
            args.executor_timeout_secs
                .or(file.executor_timeout_secs)
                .unwrap_or(15),
        );
        if executor_timeout < MIN_EXECUTOR_TIMEOUT {
            return Err(FloeError::invalid(format!(
                "executor_timeout_secs: at least {} (executors send a heartbeat every {} s; a \
                 busy executor must not be taken for lost)",
                MIN_EXECUTOR_TIMEOUT.as_secs(),
                crate::cluster::HEARTBEAT.as_secs()
            )));
        }
        let max_concurrent_statements = args
            .max_concurrent_statements
            .or(file.max_concurrent_statements)
            .unwrap_or(64);
        let local_query_max_bytes = args
            .local_query_max_bytes
            .or(file.local_query_max_bytes)
            .unwrap_or(DEFAULT_LOCAL_QUERY_MAX_BYTES);
        let statement_queue_timeout = Duration::from_secs(
            args.statement_queue_timeout_secs
                .or(file.statement_queue_timeout_secs)
                .unwrap_or(30),
        );
        let metrics_addr = match args.metrics_addr.clone().or(file.metrics_addr) {
            Some(off) if off == "off" => None,
            addr => Some(parse_addr("metrics_addr", addr, "127.0.0.1:9464")?),
        };

        let kind = match args
            .catalog_type
            .clone()
            .or(catalog_file.kind)
            .as_deref()
            .unwrap_or("sql")
        {
            "sql" => CatalogKind::Sql,
            "rest" => CatalogKind::Rest,
            "memory" => CatalogKind::Memory,
            other => {
                return Err(FloeError::invalid(format!(
                    "catalog.type: unknown catalog type '{other}' (expected sql, rest or memory)"
                )));
            }
        };
        let name = args
            .catalog_name
            .clone()
            .or(catalog_file.name)
            .unwrap_or_else(|| "floe".to_string());
        if name.is_empty() || name.contains('.') {
            return Err(FloeError::invalid(format!(
                "catalog.name: '{name}' is not a valid catalog name"
            )));
        }
        let uri = args.catalog_uri.clone().or(catalog_file.uri);
        let warehouse = args.catalog_warehouse.clone().or(catalog_file.warehouse);
        let (uri, warehouse) = match kind {
            // A REST catalog knows where its tables go; the warehouse names one of its
            // warehouses, if it has several.
            CatalogKind::Rest => (
                uri.filter(|uri| uri.starts_with("http://") || uri.starts_with("https://"))
                    .ok_or_else(|| {
                        FloeError::invalid(
                            "catalog.uri: the rest catalog needs its http:// or https:// URI",
                        )
                    })?,
                warehouse.unwrap_or_default(),
            ),
            _ => (
                uri.unwrap_or_else(|| format!("sqlite:{}", data_dir.join("catalog.db").display())),
                warehouse
                    .unwrap_or_else(|| format!("file://{}", data_dir.join("warehouse").display())),
            ),
        };
        if kind == CatalogKind::Sql
            && !uri.starts_with("sqlite:")
            && !crate::catalog::is_postgres(&uri)
        {
            return Err(FloeError::invalid(format!(
                "catalog.uri: the sql catalog takes a sqlite: or postgres:// URI, got '{}'",
                uri.split(':').next().unwrap_or_default()
            )));
        }

        let auth = file.auth.map(|auth| resolve_auth(args, auth)).transpose()?;
        if auth.is_none() && !flight_addr.ip().is_loopback() {
            return Err(FloeError::invalid(format!(
                "flight_addr: {flight_addr} is reachable from other machines, and anyone who \
                 reaches it could read and change every table: configure [auth] (users with \
                 passwords and grants) or listen on 127.0.0.1"
            )));
        }
        let tls = resolve_tls(
            args.tls_cert.clone().or(file.tls_cert),
            args.tls_key.clone().or(file.tls_key),
            args.tls_client_ca.clone().or(file.tls_client_ca),
        )?;

        Ok(Self {
            auth,
            tls,
            data_dir,
            flight_addr,
            scheduler_addr,
            local_executors,
            executor_slots,
            executor_memory,
            shuffle_compression: args
                .shuffle_compression
                .or(file.shuffle_compression)
                .unwrap_or_default(),
            shuffle_memory: match args.shuffle_memory_mb.or(file.shuffle_memory_mb) {
                Some(mb) => mb.saturating_mul(1024 * 1024),
                None => crate::cluster::memory_share(0.125).unwrap_or(0),
            },
            target_partitions,
            statement_timeout,
            executor_wait,
            executor_timeout,
            max_concurrent_statements,
            statement_queue_timeout,
            local_query_max_bytes,
            metrics_addr,
            catalog: CatalogConfig {
                kind,
                name,
                uri,
                warehouse,
                properties: with_env_properties(catalog_file.properties),
            },
        })
    }
}

/// Catalog properties may also come from the environment, so that secrets need not be
/// in the file: `FLOE_CATALOG_PROPERTY_<NAME>`, where `__` in NAME stands for `.` and
/// `_` for `-`, lower-cased (`FLOE_CATALOG_PROPERTY_S3__SECRET_ACCESS_KEY` is
/// `s3.secret-access-key`). The environment overrides the file.
pub const CATALOG_PROPERTY_ENV_PREFIX: &str = "FLOE_CATALOG_PROPERTY_";

fn with_env_properties(mut properties: BTreeMap<String, String>) -> BTreeMap<String, String> {
    for (name, value) in std::env::vars() {
        if let Some(property) = name.strip_prefix(CATALOG_PROPERTY_ENV_PREFIX) {
            properties.insert(env_property_name(property), value);
        }
    }
    properties
}

fn env_property_name(name: &str) -> String {
    name.to_lowercase().replace("__", ".").replace('_', "-")
}

fn resolve_auth(args: &ServeArgs, file: AuthFileConfig) -> Result<AuthConfig> {
    if file.users.is_empty() {
        return Err(FloeError::invalid(
            "auth: no [[auth.users]]: nobody could log in",
        ));
    }
    let mut names = std::collections::BTreeSet::new();
    for user in &file.users {
        if user.name.is_empty() || !names.insert(user.name.as_str()) {
            return Err(FloeError::invalid(format!(
                "auth.users: user name '{}' is empty or given twice",
                user.name
            )));
        }
        if !crate::auth::password::is_valid_hash(user.password_hash.expose()) {
            return Err(FloeError::invalid(format!(
                "auth.users: the password_hash of '{}' is not an argon2 hash (make one with \
                 `floe hash-password`)",
                user.name
            )));
        }
    }
    let secret_file = args.jwt_secret_file.clone().or(file.jwt_secret_file);
    let jwt_secret = match (std::env::var(JWT_SECRET_ENV).ok(), secret_file) {
        (Some(secret), _) => Secret::new(secret.trim()),
        (None, Some(path)) => {
            let text = std::fs::read_to_string(&path).map_err(|e| {
                FloeError::invalid(format!(
                    "auth.jwt_secret_file: cannot read {}: {e}",
                    path.display()
                ))
            })?;
            Secret::new(text.trim())
        }
        (None, None) => {
            tracing::warn!(
                "auth: no jwt_secret_file or {JWT_SECRET_ENV}; tokens are signed with a key \
                 made at start and stop working when the server restarts"
            );
            Secret::new(
                uuid::Uuid::new_v4().simple().to_string()
                    + &uuid::Uuid::new_v4().simple().to_string(),
            )
        }
    };
    if jwt_secret.expose().len() < 32 {
        return Err(FloeError::invalid(
            "auth: the JWT signing secret must be at least 32 bytes",
        ));
    }
    let ttl = args.token_ttl_secs.or(file.token_ttl_secs).unwrap_or(3600);
    Ok(AuthConfig {
        jwt_secret,
        token_ttl: Duration::from_secs(positive("auth.token_ttl_secs", ttl as usize)? as u64),
        users: file.users,
    })
}

fn resolve_tls(
    cert: Option<PathBuf>,
    key: Option<PathBuf>,
    client_ca: Option<PathBuf>,
) -> Result<Option<TlsConfig>> {
    match (cert, key) {
        (Some(cert), Some(key)) => Ok(Some(TlsConfig {
            cert,
            key,
            client_ca,
        })),
        (None, None) if client_ca.is_none() => Ok(None),
        (None, None) => Err(FloeError::invalid(
            "tls_client_ca: needs tls_cert and tls_key (the server's own certificate)",
        )),
        _ => Err(FloeError::invalid(
            "tls_cert and tls_key: give both (the certificate and its private key)",
        )),
    }
}

fn read_file_config(path: &Path) -> Result<FileConfig> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        FloeError::invalid(format!("cannot read config file {}: {e}", path.display()))
    })?;
    parse_file_config(&text)
        .map_err(|e| FloeError::invalid(format!("config file {}: {e}", path.display())))
}

/// Parses the TOML form; the error quotes the offending line, so it names the key.
pub fn parse_file_config(text: &str) -> Result<FileConfig, String> {
    toml::from_str(text).map_err(|e| e.to_string())
}

fn parse_addr(key: &str, value: Option<String>, default: &str) -> Result<SocketAddr> {
    let value = value.unwrap_or_else(|| default.to_string());
    value.parse().map_err(|_| {
        FloeError::invalid(format!(
            "{key}: '{value}' is not an address of the form IP:PORT"
        ))
    })
}

/// Enough for a point lookup or a small dimension table; little for one core to read.
const DEFAULT_LOCAL_QUERY_MAX_BYTES: u64 = 16 * 1024 * 1024;

fn positive(key: &str, value: usize) -> Result<usize> {
    if value == 0 {
        return Err(FloeError::invalid(format!("{key}: must be at least 1")));
    }
    Ok(value)
}

fn absolute(path: &Path) -> Result<PathBuf> {
    std::path::absolute(path)
        .map_err(|e| FloeError::invalid(format!("data_dir: {}: {e}", path.display())))
}
