//! Configuration of `floe serve`: built-in defaults, then a TOML file (`--config`),
//! then `FLOE_…` environment variables, then command-line flags, each overriding the
//! one before. Unknown keys and bad values are refused at start with a message that
//! names the key.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

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
    pub target_partitions: Option<usize>,
    pub statement_timeout_secs: Option<u64>,
    pub catalog: Option<CatalogFileConfig>,
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
    /// Partitions a scan is split into at most (default: number of CPUs).
    #[arg(long, env = "FLOE_TARGET_PARTITIONS")]
    pub target_partitions: Option<usize>,
    /// Longest a statement's job may run, in seconds (default 0: no limit).
    #[arg(long, env = "FLOE_STATEMENT_TIMEOUT_SECS")]
    pub statement_timeout_secs: Option<u64>,
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
            .field("uri", &self.uri)
            .field("warehouse", &self.warehouse)
            .field("properties", &self.properties.keys().collect::<Vec<_>>())
            .finish()
    }
}

/// The resolved configuration of `floe serve`.
#[derive(Debug, Clone)]
pub struct ServeConfig {
    pub data_dir: PathBuf,
    pub flight_addr: SocketAddr,
    pub scheduler_addr: SocketAddr,
    pub local_executors: usize,
    pub executor_slots: usize,
    pub target_partitions: usize,
    /// Longest a statement's job may run; `None`: no limit.
    pub statement_timeout: Option<Duration>,
    pub catalog: CatalogConfig,
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
        let uri = args
            .catalog_uri
            .clone()
            .or(catalog_file.uri)
            .unwrap_or_else(|| format!("sqlite:{}", data_dir.join("catalog.db").display()));
        let warehouse = args
            .catalog_warehouse
            .clone()
            .or(catalog_file.warehouse)
            .unwrap_or_else(|| format!("file://{}", data_dir.join("warehouse").display()));
        if kind == CatalogKind::Sql && !uri.starts_with("sqlite:") {
            return Err(FloeError::invalid(format!(
                "catalog.uri: the sql catalog takes a sqlite: URI, got '{}'",
                uri.split(':').next().unwrap_or_default()
            )));
        }

        Ok(Self {
            data_dir,
            flight_addr,
            scheduler_addr,
            local_executors,
            executor_slots,
            target_partitions,
            statement_timeout,
            catalog: CatalogConfig {
                kind,
                name,
                uri,
                warehouse,
                properties: catalog_file.properties,
            },
        })
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
