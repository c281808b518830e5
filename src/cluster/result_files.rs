//! Outputs of unpartitioned stages (a job's result among them): how executors write
//! them, and how the coordinator reads its in-process executors' results while they
//! are written.
//!
//! Executors write such an output as Ballista does (an Arrow IPC file where Ballista's
//! shuffle reads and its Flight service find it, compressed as the executor is told), through
//! [`ResultStageExec`]. A coordinator subscribed to a job ([`live`]) hears of each
//! partition its in-process executors start: it follows the file as it grows, and for
//! the job's result stage it takes the batches in memory first. A writer waits for the
//! coordinator only briefly ([`SPILL_AFTER`]): past that, the rest goes to the file, so
//! a stalled client holds disk, not an executor slot. Finished partitions of in-process
//! executors are read from their files ([`LocalResultFiles`]); remote ones through the
//! executor's Flight service. In-process executors keep the outputs of the other
//! unpartitioned stages (a broadcast join's side) in memory (`held_outputs`).

use std::fmt;
use std::fs::File;
use std::io::Write as _;
use std::io::{BufReader, BufWriter};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use ballista_core::execution_plans::{ShuffleReaderExec, create_shuffle_path};
use ballista_core::serde::protobuf::{PartitionLocation, ShuffleWritePartition};
use ballista_executor::execution_engine::QueryStageExecutor;
use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::arrow::ipc::reader::StreamReader;
use datafusion::arrow::ipc::writer::{IpcWriteOptions, StreamWriter};
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::error::{DataFusionError, Result as DfResult};
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::physical_plan::metrics::{ExecutionPlanMetricsSet, MetricBuilder, MetricsSet};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{EmptyRecordBatchStream, ExecutionPlan};
use futures::StreamExt;
use tokio::sync::mpsc;
use tokio::sync::mpsc::error::SendTimeoutError;

use crate::error::FloeError;

use super::held_outputs::{HeldFirstReaderExec, OutputKey, held_outputs};
use super::shuffle_files::{StageOutput, sliced_bytes};

/// How long a result batch may wait for room in the coordinator's memory queue before
/// it and the rest of its partition go to the file: a client reading steadily paces the
/// task, one that stalls frees it.
const SPILL_AFTER: Duration = Duration::from_millis(100);

/// Batches in flight between a plan and the thread writing or reading its file.
const CHANNEL_BATCHES: usize = 2;

/// A stage without output partitioning, writing its output where and as Ballista's
/// shuffle writer would, and telling a subscribed coordinator about it.
#[derive(Debug)]
pub(super) struct ResultStageExec {
    output: StageOutput,
    input: Arc<dyn ExecutionPlan>,
    metrics: ExecutionPlanMetricsSet,
}

impl ResultStageExec {
    pub(super) fn new(output: StageOutput, input: Arc<dyn ExecutionPlan>) -> DfResult<Self> {
        Ok(Self {
            input: with_local_reads(input, &output.work_dir)?,
            output,
            metrics: ExecutionPlanMetricsSet::new(),
        })
    }
}

impl fmt::Display for ResultStageExec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "ResultStageExec: job {} stage {}",
            self.output.job_id, self.output.stage_id
        )
    }
}

