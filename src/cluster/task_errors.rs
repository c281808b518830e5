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

use datafusion::error::{DataFusionError, Result as DfResult};
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{DisplayAs, DisplayFormatType, ExecutionPlan, PlanProperties};
use futures::TryStreamExt;

use crate::error::FloeError;

/// Passes its input through, turning errors into reported [`FloeError`]s.
#[derive(Debug)]
pub(super) struct ReportErrorsExec(pub(super) Arc<dyn ExecutionPlan>);

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
