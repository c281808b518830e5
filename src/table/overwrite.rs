//! Overwrite snapshots: one commit that removes files of the current snapshot and adds a
//! write's files (operation `overwrite`), optionally with a new schema or partition spec
//! in the same commit. iceberg 0.10.1 has no such action: the manifests, manifest list
//! and snapshot are written here with its public writers and committed through Floe's
//! own commit path (`catalog::commit`).
//!
//! Which files go is a [`Removal`]: every file (a replace, a whole-table INSERT
//! OVERWRITE), the files of the partitions written (dynamic partition overwrite), or
//! exactly given files (copy-on-write DELETE/UPDATE).
//!
//! Delete files go too when every data file they could apply to goes ([`KeptData`]).
//! Manifests that lose no file are kept as they are; a manifest that loses files is
//! rewritten with the files it keeps as `EXISTING` and the removed ones as `DELETED`
//! (so the snapshot records what it removed, as Java and pyiceberg do). Totals in the
//! summary are counted from the files of the new snapshot, not carried over. Removed
//! files are not deleted: older snapshots still reference them (expiring snapshots is
//! table maintenance).
//!
//! Concurrency: the commit requires the table's `main` branch to still be at the
//! snapshot the removal was computed from. If another commit landed first, the removal
//! is computed again from the table as it is then (bounded), so for `All` and
//! `Partitions` a concurrent append committed first is overwritten too (ours is simply
//! later); for `Files`, a file that is no longer in the table means a concurrent commit
//! touched it and the overwrite fails with `ABORTED`, as it does where a delete file
//! committed since the write read the table conflicts with it ([`SinceRead`]).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::Duration;

use futures::TryStreamExt;
use iceberg::expr::Predicate;
use iceberg::scan::FileScanTask;
use iceberg::spec::{
    DataContentType, DataFile, FormatVersion, MAIN_BRANCH, Manifest, ManifestContentType,
    ManifestEntry, ManifestFile, ManifestListWriter, ManifestWriter, ManifestWriterBuilder,
    Operation, PartitionSpec, Schema, SchemaRef, Snapshot, SnapshotReference, SnapshotRetention,
    Struct, Summary, TableMetadata,
};
use iceberg::table::Table;
use iceberg::{TableRequirement, TableUpdate};

use super::commit::{
    CommitOutcome, WRITE_ID_PROPERTY, WrittenFile, decode, decode_unresolved, not_committed,
    resolve, rows_of_committed_write,
};
use super::position_deletes::{UNRESOLVED_SPEC_ID, in_partition, positions_deleted_in};
use crate::catalog::commit::{FloeCatalog, TableChanges, apply_changes, with_metadata};
use crate::error::{FloeError, Result};

/// How many times an overwrite is rebuilt after losing to a concurrent commit.
pub const OVERWRITE_ATTEMPTS: usize = 4;

const RETRY_PAUSE: Duration = Duration::from_millis(100);

/// Which live files of the current snapshot an overwrite removes.
#[derive(Debug, Clone)]
pub enum Removal {
    /// Every data and delete file.
    All,
    /// The data and delete files (of the default partition spec) in the partitions the
    /// overwrite writes to.
    Partitions,
    /// Exactly these files (paths); each must still be in the table.
    Files(HashSet<String>),
    /// None: the write adds delete files (merge-on-read), whose data files must still
    /// be in the table.
    Nothing,
}

/// What an overwrite commit does besides adding the write's files.
#[derive(Debug, Clone)]
pub struct Overwrite {
    pub removal: Removal,
    /// Changes to the table's metadata committed with the snapshot (a new schema,
    /// partition spec or sort order). The write must have been planned against the
    /// table with these applied ([`staged_table`]).
    pub metadata_updates: Vec<TableUpdate>,
    /// The snapshot's operation: `overwrite`, or `replace` for a rewrite that keeps
    /// the table's rows as they are (compaction).
    pub operation: Operation,
    /// Serializable isolation: the commit fails if a data file committed since the
    /// write read the table may hold rows matching this (rows the statement would have
    /// changed had it seen them).
    pub serializable: Option<Predicate>,
}

impl Overwrite {
    /// An `overwrite` snapshot removing `removal`, without metadata changes.
    pub fn of(removal: Removal) -> Self {
        Self {
            removal,
            metadata_updates: Vec::new(),
            operation: Operation::Overwrite,
            serializable: None,
        }
    }

