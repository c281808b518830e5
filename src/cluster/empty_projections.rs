//! Plans that read no column at all (`SELECT count(*) FROM a JOIN b ON …`, a filter under
//! a `count(*)`) have filters and joins with an empty `projection`: rows without columns.
//! datafusion-proto 53 encodes the projection as a list and decodes an empty list as *no*
//! projection (all columns), so on an executor such a node emitted every column where
//! its plan said none: a stage failed ("Batch has 1 columns but BatchCoalescer expects
//! 0") or answered a count of 0. [`ONE_COLUMN_FOR_EMPTY_PROJECTIONS`] gives each such
//! node a projection of one column, dropped right above it by a projection of no
//! columns (which survives the trip: it lists expressions, not indices).

use std::sync::Arc;

use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::config::ConfigOptions;
use datafusion::error::Result;
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::filter::{FilterExec, FilterExecBuilder};
use datafusion::physical_plan::joins::{
    HashJoinExec, NestedLoopJoinExec, NestedLoopJoinExecBuilder,
};
use datafusion::physical_plan::projection::{ProjectionExec, ProjectionExpr};

/// See the module documentation.
pub(super) const ONE_COLUMN_FOR_EMPTY_PROJECTIONS: OneColumnForEmptyProjections =
    OneColumnForEmptyProjections;

#[derive(Debug)]
pub(super) struct OneColumnForEmptyProjections;

impl PhysicalOptimizerRule for OneColumnForEmptyProjections {
    fn optimize(
        &self,
        plan: Arc<dyn ExecutionPlan>,
        _: &ConfigOptions,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let rewritten = plan.transform_up(|node| {
            Ok(match with_one_column(&node) {
                Some(projected) => {
                    let none: Vec<ProjectionExpr> = Vec::new();
                    Transformed::yes(Arc::new(ProjectionExec::try_new(none, projected)?) as _)
                }
                None => Transformed::no(node),
            })
        })?;
        Ok(rewritten.data)
    }

    fn name(&self) -> &str {
        "floe_one_column_for_empty_projections"
    }

    fn schema_check(&self) -> bool {
        true
    }
}

/// `node` projecting its first column instead of none, if it is a filter or join with an
/// empty projection (and has a column to keep).
fn with_one_column(node: &Arc<dyn ExecutionPlan>) -> Option<Arc<dyn ExecutionPlan>> {
    let first = Some(vec![0]);
    let any = node.as_any();
    if let Some(filter) = any.downcast_ref::<FilterExec>() {
        let empty = filter.projection().as_ref().is_some_and(|p| p.is_empty());
        // A builder from the filter would combine the projection with its empty one.
        let kept = FilterExecBuilder::new(filter.predicate().clone(), filter.input().clone())
            .with_default_selectivity(filter.default_selectivity())
            .with_fetch(filter.fetch())
            .apply_projection(first)
            .and_then(FilterExecBuilder::build);
        return empty.then(|| kept.ok()).flatten().map(|f| Arc::new(f) as _);
    }
    if let Some(join) = any.downcast_ref::<HashJoinExec>() {
        let empty = join.projection.as_ref().is_some_and(|p| p.is_empty());
        let kept = join.builder().with_projection(first).build().ok()?;
        return empty.then(|| Arc::new(kept) as _);
    }
    if let Some(join) = any.downcast_ref::<NestedLoopJoinExec>() {
        let empty = join.projection().as_ref().is_some_and(|p| p.is_empty());
        let kept = NestedLoopJoinExecBuilder::from(join)
            .with_projection(first)
            .build()
            .ok()?;
        return empty.then(|| Arc::new(kept) as _);
    }
    None
}
