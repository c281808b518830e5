//! Floe's own commit path (`catalog::commit`) on a SQL catalog: the compare-and-swap,
//! requirements, and concurrent commits re-applied after a lost race.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use floe::catalog::DEFAULT_NAMESPACE;
use floe::catalog::commit::{BindStyle, FloeCatalog, SqlCommitter, TableChanges};
use floe::config::{CatalogConfig, CatalogKind};
use iceberg::spec::{NestedField, PrimitiveType, Schema, Type};
use iceberg::{NamespaceIdent, TableCreation, TableIdent, TableRequirement, TableUpdate};

async fn catalog(dir: &tempfile::TempDir) -> (Arc<dyn FloeCatalog>, String) {
    let uri = format!("sqlite:{}/catalog.db", dir.path().display());
    let config = CatalogConfig {
        kind: CatalogKind::Sql,
        name: "floe".to_string(),
        uri: uri.clone(),
        warehouse: format!("file://{}/warehouse", dir.path().display()),
        properties: BTreeMap::new(),
    };
    let catalog = floe::catalog::connect(&config).await.expect("catalog");
    (catalog, format!("{uri}?mode=rwc"))
}

async fn table(catalog: &dyn FloeCatalog) -> TableIdent {
    let schema = Schema::builder()
        .with_fields(vec![Arc::new(NestedField::optional(
            1,
            "a",
            Type::Primitive(PrimitiveType::Int),
        ))])
        .build()
        .expect("schema");
    let namespace = NamespaceIdent::new(DEFAULT_NAMESPACE.to_string());
    let creation = TableCreation::builder()
        .name("t".to_string())
        .schema(schema)
        .build();
    catalog
        .create_table(&namespace, creation)
        .await
        .expect("create");
    TableIdent::new(namespace, "t".to_string())
}

fn set_property(key: &str, value: &str) -> TableUpdate {
    TableUpdate::SetProperties {
        updates: HashMap::from([(key.to_string(), value.to_string())]),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_swap_happens_only_from_the_expected_metadata() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (catalog, uri) = catalog(&dir).await;
    let ident = table(catalog.as_ref()).await;
    let current = catalog.load_table(&ident).await.expect("load");
    let current = current.metadata_location().expect("location").to_string();

    let committer = SqlCommitter::connect(&uri, "floe", BindStyle::QMark)
        .await
        .expect("committer");
    let swapped = committer
        .swap(
            &ident,
            "file:///elsewhere/00001-x.metadata.json",
            "file:///x",
        )
        .await
        .expect("swap");
    assert!(
        !swapped,
        "swapped from metadata the table does not point at"
    );
    let reloaded = catalog.load_table(&ident).await.expect("load");
    assert_eq!(reloaded.metadata_location(), Some(current.as_str()));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_requirement_that_does_not_hold_commits_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (catalog, _) = catalog(&dir).await;
    let ident = table(catalog.as_ref()).await;
    let before = catalog.load_table(&ident).await.expect("load");

    let changes = TableChanges {
        requirements: vec![TableRequirement::RefSnapshotIdMatch {
            r#ref: "main".to_string(),
            snapshot_id: Some(42),
        }],
        updates: vec![set_property("k", "v")],
    };
    let err = catalog
        .commit_changes(&ident, &changes)
        .await
        .expect_err("requirement");
    assert_eq!(err.kind(), iceberg::ErrorKind::CatalogCommitConflicts);
    let after = catalog.load_table(&ident).await.expect("load");
    assert_eq!(after.metadata_location(), before.metadata_location());
    assert!(!after.metadata().properties().contains_key("k"));
}

#[tokio::test(flavor = "multi_thread")]
async fn concurrent_commits_all_land_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (catalog, _) = catalog(&dir).await;
    let ident = table(catalog.as_ref()).await;
    let uuid = catalog
        .load_table(&ident)
        .await
        .expect("load")
        .metadata()
        .uuid();

    let commits = (0..3).map(|i| {
        let catalog = catalog.clone();
        let ident = ident.clone();
        tokio::spawn(async move {
            let changes = TableChanges {
                requirements: vec![TableRequirement::UuidMatch { uuid }],
                updates: vec![set_property(&format!("k{i}"), "v")],
            };
            catalog.commit_changes(&ident, &changes).await
        })
    });
    for commit in futures::future::join_all(commits).await {
        let committed = commit.expect("task").expect("commit");
        assert!(committed.metadata_location().is_some());
    }
    let table = catalog.load_table(&ident).await.expect("load");
    for i in 0..3 {
        assert_eq!(
            table.metadata().properties().get(&format!("k{i}")),
            Some(&"v".to_string())
        );
    }
    // Three commits after the creation, each recorded in the metadata log.
    assert_eq!(table.metadata().metadata_log().len(), 3);
}

#[tokio::test(flavor = "multi_thread")]
async fn the_catalog_names_the_current_metadata_file_without_loading_the_table() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (catalog, uri) = catalog(&dir).await;
    let ident = table(catalog.as_ref()).await;
    let loaded = catalog.load_table(&ident).await.expect("load");
    let location = loaded.metadata_location().expect("location").to_string();
    assert_eq!(
        catalog.metadata_location(&ident).await,
        Some(location.clone())
    );

    // Another writer's commit is seen at once.
    let moved = format!("{location}.moved");
    let committer = SqlCommitter::connect(&uri, "floe", BindStyle::QMark)
        .await
        .expect("committer");
    assert!(
        committer
            .swap(&ident, &location, &moved)
            .await
            .expect("swap")
    );
    assert_eq!(catalog.metadata_location(&ident).await, Some(moved.clone()));
    assert!(
        committer
            .swap(&ident, &moved, &location)
            .await
            .expect("swap back")
    );

    catalog.drop_table(&ident).await.expect("drop");
    assert_eq!(catalog.metadata_location(&ident).await, None);
    let missing = TableIdent::new(ident.namespace().clone(), "missing".to_string());
    assert_eq!(catalog.metadata_location(&missing).await, None);
}
