//! How joins run on the cluster: hash joins, with small build sides broadcast where that
//! is correct, instead of Ballista's defaults (sort-merge joins everywhere, no
//! broadcast), which sort and shuffle both sides of every join.
//!
//! * DataFusion's `JoinSelection` makes a hash join `CollectLeft` (the build side
//!   collected once and read by every probe task: a broadcast) when the build side is
//!   under [`BROADCAST_BYTES`] or [`BROADCAST_ROWS`] by the inputs' statistics, and
//!   `Partitioned` (both sides hash-shuffled) otherwise.
//! * A `CollectLeft` join of a type that emits unmatched *build* rows at its end (left,
//!   full, left semi/anti/mark) is only right when a single task probes: DataFusion
//!   emits those rows once all probe partitions of the process are done, but a Ballista
//!   task probes one partition, so each task would emit them, or none would
//!   (apache/datafusion-ballista#1055). [`DemoteUnsafeBroadcasts`] makes those joins
//!   `Partitioned`; a null-aware anti join (`NOT IN`), which must stay `CollectLeft`,
//!   gets a single probe partition from [`SingleProbeForUnsafeBroadcasts`].
//! * Ballista's own promotion to broadcast (`broadcast_join_threshold_bytes`) has no such
//!   guard, so it is off.
//!
//! Hash joins cannot spill: an executor's memory pool bounds what one task may hold, and
//! a build side over it fails the statement (`RESOURCE_EXHAUSTED`) instead of the
//! process.

use std::sync::Arc;

use datafusion::common::JoinType;
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::config::ConfigOptions;
use datafusion::error::Result;
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::physical_plan::coalesce_partitions::CoalescePartitionsExec;
use datafusion::physical_plan::joins::{HashJoinExec, PartitionMode};
use datafusion::physical_plan::{ExecutionPlan, ExecutionPlanProperties};
use datafusion::prelude::SessionConfig;

/// A build side under this many bytes is broadcast (where that is correct).
pub const BROADCAST_BYTES: u64 = 8 * 1024 * 1024;

/// A build side under this many rows is broadcast (where that is correct), when its size
/// in bytes is not known (the output of a join).
pub const BROADCAST_ROWS: u64 = 128 * 1024;

/// The join settings every statement starts from.
pub fn configure(config: &mut SessionConfig) {
    let options = config.options_mut();
    options.optimizer.prefer_hash_join = true;
    options.optimizer.hash_join_single_partition_threshold = BROADCAST_BYTES as usize;
    options.optimizer.hash_join_single_partition_threshold_rows = BROADCAST_ROWS as usize;
    // Key and value as Ballista names them (ballista-core `config.rs`).
    if let Err(e) = options.set("ballista.optimizer.broadcast_join_threshold_bytes", "0") {
        tracing::warn!("cannot turn off Ballista's broadcast promotion: {e}");
    }
}

/// The physical optimizer rules, with Floe's join guards in place: one right after
/// `join_selection`, one right before the final sanity check.
pub fn with_join_guards(
    mut rules: Vec<Arc<dyn PhysicalOptimizerRule + Send + Sync>>,
) -> Vec<Arc<dyn PhysicalOptimizerRule + Send + Sync>> {
    let after_selection = rules
        .iter()
        .position(|r| r.name() == "join_selection")
        .map_or(0, |i| i + 1);
    rules.insert(after_selection, Arc::new(DemoteUnsafeBroadcasts));
    let before_check = rules
        .iter()
        .position(|r| r.name() == "SanityCheckPlan")
        .unwrap_or(rules.len());
    rules.insert(before_check, Arc::new(SingleProbeForUnsafeBroadcasts));
    rules
}

/// Join types that emit unmatched build-side (left) rows after probing.
fn emits_build_rows_at_end(join_type: &JoinType) -> bool {
    matches!(
        join_type,
        JoinType::Left
            | JoinType::LeftSemi
            | JoinType::LeftAnti
            | JoinType::LeftMark
            | JoinType::Full
    )
}

fn unsafe_broadcast(join: &HashJoinExec) -> bool {
    *join.partition_mode() == PartitionMode::CollectLeft
        && emits_build_rows_at_end(join.join_type())
}

/// Replaces, bottom up, each unsafe broadcast join (given as itself and as a plan node)
/// for which `rewrite` gives a new node.
fn rewrite_unsafe_broadcasts(
    plan: Arc<dyn ExecutionPlan>,
    rewrite: impl Fn(&HashJoinExec, &Arc<dyn ExecutionPlan>) -> Result<Option<Arc<dyn ExecutionPlan>>>,
) -> Result<Arc<dyn ExecutionPlan>> {
    plan.transform_up(|node| {
        let rewritten = match node.as_any().downcast_ref::<HashJoinExec>() {
            Some(join) if unsafe_broadcast(join) => rewrite(join, &node)?,
            _ => None,
        };
        Ok(rewritten.map_or_else(|| Transformed::no(node), Transformed::yes))
    })
    .map(|t| t.data)
}

/// Makes broadcast joins that would be wrong on Ballista partitioned hash joins (the
/// null-aware ones excepted: they must collect their build side).
#[derive(Debug)]
struct DemoteUnsafeBroadcasts;

impl PhysicalOptimizerRule for DemoteUnsafeBroadcasts {
    fn optimize(
        &self,
        plan: Arc<dyn ExecutionPlan>,
        _: &ConfigOptions,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        rewrite_unsafe_broadcasts(plan, |join, _| {
            if join.null_aware {
                return Ok(None);
            }
            let partitioned = join
                .builder()
                .with_partition_mode(PartitionMode::Partitioned)
                .build_exec()?;
            Ok(Some(partitioned))
        })
    }

    fn name(&self) -> &str {
        "floe_demote_unsafe_broadcasts"
    }

    fn schema_check(&self) -> bool {
        true
    }
}

/// Gives any broadcast join that is still of an unsafe type a single probe partition,
/// so one task probes and emits the unmatched build rows exactly once.
#[derive(Debug)]
struct SingleProbeForUnsafeBroadcasts;

impl PhysicalOptimizerRule for SingleProbeForUnsafeBroadcasts {
    fn optimize(
        &self,
        plan: Arc<dyn ExecutionPlan>,
        _: &ConfigOptions,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        rewrite_unsafe_broadcasts(plan, |join, node| {
            if join.right().output_partitioning().partition_count() <= 1 {
                return Ok(None);
            }
            let probe: Arc<dyn ExecutionPlan> =
                Arc::new(CoalescePartitionsExec::new(join.right().clone()));
            let children = vec![join.left().clone(), probe];
            Ok(Some(node.clone().with_new_children(children)?))
        })
    }

    fn name(&self) -> &str {
        "floe_single_probe_for_unsafe_broadcasts"
    }

    fn schema_check(&self) -> bool {
        true
    }
}
