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
//! AS OF 'name'` (`table::time_travel`). sqlparser knows none of this: it is parsed
//! here, before the statement reaches it.

use datafusion::sql::sqlparser::ast::ObjectName;
use datafusion::sql::sqlparser::keywords::Keyword;
use datafusion::sql::sqlparser::parser::{Parser, ParserError};
use datafusion::sql::sqlparser::tokenizer::Token;
use iceberg::spec::{MAIN_BRANCH, SnapshotReference, SnapshotRetention};
use iceberg::{TableRequirement, TableUpdate};

use super::dialect::FloeDialect;
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

/// The tag or branch statement `sql` is, if it is one.
pub fn parse_ref_statement(sql: &str) -> Result<Option<RefStatement>> {
    let dialect = FloeDialect::default();
    let mut parser = Parser::new(&dialect)
        .try_with_sql(sql)
        .map_err(|e| FloeError::invalid(format!("SQL error: {e}")))?;
    if !parser.parse_keywords(&[Keyword::ALTER, Keyword::TABLE]) {
        return Ok(None);
    }
    let Ok(table) = parser.parse_object_name(false) else {
        return Ok(None);
    };
    let verb =
        match parser.parse_one_of_keywords(&[Keyword::CREATE, Keyword::REPLACE, Keyword::DROP]) {
            Some(verb) => verb,
            None => return Ok(None),
        };
    let or_replace =
        verb == Keyword::CREATE && parser.parse_keywords(&[Keyword::OR, Keyword::REPLACE]);
    let kind = if parser.parse_keyword(Keyword::TAG) {
        RefKind::Tag
    } else if next_word_is(&mut parser, "BRANCH") {
        RefKind::Branch
    } else {
        return Ok(None);
    };
    let statement = parse_rest(&mut parser, table, kind, verb, or_replace)
        .map_err(|e| FloeError::invalid(format!("SQL error: {e}")))?;
    Ok(Some(statement))
}

fn parse_rest(
    parser: &mut Parser,
    table: ObjectName,
    kind: RefKind,
    verb: Keyword,
    or_replace: bool,
) -> std::result::Result<RefStatement, ParserError> {
    let if_not_exists = verb == Keyword::CREATE
        && parser.parse_keywords(&[Keyword::IF, Keyword::NOT, Keyword::EXISTS]);
    let if_exists = verb == Keyword::DROP && parser.parse_keywords(&[Keyword::IF, Keyword::EXISTS]);
    let name = parser.parse_identifier()?.value;
    let action = match verb {
        Keyword::DROP => RefAction::Drop { if_exists },
        _ => {
            let snapshot_id =
                match parser.parse_keywords(&[Keyword::AS, Keyword::OF, Keyword::VERSION]) {
                    true => Some(snapshot_id(parser)?),
                    false => None,
                };
            let retain_ms = match parser.parse_keyword(Keyword::RETAIN) {
                true => Some(retention_ms(parser)?),
                false => None,
            };
            match verb {
                Keyword::CREATE => RefAction::Create {
                    or_replace,
                    if_not_exists,
                    snapshot_id,
                    retain_ms,
                },
                _ => RefAction::Replace {
                    snapshot_id,
                    retain_ms,
                },
            }
        }
    };
    while parser.consume_token(&Token::SemiColon) {}
    if parser.peek_token().token != Token::EOF {
        return parser.expected("end of statement", parser.peek_token());
    }
    Ok(RefStatement {
        table,
        kind,
        name,
        action,
    })
}

fn next_word_is(parser: &mut Parser, word: &str) -> bool {
    match &parser.peek_token().token {
        Token::Word(w) if w.value.eq_ignore_ascii_case(word) && w.quote_style.is_none() => {
            parser.next_token();
            true
        }
        _ => false,
    }
}

fn snapshot_id(parser: &mut Parser) -> std::result::Result<i64, ParserError> {
    let negative = parser.consume_token(&Token::Minus);
    let id = parser.parse_literal_uint()? as i64;
    Ok(if negative { -id } else { id })
}

fn retention_ms(parser: &mut Parser) -> std::result::Result<i64, ParserError> {
    let count = parser.parse_literal_uint()? as i64;
    let unit =
        match parser.parse_one_of_keywords(&[Keyword::DAYS, Keyword::HOURS, Keyword::MINUTES]) {
            Some(Keyword::DAYS) => 24 * 60 * 60 * 1000,
            Some(Keyword::HOURS) => 60 * 60 * 1000,
            Some(_) => 60 * 1000,
            None => return parser.expected("DAYS, HOURS or MINUTES", parser.peek_token()),
        };
    Ok(count.saturating_mul(unit))
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
        caller
            .access
            .check_write(&ident.namespace().to_url_string())?;
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
        let changes = TableChanges {
            requirements: vec![
                TableRequirement::UuidMatch {
                    uuid: metadata.uuid(),
                },
                TableRequirement::RefSnapshotIdMatch {
                    r#ref: name.clone(),
                    snapshot_id: existing.map(|r| r.snapshot_id),
                },
            ],
            updates: vec![update],
        };
        self.catalog
            .commit_changes(&ident, &changes)
            .await
            .map_err(|e| match e.kind() {
                iceberg::ErrorKind::CatalogCommitConflicts => FloeError::aborted(format!(
                    "the {kind} '{name}' of {ident} changed meanwhile; nothing was changed"
                )),
                _ => e.into(),
            })?;
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
