//! Running a statement's plan as a Ballista job and reading what it produced.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ballista_core::client::BallistaClient;
use ballista_core::serde::protobuf::{JobStatus, PartitionLocation, job_status};
use ballista_core::serde::scheduler::PartitionId;
use ballista_scheduler::state::execution_stage::ExecutionStage;
use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::error::DataFusionError;
use datafusion::execution::SendableRecordBatchStream;
use datafusion::logical_expr::LogicalPlan;
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::prelude::SessionContext;
use futures::{StreamExt, TryStreamExt};
use tokio::sync::{mpsc, oneshot};

use super::held_outputs::held_outputs;
use super::result_files::{self, End, LivePartition, live};
use super::{Cluster, MAX_MESSAGE_SIZE, Scheduler, explain};
use crate::error::{ErrorKind, FloeError, Result};
use crate::ops::statements;

/// How often a query asks which result partitions remote executors have finished: at
/// first, and after each answer with news; it waits twice as long after each answer
/// without, up to [`REMOTE_POLL_MAX`] (asking copies the scheduler's running jobs).
const REMOTE_POLL: Duration = Duration::from_millis(25);
const REMOTE_POLL_MAX: Duration = Duration::from_millis(400);

/// A submitted job and its status updates; cancelled if dropped before it ends.
struct Submitted {
    job_id: String,
    status: mpsc::Receiver<JobStatus>,
    guard: CancelOnDrop,
}

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
        let mut job = self.submit(ctx, plan, name).await?;
        let status = self.final_status(&mut job).await?;
        self.outcome(&mut job, status)
    }

    /// Runs a query and streams its result batch by batch. Partitions that in-process
    /// executors write are streamed while they are written; the others once the job
    /// is done. Returns when the first batch is there or the job ended, or with the
    /// job's error if it failed before; a query that loses an executor before that runs
    /// once more. Past `deadline` (until the job ends) the job is cancelled and the
    /// stream fails; dropping the stream cancels the job too.
    pub async fn run_query(
        &self,
        ctx: &Arc<SessionContext>,
        plan: &LogicalPlan,
        schema: SchemaRef,
        deadline: Option<Deadline>,
    ) -> Result<SendableRecordBatchStream> {
        let mut attempt = 1;
        loop {
            match self.start_query(ctx, plan, schema.clone(), deadline).await {
                // Nothing has reached the client yet: the same plan (pinned to the same
                // snapshots) runs again on the executors that are left.
                Err(e) if e.message.starts_with(EXECUTOR_LOST) && attempt < QUERY_ATTEMPTS => {
                    tracing::warn!(attempt, "running the query again: {e}");
                    attempt += 1;
                }
                started => return started,
            }
        }
    }

    async fn start_query(
        &self,
        ctx: &Arc<SessionContext>,
        plan: &LogicalPlan,
        schema: SchemaRef,
        deadline: Option<Deadline>,
    ) -> Result<SendableRecordBatchStream> {
        let job = self.submit(ctx, plan, "query").await?;
        let live = live::subscribe(&job.job_id);
        let (out, mut batches) = mpsc::channel(2);
        let (ready, first_rows) = oneshot::channel();
        let stream = ResultStream {
            cluster: self.clone(),
            job,
            live,
            out,
            ready: Some(ready),
            streamed: HashSet::new(),
            final_stage: None,
        };
        // The stream works for the statement: in its scope (cancellation, log span).
        statements::spawn(stream.run(deadline));
        first_rows
            .await
            .map_err(|_| FloeError::internal("the result stream ended early"))??;
        let batches = futures::stream::poll_fn(move |cx| batches.poll_recv(cx));
        Ok(Box::pin(RecordBatchStreamAdapter::new(schema, batches)))
    }

    /// Runs `plan` to its end without reading its result, and describes how it ran:
    /// `(title, text)` rows, one for the job and one per stage with its operators'
    /// metrics (EXPLAIN ANALYZE). Dropping the future cancels the job.
    pub async fn explain_analyze(
        &self,
        ctx: &Arc<SessionContext>,
        plan: &LogicalPlan,
    ) -> Result<Vec<(String, String)>> {
        let started = Instant::now();
        let mut job = self.submit(ctx, plan, "explain analyze").await?;
        let status = self.final_status(&mut job).await?;
        self.outcome(&mut job, status)?;
        let elapsed = started.elapsed();
        let graph = self
            .job_state
            .get_execution_graph(&job.job_id)
            .await
            .map_err(|e| FloeError::internal(format!("reading the job's stages: {e}")))?
            .ok_or_else(|| FloeError::internal("the finished job's stages are gone"))?;
        Ok(explain::render(&graph, elapsed))
    }

    async fn submit(
        &self,
        ctx: &Arc<SessionContext>,
        plan: &LogicalPlan,
        name: &str,
    ) -> Result<Submitted> {
        if self.jobs.stopping.load(Ordering::SeqCst) {
            return Err(shutting_down());
        }
        if recurses(plan) {
            return Err(FloeError::unimplemented(
                "a recursive query (WITH RECURSIVE) runs only as a query of its own, on the \
                 coordinator: not inside INSERT, CREATE TABLE AS, DELETE, UPDATE, MERGE or \
                 EXPLAIN ANALYZE",
            ));
        }
        // The scheduler drops status updates when the channel is full: keep it roomy,
        // and ask the task manager when the channel closes without a final status.
        let (tx, status) = mpsc::channel::<JobStatus>(1024);
        let job_id = self
            .scheduler
            .submit_job(name, ctx.clone(), plan, Some(tx))
            .await
            .map_err(|e| FloeError::internal(format!("submitting the job: {e}")))?;
        self.jobs.add(&job_id);
        if held_outputs().may_hold() && self.has_remote_executors().await {
            held_outputs().release_to_files();
        }
        held_outputs().open_job(&job_id);
        statements::note_job(&job_id);
        if self.jobs.stopping.load(Ordering::SeqCst) {
            // Shutdown began while the job was being submitted.
            tokio::spawn(cancel_until_final(self.scheduler.clone(), job_id.clone()));
        }
        let guard = CancelOnDrop {
            scheduler: self.scheduler.clone(),
            jobs: self.jobs.clone(),
            job_id: Some(job_id.clone()),
        };
        Ok(Submitted {
            job_id,
            status,
            guard,
        })
    }

    /// Waits for the job's final status.
    async fn final_status(&self, job: &mut Submitted) -> Result<Option<job_status::Status>> {
        let mut watch = ExecutorWatch::default();
        let mut tick = tokio::time::interval(EXECUTOR_CHECK);
        loop {
            tokio::select! {
                update = job.status.recv() => match update {
                    Some(update) if is_final(&update.status) => return Ok(update.status),
                    Some(_) => {}
                    None => return self.job_status(&job.job_id).await,
                },
                _ = tick.tick() => watch.check(self, &job.job_id).await?,
                _ = statements::current_cancelled() => return Err(statements::killed()),
            }
        }
    }

    /// Where a finished job's result partitions are, in partition order; or its error.
    fn outcome(
        &self,
        job: &mut Submitted,
        status: Option<job_status::Status>,
    ) -> Result<Vec<PartitionLocation>> {
        job.guard.job_id = None;
        self.jobs.remove(&job.job_id);
        if self.jobs.stopping.load(Ordering::SeqCst)
            && !matches!(status, Some(job_status::Status::Successful(_)))
        {
            return Err(shutting_down());
        }
        match status {
            Some(job_status::Status::Successful(done)) => {
                let mut locations = done.partition_location;
                locations.sort_by_key(|l| l.partition_id.as_ref().map(|p| p.partition_id));
                Ok(locations)
            }
            Some(job_status::Status::Failed(failed)) => Err(failed_job_error(&failed.error)),
            // The scheduler failed while planning the job, for one (a panic).
            _ => Err(FloeError::internal(format!(
                "job {} ended without a status; the coordinator's log has the cause",
                job.job_id
            ))),
        }
    }

    /// A finished partition: its file if an in-process executor wrote it, or else from
    /// the executor that holds it.
    async fn read_partition(
        &self,
        location: PartitionLocation,
    ) -> datafusion::error::Result<SendableRecordBatchStream> {
        match self.local_results.find(&location) {
            Some(path) => result_files::read_file(path),
            None => fetch_partition(location).await,
        }
    }

    /// Whether executors other than the in-process ones are registered.
    async fn has_remote_executors(&self) -> bool {
        self.registered_executors().await > self.local_results.work_dir_count()
    }

    /// The result partitions of a running job whose tasks have finished.
    async fn result_locations(&self, job_id: &str) -> Vec<PartitionLocation> {
        let jobs = self.scheduler.state.task_manager.get_running_job_cache();
        let Some(job) = jobs.get(job_id) else {
            return Vec::new();
        };
        let locations = job.execution_graph.read().await.output_locations();
        locations
            .into_iter()
            .filter_map(|location| location.try_into().ok())
            .collect()
    }

    /// The stage whose output is the job's result, once the job is planned.
    pub(super) async fn result_stage(&self, job_id: &str) -> Option<usize> {
        let jobs = self.scheduler.state.task_manager.get_running_job_cache();
        let graph = jobs.get(job_id)?.execution_graph.read().await;
        graph
            .stages()
            .iter()
            .find(|(_, stage)| output_links(stage).is_empty())
            .map(|(id, _)| *id)
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

/// How a statement that lost an executor it depended on fails (the message's start).
const EXECUTOR_LOST: &str = "lost executor";

/// How many times a query whose executor was lost before its first row is run.
const QUERY_ATTEMPTS: usize = 2;

/// How often a running job checks that some executor is alive.
const EXECUTOR_CHECK: Duration = Duration::from_secs(1);

/// Fails a job that cannot finish right: one that has had no executor for longer than
/// `executor_wait_secs` (Ballista would keep it waiting for one forever), and one that
/// lost an executor it depended on. Ballista 53 re-runs a lost executor's tasks, but in
/// our tests the re-run job's answer was wrong (1.5x the rows): failing the job (and
/// running a query that sent nothing yet again, see `run_query`) is the safe outcome.
#[derive(Default)]
struct ExecutorWatch {
    none_since: Option<Instant>,
    /// The executors the job depended on at the last check.
    depends_on: HashSet<String>,
}

impl ExecutorWatch {
    async fn check(&mut self, cluster: &Cluster, job_id: &str) -> Result<()> {
        let alive = cluster.executor_ids().await;
        if alive.len() > cluster.local_results.work_dir_count() {
            held_outputs().release_to_files();
        }
        if let Some(lost) = self.depends_on.iter().find(|id| !alive.contains(*id)) {
            return Err(FloeError::unavailable(format!(
                "{EXECUTOR_LOST} {lost}: not heard from for executor_timeout_secs while the \
                 statement ran; the statement was cancelled and nothing was committed, \
                 retrying is safe"
            )));
        }
        self.depends_on = cluster.job_executors(job_id).await;
        if !alive.is_empty() {
            self.none_since = None;
            return Ok(());
        }
        let since = *self.none_since.get_or_insert_with(Instant::now);
        if since.elapsed() < cluster.executor_wait {
            return Ok(());
        }
        Err(FloeError::unavailable(format!(
            "no executor has been alive for {} s (executor_wait_secs); the statement was \
             cancelled",
            cluster.executor_wait.as_secs()
        )))
    }
}

/// How a task the scheduler cancelled fails its job. The scheduler cancels the running
/// tasks of the stages it rolls back when it loses an executor (ballista-scheduler
/// `remove_executor`), before our watch may have noticed the loss. The job's error is
/// then "Job failed due to stage N failed: Task failed due to runtime execution error:
/// Cancelled" and a newline, hence `contains`.
const TASK_CANCELLED: &str = "runtime execution error: Cancelled";

fn is_final(status: &Option<job_status::Status>) -> bool {
    matches!(
        status,
        Some(job_status::Status::Successful(_)) | Some(job_status::Status::Failed(_))
    )
}

/// A failed job's error, from the text Ballista's job status carries: the error a task
/// reported (with its kind), a cancellation, or an executor lost under a running stage.
pub fn failed_job_error(message: &str) -> FloeError {
    if let Some(error) = FloeError::from_task_report(message) {
        return error;
    }
    // Ballista's whole message for a job cancelled through its scheduler.
    if message == "Cancelled" {
        return FloeError::new(ErrorKind::Cancelled, "the statement was cancelled");
    }
    if message.contains(TASK_CANCELLED) {
        return FloeError::unavailable(format!(
            "{EXECUTOR_LOST}: the scheduler lost an executor while the statement ran and \
             cancelled its tasks; nothing was committed, retrying is safe"
        ));
    }
    // The scheduler could not plan the job physically: DataFusion says what it lacks.
    if let Some((_, lacking)) = message.split_once(NOT_IMPLEMENTED) {
        return FloeError::unimplemented(format!("not supported: {}", lacking.trim()));
    }
    FloeError::internal(message.trim().to_string())
}

/// How DataFusion's `NotImplemented` error starts.
const NOT_IMPLEMENTED: &str = "This feature is not implemented: ";

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
        held_outputs().close_job(job_id);
    }

    pub(super) fn running(&self) -> Vec<String> {
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

impl Cluster {
    /// Streams a finished job's result partitions, one partition after the other, batch
    /// by batch.
    pub fn fetch_results(
        &self,
        schema: SchemaRef,
        locations: Vec<PartitionLocation>,
    ) -> SendableRecordBatchStream {
        let cluster = self.clone();
        let batches = futures::stream::iter(locations)
            .then(move |location| {
                let cluster = cluster.clone();
                async move { cluster.read_partition(location).await }
            })
            .try_flatten();
        Box::pin(RecordBatchStreamAdapter::new(schema, batches))
    }
}

/// Sends a query's result partitions to its stream as they become readable.
struct ResultStream {
    cluster: Cluster,
    job: Submitted,
    live: live::Subscription,
    out: mpsc::Sender<datafusion::error::Result<RecordBatch>>,
    /// Told once the first batch is sent or the job ended, or of the error before.
    ready: Option<oneshot::Sender<Result<()>>>,
    /// The partitions already streamed (while they were written).
    streamed: HashSet<usize>,
    final_stage: Option<usize>,
}

impl ResultStream {
    async fn run(mut self, deadline: Option<Deadline>) {
        let reader_gone = self.out.clone();
        let result = tokio::select! {
            result = self.send_all(deadline) => result,
            // The job is cancelled as `self.job` drops.
            _ = reader_gone.closed() => return,
        };
        if let Err(error) = result {
            match self.ready.take() {
                Some(ready) => {
                    let _ = ready.send(Err(error));
                }
                None => {
                    let _ = self.out.send(Err(error.into())).await;
                }
            }
        }
    }

    /// Sends the result; past `deadline` (checked until the job ends) fails.
    async fn send_all(&mut self, deadline: Option<Deadline>) -> Result<()> {
        // Partitions written by in-process executors are read as they are written, all
        // at once (they would otherwise spill to files while they wait).
        let mut reading = futures::stream::SelectAll::new();
        let mut resolve_delay = Duration::from_millis(1);
        let mut remote_delay = REMOTE_POLL;
        let remote_poll = tokio::time::sleep(remote_delay);
        tokio::pin!(remote_poll);
        let remote_executors = self.cluster.has_remote_executors().await;
        let mut watch = ExecutorWatch::default();
        let mut executor_tick = tokio::time::interval(EXECUTOR_CHECK);
        let status = loop {
            tokio::select! {
                biased;
                update = self.job.status.recv() => match update {
                    Some(update) if is_final(&update.status) => break update.status,
                    Some(_) => {}
                    None => break self.cluster.job_status(&self.job.job_id).await?,
                },
                Some(batch) = reading.next() => match batch {
                    Ok(batch) => self.send(batch).await,
                    Err(e) => return Err(self.job_error_or(FloeError::from(e)).await),
                },
                Some(partition) = self.live.partitions.recv() => {
                    if let Some(batches) = self.accept(partition).await? {
                        reading.push(batches);
                    }
                }
                _ = executor_tick.tick() => watch.check(&self.cluster, &self.job.job_id).await?,
                _ = statements::current_cancelled() => return Err(statements::killed()),
                _ = sleep_until(deadline), if deadline.is_some() => {
                    let limit = deadline.map(|d| d.limit).unwrap_or_default();
                    return Err(FloeError::statement_timeout(limit));
                }
                _ = tokio::time::sleep(resolve_delay), if self.final_stage.is_none() => {
                    self.resolve_result_stage().await;
                    resolve_delay = (resolve_delay * 2).min(Duration::from_millis(50));
                }
                _ = &mut remote_poll, if remote_executors && self.final_stage.is_some() => {
                    let finished = self.finished_remote_partitions().await?;
                    remote_delay = if finished.is_empty() {
                        (remote_delay * 2).min(REMOTE_POLL_MAX)
                    } else {
                        REMOTE_POLL
                    };
                    reading.extend(finished);
                    remote_poll.as_mut().reset(tokio::time::Instant::now() + remote_delay);
                }
            }
        };
        let locations = self.cluster.outcome(&mut self.job, status)?;
        while let Ok(partition) = self.live.partitions.try_recv() {
            if let Some(batches) = self.accept(partition).await? {
                reading.push(batches);
            }
        }
        self.mark_ready();
        while let Some(batch) = reading.next().await {
            self.send(batch?).await;
        }
        for location in locations {
            let partition = location
                .partition_id
                .as_ref()
                .map(|p| p.partition_id as usize);
            if partition.is_some_and(|p| self.streamed.contains(&p)) {
                continue;
            }
            let mut batches = self.cluster.read_partition(location).await?;
            while let Some(batch) = batches.next().await {
                self.send(batch?).await;
            }
        }
        Ok(())
    }

    /// The job's own error (with its kind) once it ends, for a partition that failed
    /// while it was read: its task failed, which fails the job; else `error`.
    async fn job_error_or(&mut self, error: FloeError) -> FloeError {
        let status = match self.cluster.final_status(&mut self.job).await {
            Ok(status) => status,
            Err(_) => return error,
        };
        match self.cluster.outcome(&mut self.job, status) {
            Err(job_error) => job_error,
            Ok(_) => error,
        }
    }

    /// Streams of the result partitions that remote executors finished since last asked
    /// (in-process executors' partitions come through the subscription).
    async fn finished_remote_partitions(&mut self) -> Result<Vec<SendableRecordBatchStream>> {
        let mut streams = Vec::new();
        for location in self.cluster.result_locations(&self.job.job_id).await {
            let Some(partition) = location.partition_id.as_ref() else {
                continue;
            };
            let partition = partition.partition_id as usize;
            if self.streamed.contains(&partition)
                || self.cluster.local_results.find(&location).is_some()
            {
                continue;
            }
            self.streamed.insert(partition);
            streams.push(self.cluster.read_partition(location).await?);
        }
        Ok(streams)
    }

    /// Learns the job's result stage (once it is planned), so that its partitions come
    /// in memory.
    async fn resolve_result_stage(&mut self) {
        self.final_stage = self.cluster.result_stage(&self.job.job_id).await;
        if let Some(stage) = self.final_stage {
            self.live.set_result_stage(stage);
        }
    }

    /// The stream of a partition an in-process executor is writing, if it is one of
    /// the result's and not an attempt that failed before it was read (a retry or the
    /// job's failure follows).
    async fn accept(
        &mut self,
        partition: LivePartition,
    ) -> Result<Option<SendableRecordBatchStream>> {
        if self.final_stage.is_none() {
            self.resolve_result_stage().await;
        }
        if Some(partition.stage_id) != self.final_stage
            || partition.progress.end() == End::Failed
            || !self.streamed.insert(partition.partition)
        {
            return Ok(None);
        }
        Ok(Some(partition.read()?))
    }

    /// Sends a batch to the reader (who may be gone: the job is then cancelled).
    async fn send(&mut self, batch: RecordBatch) {
        let _ = self.out.send(Ok(batch)).await;
        self.mark_ready();
    }

    fn mark_ready(&mut self) {
        if let Some(ready) = self.ready.take() {
            let _ = ready.send(Ok(()));
        }
    }
}

/// Whether `plan` (or a subquery of it) recurses (`WITH RECURSIVE`). Ballista cannot
/// ship a recursive query's nodes to executors: its scheduler logs that it cannot encode
/// the task, and the job never ends.
pub fn recurses(plan: &LogicalPlan) -> bool {
    let mut found = false;
    let _ = plan.apply_with_subqueries(|node| {
        found = matches!(node, LogicalPlan::RecursiveQuery(_));
        Ok(match found {
            true => TreeNodeRecursion::Stop,
            false => TreeNodeRecursion::Continue,
        })
    });
    found
}

/// When a statement must end, and the limit it was given (for the error).
#[derive(Debug, Clone, Copy)]
pub struct Deadline {
    at: tokio::time::Instant,
    limit: Duration,
}

impl Deadline {
    /// `limit` from now.
    pub fn after(limit: Duration) -> Self {
        Self {
            at: tokio::time::Instant::now() + limit,
            limit,
        }
    }
}

async fn sleep_until(deadline: Option<Deadline>) {
    match deadline {
        Some(Deadline { at, .. }) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

fn output_links(stage: &ExecutionStage) -> &[usize] {
    match stage {
        ExecutionStage::UnResolved(s) => &s.output_links,
        ExecutionStage::Resolved(s) => &s.output_links,
        ExecutionStage::Running(s) => &s.output_links,
        ExecutionStage::Successful(s) => &s.output_links,
        ExecutionStage::Failed(s) => &s.output_links,
    }
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
    // The file's own (LZ4-compressed) bytes, rather than batches the executor decodes
    // and encodes again for Flight.
    let flight_transport = false;
    client
        .fetch_partition(
            &executor.id,
            &partition_id,
            location.file_id,
            location.is_sort_shuffle,
            flight_transport,
        )
        .await
        .map_err(|e| DataFusionError::External(Box::new(e)))
}
