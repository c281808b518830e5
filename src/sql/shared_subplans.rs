//! A named subquery that a statement reads in two places (a `WITH` query used twice, as
//! TPC-H q15's `revenue`: once joined, once for its maximum) is planned by DataFusion
//! once per use, and Ballista would compute it once per use. If it aggregates, its rows
//! are few: Floe computes them once, with a job of their own, and the statement reads
//! them from memory in both places (they travel to the executors inside the plan).
//!
//! Only where that cannot change the answer or cost much: the subquery reads a table,
//! groups rows, refers to nothing outside itself and calls nothing volatile; and its
//! rows stay under [`MAX_BYTES`], past which its job is dropped and the statement runs
//! as planned.
//!
//! The same holds for a join written twice, as TPC-H q11's `partsupp, supplier, nation`
//! filtered to one nation, once grouped and once summed in a `HAVING` subquery: its
//! rows (the columns the statement reads of them) are computed once, and both places
//! read them from memory instead of scanning and joining the tables again. A join has no
//! aggregate to keep its rows few: when they pass [`MAX_BYTES`], the statement has done
//! part of its work once more (at most one more computation of the join).
//! `EXPLAIN` shows the plan before this step; `EXPLAIN ANALYZE` the statement's job after.

use std::collections::HashSet;
use std::sync::Arc;

use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::datatypes::{Field, Schema};
use datafusion::catalog::MemTable;
use datafusion::common::Column;
use datafusion::common::tree_node::{Transformed, TreeNodeRecursion};
use datafusion::datasource::provider_as_source;
use datafusion::logical_expr::{Expr, LogicalPlan, LogicalPlanBuilder, SubqueryAlias};
use datafusion::prelude::SessionContext;
use futures::TryStreamExt;

use super::Engine;
use crate::cluster::Deadline;
use crate::error::Result;

/// Rows of a shared subquery kept in memory at most (they are shipped in each task's
/// plan that reads them, once per use, within Ballista's 16 MiB messages).
pub(super) const MAX_BYTES: usize = 2 << 20;

impl Engine {
    /// `plan` with its repeated subquery or join (if any) computed and in its place.
    /// `None` if there is none to compute, or its rows are too many.
    pub(super) async fn with_shared_subquery_computed(
        &self,
        ctx: &Arc<SessionContext>,
        plan: &LogicalPlan,
        deadline: Option<Deadline>,
    ) -> Result<Option<LogicalPlan>> {
        if matches!(plan, LogicalPlan::Explain(_)) {
            return Ok(None);
        }
        if let Some(shared) = repeated_grouped_subquery(plan)?
            && let LogicalPlan::SubqueryAlias(alias) = &shared
        {
            let Some(batches) = self.compute(ctx, &alias.input, deadline).await? else {
                return Ok(None);
            };
            let computed = read_from_memory(alias, batches)?;
            return Ok(Some(replaced(plan, &shared, &computed)?));
        }
        // The columns read of the join are found by name: an outer reference to one of
        // them from a correlated subquery would not be (such statements run as planned).
        if has_outer_references(plan)? {
            return Ok(None);
        }
        let Some(shared) = repeated_join(plan)? else {
            return Ok(None);
        };
        let used = used_columns(plan, &shared)?;
        let columns: Vec<Expr> = shared
            .schema()
            .columns()
            .into_iter()
            .filter(|column| used.contains(column))
            .map(Expr::Column)
            .collect();
        // Rows of no column (only counted) are not worth a job of their own.
        if columns.is_empty() {
            return Ok(None);
        }
        let rows = LogicalPlanBuilder::from(shared.clone())
            .project(columns)?
            .build()?;
        // Tried on no rows before the join's job runs: a form this does not foresee runs
        // as planned without computing the join for nothing.
        if rewritten_with_join(plan, &shared, &rows, Vec::new()).is_none() {
            return Ok(None);
        }
        let Some(batches) = self.compute(ctx, &rows, deadline).await? else {
            return Ok(None);
        };
        let rewritten = rewritten_with_join(plan, &shared, &rows, batches);
        if rewritten.is_some() {
            tracing::debug!("a repeated join computed once");
        }
        Ok(rewritten)
    }

    /// The rows of `plan` (a part of a statement planned on `ctx`), if they fit in
    /// [`MAX_BYTES`].
    async fn compute(
        &self,
        ctx: &Arc<SessionContext>,
        plan: &LogicalPlan,
        deadline: Option<Deadline>,
    ) -> Result<Option<Vec<RecordBatch>>> {
        let schema = Arc::new(plan.schema().as_arrow().clone());
        let stream = self.cluster.run_query(ctx, plan, schema, deadline).await?;
        let batches = collect_at_most(stream, MAX_BYTES).await?;
        if batches.is_none() {
            tracing::debug!(
                "a repeated subquery has more than {MAX_BYTES} bytes: computed per use"
            );
        }
        Ok(batches)
    }
}

