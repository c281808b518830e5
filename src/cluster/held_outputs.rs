//! Stage outputs that `floe serve`'s in-process executors keep in memory instead of
//! writing them to files: hash-partitioned ones, and unpartitioned ones other than the
//! job's result (a broadcast join's side), which the coordinator reads as files.
//!
//! A shuffle written to a file costs a copy into the page cache and a copy out, and
//! encoding and decoding Arrow IPC; on this project's 2-core VM, writing the 170 MB
//! TPC-H q21 shuffles took 37% of its CPU (the kernel faulting in fresh page-cache pages).
//! The tasks that read a shuffle in the same process need none of it: the writer keeps
//! its batches here ([`HeldOutputs`]) and the readers ([`HeldFirstReaderExec`]) take them,
//! each reading the rest (anything not held) as Ballista's reader does.
//!
//! Held are only the outputs of jobs the coordinator opened ([`HeldOutputs::open_job`])
//! while no executor of another process could need to fetch them, up to a budget of
//! bytes (`shuffle_memory_mb`): a task whose outputs do not fit writes them all to files.
//! A job's outputs are dropped when the coordinator sees it end. A `floe executor`
//! process opens no job, so its outputs are always files, which other processes fetch
//! through its Flight service. When an executor of another process registers (before
//! the scheduler takes it), the held outputs are written to their files and nothing is
//! held any more; as a job starts, and every second while one runs, the coordinator
//! also checks for such executors.

use std::any::Any;
use std::collections::HashMap;
use std::fmt;
use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock, Mutex, MutexGuard};

use ballista_core::execution_plans::ShuffleReaderExec;
use ballista_core::serde::scheduler::PartitionLocation;
use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::arrow::ipc::writer::{IpcWriteOptions, StreamWriter};
use datafusion::common::Statistics;
use datafusion::error::Result as DfResult;
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::physical_plan::metrics::{ExecutionPlanMetricsSet, MetricBuilder, MetricsSet};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{DisplayAs, DisplayFormatType, ExecutionPlan, PlanProperties};
use futures::StreamExt;
use futures::future::BoxFuture;

/// A held output: a job's stage, output partition and, if the stage is hash-partitioned,
/// writing task (Ballista's file id).
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
pub(super) struct OutputKey {
    pub stage: usize,
    pub partition: usize,
    pub task: Option<u64>,
}

/// A job's result stage (`None`: not planned yet), as the coordinator's scheduler says.
pub(super) type ResultStageLookup =
    Arc<dyn Fn(String) -> BoxFuture<'static, Option<usize>> + Send + Sync>;

/// One held output, and the file it stands for (written if it must leave memory).
struct Held {
    batches: Arc<[RecordBatch]>,
    bytes: usize,
    file: PathBuf,
    schema: SchemaRef,
}

/// The stage outputs held in this process, by job.
pub(super) struct HeldOutputs {
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// Most bytes held at once; 0 holds nothing.
    budget: usize,
    /// How the in-process executors write their outputs, should held ones be written.
    options: IpcWriteOptions,
    /// The job's result stage is never held: the coordinator reads it as files.
    result_stage: Option<ResultStageLookup>,
    /// Whether the in-process executors have registered.
    local_registered: bool,
    /// Bytes held or reserved by writing tasks.
    used: usize,
    /// The jobs whose outputs may be held, and what they hold.
    jobs: HashMap<String, JobOutputs>,
}

#[derive(Default)]
struct JobOutputs {
    held: HashMap<OutputKey, Held>,
    /// Bytes held or reserved by the job's tasks (a failed task's reservation included,
    /// given back when the job closes).
    bytes: usize,
    /// The job's result stage, once looked up.
    result_stage: Option<usize>,
}

static HELD: LazyLock<HeldOutputs> = LazyLock::new(|| HeldOutputs {
    state: Mutex::new(State::default()),
});

/// This process's held outputs.
pub(super) fn held_outputs() -> &'static HeldOutputs {
    &HELD
}

impl HeldOutputs {
    fn state(&self) -> MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Sets the most bytes held at once, and how held outputs are written should they
    /// leave memory (the coordinator, as it starts its in-process executors).
    pub(super) fn configure(
        &self,
        budget: usize,
        options: IpcWriteOptions,
        result_stage: ResultStageLookup,
    ) {
        let mut state = self.state();
        state.budget = budget;
        state.options = options;
        state.result_stage = Some(result_stage);
    }

