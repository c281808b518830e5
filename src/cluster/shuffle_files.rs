//! Outputs of hash-partitioned stages (shuffles): how executors write them.
//!
//! A task hashes its rows to the stage's output partitions as Ballista's hash shuffle
//! writer does (DataFusion's `BatchPartitioner`: every stage feeding one join hashes a
//! key alike) and writes one Arrow IPC file per output partition, where Ballista's
//! shuffle reads (local files, or the executor's Flight service) find it. Unlike
//! Ballista's writers:
//!
//! - the files are compressed as the executor is told ([`ShuffleCompression`]): not at
//!   all by default in `floe serve`'s in-process executors, whose outputs the tasks and
//!   the coordinator of the same machine read from the page cache (LZ4 took 12% of the
//!   CPU of TPC-H SF1 on two cores there: 8.6% compressing, 3.5% decompressing); LZ4 by
//!   default in `floe executor`, whose outputs other machines fetch as the bytes of the
//!   file (Ballista's block transport);
//! - each partition's rows are gathered into batches of the session's batch size, so
//!   that many output partitions do not hand the next stage many small batches;
//! - a task holds at most [`MAX_GATHERED_BYTES`] of such rows, so nothing spills;
//! - in `floe serve`'s in-process executors the outputs stay in memory while they fit
//!   the budget (`held_outputs`), read from there by the tasks of the same process.

use std::fs::File;
use std::io::BufWriter;
use std::path::PathBuf;
use std::sync::Arc;

use async_trait::async_trait;
use ballista_core::execution_plans::create_shuffle_path;
use ballista_core::serde::protobuf::ShuffleWritePartition;
use ballista_executor::execution_engine::QueryStageExecutor;
use datafusion::arrow::array::{ArrayRef, AsArray, RecordBatch};
use datafusion::arrow::compute::BatchCoalescer;
use datafusion::arrow::datatypes::{DataType, SchemaRef};
use datafusion::arrow::ipc::CompressionType;
use datafusion::arrow::ipc::writer::{IpcWriteOptions, StreamWriter};
use datafusion::error::Result as DfResult;
use datafusion::execution::TaskContext;
use datafusion::physical_plan::metrics::{
    Count, ExecutionPlanMetricsSet, MetricBuilder, MetricsSet, Time,
};
use datafusion::physical_plan::repartition::BatchPartitioner;
use datafusion::physical_plan::{ExecutionPlan, PhysicalExpr};
use futures::StreamExt;
use tokio::sync::mpsc;

use crate::error::FloeError;

use super::held_outputs::{OutputKey, held_outputs, write_file};
use super::result_files::{as_task_error, stage_metrics, with_local_reads};

/// Batches in flight between a task's plan and the thread writing its files.
const CHANNEL_BATCHES: usize = 2;

/// Most a task holds of rows it gathers into full batches, in bytes (estimated from the
/// size of the rows it received): past it, the partition holding the most rows is
/// written as it is. Many output partitions of wide rows would otherwise hold up to a
/// batch each.
const MAX_GATHERED_BYTES: usize = 32 * 1024 * 1024;

/// How executors compress the stage outputs they write (`--shuffle-compression`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ShuffleCompression {
    /// Plain Arrow IPC: least CPU; the files (and what other machines fetch) take the
    /// Arrow size of the rows.
    #[default]
    None,
    /// LZ4 frames, as Ballista writes: smaller files for some CPU.
    Lz4,
    /// Zstandard: smallest files, most CPU.
    Zstd,
}

impl ShuffleCompression {
    pub(super) fn ipc_options(self) -> DfResult<IpcWriteOptions> {
        let codec = match self {
            Self::None => None,
            Self::Lz4 => Some(CompressionType::LZ4_FRAME),
            Self::Zstd => Some(CompressionType::ZSTD),
        };
        Ok(IpcWriteOptions::default().try_with_compression(codec)?)
    }
}

/// A stage whose output is hash-partitioned: one task's files, one per output partition
/// that gets rows.
#[derive(Debug)]
pub(super) struct PartitionedStageExec {
    output: StageOutput,
    input: Arc<dyn ExecutionPlan>,
    keys: Vec<Arc<dyn PhysicalExpr>>,
    partitions: usize,
    metrics: ExecutionPlanMetricsSet,
}

