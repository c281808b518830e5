//! A join with a subquery that keeps the groups passing a condition on their aggregates
//! (`x IN (SELECT k FROM t GROUP BY k HAVING sum(v) > 300)`, or such a subquery joined
//! in `FROM`) is computed in two steps.
//!
//! No statistics tell how many groups pass a `HAVING`: DataFusion guesses a share of
//! them, and plans the joins above on that guess. TPC-H q18 keeps 57 of 1.5 M orders, but
//! planned for a third of them it shuffled all 6 M lineitem rows to join them. Where the
//! join's other side is too large to broadcast, Floe computes the subquery first, with a
//! job of its own:
//!
//! * with at most [`MAX_KEYS`] distinct join keys, the other side is filtered by them,
//!   `x IN (k1, k2, …)`: the files and row groups holding none of them are skipped, and
//!   DataFusion carries the filter through the inner joins on `x` to the other tables
//!   (q18's lineitem). A semi join becomes that filter;
//! * whose rows fit in `shared_subplans::MAX_BYTES`, the join reads them from memory:
//!   their size known, they are broadcast and the other side is not shuffled;
//! * past that the job is dropped and the statement runs as planned (computing the
//!   subquery again).
//!
//! Where the other side is small enough to be broadcast, the plan is good as it is and
//! nothing is computed first. Only where that cannot change the answer: the subquery
//! reads a table, refers to no outer column and calls nothing volatile (as
//! `shared_subplans`); keys filter only a join on one key that the subquery gives as a
//! column, and under which NULL matches nothing (a semi join with no other condition).
//! `EXPLAIN` shows the plan before this step; `EXPLAIN ANALYZE` the plan after.

use std::collections::HashSet;
use std::sync::Arc;

use datafusion::arrow::array::RecordBatch;
use datafusion::common::tree_node::{Transformed, TreeNode, TreeNodeRecursion};
use datafusion::common::{Column, JoinSide, JoinType, NullEquality, ScalarValue};
use datafusion::execution::SessionState;
use datafusion::logical_expr::{Expr, Filter, Join, LogicalPlan, lit};
use datafusion::prelude::SessionContext;
use futures::TryStreamExt;

use super::Engine;
use super::shared_subplans::{MAX_BYTES, read_from_memory, worth_computing_once};
use crate::cluster::{BROADCAST_ROWS, Deadline};
use crate::error::Result;

/// Most distinct keys a computed subquery may give for them to filter the other side.
const MAX_KEYS: usize = 1024;

