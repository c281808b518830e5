//! Filters' row estimates for join planning, from the bounds their inputs' statistics
//! give (see [`crate::table::selectivity`]).
//!
//! DataFusion takes 20% of a filter's input rows for any filter its interval arithmetic
//! cannot cover, which is any filter on a date, a decimal or a string. In TPC-H q12
//! lineitem's 6 M rows filtered to one year of receipt dates and two ship modes (31,000
//! rows) were taken as 1.2 M, so orders was shuffled to join them instead of the few
//! lineitem rows being broadcast. This rule, run before DataFusion's join selection, gives
//! each such filter its own estimate as the filter's default selectivity: what the
//! bounds tell (ranges of dates, decimals, numbers), times DataFusion's 20% for each
//! condition they cannot tell (an equality on a string, a `LIKE`; an `IN` list 20% per
//! value), those guesses together no less than 5%.

use datafusion::error::Result;
use datafusion::physical_expr::intervals::utils::check_support;
use datafusion::physical_plan::filter::{FilterExec, FilterExecBuilder};

use super::node_rule::{NodeRule, on_filter};
use crate::table::selectivity::estimated_selectivity;

/// Sets the default selectivity of each filter DataFusion cannot estimate itself.
pub(super) const FILTER_ESTIMATES: NodeRule = NodeRule {
    name: "floe_filter_estimates",
    rewrite: |node| on_filter(node, with_estimate),
};

fn with_estimate(filter: &FilterExec) -> Result<Option<FilterExec>> {
    match estimated_percent(filter)? {
        Some(percent) if percent != filter.default_selectivity() => Ok(Some(
            FilterExecBuilder::from(filter)
                .with_default_selectivity(percent)
                .build()?,
        )),
        _ => Ok(None),
    }
}

/// `filter`'s estimated share of its input's rows in whole percent (at least 1), where
/// DataFusion would fall back to its default.
fn estimated_percent(filter: &FilterExec) -> Result<Option<u8>> {
    let input = filter.input();
    let schema = input.schema();
    if check_support(filter.predicate(), &schema) {
        return Ok(None);
    }
    let statistics = input.partition_statistics(None)?;
    let share = estimated_selectivity(filter.predicate(), &schema, &statistics.column_statistics);
    Ok(Some((share * 100.0).round().clamp(1.0, 100.0) as u8))
}
