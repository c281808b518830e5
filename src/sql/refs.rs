//! Tags and branches, in Spark's Iceberg syntax:
//!
//! ```sql
//! ALTER TABLE t CREATE [OR REPLACE] TAG|BRANCH [IF NOT EXISTS] name
//!     [AS OF VERSION <snapshot id>] [RETAIN <n> DAYS|HOURS|MINUTES]
//! ALTER TABLE t REPLACE TAG|BRANCH name [AS OF VERSION <snapshot id>] [RETAIN …]
//! ALTER TABLE t DROP TAG|BRANCH [IF EXISTS] name
//! ```
//!
//! A new tag or branch names the table's current snapshot unless `AS OF VERSION` says
//! otherwise; `RETAIN` is its maximum age (`max-ref-age-ms`). Each statement is one
//! commit that requires the reference to be as the statement found it, so concurrent
//! changes to one reference cannot both succeed (`ABORTED`). Reading them: `t VERSION
//! AS OF 'name'` (`table::time_travel`). sqlparser reads none of this: `alter_forms`
//! does.

use datafusion::sql::sqlparser::ast::ObjectName;
use iceberg::spec::{MAIN_BRANCH, SnapshotReference, SnapshotRetention};
use iceberg::{TableRequirement, TableUpdate};

use super::{Caller, Engine};
use crate::catalog::commit::TableChanges;
use crate::error::{FloeError, Result};
use crate::table::metadata_tables::named_refs;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RefKind {
    Tag,
    Branch,
}

impl RefKind {
    fn name(self) -> &'static str {
        match self {
            Self::Tag => "tag",
            Self::Branch => "branch",
        }
    }

    fn of(reference: &SnapshotReference) -> Self {
        match reference.retention {
            SnapshotRetention::Tag { .. } => Self::Tag,
            SnapshotRetention::Branch { .. } => Self::Branch,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RefAction {
    Create {
        /// `OR REPLACE`: an existing reference is moved.
        or_replace: bool,
        if_not_exists: bool,
        /// `AS OF VERSION`; else the current snapshot.
        snapshot_id: Option<i64>,
        /// `RETAIN`, in milliseconds.
        retain_ms: Option<i64>,
    },
    /// `REPLACE`: the reference must exist.
    Replace {
        snapshot_id: Option<i64>,
        retain_ms: Option<i64>,
    },
    Drop {
        if_exists: bool,
    },
}

/// One tag or branch statement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RefStatement {
    pub table: ObjectName,
    pub kind: RefKind,
    pub name: String,
    pub action: RefAction,
}

impl Engine {
    /// Runs a tag or branch statement (see the module documentation).
    pub(super) async fn run_ref_statement(
        &self,
        caller: &Caller,
        statement: &RefStatement,
    ) -> Result<()> {
        self.catalog.check_commit_changes()?;
        let ident = self.names(caller).table(&statement.table)?;
        let table = self.catalog.load_table(&ident).await?;
        let metadata = table.metadata();
        let (kind, name) = (statement.kind.name(), &statement.name);
        let existing = named_refs(&table)?.remove(name);
        if let Some(found) = &existing
            && RefKind::of(found) != statement.kind
        {
            return Err(FloeError::invalid(format!(
                "'{name}' of {ident} is a {}, not a {kind}",
                RefKind::of(found).name()
            )));
        }
        if name == MAIN_BRANCH {
            return Err(FloeError::invalid(format!(
                "the {MAIN_BRANCH} branch of {ident} cannot be created, replaced or dropped"
            )));
        }
        let update = match &statement.action {
            RefAction::Drop { if_exists } => match existing {
                None if *if_exists => return Ok(()),
                None => {
                    return Err(FloeError::not_found(format!(
                        "{ident} has no {kind} '{name}'"
                    )));
                }
                Some(_) => TableUpdate::RemoveSnapshotRef {
                    ref_name: name.clone(),
                },
            },
            RefAction::Create {
                or_replace,
                if_not_exists,
                snapshot_id,
                retain_ms,
            } => {
                if existing.is_some() && *if_not_exists {
                    return Ok(());
                }
                if existing.is_some() && !or_replace {
                    return Err(FloeError::already_exists(format!(
                        "{ident} already has a {kind} '{name}'"
                    )));
                }
                self.set_ref(&table, statement, *snapshot_id, *retain_ms)?
            }
            RefAction::Replace {
                snapshot_id,
                retain_ms,
            } => {
                if existing.is_none() {
                    return Err(FloeError::not_found(format!(
                        "{ident} has no {kind} '{name}'"
                    )));
                }
                self.set_ref(&table, statement, *snapshot_id, *retain_ms)?
            }
        };
        let changes = TableChanges::of_table(
            metadata,
            [TableRequirement::RefSnapshotIdMatch {
                r#ref: name.clone(),
                snapshot_id: existing.map(|r| r.snapshot_id),
            }],
            vec![update],
        );
        // A concurrent change of the reference fails the requirement: ABORTED.
        self.catalog.commit_changes(&ident, &changes).await?;
        Ok(())
    }

    /// The update that points the statement's reference at its snapshot.
    fn set_ref(
        &self,
        table: &iceberg::table::Table,
        statement: &RefStatement,
        snapshot_id: Option<i64>,
        retain_ms: Option<i64>,
    ) -> Result<TableUpdate> {
        let metadata = table.metadata();
        let snapshot_id = match snapshot_id {
            Some(id) if metadata.snapshot_by_id(id).is_some() => id,
            Some(id) => {
                return Err(FloeError::not_found(format!(
                    "table {} has no snapshot {id}",
                    table.identifier()
                )));
            }
            None => metadata.current_snapshot_id().ok_or_else(|| {
                FloeError::invalid(format!(
                    "table {} has no snapshot yet to name",
                    table.identifier()
                ))
            })?,
        };
        let retention = match statement.kind {
            RefKind::Tag => SnapshotRetention::Tag {
                max_ref_age_ms: retain_ms,
            },
            RefKind::Branch => SnapshotRetention::Branch {
                min_snapshots_to_keep: None,
                max_snapshot_age_ms: None,
                max_ref_age_ms: retain_ms,
            },
        };
        Ok(TableUpdate::SetSnapshotRef {
            ref_name: statement.name.clone(),
            reference: SnapshotReference::new(snapshot_id, retention),
        })
    }
}
