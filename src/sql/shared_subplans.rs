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

use std::sync::Arc;

use datafusion::arrow::array::RecordBatch;
use datafusion::catalog::MemTable;
use datafusion::common::tree_node::{Transformed, TreeNodeRecursion};
use datafusion::datasource::provider_as_source;
use datafusion::logical_expr::{LogicalPlan, LogicalPlanBuilder, SubqueryAlias};
use futures::TryStreamExt;

use super::{Engine, Query};
use crate::cluster::Deadline;
use crate::error::Result;

/// Rows of a shared subquery kept in memory at most (they are shipped in each task's
/// plan that reads them, once per use, within Ballista's 16 MiB messages).
pub(super) const MAX_BYTES: usize = 2 << 20;

impl Engine {
    /// `query`'s plan with its repeated subquery (if any) computed and in its place.
    /// `None` if there is none to compute, or its rows are too many.
    pub(super) async fn with_shared_subquery_computed(
        &self,
        query: &Query,
        deadline: Option<Deadline>,
    ) -> Result<Option<LogicalPlan>> {
        if matches!(query.plan, LogicalPlan::Explain(_)) {
            return Ok(None);
        }
        let Some(shared) = repeated_grouped_subquery(&query.plan)? else {
            return Ok(None);
        };
        let LogicalPlan::SubqueryAlias(alias) = &shared else {
            return Ok(None);
        };
        let schema = Arc::new(alias.input.schema().as_arrow().clone());
        let stream = self
            .cluster
            .run_query(&query.ctx, &alias.input, schema.clone(), deadline)
            .await?;
        let Some(batches) = collect_at_most(stream, MAX_BYTES).await? else {
            tracing::debug!(
                "a repeated subquery has more than {MAX_BYTES} bytes: computed per use"
            );
            return Ok(None);
        };
        let computed = read_from_memory(alias, batches)?;
        let plan = query
            .plan
            .clone()
            .transform_down_with_subqueries(|node| {
                Ok(match node == shared {
                    true => Transformed::new(computed.clone(), true, TreeNodeRecursion::Jump),
                    false => Transformed::no(node),
                })
            })?
            .data;
        Ok(Some(plan))
    }
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
    let mut aliases: Vec<LogicalPlan> = Vec::new();
    plan.apply_with_subqueries(|node| {
        if matches!(node, LogicalPlan::SubqueryAlias(_)) {
            aliases.push(node.clone());
        }
        Ok(TreeNodeRecursion::Continue)
    })?;
    let mut best: Option<(usize, &LogicalPlan)> = None;
    for (i, node) in aliases.iter().enumerate() {
        let repeated = aliases[i + 1..].iter().any(|other| other == node);
        if !repeated || !worth_computing_once(node)? {
            continue;
        }
        let size = node_count(node)?;
        if best.is_none_or(|(best_size, _)| size > best_size) {
            best = Some((size, node));
        }
    }
    Ok(best.map(|(_, node)| node.clone()))
}

/// Reads a table and groups its rows; refers to no outer column and calls nothing
/// volatile, so computing it once gives what each use would.
pub(super) fn worth_computing_once(plan: &LogicalPlan) -> Result<bool> {
    let (mut scans, mut aggregates, mut unsafe_to_share) = (false, false, false);
    plan.apply_with_subqueries(|node| {
        match node {
            LogicalPlan::TableScan(_) => scans = true,
            LogicalPlan::Aggregate(aggregate) if !aggregate.group_expr.is_empty() => {
                aggregates = true
            }
            _ => {}
        }
        unsafe_to_share |= node.contains_outer_reference()
            || node.expressions().iter().any(|expr| expr.is_volatile());
        Ok(TreeNodeRecursion::Continue)
    })?;
    Ok(scans && aggregates && !unsafe_to_share)
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
