//! Joins moved below the inner joins whose output they filter.
//!
//! DataFusion joins the tables of a `FROM` clause in the order they are written, and turns
//! `x IN (subquery)` and `[NOT] EXISTS (…)` into a semi or anti join over all of them. A
//! join that filters rows gives the same answer when it runs on the one input its
//! condition reads, before the other joins, and then every join above it has fewer rows:
//!
//! * [`SEMI_JOINS_BEFORE_INNER_JOINS`]: a semi or anti join whose keys (and filter) read one
//!   input of an inner join. Whether a row passes depends on that row alone. It moves
//!   where the inner join does not shrink that input (a join to the rows' foreign key):
//!   TPC-H q18 keeps the 57 orders whose `o_orderkey` has a large total before joining
//!   them to lineitem's 6 M rows, instead of testing the 6 M joined rows. Where the inner
//!   join does shrink it (q21's lineitem joined to one nation's suppliers), it stays.
//! * [`SELECTIVE_JOINS_FIRST`]: an inner join with a broadcast (small) side whose keys on
//!   the other side read one input of an inner join below, and which the statistics show
//!   keeping fewer of that input's rows than the joins in between do: TPC-H q7 and q21
//!   join supplier to the one or two nations they ask for before lineitem, not after
//!   lineitem, orders and customer (q21's orders, half of them, joined to lineitem keep
//!   half of its rows; one nation's suppliers keep a twenty-fifth). Inner joins may be
//!   reordered freely; the moved join's columns are carried up to where they were.
//!
//! The sizes are the optimizer's estimates from Iceberg statistics; without them nothing
//! moves.

use std::sync::Arc;

use datafusion::common::{JoinSide, JoinType};
use datafusion::error::Result;
use datafusion::physical_expr::expressions::Column;
use datafusion::physical_plan::joins::utils::{ColumnIndex, JoinFilter};
use datafusion::physical_plan::joins::{HashJoinExec, PartitionMode};
use datafusion::physical_plan::projection::{ProjectionExec, ProjectionExpr};
use datafusion::physical_plan::{ExecutionPlan, PhysicalExpr};

use super::joins::{BROADCAST_ROWS, HashJoinRule};

/// Moves each semi or anti hash join as far below inner joins as that keeps its input
/// from growing.
pub(super) const SEMI_JOINS_BEFORE_INNER_JOINS: HashJoinRule = HashJoinRule {
    name: "floe_semi_joins_before_inner_joins",
    rewrite: |join, _| semi_join_moved_down(join),
    passes: 1,
};

/// Moves each inner join of a broadcast side that shrinks the input its keys read down
/// to that input. Again after a join moved: it may make a join below selective (q21's
/// nation join, moved onto supplier, leaves the supplier join a twenty-fifth of its rows).
pub(super) const SELECTIVE_JOINS_FIRST: HashJoinRule = HashJoinRule {
    name: "floe_selective_joins_first",
    rewrite: |join, _| selective_join_moved_down(join),
    passes: 3,
};

/// A rewritten plan, or `None` where nothing changes.
type Rewritten = Result<Option<Arc<dyn ExecutionPlan>>>;

/// Whether `join` may move: a limit (a fetch) on it would hold for different rows elsewhere.
pub(super) fn unlimited(join: &HashJoinExec) -> bool {
    join.fetch().is_none()
}

// ---- Semi and anti joins ----

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
fn semi_join_moved_down(join: &HashJoinExec) -> Rewritten {
    let Some(side) = filtered_side(join.join_type()) else {
        return Ok(None);
    };
    if join.contains_projection() || !unlimited(join) {
        return Ok(None);
    }
    let Some(columns) = columns_read(join, side) else {
        return Ok(None);
    };
    let rebuild =
        |input: Arc<dyn ExecutionPlan>, moved: &[usize]| join_over(join, side, input, moved, None);
    semi_join_placed_below(side_of(join, side), &columns, &rebuild)
}

/// Builds the moved join over a new input, given where its columns are in that input.
type Rebuild<'a> = &'a dyn Fn(Arc<dyn ExecutionPlan>, &[usize]) -> Result<Arc<dyn ExecutionPlan>>;

/// `plan` with the semi join below its top inner join (through column-only projections),
/// as deep as each inner join keeps the input the semi join moves to at least as large
/// as its own output; `None` where it cannot go below `plan`'s top.
fn semi_join_placed_below(
    plan: &Arc<dyn ExecutionPlan>,
    columns: &[usize],
    rebuild: Rebuild,
) -> Rewritten {
    if let Some(projection) = plan.as_any().downcast_ref::<ProjectionExec>() {
        let Some(inputs) = projected_columns(projection, columns) else {
            return Ok(None);
        };
        return match semi_join_placed_below(projection.input(), &inputs, rebuild)? {
            Some(input) => Ok(Some(plan.clone().with_new_children(vec![input])?)),
            None => Ok(None),
        };
    }
    let Some((join, side, inputs)) = inner_join_input(plan, columns) else {
        return Ok(None);
    };
    let input = side_of(join, side);
    match (rows(plan)?, rows(input)?) {
        (Some(joined), Some(read)) if joined >= read => {}
        _ => return Ok(None),
    }
    let input = match semi_join_placed_below(input, &inputs, rebuild)? {
        Some(deeper) => deeper,
        None => rebuild(input.clone(), &inputs)?,
    };
    Ok(Some(
        join.builder()
            .with_new_children(children_with(join, side, input))?
            .reset_state()
            .build_exec()?,
    ))
}

