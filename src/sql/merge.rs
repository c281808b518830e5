//! `MERGE INTO t [AS a] USING s [AS b] ON c WHEN … THEN …`, as SQL Floe plans itself.
//!
//! Clauses: `WHEN MATCHED [AND p] THEN UPDATE SET … | DELETE`, `WHEN NOT MATCHED [BY
//! TARGET] [AND p] THEN INSERT [(cols)] VALUES (…)`, `WHEN NOT MATCHED BY SOURCE [AND p]
//! THEN UPDATE SET … | DELETE`. For each row the first clause whose condition holds
//! acts, as the SQL standard says.
//!
//! The statement becomes one `INSERT INTO t` of
//! - the target's rows joined to the source (`t LEFT JOIN s ON c`): each row kept,
//!   updated (`CASE` over the clauses, per column) or, if a DELETE clause acts, left
//!   out; and
//! - `UNION ALL` the source rows no target row matches, as the INSERT clauses make
//!   them,
//!
//! committed as a copy-on-write overwrite of the target's data files (`Removal::Files`:
//! a file removed by a concurrent commit makes the statement `ABORTED`): the files the
//! ON condition's conjuncts on target columns alone may match, or all of them (a source
//! reading the target table reads all of it). A MERGE with only INSERT clauses appends
//! the inserted rows and rewrites nothing. Under serializable isolation
//! (`write.merge.isolation-level`, by default) either commit also fails where a data
//! file committed since the statement read the table may hold rows those conjuncts
//! match (`row_level::isolated`).
//!
//! Merge-on-read (`write.merge.mode`): the positions of the target rows a clause acts on
//! go to position delete files (a first job), and only the updated and inserted rows are
//! written (a second job of the same write); one snapshot adds both, as for UPDATE
//! (`row_level`).
//!
//! Jobs count what the statement changes before it writes: the statement's
//! answer, and the check that no target row matches more than one source row (which
//! would otherwise be written twice); a MERGE that changes nothing commits nothing.

use std::collections::HashSet;
use std::ops::ControlFlow;
use std::sync::Arc;

use datafusion::common::tree_node::{Transformed, TreeNode, TreeNodeRecursion};
use datafusion::common::{Column, ScalarValue};
use datafusion::datasource::provider_as_source;
use datafusion::logical_expr::{
    DmlStatement, Expr as DfExpr, LogicalPlan, Projection, TableScan, lit,
};
use datafusion::prelude::SessionContext;
use datafusion::sql::parser::Statement as DfStatement;
use datafusion::sql::sqlparser::ast::{
    AssignmentTarget, BinaryOperator, Expr, Merge, MergeAction, MergeClause, MergeClauseKind,
    MergeInsertKind, ObjectName, Statement, TableFactor, UpdateTableFromKind, visit_expressions,
};

use super::ddl::normalize;
use super::parse::parse;
use super::resolve::StatementCatalog;
use super::row_level::{self, appending, fold_constants, isolated, scans};
use super::{Caller, Engine, Planned, plan_resolved, quoted, rewrite_before_resolving};
use crate::error::{FloeError, Result};
use crate::table::journal;
use crate::table::overwrite::{Overwrite, Removal};
use crate::table::provider::IcebergTableProvider;
use crate::table::scan::{FILE_COLUMN, POS_COLUMN};
use crate::table::write::{MERGE_ISOLATION, MERGE_MODE};
use crate::table::write_protocol::WriteCommit;

/// Marks the target's rows in the join (NULL where a source row matched none).
const TARGET_ROW: &str = "__floe_target_row";
/// Marks the source's rows in the join (NULL where a target row matched none).
const SOURCE_ROW: &str = "__floe_source_row";