/// `plan` with each `shared` in it (also inside subqueries) replaced by `computed`.
fn replaced(
    plan: &LogicalPlan,
    shared: &LogicalPlan,
    computed: &LogicalPlan,
) -> Result<LogicalPlan> {
    Ok(plan
        .clone()
        .transform_down_with_subqueries(|node| {
            Ok(match node == *shared {
                true => Transformed::new(computed.clone(), true, TreeNodeRecursion::Jump),
                false => Transformed::no(node),
            })
        })?
        .data)
}

/// `plan` with each `shared` join replaced by its `rows` read from `batches`, if the
/// result is as before: every column the statement reads of the join is there.
fn rewritten_with_join(
    plan: &LogicalPlan,
    shared: &LogicalPlan,
    rows: &LogicalPlan,
    batches: Vec<RecordBatch>,
) -> Option<LogicalPlan> {
    let rewritten = join_from_memory(rows, batches)
        .and_then(|computed| replaced(plan, shared, &computed))
        .and_then(with_schemas_recomputed)
        .ok()?;
    (rewritten.schema() == plan.schema()).then_some(rewritten)
}

/// `plan` with each node's schema recomputed from its inputs (a replaced part has fewer
/// columns).
fn with_schemas_recomputed(plan: LogicalPlan) -> Result<LogicalPlan> {
    Ok(plan
        .transform_up_with_subqueries(|node| Ok(Transformed::yes(node.recompute_schema()?)))?
        .data)
}

/// `rows` (columns of a join, as qualified there) read from `batches`: a scan of them
/// under a name of its own, projected back to the join's names.
fn join_from_memory(rows: &LogicalPlan, batches: Vec<RecordBatch>) -> Result<LogicalPlan> {
    let qualified = rows.schema().columns();
    let fields: Vec<Field> = rows
        .schema()
        .fields()
        .iter()
        .enumerate()
        .map(|(i, field)| field.as_ref().clone().with_name(format!("c{i}")))
        .collect();
    let schema = Arc::new(Schema::new(fields));
    let batches = batches
        .into_iter()
        .map(|batch| RecordBatch::try_new(schema.clone(), batch.columns().to_vec()))
        .collect::<std::result::Result<Vec<_>, _>>()?;
    let table = Arc::new(MemTable::try_new(schema.clone(), vec![batches])?);
    let name = "floe_shared_join";
    let scan = LogicalPlanBuilder::scan(name, provider_as_source(table), None)?;
    let renamed = qualified.into_iter().enumerate().map(|(i, column)| {
        Expr::Column(Column::new(Some(name), format!("c{i}")))
            .alias_qualified(column.relation, column.name)
    });
    Ok(scan.project(renamed)?.build()?)
}

/// `alias` read from `batches`, its rows computed: a plan that travels to the executors
/// with them.
pub(super) fn read_from_memory(
    alias: &SubqueryAlias,
    batches: Vec<RecordBatch>,
) -> Result<LogicalPlan> {
    // As the plan declares them (the batches' own schema may differ in nullability).
    let schema = Arc::new(alias.input.schema().as_arrow().clone());
    let batches = batches
        .into_iter()
        .map(|batch| RecordBatch::try_new(schema.clone(), batch.columns().to_vec()))
        .collect::<std::result::Result<Vec<_>, _>>()?;
    let rows = Arc::new(MemTable::try_new(schema, vec![batches])?);
    let computed =
        LogicalPlanBuilder::scan(alias.alias.clone(), provider_as_source(rows), None)?.build()?;
    Ok(LogicalPlan::SubqueryAlias(SubqueryAlias::try_new(
        Arc::new(computed),
        alias.alias.clone(),
    )?))
}

/// The largest subquery alias that appears more than once in `plan` (counting plans
/// inside subquery expressions) and is worth computing once.
fn repeated_grouped_subquery(plan: &LogicalPlan) -> Result<Option<LogicalPlan>> {
    largest_repeated(
        plan,
        |node| matches!(node, LogicalPlan::SubqueryAlias(_)),
        worth_computing_once,
    )
}

