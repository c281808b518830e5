//! Aggregates that a join mostly discards, computed only for the groups it keeps.
//!
//! DataFusion turns a correlated subquery into a join with an aggregate of all the
//! subquery's rows, grouped by the correlated columns. TPC-H q17's
//! `l_quantity < (SELECT 0.2 * avg(l_quantity) FROM lineitem WHERE l_partkey = p_partkey)`
//! averages lineitem's 6 M rows for all 200,000 parts, of which the join keeps the 204
//! parts of one brand and container. [`JOIN_KEYS_REDUCE_AGGREGATES`] puts a semi join under
//! such an aggregate that keeps the rows whose key the join's other side can have, read
//! from a small input of that side (broadcast): q17's aggregate then reads the 6,100
//! rows of those 204 parts ("semi-join reduction"). The groups it leaves out are ones
//! the join would drop: the other side has no row with their key.
//!
//! That input is computed a second time for the semi join, so it must be one chain of
//! operators over one table (a scan and its filters, no join) that gives the same rows
//! each time (no limit, nothing volatile), estimated at most [`BROADCAST_ROWS`] rows and
//! at most half as many as the keys the aggregate reads; and the aggregate must read at
//! least [`MIN_ROWS_READ`] rows.

use std::sync::Arc;

use datafusion::common::{JoinSide, JoinType, NullEquality};
use datafusion::error::Result;
use datafusion::physical_expr::expressions::Column;
use datafusion::physical_expr_common::physical_expr::is_volatile;
use datafusion::physical_plan::aggregates::{AggregateExec, AggregateMode};
use datafusion::physical_plan::coalesce_partitions::CoalescePartitionsExec;
use datafusion::physical_plan::filter::FilterExec;
use datafusion::physical_plan::joins::{HashJoinExec, PartitionMode};
use datafusion::physical_plan::projection::{ProjectionExec, ProjectionExpr};
use datafusion::physical_plan::repartition::RepartitionExec;
use datafusion::physical_plan::{ExecutionPlan, PhysicalExpr};

use super::join_order::{children_with, projected_columns, rows, side_of, unlimited};
use super::joins::{BROADCAST_ROWS, HashJoinRule};
use crate::table::selectivity::column_distinct_values;

/// An aggregate of fewer rows (by the estimates) costs less than what the semi join adds:
/// a stage computing the keys, broadcast. TPC-H q2's aggregate of 160,000 rows took as
/// long with the semi join as without; q20's of 1.2 M (0.9 M in fact) took a quarter less.
const MIN_ROWS_READ: usize = 500_000;

/// Gives an aggregate on one side of a hash join a semi join with the keys of a small
/// input of the other side, where the join drops the groups without such a key.
pub(super) const JOIN_KEYS_REDUCE_AGGREGATES: HashJoinRule = HashJoinRule {
    name: "floe_join_keys_reduce_aggregates",
    rewrite: aggregate_reduced,
    passes: 1,
};

type Plan = Arc<dyn ExecutionPlan>;

/// The sides of a join whose rows without a matching key never reach its output.
fn sides_dropping_unmatched(join_type: &JoinType) -> &'static [JoinSide] {
    match join_type {
        JoinType::Inner | JoinType::LeftSemi | JoinType::RightSemi => {
            &[JoinSide::Left, JoinSide::Right]
        }
        JoinType::Left | JoinType::LeftAnti | JoinType::LeftMark => &[JoinSide::Right],
        JoinType::Right | JoinType::RightAnti | JoinType::RightMark => &[JoinSide::Left],
        JoinType::Full => &[],
    }
}

/// A semi join to put under an aggregate on the join's `side`: the aggregate's `input`
/// (`through` the one-child nodes from that side down to the aggregate), its `group`
/// expression over it, and the `keys` to keep: column `key` of an input of the other
/// side, of about `rows` rows.
struct Reduction {
    side: JoinSide,
    through: Vec<Plan>,
    input: Plan,
    group: Arc<dyn PhysicalExpr>,
    keys: Plan,
    key: usize,
    rows: usize,
}