/// A MERGE turned into SQL over the target `t` and source `s`.
struct MergeSql {
    /// `INSERT INTO t …`: the rows the statement writes as data files. Copy-on-write:
    /// the rewritten files' rows, kept or updated, and the inserted rows; merge-on-read:
    /// the updated and the inserted rows.
    write: String,
    /// Whether clauses act on target rows (else the statement only appends).
    rewrites: bool,
    /// Merge-on-read: `SELECT a.__floe_file, a.__floe_pos …` of the target rows a clause
    /// updates or deletes (the target read through placeholders; see
    /// [`reading_target`]).
    deleted_positions: Option<String>,
    /// Whether `write` can write any row (merge-on-read: an UPDATE or INSERT clause).
    writes_rows: bool,
    /// `SELECT count(*) AS joined, sum(…) AS changed FROM t LEFT JOIN s ON c`.
    target_counts: String,
    /// `SELECT count(*) FROM t`.
    target_rows: String,
    /// `SELECT count(*) …` of the rows the INSERT clauses add, if there are any.
    inserted: Option<String>,
    /// Whether a MATCHED clause may act (so a target row must match at most once).
    has_matched: bool,
    /// `SELECT * FROM t WHERE …` with the conjuncts of the ON condition that name only
    /// target columns: target rows it rules out match nothing, so the files that hold
    /// none of its rows need no rewrite. `None` if there are no such conjuncts, or a NOT
    /// MATCHED BY SOURCE clause acts on unmatched target rows wherever they are.
    target_filter: Option<String>,
}

/// The target's and source's names in the statement.
struct Sides {
    target: String,
    target_alias: String,
    source: String,
    source_alias: String,
}

impl Sides {
    fn of(merge: &Merge) -> Result<Self> {
        let TableFactor::Table {
            name,
            alias,
            args: None,
            with_hints,
            version: None,
            partitions,
            ..
        } = &merge.table
        else {
            return Err(FloeError::unimplemented(
                "MERGE: the target must be a table, optionally with an alias",
            ));
        };
        if !with_hints.is_empty() || !partitions.is_empty() {
            return Err(FloeError::unimplemented(
                "MERGE: hints and partitions on the target are not supported",
            ));
        }
        let target_alias = match alias {
            Some(alias) if alias.columns.is_empty() => alias.name.to_string(),
            Some(_) => {
                return Err(FloeError::unimplemented(
                    "MERGE: column aliases on the target are not supported",
                ));
            }
            None => last_part(name)?,
        };
        let source_alias = match &merge.source {
            TableFactor::Table { alias: Some(a), .. }
            | TableFactor::Derived { alias: Some(a), .. } => a.name.to_string(),
            TableFactor::Table { name, .. } => last_part(name)?,
            _ => {
                return Err(FloeError::invalid(
                    "MERGE: the source must be a table or a subquery with an alias",
                ));
            }
        };
        Ok(Self {
            target: name.to_string(),
            target_alias,
            source: merge.source.to_string(),
            source_alias,
        })
    }

    /// The target, its rows marked, under its alias.
    fn target_rows(&self) -> String {
        format!(
            "(SELECT *, TRUE AS {TARGET_ROW} FROM {}) AS {}",
            self.target, self.target_alias
        )
    }

    /// [`Self::target_rows`] with placeholders for each row's file and position, which
    /// [`reading_target`] makes real.
    fn target_rows_with_positions(&self) -> String {
        format!(
            "(SELECT *, TRUE AS {TARGET_ROW}, '' AS {FILE_COLUMN}, 0 AS {POS_COLUMN} FROM {}) \
             AS {}",
            self.target, self.target_alias
        )
    }

    /// The source, its rows marked, under its alias.
    fn source_rows(&self) -> String {
        format!(
            "(SELECT *, TRUE AS {SOURCE_ROW} FROM {}) AS {}",
            self.source, self.source_alias
        )
    }

    fn target_column(&self, column: &str) -> String {
        format!("{}.{}", self.target_alias, quoted(column))
    }
}

fn last_part(name: &ObjectName) -> Result<String> {
    name.0
        .last()
        .and_then(|part| part.as_ident())
        .map(|ident| ident.to_string())
        .ok_or_else(|| FloeError::invalid(format!("MERGE: cannot name '{name}'")))
}