    /// The same overwrite, failing on rows committed since the write read the table that
    /// match `predicate` (see [`Overwrite::serializable`]).
    pub fn serializable_over(self, predicate: Predicate) -> Self {
        Self {
            serializable: Some(predicate),
            ..self
        }
    }
}

/// The table with `updates` applied, not committed: what a write whose commit changes
/// the schema or partitioning is planned against.
pub fn staged_table(table: &Table, updates: &[TableUpdate]) -> Result<Table> {
    let changes = TableChanges {
        requirements: Vec::new(),
        updates: updates.to_vec(),
    };
    let (metadata, _) = apply_changes(table, &changes)?;
    Ok(with_metadata(
        table,
        metadata,
        table.metadata_location_result()?,
    )?)
}

/// Commits `files` as an overwrite snapshot tagged with `write_id`. `planned` is the
/// table the write was planned against (with `overwrite.metadata_updates` applied): if
/// the table's schema or partitioning changed since, the files no longer fit and the
/// commit is refused with `ABORTED`. Committing the same write twice does nothing the
/// second time.
pub async fn commit_overwrite(
    catalog: &dyn FloeCatalog,
    planned: &Table,
    write_id: &str,
    files: &[WrittenFile],
    overwrite: &Overwrite,
) -> CommitOutcome {
    for attempt in 1..=OVERWRITE_ATTEMPTS {
        let table = match catalog.load_table(planned.identifier()).await {
            Ok(table) => table,
            Err(e) => return CommitOutcome::NotCommitted(not_committed(e.into())),
        };
        if let Some(rows) = rows_of_committed_write(&table, write_id) {
            return CommitOutcome::Committed(rows);
        }
        let built = match build(&table, planned, write_id, files, overwrite).await {
            Ok(built) => built,
            Err(e) => return CommitOutcome::NotCommitted(not_committed(e)),
        };
        match catalog
            .commit_changes(planned.identifier(), &built.changes)
            .await
        {
            Ok(_) => return CommitOutcome::Committed(built.rows),
            Err(e) if e.kind() == iceberg::ErrorKind::CatalogCommitConflicts => {
                tracing::info!(
                    write_id,
                    attempt,
                    "overwrite lost to a concurrent commit: {e}"
                );
                built.discard(&table).await;
                tokio::time::sleep(RETRY_PAUSE * attempt as u32).await;
            }
            Err(e) => {
                let outcome = resolve(catalog, planned, write_id, e).await;
                if matches!(outcome, CommitOutcome::NotCommitted(_)) {
                    built.discard(&table).await;
                }
                return outcome;
            }
        }
    }
    CommitOutcome::NotCommitted(FloeError::aborted(format!(
        "the write into {} lost to concurrent commits {OVERWRITE_ATTEMPTS} times; nothing \
         was committed, retrying is safe",
        planned.identifier()
    )))
}

/// The changes of one overwrite attempt and the metadata files written for it.
struct Built {
    changes: TableChanges,
    rows: u64,
    written: Vec<String>,
}

impl Built {
    /// Deletes the manifests and manifest list of an attempt that was not committed.
    async fn discard(&self, table: &Table) {
        for path in &self.written {
            if let Err(e) = table.file_io().delete(path).await {
                tracing::warn!("could not delete unused manifest {path}: {e}");
            }
        }
    }
}

async fn build(
    table: &Table,
    planned: &Table,
    write_id: &str,
    files: &[WrittenFile],
    overwrite: &Overwrite,
) -> Result<Built> {
    let base = table.metadata();
    let target = if overwrite.metadata_updates.is_empty() {
        base.clone()
    } else {
        staged_table(table, &overwrite.metadata_updates)?
            .metadata()
            .clone()
    };
    let planned_md = planned.metadata();
    if target.current_schema_id() != planned_md.current_schema_id()
        || target.current_schema().as_struct() != planned_md.current_schema().as_struct()
        || target.default_partition_spec_id() != planned_md.default_partition_spec_id()
    {
        return Err(FloeError::aborted(format!(
            "table {} changed its schema or partitioning while the write ran; nothing was \
             committed, retrying is safe",
            planned.identifier()
        )));
    }
    if base.format_version() > FormatVersion::V2 {
        return Err(FloeError::unimplemented(
            "overwriting a format-version 3 table is not supported yet",
        ));
    }
    let (unresolved, data): (Vec<WrittenFile>, Vec<WrittenFile>) = files
        .iter()
        .cloned()
        .partition(|f| f.spec_id == UNRESOLVED_SPEC_ID);
    let mut added = decode(&target, &data)?;
    added.extend(decode_unresolved(&target, &unresolved)?);
    let mut writer = SnapshotWriter::new(table, &target, write_id);
    match write_snapshot(&mut writer, planned, write_id, added, overwrite).await {
        Ok((snapshot, rows)) => Ok(Built {
            changes: changes(base, snapshot, &overwrite.metadata_updates),
            rows,
            written: writer.written,
        }),
        Err(e) => {
            writer.discard().await;
            Err(e)
        }
    }
}