#[async_trait]
impl QueryStageExecutor for ResultStageExec {
    async fn execute_query_stage(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> DfResult<Vec<ShuffleWritePartition>> {
        let output_rows = MetricBuilder::new(&self.metrics).output_rows(partition);
        let mut input = self
            .input
            .execute(partition, context)
            .map_err(as_task_error)?;
        let (job, stage) = (&self.output.job_id, self.output.stage_id);
        if held_outputs().holds_unpartitioned(job, stage).await {
            match self.hold(partition, input).await? {
                Ok(held) => {
                    output_rows.add(held.num_rows as usize);
                    return Ok(vec![held]);
                }
                Err(to_file) => input = to_file,
            }
        }
        let path = self.output.file(partition, None)?;
        let schema = input.schema();
        let progress = Arc::new(Progress::default());
        let options = self.output.compression.ipc_options()?;
        let file = ResultFile::create(&path, &schema, options, progress.clone())?;
        // The coordinator's own result partitions go to it in memory while it keeps up,
        // to the file from the first batch it has no room for.
        let mut memory = live::publish(
            &self.output.job_id,
            self.output.stage_id,
            partition,
            path,
            progress,
        );
        let (tx, rx) = mpsc::channel(CHANNEL_BATCHES);
        let writer = tokio::task::spawn_blocking(move || file.write_all(rx));
        let (mut batches, mut rows) = (0u64, 0u64);
        let mut failed = None;
        while let Some(batch) = input.next().await {
            match batch {
                Ok(mut batch) => {
                    batches += 1;
                    rows += batch.num_rows() as u64;
                    if let Some(to_coordinator) = &memory {
                        match to_coordinator.send_timeout(batch, SPILL_AFTER).await {
                            Ok(()) => continue,
                            Err(
                                SendTimeoutError::Timeout(unsent)
                                | SendTimeoutError::Closed(unsent),
                            ) => {
                                batch = unsent;
                                memory = None;
                            }
                        }
                    }
                    if tx.send(Write::Batch(batch)).await.is_err() {
                        break;
                    }
                }
                Err(e) => {
                    failed = Some(e);
                    break;
                }
            }
        }
        if failed.is_none() {
            // Without this, the writer ends the file as failed: the task was dropped.
            let _ = tx.send(Write::End).await;
        }
        drop(tx);
        let written = writer
            .await
            .map_err(|e| FloeError::internal(format!("result writer: {e}")))?;
        if let Some(e) = failed {
            return Err(as_task_error(e));
        }
        output_rows.add(rows as usize);
        Ok(vec![ShuffleWritePartition {
            partition_id: partition as u64,
            num_batches: batches,
            num_rows: rows,
            num_bytes: written?,
            file_id: None,
            is_sort_shuffle: false,
        }])
    }

    fn collect_plan_metrics(&self) -> Vec<MetricsSet> {
        stage_metrics(&self.metrics, &self.input)
    }
}

impl ResultStageExec {
    /// Holds the partition's output in memory (`held_outputs`: the stage is not the
    /// job's result) while it fits; past that, gives back a stream of what it read and
    /// the rest, for the file.
    async fn hold(
        &self,
        partition: usize,
        mut input: SendableRecordBatchStream,
    ) -> DfResult<Result<ShuffleWritePartition, SendableRecordBatchStream>> {
        let (job, held) = (&self.output.job_id, held_outputs());
        let schema = input.schema();
        let (mut batches, mut bytes, mut rows) = (Vec::new(), 0, 0);
        while let Some(batch) = input.next().await {
            let batch = batch.map_err(as_task_error)?;
            let size = sliced_bytes(&batch);
            if !held.reserve(job, size) {
                held.unreserve(job, bytes);
                batches.push(batch);
                return Ok(Err(batches_then(schema, batches, input)));
            }
            bytes += size;
            rows += batch.num_rows();
            batches.push(batch);
        }
        let num_batches = batches.len() as u64;
        let key = OutputKey {
            stage: self.output.stage_id,
            partition,
            task: None,
        };
        let path = self.output.path(partition, None)?;
        if let Some(batches) = held.hold(job, key, batches, bytes, path, schema.clone()) {
            let nothing_more = Box::pin(EmptyRecordBatchStream::new(schema.clone()));
            return Ok(Err(batches_then(schema, batches, nothing_more)));
        }
        Ok(Ok(ShuffleWritePartition {
            partition_id: partition as u64,
            num_batches,
            num_rows: rows as u64,
            num_bytes: bytes as u64,
            file_id: None,
            is_sort_shuffle: false,
        }))
    }
}

/// `batches`, then what `rest` yields.
fn batches_then(
    schema: SchemaRef,
    batches: Vec<RecordBatch>,
    rest: SendableRecordBatchStream,
) -> SendableRecordBatchStream {
    let batches = futures::stream::iter(batches.into_iter().map(Ok));
    Box::pin(RecordBatchStreamAdapter::new(schema, batches.chain(rest)))
}

/// A stage's metrics as Ballista's writers report them: the writer's own, then those of
/// its plan.
pub(super) fn stage_metrics(
    writer: &ExecutionPlanMetricsSet,
    input: &Arc<dyn ExecutionPlan>,
) -> Vec<MetricsSet> {
    let mut all = vec![writer.clone_inner()];
    all.extend(ballista_core::utils::collect_plan_metrics(input.as_ref()));
    all
}

/// `plan` with its shuffle reads taking the outputs held in this process from memory
/// (`held_outputs`) and finding local files in this executor's `work_dir`, as Ballista's
/// engine sets them up.
pub(super) fn with_local_reads(
    plan: Arc<dyn ExecutionPlan>,
    work_dir: &str,
) -> DfResult<Arc<dyn ExecutionPlan>> {
    let plan = plan.transform(
        |plan| match plan.as_any().downcast_ref::<ShuffleReaderExec>() {
            Some(reader) => Ok(Transformed::yes(Arc::new(HeldFirstReaderExec::new(
                reader.with_work_dir(work_dir.to_string()),
            )) as Arc<dyn ExecutionPlan>)),
            None => Ok(Transformed::no(plan)),
        },
    )?;
    Ok(plan.data)
}

/// The error as Ballista's shuffle writer passes it on: its `Debug` text, which is what
/// carries a task report (`task_errors`).
pub(super) fn as_task_error(e: DataFusionError) -> DataFusionError {
    DataFusionError::Execution(format!("{e:?}"))
}

enum Write {
    Batch(RecordBatch),
    /// All batches were sent.
    End,
}

/// An output file being written: Arrow IPC, as Ballista writes stage outputs (compressed
/// as the executor is told), flushed after every batch so that a reader can follow it.
struct ResultFile {
    path: PathBuf,
    writer: StreamWriter<BufWriter<Counted<File>>>,
    progress: Arc<Progress>,
}

impl ResultFile {
    fn create(
        path: &Path,
        schema: &SchemaRef,
        options: IpcWriteOptions,
        progress: Arc<Progress>,
    ) -> DfResult<Self> {
        let file = Counted {
            inner: File::create(path)?,
            bytes: 0,
        };
        let writer = StreamWriter::try_new_with_options(BufWriter::new(file), schema, options)?;
        let mut file = Self {
            path: path.to_path_buf(),
            writer,
            progress,
        };
        file.flush(End::Open)?;
        Ok(file)
    }

