//! Comparisons of a float with zero as SQL makes them: `-0.0` equals `0`. Arrow orders
//! floats totally, `-0.0` below `0.0`, so `WHERE x * y < 0` kept the rows where the
//! product is `-0.0` (a negative `x` times a zero `y`; `ceil(-0.5)`), and `= 0` dropped
//! them: 65 rows where PostgreSQL answers 58.
//!
//! A comparison with a float zero literal becomes one Arrow's order answers as SQL does
//! (`x < 0` is `x < -0.0`, `x >= 0` is `x >= -0.0`, `x = 0` is `x >= -0.0 AND x <= 0.0`),
//! still a column against a literal, so files and row groups are pruned as before. It runs
//! after DataFusion's optimizer, whose simplifier would fold the zeros back. A comparison
//! of two float expressions (`a.x * 0 = a.y`, `x IS DISTINCT FROM y`) adds `0.0` to each
//! side, which makes a `-0.0` `0.0` and leaves any other value as it is, and so does an
//! `IN` list holding a zero to the value it looks up.
//!
//! Float keys get the same `+ 0.0` (grouping, `DISTINCT`, join keys, window partitions
//! and order), where `-0.0` and `0.0` were two keys: `GROUP BY round(x)` answered a group
//! `-0` beside `0`, and a join did not match them.

use datafusion::arrow::datatypes::DataType;
use datafusion::common::tree_node::Transformed;
use datafusion::common::{DFSchema, Result, ScalarValue};
use datafusion::logical_expr::expr::{Alias, InList};
use datafusion::logical_expr::expr_rewriter::NamePreserver;
use datafusion::logical_expr::{
    Aggregate, BinaryExpr, Expr, ExprSchemable, Join, LogicalPlan, Operator, Window, and, lit, or,
};
use datafusion::optimizer::{OptimizerConfig, OptimizerRule};

use super::expression_rule;

#[derive(Debug)]
pub(super) struct FloatZeroComparisons;

impl OptimizerRule for FloatZeroComparisons {
    fn name(&self) -> &str {
        "floe_float_zero_comparisons"
    }

    fn rewrite(
        &self,
        plan: LogicalPlan,
        _config: &dyn OptimizerConfig,
    ) -> Result<Transformed<LogicalPlan>> {
        // Names are kept: a select item `x > y` is not renamed `x + 0.0 > y + 0.0`.
        expression_rule::rewrite_expressions(plan, may_be_rewritten, as_sql_compares)?
            .transform_data(|plan| expression_rule::rewrite_nodes(plan, with_positive_zero_keys))
    }
}

/// `node` with its float keys plus `0.0`, so that `-0.0` and `0.0` are one key as in
/// SQL: an aggregate's grouping keys and `DISTINCT` arguments (`SELECT DISTINCT`, `UNION`
/// and `count(DISTINCT …)` are aggregates by now), a join's equality keys (`IN`,
/// `INTERSECT` and `EXCEPT` too) and a window's partitions and order (its peers).
fn with_positive_zero_keys(node: LogicalPlan) -> Result<Transformed<LogicalPlan>> {
    match node {
        LogicalPlan::Aggregate(aggregate) => aggregate_keys(aggregate),
        LogicalPlan::Join(join) => Ok(join_keys(join)),
        LogicalPlan::Window(window) => window_keys(window),
        node => Ok(Transformed::no(node)),
    }
}

fn aggregate_keys(aggregate: Aggregate) -> Result<Transformed<LogicalPlan>> {
    let schema = aggregate.input.schema();
    let group_expr = renamed_back(&aggregate.group_expr, |e| match e {
        // Grouping sets name their keys by the expressions inside: left as they are.
        Expr::GroupingSet(_) => None,
        e => positive_zero_key(e, schema),
    });
    let aggr_expr = renamed_back(&aggregate.aggr_expr, |e| {
        distinct_arguments_keyed(e, schema)
    });
    if group_expr.is_none() && aggr_expr.is_none() {
        return Ok(Transformed::no(LogicalPlan::Aggregate(aggregate)));
    }
    let group_expr = group_expr.unwrap_or_else(|| aggregate.group_expr.clone());
    let aggr_expr = aggr_expr.unwrap_or_else(|| aggregate.aggr_expr.clone());
    let aggregate = Aggregate::try_new(aggregate.input, group_expr, aggr_expr)?;
    Ok(Transformed::yes(LogicalPlan::Aggregate(aggregate)))
}

fn distinct_arguments_keyed(expr: &Expr, schema: &DFSchema) -> Option<Expr> {
    beneath_alias(expr, |expr| match expr {
        Expr::AggregateFunction(function) if function.params.distinct => {
            let mut function = function.clone();
            function.params.args = all_keyed(&function.params.args, schema)?;
            Some(Expr::AggregateFunction(function))
        }
        _ => None,
    })
}

