//! `DELETE FROM t [WHERE p]` and `UPDATE t SET c = e, … [WHERE p]`, copy-on-write (or
//! merge-on-read, below).
//!
//! 1. The data files that may hold rows matching `p` are found from the table's
//!    metadata (partition values, column bounds), on the snapshot the statement reads.
//! 2. A query job counts the matching rows: the statement's answer. If none match,
//!    nothing is written or committed.
//! 3. A distributed write rewrites those files whole: without the matching rows
//!    (DELETE), or with `CASE WHEN p THEN e ELSE c END` for each assigned column
//!    (UPDATE). Rows for which `p` is NULL are kept unchanged, as SQL says.
//! 4. One `overwrite` snapshot removes the rewritten files and adds the new ones
//!    (`table::overwrite`, `Removal::Files`). If a concurrent commit removed one of the
//!    files meanwhile, or deleted rows of one, nothing is committed and the statement
//!    answers `ABORTED`; so it does under serializable isolation (the table's
//!    `write.<delete|update>.isolation-level`, by default) where a file appended
//!    concurrently may hold matching rows. Under snapshot isolation such files are kept
//!    as they are.
//!
//! Both jobs read the statement's snapshot, and the write follows the write protocol
//! of INSERT (`table::write_protocol`): a failed statement leaves the table and its
//! files as they were.
//!
//! Merge-on-read (`write.delete.mode` / `write.update.mode`): instead of step 3, the
//! matching rows' positions go to position delete files (`table::position_deletes`)
//! and, for an UPDATE, their new values to new data files, written by a second job of
//! the same write; step 4 adds both without removing anything.

use std::collections::HashSet;
use std::sync::Arc;

use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::common::{Column, DFSchemaRef, ScalarValue};
use datafusion::datasource::{provider_as_source, source_as_provider};
use datafusion::functions_aggregate::count::count_all;
use datafusion::logical_expr::dml::InsertOp;
use datafusion::logical_expr::simplify::SimplifyContext;
use datafusion::logical_expr::{
    DmlStatement, Expr, LogicalPlan, LogicalPlanBuilder, TableScan, WriteOp, col, lit, when,
};
use datafusion::optimizer::simplify_expressions::ExprSimplifier;
use datafusion::prelude::SessionContext;
use datafusion::sql::parser::Statement as DfStatement;
use datafusion::sql::sqlparser::ast::{self, Statement};
use futures::TryStreamExt;
use iceberg::spec::FormatVersion;
use iceberg::table::Table;

use super::ddl::normalize;
use super::expr_rewrite::is_subquery;
use super::parse::{parse, sql_statement_mut};
use super::resolve::StatementCatalog;
use super::{Engine, Query};
use crate::error::{FloeError, Result};
use crate::table::commit::WrittenFile;
use crate::table::overwrite::{Overwrite, Removal};
use crate::table::provider::IcebergTableProvider;
use crate::table::scan::{FILE_COLUMN, POS_COLUMN};
use crate::table::write::{self, DELETE_ISOLATION, DELETE_MODE, UPDATE_ISOLATION, UPDATE_MODE};
use crate::table::write_protocol::{WriteCommit, commit_write};

/// A DELETE or UPDATE, taken apart from DataFusion's plan of it.
struct RowLevel {
    /// The rows the statement changes (`true` without a WHERE clause).
    predicate: Expr,
    /// The table, possibly under an alias, as the statement's expressions name it.
    source: LogicalPlan,
    /// For an UPDATE, each column's new value (aliased by the column's name); for a
    /// DELETE, none.
    assignments: Option<Vec<Expr>>,
}

impl RowLevel {
    fn of(dml: &DmlStatement) -> Result<Self> {
        let verb = dml.op.name();
        let (assignments, below) = match (&dml.op, dml.input.as_ref()) {
            (WriteOp::Delete, input) => (None, input),
            (WriteOp::Update, LogicalPlan::Projection(projection)) => {
                (Some(projection.expr.clone()), projection.input.as_ref())
            }
            _ => return Err(FloeError::internal(format!("{verb} planned unexpectedly"))),
        };
        let (predicate, source) = match below {
            LogicalPlan::Filter(filter) => (filter.predicate.clone(), filter.input.as_ref()),
            source => (lit(true), source),
        };
        if !is_table(source) {
            return Err(FloeError::unimplemented(format!(
                "{verb} with anything but one table and a WHERE clause (FROM, LIMIT, …) is \
                 not supported"
            )));
        }
        // Once, here: `now()` is the same for every step.
        let predicate = fold_constants(predicate, source.schema().clone())?;
        Ok(Self {
            predicate,
            source: source.clone(),
            assignments,
        })
    }

