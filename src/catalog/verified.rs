//! A catalog that reports a change as done only after it has seen the change recorded.
//!
//! iceberg-catalog-sql 0.10.1 runs each change in an SQL transaction and ignores the
//! result of its `COMMIT`: when another process holds a read transaction on a SQLite
//! catalog (rollback-journal mode), the `COMMIT` fails with `SQLITE_BUSY` after the busy
//! timeout, the transaction rolls back, and the caller is told the change succeeded.
//! [`VerifiedCatalog`] wraps any catalog and, after each change, reads the catalog again:
//!
//! * recorded: the change is acknowledged;
//! * not recorded (reported done but lost, or failed because the catalog's database was
//!   busy): nothing happened. Namespace and table changes are tried again, up to
//!   [`ATTEMPTS`] times in all; a table commit is not (iceberg's transaction re-applies
//!   its actions, see `table::write_protocol`). A metadata file written for a lost
//!   change is deleted. What remains fails as `UNAVAILABLE` ("nothing was committed").
//! * the re-read fails: the outcome is unknown and is reported as such (`UNAVAILABLE`),
//!   never as success and never as "nothing happened".
//!
//! Changes committed through Floe's own path ([`FloeCatalog::commit_changes`], see
//! `catalog::commit`) follow the same rules; a swap lost to a concurrent commit is tried
//! again ([`SWAP_ATTEMPTS`] in all) on the table as it is then.
//!
//! Errors of the inner catalog that say its database is busy or unreachable (SQLite
//! `SQLITE_BUSY`/`SQLITE_LOCKED`, a pool timeout, an I/O error) become `UNAVAILABLE`.
//! Errors made here carry a [`FloeError`] as their source, so they keep their class on
//! the way to the client.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use futures::future::BoxFuture;
use iceberg::table::Table;
use iceberg::{
    Catalog, Error, ErrorKind, Namespace, NamespaceIdent, Result, TableCommit, TableCreation,
    TableIdent,
};

use super::commit::{Attempt, Committer, FloeCatalog, TableChanges};
use crate::error::{ErrorKind as FloeKind, FloeError};
use crate::ops::metrics::metrics;

/// How often a namespace or table change is tried when the catalog loses it.
pub const ATTEMPTS: usize = 2;

/// How often [`FloeCatalog::commit_changes`] tries a compare-and-swap that lost a race.
pub const SWAP_ATTEMPTS: usize = 4;

/// Pause before trying a lost change again.
const RETRY_PAUSE: Duration = Duration::from_millis(200);

/// What re-reading the catalog showed about a change.
enum Seen {
    Recorded,
    Lost,
}

pub struct VerifiedCatalog {
    inner: Arc<dyn Catalog>,
    committer: Committer,
}

impl VerifiedCatalog {
    pub fn new(inner: Arc<dyn Catalog>, committer: Committer) -> Self {
        Self { inner, committer }
    }

    /// Whether the table's current metadata is `location` or descends from it.
    async fn table_has_metadata(&self, ident: &TableIdent, location: &str) -> Result<Seen> {
        match self.inner.load_table(ident).await.busy() {
            Ok(table) => {
                let recorded = table.metadata_location() == Some(location)
                    || table
                        .metadata()
                        .metadata_log()
                        .iter()
                        .any(|entry| entry.metadata_file == location);
                Ok(seen_if(recorded))
            }
            Err(e) if e.kind() == ErrorKind::TableNotFound => Ok(Seen::Lost),
            Err(e) => Err(e),
        }
    }

    async fn table_exists_seen(&self, ident: &TableIdent, wanted: bool) -> Result<Seen> {
        let exists = self.inner.table_exists(ident).await.busy()?;
        Ok(seen_if(exists == wanted))
    }

    async fn namespace_exists_seen(&self, ident: &NamespaceIdent, wanted: bool) -> Result<Seen> {
        let exists = self.inner.namespace_exists(ident).await.busy()?;
        Ok(seen_if(exists == wanted))
    }
}