/// Writes the new snapshot's manifests and manifest list; returns the snapshot and the
/// rows it adds.
async fn write_snapshot(
    writer: &mut SnapshotWriter<'_>,
    planned: &Table,
    write_id: &str,
    added: Vec<DataFile>,
    overwrite: &Overwrite,
) -> Result<(Snapshot, u64)> {
    let removal = &overwrite.removal;
    let table = writer.table;
    let removes = Removes::new(removal, &added, writer.target);
    let mut totals = Counts::default();
    let mut removed = Counts::default();
    let mut found = HashSet::new();
    let (added, deletes): (Vec<DataFile>, Vec<DataFile>) = added
        .into_iter()
        .partition(|f| f.content_type() == DataContentType::Data);
    let referenced: HashSet<String> = deletes
        .iter()
        .filter_map(|f| f.referenced_data_file())
        .collect();
    let mut partitions_of = HashMap::new();
    let mut concurrent = SinceRead::new(overwrite, &deletes, planned);
    if let Some(current) = table.metadata().current_snapshot() {
        let list = table.manifest_list_reader(current).load().await?;
        let mut manifests = Vec::new();
        for manifest_file in list.entries() {
            let manifest = manifest_file.load_manifest(table.file_io()).await?;
            manifests.push((manifest_file, manifest));
        }
        let live_data = KeptData::of(&manifests, &removes);
        for (manifest_file, manifest) in &manifests {
            let spec_id = manifest_file.partition_spec_id;
            let live = manifest
                .entries()
                .iter()
                .map(AsRef::as_ref)
                .filter(|e| e.is_alive());
            let live: Vec<&ManifestEntry> = live.collect();
            for entry in &live {
                concurrent.see(spec_id, entry);
                if referenced.contains(entry.file_path()) && !removes.matches(spec_id, entry) {
                    let partition = entry.data_file().partition().clone();
                    partitions_of.insert(entry.file_path().to_string(), (spec_id, partition));
                }
            }
            let (gone, kept): (Vec<&ManifestEntry>, Vec<&ManifestEntry>) =
                live.into_iter().partition(|e| {
                    removes.matches(spec_id, e) || !live_data.may_need(spec_id, e, writer.target)
                });
            kept.iter().for_each(|e| totals.add(e.data_file()));
            if gone.is_empty() {
                writer.manifests.push((*manifest_file).clone());
                continue;
            }
            for entry in &gone {
                removed.add(entry.data_file());
                found.insert(entry.file_path().to_string());
            }
            writer.rewrite(manifest_file, &kept, &gone).await?;
        }
    }
    if let Removal::Files(paths) = removal
        && let Some(missing) = paths.iter().find(|p| !found.contains(*p))
    {
        return Err(FloeError::aborted(format!(
            "{missing} is no longer in table {}: a concurrent commit changed it; nothing was \
             committed, retrying is safe",
            planned.identifier()
        )));
    }
    concurrent.check(table, writer.target, planned).await?;
    let deletes = deletes
        .iter()
        .map(|delete| resolve_partition(delete, &partitions_of, planned))
        .collect::<Result<Vec<_>>>()?;
    let mut added_counts = Counts::default();
    for file in added.iter().chain(deletes.iter().map(|(_, file)| file)) {
        added_counts.add(file);
        totals.add(file);
    }
    writer.add_files(added).await?;
    writer.add_delete_files(deletes).await?;
    let summary = summary(write_id, &added_counts, &removed, &totals);
    let summary = Summary {
        operation: operation(overwrite, &added_counts, &removed),
        ..summary
    };
    Ok((writer.finish(summary).await?, added_counts.data_records))
}