// ---- Selective inner joins ----

/// The inner join `join`, whose broadcast (left) side shrinks the input of its right
/// side that its keys read, moved down to that input, with a projection on top that
/// gives `join`'s columns; `None` where it cannot or should not move.
fn selective_join_moved_down(join: &HashJoinExec) -> Rewritten {
    if *join.join_type() != JoinType::Inner
        || *join.partition_mode() != PartitionMode::CollectLeft
        || !unlimited(join)
    {
        return Ok(None);
    }
    let Some(columns) = columns_read(join, JoinSide::Right) else {
        return Ok(None);
    };
    let small = join.left();
    let rest = join.right();
    let small_width = small.schema().fields().len();
    let Some(rest_rows) = rows(rest)? else {
        return Ok(None);
    };
    // The moved join's output: the input's columns, then the small side's.
    let rebuild = |input: Arc<dyn ExecutionPlan>, moved: &[usize]| -> Result<_> {
        let input_width = input.schema().fields().len();
        let projection = (small_width..small_width + input_width)
            .chain(0..small_width)
            .collect();
        join_over(join, JoinSide::Right, input, moved, Some(projection))
    };
    // Moved, the join probes the input's rows instead of the rows the joins in between
    // give it, and those joins then see only what it keeps: that pays where it keeps
    // fewer rows of the input than they do.
    let shrinks = |input: &Arc<dyn ExecutionPlan>, joined: &Arc<dyn ExecutionPlan>| {
        Ok(match (rows(input)?, rows(joined)?) {
            (Some(read), Some(joined)) => joined < read && joined < rest_rows,
            _ => false,
        })
    };
    let Some(widened) = carried_up(rest, &columns, small_width, &rebuild, &shrinks)? else {
        return Ok(None);
    };
    // `join`'s columns: the small side's now follow the rest's.
    let rest_width = rest.schema().fields().len();
    let joined_schema = join.schema();
    let source = |i: usize| match i < small_width {
        true => rest_width + i,
        false => i - small_width,
    };
    let chosen: Vec<usize> = match &join.projection {
        Some(projection) => projection.to_vec(),
        None => (0..small_width + rest_width).collect(),
    };
    let widened_schema = widened.schema();
    let exprs = chosen
        .iter()
        .enumerate()
        .map(|(out, &i)| {
            let from = source(i);
            let column = Column::new(widened_schema.field(from).name(), from);
            ProjectionExpr::new(
                Arc::new(column),
                joined_schema.field(out).name().to_string(),
            )
        })
        .collect::<Vec<_>>();
    Ok(Some(Arc::new(ProjectionExec::try_new(exprs, widened)?)))
}

/// Whether an input, joined, shrinks enough to move the join there.
type Shrinks<'a> = &'a dyn Fn(&Arc<dyn ExecutionPlan>, &Arc<dyn ExecutionPlan>) -> Result<bool>;

/// `plan` with the join moved into the input of an inner join below its top (through
/// column-only projections) that `columns` come from, as deep as it still shrinks its
/// input, and the moved join's `extra` columns carried up: its output is `plan`'s columns
/// followed by those. `None` where the join cannot go below `plan`'s top.
fn carried_up(
    plan: &Arc<dyn ExecutionPlan>,
    columns: &[usize],
    extra: usize,
    rebuild: Rebuild,
    shrinks: Shrinks,
) -> Rewritten {
    if let Some(projection) = plan.as_any().downcast_ref::<ProjectionExec>() {
        let Some(inputs) = projected_columns(projection, columns) else {
            return Ok(None);
        };
        let Some(input) = carried_up(projection.input(), &inputs, extra, rebuild, shrinks)? else {
            return Ok(None);
        };
        let input_width = projection.input().schema().fields().len();
        let input_schema = input.schema();
        let mut exprs = projection.expr().to_vec();
        exprs.extend((input_width..input_width + extra).map(|i| {
            let name = input_schema.field(i).name();
            ProjectionExpr::new(Arc::new(Column::new(name, i)), name.to_string())
        }));
        return Ok(Some(Arc::new(ProjectionExec::try_new(exprs, input)?)));
    }
    let Some((join, side, inputs)) = inner_join_input(plan, columns) else {
        return Ok(None);
    };
    let input = side_of(join, side);
    let input = match carried_up(input, &inputs, extra, rebuild, shrinks)? {
        Some(deeper) => deeper,
        None => {
            let joined = rebuild(input.clone(), &inputs)?;
            if !shrinks(input, &joined)? {
                return Ok(None);
            }
            joined
        }
    };
    // The combined columns before (left, then right), each where it is now, and the
    // carried columns at the end.
    let left_width = join.left().schema().fields().len();
    let right_width = join.right().schema().fields().len();
    let shifted = |i: usize| match side == JoinSide::Left && i >= left_width {
        true => i + extra,
        false => i,
    };
    let carried_from = match side {
        JoinSide::Left => left_width,
        _ => left_width + right_width,
    };
    let projection = match &join.projection {
        Some(projection) => projection.iter().map(|&i| shifted(i)).collect::<Vec<_>>(),
        None => (0..left_width + right_width).map(shifted).collect(),
    }
    .into_iter()
    .chain(carried_from..carried_from + extra)
    .collect();
    let passed = join
        .builder()
        .with_projection(Some(projection))
        .with_new_children(children_with(join, side, input))?
        .reset_state()
        .build()?;
    smaller_side_built(passed).map(Some)
}

