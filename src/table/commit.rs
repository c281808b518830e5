//! One commit attempt of a write, done on the coordinator after its job succeeded, and
//! what it achieved (see `write_protocol` for what happens around it).

use std::collections::HashMap;
use std::time::Duration;

use datafusion::arrow::array::{Array, Int32Array, RecordBatch, StringArray};
use iceberg::spec::{DataFile, StructType, TableMetadata, deserialize_data_file_from_json};
use iceberg::table::Table;
use iceberg::transaction::{ApplyTransactionAction, Transaction};
use iceberg::{Catalog, Namespace, NamespaceIdent, TableCommit, TableCreation, TableIdent};

use super::write::{DATA_FILE_COLUMN, SPEC_ID_COLUMN};
use crate::error::{FloeError, Result};

/// Snapshot summary key recording which write produced a snapshot.
pub const WRITE_ID_PROPERTY: &str = "floe.write-id";

/// A written data file as reported by a write task.
#[derive(Clone)]
pub struct WrittenFile {
    pub json: String,
    pub spec_id: i32,
}

impl WrittenFile {
    /// The file's size in bytes, as its descriptor records it (0 if it does not).
    pub fn size(&self) -> u64 {
        serde_json::from_str::<serde_json::Value>(&self.json)
            .ok()
            .and_then(|file| file.get("file_size_in_bytes")?.as_u64())
            .unwrap_or(0)
    }
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

/// What one commit attempt achieved, as far as the catalog can tell.
pub enum CommitOutcome {
    /// The write is in the table (now or already before): it added these rows.
    Committed(u64),
    /// The write is definitely not in the table: refused before anything was sent, or
    /// the table, read back after a failed commit, has no snapshot with its write id.
    NotCommitted(FloeError),
    /// The commit failed and the table could not be read back: the write may or may
    /// not be in it.
    Unknown(FloeError),
}

/// Appends `files` to the table in one snapshot tagged with `write_id`. `planned` is the
/// table as the statement saw it: if its schema or partition spec changed since, the
/// files no longer fit and the commit is refused. Committing the same write twice adds
/// nothing the second time. Conflicts with concurrent commits are retried by iceberg's
/// transaction (it refreshes the table and re-applies the append).
pub async fn commit_append(
    catalog: &dyn Catalog,
    planned: &Table,
    write_id: &str,
    files: &[WrittenFile],
) -> CommitOutcome {
    let table = match catalog.load_table(planned.identifier()).await {
        Ok(table) => table,
        Err(e) => return CommitOutcome::NotCommitted(not_committed(e.into())),
    };
    if let Some(rows) = rows_of_committed_write(&table, write_id) {
        return CommitOutcome::Committed(rows);
    }
    let (tx, rows) = match prepare_append(planned, &table, write_id, files) {
        Ok(Some(append)) => append,
        Ok(None) => return CommitOutcome::Committed(0),
        Err(e) => return CommitOutcome::NotCommitted(e),
    };
    let guarded = SameLayout { catalog, planned };
    match tx.commit(&guarded).await {
        Ok(_) => CommitOutcome::Committed(rows),
        Err(e) => resolve(catalog, planned, write_id, e).await,
    }
}

/// The catalog as iceberg's transaction sees it during an append: on a conflict the
/// transaction reloads the table and re-applies the append without looking at the
/// schema, so a table whose schema or partitioning changed meanwhile (a concurrent
/// replace) is refused here, before the append is re-applied to it.
struct SameLayout<'a> {
    catalog: &'a dyn Catalog,
    planned: &'a Table,
}

impl std::fmt::Debug for SameLayout<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SameLayout").finish_non_exhaustive()
    }
}

#[async_trait::async_trait]
impl Catalog for SameLayout<'_> {
    async fn load_table(&self, ident: &TableIdent) -> iceberg::Result<Table> {
        let table = self.catalog.load_table(ident).await?;
        match layout_changed(self.planned, &table) {
            None => Ok(table),
            Some(e) => Err(
                iceberg::Error::new(iceberg::ErrorKind::Unexpected, e.message.clone())
                    .with_source(e),
            ),
        }
    }

    async fn update_table(&self, commit: TableCommit) -> iceberg::Result<Table> {
        self.catalog.update_table(commit).await
    }

    async fn list_namespaces(
        &self,
        parent: Option<&NamespaceIdent>,
    ) -> iceberg::Result<Vec<NamespaceIdent>> {
        self.catalog.list_namespaces(parent).await
    }

    async fn create_namespace(
        &self,
        namespace: &NamespaceIdent,
        properties: HashMap<String, String>,
    ) -> iceberg::Result<Namespace> {
        self.catalog.create_namespace(namespace, properties).await
    }

    async fn get_namespace(&self, namespace: &NamespaceIdent) -> iceberg::Result<Namespace> {
        self.catalog.get_namespace(namespace).await
    }

    async fn namespace_exists(&self, namespace: &NamespaceIdent) -> iceberg::Result<bool> {
        self.catalog.namespace_exists(namespace).await
    }

    async fn update_namespace(
        &self,
        namespace: &NamespaceIdent,
        properties: HashMap<String, String>,
    ) -> iceberg::Result<()> {
        self.catalog.update_namespace(namespace, properties).await
    }

    async fn drop_namespace(&self, namespace: &NamespaceIdent) -> iceberg::Result<()> {
        self.catalog.drop_namespace(namespace).await
    }

    async fn list_tables(&self, namespace: &NamespaceIdent) -> iceberg::Result<Vec<TableIdent>> {
        self.catalog.list_tables(namespace).await
    }

    async fn create_table(
        &self,
        namespace: &NamespaceIdent,
        creation: TableCreation,
    ) -> iceberg::Result<Table> {
        self.catalog.create_table(namespace, creation).await
    }

    async fn drop_table(&self, ident: &TableIdent) -> iceberg::Result<()> {
        self.catalog.drop_table(ident).await
    }

    async fn purge_table(&self, ident: &TableIdent) -> iceberg::Result<()> {
        self.catalog.purge_table(ident).await
    }

    async fn table_exists(&self, ident: &TableIdent) -> iceberg::Result<bool> {
        self.catalog.table_exists(ident).await
    }

    async fn rename_table(&self, src: &TableIdent, dest: &TableIdent) -> iceberg::Result<()> {
        self.catalog.rename_table(src, dest).await
    }

    async fn register_table(
        &self,
        ident: &TableIdent,
        metadata_location: String,
    ) -> iceberg::Result<Table> {
        self.catalog.register_table(ident, metadata_location).await
    }
}

