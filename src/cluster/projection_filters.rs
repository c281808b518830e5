//! Filters moved below projections whose columns repeat a name, by position.
//!
//! DataFusion 53's filter pushdown maps a filter's columns through a projection by name
//! (apache/datafusion#21246), so over a projection that outputs two columns `s` it
//! took the first for both. Such projections come from a join whose sides were swapped
//! (the projection restores the columns' order: `k, s, k, s`): in `… FULL JOIN u b ON
//! a.k = b.k WHERE a.s LIKE 's1%' AND b.s IS NOT NULL` the condition on `a.s` was
//! applied to `b.s`. Before each filter pushdown, a filter over such a projection is
//! moved below it here, each of its columns replaced by the column projected at its
//! position, through as many such projections as lie under it (where the join keys
//! differ in type, another drops the cast key above the swapped join's).

use std::sync::Arc;

use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::error::Result;
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_expr::expressions::Column;
use datafusion::physical_expr::utils::collect_columns;
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
    if !repeats_a_name(exprs) || !reads_only_columns(filter.predicate(), exprs) {
        return Ok(None);
    }
    let predicate = Arc::clone(filter.predicate()).transform(|e| {
        Ok(match e.as_any().downcast_ref::<Column>() {
            Some(column) => Transformed::yes(Arc::clone(&exprs[column.index()].expr)),
            None => Transformed::no(e),
        })
    })?;
    let below: Arc<dyn ExecutionPlan> = Arc::new(
        FilterExec::try_new(predicate.data, Arc::clone(projection.input()))?
            .with_default_selectivity(filter.default_selectivity())?,
    );
    // A swapped join's projection may lie under another that repeats names too.
    let below = below_projection(&below)?.unwrap_or(below);
    // The filter's own projection, if any, picks among the projection's columns.
    let kept: Vec<ProjectionExpr> = match filter.projection() {
        Some(indices) => indices.iter().map(|&i| exprs[i].clone()).collect(),
        None => exprs.to_vec(),
    };
    Ok(Some(Arc::new(ProjectionExec::try_new(kept, below)?)))
}

/// Whether each of `exprs` that `predicate` reads is a column: then moving the filter
/// computes nothing twice, and nothing volatile differently.
fn reads_only_columns(predicate: &Arc<dyn PhysicalExpr>, exprs: &[ProjectionExpr]) -> bool {
    collect_columns(predicate).iter().all(|c| {
        exprs
            .get(c.index())
            .is_some_and(|e| e.expr.as_any().is::<Column>())
    })
}

fn repeats_a_name(exprs: &[ProjectionExpr]) -> bool {
    exprs
        .iter()
        .enumerate()
        .any(|(i, e)| exprs[..i].iter().any(|other| other.alias == e.alias))
}