    /// Writes what `rx` sends; returns the file's size. The file is marked complete only
    /// if the sender said so.
    fn write_all(mut self, mut rx: mpsc::Receiver<Write>) -> DfResult<u64> {
        let result = self.write_batches(&mut rx);
        if result.is_err() {
            self.progress.update(None, End::Failed);
        }
        result
    }

    fn write_batches(&mut self, rx: &mut mpsc::Receiver<Write>) -> DfResult<u64> {
        while let Some(message) = rx.blocking_recv() {
            match message {
                Write::Batch(batch) => {
                    self.writer.write(&batch)?;
                    self.flush(End::Open)?;
                }
                Write::End => {
                    self.writer.finish()?;
                    return self.flush(End::Complete);
                }
            }
        }
        Err(FloeError::internal(format!("the task writing {} stopped", self.path.display())).into())
    }

    fn flush(&mut self, end: End) -> DfResult<u64> {
        let buffered = self.writer.get_mut();
        buffered.flush()?;
        let bytes = buffered.get_ref().bytes;
        self.progress.update(Some(bytes), end);
        Ok(bytes)
    }
}

/// A writer that counts the bytes written through it.
struct Counted<W> {
    inner: W,
    bytes: u64,
}

impl<W: std::io::Write> std::io::Write for Counted<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.bytes += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

/// How far a file's writer got.
#[derive(Default)]
pub(super) struct Progress {
    state: Mutex<(u64, End)>,
    changed: Condvar,
}

#[derive(Clone, Copy, Default, PartialEq, Eq, Debug)]
pub(super) enum End {
    /// More may come.
    #[default]
    Open,
    Complete,
    Failed,
}

impl Progress {
    fn update(&self, bytes: Option<u64>, end: End) {
        if let Ok(mut state) = self.state.lock() {
            if let Some(bytes) = bytes {
                state.0 = bytes;
            }
            state.1 = end;
        }
        self.changed.notify_all();
    }

