//! Tables kept warm across statements. Every statement loads its tables again (a table
//! may have changed since the last one), and each load is a new `Table` whose manifest
//! cache starts empty. A table loaded again at the same metadata file, with the same
//! storage properties, is the same table: the earlier `Table` is used instead, and its
//! scans plan from manifests already read.
//!
//! A catalog that tells a table's metadata file without loading it (a SQL catalog) is
//! not even asked to load a table kept at that file ([`kept_at`]): the file is neither
//! read nor parsed again.
//!
//! The same goes for a table rebuilt to plan on the statement's runtime
//! ([`on_current_runtime`]), kept while that runtime lives.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex, Weak};

use iceberg::TableIdent;
use iceberg::table::Table;

use crate::error::Result;

/// Tables kept at most (each holds its own bounded manifest cache).
const KEPT: usize = 16;

/// (metadata location, sorted storage properties).
type Key = (String, Vec<(String, String)>);

static TABLES: LazyLock<Mutex<HashMap<Key, Table>>> = LazyLock::new(Mutex::default);

/// A table rebuilt on a runtime, and whether that runtime still runs.
type Rebuilt = (Table, Weak<()>);

static REBUILT: LazyLock<Mutex<HashMap<Key, Rebuilt>>> = LazyLock::new(Mutex::default);

/// The table as loaded before at the same metadata and storage, else `table` (kept).
pub fn warm(table: Table) -> Table {
    let Some(key) = key(&table) else {
        return table;
    };
    let mut tables = TABLES.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(kept) = tables.get(&key) {
        return kept.clone();
    }
    if tables.len() >= KEPT {
        tables.clear();
    }
    tables.insert(key, table.clone());
    table
}

/// The table kept as `ident` loaded at `metadata_location`, whatever its storage
/// properties: for catalogs that give every table the same ones (see
/// `FloeCatalog::metadata_location`), where a table is known by its metadata file alone
/// and need not be loaded to be found here.
pub fn kept_at(ident: &TableIdent, metadata_location: &str) -> Option<Table> {
    let tables = TABLES.lock().unwrap_or_else(|e| e.into_inner());
    tables
        .iter()
        .find(|((location, _), table)| location == metadata_location && table.identifier() == ident)
        .map(|(_, table)| table.clone())
}

/// The table, planning on the runtime this statement runs on. Iceberg's planner spawns
/// its work on the table's runtime and, when that runtime is gone, returns an empty
/// stream rather than an error. The table rebuilt on this runtime is kept (with its
/// manifest cache) for as long as the runtime runs.
pub fn on_current_runtime(table: &Table) -> Result<Table> {
    let key = key(table);
    let mut rebuilt = REBUILT.lock().unwrap_or_else(|e| e.into_inner());
    rebuilt.retain(|_, (_, runtime)| runtime.strong_count() > 0);
    if let Some((kept, _)) = key.as_ref().and_then(|key| rebuilt.get(key)) {
        return Ok(kept.clone());
    }
    let mut builder = Table::builder()
        .file_io(table.file_io().clone())
        .identifier(table.identifier().clone())
        .metadata(table.metadata_ref())
        .runtime(iceberg::Runtime::try_current()?);
    if let Some(location) = table.metadata_location() {
        builder = builder.metadata_location(location);
    }
    let fresh = builder.build()?;
    if let Some(key) = key {
        if rebuilt.len() >= KEPT {
            rebuilt.clear();
        }
        rebuilt.insert(key, (fresh.clone(), runtime_liveness()));
    }
    Ok(fresh)
}

/// Alive while the current runtime runs: a task that never ends holds it, and the
/// runtime drops its tasks when it shuts down.
fn runtime_liveness() -> Weak<()> {
    let token = Arc::new(());
    let liveness = Arc::downgrade(&token);
    tokio::spawn(async move {
        let _token = token;
        std::future::pending::<()>().await
    });
    liveness
}

fn key(table: &Table) -> Option<Key> {
    let location = table.metadata_location()?;
    let mut props: Vec<(String, String)> = table
        .file_io()
        .config()
        .props()
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    props.sort();
    Some((location.to_string(), props))
}