/// The snapshot's operation: an `overwrite` that adds no data file, only removes data
/// files or adds delete files, is a `delete`, as Iceberg's own `OverwriteFiles` and
/// `RowDelta` name it (a DELETE or TRUNCATE that drops whole files, a merge-on-read
/// DELETE); one that only adds data files is an `append` (a MERGE that only inserted,
/// committed with its isolation checked).
fn operation(overwrite: &Overwrite, added: &Counts, removed: &Counts) -> Operation {
    let deletes_only = added.data_files == 0 && (added.delete_files > 0 || removed.data_files > 0);
    let appends_only = matches!(overwrite.removal, Removal::Nothing)
        && added.delete_files == 0
        && removed.delete_files == 0;
    match &overwrite.operation {
        Operation::Overwrite if deletes_only => Operation::Delete,
        Operation::Overwrite if appends_only => Operation::Append,
        planned => planned.clone(),
    }
}

/// A delete file in the partition of the data file it applies to, which must still be
/// in the table.
fn resolve_partition(
    delete: &DataFile,
    partitions_of: &HashMap<String, (i32, Struct)>,
    planned: &Table,
) -> Result<(i32, DataFile)> {
    let data_file = delete.referenced_data_file().unwrap_or_default();
    let Some((spec_id, partition)) = partitions_of.get(&data_file) else {
        return Err(FloeError::aborted(format!(
            "{data_file} is no longer in table {}: a concurrent commit changed it; nothing \
             was committed, retrying is safe",
            planned.identifier()
        )));
    };
    Ok((*spec_id, in_partition(delete, partition.clone(), *spec_id)?))
}

/// Files committed since the write read the table that conflict with it. Delete files
/// (Iceberg's `validateNoConflictingDeleteFiles`): A write that rewrites data files
/// (copy-on-write, compaction) worked from their rows before such a delete, so any
/// newer delete of them would be undone: the deleted rows come back. A merge-on-read
/// write conflicts where both delete the same row: two UPDATEs of one row would each
/// add its new version; deletes of different rows of a file combine as they should.
/// Data files (`validateNoConflictingDataFiles`), under serializable isolation only:
/// one that may hold rows matching the statement's condition.
struct SinceRead<'a> {
    /// The data files the write rewrites.
    rewritten: HashSet<&'a str>,
    /// The data files the write deletes rows of, with its delete files for each.
    deleted_from: HashMap<String, Vec<&'a str>>,
    /// The partitions of both, as found in the current snapshot.
    partitions: HashSet<(i32, Struct)>,
    /// The data sequence number of the snapshot the write read.
    read_sequence: i64,
    /// Delete files newer than that snapshot, with their partition spec.
    newer: Vec<(i32, DataFile)>,
    /// Serializable isolation: the rows the statement changes, and the data files
    /// newer than that snapshot.
    serializable: Option<&'a Predicate>,
    appended: HashSet<String>,
}

impl<'a> SinceRead<'a> {
    fn new(overwrite: &'a Overwrite, deletes: &'a [DataFile], planned: &Table) -> Self {
        let mut deleted_from: HashMap<String, Vec<&str>> = HashMap::new();
        for delete in deletes {
            if let Some(data_file) = delete.referenced_data_file() {
                deleted_from
                    .entry(data_file)
                    .or_default()
                    .push(delete.file_path());
            }
        }
        Self {
            rewritten: match &overwrite.removal {
                Removal::Files(paths) => paths.iter().map(String::as_str).collect(),
                _ => HashSet::new(),
            },
            deleted_from,
            partitions: HashSet::new(),
            read_sequence: planned
                .metadata()
                .current_snapshot()
                .map_or(0, |snapshot| snapshot.sequence_number()),
            newer: Vec::new(),
            serializable: overwrite.serializable.as_ref(),
            appended: HashSet::new(),
        }
    }

    /// Notes a live entry of the current snapshot.
    fn see(&mut self, spec_id: i32, entry: &ManifestEntry) {
        let newer = entry.sequence_number().unwrap_or(0) > self.read_sequence;
        if newer && self.serializable.is_some() && entry.content_type() == DataContentType::Data {
            self.appended.insert(entry.file_path().to_string());
        }
        if self.rewritten.is_empty() && self.deleted_from.is_empty() {
            return;
        }
        if entry.content_type() == DataContentType::Data {
            let path = entry.file_path();
            if self.rewritten.contains(path) || self.deleted_from.contains_key(path) {
                let partition = entry.data_file().partition().clone();
                self.partitions.insert((spec_id, partition));
            }
        } else if newer {
            self.newer.push((spec_id, entry.data_file().clone()));
        }
    }

