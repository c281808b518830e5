//! The conditions of a filter put in the order that costs least: cheap conditions that
//! remove many rows first, string comparisons and `LIKE`s after them.
//!
//! DataFusion evaluates `a AND b AND c` left to right, and once the conditions so far
//! keep at most a fifth of a batch's rows it evaluates the next on those rows only. SQL
//! leaves the order to the engine, and queries list their conditions in the order they
//! read well: TPC-H q12 compares `l_shipmode` with two strings for each of lineitem's 6 M
//! rows before the date range that keeps 14% of them. This rule orders each filter's
//! conditions by their cost per row over the share of rows they remove (the order that
//! makes independent conditions cheapest in expectation), with the share estimated as
//! for join planning ([`crate::table::selectivity`]).
//!
//! A condition that may fail on some values (a cast, arithmetic, a function) stays behind
//! the others, in its written order, and past it move only conditions that cannot be
//! NULL: it is then evaluated on no more rows than before, and a guard written before it
//! still comes first.

use std::sync::Arc;

use datafusion::arrow::datatypes::{DataType, Schema};
use datafusion::error::Result;
use datafusion::logical_expr::Operator;
use datafusion::physical_expr::expressions::{
    BinaryExpr, Column, InListExpr, IsNotNullExpr, IsNullExpr, LikeExpr, Literal, NotExpr,
};
use datafusion::physical_expr::{PhysicalExpr, ScalarFunctionExpr, conjunction, split_conjunction};
use datafusion::physical_plan::filter::{FilterExec, FilterExecBuilder};

use super::like_segments;
use super::node_rule::{NodeRule, on_filter};
use crate::table::filter::{BALANCED_FROM, joined_balanced};
use crate::table::selectivity::{compared, estimated_selectivity};

/// Orders the conditions of each filter of two or more.
pub(super) const FILTER_ORDER: NodeRule = NodeRule {
    name: "floe_filter_order",
    rewrite: |node| on_filter(node, in_cheapest_order),
};

/// Relative costs per row, of a comparison of two numbers or dates.
const COMPARISON: f64 = 1.0;
/// A comparison of strings or bytes (a call per value; Arrow compares numbers many at a
/// time).
const BYTES_COMPARISON: f64 = 4.0;
/// A value looked up in an `IN` list's set.
const SET_LOOKUP: f64 = 3.0;
/// A null check (a look at the validity bits).
const NULL_CHECK: f64 = 0.2;
/// `AND`, `OR` or `NOT` of booleans (64 at a time).
const LOGIC: f64 = 0.1;
/// A `LIKE`, or a call of a function.
const CALL: f64 = 8.0;

fn in_cheapest_order(filter: &FilterExec) -> Result<Option<FilterExec>> {
    let conditions = split_conjunction(filter.predicate());
    if conditions.len() < 2 {
        return Ok(None);
    }
    let schema = filter.input().schema();
    let statistics = filter.input().partition_statistics(None)?;
    let movable = movable(&conditions, &schema);
    let mut units: Vec<Unit> = ranged_together(&conditions, &movable)
        .into_iter()
        .map(|(conditions, movable)| {
            let kept = estimated_selectivity(
                &conjunction(conditions.iter().cloned()),
                &schema,
                &statistics.column_statistics,
            );
            let cost: f64 = conditions.iter().map(|c| cost(c, &schema)).sum();
            let rank = match movable {
                true => cost / (1.0 - kept).max(1e-6),
                false => f64::INFINITY,
            };
            Unit { conditions, rank }
        })
        .collect();
    // Stable: the conditions that stay keep their written order after the others.
    units.sort_by(|a, b| a.rank.total_cmp(&b.rank));
    let ordered: Vec<Arc<dyn PhysicalExpr>> =
        units.into_iter().flat_map(|u| u.conditions).collect();
    let unchanged = ordered
        .iter()
        .zip(&conditions)
        .all(|(new, old)| Arc::ptr_eq(new, old));
    // A long filter is joined anew either way: DataFusion joined it one condition after
    // another, as deep as it is long.
    if unchanged && ordered.len() < BALANCED_FROM {
        return Ok(None);
    }
    let joined = joined_balanced(ordered, &|a, b| {
        Arc::new(BinaryExpr::new(a, Operator::And, b)) as Arc<dyn PhysicalExpr>
    });
    let Some(predicate) = joined else {
        return Ok(None);
    };
    let rewritten = FilterExecBuilder::from(filter)
        .with_predicate(predicate)
        .build()?;
    Ok(Some(rewritten))
}

/// Which of `conditions` may move ahead of those written before them: those that cannot
/// fail, and past a condition that may fail only those that cannot be NULL either
/// (DataFusion evaluates the right side of an `AND` on every row where the left has a
/// NULL, so a NULL moved ahead of a cast would have the cast see rows its guard removed).
fn movable(conditions: &[&Arc<dyn PhysicalExpr>], schema: &Schema) -> Vec<bool> {
    let first_that_may_fail = conditions
        .iter()
        .position(|c| !cannot_fail(c))
        .unwrap_or(conditions.len());
    conditions
        .iter()
        .enumerate()
        .map(|(i, c)| {
            cannot_fail(c) && (i < first_that_may_fail || matches!(c.nullable(schema), Ok(false)))
        })
        .collect()
}