/// The inner join `join`, with its sides swapped where it builds more rows than a
/// broadcast is meant for and the side it probes is now the smaller one: a join moved
/// into that side may have shrunk it below the side it builds (q21's lineitem rows of one
/// nation's suppliers, fewer than the 730,000 orders built).
fn smaller_side_built(join: HashJoinExec) -> Result<Arc<dyn ExecutionPlan>> {
    let size = |plan: &Arc<dyn ExecutionPlan>| -> Result<_> {
        let statistics = plan.partition_statistics(None)?;
        Ok((
            statistics.total_byte_size.get_value().copied(),
            statistics.num_rows.get_value().copied(),
        ))
    };
    let (left, right) = (size(join.left())?, size(join.right())?);
    let big_build = left.1.is_some_and(|rows| rows as u64 > BROADCAST_ROWS);
    let smaller_probe = match (left, right) {
        ((Some(left), _), (Some(right), _)) | ((_, Some(left)), (_, Some(right))) => right < left,
        _ => false,
    };
    match big_build && smaller_probe {
        true => join.swap_inputs(*join.partition_mode()),
        false => Ok(Arc::new(join)),
    }
}

// ---- Shared ----

pub(super) fn side_of(join: &HashJoinExec, side: JoinSide) -> &Arc<dyn ExecutionPlan> {
    match side {
        JoinSide::Left => join.left(),
        _ => join.right(),
    }
}

/// `join`'s children, with `input` in place of its `side`.
pub(super) fn children_with(
    join: &HashJoinExec,
    side: JoinSide,
    input: Arc<dyn ExecutionPlan>,
) -> Vec<Arc<dyn ExecutionPlan>> {
    match side {
        JoinSide::Left => vec![input, join.right().clone()],
        _ => vec![join.left().clone(), input],
    }
}

/// The columns of `side` that `join` reads: its keys' (each must be a plain column),
/// then its filter's.
fn columns_read(join: &HashJoinExec, side: JoinSide) -> Option<Vec<usize>> {
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

/// `join` with `input` for its `side`, where the columns [`columns_read`] found are at
/// `moved` now, with `projection`.
fn join_over(
    join: &HashJoinExec,
    side: JoinSide,
    input: Arc<dyn ExecutionPlan>,
    moved: &[usize],
    projection: Option<Vec<usize>>,
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
    join.builder()
        .with_on(on)
        .with_filter(filter)
        .with_projection(projection)
        .with_new_children(children_with(join, side, input))?
        .reset_state()
        .build_exec()
}

/// Where `columns` of a projection's output come from in its input, if each is a column.
pub(super) fn projected_columns(
    projection: &ProjectionExec,
    columns: &[usize],
) -> Option<Vec<usize>> {
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

/// `plan` as an inner hash join (without a limit), the input all of `columns` of its
/// output come from, and where they are in that input.
fn inner_join_input<'p>(
    plan: &'p Arc<dyn ExecutionPlan>,
    columns: &[usize],
) -> Option<(&'p HashJoinExec, JoinSide, Vec<usize>)> {
    let join = plan.as_any().downcast_ref::<HashJoinExec>()?;
    if *join.join_type() != JoinType::Inner || !unlimited(join) {
        return None;
    }
    let left_width = join.left().schema().fields().len();
    let joined: Vec<usize> = match &join.projection {
        Some(projection) => columns
            .iter()
            .map(|&i| projection.get(i).copied())
            .collect::<Option<_>>()?,
        None => columns.to_vec(),
    };
    if joined.iter().all(|&i| i < left_width) {
        Some((join, JoinSide::Left, joined))
    } else if joined.iter().all(|&i| i >= left_width) {
        let inputs = joined.iter().map(|i| i - left_width).collect();
        Some((join, JoinSide::Right, inputs))
    } else {
        None
    }
}

/// The estimated rows of `plan`'s output, where known.
pub(super) fn rows(plan: &Arc<dyn ExecutionPlan>) -> Result<Option<usize>> {
    let statistics = plan.partition_statistics(None)?;
    Ok(statistics.num_rows.get_value().copied())
}