/// A clause acting on target rows (MATCHED, NOT MATCHED BY SOURCE).
struct TargetClause {
    /// When it acts on a joined row.
    when: String,
    /// New values by column (UPDATE); `None` for DELETE.
    set: Option<Vec<(String, String)>>,
}

/// Refuses a clause after one of its kind without a condition, which would never act,
/// as PostgreSQL and Spark do: such a MERGE is a mistake, and DuckDB would run it in
/// another order.
fn refuse_unreachable_clauses(merge: &Merge) -> Result<()> {
    let kind_name = |kind: MergeClauseKind| match kind {
        MergeClauseKind::Matched => "WHEN MATCHED",
        MergeClauseKind::NotMatched | MergeClauseKind::NotMatchedByTarget => "WHEN NOT MATCHED",
        MergeClauseKind::NotMatchedBySource => "WHEN NOT MATCHED BY SOURCE",
    };
    let mut closed = HashSet::new();
    for clause in &merge.clauses {
        let kind = kind_name(clause.clause_kind);
        if closed.contains(kind) {
            return Err(FloeError::invalid(format!(
                "MERGE: a {kind} clause follows a {kind} clause without a condition, so it \
                 would never act (only the last {kind} clause may omit AND …)"
            )));
        }
        if clause.predicate.is_none() {
            closed.insert(kind);
        }
    }
    Ok(())
}

/// A clause inserting source rows (NOT MATCHED [BY TARGET]).
struct InsertClause {
    when: String,
    /// Each table column's value, in table order.
    values: Vec<String>,
}

