//! Subqueries where DataFusion 53 does not decorrelate them: in an aggregate's arguments or
//! grouping (`sum(CASE WHEN x > (SELECT avg(y) FROM u WHERE u.g = t.g) THEN 1 ELSE 0
//! END)`), an `ORDER BY` (`ORDER BY (SELECT count(*) FROM u WHERE u.g = t.g)`), a window's
//! arguments, partitions or order, and a join's `ON` condition. It decorrelates them in
//! projections and filters only; elsewhere the statement failed ("Correlated scalar
//! subquery can only be used in Projection, Filter, Aggregate plan nodes", "No field
//! named \"sum(CASE WHEN …)\"", "Physical plan does not support … ScalarSubquery").
//!
//! Each such subquery is computed by a projection below the node, beside its input's
//! columns, and the node reads its column; a projection above drops it again where the
//! node passes its input's columns on, and the node's outputs keep their names. In a
//! join's `ON`, a subquery that reads one side's columns only is computed over that side;
//! a conjunct whose subqueries read both sides becomes a filter above an inner join (the
//! same rows), and stays as it is in an outer join.
//!
//! A projection or filter with two or more correlated scalar subqueries (`SELECT (SELECT
//! count(*) FROM u WHERE u.a = t.a) AS x, (SELECT count(*) FROM v WHERE v.a = t.a) AS
//! y`) computes each in a projection of its own, one above the other: DataFusion 53 gave
//! the joins of one node's subqueries columns of one name, and the statement failed
//! ("Ambiguous reference to unqualified field __always_true").

use std::sync::Arc;

use datafusion::common::tree_node::{Transformed, TreeNode, TreeNodeRecursion};
use datafusion::common::{Column, DFSchema};
use datafusion::logical_expr::expr::{Exists, InSubquery, SetComparison};
use datafusion::logical_expr::expr_rewriter::NamePreserver;
use datafusion::logical_expr::utils::{conjunction, split_conjunction_owned};
use datafusion::logical_expr::{Expr, Join, JoinType, LogicalPlan, LogicalPlanBuilder, Projection};

use super::expr_rewrite::{columns_of, holds_subquery, is_subquery, outer_columns};
use crate::error::Result;

/// `plan` with the subqueries of its aggregates, sorts, windows and joins computed below
/// them (see the module documentation).
pub(super) fn with_subqueries_computed_below(plan: LogicalPlan) -> Result<LogicalPlan> {
    let mut computed = 0usize;
    let plan = plan.transform_up_with_subqueries(|node| {
        if !node.expressions().iter().any(holds_subquery) {
            return Ok(Transformed::no(node));
        }
        match node {
            LogicalPlan::Aggregate(_) | LogicalPlan::Sort(_) | LogicalPlan::Window(_) => {
                computed_below(node, &mut computed, is_subquery).map(Transformed::yes)
            }
            LogicalPlan::Join(join) => joined_with_computed_sides(join, &mut computed),
            LogicalPlan::Projection(_) | LogicalPlan::Filter(_)
                if correlated_scalar_subqueries(&node) > 1 =>
            {
                // DataFusion 53 joined two correlated scalar subqueries of one node with
                // a column of one name each (`__always_true`, which tells a `count` of no
                // rows): "Ambiguous reference to unqualified field __always_true".
                computed_below(node, &mut computed, is_correlated_scalar_subquery)
                    .map(Transformed::yes)
            }
            other => Ok(Transformed::no(other)),
        }
    })?;
    Ok(plan.data)
}

/// The subqueries of the expressions given, each replaced by a column (named by
/// `computed`) that `below` computes.
struct Below<'a> {
    below: Vec<Expr>,
    computed: &'a mut usize,
    /// Which subqueries it takes.
    takes: fn(&Expr) -> bool,
}

impl Below<'_> {
    fn reading(&mut self, expr: Expr) -> datafusion::error::Result<Expr> {
        let rewritten = expr.transform_down(|e| {
            if !(self.takes)(&e) {
                return Ok(Transformed::no(e));
            }
            *self.computed += 1;
            let column = format!("__floe_below_{}", self.computed);
            self.below.push(e.alias(&column));
            Ok(Transformed::new(
                Expr::Column(Column::from_name(column)),
                true,
                TreeNodeRecursion::Jump,
            ))
        })?;
        Ok(rewritten.data)
    }
}

/// `node` (an aggregate, sort, window, projection or filter) reading each of the
/// subqueries `takes` from a column of a projection of its own below it.
fn computed_below(
    node: LogicalPlan,
    computed: &mut usize,
    takes: fn(&Expr) -> bool,
) -> datafusion::error::Result<LogicalPlan> {
    let input = node.inputs()[0].clone();
    let names = NamePreserver::new(&node);
    let named_outputs = !matches!(node, LogicalPlan::Sort(_));
    let mut below = Below {
        below: Vec::new(),
        computed,
        takes,
    };
    let exprs = (node.expressions().into_iter())
        .map(|expr| {
            let name = names.save(&expr);
            let read = below.reading(expr)?;
            Ok(match named_outputs {
                true => name.restore(read),
                false => read,
            })
        })
        .collect::<datafusion::error::Result<Vec<_>>>()?;
    let rebuilt = node.with_new_exprs(exprs, vec![computing(input, below.below)?])?;
    if matches!(node, LogicalPlan::Aggregate(_) | LogicalPlan::Projection(_)) {
        return Ok(rebuilt);
    }
    LogicalPlanBuilder::from(rebuilt)
        .project(columns_of(node.schema()))?
        .build()
}

