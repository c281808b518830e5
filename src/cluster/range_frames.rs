//! A `RANGE` frame with an offset over a decimal order (`sum(v) OVER (ORDER BY price
//! RANGE BETWEEN 10 PRECEDING AND CURRENT ROW)`) as SQL answers it. DataFusion 53 finds
//! the frame's ends by adding the offset to each row's value, which gives a decimal one
//! digit wider than the column's, and then fails comparing the two ("Uncomparable
//! values: Decimal128(Some(-245),10,2), Decimal128(Some(-295),11,2)", as `INTERNAL`).
//! Ordered by the value as a decimal of the widest precision (and the same scale), the
//! value plus the offset keeps that precision; the order is the same.
//!
//! The analyzer rule runs before DataFusion's type coercion, which then gives the offset
//! the widened type too.

use datafusion::arrow::datatypes::{DECIMAL128_MAX_PRECISION, DataType};
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TreeNode, TreeNodeRecursion};
use datafusion::common::{DFSchema, Result, ScalarValue, plan_err};
use datafusion::logical_expr::expr::WindowFunction;
use datafusion::logical_expr::{
    Cast, Expr, ExprSchemable, LogicalPlan, WindowFrameBound, WindowFrameUnits,
};
use datafusion::optimizer::AnalyzerRule;

use super::expression_rule;

#[derive(Debug)]
pub(super) struct DecimalRangeFrames;

impl AnalyzerRule for DecimalRangeFrames {
    fn name(&self) -> &str {
        "floe_decimal_range_frames"
    }

    fn analyze(&self, plan: LogicalPlan, _config: &ConfigOptions) -> Result<LogicalPlan> {
        refuse_offsets_over_other_orders(&plan)?;
        let is_window = |e: &Expr| matches!(e, Expr::WindowFunction(_));
        Ok(expression_rule::rewrite_expressions(plan, is_window, widened_order)?.data)
    }
}

/// An error where a `RANGE` frame with an offset is ordered by something an offset cannot
/// be added to (a string): DataFusion accepted it and failed as the job ran ("Invalid
/// arithmetic operation: Utf8 - Utf8", as `INTERNAL`); PostgreSQL refuses it.
fn refuse_offsets_over_other_orders(plan: &LogicalPlan) -> Result<()> {
    plan.apply_with_subqueries(|node| {
        let LogicalPlan::Window(window) = node else {
            return Ok(TreeNodeRecursion::Continue);
        };
        let schema = window.input.schema();
        for expr in &window.window_expr {
            expr.apply(|e| {
                // An order whose type is not known yet is left to DataFusion.
                if let Expr::WindowFunction(function) = e
                    && let Some(order) = offset_order(function)
                    && let Ok(order_type) = order.get_type(schema)
                {
                    let offsets_apply = order_type.is_numeric()
                        || order_type.is_temporal()
                        || matches!(order_type, DataType::Interval(_) | DataType::Null);
                    if !offsets_apply {
                        return plan_err!(
                            "RANGE with an offset PRECEDING or FOLLOWING needs an ORDER BY \
                             of a number, date or time, not {order_type}"
                        );
                    }
                }
                Ok(TreeNodeRecursion::Continue)
            })?;
        }
        Ok(TreeNodeRecursion::Continue)
    })?;
    Ok(())
}

/// The one ordering expression of `window`, where its frame is `RANGE` with an offset.
fn offset_order(window: &WindowFunction) -> Option<&Expr> {
    let frame = &window.params.window_frame;
    let has_offset = |bound: &WindowFrameBound| match bound {
        WindowFrameBound::Preceding(v) | WindowFrameBound::Following(v) => !v.is_null(),
        WindowFrameBound::CurrentRow => false,
    };
    if frame.units != WindowFrameUnits::Range
        || !(has_offset(&frame.start_bound) || has_offset(&frame.end_bound))
    {
        return None;
    }
    match window.params.order_by.as_slice() {
        [order] => Some(&order.expr),
        _ => None,
    }
}

/// `expr`, a window function with a `RANGE` frame that has an offset and is ordered by
/// one decimal narrower than the widest, ordered by that value widened.
fn widened_order(expr: Expr, schema: &DFSchema) -> Transformed<Expr> {
    let Expr::WindowFunction(mut window) = expr else {
        return Transformed::no(expr);
    };
    match widened_type(&window, schema) {
        Some(widened) => {
            let order = &mut window.params.order_by[0].expr;
            let value = std::mem::replace(order, Expr::Literal(ScalarValue::Null, None));
            *order = Expr::Cast(Cast::new(Box::new(value), widened));
            Transformed::yes(Expr::WindowFunction(window))
        }
        None => Transformed::no(Expr::WindowFunction(window)),
    }
}

fn widened_type(window: &WindowFunction, schema: &DFSchema) -> Option<DataType> {
    match offset_order(window)?.get_type(schema).ok()? {
        DataType::Decimal128(precision, scale) if precision < DECIMAL128_MAX_PRECISION => {
            Some(DataType::Decimal128(DECIMAL128_MAX_PRECISION, scale))
        }
        _ => None,
    }
}