impl MergeSql {
    fn build(merge: &Merge, columns: &[String], merge_on_read: bool) -> Result<Self> {
        if merge.output.is_some() {
            return Err(FloeError::unimplemented("MERGE … OUTPUT is not supported"));
        }
        refuse_unreachable_clauses(merge)?;
        let sides = Sides::of(merge)?;
        let mut target_clauses = Vec::new();
        let mut insert_clauses = Vec::new();
        for clause in &merge.clauses {
            let condition = match &clause.predicate {
                Some(p) => format!("({p}) IS TRUE"),
                None => "TRUE".to_string(),
            };
            match clause.clause_kind {
                MergeClauseKind::Matched | MergeClauseKind::NotMatchedBySource => {
                    let side = match clause.clause_kind {
                        MergeClauseKind::Matched => "IS NOT NULL",
                        _ => "IS NULL",
                    };
                    let when = format!(
                        "({}.{SOURCE_ROW} {side} AND {condition})",
                        sides.source_alias
                    );
                    target_clauses.push(TargetClause {
                        when,
                        set: target_action(clause, columns)?,
                    });
                }
                MergeClauseKind::NotMatched | MergeClauseKind::NotMatchedByTarget => {
                    insert_clauses.push(InsertClause {
                        when: condition,
                        values: insert_values(clause, columns)?,
                    });
                }
            }
        }
        let has_matched = merge
            .clauses
            .iter()
            .any(|c| c.clause_kind == MergeClauseKind::Matched);
        let by_source = merge
            .clauses
            .iter()
            .any(|c| c.clause_kind == MergeClauseKind::NotMatchedBySource);
        let on_target = target_only_conjuncts(&merge.on, &sides.target_alias);
        let target_filter = (!by_source && !on_target.is_empty()).then(|| {
            format!(
                "SELECT * FROM {} AS {} WHERE {}",
                sides.target,
                sides.target_alias,
                join(on_target.iter(), " AND ")
            )
        });
        let on = &merge.on;
        let target_join = format!(
            "{} LEFT JOIN {} ON {on}",
            sides.target_rows(),
            sides.source_rows()
        );
        let source_join = format!(
            "{} LEFT JOIN {} ON {on} WHERE {}.{TARGET_ROW} IS NULL AND ({})",
            sides.source_rows(),
            sides.target_rows(),
            sides.target_alias,
            any(insert_clauses.iter().map(|c| c.when.as_str())),
        );
        let inserts = (!insert_clauses.is_empty()).then(|| {
            let values = columns.iter().enumerate().map(|(i, column)| {
                let arms = insert_clauses
                    .iter()
                    .map(|c| format!("WHEN {} THEN {}", c.when, c.values[i]));
                format!("CASE {} END AS {}", join(arms, " "), quoted(column))
            });
            format!("SELECT {} FROM {source_join}", join(values, ", "))
        });
        let rewrites = !target_clauses.is_empty();
        let write = if rewrites {
            let kept = columns.iter().map(|column| {
                let current = sides.target_column(column);
                let arms = target_clauses.iter().map(|c| {
                    let value = c
                        .set
                        .as_ref()
                        .and_then(|set| set.iter().find(|(name, _)| name == column))
                        .map_or(current.clone(), |(_, value)| value.clone());
                    format!("WHEN {} THEN {value}", c.when)
                });
                format!(
                    "CASE {} ELSE {current} END AS {}",
                    join(arms, " "),
                    quoted(column)
                )
            });
            // The first clause that acts decides: the row is deleted, or updated.
            let deleted = target_clauses
                .iter()
                .map(|c| format!("WHEN {} THEN {}", c.when, c.set.is_none()));
            let written = match merge_on_read {
                false => format!("NOT (CASE {} ELSE FALSE END)", join(deleted, " ")),
                true => {
                    let updated = target_clauses
                        .iter()
                        .map(|c| format!("WHEN {} THEN {}", c.when, c.set.is_some()));
                    format!("CASE {} ELSE FALSE END", join(updated, " "))
                }
            };
            let rows = format!(
                "SELECT {} FROM {target_join} WHERE {written}",
                join(kept, ", ")
            );
            match &inserts {
                Some(inserts) => format!("{rows} UNION ALL {inserts}"),
                None => rows,
            }
        } else {
            inserts
                .clone()
                .ok_or_else(|| FloeError::invalid("MERGE needs at least one WHEN clause"))?
        };
        let acting = any(target_clauses.iter().map(|c| c.when.as_str()));
        let deleted_positions = (merge_on_read && rewrites).then(|| {
            format!(
                "SELECT {alias}.{FILE_COLUMN}, {alias}.{POS_COLUMN} FROM {} LEFT JOIN {} ON {on} \
                 WHERE {acting}",
                sides.target_rows_with_positions(),
                sides.source_rows(),
                alias = sides.target_alias,
            )
        });
        let writes_rows =
            !merge_on_read || inserts.is_some() || target_clauses.iter().any(|c| c.set.is_some());
        Ok(Self {
            write: format!("INSERT INTO {} {write}", sides.target),
            rewrites,
            deleted_positions,
            writes_rows,
            target_counts: format!(
                "SELECT count(*) AS joined, sum(CASE WHEN {acting} THEN 1 ELSE 0 END) AS \
                 changed FROM {target_join}"
            ),
            target_rows: format!("SELECT count(*) FROM {}", sides.target),
            inserted: inserts.map(|_| format!("SELECT count(*) FROM {source_join}")),
            has_matched,
            target_filter,
        })
    }
}

/// The conjuncts of `on` whose every column is `alias.column` (a target column), as SQL.
fn target_only_conjuncts(on: &Expr, alias: &str) -> Vec<String> {
    let mut conjuncts = Vec::new();
    let mut stack = vec![on];
    while let Some(expr) = stack.pop() {
        match expr {
            Expr::BinaryOp {
                left,
                op: BinaryOperator::And,
                right,
            } => stack.extend([right.as_ref(), left.as_ref()]),
            Expr::Nested(inner) => stack.push(inner),
            expr if names_only_target(expr, alias) => conjuncts.push(format!("({expr})")),
            _ => {}
        }
    }
    conjuncts
}