/// `join` (as the plan node `node`) with the best [`Reduction`] of an aggregate on one of
/// its sides; `None` where no aggregate qualifies.
fn aggregate_reduced(join: &HashJoinExec, node: &Plan) -> Result<Option<Plan>> {
    // A null-aware anti join (`NOT IN`) outputs nothing when the other side has a NULL
    // key, a row the semi join would drop.
    if join.null_equality() != NullEquality::NullEqualsNothing
        || join.null_aware
        || !unlimited(join)
    {
        return Ok(None);
    }
    let mut best: Option<Reduction> = None;
    for &side in sides_dropping_unmatched(join.join_type()) {
        for (left, right) in join.on() {
            let (key, other_key) = match side {
                JoinSide::Left => (left, right),
                _ => (right, left),
            };
            let (Some(key), Some(other_key)) = (column_index(key), column_index(other_key)) else {
                continue;
            };
            let Some((through, group)) = path_to_grouped_input(side_of(join, side), key) else {
                continue;
            };
            // The aggregate's size first: most are too small, and the key search below
            // estimates every input it passes.
            let input = through[through.len() - 1].children()[0].clone();
            let Some((read, distinct)) = rows_and_keys(&input, &group)? else {
                continue;
            };
            if read < MIN_ROWS_READ {
                continue;
            }
            let other = side_of(join, side.negate());
            let Some((keys, key, rows)) = smallest_key_source(other, other_key)? else {
                continue;
            };
            let fits = rows <= BROADCAST_ROWS as usize
                && rows.saturating_mul(2) <= distinct
                && keys.schema().field(key).data_type() == &group.data_type(&input.schema())?;
            if fits && best.as_ref().is_none_or(|b| rows < b.rows) {
                best = Some(Reduction {
                    side,
                    through,
                    input,
                    group,
                    keys,
                    key,
                    rows,
                });
            }
        }
    }
    let Some(reduction) = best else {
        return Ok(None);
    };
    let side = reduction.side;
    let reduced = reduced_aggregate(reduction)?;
    let children = children_with(join, side, reduced);
    Ok(Some(node.clone().with_new_children(children)?))
}

fn column_index(expr: &Arc<dyn PhysicalExpr>) -> Option<usize> {
    Some(expr.as_any().downcast_ref::<Column>()?.index())
}

/// The nodes from `plan` down to the aggregate that reads the rows of `column`'s groups
/// (each with one child: projections and filters, as of a `HAVING`, the final and partial
/// aggregates and a shuffle between them), and that group's expression over that
/// aggregate's input.
fn path_to_grouped_input(plan: &Plan, column: usize) -> Option<(Vec<Plan>, Arc<dyn PhysicalExpr>)> {
    let (mut node, mut column) = (plan.clone(), column);
    let mut path = Vec::new();
    let mut after_final = false;
    loop {
        path.push(node.clone());
        if let Some((input, at)) = passed_through(&node, column) {
            if after_final {
                return None;
            }
            (node, column) = (input, at);
            continue;
        }
        if moves_partitions(&node) {
            if !after_final {
                return None;
            }
            node = node.children()[0].clone();
            continue;
        }
        let aggregate = node.as_any().downcast_ref::<AggregateExec>()?;
        let groups = aggregate.group_expr();
        if !groups.is_single() || aggregate.limit_options().is_some() {
            return None;
        }
        let (group, _) = groups.expr().get(column)?;
        match aggregate.mode() {
            // The group columns lead a final aggregate's input as they lead its output.
            AggregateMode::Final | AggregateMode::FinalPartitioned if !after_final => {
                after_final = true;
                node = aggregate.input().clone();
            }
            AggregateMode::Partial if after_final => return Some((path, group.clone())),
            AggregateMode::Single | AggregateMode::SinglePartitioned if !after_final => {
                return Some((path, group.clone()));
            }
            _ => return None,
        }
    }
}

/// The estimated rows of `input`, and at most how many keys `group` has over them.
fn rows_and_keys(input: &Plan, group: &Arc<dyn PhysicalExpr>) -> Result<Option<(usize, usize)>> {
    let statistics = input.partition_statistics(None)?;
    let Some(&rows) = statistics.num_rows.get_value() else {
        return Ok(None);
    };
    let schema = input.schema();
    let keys = column_index(group)
        .and_then(|index| column_distinct_values(&statistics.column_statistics, &schema, index))
        .unwrap_or(rows);
    Ok(Some((rows, keys.min(rows))))
}

/// Of the inputs within `plan` whose `column` has every value (but NULL) that `plan`'s
/// output `column` can have, the [`recomputable`] one with the fewest estimated rows: the
/// plan, where that column is in it, and its rows.
fn smallest_key_source(plan: &Plan, column: usize) -> Result<Option<(Plan, usize, usize)>> {
    let mut sources = Vec::new();
    key_sources(plan, column, &mut sources);
    let mut smallest = None;
    for (source, column) in sources {
        if !recomputable(&source) {
            continue;
        }
        let Some(rows) = rows(&source)? else {
            continue;
        };
        if smallest
            .as_ref()
            .is_none_or(|(_, _, fewest)| rows < *fewest)
        {
            smallest = Some((source, column, rows));
        }
    }
    Ok(smallest)
}