    /// `SELECT count(*) FROM t WHERE p`.
    fn count_plan(&self) -> Result<LogicalPlan> {
        joined(
            LogicalPlanBuilder::from(self.source.clone())
                .filter(self.predicate.clone())?
                .aggregate(Vec::<Expr>::new(), vec![count_all()])?
                .build()?,
        )
    }

    /// What the rewrite of `files` (read by `source`) writes: every row the statement
    /// does not delete, updated if it matches.
    fn rewrite_plan(&self, source: LogicalPlan) -> Result<LogicalPlan> {
        let kept = self.predicate.clone().is_not_true();
        let columns = table_columns(&source);
        if self.assignments.is_none() {
            let kept_rows = LogicalPlanBuilder::from(source).filter(kept)?;
            return joined(kept_rows.project(columns)?.build()?);
        }
        if self.predicate.exists(|e| Ok(is_subquery(e)))? {
            // A subquery can stand in a filter, not in the CASE of a projection: the
            // updated rows and the others are read apart.
            let updated = self.updated_rows(source.clone())?;
            let others = LogicalPlanBuilder::from(source)
                .filter(kept)?
                .project(columns)?;
            let others = joined(others.build()?)?;
            return Ok(LogicalPlanBuilder::from(updated).union(others)?.build()?);
        }
        let schema = source.schema().clone();
        joined(
            LogicalPlanBuilder::from(source)
                .project(self.assigned(&schema, Some(&self.predicate))?)?
                .build()?,
        )
    }

    /// The table property saying how this statement changes rows.
    fn mode(&self) -> &'static str {
        match self.assignments {
            None => DELETE_MODE,
            Some(_) => UPDATE_MODE,
        }
    }

    /// `overwrite` under the table's isolation level for this statement.
    fn isolated(&self, overwrite: Overwrite, target: &IcebergTableProvider) -> Result<Overwrite> {
        let isolation = match self.assignments {
            None => DELETE_ISOLATION,
            Some(_) => UPDATE_ISOLATION,
        };
        isolated(overwrite, target, isolation, &self.predicate)
    }

    /// The rows an UPDATE changes, changed, read by `source`.
    fn updated_rows(&self, source: LogicalPlan) -> Result<LogicalPlan> {
        let columns = table_columns(&source);
        let schema = source.schema().clone();
        joined(
            LogicalPlanBuilder::from(source)
                .filter(self.predicate.clone())?
                .project(columns)?
                .project(self.assigned(&schema, None)?)?
                .build()?,
        )
    }

    /// The (file, position) of each row the statement deletes or updates, read by
    /// `positions` (the table with positions).
    fn deleted_positions(&self, positions: LogicalPlan) -> Result<LogicalPlan> {
        joined(
            LogicalPlanBuilder::from(positions)
                .filter(self.predicate.clone())?
                .project([col(FILE_COLUMN), col(POS_COLUMN)])?
                .build()?,
        )
    }

    /// Each column's value after the UPDATE: the assigned one (where `matched`, if
    /// given), else the current one.
    fn assigned(&self, schema: &DFSchemaRef, matched: Option<&Expr>) -> Result<Vec<Expr>> {
        let assignments = self.assignments.as_deref().unwrap_or_default();
        assignments
            .iter()
            .enumerate()
            .map(|(i, assigned)| {
                let current = Expr::Column(Column::from(schema.qualified_field(i)));
                let (value, name) = match assigned {
                    Expr::Alias(alias) => (alias.expr.as_ref(), alias.name.clone()),
                    other => (other, schema.field(i).name().clone()),
                };
                match matched {
                    Some(matched) if !matches!(value, Expr::Column(_)) => {
                        Ok(when(matched.clone(), value.clone())
                            .otherwise(current)?
                            .alias(name))
                    }
                    _ => Ok(value.clone().alias(name)),
                }
            })
            .collect()
    }
}

/// Whether `plan` is a DELETE or an UPDATE.
pub(super) fn is_row_level(plan: &LogicalPlan) -> bool {
    matches!(plan, LogicalPlan::Dml(dml) if matches!(dml.op, WriteOp::Delete | WriteOp::Update))
}