/// Where and how a stage's tasks write their output: the stage, the executor's work
/// directory, and the compression.
#[derive(Clone, Debug)]
pub(super) struct StageOutput {
    pub job_id: String,
    pub stage_id: usize,
    pub work_dir: String,
    pub compression: ShuffleCompression,
}

impl StageOutput {
    /// The file of output `partition` (written by task `task` if the stage is
    /// partitioned), where Ballista's shuffle reads look for it; its directory is made.
    pub(super) fn file(&self, partition: usize, task: Option<usize>) -> DfResult<PathBuf> {
        let path = self.path(partition, task)?;
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        Ok(path)
    }

    pub(super) fn path(&self, partition: usize, task: Option<usize>) -> DfResult<PathBuf> {
        create_shuffle_path(
            &self.work_dir,
            &self.job_id,
            self.stage_id,
            partition,
            task.map(|task| task as u64),
            false,
        )
    }
}

impl PartitionedStageExec {
    pub(super) fn new(
        output: StageOutput,
        input: Arc<dyn ExecutionPlan>,
        keys: Vec<Arc<dyn PhysicalExpr>>,
        partitions: usize,
    ) -> DfResult<Self> {
        Ok(Self {
            input: with_local_reads(input, &output.work_dir)?,
            output,
            keys,
            partitions,
            metrics: ExecutionPlanMetricsSet::new(),
        })
    }
}

impl std::fmt::Display for PartitionedStageExec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "PartitionedStageExec: job {} stage {} into {} partitions",
            self.output.job_id, self.output.stage_id, self.partitions
        )
    }
}

#[async_trait]
impl QueryStageExecutor for PartitionedStageExec {
    async fn execute_query_stage(
        &self,
        input_partition: usize,
        context: Arc<TaskContext>,
    ) -> DfResult<Vec<ShuffleWritePartition>> {
        let metrics = WriteMetrics::new(&self.metrics, input_partition);
        let files = PartitionFiles {
            holding: held_outputs().holds_for(&self.output.job_id),
            output: self.output.clone(),
            task: input_partition,
            schema: self.input.schema(),
            options: self.output.compression.ipc_options()?,
            batch_size: context.session_config().batch_size(),
            outputs: (0..self.partitions).map(|_| None).collect(),
            gathered_rows: 0,
            row_bytes: 0,
            metrics: metrics.clone(),
        };
        let mut input = self
            .input
            .execute(input_partition, context)
            .map_err(as_task_error)?;
        let (tx, rx) = mpsc::channel(CHANNEL_BATCHES);
        let partitioner = BatchPartitioner::new_hash_partitioner(
            self.keys.clone(),
            self.partitions,
            metrics.repart_time.clone(),
        );
        let writer = tokio::task::spawn_blocking(move || files.write_all(partitioner, rx));
        let mut failed = None;
        while let Some(batch) = input.next().await {
            match batch {
                Ok(batch) => {
                    metrics.input_rows.add(batch.num_rows());
                    if tx.send(batch).await.is_err() {
                        break;
                    }
                }
                Err(e) => {
                    failed = Some(e);
                    break;
                }
            }
        }
        drop(tx);
        let written = writer
            .await
            .map_err(|e| FloeError::internal(format!("shuffle writer: {e}")))?;
        match failed {
            Some(e) => Err(as_task_error(e)),
            None => written,
        }
    }

    fn collect_plan_metrics(&self) -> Vec<MetricsSet> {
        stage_metrics(&self.metrics, &self.input)
    }
}

/// The metrics Ballista's shuffle writer reports, by the same names.
#[derive(Clone)]
struct WriteMetrics {
    input_rows: Count,
    output_rows: Count,
    repart_time: Time,
    write_time: Time,
}

impl WriteMetrics {
    fn new(metrics: &ExecutionPlanMetricsSet, partition: usize) -> Self {
        Self {
            input_rows: MetricBuilder::new(metrics).counter("input_rows", partition),
            output_rows: MetricBuilder::new(metrics).output_rows(partition),
            repart_time: MetricBuilder::new(metrics).subset_time("repart_time", partition),
            write_time: MetricBuilder::new(metrics).subset_time("write_time", partition),
        }
    }
}

