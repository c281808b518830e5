//! Scan planning against a real (empty) Iceberg table.

use std::collections::HashMap;
use std::sync::Arc;

use datafusion::execution::TaskContext;
use datafusion::physical_plan::ExecutionPlan;
use floe::table::scan::plan_scan;
use futures::TryStreamExt;
use iceberg::io::LocalFsStorageFactory;
use iceberg::memory::{MEMORY_CATALOG_WAREHOUSE, MemoryCatalogBuilder};
use iceberg::{Catalog, CatalogBuilder, NamespaceIdent, TableCreation};

use crate::support::schema;

#[tokio::test(flavor = "multi_thread")]
async fn an_empty_table_scans_to_zero_rows_through_one_partition() {
    let dir = tempfile::tempdir().expect("temp dir");
    let catalog = MemoryCatalogBuilder::default()
        .with_storage_factory(Arc::new(LocalFsStorageFactory))
        .load(
            "test",
            HashMap::from([(
                MEMORY_CATALOG_WAREHOUSE.to_string(),
                format!("file://{}", dir.path().display()),
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
        .name("empty".into())
        .schema(schema().as_ref().clone())
        .build();
    let table = catalog
        .create_table(&namespace, creation)
        .await
        .expect("table");

    let scan = plan_scan(&table, "ns.empty", None, &[], 8)
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