/// Conditions evaluated one after the other: one condition, or the bounds of a range on
/// one column (`d >= '1994-01-01' AND d < '1995-01-01'`), which keep together far fewer
/// rows than either bound tells alone.
struct Unit {
    conditions: Vec<Arc<dyn PhysicalExpr>>,
    /// Cost per row over the share of rows removed, lowest first; infinite for a unit
    /// that stays where it is written.
    rank: f64,
}

/// `conditions` in units, each with whether it may move: each movable comparison of a
/// column with a literal by `<`, `<=`, `>` or `>=` joins the first such of the same
/// column.
fn ranged_together(
    conditions: &[&Arc<dyn PhysicalExpr>],
    movable: &[bool],
) -> Vec<(Vec<Arc<dyn PhysicalExpr>>, bool)> {
    let mut units: Vec<(Vec<Arc<dyn PhysicalExpr>>, bool)> = Vec::new();
    for (&condition, &movable) in conditions.iter().zip(movable) {
        let column = bounded_column(condition).filter(|_| movable);
        let same_column = |(unit, _): &&mut (Vec<Arc<dyn PhysicalExpr>>, bool)| {
            column.is_some() && bounded_column(&unit[0]) == column
        };
        match units.iter_mut().find(same_column) {
            Some((unit, _)) => unit.push(condition.clone()),
            None => units.push((vec![condition.clone()], movable)),
        }
    }
    units
}

/// The column `condition` bounds, where it compares a column with a literal by `<`,
/// `<=`, `>` or `>=`.
fn bounded_column(condition: &Arc<dyn PhysicalExpr>) -> Option<usize> {
    let (column, op, _) = compared(condition)?;
    matches!(
        op,
        Operator::Lt | Operator::LtEq | Operator::Gt | Operator::GtEq
    )
    .then(|| column.index())
}

/// The relative cost per row of evaluating `expr` on an input of `schema`.
fn cost(expr: &Arc<dyn PhysicalExpr>, schema: &Schema) -> f64 {
    let any = expr.as_any();
    let children: f64 = expr.children().iter().map(|c| cost(c, schema)).sum();
    let own = if any.is::<Column>() || any.is::<Literal>() {
        0.0
    } else if let Some(binary) = any.downcast_ref::<BinaryExpr>() {
        match binary.op() {
            Operator::And | Operator::Or => LOGIC,
            _ if of_bytes(binary.left(), schema) => BYTES_COMPARISON,
            _ => COMPARISON,
        }
    } else if let Some(list) = any.downcast_ref::<InListExpr>() {
        match of_bytes(list.expr(), schema) {
            true => SET_LOOKUP + BYTES_COMPARISON,
            false => SET_LOOKUP,
        }
    } else if any.is::<IsNullExpr>() || any.is::<IsNotNullExpr>() {
        NULL_CHECK
    } else if any.is::<NotExpr>() {
        LOGIC
    } else {
        CALL
    };
    own + children
}

fn of_bytes(expr: &Arc<dyn PhysicalExpr>, schema: &Schema) -> bool {
    matches!(
        expr.data_type(schema),
        Ok(DataType::Utf8
            | DataType::LargeUtf8
            | DataType::Utf8View
            | DataType::Binary
            | DataType::LargeBinary
            | DataType::BinaryView
            | DataType::FixedSizeBinary(_))
    )
}

/// Whether `expr` gives a value for every row: columns, literals, comparisons, `IN`
/// lists, null checks, `NOT`, `AND`, `OR` and `LIKE`s of literal patterns, of such.
fn cannot_fail(expr: &Arc<dyn PhysicalExpr>) -> bool {
    let any = expr.as_any();
    let own = if let Some(binary) = any.downcast_ref::<BinaryExpr>() {
        matches!(
            binary.op(),
            Operator::Eq
                | Operator::NotEq
                | Operator::Lt
                | Operator::LtEq
                | Operator::Gt
                | Operator::GtEq
                | Operator::IsDistinctFrom
                | Operator::IsNotDistinctFrom
                | Operator::And
                | Operator::Or
        )
    } else if let Some(like) = any.downcast_ref::<LikeExpr>() {
        like.pattern().as_any().is::<Literal>()
    } else if let Some(call) = any.downcast_ref::<ScalarFunctionExpr>() {
        call.name() == like_segments::NAME
    } else {
        any.is::<Column>()
            || any.is::<Literal>()
            || any.is::<InListExpr>()
            || any.is::<IsNullExpr>()
            || any.is::<IsNotNullExpr>()
            || any.is::<NotExpr>()
    };
    own && expr.children().iter().all(|c| cannot_fail(c))
}
