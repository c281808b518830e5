//! Windows whose input is in order only where a stage's input cannot know it.
//!
//! In `SELECT k, sum(g) OVER (PARTITION BY k ORDER BY k) FROM t WHERE k IN (54)` every
//! row has one `k`, so DataFusion 53 needs no sort for the window. Ballista then cuts the
//! plan below the window into stages, and a stage's input knows no constant: the window,
//! built again on an executor, failed ("Expects PARTITION BY expression to be ordered",
//! or an assertion for a window without `ORDER BY`). Such a window gets the sort it
//! requires (of constant values, so cheap), which goes with it to the executors.
//!
//! Likewise a window over a repartition of one ordered partition (`max(s) OVER (PARTITION
//! BY g ORDER BY g)` above `ntile(4) OVER (ORDER BY g, k)`): each output partition keeps
//! its input's order, but the repartition becomes a shuffle, whose reader declares no
//! order, and the executors refused the window the same way.

use std::sync::Arc;

use datafusion::error::Result;
use datafusion::physical_expr::{EquivalenceProperties, LexOrdering};
use datafusion::physical_plan::repartition::RepartitionExec;
use datafusion::physical_plan::sorts::sort::SortExec;
use datafusion::physical_plan::windows::{BoundedWindowAggExec, WindowAggExec};
use datafusion::physical_plan::{ExecutionPlan, ExecutionPlanProperties};

use super::node_rule::NodeRule;

/// Sorts the input of each window that is in order only by its constants.
pub(super) const WINDOW_SORTS: NodeRule = NodeRule {
    name: "floe_window_sorts",
    rewrite: with_sorted_input,
};

fn with_sorted_input(node: &Arc<dyn ExecutionPlan>) -> Result<Option<Arc<dyn ExecutionPlan>>> {
    let is_window =
        node.as_any().is::<BoundedWindowAggExec>() || node.as_any().is::<WindowAggExec>();
    let (children, requirements) = (node.children(), node.required_input_ordering());
    let (true, [input], [Some(required)]) =
        (is_window, children.as_slice(), requirements.as_slice())
    else {
        return Ok(None);
    };
    let required = required.clone().into_single();
    let stage_input_ordering = if input.as_any().is::<RepartitionExec>() {
        None
    } else {
        input.output_ordering().cloned()
    };
    let sorted_without_constants =
        EquivalenceProperties::new_with_orderings(input.schema(), stage_input_ordering);
    if sorted_without_constants.ordering_satisfy_requirement(required.clone())? {
        return Ok(None);
    }
    let Some(ordering) = LexOrdering::new(LexOrdering::from(required)) else {
        return Ok(None);
    };
    let sorted = SortExec::new(ordering, Arc::clone(input)).with_preserve_partitioning(true);
    Arc::clone(node)
        .with_new_children(vec![Arc::new(sorted)])
        .map(Some)
}