/// One task's output files, written on a blocking thread.
struct PartitionFiles {
    /// Whether the outputs are held in memory (until one does not fit).
    holding: bool,
    output: StageOutput,
    /// The task's input partition.
    task: usize,
    schema: SchemaRef,
    options: IpcWriteOptions,
    batch_size: usize,
    /// Per output partition, once it has rows.
    outputs: Vec<Option<PartitionFile>>,
    /// Rows gathered (received, not yet written) over all partitions.
    gathered_rows: usize,
    /// Bytes of a received row, as of the last batch.
    row_bytes: usize,
    metrics: WriteMetrics,
}

struct PartitionFile {
    path: PathBuf,
    pending: BatchCoalescer,
    sink: Sink,
    batches: u64,
    rows: u64,
}

/// Where an output's batches go.
enum Sink {
    /// Held in memory, with the bytes reserved for them.
    Held(Vec<RecordBatch>, usize),
    File(StreamWriter<BufWriter<File>>),
}

impl PartitionFiles {
    /// Writes the batches `rx` sends, routed by `partitioner`, until it closes; returns
    /// the files written.
    fn write_all(
        mut self,
        mut partitioner: BatchPartitioner,
        mut rx: mpsc::Receiver<RecordBatch>,
    ) -> DfResult<Vec<ShuffleWritePartition>> {
        while let Some(batch) = rx.blocking_recv() {
            self.row_bytes = sliced_bytes(&batch) / batch.num_rows().max(1);
            partitioner.partition(batch, |partition, rows| self.add(partition, rows))?;
            self.write_largest_while_over_budget()?;
        }
        self.finish()
    }

    fn add(&mut self, partition: usize, rows: RecordBatch) -> DfResult<()> {
        let write_time = self.metrics.write_time.clone();
        let _timer = write_time.timer();
        if self.outputs[partition].is_none() {
            self.outputs[partition] = Some(self.create(partition)?);
        }
        let Some(output) = &mut self.outputs[partition] else {
            return Ok(());
        };
        let before = output.pending.get_buffered_rows();
        output.pending.push_batch(rows)?;
        let fits = output.write_completed(&self.output, &self.metrics)?;
        self.gathered_rows =
            (self.gathered_rows + output.pending.get_buffered_rows()).saturating_sub(before);
        self.write_files_unless(fits)
    }

    /// Once an output does not fit the budget of held outputs, all of the task's
    /// outputs go to files.
    fn write_files_unless(&mut self, fits: bool) -> DfResult<()> {
        if fits || !self.holding {
            return Ok(());
        }
        self.holding = false;
        for output in self.outputs.iter_mut().flatten() {
            output.write_to_file(&self.output, &self.schema, &self.options)?;
        }
        Ok(())
    }

    fn write_largest_while_over_budget(&mut self) -> DfResult<()> {
        while self.gathered_rows.saturating_mul(self.row_bytes) > MAX_GATHERED_BYTES {
            let largest = self
                .outputs
                .iter_mut()
                .flatten()
                .max_by_key(|output| output.pending.get_buffered_rows());
            let Some(output) = largest else {
                return Ok(());
            };
            let write_time = self.metrics.write_time.clone();
            let _timer = write_time.timer();
            let rows = output.pending.get_buffered_rows();
            output.pending.finish_buffered_batch()?;
            let fits = output.write_completed(&self.output, &self.metrics)?;
            self.write_files_unless(fits)?;
            if rows == 0 {
                self.gathered_rows = 0;
                return Ok(());
            }
            self.gathered_rows = self.gathered_rows.saturating_sub(rows);
        }
        Ok(())
    }

    fn create(&self, partition: usize) -> DfResult<PartitionFile> {
        let path = self.output.path(partition, Some(self.task))?;
        let sink = match self.holding {
            true => Sink::Held(Vec::new(), 0),
            false => Sink::File(write_file(&path, &self.schema, &[], &self.options)?),
        };
        Ok(PartitionFile {
            sink,
            pending: BatchCoalescer::new(self.schema.clone(), self.batch_size)
                .with_biggest_coalesce_batch_size(Some(self.batch_size / 2)),
            path,
            batches: 0,
            rows: 0,
        })
    }