    /// Fails on the first newer delete file that conflicts.
    async fn check(&self, table: &Table, target: &TableMetadata, planned: &Table) -> Result<()> {
        for (spec_id, delete) in &self.newer {
            if self.conflicts(table, target, *spec_id, delete).await? {
                return Err(FloeError::aborted(format!(
                    "a concurrent commit deleted rows this write changes in table {} (delete \
                     file {}); nothing was committed, retrying is safe",
                    planned.identifier(),
                    delete.file_path()
                )));
            }
        }
        if let Some(predicate) = self.serializable
            && !self.appended.is_empty()
            && let Some(file) = files_matching(table, predicate)
                .await?
                .into_iter()
                .find(|file| self.appended.contains(file))
        {
            return Err(FloeError::aborted(format!(
                "a concurrent commit added rows this statement may have changed to table {} \
                 (data file {file}); nothing was committed, retrying is safe (the table \
                 property write.<delete|update|merge>.isolation-level = snapshot allows it)",
                planned.identifier()
            )));
        }
        Ok(())
    }

    async fn conflicts(
        &self,
        table: &Table,
        target: &TableMetadata,
        spec_id: i32,
        delete: &DataFile,
    ) -> Result<bool> {
        let Some(data_file) = delete.referenced_data_file() else {
            // An equality delete, or position deletes of several files: taken to
            // conflict wherever it may apply.
            return Ok(match target.partition_spec_by_id(spec_id) {
                Some(spec) if !spec.is_unpartitioned() => self
                    .partitions
                    .contains(&(spec_id, delete.partition().clone())),
                _ => true,
            });
        };
        if self.rewritten.contains(data_file.as_str()) {
            return Ok(true);
        }
        let Some(ours) = self.deleted_from.get(&data_file) else {
            return Ok(false);
        };
        let io = table.file_io();
        let theirs = positions_deleted_in(io, delete.file_path(), &data_file).await?;
        for path in ours {
            let mine = positions_deleted_in(io, path, &data_file).await?;
            if !mine.is_disjoint(&theirs) {
                return Ok(true);
            }
        }
        Ok(false)
    }
}

/// The data files of `table`'s current snapshot that may hold rows matching
/// `predicate`, by their partitions and column bounds.
async fn files_matching(table: &Table, predicate: &Predicate) -> Result<HashSet<String>> {
    let scan = table
        .scan()
        .select_empty()
        .with_filter(predicate.clone())
        .build()?;
    let tasks: Vec<FileScanTask> = scan.plan_files().await?.try_collect().await?;
    Ok(tasks.into_iter().map(|task| task.data_file_path).collect())
}

/// The partitions that keep live data files after the removal, by partition spec:
/// a delete file applies only to data files of its partition (or, in an unpartitioned
/// spec, to any) — or to the one data file it names — and to none of the files the
/// overwrite adds (their sequence number is higher), so one whose data files all go is
/// removed with them.
struct KeptData {
    partitions: HashSet<(i32, Struct)>,
    files: HashSet<String>,
    any: bool,
}

impl KeptData {
    fn of(manifests: &[(&ManifestFile, Manifest)], removes: &Removes) -> Self {
        let mut kept = Self {
            partitions: HashSet::new(),
            files: HashSet::new(),
            any: false,
        };
        for (manifest_file, manifest) in manifests {
            let spec_id = manifest_file.partition_spec_id;
            for entry in manifest.entries().iter().filter(|e| e.is_alive()) {
                if entry.content_type() == DataContentType::Data && !removes.matches(spec_id, entry)
                {
                    kept.any = true;
                    kept.partitions
                        .insert((spec_id, entry.data_file().partition().clone()));
                    kept.files.insert(entry.file_path().to_string());
                }
            }
        }
        kept
    }

    /// Whether `entry` (of a manifest of spec `spec_id`) may still apply to a data file.
    fn may_need(&self, spec_id: i32, entry: &ManifestEntry, target: &TableMetadata) -> bool {
        if entry.content_type() == DataContentType::Data {
            return true;
        }
        if let Some(data_file) = entry.data_file().referenced_data_file() {
            return self.files.contains(&data_file);
        }
        let unpartitioned = target
            .partition_spec_by_id(spec_id)
            .is_none_or(|spec| spec.is_unpartitioned());
        match unpartitioned {
            true => self.any,
            false => self
                .partitions
                .contains(&(spec_id, entry.data_file().partition().clone())),
        }
    }
}