impl fmt::Debug for VerifiedCatalog {
    // By hand: the inner catalog's Debug may show its configuration.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("VerifiedCatalog").finish_non_exhaustive()
    }
}

/// Runs `change` until the catalog is seen to have recorded it, at most [`ATTEMPTS`]
/// times. `seen` reads the catalog back, given what the change returned when it
/// reported success (`None` after a busy error; then "recorded" means only that the
/// state is as the change would leave it, so the error is returned unchanged).
/// `discard` cleans up after a change reported done but lost.
async fn until_recorded<'a, T: Send>(
    what: &str,
    change: impl Fn() -> BoxFuture<'a, Result<T>> + Send + Sync,
    seen: impl Fn(Option<&T>) -> BoxFuture<'a, Result<Seen>> + Send + Sync,
    discard: impl Fn(&T) -> BoxFuture<'static, ()> + Send + Sync,
) -> Result<T> {
    let mut cause = None;
    for attempt in 1..=ATTEMPTS {
        match change().await.busy() {
            Ok(value) => match checked(what, seen(Some(&value)).await)? {
                Seen::Recorded => return Ok(value),
                Seen::Lost => discard(&value).await,
            },
            Err(e) if is_unavailable(&e) => match checked(what, seen(None).await)? {
                Seen::Recorded => return Err(e),
                Seen::Lost => cause = Some(e),
            },
            Err(e) => return Err(e),
        }
        if attempt < ATTEMPTS {
            tokio::time::sleep(RETRY_PAUSE).await;
        }
    }
    Err(lost(what, cause))
}

