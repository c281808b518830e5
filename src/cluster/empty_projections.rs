//! Plans that read no column at all (`SELECT count(*) FROM a JOIN b ON …`, a filter under
//! a `count(*)`) have filters and joins with an empty `projection`: rows without columns.
//! datafusion-proto 53 encodes the projection as a list and decodes an empty list as *no*
//! projection (all columns), so on an executor such a node emitted every column where
//! its plan said none: a stage failed ("Batch has 1 columns but BatchCoalescer expects
//! 0") or answered a count of 0. [`ONE_COLUMN_FOR_EMPTY_PROJECTIONS`] gives each such
//! node a projection of one column, dropped right above it by a projection of no
//! columns (which survives the trip: it lists expressions, not indices).

use std::sync::Arc;

use datafusion::error::Result;
use datafusion::physical_expr::projection::ProjectionRef;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::filter::{FilterExec, FilterExecBuilder};
use datafusion::physical_plan::joins::{
    HashJoinExec, NestedLoopJoinExec, NestedLoopJoinExecBuilder,
};
use datafusion::physical_plan::projection::{ProjectionExec, ProjectionExpr};

use super::node_rule::NodeRule;

/// See the module documentation.
pub(super) const ONE_COLUMN_FOR_EMPTY_PROJECTIONS: NodeRule = NodeRule {
    name: "floe_one_column_for_empty_projections",
    rewrite: one_column_then_none,
};

/// `node` keeping its first column under a projection of none, if it is a filter or a
/// join that keeps no column (and has a column to keep: else it stays).
fn one_column_then_none(node: &Arc<dyn ExecutionPlan>) -> Result<Option<Arc<dyn ExecutionPlan>>> {
    let Some(Ok(kept)) = with_first_column(node) else {
        return Ok(None);
    };
    let none: Vec<ProjectionExpr> = Vec::new();
    Ok(Some(Arc::new(ProjectionExec::try_new(none, kept)?)))
}

/// The filter or join `node` projecting its first column, if it projects none.
fn with_first_column(node: &Arc<dyn ExecutionPlan>) -> Option<Result<Arc<dyn ExecutionPlan>>> {
    let keeps_none =
        |projection: &Option<ProjectionRef>| projection.as_ref().is_some_and(|p| p.is_empty());
    let first = Some(vec![0]);
    let any = node.as_any();
    if let Some(filter) = any.downcast_ref::<FilterExec>() {
        // A builder from the filter would combine the projection with its empty one.
        return keeps_none(filter.projection()).then(|| {
            let kept = FilterExecBuilder::new(filter.predicate().clone(), filter.input().clone())
                .with_default_selectivity(filter.default_selectivity())
                .with_fetch(filter.fetch())
                .apply_projection(first)?
                .build()?;
            Ok(Arc::new(kept) as _)
        });
    }
    if let Some(join) = any.downcast_ref::<HashJoinExec>() {
        return keeps_none(&join.projection)
            .then(|| Ok(Arc::new(join.builder().with_projection(first).build()?) as _));
    }
    if let Some(join) = any.downcast_ref::<NestedLoopJoinExec>() {
        return keeps_none(join.projection()).then(|| {
            let kept = NestedLoopJoinExecBuilder::from(join)
                .with_projection(first)
                .build()?;
            Ok(Arc::new(kept) as _)
        });
    }
    None
}