fn join_keys(mut join: Join) -> Transformed<LogicalPlan> {
    let (left, right) = (join.left.schema().clone(), join.right.schema().clone());
    let mut changed = false;
    for (l, r) in &mut join.on {
        if let (Some(kl), Some(kr)) = (positive_zero_key(l, &left), positive_zero_key(r, &right)) {
            (*l, *r, changed) = (kl, kr, true);
        }
    }
    match changed {
        true => Transformed::yes(LogicalPlan::Join(join)),
        false => Transformed::no(LogicalPlan::Join(join)),
    }
}

fn window_keys(window: Window) -> Result<Transformed<LogicalPlan>> {
    let schema = window.input.schema();
    let Some(exprs) = renamed_back(&window.window_expr, |e| window_keyed(e, schema)) else {
        return Ok(Transformed::no(LogicalPlan::Window(window)));
    };
    Ok(Transformed::yes(LogicalPlan::Window(Window::try_new(
        exprs,
        window.input,
    )?)))
}

fn window_keyed(expr: &Expr, schema: &DFSchema) -> Option<Expr> {
    beneath_alias(expr, |expr| match expr {
        Expr::WindowFunction(function) => {
            let params = &function.params;
            let partition_by = all_keyed(&params.partition_by, schema);
            let order = params
                .order_by
                .iter()
                .map(|s| s.expr.clone())
                .collect::<Vec<_>>();
            let order = all_keyed(&order, schema);
            if partition_by.is_none() && order.is_none() {
                return None;
            }
            let mut function = function.clone();
            if let Some(partition_by) = partition_by {
                function.params.partition_by = partition_by;
            }
            if let Some(order) = order {
                for (sort, key) in function.params.order_by.iter_mut().zip(order) {
                    sort.expr = key;
                }
            }
            Some(Expr::WindowFunction(function))
        }
        _ => None,
    })
}

/// `exprs` with each that `rewrite` changes under its former name, or `None` where none
/// changes.
fn renamed_back(exprs: &[Expr], rewrite: impl Fn(&Expr) -> Option<Expr>) -> Option<Vec<Expr>> {
    let names = NamePreserver::new_for_projection();
    let mut changed = false;
    let rewritten = exprs.iter().map(|e| match rewrite(e) {
        Some(new) => {
            changed = true;
            names.save(e).restore(new)
        }
        None => e.clone(),
    });
    let rewritten: Vec<Expr> = rewritten.collect();
    changed.then_some(rewritten)
}

/// `exprs` with each float plus `0.0`, or `None` where that changes none.
fn all_keyed(exprs: &[Expr], schema: &DFSchema) -> Option<Vec<Expr>> {
    let keyed: Vec<Expr> = (exprs.iter())
        .map(|e| positive_zero_key(e, schema).unwrap_or_else(|| e.clone()))
        .collect();
    (keyed != exprs).then_some(keyed)
}

/// `expr` plus `0.0`, where it is a float and not so already.
fn positive_zero_key(expr: &Expr, schema: &DFSchema) -> Option<Expr> {
    beneath_alias(expr, |expr| {
        let key = is_float(expr, schema).then(|| plus_zero(expr, schema))?;
        (key != *expr).then_some(key)
    })
}

/// `rewrite` applied to `expr`, or to what it names where it is an alias.
fn beneath_alias(expr: &Expr, rewrite: impl Fn(&Expr) -> Option<Expr>) -> Option<Expr> {
    match expr {
        Expr::Alias(alias) => Some(Expr::Alias(Alias {
            expr: Box::new(rewrite(&alias.expr)?),
            ..alias.clone()
        })),
        expr => rewrite(expr),
    }
}

/// Whether `expr` is a comparison that [`as_sql_compares`] may change, told before the
/// types are asked (most are a column against a literal, which only a float zero
/// literal makes one).
fn may_be_rewritten(expr: &Expr) -> bool {
    if let Expr::InList(in_list) = expr {
        return in_list.list.iter().any(|e| float_zero(e).is_some());
    }
    let Expr::BinaryExpr(BinaryExpr { left, op, right }) = expr else {
        return false;
    };
    let literal = |e: &Expr| matches!(e, Expr::Literal(..));
    match op {
        Operator::IsDistinctFrom | Operator::IsNotDistinctFrom => true,
        Operator::Eq
        | Operator::NotEq
        | Operator::Lt
        | Operator::LtEq
        | Operator::Gt
        | Operator::GtEq => {
            !(literal(left) || literal(right))
                || float_zero(left).is_some()
                || float_zero(right).is_some()
        }
        _ => false,
    }
}

fn as_sql_compares(expr: Expr, schema: &DFSchema) -> Transformed<Expr> {
    let compared = (compared_as_sql(&expr))
        .or_else(|| zeros_made_positive(&expr, schema))
        .or_else(|| list_of_zeros_made_positive(&expr, schema));
    match compared {
        Some(compared) if compared != expr => Transformed::yes(compared),
        _ => Transformed::no(expr),
    }
}

