//! Floe's own commit path, for changes iceberg 0.10.1 cannot express (an `overwrite`
//! snapshot, a new schema in the same commit as a snapshot, ...): its `Catalog::update_table`
//! only takes a `TableCommit`, which only iceberg's own transaction actions can build.
//!
//! A commit is a list of [`TableRequirement`]s and [`TableUpdate`]s ([`TableChanges`],
//! the shape of the Iceberg REST `CommitTableRequest`). One attempt ([`Committer::attempt`])
//! reads the table's current metadata, checks the requirements, applies the updates,
//! writes the new metadata file and swaps the catalog's pointer to it only if the
//! pointer is still the metadata read (compare-and-swap). What an attempt's outcome
//! means, and retrying, is [`FloeCatalog::commit_changes`] (in `verified`).
//!
//! Implemented for the SQL catalog (the same `UPDATE … WHERE metadata_location = <old>`
//! as iceberg-catalog-sql, written with sqlx's `Any` driver so PostgreSQL fits) and the
//! REST catalog (the requirements and updates are POSTed as a `CommitTableRequest`; the
//! server checks them and writes the metadata). The memory catalog keeps its state
//! private: not supported.

use std::str::FromStr;
use std::sync::Arc;

use async_trait::async_trait;
use iceberg::spec::TableMetadata;
use iceberg::table::Table;
use iceberg::{
    Catalog, Error, ErrorKind, MetadataLocation, Result, TableIdent, TableRequirement, TableUpdate,
};
use sqlx::AnyPool;
use sqlx::any::AnyPoolOptions;

use super::rest::RefreshingRestCatalog;
use super::rest_api::CommitAnswer;
use crate::error::FloeError;

/// What one commit asks of a table: all requirements hold, then all updates apply.
#[derive(Debug, Clone, Default)]
pub struct TableChanges {
    pub requirements: Vec<TableRequirement>,
    pub updates: Vec<TableUpdate>,
}

impl TableChanges {
    /// `updates` to the table `metadata` describes — the same table (its UUID), not one
    /// that replaced it under its name — if `requirements` also hold.
    pub fn of_table(
        metadata: &iceberg::spec::TableMetadata,
        requirements: impl IntoIterator<Item = TableRequirement>,
        updates: Vec<TableUpdate>,
    ) -> Self {
        let same_table = TableRequirement::UuidMatch {
            uuid: metadata.uuid(),
        };
        Self {
            requirements: std::iter::once(same_table).chain(requirements).collect(),
            updates,
        }
    }
}

/// An Iceberg catalog that can also commit arbitrary [`TableChanges`].
#[async_trait]
pub trait FloeCatalog: Catalog {
    /// Commits `changes` to the table atomically and returns the table as committed.
    ///
    /// * Acknowledged only once the catalog is seen to hold the new metadata.
    /// * A requirement that does not hold fails with `CatalogCommitConflicts` (retryable:
    ///   the caller rebuilds its changes from the table as it is now).
    /// * A swap lost to a concurrent commit is tried again (re-read, re-check, re-apply),
    ///   a bounded number of times, then fails with `CatalogCommitConflicts`.
    /// * Not recorded (a busy catalog database): fails as `UNAVAILABLE`, nothing
    ///   committed. The outcome could not be learned: `UNAVAILABLE`, outcome unknown.
    async fn commit_changes(&self, ident: &TableIdent, changes: &TableChanges) -> Result<Table>;

    /// Fails (`UNIMPLEMENTED`) if this catalog cannot take [`Self::commit_changes`]: a
    /// statement that will need it checks before it writes anything.
    fn check_commit_changes(&self) -> Result<()>;

    /// The metadata file the catalog names for table `ident`, if it can tell without
    /// loading the table and a table loaded at that file is always the same (its
    /// storage properties are the catalog's: a SQL catalog). `None` otherwise, or if
    /// asking failed (a full load then says why).
    async fn metadata_location(&self, ident: &TableIdent) -> Option<String>;
}

/// The result of one compare-and-swap attempt.
pub enum Attempt {
    /// The pointer now names this table's metadata (the table returned).
    Swapped(Table),
    /// The pointer moved between the read and the swap: nothing was changed.
    RaceLost,
    /// The swap itself failed: whether the pointer names the metadata of `table` (the
    /// table as it would be committed) must be read back.
    Uncertain { table: Table, error: Error },
    /// The catalog could not say whether it committed, and there is no file of ours to
    /// look for (a REST catalog that answered 5xx, or did not answer).
    Unknown(Error),
}