impl Engine {
    /// `plan` optimized, with each join on a `HAVING` subquery (see the module
    /// documentation) planned on the subquery computed. `None` if there is none, or none
    /// was computed.
    pub(super) async fn with_having_subqueries_computed(
        &self,
        ctx: &Arc<SessionContext>,
        plan: &LogicalPlan,
        deadline: Option<Deadline>,
    ) -> Result<Option<LogicalPlan>> {
        if matches!(plan, LogicalPlan::Explain(_)) || !may_join_having_subquery(plan)? {
            return Ok(None);
        }
        // One copy of the session state (each copy copies its function registries).
        let state = ctx.state();
        let optimized = state.optimize(plan)?;
        let mut replacements = Vec::new();
        for candidate in having_joins(&optimized)? {
            if !too_large_to_broadcast(&state, candidate.other_side()).await? {
                continue;
            }
            let computed = self.computed(ctx, &candidate, deadline).await?;
            let join = LogicalPlan::Join(candidate.join.clone());
            if let Some(computed) = computed
                && let Some(replacement) = candidate.replaced(computed)?
            {
                replacements.push((join, replacement));
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

    /// The candidate's subquery computed: its rows, if they fit in [`MAX_BYTES`], with its
    /// distinct non-NULL keys if the join filters by them and they are at most
    /// [`MAX_KEYS`]; else `None` (its job cancelled).
    async fn computed(
        &self,
        ctx: &Arc<SessionContext>,
        candidate: &Candidate,
        deadline: Option<Deadline>,
    ) -> Result<Option<Computed>> {
        let subquery = candidate.subquery();
        let schema = Arc::new(subquery.schema().as_arrow().clone());
        let mut keys = match &candidate.keys {
            Some((key, _)) => Some((subquery.schema().index_of_column(key)?, HashSet::new())),
            None => None,
        };
        let mut stream = self
            .cluster
            .run_query(ctx, subquery, schema, deadline)
            .await?;
        let (mut rows, mut bytes) = (Vec::new(), 0);
        while let Some(batch) = stream.try_next().await? {
            bytes += batch.get_array_memory_size();
            if bytes > MAX_BYTES {
                tracing::debug!("a HAVING subquery gave more than {MAX_BYTES} bytes: joined");
                return Ok(None);
            }
            if let Some((index, found)) = &mut keys {
                let Some(column) = batch.columns().get(*index) else {
                    return Ok(None);
                };
                for row in (0..batch.num_rows()).filter(|row| column.is_valid(*row)) {
                    found.insert(ScalarValue::try_from_array(column, row)?);
                }
                if found.len() > MAX_KEYS {
                    keys = None;
                }
            }
            rows.push(batch);
        }
        let keys = keys.map(|(_, found)| {
            let mut keys: Vec<ScalarValue> = found.into_iter().collect();
            // In order, for a plan that reads the same every time.
            keys.sort_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
            keys
        });
        Ok(Some(Computed { rows, keys }))
    }
}

/// A join with a `HAVING` subquery as one input.
struct Candidate {
    join: Join,
    /// The input that is the subquery.
    side: JoinSide,
    /// The subquery's key column and the other side's key expression, where the keys
    /// may filter the other side.
    keys: Option<(Column, Expr)>,
}

/// A candidate's subquery computed.
struct Computed {
    rows: Vec<RecordBatch>,
    /// Its distinct keys, where they filter the other side and are few.
    keys: Option<Vec<ScalarValue>>,
}

impl Candidate {
    fn subquery(&self) -> &LogicalPlan {
        match self.side {
            JoinSide::Left => &self.join.left,
            _ => &self.join.right,
        }
    }

    fn other_side(&self) -> &LogicalPlan {
        match self.side {
            JoinSide::Left => &self.join.right,
            _ => &self.join.left,
        }
    }

    /// What replaces the join: for a semi join filtered by the keys, the filter; else the
    /// join reading the subquery's rows from memory, its other side filtered by the keys
    /// where they are few. `None` where it stays.
    fn replaced(self, computed: Computed) -> Result<Option<LogicalPlan>> {
        let filtered = match (&self.keys, computed.keys) {
            (Some((_, other_key)), Some(keys)) => {
                Some(filtered_by_keys(self.other_side(), other_key, keys)?)
            }
            _ => None,
        };
        if self.join.join_type == JoinType::LeftSemi
            && let Some(filtered) = filtered
        {
            return Ok(Some(filtered));
        }
        let LogicalPlan::SubqueryAlias(alias) = self.subquery() else {
            return Ok(None);
        };
        let computed = Arc::new(read_from_memory(alias, computed.rows)?);
        let mut join = self.join.clone();
        let (subquery, other) = match self.side {
            JoinSide::Left => (&mut join.left, &mut join.right),
            _ => (&mut join.right, &mut join.left),
        };
        *subquery = computed;
        if let Some(filtered) = filtered {
            *other = Arc::new(filtered);
        }
        Ok(Some(LogicalPlan::Join(join)))
    }
}

/// `input`'s rows whose `key` is one of `keys` (none: no row).
fn filtered_by_keys(
    input: &LogicalPlan,
    key: &Expr,
    keys: Vec<ScalarValue>,
) -> Result<LogicalPlan> {
    let predicate = match keys.is_empty() {
        true => lit(false),
        false => key
            .clone()
            .in_list(keys.into_iter().map(lit).collect(), false),
    };
    Ok(LogicalPlan::Filter(Filter::try_new(
        predicate,
        Arc::new(input.clone()),
    )?))
}

/// Whether the planner estimates more rows for `side` than it broadcasts. A smaller
/// side is broadcast to the subquery, whose aggregate then groups only the rows of its
/// keys (`cluster::aggregate_reduction`): computing the whole subquery first would cost
/// more than it saves. (The table provider keeps the scans planned here: the statement's
/// plan reuses each that it asks for unchanged.)
async fn too_large_to_broadcast(state: &SessionState, side: &LogicalPlan) -> Result<bool> {
    let planned = state.create_physical_plan(side).await?;
    let rows = planned.partition_statistics(None)?.num_rows;
    Ok(rows
        .get_value()
        .is_none_or(|rows| *rows as u64 > BROADCAST_ROWS))
}

/// Whether `plan` (as planned from SQL, not optimized) has a join or a subquery, and a
/// filter on an aggregate's result: optimized, it could join a `HAVING` subquery.
fn may_join_having_subquery(plan: &LogicalPlan) -> Result<bool> {
    let (mut joins, mut having) = (false, false);
    plan.apply_with_subqueries(|node| {
        joins |= matches!(node, LogicalPlan::Subquery(_) | LogicalPlan::Join(_));
        having |= filters_aggregates(node);
        Ok(TreeNodeRecursion::Continue)
    })?;
    Ok(joins && having)
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

/// The joins of `plan` with a `HAVING` subquery worth computing first as one input: inner
/// joins, and semi joins whose keys may filter their other side.
fn having_joins(plan: &LogicalPlan) -> Result<Vec<Candidate>> {
    let mut found = Vec::new();
    plan.apply(|node| {
        if let LogicalPlan::Join(join) = node
            && let Some(candidate) = candidate(join)?
        {
            found.push(candidate);
            return Ok(TreeNodeRecursion::Jump);
        }
        Ok(TreeNodeRecursion::Continue)
    })?;
    Ok(found)
}

fn candidate(join: &Join) -> Result<Option<Candidate>> {
    let side = match join.join_type {
        JoinType::Inner if having_subquery(&join.left)? => JoinSide::Left,
        JoinType::Inner | JoinType::LeftSemi if having_subquery(&join.right)? => JoinSide::Right,
        _ => return Ok(None),
    };
    let keys = filtering_keys(join, side);
    if join.join_type == JoinType::LeftSemi && (keys.is_none() || join.filter.is_some()) {
        return Ok(None);
    }
    Ok(Some(Candidate {
        join: join.clone(),
        side,
        keys,
    }))
}

/// The subquery's key column and the other side's key expression of a join on exactly
/// one key, under which NULL matches nothing.
fn filtering_keys(join: &Join, side: JoinSide) -> Option<(Column, Expr)> {
    if join.null_equality != NullEquality::NullEqualsNothing {
        return None;
    }
    let [(left, right)] = join.on.as_slice() else {
        return None;
    };
    let (subquery_key, other_key) = match side {
        JoinSide::Left => (left, right),
        _ => (right, left),
    };
    match subquery_key {
        Expr::Column(column) => Some((column.clone(), other_key.clone())),
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