/// Why the files written for `planned` no longer fit `table`, if they do not.
fn layout_changed(planned: &Table, table: &Table) -> Option<FloeError> {
    let (now, then) = (table.metadata(), planned.metadata());
    (now.current_schema_id() != then.current_schema_id()
        || now.default_partition_spec_id() != then.default_partition_spec_id())
    .then(|| {
        FloeError::aborted(format!(
            "table {} changed its schema or partitioning while the INSERT ran; nothing was \
             committed, retrying is safe",
            planned.identifier()
        ))
    })
}

/// The append transaction and the rows it adds; `None` when there is nothing to add (a
/// snapshot without files would be empty).
fn prepare_append(
    planned: &Table,
    table: &Table,
    write_id: &str,
    files: &[WrittenFile],
) -> Result<Option<(Transaction, u64)>> {
    if let Some(e) = layout_changed(planned, table) {
        return Err(e);
    }
    let data_files = decode(table.metadata(), files).map_err(not_committed)?;
    let rows = data_files.iter().map(DataFile::record_count).sum();
    if data_files.is_empty() {
        return Ok(None);
    }
    let properties = HashMap::from([(WRITE_ID_PROPERTY.to_string(), write_id.to_string())]);
    let tx = Transaction::new(table);
    let tx = tx
        .fast_append()
        .set_snapshot_properties(properties)
        .with_check_duplicate(false)
        .add_data_files(data_files)
        .apply(tx)
        .map_err(|e| not_committed(e.into()))?;
    Ok(Some((tx, rows)))
}

/// How many times the table is read back to learn the outcome of a failed commit.
const RESOLVE_READS: [Duration; 3] = [
    Duration::ZERO,
    Duration::from_millis(200),
    Duration::from_secs(1),
];

/// Learns the outcome of a commit that failed: the commit may have landed even though
/// the call failed (a lost response); the write id in the snapshot summaries tells.
pub(super) async fn resolve(
    catalog: &dyn Catalog,
    planned: &Table,
    write_id: &str,
    error: iceberg::Error,
) -> CommitOutcome {
    let mut read_error = None;
    for pause in RESOLVE_READS {
        tokio::time::sleep(pause).await;
        match catalog.load_table(planned.identifier()).await {
            Ok(table) => {
                return match rows_of_committed_write(&table, write_id) {
                    Some(rows) => CommitOutcome::Committed(rows),
                    None => CommitOutcome::NotCommitted(refused(planned, error)),
                };
            }
            Err(e) => read_error = Some(e),
        }
    }
    CommitOutcome::Unknown(FloeError::unavailable(format!(
        "could not learn whether the write into {} was committed: the commit failed ({error}) \
         and reading the table back failed ({}); the rows may or may not be there, check \
         before retrying",
        planned.identifier(),
        read_error.map(|e| e.to_string()).unwrap_or_default()
    )))
}

/// The error of a commit that definitely did not happen.
fn refused(planned: &Table, error: iceberg::Error) -> FloeError {
    if error.kind() == iceberg::ErrorKind::CatalogCommitConflicts {
        return FloeError::aborted(format!(
            "the write into {} lost to concurrent commits on every retry; nothing was \
             committed, retrying is safe",
            planned.identifier()
        ));
    }
    not_committed(error.into())
}

/// Says in the message that nothing was committed.
pub(super) fn not_committed(error: FloeError) -> FloeError {
    if error.message.contains("nothing was committed") {
        return error;
    }
    FloeError::new(
        error.kind,
        format!("{}; nothing was committed", error.message),
    )
}

/// The written files as data files of the table with `metadata` (its default spec).
pub(super) fn decode(metadata: &TableMetadata, files: &[WrittenFile]) -> Result<Vec<DataFile>> {
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

/// Written delete files whose partition is not known yet (`position_deletes`): decoded
/// without one.
pub(super) fn decode_unresolved(
    metadata: &TableMetadata,
    files: &[WrittenFile],
) -> Result<Vec<DataFile>> {
    let no_partition = StructType::new(Vec::new());
    files
        .iter()
        .map(|file| {
            Ok(deserialize_data_file_from_json(
                &file.json,
                file.spec_id,
                &no_partition,
                metadata.current_schema(),
            )?)
        })
        .collect()
}

/// Rows added by the snapshot of `write_id`, if that write is already committed.
pub(super) fn rows_of_committed_write(table: &Table, write_id: &str) -> Option<u64> {
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