fn names_only_target(expr: &Expr, alias: &str) -> bool {
    let mut columns = 0;
    let flow = visit_expressions(expr, |e| match e {
        Expr::CompoundIdentifier(parts)
            if parts.len() == 2 && parts[0].value.eq_ignore_ascii_case(alias) =>
        {
            columns += 1;
            ControlFlow::Continue(())
        }
        Expr::Identifier(_)
        | Expr::CompoundIdentifier(_)
        | Expr::Subquery(_)
        | Expr::Exists { .. }
        | Expr::InSubquery { .. } => ControlFlow::Break(()),
        _ => ControlFlow::Continue(()),
    });
    flow.is_continue() && columns > 0
}

/// `a OR b OR …`; `FALSE` for none.
fn any<'a>(conditions: impl Iterator<Item = &'a str>) -> String {
    let joined = join(conditions, " OR ");
    if joined.is_empty() {
        "FALSE".to_string()
    } else {
        joined
    }
}

fn join(items: impl Iterator<Item = impl AsRef<str>>, separator: &str) -> String {
    items
        .map(|item| item.as_ref().to_string())
        .collect::<Vec<_>>()
        .join(separator)
}

fn known_column(name: String, columns: &[String]) -> Result<String> {
    match columns.contains(&name) {
        true => Ok(name),
        false => Err(FloeError::invalid(format!(
            "MERGE: the target has no column '{name}'"
        ))),
    }
}

/// An UPDATE clause's new values by column; `None` for DELETE.
fn target_action(
    clause: &MergeClause,
    columns: &[String],
) -> Result<Option<Vec<(String, String)>>> {
    match &clause.action {
        MergeAction::Delete { .. } => Ok(None),
        MergeAction::Update(update) => {
            if update.update_predicate.is_some() || update.delete_predicate.is_some() {
                return Err(FloeError::unimplemented(
                    "MERGE: UPDATE … WHERE / DELETE WHERE is not supported; use WHEN … AND",
                ));
            }
            let set = update
                .assignments
                .iter()
                .map(|assignment| {
                    let AssignmentTarget::ColumnName(name) = &assignment.target else {
                        return Err(FloeError::unimplemented(
                            "MERGE: tuple assignments are not supported",
                        ));
                    };
                    let ident =
                        name.0.last().and_then(|p| p.as_ident()).ok_or_else(|| {
                            FloeError::invalid(format!("MERGE: cannot set '{name}'"))
                        })?;
                    let column = known_column(normalize(ident), columns)?;
                    Ok((column, format!("({})", assignment.value)))
                })
                .collect::<Result<Vec<_>>>()?;
            Ok(Some(set))
        }
        MergeAction::Insert(_) => Err(FloeError::invalid(
            "MERGE: INSERT belongs in a WHEN NOT MATCHED clause",
        )),
    }
}

/// An INSERT clause's value for each table column (NULL for columns it leaves out).
fn insert_values(clause: &MergeClause, columns: &[String]) -> Result<Vec<String>> {
    let MergeAction::Insert(insert) = &clause.action else {
        return Err(FloeError::invalid(
            "MERGE: WHEN NOT MATCHED clauses can only INSERT",
        ));
    };
    if insert.insert_predicate.is_some() {
        return Err(FloeError::unimplemented(
            "MERGE: INSERT … WHERE is not supported; use WHEN NOT MATCHED AND …",
        ));
    }
    let MergeInsertKind::Values(values) = &insert.kind else {
        return Err(FloeError::unimplemented(
            "MERGE: INSERT ROW is not supported; list the values",
        ));
    };
    let [row] = values.rows.as_slice() else {
        return Err(FloeError::invalid(
            "MERGE: INSERT takes exactly one row of VALUES",
        ));
    };
    let named: Vec<String> = match insert.columns.is_empty() {
        true => columns.to_vec(),
        false => insert
            .columns
            .iter()
            .map(|name| {
                let ident =
                    name.0.last().and_then(|p| p.as_ident()).ok_or_else(|| {
                        FloeError::invalid(format!("MERGE: cannot insert '{name}'"))
                    })?;
                known_column(normalize(ident), columns)
            })
            .collect::<Result<_>>()?,
    };
    if named.len() != row.len() {
        return Err(FloeError::invalid(format!(
            "MERGE: INSERT names {} columns and gives {} values",
            named.len(),
            row.len()
        )));
    }
    Ok(columns
        .iter()
        .map(|column| {
            named
                .iter()
                .position(|n| n == column)
                .map_or("NULL".to_string(), |i| format!("({})", row[i]))
        })
        .collect())
}

