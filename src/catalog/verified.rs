//! A catalog that reports a change as done only after it has seen the change recorded.
//!
//! iceberg-catalog-sql 0.10.1 runs each change in an SQL transaction and ignores the
//! result of its `COMMIT`: when another process holds a read transaction on a SQLite
//! catalog (rollback-journal mode), the `COMMIT` fails with `SQLITE_BUSY` after the busy
//! timeout, the transaction rolls back, and the caller is told the change succeeded.
//! [`VerifiedCatalog`] wraps any catalog and, after each change the inner catalog
//! reports as done, reads the catalog again:
//!
//! * recorded: the change is acknowledged;
//! * not recorded: nothing happened. Namespace and table changes are tried again, up to
//!   [`ATTEMPTS`] times in all; a table commit is not (iceberg's transaction re-applies
//!   its actions, see `table::write_protocol`). A metadata file written for the lost
//!   change is deleted. What remains fails as `UNAVAILABLE` ("nothing was committed").
//! * the re-read fails: the outcome is unknown and is reported as such (`UNAVAILABLE`),
//!   never as success and never as "nothing happened".
//!
//! Errors made here carry a [`FloeError`] as their source, so they keep their class on
//! the way to the client.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use iceberg::table::Table;
use iceberg::{
    Catalog, Error, ErrorKind, Namespace, NamespaceIdent, Result, TableCommit, TableCreation,
    TableIdent,
};

use crate::error::FloeError;

/// How often a namespace or table change is tried when the catalog loses it.
pub const ATTEMPTS: usize = 2;

/// Pause before trying a lost change again.
const RETRY_PAUSE: Duration = Duration::from_millis(200);

/// What re-reading the catalog showed about a change.
enum Seen {
    Recorded,
    Lost,
}

pub struct VerifiedCatalog {
    inner: Arc<dyn Catalog>,
}

impl VerifiedCatalog {
    pub fn new(inner: Arc<dyn Catalog>) -> Self {
        Self { inner }
    }

    /// Whether the table's current metadata is `location` or descends from it.
    async fn table_has_metadata(&self, ident: &TableIdent, location: &str) -> Result<Seen> {
        match self.inner.load_table(ident).await {
            Ok(table) => {
                let metadata = table.metadata();
                let recorded = table.metadata_location() == Some(location)
                    || metadata
                        .metadata_log()
                        .iter()
                        .any(|entry| entry.metadata_file == location);
                Ok(if recorded { Seen::Recorded } else { Seen::Lost })
            }
            Err(e) if e.kind() == ErrorKind::TableNotFound => Ok(Seen::Lost),
            Err(e) => Err(e),
        }
    }

    /// Deletes the metadata file of a change the catalog did not record (nothing
    /// refers to it).
    async fn delete_unrecorded_metadata(&self, table: &Table) {
        if let Some(location) = table.metadata_location()
            && let Err(e) = table.file_io().delete(location).await
        {
            tracing::warn!("could not delete unrecorded metadata file {location}: {e}");
        }
    }
}

impl fmt::Debug for VerifiedCatalog {
    // By hand: the inner catalog's Debug may show its configuration.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("VerifiedCatalog").finish_non_exhaustive()
    }
}

/// The change was not recorded by the catalog: nothing happened.
fn lost(what: &str) -> Error {
    let message = format!(
        "the catalog did not record {what} (its database is busy: another process may hold \
         a lock on it); nothing was committed, retrying is safe"
    );
    Error::new(ErrorKind::Unexpected, message.clone()).with_source(FloeError::unavailable(message))
}

/// The catalog could not be read back after a change: it may or may not have happened.
fn unknown(what: &str, cause: Error) -> Error {
    let message = format!(
        "could not learn whether the catalog recorded {what} ({cause}); check before retrying"
    );
    Error::new(ErrorKind::Unexpected, message.clone()).with_source(FloeError::unavailable(message))
}

/// Reads back after a change: a failed read makes the outcome unknown.
fn checked(what: &str, seen: Result<Seen>) -> Result<Seen> {
    seen.map_err(|e| unknown(what, e))
}

fn seen_if(recorded: bool) -> Seen {
    if recorded { Seen::Recorded } else { Seen::Lost }
}

/// A copy of a table creation, for trying it again.
fn copy_creation(creation: &TableCreation) -> TableCreation {
    TableCreation {
        name: creation.name.clone(),
        location: creation.location.clone(),
        schema: creation.schema.clone(),
        partition_spec: creation.partition_spec.clone(),
        sort_order: creation.sort_order.clone(),
        properties: creation.properties.clone(),
        format_version: creation.format_version,
    }
}

#[async_trait]
impl Catalog for VerifiedCatalog {
    async fn list_namespaces(
        &self,
        parent: Option<&NamespaceIdent>,
    ) -> Result<Vec<NamespaceIdent>> {
        self.inner.list_namespaces(parent).await
    }

    async fn create_namespace(
        &self,
        namespace: &NamespaceIdent,
        properties: HashMap<String, String>,
    ) -> Result<Namespace> {
        let what = format!("the creation of schema {}", namespace.join("."));
        for attempt in 1..=ATTEMPTS {
            let created = self
                .inner
                .create_namespace(namespace, properties.clone())
                .await?;
            let exists = self.inner.namespace_exists(namespace).await;
            if let Seen::Recorded = checked(&what, exists.map(seen_if))? {
                return Ok(created);
            }
            pause_before(attempt).await;
        }
        Err(lost(&what))
    }

