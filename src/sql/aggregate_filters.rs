//! Aggregate filters, `agg(…) FILTER (WHERE p)`, in forms that reach the rows right.
//!
//! * Of an aggregate, `FILTER (WHERE p IS TRUE)`: the same rows, and never NULL.
//!   DataFusion 53 reads a filter's values without its validity where the aggregated
//!   values have no NULLs (`accumulate_indices`, which `count(*)` takes), so a row whose
//!   condition is unknown was counted or not by whatever value lay under the NULL:
//!   `count(*) FILTER (WHERE x > 100)` over rows with NULL `x` answered 353 where
//!   PostgreSQL answers 326.
//! * Of an aggregate over a window, the condition moves into the arguments: `sum(x)
//!   FILTER (WHERE p) OVER (…)` is `sum(CASE WHEN p THEN x END) OVER (…)`, for the
//!   aggregates that skip NULLs ([`SKIPS_NULLS`]). datafusion-proto 53 does not carry a
//!   window expression's filter, so executors ran those aggregates over every row. A
//!   filter on any other window function is refused.
//!
//! The aggregates keep their names.

use datafusion::common::tree_node::Transformed;
use datafusion::logical_expr::expr::WindowFunction;
use datafusion::logical_expr::{Expr, LogicalPlan, WindowFunctionDefinition, when};

use super::expr_rewrite::rewrite_keeping_names;
use crate::error::{FloeError, Result};

/// Aggregates whose value over some rows with NULL arguments is their value over the
/// others.
const SKIPS_NULLS: &[&str] = &[
    "count",
    "sum",
    "avg",
    "min",
    "max",
    "median",
    "stddev",
    "stddev_pop",
    "var",
    "var_pop",
    "var_samp",
    "bool_and",
    "bool_or",
    "bit_and",
    "bit_or",
    "bit_xor",
    "corr",
    "covar_samp",
    "covar_pop",
];

/// `plan` with its aggregate filters in the forms of the module documentation.
pub(super) fn rewrite_filters(plan: LogicalPlan) -> Result<LogicalPlan> {
    rewrite_keeping_names(plan, rewrite)
}

fn rewrite(expr: Expr) -> Result<Transformed<Expr>> {
    match expr {
        Expr::AggregateFunction(mut aggregate) => match aggregate.params.filter.take() {
            Some(condition) if !matches!(*condition, Expr::IsTrue(_)) => {
                aggregate.params.filter = Some(Box::new(Expr::IsTrue(condition)));
                Ok(Transformed::yes(Expr::AggregateFunction(aggregate)))
            }
            unchanged => {
                aggregate.params.filter = unchanged;
                Ok(Transformed::no(Expr::AggregateFunction(aggregate)))
            }
        },
        Expr::WindowFunction(window) if window.params.filter.is_some() => {
            Ok(Transformed::yes(Expr::from(filter_in_arguments(*window)?)))
        }
        other => Ok(Transformed::no(other)),
    }
}

/// `window`'s filter moved into its arguments.
fn filter_in_arguments(mut window: WindowFunction) -> Result<WindowFunction> {
    let name = window.fun.name().to_string();
    let skips_nulls = matches!(window.fun, WindowFunctionDefinition::AggregateUDF(_))
        && SKIPS_NULLS.contains(&name.as_str());
    let Some(condition) = window.params.filter.take().filter(|_| skips_nulls) else {
        return Err(FloeError::unimplemented(format!(
            "FILTER on the window function {name}: only on aggregates that skip NULLs ({})",
            SKIPS_NULLS.join(", ")
        )));
    };
    window.params.args = window
        .params
        .args
        .into_iter()
        .map(|arg| when(condition.as_ref().clone(), arg).end())
        .collect::<datafusion::error::Result<_>>()?;
    Ok(window)
}
