//! Interval arithmetic as SQL means it, where DataFusion 53 differs:
//! - `n * INTERVAL '1 day'` (and `INTERVAL … * n`) fails to plan in DataFusion; it is
//!   written as `floe_interval_times(INTERVAL …, n)` (see `cluster::interval_times`).
//! - a date plus or minus an interval with a time part (`d + INTERVAL '36 hours'`) kept
//!   the date type and dropped the hours; the date is taken as a timestamp first, so the
//!   answer is a timestamp, as in PostgreSQL, DuckDB and Spark. Whole days, months and
//!   years still give a date.

use std::ops::ControlFlow;

use datafusion::arrow::datatypes::{DataType, TimeUnit};
use datafusion::common::tree_node::Transformed;
use datafusion::common::{DFSchema, ScalarValue};
use datafusion::logical_expr::{BinaryExpr, Expr, ExprSchemable, LogicalPlan, Operator, cast};
use datafusion::sql::parser::Statement;
use datafusion::sql::sqlparser::ast::{self, BinaryOperator, Value, visit_expressions_mut};

use super::expr_rewrite::rewrite_typed_keeping_names;
use super::parse::{function_call, sql_statement_mut};
use crate::cluster::interval_times;
use crate::error::Result;

/// Writes each product of an interval literal and a number as a call of
/// `floe_interval_times`.
pub(super) fn interval_products_as_calls(statement: &mut Statement) {
    let Some(statement) = sql_statement_mut(statement) else {
        return;
    };
    let _ = visit_expressions_mut(statement, |expr| {
        if let ast::Expr::BinaryOp {
            left,
            op: BinaryOperator::Multiply,
            right,
        } = expr
        {
            let operands = match (is_interval(left), is_interval(right)) {
                (true, _) => Some((take(left), take(right))),
                (false, true) => Some((take(right), take(left))),
                _ => None,
            };
            if let Some((interval, factor)) = operands {
                *expr = function_call(interval_times::NAME, vec![interval, factor]);
            }
        }
        ControlFlow::<()>::Continue(())
    });
}

fn is_interval(expr: &ast::Expr) -> bool {
    match expr {
        ast::Expr::Interval(_) => true,
        ast::Expr::Nested(inner) => is_interval(inner),
        _ => false,
    }
}

fn take(expr: &mut ast::Expr) -> ast::Expr {
    std::mem::replace(expr, ast::Expr::value(Value::Null))
}

/// `plan` with each date that is added to or less an interval with a time part taken
/// as a timestamp.
pub(super) fn dates_with_times_as_timestamps(plan: LogicalPlan) -> Result<LogicalPlan> {
    rewrite_typed_keeping_names(plan, |e, schema| {
        Ok(match e {
            Expr::BinaryExpr(BinaryExpr { left, op, right })
                if matches!(op, Operator::Plus | Operator::Minus) =>
            {
                let date_left = is_date(&left, schema) && has_time(&right, schema);
                let date_right =
                    op == Operator::Plus && is_date(&right, schema) && has_time(&left, schema);
                let timestamp = |date: Box<Expr>| {
                    Box::new(cast(
                        *date,
                        DataType::Timestamp(TimeUnit::Microsecond, None),
                    ))
                };
                match (date_left, date_right) {
                    (true, _) => Transformed::yes(Expr::BinaryExpr(BinaryExpr {
                        left: timestamp(left),
                        op,
                        right,
                    })),
                    (false, true) => Transformed::yes(Expr::BinaryExpr(BinaryExpr {
                        left,
                        op,
                        right: timestamp(right),
                    })),
                    _ => Transformed::no(Expr::BinaryExpr(BinaryExpr { left, op, right })),
                }
            }
            other => Transformed::no(other),
        })
    })
}

fn is_date(expr: &Expr, schema: &DFSchema) -> bool {
    matches!(
        expr.get_type(schema),
        Ok(DataType::Date32 | DataType::Date64)
    )
}

/// Whether `expr` is an interval that may hold a part smaller than a day: any but a
/// literal of whole days, months or years.
fn has_time(expr: &Expr, schema: &DFSchema) -> bool {
    match expr {
        Expr::Literal(ScalarValue::IntervalMonthDayNano(v), _) => {
            v.is_some_and(|v| v.nanoseconds != 0)
        }
        Expr::Literal(ScalarValue::IntervalDayTime(v), _) => v.is_some_and(|v| v.milliseconds != 0),
        Expr::Literal(ScalarValue::IntervalYearMonth(_), _) => false,
        _ => matches!(expr.get_type(schema), Ok(DataType::Interval(_))),
    }
}