/// Decides whether a live entry of the current snapshot is removed.
struct Removes<'a> {
    removal: &'a Removal,
    spec_id: i32,
    partitions: HashSet<Struct>,
}

impl<'a> Removes<'a> {
    fn new(removal: &'a Removal, added: &[DataFile], target: &TableMetadata) -> Self {
        let partitions = match removal {
            Removal::Partitions => added.iter().map(|f| f.partition().clone()).collect(),
            _ => HashSet::new(),
        };
        Self {
            removal,
            spec_id: target.default_partition_spec_id(),
            partitions,
        }
    }

    fn matches(&self, spec_id: i32, entry: &ManifestEntry) -> bool {
        match self.removal {
            Removal::All => true,
            Removal::Partitions => {
                spec_id == self.spec_id && self.partitions.contains(entry.data_file().partition())
            }
            Removal::Files(paths) => paths.contains(entry.file_path()),
            Removal::Nothing => false,
        }
    }
}

/// Writes the manifests and the manifest list of one new snapshot.
struct SnapshotWriter<'a> {
    table: &'a Table,
    target: &'a TableMetadata,
    write_id: &'a str,
    snapshot_id: i64,
    sequence_number: i64,
    manifests: Vec<ManifestFile>,
    /// Every file written so far (deleted again if the snapshot is not committed).
    written: Vec<String>,
}

impl<'a> SnapshotWriter<'a> {
    fn new(table: &'a Table, target: &'a TableMetadata, write_id: &'a str) -> Self {
        Self {
            table,
            target,
            write_id,
            snapshot_id: unique_snapshot_id(table.metadata()),
            sequence_number: table.metadata().next_sequence_number(),
            manifests: Vec::new(),
            written: Vec::new(),
        }
    }

    fn path(&self, name: &str) -> String {
        format!(
            "{}/metadata/{name}",
            self.table.metadata().location().trim_end_matches('/')
        )
    }

    fn manifest_writer(
        &mut self,
        schema: SchemaRef,
        spec: PartitionSpec,
        content: ManifestContentType,
    ) -> Result<ManifestWriter> {
        let name = format!(
            "{}-{}-m{}.avro",
            self.write_id,
            self.snapshot_id,
            self.written.len()
        );
        let path = self.path(&name);
        let output = self.table.file_io().new_output(&path)?;
        self.written.push(path);
        let builder = ManifestWriterBuilder::new(output, Some(self.snapshot_id), schema, spec);
        Ok(match (self.table.metadata().format_version(), content) {
            (FormatVersion::V1, _) => builder.build_v1(),
            (_, ManifestContentType::Data) => builder.build_v2_data(),
            (_, ManifestContentType::Deletes) => builder.build_v2_deletes(),
        })
    }

    /// A replacement for `manifest`: `kept` as existing entries, `gone` as deleted.
    async fn rewrite(
        &mut self,
        manifest: &ManifestFile,
        kept: &[&ManifestEntry],
        gone: &[&ManifestEntry],
    ) -> Result<()> {
        let metadata = self.table.metadata();
        let spec = metadata
            .partition_spec_by_id(manifest.partition_spec_id)
            .ok_or_else(|| {
                FloeError::internal(format!(
                    "manifest {} has unknown partition spec {}",
                    manifest.manifest_path, manifest.partition_spec_id
                ))
            })?;
        let schema = binding_schema(metadata, spec)?;
        let mut writer = self.manifest_writer(schema, spec.as_ref().clone(), manifest.content)?;
        for entry in kept {
            let (snapshot_id, sequence_number, file_sequence_number) = sequence_of(entry)?;
            writer.add_existing_file(
                entry.data_file().clone(),
                snapshot_id,
                sequence_number,
                file_sequence_number,
            )?;
        }
        for entry in gone {
            let (_, sequence_number, file_sequence_number) = sequence_of(entry)?;
            writer.add_delete_file(
                entry.data_file().clone(),
                sequence_number,
                file_sequence_number,
            )?;
        }
        self.manifests.push(writer.write_manifest_file().await?);
        Ok(())
    }