    pub(super) fn end(&self) -> End {
        self.state.lock().map(|s| s.1).unwrap_or(End::Failed)
    }

    /// Blocks until more than `read` bytes are written or the file has ended.
    fn wait_past(&self, read: u64) -> (u64, End) {
        let Ok(mut state) = self.state.lock() else {
            return (read, End::Failed);
        };
        while state.0 <= read && state.1 == End::Open {
            state = match self.changed.wait(state) {
                Ok(state) => state,
                Err(_) => return (read, End::Failed),
            };
        }
        *state
    }
}

impl Drop for ResultFile {
    fn drop(&mut self) {
        // A writer that ends without completing (a panic, an error) fails its file.
        if self.progress.end() == End::Open {
            self.progress.update(None, End::Failed);
        }
    }
}

/// A result partition being written by an in-process executor: the batches it sent in
/// memory, then the rest of its file as the file grows.
pub(super) struct LivePartition {
    pub stage_id: usize,
    pub partition: usize,
    path: PathBuf,
    pub progress: Arc<Progress>,
    memory: Option<mpsc::Receiver<RecordBatch>>,
}

impl LivePartition {
    /// Streams the partition, the file read on a blocking thread a few batches ahead;
    /// the stream fails if the writer does.
    pub(super) fn read(self) -> DfResult<SendableRecordBatchStream> {
        let file = Following {
            file: File::open(&self.path)?,
            read: 0,
            progress: self.progress,
        };
        let reader = open_reader(file)?;
        let schema = reader.schema();
        let Some(mut memory) = self.memory else {
            return Ok(Box::pin(RecordBatchStreamAdapter::new(
                schema,
                read_ahead(reader),
            )));
        };
        // The file is read (on a thread of its own) only once the memory queue is done.
        let from_memory = futures::stream::poll_fn(move |cx| memory.poll_recv(cx)).map(Ok);
        let from_file = futures::stream::once(async move { read_ahead(reader) }).flatten();
        Ok(Box::pin(RecordBatchStreamAdapter::new(
            schema,
            from_memory.chain(from_file),
        )))
    }
}

/// Reads a file only as far as its writer has flushed it, waiting for more.
struct Following {
    file: File,
    read: u64,
    progress: Arc<Progress>,
}

impl std::io::Read for Following {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let (written, end) = self.progress.wait_past(self.read);
        if written > self.read {
            let available = (written - self.read).min(buf.len() as u64) as usize;
            let n = self.file.read(&mut buf[..available])?;
            self.read += n as u64;
            return Ok(n);
        }
        match end {
            End::Failed => Err(std::io::Error::other("the task writing this result failed")),
            _ => Ok(0),
        }
    }
}

/// Subscriptions of the coordinator to the result partitions its in-process executors
/// write, per job. Executors in other processes publish into their own, empty, registry.
pub(super) mod live {
    use std::collections::HashMap;
    use std::path::PathBuf;
    use std::sync::{Arc, LazyLock, Mutex};

    use datafusion::arrow::array::RecordBatch;
    use tokio::sync::mpsc;

    use super::{LivePartition, Progress};

    /// Batches of one partition that may wait in memory for the coordinator.
    const MEMORY_BATCHES: usize = 16;

    struct Subscriber {
        partitions: mpsc::UnboundedSender<LivePartition>,
        /// The job's result stage, once the coordinator knows it.
        result_stage: Option<usize>,
    }

    static SUBSCRIBERS: LazyLock<Mutex<HashMap<String, Subscriber>>> =
        LazyLock::new(Default::default);

    /// The partitions written for a job from now on; ends with the subscription.
    pub struct Subscription {
        job_id: String,
        pub partitions: mpsc::UnboundedReceiver<LivePartition>,
    }

    pub fn subscribe(job_id: &str) -> Subscription {
        let (tx, partitions) = mpsc::unbounded_channel();
        if let Ok(mut subscribers) = SUBSCRIBERS.lock() {
            let subscriber = Subscriber {
                partitions: tx,
                result_stage: None,
            };
            subscribers.insert(job_id.to_string(), subscriber);
        }
        Subscription {
            job_id: job_id.to_string(),
            partitions,
        }
    }

