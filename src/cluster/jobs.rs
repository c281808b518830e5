//! Running a statement's plan as a Ballista job and reading what it produced.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ballista_core::client::BallistaClient;
use ballista_core::serde::protobuf::{JobStatus, PartitionLocation, job_status};
use ballista_core::serde::scheduler::PartitionId;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::error::DataFusionError;
use datafusion::execution::SendableRecordBatchStream;
use datafusion::logical_expr::LogicalPlan;
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::prelude::SessionContext;
use futures::{StreamExt, TryStreamExt};
use tokio::sync::mpsc;

use super::{Cluster, MAX_MESSAGE_SIZE, Scheduler};
use crate::error::{ErrorKind, FloeError, Result};

impl Cluster {
    /// Submits `plan` (planned on `ctx`) and waits for the job to finish; returns where
    /// its result partitions are, in partition order. Dropping the returned future
    /// cancels the job.
    pub async fn run_job(
        &self,
        ctx: &Arc<SessionContext>,
        plan: &LogicalPlan,
        name: &str,
    ) -> Result<Vec<PartitionLocation>> {
        if self.jobs.stopping.load(Ordering::SeqCst) {
            return Err(shutting_down());
        }
        // The scheduler drops status updates when the channel is full: keep it roomy,
        // and ask the task manager when the channel closes without a final status.
        let (tx, mut rx) = mpsc::channel::<JobStatus>(1024);
        let job_id = self
            .scheduler
            .submit_job(name, ctx.clone(), plan, Some(tx))
            .await
            .map_err(|e| FloeError::internal(format!("submitting the job: {e}")))?;
        self.jobs.add(&job_id);
        if self.jobs.stopping.load(Ordering::SeqCst) {
            // Shutdown began while the job was being submitted.
            tokio::spawn(cancel_until_final(self.scheduler.clone(), job_id.clone()));
        }
        let mut guard = CancelOnDrop {
            scheduler: self.scheduler.clone(),
            jobs: self.jobs.clone(),
            job_id: Some(job_id.clone()),
        };
        let mut status = None;
        while let Some(update) = rx.recv().await {
            if is_final(&update.status) {
                status = update.status;
                break;
            }
        }
        if status.is_none() {
            status = self.job_status(&job_id).await?;
        }
        guard.job_id = None;
        self.jobs.remove(&job_id);
        if self.jobs.stopping.load(Ordering::SeqCst)
            && !matches!(status, Some(job_status::Status::Successful(_)))
        {
            return Err(shutting_down());
        }
        match status {
            Some(job_status::Status::Successful(job)) => {
                let mut locations = job.partition_location;
                locations.sort_by_key(|l| l.partition_id.as_ref().map(|p| p.partition_id));
                Ok(locations)
            }
            Some(job_status::Status::Failed(failed)) => Err(job_error(&failed.error)),
            _ => Err(FloeError::internal(format!(
                "job {job_id} ended without a status"
            ))),
        }
    }

    /// Refuses new jobs and cancels the running ones: used on shutdown, when the
    /// in-process executors stop too, so in-flight statements fail cleanly instead of
    /// waiting for executors that will not come back.
    /// Returns how many jobs it cancelled.
    pub fn cancel_all_jobs(&self) -> usize {
        self.jobs.stopping.store(true, Ordering::SeqCst);
        let running = self.jobs.running();
        for job_id in &running {
            tokio::spawn(cancel_until_final(self.scheduler.clone(), job_id.clone()));
        }
        running.len()
    }

    async fn job_status(&self, job_id: &str) -> Result<Option<job_status::Status>> {
        Ok(self
            .scheduler
            .state
            .task_manager
            .get_job_status(job_id)
            .await
            .map_err(|e| FloeError::internal(e.to_string()))?
            .and_then(|s| s.status))
    }
}

fn is_final(status: &Option<job_status::Status>) -> bool {
    matches!(
        status,
        Some(job_status::Status::Successful(_)) | Some(job_status::Status::Failed(_))
    )
}

/// A failed job's error: the one its executor reported, or Ballista's own.
fn job_error(message: &str) -> FloeError {
    if let Some(error) = FloeError::from_task_report(message) {
        return error;
    }
    // Ballista's whole message for a job cancelled through its scheduler.
    if message == "Cancelled" {
        return FloeError::new(ErrorKind::Cancelled, "the statement was cancelled");
    }
    FloeError::internal(message.trim().to_string())
}

fn shutting_down() -> FloeError {
    FloeError::new(
        ErrorKind::Unavailable,
        "the server is shutting down; the statement was cancelled",
    )
}

/// The jobs statements are waiting for.
#[derive(Default)]
pub(super) struct ActiveJobs {
    running: Mutex<HashSet<String>>,
    stopping: AtomicBool,
}

impl ActiveJobs {
    fn add(&self, job_id: &str) {
        if let Ok(mut running) = self.running.lock() {
            running.insert(job_id.to_string());
        }
    }

    fn remove(&self, job_id: &str) {
        if let Ok(mut running) = self.running.lock() {
            running.remove(job_id);
        }
    }

    fn running(&self) -> Vec<String> {
        self.running
            .lock()
            .map(|r| r.iter().cloned().collect())
            .unwrap_or_default()
    }
}

/// Cancels the job if the statement is dropped (client gone, deadline) before the job
/// finished.
struct CancelOnDrop {
    scheduler: Scheduler,
    jobs: Arc<ActiveJobs>,
    job_id: Option<String>,
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        if let Some(job_id) = self.job_id.take() {
            self.jobs.remove(&job_id);
            tokio::spawn(cancel_until_final(self.scheduler.clone(), job_id));
        }
    }
}

/// A cancel posted while the job is still being planned can be lost in Ballista 53,
/// so it is re-posted until the job is final.
async fn cancel_until_final(scheduler: Scheduler, job_id: String) {
    for _ in 0..500 {
        if scheduler.cancel_job(job_id.clone()).await.is_err() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
        let status = scheduler.state.task_manager.get_job_status(&job_id).await;
        if let Ok(Some(status)) = status
            && is_final(&status.status)
        {
            tracing::info!(job_id, "cancelled job");
            return;
        }
    }
}

/// Streams a finished job's result partitions from the executors that hold them, one
/// partition after the other, batch by batch.
pub fn fetch_results(
    schema: SchemaRef,
    locations: Vec<PartitionLocation>,
) -> SendableRecordBatchStream {
    let batches = futures::stream::iter(locations)
        .then(fetch_partition)
        .try_flatten();
    Box::pin(RecordBatchStreamAdapter::new(schema, batches))
}

async fn fetch_partition(
    location: PartitionLocation,
) -> datafusion::error::Result<SendableRecordBatchStream> {
    let executor = location
        .executor_meta
        .ok_or_else(|| DataFusionError::Internal("result partition without executor".into()))?;
    let partition_id: PartitionId = location
        .partition_id
        .ok_or_else(|| DataFusionError::Internal("result partition without id".into()))?
        .into();
    let mut client = BallistaClient::try_new(
        &executor.host,
        executor.port as u16,
        MAX_MESSAGE_SIZE,
        false,
        None,
        3,
        100,
    )
    .await
    .map_err(|e| DataFusionError::External(Box::new(e)))?;
    client
        .fetch_partition(
            &executor.id,
            &partition_id,
            location.file_id,
            location.is_sort_shuffle,
            true,
        )
        .await
        .map_err(|e| DataFusionError::External(Box::new(e)))
}