    fn finish(self) -> DfResult<Vec<ShuffleWritePartition>> {
        let _timer = self.metrics.write_time.timer();
        let mut written = Vec::new();
        for (partition, output) in self.outputs.into_iter().enumerate() {
            let Some(mut output) = output else {
                continue;
            };
            output.pending.finish_buffered_batch()?;
            if !output.write_completed(&self.output, &self.metrics)? {
                output.write_to_file(&self.output, &self.schema, &self.options)?;
            }
            let num_bytes = match output.sink {
                Sink::File(mut writer) => {
                    writer.finish()?;
                    std::fs::metadata(&output.path)?.len()
                }
                Sink::Held(batches, bytes) => {
                    let key = OutputKey {
                        stage: self.output.stage_id,
                        partition,
                        task: Some(self.task as u64),
                    };
                    let (job, schema) = (&self.output.job_id, self.schema.clone());
                    let path = output.path.clone();
                    match held_outputs().hold(job, key, batches, bytes, path, schema) {
                        None => bytes as u64,
                        Some(batches) => {
                            write_file(&output.path, &self.schema, &batches, &self.options)?
                                .finish()?;
                            std::fs::metadata(&output.path)?.len()
                        }
                    }
                }
            };
            written.push(ShuffleWritePartition {
                partition_id: partition as u64,
                num_batches: output.batches,
                num_rows: output.rows,
                num_bytes,
                file_id: Some(self.task as u64),
                is_sort_shuffle: false,
            });
        }
        Ok(written)
    }
}

/// The bytes of `batch`'s rows. An aggregate emits slices of one large batch, and each
/// slice's `get_array_memory_size` counts the whole of the buffers they share (a partial
/// aggregate of 1.5 M groups reports 4.4 GB over its 184 slices); this counts what the
/// slices span, and for string and binary views the long values they point to.
pub(super) fn sliced_bytes(batch: &RecordBatch) -> usize {
    batch.columns().iter().map(column_bytes).sum()
}

fn column_bytes(column: &ArrayRef) -> usize {
    let pointed_to = match column.data_type() {
        DataType::Utf8View => column.as_string_view().total_buffer_bytes_used(),
        DataType::BinaryView => column.as_binary_view().total_buffer_bytes_used(),
        _ => 0,
    };
    match column.to_data().get_slice_memory_size() {
        Ok(spanned) => spanned + pointed_to,
        Err(_) => column.get_array_memory_size(),
    }
}

impl PartitionFile {
    /// Writes (or holds) the batches completed so far; false if a batch to hold did not
    /// fit the budget (it is kept, to be written to the file).
    fn write_completed(&mut self, output: &StageOutput, metrics: &WriteMetrics) -> DfResult<bool> {
        let mut fits = true;
        while let Some(batch) = self.pending.next_completed_batch() {
            self.batches += 1;
            self.rows += batch.num_rows() as u64;
            metrics.output_rows.add(batch.num_rows());
            match &mut self.sink {
                Sink::File(writer) => writer.write(&batch)?,
                Sink::Held(batches, reserved) => {
                    let bytes = sliced_bytes(&batch);
                    if fits && held_outputs().reserve(&output.job_id, bytes) {
                        *reserved += bytes;
                    } else {
                        fits = false;
                    }
                    batches.push(batch);
                }
            }
        }
        Ok(fits)
    }

    /// Writes the held batches to the file, which takes the rest; gives their
    /// reservation back.
    fn write_to_file(
        &mut self,
        output: &StageOutput,
        schema: &SchemaRef,
        options: &IpcWriteOptions,
    ) -> DfResult<()> {
        if let Sink::Held(batches, reserved) = &self.sink {
            let writer = write_file(&self.path, schema, batches, options)?;
            held_outputs().unreserve(&output.job_id, *reserved);
            self.sink = Sink::File(writer);
        }
        Ok(())
    }
}
