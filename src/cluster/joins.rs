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
//!   (apache/datafusion-ballista#1055). [`DEMOTE_UNSAFE_BROADCASTS`] makes those joins
//!   `Partitioned`; a null-aware anti join (`NOT IN`), which must stay `CollectLeft`,
//!   gets a single probe partition from [`SINGLE_PROBE_FOR_UNSAFE_BROADCASTS`].
//! * A nested loop join (a join without equality keys: `EXISTS (… WHERE a.x = b.x OR …)`,
//!   `LEFT JOIN … ON a.x < b.y`) always collects its left side, and has no partitioned
//!   form: of those types, [`SINGLE_PROBE_FOR_NESTED_LOOP_JOINS`] gives it a single
//!   probe partition.
//! * Ballista's own promotion to broadcast (`broadcast_join_threshold_bytes`) has no such
//!   guard, so it is off.
//! * Of a semi, anti or mark join's shuffled side only the keys' existence matters, so
//!   where shuffles go to files (executors of other processes), [`DISTINCT_KEYS_BEFORE_SHUFFLE`]
//!   has each task drop repeated keys before the shuffle (a partial aggregate, which
//!   gives up by itself when the keys hardly repeat): `NOT EXISTS (SELECT * FROM orders
//!   WHERE o_custkey = c_custkey)` on TPC-H SF1 shuffles each task's distinct customer
//!   keys (199,300 in all) instead of orders' 1.5 M rows. Where they stay in memory
//!   (`held_outputs`), moving a key costs less than the hash table that drops it: TPC-H
//!   q22 took 20% less of the server's CPU without it.
//!
//! Hash joins cannot spill: an executor's memory pool bounds what one task may hold, and
//! a build side over it fails the statement (`RESOURCE_EXHAUSTED`) instead of the
//! process.

use std::collections::HashSet;
use std::sync::Arc;

use datafusion::arrow::datatypes::DataType;
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::common::{JoinSide, JoinType};
use datafusion::config::ConfigOptions;
use datafusion::error::Result;
use datafusion::physical_expr::expressions::Column;
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::physical_plan::aggregates::{AggregateExec, AggregateMode, PhysicalGroupBy};
use datafusion::physical_plan::coalesce_partitions::CoalescePartitionsExec;
use datafusion::physical_plan::joins::{HashJoinExec, NestedLoopJoinExec, PartitionMode};
use datafusion::physical_plan::projection::ProjectionExec;
use datafusion::physical_plan::repartition::RepartitionExec;
use datafusion::physical_plan::sorts::sort::SortExec;
use datafusion::physical_plan::sorts::sort_preserving_merge::SortPreservingMergeExec;
use datafusion::physical_plan::{
    ExecutionPlan, ExecutionPlanProperties, Partitioning, PhysicalExpr,
};
use datafusion::prelude::SessionConfig;

use super::aggregate_reduction::JOIN_KEYS_REDUCE_AGGREGATES;
use super::filter_estimates::FILTER_ESTIMATES;
use super::held_outputs::held_outputs;
use super::join_order::{SELECTIVE_JOINS_FIRST, SEMI_JOINS_BEFORE_INNER_JOINS};
use super::node_rule::NodeRule;
use crate::table::selectivity::column_distinct_values;

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

