//! The one commit of a write, done on the coordinator after its job succeeded, and the
//! clean-up of data files when the job or the commit fails.

use std::collections::HashMap;
use std::path::Path;

use datafusion::arrow::array::{Array, Int32Array, RecordBatch, StringArray};
use iceberg::Catalog;
use iceberg::spec::{DataFile, deserialize_data_file_from_json};
use iceberg::table::Table;
use iceberg::transaction::{ApplyTransactionAction, Transaction};

use super::write::{DATA_FILE_COLUMN, SPEC_ID_COLUMN};
use crate::error::{FloeError, Result};

/// Snapshot summary key recording which write produced a snapshot.
pub const WRITE_ID_PROPERTY: &str = "floe.write-id";

/// A written data file as reported by a write task.
pub struct WrittenFile {
    pub json: String,
    pub spec_id: i32,
}

/// Reads the descriptor rows a write job returned.
pub fn written_files(batches: &[RecordBatch]) -> Result<Vec<WrittenFile>> {
    let mut files = Vec::new();
    for batch in batches {
        let json = column::<StringArray>(batch, DATA_FILE_COLUMN)?;
        let spec_ids = column::<Int32Array>(batch, SPEC_ID_COLUMN)?;
        for row in 0..batch.num_rows() {
            files.push(WrittenFile {
                json: json.value(row).to_string(),
                spec_id: spec_ids.value(row),
            });
        }
    }
    Ok(files)
}

fn column<'a, T: 'static>(batch: &'a RecordBatch, name: &str) -> Result<&'a T> {
    batch
        .column_by_name(name)
        .and_then(|c| c.as_any().downcast_ref::<T>())
        .ok_or_else(|| FloeError::internal(format!("write descriptor without column {name}")))
}

/// Appends `files` to the table in one snapshot tagged with `write_id`; returns the
/// number of rows added. `planned` is the table as the statement saw it: if its schema
/// or partition spec changed since, the files no longer fit and the commit is refused.
/// Committing the same write twice adds nothing the second time.
pub async fn commit_append(
    catalog: &dyn Catalog,
    planned: &Table,
    write_id: &str,
    files: &[WrittenFile],
) -> Result<u64> {
    let table = catalog.load_table(planned.identifier()).await?;
    let metadata = table.metadata();
    if let Some(rows) = rows_of_committed_write(&table, write_id) {
        return Ok(rows);
    }
    if metadata.current_schema_id() != planned.metadata().current_schema_id()
        || metadata.default_partition_spec_id() != planned.metadata().default_partition_spec_id()
    {
        return Err(FloeError::internal(format!(
            "table {} changed its schema or partitioning while the INSERT ran; nothing was committed",
            planned.identifier()
        )));
    }
    let data_files = decode(&table, files)?;
    let rows = data_files.iter().map(DataFile::record_count).sum();
    if data_files.is_empty() {
        return Ok(0);
    }
    let properties = HashMap::from([(WRITE_ID_PROPERTY.to_string(), write_id.to_string())]);
    let tx = Transaction::new(&table);
    let tx = tx
        .fast_append()
        .set_snapshot_properties(properties)
        .with_check_duplicate(false)
        .add_data_files(data_files)
        .apply(tx)?;
    if let Err(e) = tx.commit(catalog).await {
        // The commit may have landed even though the call failed (a lost response):
        // the write id in the snapshot summary tells.
        let table = catalog.load_table(planned.identifier()).await?;
        return rows_of_committed_write(&table, write_id).ok_or(e.into());
    }
    Ok(rows)
}

fn decode(table: &Table, files: &[WrittenFile]) -> Result<Vec<DataFile>> {
    let metadata = table.metadata();
    let spec_id = metadata.default_partition_spec_id();
    files
        .iter()
        .map(|file| {
            if file.spec_id != spec_id {
                return Err(FloeError::internal(format!(
                    "data file written for partition spec {} but the table's spec is {spec_id}",
                    file.spec_id
                )));
            }
            Ok(deserialize_data_file_from_json(
                &file.json,
                spec_id,
                metadata.default_partition_type(),
                metadata.current_schema(),
            )?)
        })
        .collect()
}

/// Rows added by the snapshot of `write_id`, if that write is already committed.
fn rows_of_committed_write(table: &Table, write_id: &str) -> Option<u64> {
    table.metadata().snapshots().find_map(|snapshot| {
        let summary = snapshot.summary();
        (summary.additional_properties.get(WRITE_ID_PROPERTY)? == write_id).then(|| {
            summary
                .additional_properties
                .get("added-records")
                .and_then(|n| n.parse().ok())
                .unwrap_or(0)
        })
    })
}

/// Deletes the data files of a write whose commit failed.
pub async fn delete_written_files(table: &Table, files: &[WrittenFile]) {
    let metadata = table.metadata();
    for file in files {
        let decoded = deserialize_data_file_from_json(
            &file.json,
            file.spec_id,
            metadata.default_partition_type(),
            metadata.current_schema(),
        );
        if let Ok(data_file) = decoded
            && let Err(e) = table.file_io().delete(data_file.file_path()).await
        {
            tracing::warn!("could not delete uncommitted data file: {e}");
        }
    }
}

/// Deletes every file under `data_location` whose name starts with `write_id`: what a
/// failed write job left behind, whichever task wrote it. Local warehouses only for now.
pub fn delete_write_leftovers(data_location: &str, write_id: &str) -> usize {
    let Some(root) = local_path(data_location) else {
        tracing::warn!("cannot list {data_location} to clean up write {write_id}");
        return 0;
    };
    let mut deleted = 0;
    let mut pending = vec![root.to_path_buf()];
    while let Some(dir) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                pending.push(path);
            } else if entry.file_name().to_string_lossy().starts_with(write_id)
                && std::fs::remove_file(&path).is_ok()
            {
                deleted += 1;
            }
        }
    }
    deleted
}

fn local_path(location: &str) -> Option<&Path> {
    let path = location
        .strip_prefix("file://")
        .or_else(|| location.strip_prefix("file:"))
        .unwrap_or(location);
    (path.starts_with('/')).then(|| Path::new(path))
}