    impl Subscription {
        /// From now on, partitions of `stage` come with their batches in memory.
        pub fn set_result_stage(&self, stage: usize) {
            if let Ok(mut subscribers) = SUBSCRIBERS.lock()
                && let Some(subscriber) = subscribers.get_mut(&self.job_id)
            {
                subscriber.result_stage = Some(stage);
            }
        }
    }

    /// Tells the job's subscriber (if any) about a partition whose file was created;
    /// returns where to send its batches in memory if the subscriber reads them so: only
    /// partitions of the job's result stage, whose every batch the coordinator reads.
    pub(super) fn publish(
        job_id: &str,
        stage_id: usize,
        partition: usize,
        path: PathBuf,
        progress: Arc<Progress>,
    ) -> Option<mpsc::Sender<RecordBatch>> {
        let subscribers = SUBSCRIBERS.lock().ok()?;
        let subscriber = subscribers.get(job_id)?;
        let (to_memory, memory) = if subscriber.result_stage == Some(stage_id) {
            let (tx, rx) = mpsc::channel(MEMORY_BATCHES);
            (Some(tx), Some(rx))
        } else {
            (None, None)
        };
        let live = LivePartition {
            stage_id,
            partition,
            path,
            progress,
            memory,
        };
        subscriber.partitions.send(live).ok()?;
        to_memory
    }

    impl Drop for Subscription {
        fn drop(&mut self) {
            if let Ok(mut subscribers) = SUBSCRIBERS.lock() {
                subscribers.remove(&self.job_id);
            }
        }
    }
}

/// The work directories of the coordinator's in-process executors.
#[derive(Default)]
pub(super) struct LocalResultFiles {
    work_dirs: Mutex<Vec<PathBuf>>,
}

impl LocalResultFiles {
    pub(super) fn add_work_dir(&self, dir: PathBuf) {
        if let Ok(mut dirs) = self.work_dirs.lock() {
            dirs.push(dir);
        }
    }

    pub(super) fn work_dir_count(&self) -> usize {
        self.work_dirs.lock().map(|dirs| dirs.len()).unwrap_or(0)
    }

    pub(super) fn take_work_dirs(&self) -> Vec<PathBuf> {
        self.work_dirs
            .lock()
            .map(|mut dirs| std::mem::take(&mut *dirs))
            .unwrap_or_default()
    }

    /// The file of a finished partition, if an in-process executor wrote it.
    pub(super) fn find(&self, location: &PartitionLocation) -> Option<PathBuf> {
        let id = location.partition_id.as_ref()?;
        let dirs = self.work_dirs.lock().ok()?;
        dirs.iter().find_map(|dir| {
            let path = create_shuffle_path(
                dir,
                &id.job_id,
                id.stage_id as usize,
                id.partition_id as usize,
                location.file_id,
                location.is_sort_shuffle,
            )
            .ok()?;
            path.is_file().then_some(path)
        })
    }
}

/// Streams a finished Arrow IPC file.
pub(super) fn read_file(path: PathBuf) -> DfResult<SendableRecordBatchStream> {
    let reader = open_reader(File::open(&path)?)?;
    Ok(Box::pin(RecordBatchStreamAdapter::new(
        reader.schema(),
        read_ahead(reader),
    )))
}

/// A reader of an Arrow IPC stream, having read its schema (which a result file has
/// from its creation, before it is published).
fn open_reader<R: std::io::Read>(file: R) -> DfResult<StreamReader<BufReader<R>>> {
    Ok(StreamReader::try_new(
        BufReader::with_capacity(1 << 20, file),
        None,
    )?)
}

/// The reader's batches, read on a blocking thread a few batches ahead.
fn read_ahead<R: std::io::Read + Send + 'static>(
    reader: StreamReader<BufReader<R>>,
) -> impl futures::Stream<Item = DfResult<RecordBatch>> + Send {
    let (tx, mut rx) = mpsc::channel(CHANNEL_BATCHES);
    tokio::task::spawn_blocking(move || {
        for batch in reader {
            let batch = batch.map_err(|e| DataFusionError::ArrowError(Box::new(e), None));
            if tx.blocking_send(batch).is_err() {
                return;
            }
        }
    });
    futures::stream::poll_fn(move |cx| rx.poll_recv(cx))
}