/// How a kind of catalog commits [`TableChanges`].
pub enum Committer {
    Sql(SqlCommitter),
    Rest(Arc<RefreshingRestCatalog>),
    /// Why this catalog cannot commit changes iceberg's transactions cannot express.
    Unsupported(String),
}

impl Committer {
    pub fn check(&self) -> Result<()> {
        match self {
            Committer::Sql(_) | Committer::Rest(_) => Ok(()),
            Committer::Unsupported(why) => Err(unsupported(why)),
        }
    }

    /// One attempt: read, check, apply, write the new metadata, swap. `catalog` is the
    /// plain catalog the table is read from. An error means nothing was committed; on
    /// `RaceLost` the new metadata file is deleted.
    pub async fn attempt(
        &self,
        catalog: &dyn Catalog,
        ident: &TableIdent,
        changes: &TableChanges,
    ) -> Result<Attempt> {
        match self {
            Committer::Sql(sql) => sql.attempt(catalog, ident, changes).await,
            Committer::Rest(rest) => rest_attempt(rest, catalog, ident, changes).await,
            Committer::Unsupported(why) => Err(unsupported(why)),
        }
    }
}

/// One REST commit. The requirements are checked here first, so a commit that cannot
/// hold is not sent; the server checks them again against the table as it is then.
async fn rest_attempt(
    rest: &RefreshingRestCatalog,
    catalog: &dyn Catalog,
    ident: &TableIdent,
    changes: &TableChanges,
) -> Result<Attempt> {
    let table = catalog.load_table(ident).await?;
    apply_changes(&table, changes)?;
    match rest.commit(ident, changes).await? {
        CommitAnswer::Committed(answer) => Ok(Attempt::Swapped(with_metadata(
            &table,
            answer.metadata,
            &answer.metadata_location,
        )?)),
        CommitAnswer::Conflict(message) => Err(Error::new(
            ErrorKind::CatalogCommitConflicts,
            format!("the REST catalog refused the commit to table {ident}: {message}"),
        )
        .with_retryable(true)),
        CommitAnswer::Unknown(message) => Ok(Attempt::Unknown(Error::new(
            ErrorKind::Unexpected,
            format!("the REST catalog did not confirm the commit to table {ident}: {message}"),
        ))),
    }
}

/// The table with `changes` applied to its metadata, not committed, and the location
/// its next metadata file would have. Fails as iceberg does when a requirement does
/// not hold (`CatalogCommitConflicts`).
pub fn apply_changes(table: &Table, changes: &TableChanges) -> Result<(TableMetadata, String)> {
    for requirement in &changes.requirements {
        requirement.check(Some(table.metadata()))?;
    }
    let current = table.metadata_location_result()?;
    let mut builder = table
        .metadata()
        .clone()
        .into_builder(Some(current.to_string()));
    for update in &changes.updates {
        builder = update.clone().apply(builder)?;
    }
    let metadata = builder.build()?.metadata;
    // Another writer's naming (e.g. `v2.metadata.json`): a new name in Iceberg's own.
    let current = MetadataLocation::from_str(current)
        .unwrap_or_else(|_| MetadataLocation::new_with_metadata(metadata.location(), &metadata));
    let location = current
        .with_next_version()
        .with_new_metadata(&metadata)
        .to_string();
    Ok((metadata, location))
}

/// The same table with other metadata: what a statement plans against when its commit
/// will change the table's schema or partitioning (`location` is the table's current
/// metadata file then), or the table as committed.
pub fn with_metadata(table: &Table, metadata: TableMetadata, location: &str) -> Result<Table> {
    Table::builder()
        .file_io(table.file_io().clone())
        .identifier(table.identifier().clone())
        .metadata(Arc::new(metadata))
        .metadata_location(location)
        .runtime(iceberg::Runtime::try_current()?)
        .build()
}

/// Placeholders in SQL statements: `?` (SQLite, MySQL) or `$1, $2, …` (PostgreSQL).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BindStyle {
    QMark,
    DollarNumeric,
}

/// Commits through the `iceberg_tables` table of a SQL catalog (the JDBC/pyiceberg
/// layout iceberg-catalog-sql uses).
pub struct SqlCommitter {
    pool: AnyPool,
    catalog_name: String,
    bind_style: BindStyle,
}

