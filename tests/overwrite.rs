//! Overwrite snapshots (`table::overwrite`) on a SQL catalog, with data files described
//! but never read: which files each kind of removal keeps, the summary, idempotency,
//! a copy-on-write removal of a file that is already gone, and the conflicts with
//! commits made since a write read the table.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::sync::Arc;

use floe::catalog::DEFAULT_NAMESPACE;
use floe::catalog::commit::FloeCatalog;
use floe::config::{CatalogConfig, CatalogKind};
use floe::error::ErrorKind;
use floe::table::commit::WrittenFile;
use floe::table::overwrite::{Overwrite, Removal};
use floe::table::position_deletes::UNRESOLVED_SPEC_ID;
use floe::table::write_protocol::{WriteCommit, commit_write};
use futures::TryStreamExt;
use iceberg::expr::Reference;
use iceberg::scan::FileScanTask;
use iceberg::spec::Datum;
use iceberg::spec::{
    DataContentType, DataFileBuilder, DataFileFormat, FormatVersion, Literal, NestedField,
    Operation, PrimitiveType, Schema, Struct, StructType, Transform, Type, UnboundPartitionSpec,
    serialize_data_file_to_json,
};
use iceberg::table::Table;
use iceberg::{NamespaceIdent, TableCreation, TableIdent};

struct Fixture {
    _dir: tempfile::TempDir,
    catalog: Arc<dyn FloeCatalog>,
    ident: TableIdent,
}

impl Fixture {
    async fn new() -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let config = CatalogConfig {
            kind: CatalogKind::Sql,
            name: "floe".to_string(),
            uri: format!("sqlite:{}/catalog.db", dir.path().display()),
            warehouse: format!("file://{}/warehouse", dir.path().display()),
            properties: BTreeMap::new(),
        };
        let catalog = floe::catalog::connect(&config).await.expect("catalog");
        let schema = Schema::builder()
            .with_fields(vec![
                Arc::new(NestedField::optional(
                    1,
                    "id",
                    Type::Primitive(PrimitiveType::Long),
                )),
                Arc::new(NestedField::optional(
                    2,
                    "region",
                    Type::Primitive(PrimitiveType::String),
                )),
            ])
            .build()
            .expect("schema");
        let spec = UnboundPartitionSpec::builder()
            .add_partition_field(2, "region", Transform::Identity)
            .expect("field")
            .build();
        let namespace = NamespaceIdent::new(DEFAULT_NAMESPACE.to_string());
        let creation = TableCreation::builder()
            .name("t".to_string())
            .schema(schema)
            .partition_spec(spec)
            .build();
        catalog
            .create_table(&namespace, creation)
            .await
            .expect("create");
        Self {
            _dir: dir,
            catalog,
            ident: TableIdent::new(namespace, "t".to_string()),
        }
    }

    /// A table whose files `a` (region eu, 10 rows) and `b` (us, 20) were appended by
    /// write `w1`.
    async fn with_a_and_b() -> Self {
        let t = Self::new().await;
        let a = t.file("a", "eu", 10).await;
        let b = t.file("b", "us", 20).await;
        t.commit("w1", &[a, b], WriteCommit::Append)
            .await
            .expect("append");
        t
    }

    async fn table(&self) -> Table {
        self.catalog.load_table(&self.ident).await.expect("load")
    }

    /// A data file of `rows` rows in partition `region` (never written: only described).
    async fn file(&self, name: &str, region: &str, rows: u64) -> WrittenFile {
        let table = self.table().await;
        let metadata = table.metadata();
        let file = DataFileBuilder::default()
            .content(DataContentType::Data)
            .file_path(format!("{}/data/{name}.parquet", metadata.location()))
            .file_format(DataFileFormat::Parquet)
            .partition(Struct::from_iter([Some(Literal::string(region))]))
            .partition_spec_id(metadata.default_partition_spec_id())
            .record_count(rows)
            .file_size_in_bytes(100 * rows)
            .build()
            .expect("data file");
        WrittenFile {
            json: serialize_data_file_to_json(
                file,
                metadata.default_partition_type(),
                FormatVersion::V2,
            )
            .expect("json"),
            spec_id: metadata.default_partition_spec_id(),
        }
    }

    async fn commit(
        &self,
        write_id: &str,
        files: &[WrittenFile],
        how: WriteCommit,
    ) -> floe::error::Result<u64> {
        let planned = self.table().await;
        commit_write(self.catalog.as_ref(), &planned, write_id, files, &how).await
    }

    /// Commits as a write that read `planned` (an older state of the table).
    async fn commit_read_at(
        &self,
        planned: &Table,
        write_id: &str,
        files: &[WrittenFile],
        how: WriteCommit,
    ) -> floe::error::Result<u64> {
        commit_write(self.catalog.as_ref(), planned, write_id, files, &how).await
    }

    /// The file tasks of a scan of the current snapshot.
    async fn tasks(&self) -> Vec<FileScanTask> {
        let table = self.table().await;
        table
            .scan()
            .build()
            .expect("scan")
            .plan_files()
            .await
            .expect("plan")
            .try_collect()
            .await
            .expect("tasks")
    }

    /// The names of the data files of the current snapshot.
    async fn live(&self) -> BTreeSet<String> {
        self.tasks()
            .await
            .iter()
            .map(|t| {
                let name = t.data_file_path.rsplit('/').next().unwrap_or_default();
                name.trim_end_matches(".parquet").to_string()
            })
            .collect()
    }
}