impl Engine {
    /// Runs a MERGE (see the module documentation); returns the rows it updated,
    /// deleted and inserted.
    pub(super) async fn merge(
        &self,
        caller: &Caller,
        merge: &Merge,
        params: &[ScalarValue],
    ) -> Result<u64> {
        self.catalog.check_commit_changes()?;
        let TableFactor::Table { name, .. } = &merge.table else {
            return Err(FloeError::unimplemented(
                "MERGE: the target must be a table",
            ));
        };
        let ident = self.names(caller).table(name)?;
        let table = self.catalog.load_table(&ident).await?;
        let columns: Vec<String> = table
            .metadata()
            .current_schema()
            .as_struct()
            .fields()
            .iter()
            .map(|f| f.name.clone())
            .collect();
        let merge_on_read = row_level::merge_on_read(&table, MERGE_MODE)?;
        let sql = MergeSql::build(merge, &columns, merge_on_read)?;
        let (catalog, planned, _) = self.plan(caller, parse(&sql.write)?, params).await?;
        let Planned::Write(ctx, mut dml) = planned else {
            return Err(FloeError::internal("MERGE planned as a query"));
        };
        let scope = Scope {
            ctx: &ctx,
            catalog: &catalog,
            caller,
            params,
        };
        let (mut changed, mut target_changed) = (0, 0);
        if sql.rewrites {
            let [joined, changed_rows] = self.count_sql(&scope, &sql.target_counts).await?[..]
            else {
                return Err(FloeError::internal(
                    "MERGE: the target counts have two columns",
                ));
            };
            let [target_rows] = self.count_sql(&scope, &sql.target_rows).await?[..] else {
                return Err(FloeError::internal(
                    "MERGE: the target count has one column",
                ));
            };
            if sql.has_matched && joined != target_rows {
                return Err(FloeError::invalid(
                    "MERGE: a target row matches more than one source row; make the ON \
                     condition match each target row at most once",
                ));
            }
            target_changed = changed_rows;
            changed += changed_rows;
        }
        if let Some(inserted) = &sql.inserted {
            changed += self.count_sql(&scope, inserted).await?.iter().sum::<u64>();
        }
        if changed == 0 {
            return Ok(0);
        }
        let provider = catalog.target_of(&dml)?;
        let filter = match &sql.target_filter {
            Some(text) => scope.filter_of(text).await?,
            None => lit(true),
        };
        let isolated =
            |removal| isolated(Overwrite::of(removal), &provider, MERGE_ISOLATION, &filter);
        let how = if sql.rewrites {
            let files = provider.files_matching(&filter).await?;
            if let Some(positions) = &sql.deleted_positions {
                let deletes = isolated(Removal::Nothing)?;
                let target = Target {
                    dml,
                    provider,
                    files,
                    deletes,
                };
                let deleting = (target_changed > 0).then_some(positions.as_str());
                self.merge_on_read(&scope, target, deleting, sql.writes_rows)
                    .await?;
                return Ok(changed);
            }
            let overwrite = isolated(Removal::Files(files.clone()))?;
            let restricted = provider.restricted_to(files)?;
            let input = Arc::unwrap_or_clone(dml.input);
            dml.input = Arc::new(reading_target(input, &provider, restricted)?);
            WriteCommit::Overwrite(overwrite)
        } else {
            // Only inserts: checked against concurrent appends all the same, which may
            // hold the rows the inserted ones did not match.
            appending_under(isolated(Removal::Nothing)?)
        };
        self.run_write(&ctx, dml, &catalog, &how, &|| Ok(()))
            .await?;
        Ok(changed)
    }

