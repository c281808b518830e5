//! Iceberg catalog construction (SQL on SQLite by default, REST, memory) and the
//! storage properties that executors get instead of catalog access. Every catalog is
//! wrapped in a [`VerifiedCatalog`]: a change is acknowledged only once it is seen. The
//! result is a [`FloeCatalog`]: an Iceberg catalog that also takes Floe's own commits
//! (`commit`).

pub mod commit;
pub mod credentials;
pub mod rest;
pub mod rest_api;
pub mod storage;
pub mod verified;

use std::collections::HashMap;
use std::str::FromStr;
use std::sync::{Arc, LazyLock, Mutex};

use iceberg::io::{FileIO, FileIOBuilder};
use iceberg::memory::MemoryCatalogBuilder;
use iceberg::{Catalog, CatalogBuilder, NamespaceIdent};
use iceberg_catalog_sql::{
    SQL_CATALOG_PROP_BIND_STYLE, SQL_CATALOG_PROP_URI, SQL_CATALOG_PROP_WAREHOUSE,
    SqlCatalogBuilder,
};
use sqlx::ConnectOptions;
use sqlx::sqlite::SqliteConnectOptions;

use crate::config::{CatalogConfig, CatalogKind};
use crate::error::{FloeError, Result};
use commit::{BindStyle, Committer, FloeCatalog, SqlCommitter};
use rest::RefreshingRestCatalog;
use storage::FloeStorageFactory;
use verified::VerifiedCatalog;

/// The SQL schema every statement starts in; created on start.
pub const DEFAULT_NAMESPACE: &str = "default";

/// Builds the catalog described by `config`. Call inside the server's long-lived tokio
/// runtime: the catalog keeps a handle to it for all its I/O.
pub async fn connect(config: &CatalogConfig) -> Result<Arc<dyn FloeCatalog>> {
    let runtime = iceberg::Runtime::try_current()?;
    let mut props: HashMap<String, String> = config.properties.clone().into_iter().collect();
    props.insert(SQL_CATALOG_PROP_WAREHOUSE.into(), config.warehouse.clone());
    let (catalog, committer) = match config.kind {
        CatalogKind::Sql => {
            let (uri, bind_style) = if is_postgres(&config.uri) {
                (config.uri.clone(), BindStyle::DollarNumeric)
            } else {
                prepare_sqlite(&config.uri).await?;
                (with_create_mode(&config.uri), BindStyle::QMark)
            };
            props.insert(SQL_CATALOG_PROP_URI.into(), uri.clone());
            let style = match bind_style {
                BindStyle::QMark => "QMark",
                BindStyle::DollarNumeric => "DollarNumeric",
            };
            props.insert(SQL_CATALOG_PROP_BIND_STYLE.into(), style.into());
            let catalog = load(SqlCatalogBuilder::default(), &config.name, props, runtime)
                .await
                .map_err(|e| catalog_unreachable(config, e))?;
            let committer = SqlCommitter::connect(&uri, &config.name, bind_style).await?;
            (catalog, Committer::Sql(committer))
        }
        CatalogKind::Memory => {
            let catalog = load(
                MemoryCatalogBuilder::default(),
                &config.name,
                props,
                runtime,
            )
            .await?;
            let committer = Committer::Unsupported(
                "the memory catalog cannot commit this change (replace, overwrite); use the \
                 SQL catalog"
                    .to_string(),
            );
            (catalog, committer)
        }
        CatalogKind::Rest => {
            props.insert("uri".into(), config.uri.clone());
            if config.warehouse.is_empty() {
                props.remove(SQL_CATALOG_PROP_WAREHOUSE);
            }
            let catalog = RefreshingRestCatalog::connect(&config.name, props, runtime).await?;
            (
                catalog.clone() as Arc<dyn Catalog>,
                Committer::Rest(catalog),
            )
        }
    };
    let catalog: Arc<dyn FloeCatalog> = Arc::new(VerifiedCatalog::new(catalog, committer));
    ensure_namespace(catalog.as_ref(), DEFAULT_NAMESPACE).await?;
    Ok(catalog)
}

async fn load<B: CatalogBuilder>(
    builder: B,
    name: &str,
    props: HashMap<String, String>,
    runtime: iceberg::Runtime,
) -> Result<Arc<dyn Catalog>>
where
    B::C: 'static,
{
    let catalog = builder
        .with_storage_factory(Arc::new(FloeStorageFactory))
        .with_runtime(runtime)
        .load(name, props)
        .await?;
    Ok(Arc::new(catalog))
}

