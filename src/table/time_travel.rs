//! Reading a table as it was: `t VERSION AS OF <snapshot id>`, `t VERSION AS OF
//! '<tag or branch>'` and `t TIMESTAMP AS OF '<timestamp>'` (Spark/Databricks syntax). The statement's table reference is renamed
//! to carry what it asks for (`t$as-of$…`, see `sql::time_travel`); resolving that name
//! gives the table with the asked snapshot current and that snapshot's schema, so scans
//! read it as they read any table.

use iceberg::spec::{MAIN_BRANCH, SnapshotReference, SnapshotRetention, TableMetadataBuilder};
use iceberg::table::Table;

use crate::error::{FloeError, Result};

/// Separates a table's name from the snapshot asked for.
const MARK: &str = "$as-of$";

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AsOf {
    /// The snapshot with this id.
    Snapshot(i64),
    /// The snapshot a tag or the head of a branch names.
    Ref(String),
    /// The snapshot that was current at this time (milliseconds since the epoch).
    Time(i64),
}

impl AsOf {
    /// The name that stands for `table` as of `self`.
    pub fn name(&self, table: &str) -> String {
        match self {
            Self::Snapshot(id) => format!("{table}{MARK}v{id}"),
            Self::Ref(name) => format!("{table}{MARK}r{name}"),
            Self::Time(ms) => format!("{table}{MARK}t{ms}"),
        }
    }

    /// `(table, as of)` for a name made by [`Self::name`].
    pub fn split(name: &str) -> Option<(&str, Self)> {
        let (table, asked) = name.rsplit_once(MARK)?;
        let as_of = match asked.split_at_checked(1)? {
            ("v", id) => Self::Snapshot(id.parse().ok()?),
            ("r", name) => Self::Ref(name.to_string()),
            ("t", ms) => Self::Time(ms.parse().ok()?),
            _ => return None,
        };
        Some((table, as_of))
    }

    /// `table` with the asked snapshot as its current one, and that snapshot's schema.
    pub fn apply(&self, table: &Table) -> Result<Table> {
        let metadata = table.metadata();
        let snapshot_id = match self {
            Self::Ref(name) => metadata
                .snapshot_for_ref(name)
                .map(|s| s.snapshot_id())
                .ok_or_else(|| {
                    FloeError::not_found(format!(
                        "table {} has no branch or tag '{name}'",
                        table.identifier()
                    ))
                })?,
            Self::Snapshot(id) => metadata
                .snapshot_by_id(*id)
                .map(|s| s.snapshot_id())
                .ok_or_else(|| {
                    FloeError::not_found(format!(
                        "table {} has no snapshot {id}",
                        table.identifier()
                    ))
                })?,
            Self::Time(ms) => metadata
                .history()
                .iter()
                .filter(|entry| entry.timestamp_ms <= *ms)
                .max_by_key(|entry| entry.timestamp_ms)
                .map(|entry| entry.snapshot_id)
                .ok_or_else(|| {
                    FloeError::not_found(format!(
                        "table {} has no snapshot at or before {}",
                        table.identifier(),
                        timestamp_text(*ms)
                    ))
                })?,
        };
        let snapshot = metadata
            .snapshot_by_id(snapshot_id)
            .ok_or_else(|| FloeError::internal(format!("snapshot {snapshot_id} is gone")))?;
        let schema_id = snapshot
            .schema_id()
            .unwrap_or_else(|| metadata.current_schema_id());
        let main = SnapshotReference::new(
            snapshot_id,
            SnapshotRetention::Branch {
                min_snapshots_to_keep: None,
                max_snapshot_age_ms: None,
                max_ref_age_ms: None,
            },
        );
        let as_of = TableMetadataBuilder::new_from_metadata(metadata.clone(), None)
            .set_ref(MAIN_BRANCH, main)?
            .set_current_schema(schema_id)?
            .build()?
            .metadata;
        // No metadata location: this is no file's table, and must not be taken for the
        // table at its location (see `warm`).
        Ok(Table::builder()
            .file_io(table.file_io().clone())
            .identifier(table.identifier().clone())
            .metadata(as_of)
            .runtime(iceberg::Runtime::try_current()?)
            .build()?)
    }
}

fn timestamp_text(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .map(|t| t.to_rfc3339())
        .unwrap_or_else(|| format!("{ms} ms"))
}
