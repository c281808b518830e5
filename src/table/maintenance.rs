//! Table maintenance: which files a compaction rewrites, expiring snapshots, and
//! finding orphan files.
//!
//! Compaction itself is a distributed rewrite like a copy-on-write DELETE's (see
//! `sql::procedures`); here is only its choice of files. Expiring snapshots removes
//! them from the table's metadata in one commit and then deletes the files that only
//! they referenced: manifest lists, manifests, data and delete files. A file that a
//! kept snapshot, or a write not yet committed, uses is never deleted.

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};

use futures::TryStreamExt;
use iceberg::spec::{DataContentType, MAIN_BRANCH, SnapshotRef, Struct};
use iceberg::table::Table;
use iceberg::{TableRequirement, TableUpdate};

use super::metadata_tables::named_refs;
use crate::catalog::commit::{FloeCatalog, TableChanges};
use crate::catalog::storage::list_files;
use crate::error::Result;

/// What a compaction rewrites: the data files of the current snapshot smaller than
/// `target_size` in each partition holding at least `min_input_files` of them, and
/// every data file with delete files (the rewrite applies them).
pub async fn compaction_candidates(
    table: &Table,
    target_size: u64,
    min_input_files: usize,
) -> Result<Candidates> {
    let Some(snapshot) = table.metadata().current_snapshot() else {
        return Ok(Candidates::default());
    };
    let tasks: Vec<_> = table
        .scan()
        .snapshot_id(snapshot.snapshot_id())
        .select_empty()
        .build()?
        .plan_files()
        .await?
        .try_collect()
        .await?;
    let mut small: HashMap<Partition, Vec<(String, u64)>> = HashMap::new();
    let mut chosen = Candidates::default();
    for task in tasks {
        let size = task.file_size_in_bytes;
        if !task.deletes.is_empty() {
            chosen.add(task.data_file_path, size);
            continue;
        }
        if size < target_size {
            let spec = task.partition_spec.as_ref().map_or(0, |s| s.spec_id());
            small
                .entry((spec, task.partition))
                .or_default()
                .push((task.data_file_path, size));
        }
    }
    for files in small.into_values() {
        if files.len() >= min_input_files.max(1) {
            for (path, size) in files {
                chosen.add(path, size);
            }
        }
    }
    Ok(chosen)
}

/// A partition: its spec's id and its values.
type Partition = (i32, Option<Struct>);

/// Data files chosen for a rewrite.
#[derive(Debug, Default)]
pub struct Candidates {
    pub files: HashSet<String>,
    pub bytes: u64,
}

impl Candidates {
    fn add(&mut self, path: String, size: u64) {
        if self.files.insert(path) {
            self.bytes += size;
        }
    }
}

/// What expiring snapshots removed.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Expired {
    pub snapshots: u64,
    pub data_files: u64,
    pub delete_files: u64,
    pub manifests: u64,
    pub manifest_lists: u64,
}

/// Expires the snapshots of `table` older than `older_than_ms`, keeping the
/// `retain_last` newest, the current one and every branch's and tag's; deletes the
/// files only expired snapshots referenced. If another commit lands first, nothing is
/// expired and the call answers `ABORTED`.
pub async fn expire_snapshots(
    catalog: &dyn FloeCatalog,
    table: &Table,
    older_than_ms: i64,
    retain_last: usize,
) -> Result<Expired> {
    let metadata = table.metadata();
    let mut snapshots: Vec<&SnapshotRef> = metadata.snapshots().collect();
    snapshots.sort_by_key(|s| std::cmp::Reverse((s.timestamp_ms(), s.sequence_number())));
    let referenced: HashSet<i64> = named_refs(table)?.values().map(|r| r.snapshot_id).collect();
    let keep = |(i, s): &(usize, &SnapshotRef)| {
        *i < retain_last.max(1)
            || s.timestamp_ms() >= older_than_ms
            || referenced.contains(&s.snapshot_id())
            || metadata.current_snapshot_id() == Some(s.snapshot_id())
    };
    let (kept, expired): (Vec<_>, Vec<_>) = snapshots.into_iter().enumerate().partition(keep);
    let kept: Vec<&SnapshotRef> = kept.into_iter().map(|(_, s)| s).collect();
    let expired: Vec<&SnapshotRef> = expired.into_iter().map(|(_, s)| s).collect();
    if expired.is_empty() {
        return Ok(Expired::default());
    }
    let still_used = files_of(table, &kept).await?;
    let gone = files_of(table, &expired).await?;

    let changes = TableChanges::of_table(
        metadata,
        [TableRequirement::RefSnapshotIdMatch {
            r#ref: MAIN_BRANCH.to_string(),
            snapshot_id: metadata.current_snapshot_id(),
        }],
        vec![TableUpdate::RemoveSnapshots {
            snapshot_ids: expired.iter().map(|s| s.snapshot_id()).collect(),
        }],
    );
    // A concurrent commit fails the requirement: ABORTED, nothing expired.
    catalog.commit_changes(table.identifier(), &changes).await?;

    let mut result = Expired {
        snapshots: expired.len() as u64,
        ..Expired::default()
    };
    let unused = |set: &HashSet<String>, used: &HashSet<String>| -> Vec<String> {
        set.difference(used).cloned().collect()
    };
    for path in unused(&gone.data, &still_used.data) {
        result.data_files += delete(table, &path).await;
    }
    for path in unused(&gone.deletes, &still_used.deletes) {
        result.delete_files += delete(table, &path).await;
    }
    for path in unused(&gone.manifests, &still_used.manifests) {
        result.manifests += delete(table, &path).await;
    }
    for path in unused(&gone.manifest_lists, &still_used.manifest_lists) {
        result.manifest_lists += delete(table, &path).await;
    }
    Ok(result)
}

