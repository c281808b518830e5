//! The executors' execution engine: Ballista's, with Floe's writers of stage outputs
//! and the errors of tasks reported with their kind (`task_errors`).

use std::sync::Arc;

use ballista_core::execution_plans::ShuffleWriterExec;
use ballista_core::execution_plans::sort_shuffle::SortShuffleWriterExec;
use ballista_executor::execution_engine::{
    DefaultExecutionEngine, ExecutionEngine, QueryStageExecutor,
};
use datafusion::error::Result as DfResult;
use datafusion::physical_plan::execution_plan::reset_plan_states;
use datafusion::physical_plan::{ExecutionPlan, Partitioning};
use datafusion::prelude::SessionConfig;

use super::result_files::ResultStageExec;
use super::shuffle_files::{PartitionedStageExec, ShuffleCompression, StageOutput};
use super::task_errors::ReportErrorsExec;

/// Ballista's execution engine, with [`ReportErrorsExec`] under each shuffle writer, and
/// stage outputs written by Floe: unpartitioned ones by [`ResultStageExec`],
/// hash-partitioned ones by [`PartitionedStageExec`], compressed as `compression` says.
pub struct FloeEngine {
    ballista: DefaultExecutionEngine,
    compression: ShuffleCompression,
}

impl FloeEngine {
    pub fn new(compression: ShuffleCompression) -> Self {
        Self {
            ballista: DefaultExecutionEngine::default(),
            compression,
        }
    }
}

impl ExecutionEngine for FloeEngine {
    fn create_query_stage_exec(
        &self,
        job_id: String,
        stage_id: usize,
        partition_id: usize,
        plan: Arc<dyn ExecutionPlan>,
        work_dir: &str,
        config: &SessionConfig,
    ) -> DfResult<Arc<dyn QueryStageExecutor>> {
        // Tasks of a stage share the decoded plan: a fresh copy per task keeps each
        // task's operator state and metrics its own (EXPLAIN ANALYZE sums them).
        let plan = reset_plan_states(plan)?;
        let children = plan
            .children()
            .into_iter()
            .map(|child| Arc::new(ReportErrorsExec(child.clone())) as Arc<dyn ExecutionPlan>)
            .collect();
        let plan = plan.with_new_children(children)?;
        let output = || StageOutput {
            job_id: job_id.clone(),
            stage_id,
            work_dir: work_dir.to_string(),
            compression: self.compression,
        };
        if let Some((input, partitioning)) = stage_output(&plan) {
            match partitioning {
                None => return Ok(Arc::new(ResultStageExec::new(output(), input)?)),
                Some(Partitioning::Hash(keys, partitions)) => {
                    let stage = PartitionedStageExec::new(output(), input, keys, partitions)?;
                    return Ok(Arc::new(stage));
                }
                Some(_) => {}
            }
        }
        self.ballista.create_query_stage_exec(
            job_id,
            stage_id,
            partition_id,
            plan,
            work_dir,
            config,
        )
    }
}

/// The input and output partitioning of a stage's shuffle writer (Ballista plans hash
/// or sort-based ones), if `plan` is one.
fn stage_output(
    plan: &Arc<dyn ExecutionPlan>,
) -> Option<(Arc<dyn ExecutionPlan>, Option<Partitioning>)> {
    let input = plan.children().first().map(|child| (*child).clone())?;
    let any = plan.as_any();
    if let Some(writer) = any.downcast_ref::<ShuffleWriterExec>() {
        return Some((input, writer.shuffle_output_partitioning().cloned()));
    }
    let writer = any.downcast_ref::<SortShuffleWriterExec>()?;
    Some((input, Some(writer.shuffle_output_partitioning().clone())))
}