/// The change was not recorded by the catalog: nothing happened.
fn lost(what: &str, cause: Option<Error>) -> Error {
    let cause = cause.map_or_else(
        || "its database is busy: another process may hold a lock on it".to_string(),
        |e| e.to_string(),
    );
    let message = format!(
        "the catalog did not record {what} ({cause}); nothing was committed, retrying is safe"
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

/// Marks errors of a busy or unreachable catalog database as `UNAVAILABLE`.
trait Busy {
    fn busy(self) -> Self;
}

impl<T> Busy for Result<T> {
    fn busy(self) -> Self {
        self.map_err(mark_busy)
    }
}

fn mark_busy(e: Error) -> Error {
    if !is_busy(&e) {
        return e;
    }
    let message = format!("the catalog database is busy or unreachable ({e})");
    Error::new(e.kind(), message.clone())
        .with_retryable(e.retryable())
        .with_source(FloeError::unavailable(message))
}

/// SQLite primary result codes of a database locked by another connection.
const SQLITE_BUSY: i64 = 5;
const SQLITE_LOCKED: i64 = 6;

fn is_busy(e: &Error) -> bool {
    let Some(source) = std::error::Error::source(e).and_then(|s| s.downcast_ref::<sqlx::Error>())
    else {
        return false;
    };
    match source {
        sqlx::Error::Database(db) => db
            .code()
            .and_then(|code| code.parse::<i64>().ok())
            .is_some_and(|code| matches!(code & 0xff, SQLITE_BUSY | SQLITE_LOCKED)),
        sqlx::Error::PoolTimedOut
        | sqlx::Error::PoolClosed
        | sqlx::Error::Io(_)
        | sqlx::Error::WorkerCrashed => true,
        _ => false,
    }
}

fn is_unavailable(e: &Error) -> bool {
    std::error::Error::source(e)
        .and_then(|s| s.downcast_ref::<FloeError>())
        .is_some_and(|f| f.kind == FloeKind::Unavailable)
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

/// Deletes the metadata file of a change the catalog did not record (nothing refers
/// to it).
fn discard_metadata(table: &Table) -> BoxFuture<'static, ()> {
    let table = table.clone();
    Box::pin(async move { delete_unrecorded_metadata(&table).await })
}

async fn delete_unrecorded_metadata(table: &Table) {
    if let Some(location) = table.metadata_location()
        && let Err(e) = table.file_io().delete(location).await
    {
        tracing::warn!("could not delete unrecorded metadata file {location}: {e}");
    }
}

fn nothing<T>(_: &T) -> BoxFuture<'static, ()> {
    Box::pin(async {})
}

#[async_trait]
impl Catalog for VerifiedCatalog {
    async fn list_namespaces(
        &self,
        parent: Option<&NamespaceIdent>,
    ) -> Result<Vec<NamespaceIdent>> {
        self.inner.list_namespaces(parent).await.busy()
    }

    async fn create_namespace(
        &self,
        namespace: &NamespaceIdent,
        properties: HashMap<String, String>,
    ) -> Result<Namespace> {
        until_recorded(
            &format!("the creation of schema {}", namespace.join(".")),
            || Box::pin(self.inner.create_namespace(namespace, properties.clone())),
            |_| Box::pin(self.namespace_exists_seen(namespace, true)),
            nothing,
        )
        .await
    }

    async fn get_namespace(&self, namespace: &NamespaceIdent) -> Result<Namespace> {
        self.inner.get_namespace(namespace).await.busy()
    }

    async fn namespace_exists(&self, namespace: &NamespaceIdent) -> Result<bool> {
        self.inner.namespace_exists(namespace).await.busy()
    }

    async fn update_namespace(
        &self,
        namespace: &NamespaceIdent,
        properties: HashMap<String, String>,
    ) -> Result<()> {
        until_recorded(
            &format!("the properties of schema {}", namespace.join(".")),
            || Box::pin(self.inner.update_namespace(namespace, properties.clone())),
            |_| {
                Box::pin(async {
                    let current = self.inner.get_namespace(namespace).await.busy()?;
                    Ok(seen_if(
                        properties
                            .iter()
                            .all(|(k, v)| current.properties().get(k) == Some(v)),
                    ))
                })
            },
            nothing,
        )
        .await
    }

    async fn drop_namespace(&self, namespace: &NamespaceIdent) -> Result<()> {
        until_recorded(
            &format!("the drop of schema {}", namespace.join(".")),
            || self.inner.drop_namespace(namespace),
            |_| Box::pin(self.namespace_exists_seen(namespace, false)),
            nothing,
        )
        .await
    }

    async fn list_tables(&self, namespace: &NamespaceIdent) -> Result<Vec<TableIdent>> {
        self.inner.list_tables(namespace).await.busy()
    }

    async fn create_table(
        &self,
        namespace: &NamespaceIdent,
        creation: TableCreation,
    ) -> Result<Table> {
        let ident = TableIdent::new(namespace.clone(), creation.name.clone());
        until_recorded(
            &format!("the creation of table {ident}"),
            || self.inner.create_table(namespace, copy_creation(&creation)),
            |created: Option<&Table>| {
                let location =
                    created.map(|t| t.metadata_location().unwrap_or_default().to_string());
                let ident = &ident;
                Box::pin(async move {
                    match location {
                        Some(location) => self.table_has_metadata(ident, &location).await,
                        None => self.table_exists_seen(ident, true).await,
                    }
                })
            },
            discard_metadata,
        )
        .await
    }

    async fn load_table(&self, table: &TableIdent) -> Result<Table> {
        self.inner.load_table(table).await.busy()
    }

    async fn drop_table(&self, table: &TableIdent) -> Result<()> {
        until_recorded(
            &format!("the drop of table {table}"),
            || self.inner.drop_table(table),
            |_| Box::pin(self.table_exists_seen(table, false)),
            nothing,
        )
        .await
    }

    /// Drops the table (verified), then deletes its files: never the files of a table
    /// that is still in the catalog.
    async fn purge_table(&self, table: &TableIdent) -> Result<()> {
        let loaded = self.inner.load_table(table).await.busy()?;
        self.drop_table(table).await?;
        iceberg::drop_table_data(&loaded).await
    }

    async fn table_exists(&self, table: &TableIdent) -> Result<bool> {
        self.inner.table_exists(table).await.busy()
    }

    async fn rename_table(&self, src: &TableIdent, dest: &TableIdent) -> Result<()> {
        until_recorded(
            &format!("the rename of table {src} to {dest}"),
            || self.inner.rename_table(src, dest),
            |_| {
                Box::pin(async {
                    let moved = self.inner.table_exists(dest).await.busy()?
                        && (src == dest || !self.inner.table_exists(src).await.busy()?);
                    Ok(seen_if(moved))
                })
            },
            nothing,
        )
        .await
    }

    async fn register_table(&self, table: &TableIdent, metadata_location: String) -> Result<Table> {
        until_recorded(
            &format!("the registration of table {table}"),
            || self.inner.register_table(table, metadata_location.clone()),
            |_| Box::pin(self.table_has_metadata(table, &metadata_location)),
            nothing,
        )
        .await
    }

    /// A commit is acknowledged once the table's metadata is the committed one (or
    /// descends from it). A lost commit is not tried again here: the commit cannot be
    /// replayed as is, and iceberg's transaction re-applies its actions on a refreshed
    /// table when the caller tries again.
    async fn update_table(&self, commit: TableCommit) -> Result<Table> {
        let ident = commit.identifier().clone();
        let what = format!("the commit to table {ident}");
        let committed = self.inner.update_table(commit).await.busy();
        if let Err(e) = &committed
            && e.kind() == ErrorKind::CatalogCommitConflicts
        {
            metrics().commit_conflict();
        }
        let committed = committed?;
        let location = committed.metadata_location().unwrap_or_default();
        match checked(&what, self.table_has_metadata(&ident, location).await)? {
            Seen::Recorded => {
                metrics().committed();
                Ok(committed)
            }
            Seen::Lost => {
                delete_unrecorded_metadata(&committed).await;
                Err(lost(&what, None))
            }
        }
    }
}

#[async_trait]
impl FloeCatalog for VerifiedCatalog {
    fn check_commit_changes(&self) -> Result<()> {
        self.committer.check()
    }

    async fn metadata_location(&self, ident: &TableIdent) -> Option<String> {
        match &self.committer {
            Committer::Sql(sql) => sql.metadata_location(ident).await.ok().flatten(),
            Committer::Rest(_) | Committer::Unsupported(_) => None,
        }
    }

    /// Only a lost race is tried again here: a change the catalog lost (a busy database)
    /// fails as `UNAVAILABLE` like `update_table`, and the write protocol decides.
    async fn commit_changes(&self, ident: &TableIdent, changes: &TableChanges) -> Result<Table> {
        let what = format!("the commit to table {ident}");
        for attempt in 1..=SWAP_ATTEMPTS {
            let attempted = self
                .committer
                .attempt(self.inner.as_ref(), ident, changes)
                .await
                .busy()?;
            let (table, error) = match attempted {
                Attempt::Swapped(table) => (table, None),
                Attempt::Uncertain { table, error } => (table, Some(error)),
                Attempt::Unknown(error) => return Err(unknown(&what, error)),
                Attempt::RaceLost => {
                    metrics().commit_conflict();
                    if attempt < SWAP_ATTEMPTS {
                        metrics().commit_retried();
                        tokio::time::sleep(RETRY_PAUSE / 4).await;
                    }
                    continue;
                }
            };
            let location = table.metadata_location().unwrap_or_default();
            match checked(&what, self.table_has_metadata(ident, location).await)? {
                Seen::Recorded => {
                    metrics().committed();
                    return Ok(table);
                }
                Seen::Lost => {
                    delete_unrecorded_metadata(&table).await;
                    return Err(match error.map(mark_busy) {
                        Some(e) if !is_unavailable(&e) => e,
                        cause => lost(&what, cause),
                    });
                }
            }
        }
        Err(Error::new(
            ErrorKind::CatalogCommitConflicts,
            format!(
                "{what} lost to concurrent commits {SWAP_ATTEMPTS} times; nothing was committed"
            ),
        )
        .with_retryable(true))
    }
}