async fn ensure_namespace(catalog: &dyn Catalog, name: &str) -> Result<()> {
    let ident = NamespaceIdent::new(name.to_string());
    if !catalog.namespace_exists(&ident).await? {
        match catalog.create_namespace(&ident, HashMap::new()).await {
            Ok(_) => {}
            Err(e) if e.kind() == iceberg::ErrorKind::NamespaceAlreadyExists => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

/// A shared SQL catalog on PostgreSQL (several coordinators may use it at once).
pub fn is_postgres(uri: &str) -> bool {
    uri.starts_with("postgres://") || uri.starts_with("postgresql://")
}

/// The catalog could not be reached; the message names it without its URI's password.
fn catalog_unreachable(config: &CatalogConfig, e: FloeError) -> FloeError {
    FloeError::new(
        e.kind,
        format!(
            "catalog '{}' at {}: {}",
            config.name,
            crate::config::redacted_uri(&config.uri),
            e.message
        ),
    )
}

/// sqlx needs `mode=rwc` to create a missing database file.
fn with_create_mode(uri: &str) -> String {
    if uri.contains("mode=") {
        uri.to_string()
    } else if uri.contains('?') {
        format!("{uri}&mode=rwc")
    } else {
        format!("{uri}?mode=rwc")
    }
}

/// Creates the SQLite file (and its directory) if missing, and adds the `iceberg_type`
/// column that catalogs made by pyiceberg 0.11 and older lack (iceberg-catalog-sql
/// fails every call without it).
async fn prepare_sqlite(uri: &str) -> Result<()> {
    let options = SqliteConnectOptions::from_str(uri)
        .map_err(|e| FloeError::invalid(format!("catalog.uri: {e}")))?
        .create_if_missing(true);
    if let Some(dir) = options.get_filename().parent() {
        std::fs::create_dir_all(dir).map_err(|e| {
            FloeError::invalid(format!("catalog.uri: cannot create {}: {e}", dir.display()))
        })?;
    }
    let mut conn = options
        .connect()
        .await
        .map_err(|e| FloeError::internal(format!("cannot open the catalog database: {e}")))?;
    let columns: Vec<(String,)> =
        sqlx::query_as("SELECT name FROM pragma_table_info('iceberg_tables')")
            .fetch_all(&mut conn)
            .await
            .map_err(|e| FloeError::internal(format!("reading the catalog database: {e}")))?;
    let has_table = !columns.is_empty();
    if has_table && !columns.iter().any(|(name,)| name == "iceberg_type") {
        tracing::info!("adding column iceberg_type to iceberg_tables (older pyiceberg catalog)");
        sqlx::query("ALTER TABLE iceberg_tables ADD COLUMN iceberg_type VARCHAR(5)")
            .execute(&mut conn)
            .await
            .map_err(|e| FloeError::internal(format!("upgrading the catalog database: {e}")))?;
    }
    Ok(())
}

/// What an executor needs to reach a table's files: storage properties only, never
/// catalog credentials. `Debug` shows property names, not values.
#[derive(Clone, Default, PartialEq)]
pub struct StorageSpec {
    pub props: HashMap<String, String>,
}

/// Storage property sets whose FileIO an executor keeps.
const FILE_IO_CACHE: usize = 64;

/// A property set as a map key.
type SortedProps = Vec<(String, String)>;

/// Property prefixes that configure storage access (the Iceberg/Java names, and Floe's
/// credential lease).
const STORAGE_PROP_PREFIXES: &[&str] = &["s3.", "client.", "gcs.", "adls.", "oss.", "floe."];

impl StorageSpec {
    /// The storage part of a table's FileIO configuration.
    pub fn from_file_io(file_io: &FileIO) -> Self {
        Self {
            props: storage_only(file_io.config().props()),
        }
    }

    /// A FileIO for the shipped properties (on executors). One per property set is kept
    /// for the process, so tasks share their storage clients (and connections); at most
    /// [`FILE_IO_CACHE`] sets, as vended credentials make new sets over time.
    pub fn file_io(&self) -> FileIO {
        static FILE_IOS: LazyLock<Mutex<HashMap<SortedProps, FileIO>>> =
            LazyLock::new(Mutex::default);
        let mut key: SortedProps = self.props.clone().into_iter().collect();
        key.sort();
        let mut cache = FILE_IOS
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if cache.len() >= FILE_IO_CACHE && !cache.contains_key(&key) {
            cache.clear();
        }
        cache
            .entry(key)
            .or_insert_with(|| {
                FileIOBuilder::new(Arc::new(FloeStorageFactory))
                    .with_props(self.props.clone())
                    .build()
            })
            .clone()
    }
}

/// The properties that configure storage access, without catalog ones (URIs,
/// credentials, tokens).
pub fn storage_only(props: &HashMap<String, String>) -> HashMap<String, String> {
    props
        .iter()
        .filter(|(k, _)| STORAGE_PROP_PREFIXES.iter().any(|p| k.starts_with(p)))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

impl std::fmt::Debug for StorageSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut keys: Vec<_> = self.props.keys().collect();
        keys.sort();
        f.debug_struct("StorageSpec").field("props", &keys).finish()
    }
}
