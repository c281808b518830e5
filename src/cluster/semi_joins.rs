//! Semi and anti joins moved below the inner joins whose output they filter.
//!
//! DataFusion turns `x IN (subquery)` and `[NOT] EXISTS (…)` into a semi or anti join over
//! the whole `FROM` clause, so it runs after every inner join there. Where the join's keys
//! (and its filter's columns) all come from one input of an inner join, it gives the same
//! rows when it filters that input instead: whether a row passes depends on that row alone.
//! Filtering first pays off where the inner join does not shrink that input (a join to
//! the rows' foreign key): TPC-H q18 keeps the 57 orders whose `o_orderkey` has a large
//! total before joining them to lineitem's 6 M rows, instead of probing the 6 M joined
//! rows. Where the inner join does shrink it (q21's lineitem joined to one nation's
//! suppliers), the semi join stays where it is. Both sizes are the optimizer's estimates
//! from Iceberg statistics; without them nothing moves.

use std::sync::Arc;

use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::common::{JoinSide, JoinType};
use datafusion::config::ConfigOptions;
use datafusion::error::Result;
use datafusion::physical_expr::expressions::Column;
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::PhysicalExpr;
use datafusion::physical_plan::joins::HashJoinExec;
use datafusion::physical_plan::joins::utils::{ColumnIndex, JoinFilter};
use datafusion::physical_plan::projection::ProjectionExec;

/// Moves each semi or anti hash join as far below inner joins as that keeps its input
/// from growing.
#[derive(Debug)]
pub struct SemiJoinsBeforeInnerJoins;

impl PhysicalOptimizerRule for SemiJoinsBeforeInnerJoins {
    fn optimize(
        &self,
        plan: Arc<dyn ExecutionPlan>,
        _: &ConfigOptions,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        plan.transform_up(|node| {
            let moved = match node.as_any().downcast_ref::<HashJoinExec>() {
                Some(join) => moved_below_inner_joins(join)?,
                None => None,
            };
            Ok(moved.map_or_else(|| Transformed::no(node), Transformed::yes))
        })
        .map(|t| t.data)
    }

    fn name(&self) -> &str {
        "floe_semi_joins_before_inner_joins"
    }

    fn schema_check(&self) -> bool {
        true
    }
}

/// The side of a semi or anti join whose rows it outputs.
fn filtered_side(join_type: &JoinType) -> Option<JoinSide> {
    match join_type {
        JoinType::LeftSemi | JoinType::LeftAnti => Some(JoinSide::Left),
        JoinType::RightSemi | JoinType::RightAnti => Some(JoinSide::Right),
        _ => None,
    }
}

/// The filtered side's input, rebuilt with `join` inside it, below an inner join; `None`
/// where `join` cannot or should not move.
fn moved_below_inner_joins(join: &HashJoinExec) -> Result<Option<Arc<dyn ExecutionPlan>>> {
    let Some(side) = filtered_side(join.join_type()) else {
        return Ok(None);
    };
    // A limit (a fetch) on the join would hold for different rows below.
    if join.contains_projection() || join.fetch().is_some() {
        return Ok(None);
    }
    let filtered = match side {
        JoinSide::Left => join.left(),
        _ => join.right(),
    };
    let Some(columns) = filtered_columns(join, side) else {
        return Ok(None);
    };
    let rebuild =
        |input: Arc<dyn ExecutionPlan>, moved: &[usize]| rebuilt(join, side, input, moved);
    placed_below(filtered, &columns, &rebuild)
}

/// The filtered side's columns `join` reads: its keys' (each must be a plain column),
/// then its filter's.
fn filtered_columns(join: &HashJoinExec, side: JoinSide) -> Option<Vec<usize>> {
    let mut columns = Vec::new();
    for (left, right) in join.on() {
        let key = if side == JoinSide::Left { left } else { right };
        columns.push(key.as_any().downcast_ref::<Column>()?.index());
    }
    if let Some(filter) = join.filter() {
        columns.extend(
            filter
                .column_indices()
                .iter()
                .filter(|c| c.side == side)
                .map(|c| c.index),
        );
    }
    Some(columns)
}

/// Builds the semi join over a new input, given where its columns now are.
type Rebuild<'a> = &'a dyn Fn(Arc<dyn ExecutionPlan>, &[usize]) -> Result<Arc<dyn ExecutionPlan>>;

