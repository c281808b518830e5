//! The write journal: crash safety for the files of writes in flight.
//!
//! Before a write's tasks create a file, the coordinator records the write (its table,
//! id and directory, see `write_protocol`) as one small file in the journal directory
//! (`DATA_DIR/journal/<write id>.json`, written whole and renamed into place). The
//! entry is removed once the write's outcome is settled: committed, or its directory
//! deleted. A coordinator that dies in between leaves the entry, and the next start
//! settles it ([`recover`]): a write whose id is in a snapshot summary was committed (only
//! its staging files are deleted); any other write's directory is deleted — unless a
//! snapshot references a file in it, which is then kept. An entry whose table cannot
//! be loaded (the catalog is down) is kept for the next start.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::{SystemTime, UNIX_EPOCH};

use iceberg::table::Table;
use iceberg::{Catalog, NamespaceIdent, TableIdent};
use serde::{Deserialize, Serialize};

use super::commit::rows_of_committed_write;
use super::maintenance::referenced_files;
use super::write_protocol::{delete_all, staging_location, write_location};
use crate::error::{FloeError, Result};

static JOURNAL: OnceLock<PathBuf> = OnceLock::new();

/// One write in flight.
#[derive(Debug, Serialize, Deserialize)]
struct Entry {
    namespace: Vec<String>,
    table: String,
    write_id: String,
    /// The write's directory.
    location: String,
    /// When the write began, in milliseconds since the Unix epoch.
    started_ms: u64,
}

/// Journals this process's writes in `dir` (created if missing). Without it (an
/// executor, a test of the library) writes are not journaled.
pub fn open(dir: &Path) -> Result<()> {
    std::fs::create_dir_all(dir).map_err(|e| {
        FloeError::invalid(format!(
            "cannot create the write journal {}: {e}",
            dir.display()
        ))
    })?;
    let _ = JOURNAL.set(dir.to_path_buf());
    Ok(())
}

fn entry_path(dir: &Path, write_id: &str) -> PathBuf {
    dir.join(format!("{write_id}.json"))
}

/// Records that write `write_id` into `table` may create files from now on.
pub fn begin(table: &Table, write_id: &str) -> Result<()> {
    let Some(dir) = JOURNAL.get() else {
        return Ok(());
    };
    let ident = table.identifier();
    let entry = Entry {
        namespace: ident.namespace().clone().inner(),
        table: ident.name().to_string(),
        write_id: write_id.to_string(),
        location: write_location(table.metadata(), write_id),
        started_ms: SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or(0),
    };
    let path = entry_path(dir, write_id);
    let temporary = path.with_extension("tmp");
    let journaled = serde_json::to_vec(&entry)
        .map_err(std::io::Error::other)
        .and_then(|json| std::fs::write(&temporary, json))
        .and_then(|()| std::fs::rename(&temporary, &path));
    journaled.map_err(|e| {
        FloeError::unavailable(format!(
            "cannot record the write in the journal {}: {e}; nothing was written",
            dir.display()
        ))
    })
}

/// Forgets write `write_id`: its outcome is settled.
pub fn end(write_id: &str) {
    if let Some(dir) = JOURNAL.get() {
        let path = entry_path(dir, write_id);
        if let Err(e) = std::fs::remove_file(&path)
            && e.kind() != std::io::ErrorKind::NotFound
        {
            tracing::warn!(
                "cannot remove {} from the write journal: {e}",
                path.display()
            );
        }
    }
}

/// The directories of the writes this coordinator has in flight.
pub fn in_flight() -> Vec<String> {
    match JOURNAL.get() {
        Some(dir) => entries(dir)
            .unwrap_or_default()
            .into_iter()
            .map(|(_, entry)| entry.location)
            .collect(),
        None => Vec::new(),
    }
}