    /// Merge-on-read: a job writes position delete files for the target rows that
    /// `deleting` (the positions query, if any row is deleted or updated) selects; then,
    /// if the statement `writes_rows`, a second job of the same write writes the updated
    /// and inserted rows. Both read the statement's snapshot of the target's `files`; one
    /// snapshot adds what they wrote.
    async fn merge_on_read(
        &self,
        scope: &Scope<'_>,
        target: Target,
        deleting: Option<&str>,
        writes_rows: bool,
    ) -> Result<()> {
        let Target {
            dml,
            provider,
            files,
            deletes,
        } = target;
        let mut write_id = None;
        let mut written = Vec::new();
        if let Some(deleting) = deleting {
            let positions = provider.positions_of(files.clone())?;
            let plan = reading_target(scope.plan(deleting).await?, &provider, positions)?;
            provider.delete_positions_next();
            let (id, files) = self
                .write_files(scope.ctx, appending(&dml, plan), scope.catalog)
                .await?;
            write_id = Some(id);
            written = files;
        }
        let delete_files = written.len();
        if writes_rows {
            if let Some(id) = &write_id {
                journal::crash_point("between-write-jobs");
                provider.set_next_write_id(id.clone());
            }
            let input = Arc::unwrap_or_clone(dml.input.clone());
            let input = reading_target(input, &provider, provider.restricted_to(files)?)?;
            // A failed job deletes the write's directory: the delete files too.
            let (id, files) = self
                .write_files(scope.ctx, appending(&dml, input), scope.catalog)
                .await?;
            write_id.get_or_insert(id);
            written.extend(files);
        }
        match write_id {
            Some(id) => {
                self.commit_merge_on_read(provider.table(), &id, &written, delete_files, deletes)
                    .await
            }
            None => Ok(()),
        }
    }

    /// Runs `SELECT count(*) …` (one row of counts) in `scope`; returns the counts, NULL
    /// as 0.
    async fn count_sql(&self, scope: &Scope<'_>, text: &str) -> Result<Vec<u64>> {
        let plan = scope.plan(text).await?;
        self.counts(scope.ctx, scope.catalog, plan).await
    }
}

/// How a write that only adds rows commits under `overwrite`'s isolation: an overwrite
/// removing nothing if it checks concurrent appends, else an append.
pub(super) fn appending_under(overwrite: Overwrite) -> WriteCommit {
    match overwrite.serializable {
        Some(_) => WriteCommit::Overwrite(overwrite),
        None => WriteCommit::Append,
    }
}

/// The target of a MERGE's write: the write as planned, the target's provider, and the
/// data files the statement may change.
struct Target {
    dml: DmlStatement,
    provider: Arc<IcebergTableProvider>,
    files: HashSet<String>,
    /// How its deletes are committed.
    deletes: Overwrite,
}

/// `plan` with the target's scans that [`Sides::target_rows`] marks reading `provider`
/// instead (the target restricted to some files, or with positions); the placeholders
/// of [`Sides::target_rows_with_positions`] become the columns of their names. A
/// source that reads the target table too still reads all of it.
fn reading_target(
    plan: LogicalPlan,
    target: &Arc<IcebergTableProvider>,
    provider: IcebergTableProvider,
) -> Result<LogicalPlan> {
    let provider = provider_as_source(Arc::new(provider));
    let mut replaced = 0;
    let plan = plan.transform_up(|node| {
        let LogicalPlan::Projection(projection) = &node else {
            return Ok(Transformed::no(node));
        };
        let LogicalPlan::TableScan(scan) = projection.input.as_ref() else {
            return Ok(Transformed::no(node));
        };
        let named = |e: &DfExpr, names: &[&str]| {
            matches!(e, DfExpr::Alias(a) if names.contains(&a.name.as_str()))
        };
        if !scans(scan, target) || !projection.expr.iter().any(|e| named(e, &[TARGET_ROW])) {
            return Ok(Transformed::no(node));
        }
        let scan = TableScan::try_new(
            scan.table_name.clone(),
            provider.clone(),
            None,
            scan.filters.clone(),
            scan.fetch,
        )?;
        let expr = projection
            .expr
            .iter()
            .map(|e| match e {
                DfExpr::Alias(a) if named(e, &[FILE_COLUMN, POS_COLUMN]) => {
                    DfExpr::Column(Column::new(Some(scan.table_name.clone()), a.name.clone()))
                        .alias(a.name.clone())
                }
                e => e.clone(),
            })
            .collect();
        replaced += 1;
        let input = Arc::new(LogicalPlan::TableScan(scan));
        Ok(Transformed::yes(LogicalPlan::Projection(
            Projection::try_new(expr, input)?,
        )))
    })?;
    match replaced {
        0 => Err(FloeError::internal("MERGE: no scan of the target found")),
        _ => Ok(plan.data),
    }
}