/// The physical optimizer rules, with Floe's join rules in place: [`FILTER_ESTIMATES`]
/// right before `join_selection`; the broadcast guard, [`JOIN_KEYS_REDUCE_AGGREGATES`],
/// [`SEMI_JOINS_BEFORE_INNER_JOINS`] and [`SELECTIVE_JOINS_FIRST`] right after it, the
/// others right before the final sanity check.
pub fn with_join_guards(
    mut rules: Vec<Arc<dyn PhysicalOptimizerRule + Send + Sync>>,
) -> Vec<Arc<dyn PhysicalOptimizerRule + Send + Sync>> {
    let selection = |rules: &[Arc<dyn PhysicalOptimizerRule + Send + Sync>]| {
        rules.iter().position(|r| r.name() == "join_selection")
    };
    rules.insert(selection(&rules).unwrap_or(0), Arc::new(FILTER_ESTIMATES));
    let after_selection = selection(&rules).map_or(1, |i| i + 1);
    rules.insert(after_selection, Arc::new(DEMOTE_UNSAFE_BROADCASTS));
    rules.insert(after_selection + 1, Arc::new(JOIN_KEYS_REDUCE_AGGREGATES));
    rules.insert(after_selection + 2, Arc::new(SEMI_JOINS_BEFORE_INNER_JOINS));
    rules.insert(after_selection + 3, Arc::new(SELECTIVE_JOINS_FIRST));
    let before_check = rules
        .iter()
        .position(|r| r.name() == "SanityCheckPlan")
        .unwrap_or(rules.len());
    rules.insert(before_check, Arc::new(SINGLE_PROBE_FOR_UNSAFE_BROADCASTS));
    rules.insert(before_check, Arc::new(SINGLE_PROBE_FOR_NESTED_LOOP_JOINS));
    rules.insert(before_check, Arc::new(LIMITED_BUILD_SIDES_SORTED_ONCE));
    rules.insert(before_check, Arc::new(DISTINCT_KEYS_BEFORE_SHUFFLE));
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

/// A new plan node for a hash join (given as itself and as a plan node), or `None`.
pub(super) type JoinRewrite =
    fn(&HashJoinExec, &Arc<dyn ExecutionPlan>) -> Result<Option<Arc<dyn ExecutionPlan>>>;

/// A physical optimizer rule that replaces, bottom up, each hash join for which its
/// `rewrite` gives a new node; again, up to `passes` times in all, while a pass changes
/// something.
#[derive(Debug)]
pub(super) struct HashJoinRule {
    pub(super) name: &'static str,
    pub(super) rewrite: JoinRewrite,
    pub(super) passes: usize,
}

impl PhysicalOptimizerRule for HashJoinRule {
    fn optimize(
        &self,
        mut plan: Arc<dyn ExecutionPlan>,
        _: &ConfigOptions,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        for _ in 0..self.passes {
            let pass = plan.transform_up(|node| {
                let rewritten = match node.as_any().downcast_ref::<HashJoinExec>() {
                    Some(join) => (self.rewrite)(join, &node)?,
                    None => None,
                };
                Ok(rewritten.map_or_else(|| Transformed::no(node), Transformed::yes))
            })?;
            plan = pass.data;
            if !pass.transformed {
                break;
            }
        }
        Ok(plan)
    }

    fn name(&self) -> &str {
        self.name
    }

    fn schema_check(&self) -> bool {
        true
    }
}

/// Makes broadcast joins that would be wrong on Ballista partitioned hash joins (the
/// null-aware ones excepted: they must collect their build side).
const DEMOTE_UNSAFE_BROADCASTS: HashJoinRule = HashJoinRule {
    name: "floe_demote_unsafe_broadcasts",
    rewrite: demoted_to_partitioned,
    passes: 1,
};

fn demoted_to_partitioned(
    join: &HashJoinExec,
    _: &Arc<dyn ExecutionPlan>,
) -> Result<Option<Arc<dyn ExecutionPlan>>> {
    if !unsafe_broadcast(join) || join.null_aware {
        return Ok(None);
    }
    let partitioned = join
        .builder()
        .with_partition_mode(PartitionMode::Partitioned)
        .build_exec()?;
    Ok(Some(partitioned))
}

/// Gives any broadcast join that is still of an unsafe type a single probe partition,
/// so one task probes and emits the unmatched build rows exactly once.
const SINGLE_PROBE_FOR_UNSAFE_BROADCASTS: HashJoinRule = HashJoinRule {
    name: "floe_single_probe_for_unsafe_broadcasts",
    rewrite: with_single_probe,
    passes: 1,
};

fn with_single_probe(
    join: &HashJoinExec,
    node: &Arc<dyn ExecutionPlan>,
) -> Result<Option<Arc<dyn ExecutionPlan>>> {
    if !unsafe_broadcast(join) || join.right().output_partitioning().partition_count() <= 1 {
        return Ok(None);
    }
    Ok(Some(with_probe_coalesced(node, join.left(), join.right())?))
}

/// The join `node` (of children `build` and `probe`) with its probe side read by one task.
fn with_probe_coalesced(
    node: &Arc<dyn ExecutionPlan>,
    build: &Arc<dyn ExecutionPlan>,
    probe: &Arc<dyn ExecutionPlan>,
) -> Result<Arc<dyn ExecutionPlan>> {
    let probe: Arc<dyn ExecutionPlan> = Arc::new(CoalescePartitionsExec::new(probe.clone()));
    node.clone().with_new_children(vec![build.clone(), probe])
}

/// Gives each nested loop join of a type that emits unmatched build rows at its end a
/// single probe partition (it has no partitioned form to demote it to).
///
/// The probe is hashed into one partition rather than coalesced: Ballista runs
/// DataFusion's `EnforceSorting` again on each stage, and where a sort sits above the join
/// (`string_agg(s, ',' ORDER BY s)` of a `LEFT JOIN … ON a.k < b.k`), its parallelization
/// followed the probe's `CoalescePartitionsExec` into the join and took out the one of
/// the build side (apache/datafusion#23948, fixed after 53): executors refused the stage
/// ("Invalid NestedLoopJoinExec, the output partition count of the left child must be 1").
const SINGLE_PROBE_FOR_NESTED_LOOP_JOINS: NodeRule = NodeRule {
    name: "floe_single_probe_for_nested_loop_joins",
    rewrite: nested_loop_join_with_single_probe,
};

fn nested_loop_join_with_single_probe(
    node: &Arc<dyn ExecutionPlan>,
) -> Result<Option<Arc<dyn ExecutionPlan>>> {
    let Some(join) = node.as_any().downcast_ref::<NestedLoopJoinExec>() else {
        return Ok(None);
    };
    if !emits_build_rows_at_end(join.join_type())
        || join.right().output_partitioning().partition_count() <= 1
    {
        return Ok(None);
    }
    let probe = join.right();
    let Some(column) = hashable_column(probe) else {
        return Ok(Some(with_probe_coalesced(node, join.left(), probe)?));
    };
    let one_partition = Partitioning::Hash(vec![column], 1);
    let probe: Arc<dyn ExecutionPlan> =
        Arc::new(RepartitionExec::try_new(probe.clone(), one_partition)?);
    Ok(Some(
        node.clone()
            .with_new_children(vec![join.left().clone(), probe])?,
    ))
}

/// Gives a nested loop join whose build side is a merge of each task's sorted rows that
/// holds a limit (`WHERE k > (SELECT k FROM u ORDER BY k DESC LIMIT 1)`) a sort of all
/// those rows in one partition, with the limit, instead: Ballista runs DataFusion's
/// `EnforceSorting` again on each stage, which took the merge out (the join needs no
/// order) and its limit with it, so every task's first row was joined. A sort with a
/// limit is never taken out.
const LIMITED_BUILD_SIDES_SORTED_ONCE: NodeRule = NodeRule {
    name: "floe_limited_build_sides_sorted_once",
    rewrite: nested_loop_join_with_limited_build_sorted_once,
};

fn nested_loop_join_with_limited_build_sorted_once(
    node: &Arc<dyn ExecutionPlan>,
) -> Result<Option<Arc<dyn ExecutionPlan>>> {
    let Some(join) = node.as_any().downcast_ref::<NestedLoopJoinExec>() else {
        return Ok(None);
    };
    let Some(build) = sorted_once(join.left())? else {
        return Ok(None);
    };
    Ok(Some(
        node.clone()
            .with_new_children(vec![build, join.right().clone()])?,
    ))
}

/// `plan` (projections over a merge with a limit) with the merge a sort of its coalesced
/// input, with the limit; `None` for any other plan.
fn sorted_once(plan: &Arc<dyn ExecutionPlan>) -> Result<Option<Arc<dyn ExecutionPlan>>> {
    if let Some(merge) = plan.as_any().downcast_ref::<SortPreservingMergeExec>() {
        let Some(fetch) = merge.fetch() else {
            return Ok(None);
        };
        let coalesced = Arc::new(CoalescePartitionsExec::new(merge.input().clone()));
        let sort = SortExec::new(merge.expr().clone(), coalesced).with_fetch(Some(fetch));
        return Ok(Some(Arc::new(sort)));
    }
    if plan.as_any().is::<ProjectionExec>() {
        let [input] = plan.children()[..] else {
            return Ok(None);
        };
        return match sorted_once(input)? {
            Some(input) => Ok(Some(plan.clone().with_new_children(vec![input])?)),
            None => Ok(None),
        };
    }
    Ok(None)
}

/// A column of `plan`'s output of a plain type, to hash by.
fn hashable_column(plan: &Arc<dyn ExecutionPlan>) -> Option<Arc<dyn PhysicalExpr>> {
    let schema = plan.schema();
    let (index, field) = (schema.fields().iter().enumerate()).find(|(_, f)| {
        f.data_type().is_primitive()
            || f.data_type().is_null()
            || matches!(
                f.data_type(),
                DataType::Utf8 | DataType::Utf8View | DataType::LargeUtf8 | DataType::Boolean
            )
    })?;
    Some(Arc::new(Column::new(field.name(), index)))
}

/// Deduplicates, per task, the join keys of a shuffled semi, anti or mark join's side
/// whose rows only say whether a key exists, right before that side's shuffle, unless
/// stage outputs are held in memory.
const DISTINCT_KEYS_BEFORE_SHUFFLE: HashJoinRule = HashJoinRule {
    name: "floe_distinct_keys_before_shuffle",
    rewrite: |join, _| distinct_keys_before_shuffle(join),
    passes: 1,
};

/// The side of a join whose rows are not output, only tested for a matching key.
fn existence_only_side(join_type: &JoinType) -> Option<JoinSide> {
    match join_type {
        JoinType::LeftSemi | JoinType::LeftAnti | JoinType::LeftMark => Some(JoinSide::Right),
        JoinType::RightSemi | JoinType::RightAnti => Some(JoinSide::Left),
        _ => None,
    }
}

/// `join` with a partial aggregate on its existence-only side's keys under that side's
/// hash shuffle; `None` where the join is not of that shape or the keys may not repeat.
fn distinct_keys_before_shuffle(join: &HashJoinExec) -> Result<Option<Arc<dyn ExecutionPlan>>> {
    let Some(side) = existence_only_side(join.join_type()) else {
        return Ok(None);
    };
    if held_outputs().may_hold() {
        return Ok(None);
    }
    // A join filter may read the side's other columns; a null-aware join is never
    // partitioned, but its NULL handling is its own.
    if *join.partition_mode() != PartitionMode::Partitioned
        || join.filter().is_some()
        || join.null_aware
    {
        return Ok(None);
    }
    let (child, keys): (_, Vec<_>) = match side {
        JoinSide::Left => (
            join.left(),
            join.on().iter().map(|(l, _)| l.clone()).collect(),
        ),
        _ => (
            join.right(),
            join.on().iter().map(|(_, r)| r.clone()).collect(),
        ),
    };
    let Some((shuffled, new_keys)) = deduplicated_shuffle(child, &keys)? else {
        return Ok(None);
    };
    let (children, on) = match side {
        JoinSide::Left => (
            vec![shuffled, join.right().clone()],
            new_keys
                .into_iter()
                .zip(join.on().iter().map(|(_, r)| r.clone()))
                .collect(),
        ),
        _ => (
            vec![join.left().clone(), shuffled],
            join.on()
                .iter()
                .map(|(l, _)| l.clone())
                .zip(new_keys)
                .collect(),
        ),
    };
    let rewritten = join
        .builder()
        .with_on(on)
        .with_new_children(children)?
        .reset_state()
        .build_exec()?;
    Ok(Some(rewritten))
}

/// A plan and the join keys over its output.
type Keyed = (Arc<dyn ExecutionPlan>, Vec<Arc<dyn PhysicalExpr>>);

/// `child`, a hash shuffle on exactly `keys`, with a partial aggregate of the keys under
/// it, and the keys as columns of that aggregate's output; `None` where `child` is not
/// such a shuffle or its keys may not repeat.
fn deduplicated_shuffle(
    child: &Arc<dyn ExecutionPlan>,
    keys: &[Arc<dyn PhysicalExpr>],
) -> Result<Option<Keyed>> {
    let Some(shuffle) = child.as_any().downcast_ref::<RepartitionExec>() else {
        return Ok(None);
    };
    let Partitioning::Hash(hashed_on, partitions) = shuffle.partitioning() else {
        return Ok(None);
    };
    let input = shuffle.input();
    let Some(columns) = key_columns(keys) else {
        return Ok(None);
    };
    if hashed_on.as_slice() != keys || !keys_repeat(input, &columns)? {
        return Ok(None);
    }
    let group_by = PhysicalGroupBy::new_single(
        keys.iter()
            .zip(&columns)
            .map(|(key, column)| (key.clone(), column.name().to_string()))
            .collect(),
    );
    let distinct = AggregateExec::try_new(
        AggregateMode::Partial,
        group_by,
        vec![],
        vec![],
        input.clone(),
        input.schema(),
    )?;
    let new_keys: Vec<Arc<dyn PhysicalExpr>> = columns
        .iter()
        .enumerate()
        .map(|(i, column)| Arc::new(Column::new(column.name(), i)) as _)
        .collect();
    let shuffled: Arc<dyn ExecutionPlan> = Arc::new(RepartitionExec::try_new(
        Arc::new(distinct),
        Partitioning::Hash(new_keys.clone(), *partitions),
    )?);
    Ok(Some((shuffled, new_keys)))
}

/// The keys as columns, if each is a column and no column is a key twice.
fn key_columns(keys: &[Arc<dyn PhysicalExpr>]) -> Option<Vec<&Column>> {
    let columns: Vec<&Column> = keys
        .iter()
        .map(|key| key.as_any().downcast_ref::<Column>())
        .collect::<Option<_>>()?;
    let names: HashSet<&str> = columns.iter().map(|c| c.name()).collect();
    (names.len() == columns.len()).then_some(columns)
}

/// Whether `input`'s statistics show that at least half of its rows repeat a key: the
/// keys have at most half as many distinct values as there are rows
/// ([`column_distinct_values`]). Aggregating keys that hardly
/// repeat costs more than shuffling them (TPC-H q4's orders keys in lineitem).
fn keys_repeat(input: &Arc<dyn ExecutionPlan>, columns: &[&Column]) -> Result<bool> {
    let statistics = input.partition_statistics(None)?;
    let Some(&rows) = statistics.num_rows.get_value() else {
        return Ok(false);
    };
    let schema = input.schema();
    let mut distinct: usize = 1;
    for column in columns {
        let columns = &statistics.column_statistics;
        let Some(values) = column_distinct_values(columns, &schema, column.index()) else {
            return Ok(false);
        };
        distinct = distinct.saturating_mul(values);
    }
    Ok(distinct.saturating_mul(2) <= rows)
}
