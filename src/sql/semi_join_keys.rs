//! A semi join whose subquery keeps the groups that pass a condition on their aggregates
//! (`x IN (SELECT k FROM t GROUP BY k HAVING sum(v) > 300)`) is computed in two steps.
//!
//! No statistics tell how many groups pass a `HAVING`: DataFusion guesses a share of
//! them, and plans the joins above on that guess. TPC-H q18 keeps 57 of 1.5 M orders, but
//! planned for a third of them it shuffled all 6 M lineitem rows to join them. Floe
//! computes such a subquery first, with a job of its own; when it yields at most
//! [`MAX_KEYS`] distinct keys, the semi join becomes the filter `x IN (k1, k2, …)`: the
//! files and row groups that hold none of the keys are skipped, DataFusion carries the
//! filter through the inner joins on `x` to the other tables (q18's lineitem), and the
//! joins are planned on what is left. With more keys, whose rows still fit in
//! `shared_subplans::MAX_BYTES`, the semi join reads those rows from memory: their size
//! known, they are broadcast and the other side is not shuffled. Past that the job is
//! dropped and the statement runs as planned (computing the subquery again). Where the
//! other side is small enough to be broadcast, the plan is good as it is and nothing is
//! computed first.
//!
//! Only where that cannot change the answer: the subquery reads a table, refers to no
//! outer column and calls nothing volatile (as `shared_subplans`), the join has one key,
//! which the subquery gives as a column, and no other condition. A semi join keeps a
//! row when its key equals one of the keys, and never for NULL: so does the filter in a
//! `WHERE`. `EXPLAIN` shows the plan before this step; `EXPLAIN ANALYZE` the plan after.

use std::collections::HashSet;
use std::sync::Arc;

use datafusion::arrow::array::RecordBatch;
use datafusion::common::tree_node::{Transformed, TreeNode, TreeNodeRecursion};
use datafusion::common::{Column, JoinType, NullEquality, ScalarValue};
use datafusion::logical_expr::{Expr, Filter, Join, LogicalPlan, lit};
use datafusion::prelude::SessionContext;
use futures::TryStreamExt;

use super::Engine;
use super::shared_subplans::{MAX_BYTES, read_from_memory, worth_computing_once};
use crate::cluster::{BROADCAST_ROWS, Deadline};
use crate::error::Result;

/// Most distinct keys a computed subquery may give for its semi join to become an `IN`
/// list.
const MAX_KEYS: usize = 1024;

impl Engine {
    /// `plan` optimized, with each semi join on a `HAVING` subquery (see the module
    /// documentation) replaced by a filter on the keys the subquery gave, or reading its
    /// rows from memory. `None` if there is none, or none was computed.
    pub(super) async fn with_semi_join_keys_computed(
        &self,
        ctx: &Arc<SessionContext>,
        plan: &LogicalPlan,
        deadline: Option<Deadline>,
    ) -> Result<Option<LogicalPlan>> {
        if matches!(plan, LogicalPlan::Explain(_)) || !may_have_having_subquery(plan)? {
            return Ok(None);
        }
        let optimized = ctx.state().optimize(plan)?;
        let mut replacements = Vec::new();
        for (join, subquery_key) in having_semi_joins(&optimized)? {
            if !too_large_to_broadcast(ctx, &join.left).await? {
                continue;
            }
            let computed = self
                .computed(ctx, &join.right, &subquery_key, deadline)
                .await?;
            if let Some(replacement) = computed.map(|c| c.replacing(&join)).transpose()? {
                replacements.push((LogicalPlan::Join(join), replacement));
            }
        }
        if replacements.is_empty() {
            return Ok(None);
        }
        let plan = optimized
            .transform_down(|node| {
                Ok(match replacements.iter().find(|(join, _)| *join == node) {
                    Some((_, new)) => Transformed::new(new.clone(), true, TreeNodeRecursion::Jump),
                    None => Transformed::no(node),
                })
            })?
            .data;
        Ok(Some(plan))
    }

    /// What `subquery` gives: its distinct non-NULL values of `key`, if at most
    /// [`MAX_KEYS`], else its rows, if they fit in [`MAX_BYTES`]; else `None` (its job
    /// cancelled).
    async fn computed(
        &self,
        ctx: &Arc<SessionContext>,
        subquery: &LogicalPlan,
        key: &Column,
        deadline: Option<Deadline>,
    ) -> Result<Option<Computed>> {
        let index = subquery.schema().index_of_column(key)?;
        let schema = Arc::new(subquery.schema().as_arrow().clone());
        let mut stream = self
            .cluster
            .run_query(ctx, subquery, schema, deadline)
            .await?;
        let (mut keys, mut batches, mut bytes) = (Some(HashSet::new()), Vec::new(), 0);
        while let Some(batch) = stream.try_next().await? {
            bytes += batch.get_array_memory_size();
            if bytes > MAX_BYTES {
                tracing::debug!("a HAVING subquery gave more than {MAX_BYTES} bytes: joined");
                return Ok(None);
            }
            if let Some(found) = &mut keys {
                let Some(column) = batch.columns().get(index) else {
                    return Ok(None);
                };
                for row in (0..batch.num_rows()).filter(|row| column.is_valid(*row)) {
                    found.insert(ScalarValue::try_from_array(column, row)?);
                }
                if found.len() > MAX_KEYS {
                    keys = None;
                }
            }
            batches.push(batch);
        }
        Ok(Some(match keys {
            Some(keys) => Computed::Keys(keys.into_iter().collect()),
            None => Computed::Rows(batches),
        }))
    }
}

