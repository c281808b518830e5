//! The shape of Floe's physical optimizer rules that rewrite plan nodes one at a time.

use std::sync::Arc;

use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::config::ConfigOptions;
use datafusion::error::Result;
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::filter::FilterExec;

/// A new node in place of `node`, or `None` where it stays.
pub(super) type NodeRewrite = fn(&Arc<dyn ExecutionPlan>) -> Result<Option<Arc<dyn ExecutionPlan>>>;

/// A physical optimizer rule that replaces, bottom up, each node for which its `rewrite`
/// gives a new one.
#[derive(Debug)]
pub(super) struct NodeRule {
    pub(super) name: &'static str,
    pub(super) rewrite: NodeRewrite,
}

impl PhysicalOptimizerRule for NodeRule {
    fn optimize(
        &self,
        plan: Arc<dyn ExecutionPlan>,
        _: &ConfigOptions,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        plan.transform_up(|node| {
            Ok(match (self.rewrite)(&node)? {
                Some(rewritten) => Transformed::yes(rewritten),
                None => Transformed::no(node),
            })
        })
        .map(|t| t.data)
    }

    fn name(&self) -> &str {
        self.name
    }

    fn schema_check(&self) -> bool {
        true
    }
}

/// `rewrite` applied to `node` if it is a filter: how a [`NodeRule`] on filters reads.
pub(super) fn on_filter(
    node: &Arc<dyn ExecutionPlan>,
    rewrite: fn(&FilterExec) -> Result<Option<FilterExec>>,
) -> Result<Option<Arc<dyn ExecutionPlan>>> {
    let Some(filter) = node.as_any().downcast_ref::<FilterExec>() else {
        return Ok(None);
    };
    Ok(rewrite(filter)?.map(|filter| Arc::new(filter) as _))
}
