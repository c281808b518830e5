//! Filters moved below projections whose columns repeat a name, by position.
//!
//! DataFusion 53's filter pushdown maps a filter's columns through a projection by name
//! (apache/datafusion#21246), so over a projection that outputs two columns `s` it
//! took the first for both. Such projections come from a join whose sides were swapped
//! (the projection restores the columns' order: `k, s, k, s`): in `… FULL JOIN u b ON
//! a.k = b.k WHERE a.s LIKE 's1%' AND b.s IS NOT NULL` the condition on `a.s` was
//! applied to `b.s`. Before each filter pushdown, a filter over such a projection is
//! moved below it here, its columns replaced by the projected expressions at their
//! positions. (Where the join keys differ in type the swapped join orders its columns
//! in its own projection, and the condition still reaches the wrong side: not yet
//! traced.)

use std::sync::Arc;

use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::error::Result;
use datafusion::physical_expr::expressions::Column;
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::filter::FilterExec;
use datafusion::physical_plan::projection::{ProjectionExec, ProjectionExpr};

use super::node_rule::NodeRule;

/// `rules` with [`FILTERS_BELOW_REPEATED_NAMES`] before each filter pushdown.
pub fn with_filters_below_repeated_names(
    rules: Vec<Arc<dyn PhysicalOptimizerRule + Send + Sync>>,
) -> Vec<Arc<dyn PhysicalOptimizerRule + Send + Sync>> {
    let mut with = Vec::with_capacity(rules.len() + 2);
    for rule in rules {
        if rule.name().starts_with("FilterPushdown") {
            with.push(Arc::new(FILTERS_BELOW_REPEATED_NAMES) as _);
        }
        with.push(rule);
    }
    with
}

const FILTERS_BELOW_REPEATED_NAMES: NodeRule = NodeRule {
    name: "floe_filters_below_repeated_names",
    rewrite: below_projection,
};

fn below_projection(node: &Arc<dyn ExecutionPlan>) -> Result<Option<Arc<dyn ExecutionPlan>>> {
    let Some(filter) = node.as_any().downcast_ref::<FilterExec>() else {
        return Ok(None);
    };
    let Some(projection) = filter.input().as_any().downcast_ref::<ProjectionExec>() else {
        return Ok(None);
    };
    let exprs = projection.expr();
    if !repeats_a_name(exprs) {
        return Ok(None);
    }
    let predicate = Arc::clone(filter.predicate()).transform_down(|e| {
        Ok(match e.as_any().downcast_ref::<Column>() {
            Some(column) => Transformed::yes(Arc::clone(&exprs[column.index()].expr)),
            None => Transformed::no(e),
        })
    })?;
    let below = FilterExec::try_new(predicate.data, Arc::clone(projection.input()))?
        .with_default_selectivity(filter.default_selectivity())?;
    // The filter's own projection, if any, picks among the projection's columns.
    let kept: Vec<ProjectionExpr> = match filter.projection() {
        Some(indices) => indices.iter().map(|&i| exprs[i].clone()).collect(),
        None => exprs.to_vec(),
    };
    Ok(Some(Arc::new(ProjectionExec::try_new(
        kept,
        Arc::new(below),
    )?)))
}

fn repeats_a_name(exprs: &[ProjectionExpr]) -> bool {
    exprs
        .iter()
        .enumerate()
        .any(|(i, e)| exprs[..i].iter().any(|other| other.alias == e.alias))
}