    /// Whether the output of an unpartitioned `stage` of `job` may be held: the job's
    /// tasks may hold outputs, and the stage is known not to be the job's result.
    pub(super) async fn holds_unpartitioned(&self, job: &str, stage: usize) -> bool {
        let lookup = {
            let state = self.state();
            let Some(outputs) = state.jobs.get(job) else {
                return false;
            };
            if state.used >= state.budget {
                return false;
            }
            if let Some(result_stage) = outputs.result_stage {
                return stage != result_stage;
            }
            state.result_stage.clone()
        };
        let Some(result_stage) = (match lookup {
            Some(lookup) => lookup(job.to_string()).await,
            None => None,
        }) else {
            return false;
        };
        if let Some(outputs) = self.state().jobs.get_mut(job) {
            outputs.result_stage = Some(result_stage);
        }
        stage != result_stage
    }

    /// The in-process executors have registered: any executor registering from now on is
    /// of another process.
    pub(super) fn local_executors_registered(&self) {
        self.state().local_registered = true;
    }

    /// An executor registers (the scheduler has not taken it yet).
    pub(super) fn note_registration(&self) {
        if self.state().local_registered {
            self.release_to_files();
        }
    }

    /// Whether outputs may be held at all (in-process executors, no executor of another
    /// process seen).
    pub(super) fn may_hold(&self) -> bool {
        self.state().budget > 0
    }

    /// Lets `job`'s tasks hold their outputs, if any may be held.
    pub(super) fn open_job(&self, job: &str) {
        let mut state = self.state();
        if state.budget > 0 {
            state.jobs.entry(job.to_string()).or_default();
        }
    }

    /// Drops what `job` holds; its tasks still running write files.
    pub(super) fn close_job(&self, job: &str) {
        let mut state = self.state();
        if let Some(outputs) = state.jobs.remove(job) {
            state.used = state.used.saturating_sub(outputs.bytes);
        }
    }

    /// Writes every held output to its file and holds nothing more: executors of other
    /// processes fetch outputs as files. The store stays locked meanwhile, so that no
    /// reader misses an output that is neither held nor written yet.
    pub(super) fn release_to_files(&self) {
        let mut state = self.state();
        if state.budget == 0 {
            return;
        }
        state.budget = 0;
        state.used = 0;
        tracing::info!("an executor of another process registered: stage outputs go to files");
        let jobs = std::mem::take(&mut state.jobs);
        for held in jobs.into_values().flat_map(|job| job.held.into_values()) {
            let written = write_file(&held.file, &held.schema, &held.batches, &state.options)
                .and_then(|mut writer| Ok(writer.finish()?));
            if let Err(e) = written {
                tracing::warn!("writing the held stage output {}: {e}", held.file.display());
            }
        }
    }

    /// Bytes held or reserved now.
    pub(super) fn bytes(&self) -> usize {
        self.state().used
    }

    /// Whether `job`'s tasks may hold their outputs.
    pub(super) fn holds_for(&self, job: &str) -> bool {
        let state = self.state();
        state.used < state.budget && state.jobs.contains_key(job)
    }

    /// Reserves `bytes` for a task of `job` about to hold them; false if the job may
    /// not hold outputs or the budget has no room.
    pub(super) fn reserve(&self, job: &str, bytes: usize) -> bool {
        let state = &mut *self.state();
        let fits = state.used.saturating_add(bytes) <= state.budget;
        match state.jobs.get_mut(job) {
            Some(outputs) if fits => {
                outputs.bytes += bytes;
                state.used += bytes;
                true
            }
            _ => false,
        }
    }

    /// Gives back bytes `job` reserved and does not hold.
    pub(super) fn unreserve(&self, job: &str, bytes: usize) {
        let state = &mut *self.state();
        if let Some(outputs) = state.jobs.get_mut(job) {
            outputs.bytes = outputs.bytes.saturating_sub(bytes);
            state.used = state.used.saturating_sub(bytes);
        }
    }

