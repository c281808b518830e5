//! Scan planning against a real (empty) Iceberg table.

use std::collections::HashMap;
use std::sync::Arc;

use datafusion::execution::TaskContext;
use datafusion::physical_plan::ExecutionPlan;
use floe::table::scan::{Reading, plan_scan};
use futures::TryStreamExt;
use iceberg::io::LocalFsStorageFactory;
use iceberg::memory::{MEMORY_CATALOG_WAREHOUSE, MemoryCatalogBuilder};
use iceberg::{Catalog, CatalogBuilder, NamespaceIdent, TableCreation};

use crate::support::schema;

#[tokio::test(flavor = "multi_thread")]
async fn an_empty_table_scans_to_zero_rows_through_one_partition() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (_catalog, table) = catalog_with_table(dir.path(), "empty").await;

    let scan = plan_scan(&table, "ns.empty", None, &[], &Reading::default(), 8)
        .await
        .expect("planned");
    assert_eq!(scan.groups.len(), 1, "one partition even without files");
    assert_eq!(scan.properties().output_partitioning().partition_count(), 1);

    let rows: usize = scan
        .execute(0, Arc::new(TaskContext::default()))
        .expect("stream")
        .try_collect::<Vec<_>>()
        .await
        .expect("batches")
        .iter()
        .map(|b| b.num_rows())
        .sum();
    assert_eq!(rows, 0);
    assert_eq!(scan.schema().fields().len(), 3);
}

/// A memory catalog in `dir` with one empty table `ns.<name>`.
async fn catalog_with_table(
    dir: &std::path::Path,
    name: &str,
) -> (impl Catalog + use<>, iceberg::table::Table) {
    let catalog = MemoryCatalogBuilder::default()
        .with_storage_factory(Arc::new(LocalFsStorageFactory))
        .load(
            "test",
            HashMap::from([(
                MEMORY_CATALOG_WAREHOUSE.to_string(),
                format!("file://{}", dir.display()),
            )]),
        )
        .await
        .expect("catalog");
    let namespace = NamespaceIdent::new("ns".into());
    catalog
        .create_namespace(&namespace, HashMap::new())
        .await
        .expect("namespace");
    let creation = TableCreation::builder()
        .name(name.into())
        .schema(schema().as_ref().clone())
        .build();
    let table = catalog
        .create_table(&namespace, creation)
        .await
        .expect("table");
    (catalog, table)
}

/// A memory catalog with one table `ns.t` holding one (never read) data file.
async fn table_with_one_file(
    dir: &std::path::Path,
) -> (impl Catalog + use<>, iceberg::table::Table) {
    use iceberg::spec::{DataContentType, DataFileBuilder, DataFileFormat, Struct};
    use iceberg::transaction::{ApplyTransactionAction, Transaction};

    let (catalog, table) = catalog_with_table(dir, "t").await;
    let file = DataFileBuilder::default()
        .content(DataContentType::Data)
        .file_path(format!("{}/t/data/one.parquet", dir.display()))
        .file_format(DataFileFormat::Parquet)
        .partition(Struct::empty())
        .partition_spec_id(0)
        .record_count(10)
        .file_size_in_bytes(1000)
        .build()
        .expect("data file");
    let tx = Transaction::new(&table);
    let tx = tx
        .fast_append()
        .add_data_files([file])
        .apply(tx)
        .expect("append");
    let table = tx.commit(&catalog).await.expect("commit");
    (catalog, table)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_table_loaded_on_a_runtime_since_shut_down_still_plans_its_files() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().to_path_buf();
    // Loaded on its own runtime, which is then shut down: iceberg alone would plan
    // nothing there, and say nothing.
    let table = std::thread::spawn(move || {
        let runtime = tokio::runtime::Runtime::new().expect("runtime");
        let table = runtime.block_on(async { table_with_one_file(&path).await.1 });
        drop(runtime);
        table
    })
    .join()
    .expect("loading thread");

    let scan = plan_scan(&table, "ns.t", None, &[], &Reading::default(), 8)
        .await
        .expect("planned");
    let files = scan.task_count().expect("listed");
    assert_eq!(files, 1);
}

#[test]
fn a_table_rebuilt_for_a_runtime_is_not_used_once_that_runtime_is_gone() {
    let dir = tempfile::tempdir().expect("temp dir");
    let loading = tokio::runtime::Runtime::new().expect("runtime");
    let table = loading.block_on(async { table_with_one_file(dir.path()).await.1 });
    drop(loading);
    // Each statement on a runtime of its own: the table kept rebuilt for the first
    // one plans nothing on the second.
    for _ in 0..2 {
        let runtime = tokio::runtime::Runtime::new().expect("runtime");
        let scan = runtime
            .block_on(plan_scan(&table, "ns.t", None, &[], &Reading::default(), 8))
            .expect("planned");
        assert_eq!(scan.task_count(), Some(1));
        drop(runtime);
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_snapshot_with_files_that_plans_to_none_is_an_error() {
    use iceberg::spec::ManifestListWriter;

    let dir = tempfile::tempdir().expect("temp dir");
    let (_catalog, table) = table_with_one_file(dir.path()).await;
    // The snapshot's summary counts one data file; its manifest list now lists none.
    let snapshot = table.metadata().current_snapshot().expect("snapshot");
    let output = table
        .file_io()
        .new_output(snapshot.manifest_list())
        .expect("output");
    ManifestListWriter::v2(
        output.writer().await.expect("writer"),
        snapshot.snapshot_id(),
        snapshot.parent_snapshot_id(),
        snapshot.sequence_number(),
    )
    .close()
    .await
    .expect("empty manifest list");

    let err = plan_scan(&table, "ns.t", None, &[], &Reading::default(), 8)
        .await
        .expect_err("an empty plan for a snapshot with files");
    assert!(
        err.to_string()
            .contains("scan planning returned no files for a snapshot with 1 data files"),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_table_loaded_again_unchanged_is_the_warm_one() {
    use floe::table::warm::warm;

    let dir = tempfile::tempdir().expect("temp dir");
    let (catalog, table) = table_with_one_file(dir.path()).await;
    let first = warm(table);
    let again = warm(catalog.load_table(first.identifier()).await.expect("load"));
    assert!(
        Arc::ptr_eq(&first.metadata_ref(), &again.metadata_ref()),
        "the same metadata file gives the table kept before"
    );
    // Changed: a new metadata file, so a new table.
    let tx = iceberg::transaction::Transaction::new(&again);
    let changed = {
        use iceberg::transaction::ApplyTransactionAction;
        let tx = tx
            .update_table_properties()
            .set("k".into(), "v".into())
            .apply(tx)
            .expect("update");
        tx.commit(&catalog).await.expect("commit")
    };
    let reloaded = warm(
        catalog
            .load_table(changed.identifier())
            .await
            .expect("load"),
    );
    assert_ne!(reloaded.metadata_location(), first.metadata_location());
    assert_eq!(
        reloaded.metadata().properties().get("k"),
        Some(&"v".to_string())
    );
}