/// What [`recover`] did.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Recovered {
    /// Writes found committed.
    pub committed: usize,
    /// Writes not committed, whose directories were deleted.
    pub discarded: usize,
    /// Entries kept for the next start (their table could not be read).
    pub kept: usize,
}

/// Settles the writes a previous run of this coordinator left in the journal.
pub async fn recover(catalog: &dyn Catalog) -> Result<Recovered> {
    let Some(dir) = JOURNAL.get() else {
        return Ok(Recovered::default());
    };
    let mut recovered = Recovered::default();
    for (path, entry) in entries(dir)? {
        match settle(catalog, &entry).await {
            Ok(Some(committed)) => {
                match committed {
                    true => recovered.committed += 1,
                    false => recovered.discarded += 1,
                }
                let _ = std::fs::remove_file(&path);
            }
            Ok(None) => {
                let _ = std::fs::remove_file(&path);
            }
            Err(e) => {
                tracing::warn!(
                    write_id = entry.write_id,
                    "an unfinished write stays in the journal for the next start: {e}"
                );
                recovered.kept += 1;
            }
        }
    }
    Ok(recovered)
}

fn entries(dir: &Path) -> Result<Vec<(PathBuf, Entry)>> {
    let listing = std::fs::read_dir(dir).map_err(|e| {
        FloeError::internal(format!("reading the write journal {}: {e}", dir.display()))
    })?;
    let mut entries = Vec::new();
    for file in listing.flatten() {
        let path = file.path();
        if path.extension().is_some_and(|ext| ext == "tmp") {
            // Never renamed into place: the write had not begun.
            let _ = std::fs::remove_file(&path);
            continue;
        }
        match std::fs::read(&path).map(|bytes| serde_json::from_slice::<Entry>(&bytes)) {
            Ok(Ok(entry)) => entries.push((path, entry)),
            Ok(Err(e)) => tracing::warn!("{}: not a journal entry: {e}", path.display()),
            Err(e) => tracing::warn!("reading {}: {e}", path.display()),
        }
    }
    Ok(entries)
}

/// Settles one write: `Some(true)` committed, `Some(false)` discarded, `None` its
/// table is gone (so are its files, or they are no table's).
async fn settle(catalog: &dyn Catalog, entry: &Entry) -> Result<Option<bool>> {
    let namespace = NamespaceIdent::from_vec(entry.namespace.clone())
        .map_err(|e| FloeError::internal(e.to_string()))?;
    let ident = TableIdent::new(namespace, entry.table.clone());
    if !catalog.table_exists(&ident).await? {
        return Ok(None);
    }
    let table = catalog.load_table(&ident).await?;
    if rows_of_committed_write(&table, &entry.write_id).is_some() {
        let staging = staging_location(table.metadata(), &entry.write_id);
        delete_all(table.file_io(), &[staging]).await;
        tracing::info!(write_id = entry.write_id, table = %ident, "journal: the write was committed");
        return Ok(Some(true));
    }
    let prefix = format!("{}/", entry.location.trim_end_matches('/'));
    let referenced = referenced_files(&table).await?;
    if referenced.iter().any(|file| file.starts_with(&prefix)) {
        tracing::warn!(
            write_id = entry.write_id,
            table = %ident,
            "journal: a snapshot references files of a write without its id; they are kept"
        );
        return Ok(Some(true));
    }
    delete_all(table.file_io(), std::slice::from_ref(&entry.location)).await;
    tracing::info!(
        write_id = entry.write_id,
        table = %ident,
        location = entry.location,
        "journal: the write was not committed; its files were deleted"
    );
    Ok(Some(false))
}

/// Ends the process abruptly at `point` if `FLOE_CRASH_POINT` names it: the crash tests
/// kill the coordinator at exact points of a write this way.
pub fn crash_point(point: &str) {
    if std::env::var("FLOE_CRASH_POINT").is_ok_and(|at| at == point) {
        eprintln!("FLOE_CRASH_POINT: crashing at {point}");
        std::process::abort();
    }
}