/// `expr`, a comparison of two float expressions (neither a literal: only a zero can
/// equal a zero) or `IS [NOT] DISTINCT FROM`, with each side plus `0.0`: `-0.0 + 0.0` is
/// `0.0`, and any other value stays as it is (`a.g IS DISTINCT FROM sign(a.g) * -2` was
/// true where `a.g` is 0).
fn zeros_made_positive(expr: &Expr, schema: &DFSchema) -> Option<Expr> {
    let Expr::BinaryExpr(BinaryExpr { left, op, right }) = expr else {
        return None;
    };
    let distinct_from = matches!(op, Operator::IsDistinctFrom | Operator::IsNotDistinctFrom);
    let literal = |e: &Expr| matches!(e, Expr::Literal(..));
    let comparison = matches!(
        op,
        Operator::Eq
            | Operator::NotEq
            | Operator::Lt
            | Operator::LtEq
            | Operator::Gt
            | Operator::GtEq
    );
    let applies = distinct_from || (comparison && !literal(left) && !literal(right));
    if !applies || !is_float(left, schema) || !is_float(right, schema) {
        return None;
    }
    Some(Expr::BinaryExpr(BinaryExpr::new(
        Box::new(plus_zero(left, schema)),
        *op,
        Box::new(plus_zero(right, schema)),
    )))
}

/// `x IN (…, 0.0, …)` of a float `x` as `x + 0.0 IN (…, 0.0, …)`: a list is looked up
/// by its values' bits, where `-0.0` is not `0.0`.
fn list_of_zeros_made_positive(expr: &Expr, schema: &DFSchema) -> Option<Expr> {
    let Expr::InList(in_list) = expr else {
        return None;
    };
    if !is_float(&in_list.expr, schema) || !in_list.list.iter().any(|e| float_zero(e).is_some()) {
        return None;
    }
    let list = (in_list.list.iter())
        .map(|e| float_zero(e).map_or_else(|| e.clone(), |zero| lit(zero.positive)))
        .collect();
    let value = plus_zero(&in_list.expr, schema);
    Some(Expr::InList(InList::new(
        Box::new(value),
        list,
        in_list.negated,
    )))
}

/// `expr + 0.0` of its type (a zero literal: `0.0`), unless a literal or already so.
fn plus_zero(expr: &Expr, schema: &DFSchema) -> Expr {
    let zero = match expr {
        Expr::Literal(..) => return float_zero(expr).map_or(expr.clone(), |z| lit(z.positive)),
        Expr::BinaryExpr(BinaryExpr {
            op: Operator::Plus,
            right,
            ..
        }) if float_zero(right).is_some() => None,
        expr => (expr.get_type(schema).ok()).and_then(|t| ScalarValue::new_zero(&t).ok()),
    };
    match zero {
        Some(zero) => expr.clone() + lit(zero),
        None => expr.clone(),
    }
}

fn is_float(expr: &Expr, schema: &DFSchema) -> bool {
    matches!(
        expr.get_type(schema),
        Ok(DataType::Float64 | DataType::Float32 | DataType::Float16)
    )
}

/// `expr`, a comparison of a float with a zero literal, as Arrow's order answers it.
fn compared_as_sql(expr: &Expr) -> Option<Expr> {
    let Expr::BinaryExpr(BinaryExpr { left, op, right }) = expr else {
        return None;
    };
    let (value, op, zero) = match (float_zero(left), float_zero(right)) {
        (None, Some(zero)) => (left.as_ref().clone(), *op, zero),
        (Some(zero), None) => (right.as_ref().clone(), op.swap()?, zero),
        _ => return None,
    };
    let (negative, positive) = (lit(zero.negative), lit(zero.positive));
    Some(match op {
        Operator::Lt => value.lt(negative),
        Operator::LtEq => value.lt_eq(positive),
        Operator::Gt => value.gt(positive),
        Operator::GtEq => value.gt_eq(negative),
        Operator::Eq => and(value.clone().gt_eq(negative), value.lt_eq(positive)),
        Operator::NotEq => or(value.clone().lt(negative), value.gt(positive)),
        _ => return None,
    })
}

/// `-0.0` and `0.0` of a float literal's type.
struct Zeros {
    negative: ScalarValue,
    positive: ScalarValue,
}

fn float_zero(expr: &Expr) -> Option<Zeros> {
    match expr {
        Expr::Literal(ScalarValue::Float64(Some(v)), _) if *v == 0.0 => Some(Zeros {
            negative: ScalarValue::Float64(Some(-0.0)),
            positive: ScalarValue::Float64(Some(0.0)),
        }),
        Expr::Literal(ScalarValue::Float32(Some(v)), _) if *v == 0.0 => Some(Zeros {
            negative: ScalarValue::Float32(Some(-0.0)),
            positive: ScalarValue::Float32(Some(0.0)),
        }),
        _ => None,
    }
}
