//! Comparisons of a float with zero as SQL makes them: `-0.0` equals `0`. Arrow orders
//! floats totally, `-0.0` below `0.0`, so `WHERE x * y < 0` kept the rows where the
//! product is `-0.0` (a negative `x` times a zero `y`; `ceil(-0.5)`), and `= 0` dropped
//! them: 65 rows where PostgreSQL answers 58.
//!
//! A comparison with a float zero literal becomes one Arrow's order answers as SQL does
//! (`x < 0` is `x < -0.0`, `x >= 0` is `x >= -0.0`, `x = 0` is `x >= -0.0 AND x <= 0.0`),
//! still a column against a literal, so files and row groups are pruned as before. It runs
//! after DataFusion's optimizer, whose simplifier would fold the zeros back. A comparison
//! of two float expressions that are both zeros of different signs is left as Arrow
//! answers it.

use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::common::{Result, ScalarValue};
use datafusion::logical_expr::{BinaryExpr, Expr, LogicalPlan, Operator, and, lit, or};
use datafusion::optimizer::{OptimizerConfig, OptimizerRule};

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
        plan.transform_up_with_subqueries(|node| {
            node.map_expressions(|expr| expr.transform_up(|e| Ok(as_sql_compares(e))))
        })
    }
}

fn as_sql_compares(expr: Expr) -> Transformed<Expr> {
    match compared_as_sql(&expr) {
        Some(compared) if compared != expr => Transformed::yes(compared),
        _ => Transformed::no(expr),
    }
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