/// Adds `plan` and the inputs within it whose `column` has every non-NULL value of
/// `plan`'s `column`: through projections, filters, shuffles, the group columns of
/// aggregates, and hash joins (to the key's own side; and from one key to the other
/// where every row output matched, in inner and semi joins).
fn key_sources(plan: &Plan, column: usize, sources: &mut Vec<(Plan, usize)>) {
    sources.push((plan.clone(), column));
    let any = plan.as_any();
    if let Some((input, at)) = passed_through(plan, column) {
        key_sources(&input, at, sources);
    } else if moves_partitions(plan) {
        key_sources(&plan.children()[0].clone(), column, sources);
    } else if let Some(aggregate) = any.downcast_ref::<AggregateExec>() {
        let group = aggregate.group_expr();
        let input = group.expr().get(column).and_then(|(e, _)| column_index(e));
        if let (true, Some(input)) = (group.is_single(), input) {
            key_sources(aggregate.input(), input, sources);
        }
    } else if let Some(join) = any.downcast_ref::<HashJoinExec>() {
        let Some((side, index)) = output_source(join, column) else {
            return;
        };
        key_sources(side_of(join, side), index, sources);
        let matched_only = matches!(
            join.join_type(),
            JoinType::Inner | JoinType::LeftSemi | JoinType::RightSemi
        );
        if !matched_only || join.null_equality() != NullEquality::NullEqualsNothing {
            return;
        }
        for (left, right) in join.on() {
            let (own, other) = match side {
                JoinSide::Left => (left, right),
                _ => (right, left),
            };
            if let (true, Some(other)) = (column_index(own) == Some(index), column_index(other)) {
                key_sources(side_of(join, side.negate()), other, sources);
            }
        }
    }
}

/// The input of a projection or filter, and where its output `column` is in that input
/// (`None` for other nodes, and for a column a projection computes).
fn passed_through(plan: &Plan, column: usize) -> Option<(Plan, usize)> {
    let any = plan.as_any();
    if let Some(projection) = any.downcast_ref::<ProjectionExec>() {
        let input = projected_columns(projection, &[column])?[0];
        Some((projection.input().clone(), input))
    } else if let Some(filter) = any.downcast_ref::<FilterExec>() {
        let input = match filter.projection() {
            Some(projection) => *projection.get(column)?,
            None => column,
        };
        Some((filter.input().clone(), input))
    } else {
        None
    }
}

/// Whether `plan` only moves its input's rows between partitions.
fn moves_partitions(plan: &Plan) -> bool {
    plan.as_any().is::<RepartitionExec>() || plan.as_any().is::<CoalescePartitionsExec>()
}

/// The side of `join` and the column there that its output `column` comes from.
fn output_source(join: &HashJoinExec, column: usize) -> Option<(JoinSide, usize)> {
    let combined = match &join.projection {
        Some(projection) => *projection.get(column)?,
        None => column,
    };
    let left_width = join.left().schema().fields().len();
    let right_width = join.right().schema().fields().len();
    match join.join_type() {
        JoinType::LeftSemi | JoinType::LeftAnti | JoinType::LeftMark => {
            (combined < left_width).then_some((JoinSide::Left, combined))
        }
        JoinType::RightSemi | JoinType::RightAnti | JoinType::RightMark => {
            (combined < right_width).then_some((JoinSide::Right, combined))
        }
        _ if combined < left_width => Some((JoinSide::Left, combined)),
        _ => Some((JoinSide::Right, combined - left_width)),
    }
}

/// Whether `plan` gives the same rows when it runs again: one chain of operators (no
/// node with more than one child, so no join), none of them with a limit (which may keep
/// other rows another time) or a volatile expression (`random()`).
fn recomputable(plan: &Plan) -> bool {
    let any = plan.as_any();
    let volatile = if let Some(filter) = any.downcast_ref::<FilterExec>() {
        is_volatile(filter.predicate())
    } else if let Some(projection) = any.downcast_ref::<ProjectionExec>() {
        projection.expr().iter().any(|e| is_volatile(&e.expr))
    } else if let Some(aggregate) = any.downcast_ref::<AggregateExec>() {
        aggregate.limit_options().is_some()
            || aggregate
                .group_expr()
                .expr()
                .iter()
                .any(|(e, _)| is_volatile(e))
    } else {
        false
    };
    let children = plan.children();
    !volatile
        && plan.fetch().is_none()
        && children.len() <= 1
        && children.iter().all(|child| recomputable(child))
}

/// The reduction's path rebuilt over the semi join of the aggregate's input with the
/// keys (broadcast, as the build side).
fn reduced_aggregate(reduction: Reduction) -> Result<Plan> {
    let Reduction {
        through,
        input,
        group,
        keys,
        key,
        ..
    } = reduction;
    let name = keys.schema().field(key).name().to_string();
    let key_column = Arc::new(Column::new(&name, key));
    let keys: Plan = Arc::new(ProjectionExec::try_new(
        vec![ProjectionExpr::new(key_column, name.clone())],
        keys,
    )?);
    let mut reduced: Plan = Arc::new(HashJoinExec::try_new(
        keys,
        input,
        vec![(Arc::new(Column::new(&name, 0)), group)],
        None,
        &JoinType::RightSemi,
        None,
        PartitionMode::CollectLeft,
        NullEquality::NullEqualsNothing,
        false,
    )?);
    for node in through.into_iter().rev() {
        reduced = node.with_new_children(vec![reduced])?;
    }
    Ok(reduced)
}