/// `plan` with the semi join below its top inner join (through column-only projections),
/// as deep as each inner join keeps the input the semi join moves to at least as large
/// as its own output; `None` where it cannot go below `plan`'s top.
fn placed_below(
    plan: &Arc<dyn ExecutionPlan>,
    columns: &[usize],
    rebuild: Rebuild,
) -> Result<Option<Arc<dyn ExecutionPlan>>> {
    if let Some(projection) = plan.as_any().downcast_ref::<ProjectionExec>() {
        let Some(inputs) = projected_columns(projection, columns) else {
            return Ok(None);
        };
        return match placed_below(projection.input(), &inputs, rebuild)? {
            Some(input) => Ok(Some(plan.clone().with_new_children(vec![input])?)),
            None => Ok(None),
        };
    }
    let Some(join) = plan.as_any().downcast_ref::<HashJoinExec>() else {
        return Ok(None);
    };
    if *join.join_type() != JoinType::Inner || join.fetch().is_some() {
        return Ok(None);
    }
    let Some((side, inputs)) = input_columns(join, columns) else {
        return Ok(None);
    };
    let input = match side {
        JoinSide::Left => join.left(),
        _ => join.right(),
    };
    if !grows_or_keeps(plan, input)? {
        return Ok(None);
    }
    let input = match placed_below(input, &inputs, rebuild)? {
        Some(deeper) => deeper,
        None => rebuild(input.clone(), &inputs)?,
    };
    let children = match side {
        JoinSide::Left => vec![input, join.right().clone()],
        _ => vec![join.left().clone(), input],
    };
    Ok(Some(
        join.builder()
            .with_new_children(children)?
            .reset_state()
            .build_exec()?,
    ))
}

/// Where `columns` of a projection's output come from in its input, if each is a column.
fn projected_columns(projection: &ProjectionExec, columns: &[usize]) -> Option<Vec<usize>> {
    let exprs = projection.expr();
    columns
        .iter()
        .map(|&i| {
            Some(
                exprs
                    .get(i)?
                    .expr
                    .as_any()
                    .downcast_ref::<Column>()?
                    .index(),
            )
        })
        .collect()
}

/// The input of an inner join that all of `columns` of its output come from, and where
/// they are in it.
fn input_columns(join: &HashJoinExec, columns: &[usize]) -> Option<(JoinSide, Vec<usize>)> {
    let left_width = join.left().schema().fields().len();
    let joined: Vec<usize> = match &join.projection {
        Some(projection) => columns
            .iter()
            .map(|&i| projection.get(i).copied())
            .collect::<Option<_>>()?,
        None => columns.to_vec(),
    };
    if joined.iter().all(|&i| i < left_width) {
        Some((JoinSide::Left, joined))
    } else if joined.iter().all(|&i| i >= left_width) {
        Some((
            JoinSide::Right,
            joined.iter().map(|i| i - left_width).collect(),
        ))
    } else {
        None
    }
}

/// Whether `join`'s estimated output has at least as many rows as `input`'s.
fn grows_or_keeps(join: &Arc<dyn ExecutionPlan>, input: &Arc<dyn ExecutionPlan>) -> Result<bool> {
    let joined = join.partition_statistics(None)?;
    let read = input.partition_statistics(None)?;
    Ok(
        match (joined.num_rows.get_value(), read.num_rows.get_value()) {
            (Some(joined), Some(read)) => joined >= read,
            _ => false,
        },
    )
}

/// `join` with its filtered side replaced by `input`, where its columns are now `moved`
/// (in the order of [`filtered_columns`]).
fn rebuilt(
    join: &HashJoinExec,
    side: JoinSide,
    input: Arc<dyn ExecutionPlan>,
    moved: &[usize],
) -> Result<Arc<dyn ExecutionPlan>> {
    let schema = input.schema();
    let column = |index: usize| -> Arc<dyn PhysicalExpr> {
        Arc::new(Column::new(schema.field(index).name(), index))
    };
    let (keys, filter_columns) = moved.split_at(join.on().len());
    let on = join
        .on()
        .iter()
        .zip(keys)
        .map(|((left, right), &index)| match side {
            JoinSide::Left => (column(index), right.clone()),
            _ => (left.clone(), column(index)),
        })
        .collect();
    let filter = join.filter().map(|filter| {
        let mut moved = filter_columns.iter().copied();
        let indices = filter
            .column_indices()
            .iter()
            .map(|c| ColumnIndex {
                index: match c.side == side {
                    true => moved.next().unwrap_or(c.index),
                    false => c.index,
                },
                side: c.side,
            })
            .collect();
        JoinFilter::new(
            filter.expression().clone(),
            indices,
            filter.schema().clone(),
        )
    });
    let children = match side {
        JoinSide::Left => vec![input, join.right().clone()],
        _ => vec![join.left().clone(), input],
    };
    join.builder()
        .with_on(on)
        .with_filter(filter)
        .with_new_children(children)?
        .reset_state()
        .build_exec()
}