/// Deletes a file no snapshot references any more; 1 if it was deleted.
async fn delete(table: &Table, path: &str) -> u64 {
    match table.file_io().delete(path).await {
        Ok(()) => 1,
        Err(e) => {
            tracing::warn!("expire_snapshots: could not delete {path}: {e}");
            0
        }
    }
}

/// The data and delete files any snapshot of `table` references.
pub(crate) async fn referenced_files(table: &Table) -> Result<HashSet<String>> {
    let snapshots: Vec<&SnapshotRef> = table.metadata().snapshots().collect();
    let files = files_of(table, &snapshots).await?;
    Ok(files.data.into_iter().chain(files.deletes).collect())
}

/// Every file some of `snapshots` reference.
#[derive(Default)]
struct Files {
    manifest_lists: HashSet<String>,
    manifests: HashSet<String>,
    data: HashSet<String>,
    deletes: HashSet<String>,
}

async fn files_of(table: &Table, snapshots: &[&SnapshotRef]) -> Result<Files> {
    let mut files = Files::default();
    for snapshot in snapshots {
        files
            .manifest_lists
            .insert(snapshot.manifest_list().to_string());
        let list = table.manifest_list_reader(snapshot).load().await?;
        for manifest_file in list.entries() {
            if !files.manifests.insert(manifest_file.manifest_path.clone()) {
                continue; // Its files are counted already.
            }
            let manifest = manifest_file.load_manifest(table.file_io()).await?;
            for entry in manifest.entries().iter().filter(|e| e.is_alive()) {
                let path = entry.file_path().to_string();
                match entry.content_type() {
                    DataContentType::Data => files.data.insert(path),
                    _ => files.deletes.insert(path),
                };
            }
        }
    }
    Ok(files)
}

/// What `remove_orphan_files` looks at under a table's location: every file of `data/`,
/// and the manifests, manifest lists and metadata files of `metadata/` (anything else
/// there — version hints, checksums — is left alone).
fn may_be_orphan(relative: &str) -> bool {
    relative.starts_with("data/")
        || (relative.starts_with("metadata/")
            && (relative.ends_with(".avro") || relative.ends_with(".metadata.json")))
}

/// The files under `table`'s location that nothing references — no snapshot (data,
/// delete, manifest and manifest list files), no metadata file in the log, no statistics
/// file, no write in flight (`in_flight`: write directories) — and that were last changed
/// before `older_than_ms`, which keeps any write still running elsewhere safe.
pub async fn orphan_files(
    table: &Table,
    older_than_ms: i64,
    in_flight: &[String],
) -> Result<Vec<String>> {
    let metadata = table.metadata();
    let root = metadata.location().trim_end_matches('/');
    let snapshots: Vec<&SnapshotRef> = metadata.snapshots().collect();
    let files = files_of(table, &snapshots).await?;
    let mut referenced: HashSet<Cow<str>> = files
        .data
        .iter()
        .chain(&files.deletes)
        .chain(&files.manifests)
        .chain(&files.manifest_lists)
        .map(String::as_str)
        .chain(
            metadata
                .metadata_log()
                .iter()
                .map(|m| m.metadata_file.as_str()),
        )
        .chain(
            metadata
                .statistics_iter()
                .map(|s| s.statistics_path.as_str()),
        )
        .chain(
            metadata
                .partition_statistics_iter()
                .map(|s| s.statistics_path.as_str()),
        )
        .chain(table.metadata_location())
        .map(comparable)
        .collect();
    referenced.shrink_to_fit();
    let in_flight: Vec<String> = in_flight
        .iter()
        .map(|dir| format!("{}/", comparable(dir).trim_end_matches('/')))
        .collect();
    let listed = list_files(table.file_io(), root).await?;
    let root = comparable(root);
    Ok(listed
        .into_iter()
        .filter(|(path, modified_ms)| {
            let path = comparable(path);
            let relative = path
                .strip_prefix(root.as_ref())
                .unwrap_or(&path)
                .trim_start_matches('/');
            may_be_orphan(relative)
                && *modified_ms < older_than_ms
                && !referenced.contains(&path)
                && !in_flight.iter().any(|dir| path.starts_with(dir.as_str()))
        })
        .map(|(path, _)| path)
        .collect())
}

/// Deletes `paths` (orphans of `table`); returns how many were deleted.
pub async fn delete_files(table: &Table, paths: &[String]) -> u64 {
    let mut deleted = 0;
    for path in paths {
        deleted += delete(table, path).await;
    }
    deleted
}

/// A path as it compares with others: a local one without its `file:` scheme, an S3
/// one under `s3://` whichever of Hadoop's names (`s3a:`, `s3n:`) it is written with —
/// the same object must never look unreferenced for being spelled otherwise.
pub fn comparable(location: &str) -> Cow<'_, str> {
    for hadoop in ["s3a://", "s3n://"] {
        if let Some(rest) = location.strip_prefix(hadoop) {
            return Cow::Owned(format!("s3://{rest}"));
        }
    }
    let path = location
        .strip_prefix("file://")
        .or_else(|| location.strip_prefix("file:"))
        .unwrap_or(location);
    Cow::Borrowed(match path.starts_with('/') {
        true => path,
        false => location,
    })
}