/// The largest join (with its filters) that appears more than once in `plan` (counting
/// plans inside subquery expressions), refers to no outer column and calls nothing
/// volatile.
fn repeated_join(plan: &LogicalPlan) -> Result<Option<LogicalPlan>> {
    let is_join = |node: &LogicalPlan| {
        let join = match node {
            LogicalPlan::Filter(filter) => &filter.input,
            other => other,
        };
        matches!(join, LogicalPlan::Join(_))
    };
    largest_repeated(plan, is_join, safe_to_share)
}

/// The largest node of `plan` (counting plans inside subquery expressions) that is a
/// `candidate`, appears more than once and `qualifies`.
fn largest_repeated(
    plan: &LogicalPlan,
    candidate: impl Fn(&LogicalPlan) -> bool,
    qualifies: impl Fn(&LogicalPlan) -> Result<bool>,
) -> Result<Option<LogicalPlan>> {
    let mut candidates: Vec<LogicalPlan> = Vec::new();
    plan.apply_with_subqueries(|node| {
        if candidate(node) {
            candidates.push(node.clone());
        }
        Ok(TreeNodeRecursion::Continue)
    })?;
    let mut best: Option<(usize, &LogicalPlan)> = None;
    for (i, node) in candidates.iter().enumerate() {
        let repeated = candidates[i + 1..].iter().any(|other| other == node);
        if !repeated || !qualifies(node)? {
            continue;
        }
        let size = node_count(node)?;
        if best.is_none_or(|(best_size, _)| size > best_size) {
            best = Some((size, node));
        }
    }
    Ok(best.map(|(_, node)| node.clone()))
}

/// The columns of `plan`'s nodes other than `shared` and what is below it.
fn used_columns(plan: &LogicalPlan, shared: &LogicalPlan) -> Result<HashSet<Column>> {
    let mut used = HashSet::new();
    plan.apply_with_subqueries(|node| {
        if node == shared {
            return Ok(TreeNodeRecursion::Jump);
        }
        for expr in node.expressions() {
            used.extend(expr.column_refs().into_iter().cloned());
        }
        Ok(TreeNodeRecursion::Continue)
    })?;
    Ok(used)
}

fn has_outer_references(plan: &LogicalPlan) -> Result<bool> {
    any_node(plan, LogicalPlan::contains_outer_reference)
}

/// Refers to no outer column and calls nothing volatile.
fn safe_to_share(plan: &LogicalPlan) -> Result<bool> {
    let unsafe_node = |node: &LogicalPlan| {
        node.contains_outer_reference() || node.expressions().iter().any(|expr| expr.is_volatile())
    };
    Ok(!any_node(plan, unsafe_node)?)
}

/// Whether some node of `plan` (counting plans inside subquery expressions) is `such`.
fn any_node(plan: &LogicalPlan, such: impl Fn(&LogicalPlan) -> bool) -> Result<bool> {
    let mut found = false;
    plan.apply_with_subqueries(|node| {
        found = such(node);
        Ok(match found {
            true => TreeNodeRecursion::Stop,
            false => TreeNodeRecursion::Continue,
        })
    })?;
    Ok(found)
}

/// Reads a table and groups its rows; refers to no outer column and calls nothing
/// volatile, so computing it once gives what each use would.
pub(super) fn worth_computing_once(plan: &LogicalPlan) -> Result<bool> {
    let (mut scans, mut aggregates) = (false, false);
    plan.apply_with_subqueries(|node| {
        match node {
            LogicalPlan::TableScan(_) => scans = true,
            LogicalPlan::Aggregate(aggregate) if !aggregate.group_expr.is_empty() => {
                aggregates = true
            }
            _ => {}
        }
        Ok(TreeNodeRecursion::Continue)
    })?;
    Ok(scans && aggregates && safe_to_share(plan)?)
}

fn node_count(plan: &LogicalPlan) -> Result<usize> {
    let mut count = 0;
    plan.apply_with_subqueries(|_| {
        count += 1;
        Ok(TreeNodeRecursion::Continue)
    })?;
    Ok(count)
}

/// All of `stream`'s batches, or `None` (the stream dropped, which cancels its job) as
/// soon as they exceed `max_bytes`.
async fn collect_at_most(
    mut stream: datafusion::execution::SendableRecordBatchStream,
    max_bytes: usize,
) -> Result<Option<Vec<RecordBatch>>> {
    let (mut batches, mut bytes) = (Vec::new(), 0);
    while let Some(batch) = stream.try_next().await? {
        bytes += batch.get_array_memory_size();
        if bytes > max_bytes {
            return Ok(None);
        }
        batches.push(batch);
    }
    Ok(Some(batches))
}
