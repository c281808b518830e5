//! Tables kept warm across statements. Every statement loads its tables again (a table
//! may have changed since the last one), and each load is a new `Table` whose manifest
//! cache starts empty. A table loaded again at the same metadata file, with the same
//! storage properties, is the same table: the earlier `Table` is used instead, and its
//! scans plan from manifests already read.

use std::collections::HashMap;
use std::sync::{LazyLock, Mutex};

use iceberg::table::Table;

/// Tables kept at most (each holds its own bounded manifest cache).
const KEPT: usize = 16;

/// (metadata location, sorted storage properties).
type Key = (String, Vec<(String, String)>);

static TABLES: LazyLock<Mutex<HashMap<Key, Table>>> = LazyLock::new(Mutex::default);

/// The table as loaded before at the same metadata and storage, else `table` (kept).
pub fn warm(table: Table) -> Table {
    let Some(location) = table.metadata_location() else {
        return table;
    };
    let mut props: Vec<(String, String)> = table
        .file_io()
        .config()
        .props()
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    props.sort();
    let key = (location.to_string(), props);
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