/// `plan`, a step of the statement, with the subqueries DataFusion cannot join computed
/// by joins (`inequality_subqueries`).
fn joined(plan: LogicalPlan) -> Result<LogicalPlan> {
    super::inequality_subqueries::with_inequality_subqueries_joined(plan)
}

/// `overwrite`, which commits a statement changing the rows of `target` that match
/// `filter`, checked against concurrent appends if the table property `isolation` says
/// `serializable`.
pub(super) fn isolated(
    overwrite: Overwrite,
    target: &IcebergTableProvider,
    isolation: &str,
    filter: &Expr,
) -> Result<Overwrite> {
    let properties = target.table().metadata().properties();
    Ok(match write::serializable(properties, isolation)? {
        true => overwrite.serializable_over(target.predicate_of(filter)),
        false => overwrite,
    })
}

/// Whether the table's DELETEs or UPDATEs (`mode`) write position delete files instead
/// of rewriting data files.
pub(super) fn merge_on_read(table: &Table, mode: &str) -> Result<bool> {
    let metadata = table.metadata();
    let merge_on_read = write::merge_on_read(metadata.properties(), mode)?;
    if merge_on_read && metadata.format_version() == FormatVersion::V1 {
        return Err(FloeError::invalid(format!(
            "table {}: merge-on-read ({mode}) needs format-version 2 (this table is 1)",
            table.identifier()
        )));
    }
    Ok(merge_on_read)
}

/// The table scan of `source` (possibly under an alias) reading `positions` instead,
/// under the same name.
fn positions_source(source: &LogicalPlan, positions: IcebergTableProvider) -> Result<LogicalPlan> {
    match source {
        LogicalPlan::TableScan(scan) => Ok(LogicalPlanBuilder::scan(
            scan.table_name.clone(),
            provider_as_source(Arc::new(positions)),
            None,
        )?
        .build()?),
        LogicalPlan::SubqueryAlias(alias) => Ok(LogicalPlanBuilder::from(positions_source(
            &alias.input,
            positions,
        )?)
        .alias(alias.alias.clone())?
        .build()?),
        _ => Err(FloeError::internal("a DELETE reads one table")),
    }
}

/// The columns of `source` (a subquery in the predicate becomes a join that adds its
/// own columns: only the table's go on).
fn table_columns(source: &LogicalPlan) -> Vec<Expr> {
    source
        .schema()
        .columns()
        .into_iter()
        .map(Expr::Column)
        .collect()
}

/// `INSERT INTO` the statement's table of `input`: how a DELETE's or UPDATE's files are
/// written.
pub(super) fn appending(dml: &DmlStatement, input: LogicalPlan) -> DmlStatement {
    DmlStatement::new(
        dml.table_name.clone(),
        dml.target.clone(),
        WriteOp::Insert(InsertOp::Append),
        Arc::new(input),
    )
}

/// `DELETE FROM t USING s, … WHERE p` (PostgreSQL's form, which DataFusion does not
/// plan) as `DELETE FROM t WHERE EXISTS (SELECT 1 FROM s, … WHERE p)`: the same rows.
pub(super) fn using_as_exists(statement: &mut DfStatement) -> Result<()> {
    let DfStatement::Statement(statement) = statement else {
        return Ok(());
    };
    let Statement::Delete(delete) = statement.as_mut() else {
        return Ok(());
    };
    let Some(using) = delete.using.take() else {
        return Ok(());
    };
    let tables: Vec<String> = using.iter().map(ToString::to_string).collect();
    let condition = match &delete.selection {
        Some(selection) => format!(" WHERE {selection}"),
        None => String::new(),
    };
    let text = format!("SELECT 1 FROM {}{condition}", tables.join(", "));
    let DfStatement::Statement(parsed) = parse(&text)? else {
        return Err(FloeError::internal(
            "DELETE … USING: the subquery did not parse",
        ));
    };
    let Statement::Query(subquery) = *parsed else {
        return Err(FloeError::internal(
            "DELETE … USING: the subquery is not a query",
        ));
    };
    delete.selection = Some(ast::Expr::Exists {
        subquery,
        negated: false,
    });
    Ok(())
}