    /// One manifest with the write's data files.
    async fn add_files(&mut self, files: Vec<DataFile>) -> Result<()> {
        if files.is_empty() {
            return Ok(());
        }
        let schema = self.target.current_schema().clone();
        let spec = self.target.default_partition_spec().as_ref().clone();
        let mut writer = self.manifest_writer(schema, spec, ManifestContentType::Data)?;
        for file in files {
            if file.content_type() != DataContentType::Data {
                return Err(FloeError::internal("data files expected"));
            }
            writer.add_file(file, self.sequence_number)?;
        }
        self.manifests.push(writer.write_manifest_file().await?);
        Ok(())
    }

    /// One manifest per partition spec with the write's delete files.
    async fn add_delete_files(&mut self, files: Vec<(i32, DataFile)>) -> Result<()> {
        let mut by_spec: BTreeMap<i32, Vec<DataFile>> = BTreeMap::new();
        for (spec_id, file) in files {
            by_spec.entry(spec_id).or_default().push(file);
        }
        let metadata = self.target;
        for (spec_id, files) in by_spec {
            let spec = metadata.partition_spec_by_id(spec_id).ok_or_else(|| {
                FloeError::internal(format!(
                    "a delete file has unknown partition spec {spec_id}"
                ))
            })?;
            let schema = binding_schema(metadata, spec)?;
            let mut writer =
                self.manifest_writer(schema, spec.as_ref().clone(), ManifestContentType::Deletes)?;
            for file in files {
                writer.add_file(file, self.sequence_number)?;
            }
            self.manifests.push(writer.write_manifest_file().await?);
        }
        Ok(())
    }

    /// Writes the manifest list; returns the snapshot.
    async fn finish(&mut self, summary: Summary) -> Result<Snapshot> {
        let metadata = self.table.metadata();
        let name = format!("snap-{}-0-{}.avro", self.snapshot_id, self.write_id);
        let path = self.path(&name);
        let output = self.table.file_io().new_output(&path)?.writer().await?;
        self.written.push(path.clone());
        let parent = metadata.current_snapshot_id();
        let mut list = match metadata.format_version() {
            FormatVersion::V1 => ManifestListWriter::v1(output, self.snapshot_id, parent),
            _ => ManifestListWriter::v2(output, self.snapshot_id, parent, self.sequence_number),
        };
        list.add_manifests(std::mem::take(&mut self.manifests).into_iter())?;
        list.close().await?;
        Ok(Snapshot::builder()
            .with_snapshot_id(self.snapshot_id)
            .with_parent_snapshot_id(parent)
            .with_sequence_number(self.sequence_number)
            .with_timestamp_ms(chrono::Utc::now().timestamp_millis())
            .with_manifest_list(path)
            .with_summary(summary)
            .with_schema_id(self.target.current_schema_id())
            .build())
    }

    async fn discard(&self) {
        for path in &self.written {
            if let Err(e) = self.table.file_io().delete(path).await {
                tracing::warn!("could not delete unused manifest {path}: {e}");
            }
        }
    }
}

/// The snapshot id, data sequence number and file sequence number an entry keeps when
/// it is written again (iceberg fills them in when it reads a manifest).
fn sequence_of(entry: &ManifestEntry) -> Result<(i64, i64, Option<i64>)> {
    let snapshot_id = entry.snapshot_id().ok_or_else(|| {
        FloeError::internal(format!(
            "manifest entry {} has no snapshot id",
            entry.file_path()
        ))
    })?;
    let sequence_number = entry.sequence_number().unwrap_or(0);
    let file_sequence_number = entry.file_sequence_number.or(Some(sequence_number));
    Ok((snapshot_id, sequence_number, file_sequence_number))
}

/// A schema the partition spec binds to: the current one, else the newest that does (an
/// old spec may use a column the current schema dropped).
fn binding_schema(metadata: &TableMetadata, spec: &PartitionSpec) -> Result<SchemaRef> {
    let current = metadata.current_schema();
    if spec.partition_type(current).is_ok() {
        return Ok(current.clone());
    }
    let mut schemas: Vec<&SchemaRef> = metadata.schemas_iter().collect();
    schemas.sort_by_key(|s| std::cmp::Reverse(s.schema_id()));
    schemas
        .into_iter()
        .find(|s: &&SchemaRef| spec.partition_type(s.as_ref() as &Schema).is_ok())
        .cloned()
        .ok_or_else(|| {
            FloeError::internal(format!(
                "partition spec {} binds to none of the table's schemas",
                spec.spec_id()
            ))
        })
}

