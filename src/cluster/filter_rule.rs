//! The shape of Floe's physical optimizer rules that rewrite filters one at a time.

use std::sync::Arc;

use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::config::ConfigOptions;
use datafusion::error::Result;
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::filter::FilterExec;

/// A new filter in place of `filter`, or `None` where it stays.
pub(super) type FilterRewrite = fn(&FilterExec) -> Result<Option<FilterExec>>;

/// A physical optimizer rule that replaces, bottom up, each filter for which its
/// `rewrite` gives a new one.
#[derive(Debug)]
pub(super) struct FilterRule {
    pub(super) name: &'static str,
    pub(super) rewrite: FilterRewrite,
}

impl PhysicalOptimizerRule for FilterRule {
    fn optimize(
        &self,
        plan: Arc<dyn ExecutionPlan>,
        _: &ConfigOptions,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        plan.transform_up(|node| {
            let rewritten = match node.as_any().downcast_ref::<FilterExec>() {
                Some(filter) => (self.rewrite)(filter)?,
                None => None,
            };
            Ok(match rewritten {
                Some(filter) => Transformed::yes(Arc::new(filter) as Arc<dyn ExecutionPlan>),
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