/// A `HAVING` subquery computed.
enum Computed {
    /// Its distinct keys: few.
    Keys(Vec<ScalarValue>),
    /// Its rows, too many keys for a list.
    Rows(Vec<RecordBatch>),
}

impl Computed {
    /// What replaces `join`: a filter of its left input on the keys (none: no row), or
    /// the join reading the subquery's rows from memory.
    fn replacing(self, join: &Join) -> Result<LogicalPlan> {
        let left_key = join.on[0].0.clone();
        let predicate = match self {
            Self::Keys(keys) if keys.is_empty() => lit(false),
            Self::Keys(mut keys) => {
                // In order, for a plan that reads the same every time.
                keys.sort_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
                left_key.in_list(keys.into_iter().map(lit).collect(), false)
            }
            Self::Rows(batches) => {
                let LogicalPlan::SubqueryAlias(alias) = join.right.as_ref() else {
                    return Ok(LogicalPlan::Join(join.clone()));
                };
                let mut join = join.clone();
                join.right = Arc::new(read_from_memory(alias, batches)?);
                return Ok(LogicalPlan::Join(join));
            }
        };
        Ok(LogicalPlan::Filter(Filter::try_new(
            predicate,
            join.left.clone(),
        )?))
    }
}

/// Whether the planner estimates more rows for `outer` than it broadcasts. A smaller
/// outer side is broadcast to the subquery, whose aggregate then groups only the rows
/// of its keys (`cluster::aggregate_reduction`): computing the whole subquery first would
/// cost more than it saves.
async fn too_large_to_broadcast(ctx: &SessionContext, outer: &LogicalPlan) -> Result<bool> {
    let planned = ctx.state().create_physical_plan(outer).await?;
    let rows = planned.partition_statistics(None)?.num_rows;
    Ok(rows
        .get_value()
        .is_none_or(|rows| *rows as u64 > BROADCAST_ROWS))
}

/// Whether `plan` (as planned from SQL, not optimized) has a subquery and a filter on an
/// aggregate's result: optimizing it could give a semi join on a `HAVING` subquery.
fn may_have_having_subquery(plan: &LogicalPlan) -> Result<bool> {
    let (mut subquery, mut having) = (false, false);
    plan.apply_with_subqueries(|node| {
        subquery |= matches!(node, LogicalPlan::Subquery(_));
        having |= filters_aggregates(node);
        Ok(TreeNodeRecursion::Continue)
    })?;
    Ok(subquery && having)
}

/// A filter over an aggregate, seen through projections (a `HAVING`).
fn filters_aggregates(node: &LogicalPlan) -> bool {
    let LogicalPlan::Filter(filter) = node else {
        return false;
    };
    let mut input = filter.input.as_ref();
    while let LogicalPlan::Projection(projection) = input {
        input = projection.input.as_ref();
    }
    matches!(input, LogicalPlan::Aggregate(_))
}

/// The semi joins of `plan` on one key, with no other condition, whose right input is a
/// `HAVING` subquery worth computing first; each with the subquery's key column.
fn having_semi_joins(plan: &LogicalPlan) -> Result<Vec<(Join, Column)>> {
    let mut found = Vec::new();
    plan.apply(|node| {
        if let LogicalPlan::Join(join) = node
            && let Some(key) = single_key_semi_join(join)
            && having_subquery(&join.right)?
        {
            found.push((join.clone(), key));
            return Ok(TreeNodeRecursion::Jump);
        }
        Ok(TreeNodeRecursion::Continue)
    })?;
    Ok(found)
}

/// The right input's key column of a left semi join on exactly one key equal to a
/// column of its right input, with no other condition and NULL keys matching nothing.
fn single_key_semi_join(join: &Join) -> Option<Column> {
    if join.join_type != JoinType::LeftSemi
        || join.filter.is_some()
        || join.null_equality != NullEquality::NullEqualsNothing
    {
        return None;
    }
    match join.on.as_slice() {
        [(_, Expr::Column(key))] => Some(key.clone()),
        _ => None,
    }
}

/// A subquery whose rows are the groups passing a `HAVING`, which gives the same rows
/// when computed on its own.
fn having_subquery(plan: &LogicalPlan) -> Result<bool> {
    let mut input = plan;
    loop {
        input = match input {
            LogicalPlan::SubqueryAlias(alias) => alias.input.as_ref(),
            LogicalPlan::Projection(projection) => projection.input.as_ref(),
            _ => break,
        };
    }
    Ok(filters_aggregates(input) && worth_computing_once(plan)?)
}