    async fn get_namespace(&self, namespace: &NamespaceIdent) -> Result<Namespace> {
        self.inner.get_namespace(namespace).await
    }

    async fn namespace_exists(&self, namespace: &NamespaceIdent) -> Result<bool> {
        self.inner.namespace_exists(namespace).await
    }

    async fn update_namespace(
        &self,
        namespace: &NamespaceIdent,
        properties: HashMap<String, String>,
    ) -> Result<()> {
        let what = format!("the properties of schema {}", namespace.join("."));
        for attempt in 1..=ATTEMPTS {
            self.inner
                .update_namespace(namespace, properties.clone())
                .await?;
            let current = self.inner.get_namespace(namespace).await;
            let seen = current.map(|ns| {
                seen_if(
                    properties
                        .iter()
                        .all(|(k, v)| ns.properties().get(k) == Some(v)),
                )
            });
            if let Seen::Recorded = checked(&what, seen)? {
                return Ok(());
            }
            pause_before(attempt).await;
        }
        Err(lost(&what))
    }

    async fn drop_namespace(&self, namespace: &NamespaceIdent) -> Result<()> {
        let what = format!("the drop of schema {}", namespace.join("."));
        for attempt in 1..=ATTEMPTS {
            self.inner.drop_namespace(namespace).await?;
            let exists = self.inner.namespace_exists(namespace).await;
            if let Seen::Recorded = checked(&what, exists.map(|e| seen_if(!e)))? {
                return Ok(());
            }
            pause_before(attempt).await;
        }
        Err(lost(&what))
    }

    async fn list_tables(&self, namespace: &NamespaceIdent) -> Result<Vec<TableIdent>> {
        self.inner.list_tables(namespace).await
    }

    async fn create_table(
        &self,
        namespace: &NamespaceIdent,
        creation: TableCreation,
    ) -> Result<Table> {
        let ident = TableIdent::new(namespace.clone(), creation.name.clone());
        let what = format!("the creation of table {ident}");
        for attempt in 1..=ATTEMPTS {
            let table = self
                .inner
                .create_table(namespace, copy_creation(&creation))
                .await?;
            let location = table.metadata_location().unwrap_or_default();
            let seen = self.table_has_metadata(&ident, location).await;
            if let Seen::Recorded = checked(&what, seen)? {
                return Ok(table);
            }
            self.delete_unrecorded_metadata(&table).await;
            pause_before(attempt).await;
        }
        Err(lost(&what))
    }

    async fn load_table(&self, table: &TableIdent) -> Result<Table> {
        self.inner.load_table(table).await
    }

    async fn drop_table(&self, table: &TableIdent) -> Result<()> {
        let what = format!("the drop of table {table}");
        for attempt in 1..=ATTEMPTS {
            self.inner.drop_table(table).await?;
            let exists = self.inner.table_exists(table).await;
            if let Seen::Recorded = checked(&what, exists.map(|e| seen_if(!e)))? {
                return Ok(());
            }
            pause_before(attempt).await;
        }
        Err(lost(&what))
    }

    /// Drops the table (verified), then deletes its files: never the files of a table
    /// that is still in the catalog.
    async fn purge_table(&self, table: &TableIdent) -> Result<()> {
        let loaded = self.inner.load_table(table).await?;
        self.drop_table(table).await?;
        iceberg::drop_table_data(&loaded).await
    }

    async fn table_exists(&self, table: &TableIdent) -> Result<bool> {
        self.inner.table_exists(table).await
    }

    async fn rename_table(&self, src: &TableIdent, dest: &TableIdent) -> Result<()> {
        let what = format!("the rename of table {src} to {dest}");
        for attempt in 1..=ATTEMPTS {
            self.inner.rename_table(src, dest).await?;
            let seen = async {
                let moved = self.inner.table_exists(dest).await?
                    && (src == dest || !self.inner.table_exists(src).await?);
                Ok(seen_if(moved))
            };
            if let Seen::Recorded = checked(&what, seen.await)? {
                return Ok(());
            }
            pause_before(attempt).await;
        }
        Err(lost(&what))
    }

    async fn register_table(&self, table: &TableIdent, metadata_location: String) -> Result<Table> {
        let what = format!("the registration of table {table}");
        for attempt in 1..=ATTEMPTS {
            let registered = self
                .inner
                .register_table(table, metadata_location.clone())
                .await?;
            let seen = self.table_has_metadata(table, &metadata_location).await;
            if let Seen::Recorded = checked(&what, seen)? {
                return Ok(registered);
            }
            pause_before(attempt).await;
        }
        Err(lost(&what))
    }

    /// A commit is acknowledged once the table's metadata is the committed one (or
    /// descends from it). A lost commit is not tried again here: the commit cannot be
    /// replayed as is, and iceberg's transaction re-applies its actions on a refreshed
    /// table when the caller tries again.
    async fn update_table(&self, commit: TableCommit) -> Result<Table> {
        let ident = commit.identifier().clone();
        let what = format!("the commit to table {ident}");
        let committed = self.inner.update_table(commit).await?;
        let location = committed.metadata_location().unwrap_or_default();
        let seen = self.table_has_metadata(&ident, location).await;
        match checked(&what, seen)? {
            Seen::Recorded => Ok(committed),
            Seen::Lost => {
                self.delete_unrecorded_metadata(&committed).await;
                Err(lost(&what))
            }
        }
    }
}

async fn pause_before(attempt: usize) {
    if attempt < ATTEMPTS {
        tokio::time::sleep(RETRY_PAUSE).await;
    }
}