fn unique_snapshot_id(metadata: &TableMetadata) -> i64 {
    loop {
        let (high, low) = uuid::Uuid::new_v4().as_u64_pair();
        let id = ((high ^ low) & (i64::MAX as u64)) as i64;
        if id != 0 && metadata.snapshot_by_id(id).is_none() {
            return id;
        }
    }
}

/// File and record counts of a set of files.
#[derive(Default)]
struct Counts {
    data_files: u64,
    data_records: u64,
    delete_files: u64,
    position_deletes: u64,
    equality_deletes: u64,
    bytes: u64,
}

impl Counts {
    fn add(&mut self, file: &DataFile) {
        self.bytes += file.file_size_in_bytes();
        match file.content_type() {
            DataContentType::Data => {
                self.data_files += 1;
                self.data_records += file.record_count();
            }
            DataContentType::PositionDeletes => {
                self.delete_files += 1;
                self.position_deletes += file.record_count();
            }
            DataContentType::EqualityDeletes => {
                self.delete_files += 1;
                self.equality_deletes += file.record_count();
            }
        }
    }
}

/// The snapshot summary, with the keys Java and pyiceberg write (added and removed
/// counts when not zero, totals always).
fn summary(write_id: &str, added: &Counts, removed: &Counts, totals: &Counts) -> Summary {
    let mut properties = std::collections::HashMap::new();
    let mut set_positive = |key: &str, value: u64| {
        if value > 0 {
            properties.insert(key.to_string(), value.to_string());
        }
    };
    set_positive("added-data-files", added.data_files);
    set_positive("added-records", added.data_records);
    set_positive("added-files-size", added.bytes);
    set_positive("added-delete-files", added.delete_files);
    set_positive("added-position-delete-files", added.delete_files);
    set_positive("added-position-deletes", added.position_deletes);
    set_positive("deleted-data-files", removed.data_files);
    set_positive("deleted-records", removed.data_records);
    set_positive("removed-delete-files", removed.delete_files);
    set_positive("removed-position-deletes", removed.position_deletes);
    set_positive("removed-equality-deletes", removed.equality_deletes);
    set_positive("removed-files-size", removed.bytes);
    for (key, value) in [
        ("total-data-files", totals.data_files),
        ("total-delete-files", totals.delete_files),
        ("total-records", totals.data_records),
        ("total-files-size", totals.bytes),
        ("total-position-deletes", totals.position_deletes),
        ("total-equality-deletes", totals.equality_deletes),
    ] {
        properties.insert(key.to_string(), value.to_string());
    }
    properties.insert(WRITE_ID_PROPERTY.to_string(), write_id.to_string());
    Summary {
        operation: Operation::Overwrite,
        additional_properties: properties,
    }
}

/// Requirements and updates of the commit. With metadata updates, the ids they assign
/// (schema, partition spec) depend on the table's current ones: those are required too.
fn changes(
    base: &TableMetadata,
    snapshot: Snapshot,
    metadata_updates: &[TableUpdate],
) -> TableChanges {
    let snapshot_id = snapshot.snapshot_id();
    let mut requirements = vec![
        TableRequirement::UuidMatch { uuid: base.uuid() },
        TableRequirement::RefSnapshotIdMatch {
            r#ref: MAIN_BRANCH.to_string(),
            snapshot_id: base.current_snapshot_id(),
        },
    ];
    if !metadata_updates.is_empty() {
        requirements.extend([
            TableRequirement::CurrentSchemaIdMatch {
                current_schema_id: base.current_schema_id(),
            },
            TableRequirement::LastAssignedFieldIdMatch {
                last_assigned_field_id: base.last_column_id(),
            },
            TableRequirement::DefaultSpecIdMatch {
                default_spec_id: base.default_partition_spec_id(),
            },
            TableRequirement::LastAssignedPartitionIdMatch {
                last_assigned_partition_id: base.last_partition_id(),
            },
        ]);
    }
    let mut updates = metadata_updates.to_vec();
    updates.extend([
        TableUpdate::AddSnapshot { snapshot },
        TableUpdate::SetSnapshotRef {
            ref_name: MAIN_BRANCH.to_string(),
            reference: SnapshotReference::new(
                snapshot_id,
                SnapshotRetention::branch(None, None, None),
            ),
        },
    ]);
    TableChanges {
        requirements,
        updates,
    }
}
