//! DataFusion answers `count(*)`, `min` and `max` from exact statistics instead of running
//! the aggregate (its `AggregateStatistics` rule). But DataFusion 53's statistics can claim
//! exactness they do not have: `Statistics::with_fetch`, which every join, limit and
//! `CoalescePartitionsExec` applies to its statistics, turns an *estimate* of no row into
//! `Exact(0)`; and estimates of no row are common (an inner join's estimate divides the
//! product of its sides' rows by the keys' distinct values, in integers: 20 x 20 / 470 is
//! 0). A `count(*)` over such a join answered 0 without reading a row.
//!
//! [`STATISTICS_ANSWERS`] takes that rule's place and lets it answer an aggregate only
//! where every node under the aggregate passes its input's statistics on as they are, or
//! exact where they truly are: scans, projections, nodes that only move rows between
//! partitions, unions and limits. Anything else (joins, filters, inner aggregates) is run.

use std::sync::Arc;

use datafusion::common::tree_node::{Transformed, TreeNode, TreeNodeRecursion};
use datafusion::config::ConfigOptions;
use datafusion::datasource::source::DataSourceExec;
use datafusion::error::Result;
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::physical_optimizer::aggregate_statistics::AggregateStatistics;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::aggregates::{AggregateExec, AggregateInputMode};
use datafusion::physical_plan::coalesce_partitions::CoalescePartitionsExec;
use datafusion::physical_plan::coop::CooperativeExec;
use datafusion::physical_plan::empty::EmptyExec;
use datafusion::physical_plan::limit::{GlobalLimitExec, LocalLimitExec};
use datafusion::physical_plan::placeholder_row::PlaceholderRowExec;
use datafusion::physical_plan::projection::ProjectionExec;
use datafusion::physical_plan::repartition::RepartitionExec;
use datafusion::physical_plan::union::UnionExec;

use crate::table::scan::IcebergScanExec;
use crate::table::staged_scan::StagedScanExec;

/// See the module documentation.
pub(super) const STATISTICS_ANSWERS: StatisticsAnswers = StatisticsAnswers;

#[derive(Debug)]
pub(super) struct StatisticsAnswers;

/// `rules` with DataFusion's `AggregateStatistics` replaced by [`STATISTICS_ANSWERS`].
pub(super) fn with_statistics_answers(
    mut rules: Vec<Arc<dyn PhysicalOptimizerRule + Send + Sync>>,
) -> Vec<Arc<dyn PhysicalOptimizerRule + Send + Sync>> {
    let plain = AggregateStatistics::new();
    for rule in rules.iter_mut().filter(|r| r.name() == plain.name()) {
        *rule = Arc::new(STATISTICS_ANSWERS);
    }
    rules
}

impl PhysicalOptimizerRule for StatisticsAnswers {
    fn optimize(
        &self,
        plan: Arc<dyn ExecutionPlan>,
        config: &ConfigOptions,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        plan.transform_down(|node| {
            if !statistics_hold_under(&node) {
                return Ok(Transformed::no(node));
            }
            let answered = AggregateStatistics::new().optimize(Arc::clone(&node), config)?;
            if Arc::ptr_eq(&answered, &node) {
                return Ok(Transformed::no(node));
            }
            Ok(Transformed::new(answered, true, TreeNodeRecursion::Jump))
        })
        .map(|t| t.data)
    }

    fn name(&self) -> &str {
        "floe_statistics_answers"
    }

    /// As DataFusion's rule: an answer's columns may differ in nullability.
    fn schema_check(&self) -> bool {
        false
    }
}

/// Whether `node` is an aggregate over a first-phase aggregate whose input's statistics
/// can be taken at their word.
fn statistics_hold_under(node: &Arc<dyn ExecutionPlan>) -> bool {
    if !node.as_any().is::<AggregateExec>() {
        return false;
    }
    let mut child = Arc::clone(node);
    loop {
        if let Some(aggregate) = child.as_any().downcast_ref::<AggregateExec>()
            && aggregate.mode().input_mode() == AggregateInputMode::Raw
        {
            return passes_statistics_on(aggregate.input());
        }
        let next = match child.children().as_slice() {
            [only] => Arc::clone(only),
            _ => return false,
        };
        child = next;
    }
}

/// Whether every node of `plan` is one whose exact statistics are exact.
fn passes_statistics_on(plan: &Arc<dyn ExecutionPlan>) -> bool {
    let any = plan.as_any();
    let kept = any.is::<IcebergScanExec>()
        || any.is::<StagedScanExec>()
        || any.is::<DataSourceExec>()
        || any.is::<EmptyExec>()
        || any.is::<PlaceholderRowExec>()
        || any.is::<ProjectionExec>()
        || any.is::<CoalescePartitionsExec>()
        || any.is::<RepartitionExec>()
        || any.is::<CooperativeExec>()
        || any.is::<UnionExec>()
        || any.is::<GlobalLimitExec>()
        || any.is::<LocalLimitExec>();
    kept && plan.children().into_iter().all(passes_statistics_on)
}