    /// Holds a task's output, its bytes reserved; gives the batches back if the job may
    /// hold nothing any more (its reservations went with it), to be written to the file.
    pub(super) fn hold(
        &self,
        job: &str,
        key: OutputKey,
        batches: Vec<RecordBatch>,
        bytes: usize,
        file: PathBuf,
        schema: SchemaRef,
    ) -> Option<Vec<RecordBatch>> {
        let state = &mut *self.state();
        let Some(outputs) = state.jobs.get_mut(job) else {
            return Some(batches);
        };
        let held = Held {
            batches: batches.into(),
            bytes,
            file,
            schema,
        };
        // A task run again replaces its earlier output.
        if let Some(replaced) = outputs.held.insert(key, held) {
            outputs.bytes = outputs.bytes.saturating_sub(replaced.bytes);
            state.used = state.used.saturating_sub(replaced.bytes);
        }
        None
    }

    /// The batches held for the output at `location`.
    fn get(&self, location: &PartitionLocation) -> Option<Arc<[RecordBatch]>> {
        let key = OutputKey {
            stage: location.partition_id.stage_id,
            partition: location.partition_id.partition_id,
            task: location.file_id,
        };
        let state = self.state();
        let outputs = state.jobs.get(&location.partition_id.job_id)?;
        outputs.held.get(&key).map(|held| held.batches.clone())
    }
}

/// Writes `batches` as an Arrow IPC file at `path`, where Ballista's readers find it.
pub(super) fn write_file(
    path: &Path,
    schema: &SchemaRef,
    batches: &[RecordBatch],
    options: &IpcWriteOptions,
) -> DfResult<StreamWriter<BufWriter<File>>> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)?;
    }
    let file = BufWriter::new(File::create(path)?);
    let mut writer = StreamWriter::try_new_with_options(file, schema, options.clone())?;
    for batch in batches {
        writer.write(batch)?;
    }
    Ok(writer)
}

/// Ballista's shuffle reader, reading the outputs held in this process from memory
/// first. It shows and measures as the reader it wraps.
#[derive(Debug)]
pub(super) struct HeldFirstReaderExec {
    reader: ShuffleReaderExec,
    metrics: ExecutionPlanMetricsSet,
}

impl HeldFirstReaderExec {
    pub(super) fn new(reader: ShuffleReaderExec) -> Self {
        Self {
            reader,
            metrics: ExecutionPlanMetricsSet::new(),
        }
    }
}

impl DisplayAs for HeldFirstReaderExec {
    fn fmt_as(&self, t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        self.reader.fmt_as(t, f)
    }
}

impl ExecutionPlan for HeldFirstReaderExec {
    fn name(&self) -> &str {
        self.reader.name()
    }

    fn as_any(&self) -> &dyn Any {
        self
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        self.reader.properties()
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        vec![]
    }

    fn with_new_children(
        self: Arc<Self>,
        _children: Vec<Arc<dyn ExecutionPlan>>,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        Ok(self)
    }

    fn execute(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> DfResult<SendableRecordBatchStream> {
        let index = if self.reader.broadcast { 0 } else { partition };
        let locations = self
            .reader
            .partition
            .get(index)
            .cloned()
            .unwrap_or_default();
        let mut held = Vec::new();
        let mut elsewhere = Vec::new();
        for location in locations {
            match held_outputs().get(&location) {
                Some(batches) => held.push(batches),
                None => elsewhere.push(location),
            }
        }
        let rows = MetricBuilder::new(&self.metrics).output_rows(partition);
        let held = held
            .into_iter()
            .flat_map(|batches| (0..batches.len()).map(move |i| batches[i].clone()))
            .map(move |batch| {
                rows.add(batch.num_rows());
                Ok(batch)
            });
        let held = futures::stream::iter(held);
        let stream = if elsewhere.is_empty() {
            held.boxed()
        } else {
            let mut rest = self.reader.clone();
            rest.partition[index] = elsewhere;
            held.chain(rest.execute(partition, context)?).boxed()
        };
        Ok(Box::pin(RecordBatchStreamAdapter::new(
            self.reader.schema(),
            stream,
        )))
    }

    fn metrics(&self) -> Option<MetricsSet> {
        let mut metrics = self.reader.metrics().unwrap_or_default();
        for metric in self.metrics.clone_inner().iter() {
            metrics.push(metric.clone());
        }
        Some(metrics)
    }

    fn partition_statistics(&self, partition: Option<usize>) -> DfResult<Statistics> {
        self.reader.partition_statistics(partition)
    }
}