/// `TRUNCATE [TABLE] t` as `DELETE FROM t`, as Spark and Trino run it on Iceberg tables:
/// one `delete` snapshot that drops every data file (the table's history keeps them).
pub(super) fn truncate_as_delete(statement: &mut DfStatement) -> Result<()> {
    let Some(inner) = sql_statement_mut(statement) else {
        return Ok(());
    };
    let Statement::Truncate(truncate) = inner else {
        return Ok(());
    };
    let [target] = truncate.table_names.as_slice() else {
        return Err(FloeError::unimplemented("TRUNCATE: one table at a time"));
    };
    let plain = truncate.partitions.is_none()
        && !truncate.if_exists
        && truncate.identity.is_none()
        && truncate.cascade.is_none()
        && truncate.on_cluster.is_none()
        && !target.only
        && !target.has_asterisk;
    if !plain {
        return Err(FloeError::unimplemented(
            "TRUNCATE: only `TRUNCATE [TABLE] name` (use DELETE FROM … WHERE … for part of a table)",
        ));
    }
    let DfStatement::Statement(delete) = parse(&format!("DELETE FROM {}", target.name))? else {
        return Err(FloeError::internal("DELETE parsed as another statement"));
    };
    *inner = *delete;
    Ok(())
}

/// `DELETE FROM t [AS] a WHERE p` (Spark's and PostgreSQL's alias, which DataFusion
/// ignores) as `DELETE FROM t WHERE p` with `a.c` written `t.c`.
pub(super) fn delete_alias_as_table(statement: &mut DfStatement) {
    let DfStatement::Statement(statement) = statement else {
        return;
    };
    let Statement::Delete(delete) = statement.as_mut() else {
        return;
    };
    let (ast::FromTable::WithFromKeyword(from) | ast::FromTable::WithoutKeyword(from)) =
        &mut delete.from;
    let [target] = from.as_mut_slice() else {
        return;
    };
    let ast::TableFactor::Table { name, alias, .. } = &mut target.relation else {
        return;
    };
    let Some(alias) = alias.take() else {
        return;
    };
    let table: Vec<ast::Ident> = name
        .0
        .iter()
        .filter_map(|part| part.as_ident().cloned())
        .collect();
    let Some(selection) = delete.selection.as_mut() else {
        return;
    };
    let _ = ast::visit_expressions_mut(selection, |expr| {
        if let ast::Expr::CompoundIdentifier(parts) = expr
            && let [qualifier, column] = parts.as_slice()
            && normalize(qualifier) == normalize(&alias.name)
        {
            let mut qualified = table.clone();
            qualified.push(column.clone());
            *parts = qualified;
        }
        std::ops::ControlFlow::<()>::Continue(())
    });
}

/// `plan` with its scans of `table` reading through `restricted` instead (the table
/// restricted to some files); scans of other tables stay.
pub(super) fn reading(
    plan: LogicalPlan,
    table: &Arc<IcebergTableProvider>,
    restricted: IcebergTableProvider,
) -> Result<LogicalPlan> {
    let restricted = provider_as_source(Arc::new(restricted));
    let replaced = plan.transform_up(|node| match node {
        LogicalPlan::TableScan(scan) if scans(&scan, table) => {
            let scan = TableScan::try_new(
                scan.table_name,
                restricted.clone(),
                scan.projection,
                scan.filters,
                scan.fetch,
            )?;
            Ok(Transformed::yes(LogicalPlan::TableScan(scan)))
        }
        node => Ok(Transformed::no(node)),
    })?;
    Ok(replaced.data)
}

pub(super) fn scans(scan: &TableScan, table: &Arc<IcebergTableProvider>) -> bool {
    source_as_provider(&scan.source)
        .is_ok_and(|provider| std::ptr::addr_eq(Arc::as_ptr(&provider), Arc::as_ptr(table)))
}

/// `expr` with its constants folded: a `DATE '…'` literal is a cast until then, which
/// Iceberg cannot prune with. `now()` is now.
pub(super) fn fold_constants(expr: Expr, schema: DFSchemaRef) -> Result<Expr> {
    let context = SimplifyContext::default()
        .with_schema(schema)
        .with_current_time();
    Ok(ExprSimplifier::new(context).simplify(expr)?)
}

/// A table scan, possibly under an alias.
fn is_table(plan: &LogicalPlan) -> bool {
    match plan {
        LogicalPlan::TableScan(_) => true,
        LogicalPlan::SubqueryAlias(alias) => is_table(&alias.input),
        _ => false,
    }
}