/// `input` with `subqueries` computed beside its columns. Where they read columns that
/// `input`, a projection, does not pass on (`SELECT a.k FROM t a ORDER BY (SELECT … WHERE
/// u.s = a.s)`), they are computed below it and it passes them on.
fn computing(input: LogicalPlan, subqueries: Vec<Expr>) -> datafusion::error::Result<LogicalPlan> {
    let read: Vec<Column> = (subqueries.iter())
        .flat_map(columns_read_by_subqueries)
        .collect();
    let readable = |plan: &LogicalPlan| read.iter().all(|c| plan.schema().has_column(c));
    match input {
        LogicalPlan::Projection(projection)
            if !readable(&LogicalPlan::Projection(projection.clone())) =>
        {
            if !readable(&projection.input) {
                return stacked(LogicalPlan::Projection(projection), subqueries);
            }
            let mut exprs = projection.expr;
            exprs.extend(
                subqueries
                    .iter()
                    .map(|s| Expr::Column(Column::from_name(s.schema_name().to_string()))),
            );
            let below = stacked(Arc::unwrap_or_clone(projection.input), subqueries)?;
            Ok(LogicalPlan::Projection(Projection::try_new(
                exprs,
                Arc::new(below),
            )?))
        }
        input => stacked(input, subqueries),
    }
}

fn is_correlated_scalar_subquery(expr: &Expr) -> bool {
    matches!(expr, Expr::ScalarSubquery(s) if !s.outer_ref_columns.is_empty())
}

/// How many correlated scalar subqueries `node`'s expressions hold.
fn correlated_scalar_subqueries(node: &LogicalPlan) -> usize {
    let mut count = 0;
    for expr in node.expressions() {
        let _ = expr.apply(|e| {
            count += usize::from(is_correlated_scalar_subquery(e));
            Ok(TreeNodeRecursion::Continue)
        });
    }
    count
}

/// `join` with the subqueries of its `ON` condition computed over the side they read, or
/// (inner joins) filtering its rows; unchanged if neither can be.
fn joined_with_computed_sides(
    join: Join,
    computed: &mut usize,
) -> datafusion::error::Result<Transformed<LogicalPlan>> {
    let Some(filter) = join.filter.clone() else {
        return Ok(Transformed::no(LogicalPlan::Join(join)));
    };
    let (mut left_below, mut right_below) = (Vec::new(), Vec::new());
    let mut kept = Vec::new();
    let mut above = Vec::new();
    for conjunct in split_conjunction_owned(filter) {
        if !holds_subquery(&conjunct) {
            kept.push(conjunct);
            continue;
        }
        let below = match side_read(&conjunct, join.left.schema(), join.right.schema()) {
            Some(Side::Left) => &mut left_below,
            Some(Side::Right) => &mut right_below,
            None if join.join_type == JoinType::Inner => {
                above.push(conjunct);
                continue;
            }
            None => return Ok(Transformed::no(LogicalPlan::Join(join))),
        };
        let mut side = Below {
            below: Vec::new(),
            computed: &mut *computed,
            takes: is_subquery,
        };
        kept.push(side.reading(conjunct)?);
        below.extend(side.below);
    }
    let schema = Arc::clone(&join.schema);
    let new_left = stacked(join.left.as_ref().clone(), left_below)?;
    let new_right = stacked(join.right.as_ref().clone(), right_below)?;
    let mut exprs: Vec<Expr> = (join.on.iter())
        .flat_map(|(l, r)| [l.clone(), r.clone()])
        .collect();
    exprs.extend(conjunction(kept));
    let rebuilt = LogicalPlan::Join(join).with_new_exprs(exprs, vec![new_left, new_right])?;
    let mut plan = LogicalPlanBuilder::from(rebuilt);
    if let Some(above) = conjunction(above) {
        plan = plan.filter(above)?;
    }
    Ok(Transformed::yes(
        plan.project(columns_of(&schema))?.build()?,
    ))
}

/// `input` with each of `subqueries` computed beside its columns by a projection of its
/// own, one above the other, so that no node holds two of them.
fn stacked(input: LogicalPlan, subqueries: Vec<Expr>) -> datafusion::error::Result<LogicalPlan> {
    let mut plan = input;
    for subquery in subqueries {
        let mut columns = columns_of(plan.schema());
        columns.push(subquery);
        plan = LogicalPlan::Projection(Projection::try_new(columns, Arc::new(plan))?);
    }
    Ok(plan)
}

enum Side {
    Left,
    Right,
}

/// The one side of a join whose columns the subqueries of `conjunct` read, if one.
fn side_read(conjunct: &Expr, left: &DFSchema, right: &DFSchema) -> Option<Side> {
    let read = columns_read_by_subqueries(conjunct);
    if read.is_empty() {
        return None;
    }
    if read.iter().all(|c| left.has_column(c)) {
        Some(Side::Left)
    } else if read.iter().all(|c| right.has_column(c)) {
        Some(Side::Right)
    } else {
        None
    }
}

/// The columns of the query around them that the subqueries in `expr` read: their outer
/// references, and those of the value an `IN` or `ANY`/`ALL` compares.
fn columns_read_by_subqueries(expr: &Expr) -> Vec<Column> {
    let mut read = Vec::new();
    let _ = expr.apply(|e| {
        let (subquery, compared) = match e {
            Expr::ScalarSubquery(subquery) | Expr::Exists(Exists { subquery, .. }) => {
                (subquery, None)
            }
            Expr::InSubquery(InSubquery { subquery, expr, .. })
            | Expr::SetComparison(SetComparison { subquery, expr, .. }) => (subquery, Some(expr)),
            _ => return Ok(TreeNodeRecursion::Continue),
        };
        read.extend(outer_columns(&subquery.outer_ref_columns));
        read.extend(compared.into_iter().flat_map(|e| e.column_refs()).cloned());
        Ok(TreeNodeRecursion::Continue)
    });
    read
}
