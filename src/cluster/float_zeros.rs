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
//! side, which makes a `-0.0` `0.0` and leaves any other value as it is. Grouping, joins
//! and `DISTINCT` still take `-0.0` and `0.0` for two values.

use datafusion::arrow::datatypes::DataType;
use datafusion::common::tree_node::Transformed;
use datafusion::common::{DFSchema, Result, ScalarValue};
use datafusion::logical_expr::{
    BinaryExpr, Expr, ExprSchemable, LogicalPlan, Operator, and, lit, or,
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
        expression_rule::rewrite_expressions(plan, may_be_rewritten, as_sql_compares)
    }
}

/// Whether `expr` is a comparison that [`as_sql_compares`] may change, told before the
/// types are asked (most are a column against a literal, which only a float zero
/// literal makes one).
fn may_be_rewritten(expr: &Expr) -> bool {
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
    match compared_as_sql(&expr).or_else(|| zeros_made_positive(&expr, schema)) {
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