impl Engine {
    /// Runs a DELETE or UPDATE (see the module documentation); returns the rows it
    /// deleted or updated.
    pub(super) async fn run_row_level(
        &self,
        ctx: &Arc<SessionContext>,
        dml: DmlStatement,
        catalog: &Arc<StatementCatalog>,
    ) -> Result<u64> {
        self.catalog.check_commit_changes()?;
        let statement = RowLevel::of(&dml)?;
        let provider = catalog.target_of(&dml)?;
        let files = provider.files_matching(&statement.predicate).await?;
        if files.is_empty() {
            return Ok(0);
        }
        let [count] = self.counts(ctx, catalog, statement.count_plan()?).await?[..] else {
            return Err(FloeError::internal("count(*) answered several columns"));
        };
        if count == 0 {
            return Ok(0);
        }
        if merge_on_read(provider.table(), statement.mode())? {
            self.run_merge_on_read(ctx, &dml, &statement, &provider, files, catalog)
                .await?;
            return Ok(count);
        }
        let source = reading(
            statement.source.clone(),
            &provider,
            provider.restricted_to(files.clone())?,
        )?;
        let insert = DmlStatement::new(
            dml.table_name.clone(),
            dml.target.clone(),
            WriteOp::Insert(InsertOp::Append),
            Arc::new(statement.rewrite_plan(source)?),
        );
        let removal = Overwrite::of(Removal::Files(files));
        let how = WriteCommit::Overwrite(statement.isolated(removal, &provider)?);
        self.run_write(ctx, insert, catalog, &how, &|| Ok(()))
            .await?;
        Ok(count)
    }

    /// Merge-on-read: one job writes position delete files for the matching rows of
    /// `files`; for an UPDATE, a second job (the same write, the same snapshot) writes
    /// the updated rows as new data files. One snapshot adds both.
    async fn run_merge_on_read(
        &self,
        ctx: &Arc<SessionContext>,
        dml: &DmlStatement,
        statement: &RowLevel,
        provider: &Arc<IcebergTableProvider>,
        files: HashSet<String>,
        catalog: &Arc<StatementCatalog>,
    ) -> Result<()> {
        let positions = positions_source(&statement.source, provider.positions_of(files.clone())?)?;
        provider.delete_positions_next();
        let deletes = appending(dml, statement.deleted_positions(positions)?);
        let (write_id, mut written) = self.write_files(ctx, deletes, catalog).await?;
        let delete_files = written.len();
        if statement.assignments.is_some() {
            let source = reading(
                statement.source.clone(),
                provider,
                provider.restricted_to(files)?,
            )?;
            provider.set_next_write_id(write_id.clone());
            let updated = appending(dml, statement.updated_rows(source)?);
            // A failed job deletes the write's directory: the delete files too.
            let (_, rows) = self.write_files(ctx, updated, catalog).await?;
            written.extend(rows);
        }
        let deletes = statement.isolated(Overwrite::of(Removal::Nothing), provider)?;
        self.commit_merge_on_read(provider.table(), &write_id, &written, delete_files, deletes)
            .await
    }

    /// Commits a merge-on-read write: `written` holds its `delete_files` position delete
    /// files, then its data files. The snapshot is an `append` (rows only), else
    /// `deletes`, an overwrite that removes no data file (named `delete` when it adds no
    /// rows).
    pub(super) async fn commit_merge_on_read(
        &self,
        table: &Table,
        write_id: &str,
        written: &[WrittenFile],
        delete_files: usize,
        deletes: Overwrite,
    ) -> Result<()> {
        let how = match delete_files {
            0 => super::merge::appending_under(deletes),
            _ => WriteCommit::Overwrite(deletes),
        };
        commit_write(self.catalog.as_ref(), table, write_id, written, &how).await?;
        Ok(())
    }

    /// Runs a query of one row of counts as a job; returns them, NULL as 0.
    pub(super) async fn counts(
        &self,
        ctx: &Arc<SessionContext>,
        catalog: &Arc<StatementCatalog>,
        plan: LogicalPlan,
    ) -> Result<Vec<u64>> {
        let query = Query::new(ctx.clone(), catalog.clone(), plan, false)?;
        let batches: Vec<_> = self.run_query(Box::new(query)).await?.try_collect().await?;
        let Some(row) = batches.iter().find(|b| b.num_rows() > 0) else {
            return Err(FloeError::internal("a count answered no row"));
        };
        row.columns()
            .iter()
            .map(|column| match ScalarValue::try_from_array(column, 0)? {
                ScalarValue::Int64(n) => Ok(n.unwrap_or(0).max(0) as u64),
                other => Err(FloeError::internal(format!("a count answered {other:?}"))),
            })
            .collect()
    }
}