impl SqlCommitter {
    pub async fn connect(uri: &str, catalog_name: &str, bind_style: BindStyle) -> Result<Self> {
        sqlx::any::install_default_drivers();
        let pool = AnyPoolOptions::new()
            .max_connections(2)
            .connect(uri)
            .await
            .map_err(|e| sql_error("cannot open the catalog database", e))?;
        Ok(Self {
            pool,
            catalog_name: catalog_name.to_string(),
            bind_style,
        })
    }

    async fn attempt(
        &self,
        catalog: &dyn Catalog,
        ident: &TableIdent,
        changes: &TableChanges,
    ) -> Result<Attempt> {
        let table = catalog.load_table(ident).await?;
        let current = table.metadata_location_result()?.to_string();
        let (metadata, location) = apply_changes(&table, changes)?;
        let new_location = MetadataLocation::from_str(&location)?;
        if let Err(e) = metadata.write_to(table.file_io(), &new_location).await {
            delete_quietly(&table, &location).await;
            return Err(e);
        }
        let committed = with_metadata(&table, metadata, &location)?;
        match self.swap(ident, &current, &location).await {
            Ok(true) => Ok(Attempt::Swapped(committed)),
            Ok(false) => {
                delete_quietly(&table, &location).await;
                Ok(Attempt::RaceLost)
            }
            Err(error) => Ok(Attempt::Uncertain {
                table: committed,
                error,
            }),
        }
    }

    /// The metadata file the catalog names for table `ident`; `None` if there is no
    /// such table.
    pub async fn metadata_location(&self, ident: &TableIdent) -> Result<Option<String>> {
        let statement = self.placeholders(
            "SELECT metadata_location FROM iceberg_tables WHERE catalog_name = ? \
             AND table_namespace = ? AND table_name = ? \
             AND (iceberg_type = 'TABLE' OR iceberg_type IS NULL)",
        );
        let namespace = ident.namespace().join(".");
        let row: Option<(Option<String>,)> = sqlx::query_as(&statement)
            .bind(self.catalog_name.as_str())
            .bind(namespace.as_str())
            .bind(ident.name())
            .fetch_optional(&self.pool)
            .await
            .map_err(|e| sql_error("reading the table's metadata location failed", e))?;
        Ok(row.and_then(|(location,)| location))
    }

    /// Points the table at `new` if it still points at `expected`; `false` if it did not.
    pub async fn swap(&self, ident: &TableIdent, expected: &str, new: &str) -> Result<bool> {
        let statement = self.placeholders(
            "UPDATE iceberg_tables SET metadata_location = ?, previous_metadata_location = ? \
             WHERE catalog_name = ? AND table_namespace = ? AND table_name = ? \
             AND (iceberg_type = 'TABLE' OR iceberg_type IS NULL) AND metadata_location = ?",
        );
        let namespace = ident.namespace().join(".");
        let result = sqlx::query(&statement)
            .bind(new)
            .bind(expected)
            .bind(self.catalog_name.as_str())
            .bind(namespace.as_str())
            .bind(ident.name())
            .bind(expected)
            .execute(&self.pool)
            .await
            .map_err(|e| sql_error("the commit's UPDATE failed", e))?;
        Ok(result.rows_affected() == 1)
    }

    fn placeholders(&self, statement: &str) -> String {
        match self.bind_style {
            BindStyle::QMark => statement.to_string(),
            BindStyle::DollarNumeric => {
                let mut n = 0;
                statement
                    .chars()
                    .map(|c| {
                        if c == '?' {
                            n += 1;
                            format!("${n}")
                        } else {
                            c.to_string()
                        }
                    })
                    .collect()
            }
        }
    }
}

fn unsupported(why: &str) -> Error {
    Error::new(ErrorKind::FeatureUnsupported, why).with_source(FloeError::unimplemented(why))
}

/// Keeps the sqlx error as the source, where `verified` looks for a busy database.
fn sql_error(what: &str, e: sqlx::Error) -> Error {
    Error::new(ErrorKind::Unexpected, format!("{what}: {e}")).with_source(e)
}

async fn delete_quietly(table: &Table, location: &str) {
    if let Err(e) = table.file_io().delete(location).await {
        tracing::warn!("could not delete unused metadata file {location}: {e}");
    }
}