fn overwrite(removal: Removal) -> WriteCommit {
    WriteCommit::Overwrite(Overwrite::of(removal))
}

fn names(names: &[&str]) -> BTreeSet<String> {
    names.iter().map(|n| n.to_string()).collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn each_removal_keeps_exactly_the_other_files() {
    let t = Fixture::new().await;
    let a = t.file("a", "eu", 10).await;
    let b = t.file("b", "us", 20).await;
    assert_eq!(
        t.commit("w1", &[a, b], WriteCommit::Append).await.ok(),
        Some(30)
    );

    // Dynamic partition overwrite: only the partitions written lose their files.
    let c = t.file("c", "eu", 5).await;
    assert_eq!(
        t.commit("w2", &[c], overwrite(Removal::Partitions))
            .await
            .ok(),
        Some(5)
    );
    assert_eq!(t.live().await, names(&["b", "c"]));
    let table = t.table().await;
    let summary = table
        .metadata()
        .current_snapshot()
        .expect("snapshot")
        .summary();
    assert_eq!(summary.operation, iceberg::spec::Operation::Overwrite);
    let prop = |k: &str| summary.additional_properties.get(k).cloned();
    assert_eq!(prop("deleted-data-files").as_deref(), Some("1"));
    assert_eq!(prop("deleted-records").as_deref(), Some("10"));
    assert_eq!(prop("added-records").as_deref(), Some("5"));
    assert_eq!(prop("total-data-files").as_deref(), Some("2"));
    assert_eq!(prop("total-records").as_deref(), Some("25"));
    assert_eq!(prop("floe.write-id").as_deref(), Some("w2"));

    // The same write committed again adds nothing.
    let snapshots = t.table().await.metadata().snapshots().count();
    let c_again = t.file("c", "eu", 5).await;
    assert_eq!(
        t.commit("w2", &[c_again], overwrite(Removal::Partitions))
            .await
            .ok(),
        Some(5)
    );
    assert_eq!(t.table().await.metadata().snapshots().count(), snapshots);

    // Copy-on-write: exactly the given files go.
    let table = t.table().await;
    let b_path = format!("{}/data/b.parquet", table.metadata().location());
    let d = t.file("d", "us", 7).await;
    let removal = Removal::Files(HashSet::from([b_path.clone()]));
    assert_eq!(t.commit("w3", &[d], overwrite(removal)).await.ok(), Some(7));
    assert_eq!(t.live().await, names(&["c", "d"]));

    // A file that is already gone: a concurrent commit touched it.
    let before = t.table().await.metadata_location().map(str::to_string);
    let e = t.file("e", "us", 1).await;
    let removal = Removal::Files(HashSet::from([b_path]));
    let err = t
        .commit("w4", &[e], overwrite(removal))
        .await
        .expect_err("b is gone");
    assert_eq!(err.kind, ErrorKind::Aborted, "{err}");
    assert!(err.message.contains("nothing was committed"), "{err}");
    assert_eq!(
        t.table().await.metadata_location().map(str::to_string),
        before
    );

    // Whole table.
    let f = t.file("f", "asia", 3).await;
    assert_eq!(
        t.commit("w5", &[f], overwrite(Removal::All)).await.ok(),
        Some(3)
    );
    assert_eq!(t.live().await, names(&["f"]));
    let table = t.table().await;
    let summary = table
        .metadata()
        .current_snapshot()
        .expect("snapshot")
        .summary();
    assert_eq!(
        summary
            .additional_properties
            .get("total-records")
            .map(String::as_str),
        Some("3")
    );
    assert_eq!(
        summary
            .additional_properties
            .get("deleted-records")
            .map(String::as_str),
        Some("12")
    );
}

/// A position delete file for `data_file` as a delete write describes it: without a
/// partition (the commit takes the data file's).
fn position_delete(location: &str, name: &str, data_file: &str, rows: u64) -> WrittenFile {
    let file = DataFileBuilder::default()
        .content(DataContentType::PositionDeletes)
        .file_path(format!("{location}/data/{name}.parquet"))
        .file_format(DataFileFormat::Parquet)
        .record_count(rows)
        .file_size_in_bytes(10 * rows)
        .referenced_data_file(Some(data_file.to_string()))
        .build()
        .expect("delete file");
    WrittenFile {
        json: serialize_data_file_to_json(file, &StructType::new(Vec::new()), FormatVersion::V2)
            .expect("json"),
        spec_id: UNRESOLVED_SPEC_ID,
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn merge_on_read_deletes_take_their_data_files_partition_and_need_them_live() {
    let t = Fixture::with_a_and_b().await;
    let location = t.table().await.metadata().location().to_string();
    let a_path = format!("{location}/data/a.parquet");
    let deletes = || {
        WriteCommit::Overwrite(Overwrite {
            operation: Operation::Delete,
            ..Overwrite::of(Removal::Nothing)
        })
    };
    let delete = position_delete(&location, "a-deletes", &a_path, 3);
    t.commit("w2", &[delete], deletes())
        .await
        .expect("deletes commit");
    let table = t.table().await;
    let snapshot = table.metadata().current_snapshot().expect("snapshot");
    assert_eq!(snapshot.summary().operation, Operation::Delete);
    let prop = |k: &str| snapshot.summary().additional_properties.get(k).cloned();
    assert_eq!(prop("added-position-deletes").as_deref(), Some("3"));
    assert_eq!(prop("total-records").as_deref(), Some("30"));
    // The delete file applies to a (its partition, eu) and to nothing else.
    for task in &t.tasks().await {
        let names: Vec<&str> = task.deletes.iter().map(|d| d.file_path.as_str()).collect();
        match task.data_file_path.ends_with("/a.parquet") {
            true => assert_eq!(names, [format!("{location}/data/a-deletes.parquet")]),
            false => assert!(names.is_empty(), "{names:?}"),
        }
    }

    // Deletes for a data file that a concurrent commit removed: nothing is committed.
    t.commit(
        "w3",
        &[t.file("c", "eu", 1).await],
        overwrite(Removal::Files(HashSet::from([a_path.clone()]))),
    )
    .await
    .expect("rewrite of a");
    let before = t.table().await.metadata_location().map(str::to_string);
    let late = position_delete(&location, "a-late-deletes", &a_path, 1);
    let err = t
        .commit("w4", &[late], deletes())
        .await
        .expect_err("a is gone");
    assert_eq!(err.kind, ErrorKind::Aborted, "{err}");
    assert_eq!(
        t.table().await.metadata_location().map(str::to_string),
        before
    );
}

/// A position delete file for `data_file`, written (local warehouse) with `positions`.
fn written_position_delete(
    location: &str,
    name: &str,
    data_file: &str,
    positions: &[i64],
) -> WrittenFile {
    use datafusion::arrow::array::{Int64Array, RecordBatch, StringArray};
    use datafusion::parquet::arrow::ArrowWriter;

    let file = position_delete(location, name, data_file, positions.len() as u64);
    let path = format!("{location}/data/{name}.parquet");
    let local = path.strip_prefix("file://").expect("a local warehouse");
    let batch = RecordBatch::try_from_iter([
        (
            "file_path",
            Arc::new(StringArray::from(vec![data_file; positions.len()])) as _,
        ),
        ("pos", Arc::new(Int64Array::from(positions.to_vec())) as _),
    ])
    .expect("batch");
    let local = std::path::Path::new(local);
    std::fs::create_dir_all(local.parent().expect("a directory")).expect("mkdir");
    let out = std::fs::File::create(local).expect("create");
    let mut writer = ArrowWriter::try_new(out, batch.schema(), None).expect("writer");
    writer.write(&batch).expect("write");
    writer.close().expect("close");
    file
}

#[tokio::test(flavor = "multi_thread")]
async fn a_delete_committed_after_a_write_read_the_table_conflicts_where_it_must() {
    let t = Fixture::with_a_and_b().await;
    let read = t.table().await;
    let location = read.metadata().location().to_string();
    let a_path = format!("{location}/data/a.parquet");
    let deletes = || overwrite(Removal::Nothing);
    let aborted = |result: floe::error::Result<u64>| {
        let err = result.expect_err("a conflict");
        assert_eq!(err.kind, ErrorKind::Aborted, "{err}");
        assert!(err.message.contains("nothing was committed"), "{err}");
    };
    // Another write deletes rows 1 and 2 of a after `read`.
    let theirs = written_position_delete(&location, "theirs", &a_path, &[1, 2]);
    t.commit("w2", &[theirs], deletes()).await.expect("theirs");

    // Deletes of other rows of a, by a write that read the table before: they combine.
    let other_rows = written_position_delete(&location, "other-rows", &a_path, &[3, 4]);
    t.commit_read_at(&read, "w3", &[other_rows], deletes())
        .await
        .expect("other rows of a");
    // Of one of the same rows: two UPDATEs of one row would both add its new version.
    let same_row = written_position_delete(&location, "same-row", &a_path, &[2, 7]);
    aborted(t.commit_read_at(&read, "w4", &[same_row], deletes()).await);
    // A rewrite of a from before the deletes would bring their rows back.
    let rewritten = t.file("a2", "eu", 10).await;
    let rewrite = overwrite(Removal::Files(HashSet::from([a_path.clone()])));
    aborted(t.commit_read_at(&read, "w5", &[rewritten], rewrite).await);
    // A rewrite of b, whose rows no one deleted, commits.
    let b_path = format!("{location}/data/b.parquet");
    let b2 = t.file("b2", "us", 20).await;
    let rewrite = overwrite(Removal::Files(HashSet::from([b_path])));
    t.commit_read_at(&read, "w6", &[b2], rewrite)
        .await
        .expect("rewrite of b");
}

#[tokio::test(flavor = "multi_thread")]
async fn serializable_writes_conflict_with_appends_their_condition_may_match() {
    let t = Fixture::new().await;
    let a = t.file("a", "eu", 10).await;
    t.commit("w1", &[a], WriteCommit::Append)
        .await
        .expect("append");
    let read = t.table().await;
    let us = t.file("us-rows", "us", 5).await;
    t.commit("w2", &[us], WriteCommit::Append)
        .await
        .expect("concurrent append");
    let region = |r: &str| Reference::new("region").equal_to(Datum::string(r));
    let serializable = |predicate| {
        WriteCommit::Overwrite(Overwrite::of(Removal::Nothing).serializable_over(predicate))
    };

    // A statement over region 'us' may have changed the appended rows.
    let ours = t.file("eu-new", "eu", 1).await;
    let err = t
        .commit_read_at(&read, "w3", &[ours], serializable(region("us")))
        .await
        .expect_err("the append may hold rows it changes");
    assert_eq!(err.kind, ErrorKind::Aborted, "{err}");
    // Over region 'eu' it could not have: it commits, as an append.
    let ours = t.file("eu-new", "eu", 1).await;
    t.commit_read_at(&read, "w4", &[ours], serializable(region("eu")))
        .await
        .expect("no conflict");
    let table = t.table().await;
    let snapshot = table.metadata().current_snapshot().expect("snapshot");
    assert_eq!(snapshot.summary().operation, Operation::Append);
    // Snapshot isolation (no predicate) allows the append.
    let ours = t.file("us-new", "us", 1).await;
    t.commit_read_at(&read, "w5", &[ours], overwrite(Removal::Nothing))
        .await
        .expect("snapshot isolation");
}
