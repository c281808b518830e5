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
//! joins are planned on what is left. With more keys the job is dropped and the statement
//! runs as planned (computing the subquery again). Where the other side is small enough
//! to be broadcast, the plan is good as it is and nothing is computed first.
//!
//! Only where that cannot change the answer: the subquery reads a table, refers to no
//! outer column and calls nothing volatile (as `shared_subplans`), the join has one key,
//! which the subquery gives as a column, and no other condition. A semi join keeps a
//! row when its key equals one of the keys, and never for NULL: so does the filter in a
//! `WHERE`. `EXPLAIN` shows the plan before this step; `EXPLAIN ANALYZE` the plan after.

use std::collections::HashSet;
use std::sync::Arc;

use datafusion::common::tree_node::{Transformed, TreeNode, TreeNodeRecursion};
use datafusion::common::{Column, JoinType, NullEquality, ScalarValue};
use datafusion::logical_expr::{Expr, Filter, Join, LogicalPlan, lit};
use datafusion::prelude::SessionContext;
use futures::TryStreamExt;

use super::Engine;
use super::shared_subplans::worth_computing_once;
use crate::cluster::{BROADCAST_ROWS, Deadline};
use crate::error::Result;

/// Most distinct keys a computed subquery may give for its semi join to become an `IN`
/// list.
const MAX_KEYS: usize = 1024;

impl Engine {
    /// `plan` optimized, with each semi join on a `HAVING` subquery (see the module
    /// documentation) replaced by a filter on the keys the subquery gave. `None` if there
    /// is none, or none gave few enough keys.
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
        let mut filters = Vec::new();
        for (join, subquery_key) in having_semi_joins(&optimized)? {
            if !too_large_to_broadcast(ctx, &join.left).await? {
                continue;
            }
            if let Some(keys) = self
                .computed_keys(ctx, &join.right, &subquery_key, deadline)
                .await?
            {
                filters.push((LogicalPlan::Join(join.clone()), keys_filter(&join, keys)?));
            }
        }
        if filters.is_empty() {
            return Ok(None);
        }
        let plan = optimized
            .transform_down(|node| {
                Ok(match filters.iter().find(|(join, _)| *join == node) {
                    Some((_, filter)) => {
                        Transformed::new(filter.clone(), true, TreeNodeRecursion::Jump)
                    }
                    None => Transformed::no(node),
                })
            })?
            .data;
        Ok(Some(plan))
    }

    /// The distinct non-NULL values of `key` in what `subquery` gives, or `None` (its job
    /// cancelled) past [`MAX_KEYS`] of them.
    async fn computed_keys(
        &self,
        ctx: &Arc<SessionContext>,
        subquery: &LogicalPlan,
        key: &Column,
        deadline: Option<Deadline>,
    ) -> Result<Option<Vec<ScalarValue>>> {
        let index = subquery.schema().index_of_column(key)?;
        let schema = Arc::new(subquery.schema().as_arrow().clone());
        let mut stream = self
            .cluster
            .run_query(ctx, subquery, schema, deadline)
            .await?;
        let mut keys = HashSet::new();
        while let Some(batch) = stream.try_next().await? {
            let Some(column) = batch.columns().get(index) else {
                return Ok(None);
            };
            for row in 0..batch.num_rows() {
                if column.is_valid(row) {
                    keys.insert(ScalarValue::try_from_array(column, row)?);
                }
            }
            if keys.len() > MAX_KEYS {
                tracing::debug!("a HAVING subquery gave more than {MAX_KEYS} keys: joined");
                return Ok(None);
            }
        }
        let mut keys: Vec<ScalarValue> = keys.into_iter().collect();
        // In order, for a plan that reads the same every time.
        keys.sort_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
        Ok(Some(keys))
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

/// The filter that replaces `join`: its left key among `keys` (none: no row).
fn keys_filter(join: &Join, keys: Vec<ScalarValue>) -> Result<LogicalPlan> {
    let left_key = join.on[0].0.clone();
    let predicate = match keys.is_empty() {
        true => lit(false),
        false => left_key.in_list(keys.into_iter().map(lit).collect(), false),
    };
    Ok(LogicalPlan::Filter(Filter::try_new(
        predicate,
        join.left.clone(),
    )?))
}
