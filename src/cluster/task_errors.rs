//! How a task's error reaches the coordinator with its kind.
//!
//! Ballista hands a failed task's error to the scheduler as text: its shuffle writer
//! turns the error of the plan below it into `Execution(format!("{e:?}"))`, and the
//! scheduler passes that text on in the job status. Executors therefore wrap the
//! plan under the shuffle writer in [`ReportErrorsExec`], which turns every error into
//! a [`FloeError`] whose `Debug` form is its [task report](FloeError::task_report);
//! the coordinator reads the report back from the job's error text.

use std::any::Any;
use std::fmt;
use std::sync::Arc;

use ballista_core::execution_plans::ShuffleWriterExec;
use ballista_executor::execution_engine::{
    DefaultExecutionEngine, ExecutionEngine, QueryStageExecutor,
};
use datafusion::error::{DataFusionError, Result as DfResult};
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::physical_plan::execution_plan::reset_plan_states;
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{DisplayAs, DisplayFormatType, ExecutionPlan, PlanProperties};
use datafusion::prelude::SessionConfig;
use futures::TryStreamExt;

use super::result_files::ResultStageExec;
use crate::error::FloeError;

/// Ballista's execution engine, with [`ReportErrorsExec`] under each shuffle writer,
/// and unpartitioned outputs written by [`ResultStageExec`].
#[derive(Default)]
pub struct ReportingEngine(DefaultExecutionEngine);

impl ExecutionEngine for ReportingEngine {
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
        if let Some(writer) = plan.as_any().downcast_ref::<ShuffleWriterExec>()
            && let Some(stage) = ResultStageExec::for_unpartitioned(writer, work_dir)?
        {
            return Ok(Arc::new(stage));
        }
        self.0
            .create_query_stage_exec(job_id, stage_id, partition_id, plan, work_dir, config)
    }
}

/// Passes its input through, turning errors into reported [`FloeError`]s.
#[derive(Debug)]
struct ReportErrorsExec(Arc<dyn ExecutionPlan>);

impl ExecutionPlan for ReportErrorsExec {
    fn name(&self) -> &str {
        "ReportErrorsExec"
    }

    fn as_any(&self) -> &dyn Any {
        self
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        self.0.properties()
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        vec![&self.0]
    }

    fn with_new_children(
        self: Arc<Self>,
        mut children: Vec<Arc<dyn ExecutionPlan>>,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        match (children.pop(), children.is_empty()) {
            (Some(child), true) => Ok(Arc::new(ReportErrorsExec(child))),
            _ => Err(DataFusionError::Internal(
                "ReportErrorsExec takes exactly one child".into(),
            )),
        }
    }

    fn execute(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> DfResult<SendableRecordBatchStream> {
        let input = self.0.execute(partition, context).map_err(reported)?;
        let schema = input.schema();
        Ok(Box::pin(RecordBatchStreamAdapter::new(
            schema,
            input.map_err(reported),
        )))
    }
}

impl DisplayAs for ReportErrorsExec {
    fn fmt_as(&self, _: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("ReportErrorsExec")
    }
}

fn reported(error: DataFusionError) -> DataFusionError {
    match error {
        // Ballista retries tasks that failed on I/O: keep those as they are.
        DataFusionError::IoError(_) => error,
        error => DataFusionError::External(Box::new(Reported(FloeError::from(error)))),
    }
}

/// An error whose `Debug` form is its task report.
struct Reported(FloeError);

impl fmt::Debug for Reported {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0.task_report())
    }
}

impl fmt::Display for Reported {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl std::error::Error for Reported {}