/// A statement's context and tables, where the queries that help it run are planned
/// (so they read the same snapshots), with its caller and parameters.
struct Scope<'a> {
    ctx: &'a Arc<SessionContext>,
    catalog: &'a Arc<StatementCatalog>,
    caller: &'a Caller,
    params: &'a [ScalarValue],
}

impl Scope<'_> {
    async fn plan(&self, text: &str) -> Result<LogicalPlan> {
        let mut statement = parse(text)?;
        rewrite_before_resolving(&mut statement)?;
        let planned = plan_resolved(self.ctx, self.catalog, self.caller, statement, self.params);
        Ok(planned.await?.0)
    }

    /// The condition of `SELECT * FROM t WHERE …`, with its constants folded.
    async fn filter_of(&self, text: &str) -> Result<datafusion::logical_expr::Expr> {
        let plan = self.plan(text).await?;
        let mut filter = None;
        plan.apply(|node| {
            if let LogicalPlan::Filter(found) = node {
                let schema = found.input.schema().clone();
                filter = Some(fold_constants(found.predicate.clone(), schema));
                return Ok(TreeNodeRecursion::Stop);
            }
            Ok(TreeNodeRecursion::Continue)
        })?;
        filter.ok_or_else(|| FloeError::internal("MERGE: no filter planned"))?
    }
}

/// `UPDATE t SET … FROM s WHERE p` (PostgreSQL's form, which DataFusion does not plan)
/// as `MERGE INTO t USING s ON p WHEN MATCHED THEN UPDATE SET …`: the rows of `t` that
/// some row of `s` matches get the values. A row of `t` that several rows of `s` match is
/// refused, as MERGE refuses it (PostgreSQL would take any one of them).
pub(super) fn update_from_as_merge(statement: &mut DfStatement) -> Result<()> {
    let DfStatement::Statement(inner) = statement else {
        return Ok(());
    };
    let Statement::Update(update) = inner.as_ref() else {
        return Ok(());
    };
    let sources = match &update.from {
        None => return Ok(()),
        Some(UpdateTableFromKind::BeforeSet(from) | UpdateTableFromKind::AfterSet(from)) => from,
    };
    let [source] = sources.as_slice() else {
        return Err(FloeError::unimplemented(
            "UPDATE … FROM takes one table or subquery (join them in a subquery, or use MERGE)",
        ));
    };
    if update.returning.is_some() || update.limit.is_some() || !source.joins.is_empty() {
        return Err(FloeError::unimplemented(
            "UPDATE … FROM with JOIN, RETURNING or LIMIT is not supported; use MERGE",
        ));
    }
    let assignments: Vec<String> = update.assignments.iter().map(ToString::to_string).collect();
    let condition = update
        .selection
        .as_ref()
        .map_or_else(|| "TRUE".to_string(), ToString::to_string);
    let merge = format!(
        "MERGE INTO {} USING {} ON {condition} WHEN MATCHED THEN UPDATE SET {}",
        update.table,
        source.relation,
        assignments.join(", ")
    );
    *statement = parse(&merge)?;
    Ok(())
}
