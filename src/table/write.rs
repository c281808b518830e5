//! The distributed write: each executor task writes its input partition as Parquet
//! data files and emits one descriptor row per file. Nothing is committed here; the
//! coordinator commits all descriptors of the job at once (see `commit`). Which files a
//! write may create and who deletes them is set down in `write_protocol`.

use std::any::Any;
use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex};

use datafusion::arrow::array::{ArrayRef, Int32Array, RecordBatch, StringArray};
use datafusion::arrow::compute::SortOptions;
use datafusion::arrow::compute::kernels::partition::partition;
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::common::{Result as DfResult, internal_err};
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::parquet::basic::{Compression, GzipLevel, ZstdLevel};
use datafusion::parquet::file::properties::WriterProperties;
use datafusion::physical_expr::{
    EquivalenceProperties, LexRequirement, OrderingRequirements, PhysicalExpr,
    PhysicalSortRequirement,
};
use datafusion::physical_plan::Distribution;
use datafusion::physical_plan::execution_plan::{Boundedness, EmissionType};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, ExecutionPlanProperties, Partitioning,
    PlanProperties,
};
use futures::StreamExt;
use iceberg::arrow::RecordBatchPartitionSplitter;
use iceberg::io::FileIO;
use iceberg::spec::PartitionKey;
use iceberg::spec::{
    DataFile, DataFileFormat, FormatVersion, PartitionSpecRef, SchemaRef as IcebergSchemaRef,
    StructType, serialize_data_file_to_json,
};
use iceberg::writer::base_writer::data_file_writer::DataFileWriterBuilder;
use iceberg::writer::file_writer::ParquetWriterBuilder;
use iceberg::writer::file_writer::location_generator::{
    DefaultFileNameGenerator, LocationGenerator,
};
use iceberg::writer::file_writer::rolling_writer::RollingFileWriterBuilder;
use iceberg::writer::partitioning::PartitioningWriter;
use iceberg::writer::partitioning::clustered_writer::ClusteredWriter;
use iceberg::writer::partitioning::fanout_writer::FanoutWriter;
use iceberg::writer::partitioning::unpartitioned_writer::UnpartitionedWriter;

use super::write_protocol::RunningTask;
use super::{arrow_schema, transforms};
use crate::arrow_compat::conform_array;
use crate::catalog::StorageSpec;
use crate::error::{FloeError, Result, iceberg_to_df};

/// Descriptor columns: the data file as Iceberg JSON, and the spec id it was written for.
pub const DATA_FILE_COLUMN: &str = "data_file";
pub const SPEC_ID_COLUMN: &str = "spec_id";

pub fn descriptor_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new(DATA_FILE_COLUMN, DataType::Utf8, false),
        Field::new(SPEC_ID_COLUMN, DataType::Int32, false),
    ]))
}

/// Everything a write task needs, as plain data (it crosses to executors).
#[derive(Clone)]
pub struct WriteSpec {
    pub table: String,
    pub schema: IcebergSchemaRef,
    pub partition_spec: PartitionSpecRef,
    pub storage: StorageSpec,
    /// The write's own directory (`write_protocol::write_location`): its files go
    /// there and nowhere else.
    pub data_location: String,
    /// Unique per statement; every data file name starts with it.
    pub write_id: String,
    pub format_version: FormatVersion,
    pub target_file_size_bytes: u64,
    pub parquet: ParquetSettings,
    /// Each task's rows arrive sorted by partition and are written one partition at a
    /// time (one open file per task); else each task keeps a file open per partition
    /// value it sees (fanout).
    pub clustered: bool,
}

impl fmt::Debug for WriteSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WriteSpec")
            .field("table", &self.table)
            .field("write_id", &self.write_id)
            .field("spec_id", &self.partition_spec.spec_id())
            .field("storage", &self.storage)
            .finish()
    }
}

#[derive(Debug)]
pub struct IcebergWriteExec {
    input: Arc<dyn ExecutionPlan>,
    pub spec: Arc<WriteSpec>,
    table_schema: SchemaRef,
    properties: Arc<PlanProperties>,
    /// The input's partition value columns, which it is hash-distributed on (see
    /// `transforms::with_partition_values`); none for an unpartitioned table.
    partition_values: Vec<Arc<dyn PhysicalExpr>>,
}

impl IcebergWriteExec {
    pub fn try_new(input: Arc<dyn ExecutionPlan>, spec: Arc<WriteSpec>) -> Result<Self> {
        let table_schema = arrow_schema(&spec.schema)?;
        let partition_values = transforms::partition_value_columns(&input.schema());
        if input.schema().fields().len() != table_schema.fields().len() + partition_values.len() {
            return Err(FloeError::invalid(format!(
                "INSERT into {} provides {} columns, the table has {}",
                spec.table,
                input.schema().fields().len(),
                table_schema.fields().len()
            )));
        }
        let properties = Arc::new(PlanProperties::new(
            EquivalenceProperties::new(descriptor_schema()),
            Partitioning::UnknownPartitioning(input.output_partitioning().partition_count()),
            EmissionType::Final,
            Boundedness::Bounded,
        ));
        Ok(Self {
            input,
            spec,
            table_schema,
            properties,
            partition_values,
        })
    }
}

impl DisplayAs for IcebergWriteExec {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        write!(
            f,
            "IcebergWriteExec: table={}, write_id={}",
            self.spec.table, self.spec.write_id
        )
    }
}

impl ExecutionPlan for IcebergWriteExec {
    fn name(&self) -> &str {
        "IcebergWriteExec"
    }

    fn as_any(&self) -> &dyn Any {
        self
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        &self.properties
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        vec![&self.input]
    }

    fn benefits_from_input_partitioning(&self) -> Vec<bool> {
        vec![false]
    }

    /// One task per partition value: each value's rows go to one file (or one run of
    /// rolled files) instead of one per task.
    /// Clustered: sorted by partition, so one file is open at a time. A requirement,
    /// not a sort in the plan, so the optimizer cannot drop it.
    fn required_input_ordering(&self) -> Vec<Option<OrderingRequirements>> {
        if !self.spec.clustered {
            return vec![None];
        }
        let by_partition = self
            .partition_values
            .iter()
            .map(|value| PhysicalSortRequirement::new(value.clone(), Some(SortOptions::default())));
        vec![LexRequirement::new(by_partition).map(OrderingRequirements::new)]
    }

    fn required_input_distribution(&self) -> Vec<Distribution> {
        match self.partition_values.is_empty() {
            true => vec![Distribution::UnspecifiedDistribution],
            false => vec![Distribution::HashPartitioned(self.partition_values.clone())],
        }
    }

    fn with_new_children(
        self: Arc<Self>,
        children: Vec<Arc<dyn ExecutionPlan>>,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        match <[_; 1]>::try_from(children) {
            Ok([input]) => Ok(Arc::new(Self::try_new(input, self.spec.clone())?)),
            Err(_) => internal_err!("IcebergWriteExec takes exactly one input"),
        }
    }

    fn execute(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> DfResult<SendableRecordBatchStream> {
        let input = self.input.execute(partition, context)?;
        let spec = self.spec.clone();
        let table_schema = self.table_schema.clone();
        let written = futures::stream::once(async move {
            let files = write_partition(&spec, &table_schema, partition, input).await?;
            descriptors(&spec, files)
        });
        Ok(Box::pin(RecordBatchStreamAdapter::new(
            descriptor_schema(),
            written,
        )))
    }
}

/// Writes one input partition; returns the data files written.
async fn write_partition(
    spec: &WriteSpec,
    table_schema: &SchemaRef,
    partition: usize,
    input: SendableRecordBatchStream,
) -> DfResult<Vec<DataFile>> {
    // Unique per task attempt: a retried task never overwrites its predecessor's files.
    let prefix = format!("{}-{partition:05}-{}", spec.write_id, uuid::Uuid::new_v4());
    let file_io = spec.storage.file_io();
    let locations = RecordingLocations::under(&spec.data_location);
    let mut cleanup = DeleteOnDrop::new(&locations, &file_io, &spec.write_id)?;
    let parquet = ParquetWriterBuilder::new(spec.parquet.writer_properties()?, spec.schema.clone());
    let rolling = RollingFileWriterBuilder::new(
        parquet,
        spec.target_file_size_bytes as usize,
        file_io,
        locations,
        DefaultFileNameGenerator::new(prefix, None, DataFileFormat::Parquet),
    );
    let builder = DataFileWriterBuilder::new(rolling);
    let files = write_batches(spec, table_schema, builder, input).await?;
    cleanup.disarm();
    for file in &files {
        tracing::debug!(
            target: "floe::write",
            table = %spec.table,
            partition,
            file = %file.file_path(),
            rows = file.record_count(),
            "wrote data file"
        );
    }
    Ok(files)
}

type Builder =
    DataFileWriterBuilder<ParquetWriterBuilder, RecordingLocations, DefaultFileNameGenerator>;

async fn write_batches(
    spec: &WriteSpec,
    table_schema: &SchemaRef,
    builder: Builder,
    mut input: SendableRecordBatchStream,
) -> DfResult<Vec<DataFile>> {
    if spec.partition_spec.is_unpartitioned() {
        let mut writer = UnpartitionedWriter::new(builder);
        while let Some(batch) = input.next().await {
            let batch = conform_to_table(batch?, table_schema)?;
            writer.write(batch).await.map_err(iceberg_to_df)?;
        }
        writer.close().await.map_err(iceberg_to_df)
    } else {
        let splitter = RecordBatchPartitionSplitter::try_new_with_computed_values(
            spec.schema.clone(),
            spec.partition_spec.clone(),
        )
        .map_err(iceberg_to_df)?;
        // Clustered needs the partition value columns (a partition source that is not a
        // top-level column has none: see `transforms::with_partition_values`).
        let has_values = input.schema().fields().len() > table_schema.fields().len();
        match spec.clustered && has_values {
            true => write_clustered(builder, &splitter, table_schema, input).await,
            false => write_fanout(builder, &splitter, table_schema, input).await,
        }
    }
}

/// A file open per partition value the task sees.
async fn write_fanout(
    builder: Builder,
    splitter: &RecordBatchPartitionSplitter,
    table_schema: &SchemaRef,
    mut input: SendableRecordBatchStream,
) -> DfResult<Vec<DataFile>> {
    let mut writer = FanoutWriter::new(builder);
    while let Some(batch) = input.next().await {
        let batch = conform_to_table(batch?, table_schema)?;
        for (key, rows) in splitter.split(&batch).map_err(iceberg_to_df)? {
            writer.write(key, rows).await.map_err(iceberg_to_df)?;
        }
    }
    writer.close().await.map_err(iceberg_to_df)
}

/// One file open at a time: the input is sorted by its partition value columns (after
/// the table's), so each run of equal values is one partition, written as it arrives.
async fn write_clustered(
    builder: Builder,
    splitter: &RecordBatchPartitionSplitter,
    table_schema: &SchemaRef,
    mut input: SendableRecordBatchStream,
) -> DfResult<Vec<DataFile>> {
    let mut writer = ClusteredWriter::new(builder);
    let first_value = table_schema.fields().len();
    while let Some(batch) = input.next().await {
        let batch = batch?;
        let values = &batch.columns()[first_value.min(batch.num_columns())..];
        for run in partition(values)?.ranges() {
            let rows = conform_to_table(batch.slice(run.start, run.len()), table_schema)?;
            for (key, rows) in splitter.split(&rows).map_err(iceberg_to_df)? {
                writer.write(key, rows).await.map_err(iceberg_to_df)?;
            }
        }
    }
    writer.close().await.map_err(iceberg_to_df)
}

/// File locations under the data location, in Hive-style partition directories
/// (`name=value/…`), remembering every location it hands out.
#[derive(Clone)]
pub(super) struct RecordingLocations {
    data_location: String,
    written: Arc<Mutex<Vec<String>>>,
}

impl RecordingLocations {
    pub(super) fn under(data_location: &str) -> Self {
        Self {
            data_location: data_location.trim_end_matches('/').to_string(),
            written: Arc::default(),
        }
    }
}

impl LocationGenerator for RecordingLocations {
    fn generate_location(&self, partition_key: Option<&PartitionKey>, file_name: &str) -> String {
        let location = match partition_key.filter(|key| !key.spec().is_unpartitioned()) {
            Some(key) => format!("{}/{}/{file_name}", self.data_location, partition_path(key)),
            None => format!("{}/{file_name}", self.data_location),
        };
        if let Ok(mut written) = self.written.lock() {
            written.push(location.clone());
        }
        location
    }
}

/// `name=value/…` for a partition, each name and value escaped as Iceberg's Java
/// implementation does (form encoding), so that a value such as `a/b=c` stays one
/// directory.
fn partition_path(key: &PartitionKey) -> String {
    let Ok(partition_type) = key.spec().partition_type(key.schema()) else {
        // Unreachable: the spec was bound to this schema when the write was planned.
        return "_".to_string();
    };
    key.spec()
        .fields()
        .iter()
        .zip(partition_type.fields())
        .enumerate()
        .map(|(i, (field, result))| {
            let value = key.data()[i].as_ref();
            let human = field.transform.to_human_string(&result.field_type, value);
            format!("{}={}", form_encode(&field.name), form_encode(&human))
        })
        .collect::<Vec<_>>()
        .join("/")
}

/// `application/x-www-form-urlencoded`, as Java's `URLEncoder` writes it.
pub fn form_encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        match byte {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'.' | b'-' | b'*' | b'_' => {
                out.push(byte as char)
            }
            b' ' => out.push('+'),
            _ => out.push_str(&format!("%{byte:02X}")),
        }
    }
    out
}

/// Deletes a task's files when the task fails or is aborted (dropped) before it
/// returned them; the coordinator never learns about such files. The task counts as
/// running (for the coordinator of a failed write) until they are deleted.
pub(super) struct DeleteOnDrop {
    files: Arc<Mutex<Vec<String>>>,
    file_io: FileIO,
    armed: bool,
    task: Option<RunningTask>,
}

impl DeleteOnDrop {
    /// Armed until [`Self::disarm`]: the files `locations` hands out for a task of the
    /// write `write_id`. Fails if the write is being discarded (the task must not start).
    pub(super) fn new(
        locations: &RecordingLocations,
        file_io: &FileIO,
        write_id: &str,
    ) -> Result<Self> {
        Ok(Self {
            files: locations.written.clone(),
            file_io: file_io.clone(),
            armed: true,
            task: Some(RunningTask::start(write_id)?),
        })
    }

    /// The task handed its files over: they are the coordinator's now.
    pub(super) fn disarm(&mut self) {
        self.armed = false;
    }
}

impl Drop for DeleteOnDrop {
    fn drop(&mut self) {
        let files = match self.files.lock() {
            Ok(mut files) if self.armed => std::mem::take(&mut *files),
            _ => return,
        };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let file_io = self.file_io.clone();
        let task = self.task.take();
        runtime.spawn(async move {
            for file in files {
                if let Err(e) = file_io.delete(&file).await {
                    tracing::debug!("deleting an unfinished data file: {e}");
                }
            }
            drop(task);
        });
    }
}

/// Lays a batch out exactly as the table schema (the Parquet writer and the partition
/// calculator both work by position), refusing NULLs in NOT NULL columns. Columns past
/// the table's (partition values the write was distributed on) are dropped.
pub fn conform_to_table(batch: RecordBatch, table_schema: &SchemaRef) -> DfResult<RecordBatch> {
    let columns = batch
        .columns()
        .iter()
        .zip(table_schema.fields())
        .map(|(column, field)| {
            if !field.is_nullable() && column.null_count() > 0 {
                return Err(FloeError::invalid(format!(
                    "NULL value in NOT NULL column '{}'",
                    field.name()
                ))
                .into());
            }
            Ok(conform_array(column, field.data_type())?)
        })
        .collect::<DfResult<Vec<ArrayRef>>>()?;
    Ok(RecordBatch::try_new(table_schema.clone(), columns)?)
}

/// Table property: the Parquet compression codec of new data files.
pub const COMPRESSION_CODEC: &str = "write.parquet.compression-codec";
/// Table property: the most rows a Parquet page of new data files holds.
pub const PAGE_ROW_LIMIT: &str = "write.parquet.page-row-limit";
/// Table property: the size at which a Parquet page of new data files is closed.
pub const PAGE_SIZE: &str = "write.parquet.page-size-bytes";
/// Table property: how a DELETE removes rows: `copy-on-write` (the default) rewrites
/// the data files that hold them, `merge-on-read` writes position delete files.
pub const DELETE_MODE: &str = "write.delete.mode";
/// Table property: the same for UPDATE (`merge-on-read`: position delete files for the
/// old rows, new data files for the updated ones).
pub const UPDATE_MODE: &str = "write.update.mode";
/// Table property: the same for MERGE (`merge-on-read`: position delete files for the
/// target rows it updates or deletes, new data files for updated and inserted rows).
pub const MERGE_MODE: &str = "write.merge.mode";
/// Table properties: the isolation of DELETE, UPDATE and MERGE against concurrent
/// writes, `serializable` (Iceberg's default) or `snapshot`. Both fail a statement when
/// a concurrent commit removed or deleted rows of a file it changes; `serializable`
/// also when one added a data file that may hold rows the statement would have changed.
pub const DELETE_ISOLATION: &str = "write.delete.isolation-level";
pub const UPDATE_ISOLATION: &str = "write.update.isolation-level";
pub const MERGE_ISOLATION: &str = "write.merge.isolation-level";
/// Table property: the size at which a data file is closed and the next one begun.
pub const TARGET_FILE_SIZE: &str = "write.target-file-size-bytes";

/// How a partitioned write distributes its rows: `hash` (the default) shuffles them by
/// partition and sorts them by partition within each task, which then has one file open
/// at a time (Spark's default too); `range` does the same in Floe (no range shuffle by
/// sort order yet); `none` writes rows where they are, each task keeping a file open per
/// partition value it sees (fanout).
pub const DISTRIBUTION_MODE: &str = "write.distribution-mode";

/// `true`: hash-distributed writes skip the sort and keep a file open per partition
/// value instead (Spark's name for it).
pub const FANOUT_ENABLED: &str = "write.spark.fanout.enabled";

/// What the table's properties ask of a write: (shuffle by partition, clustered).
pub fn distribution_mode(properties: &HashMap<String, String>) -> Result<(bool, bool)> {
    let fanout = match properties
        .get(FANOUT_ENABLED)
        .map(|v| v.to_ascii_lowercase())
    {
        None => false,
        Some(v) if v == "true" => true,
        Some(v) if v == "false" => false,
        Some(other) => {
            return Err(FloeError::invalid(format!(
                "table property {FANOUT_ENABLED}: '{other}' is not true or false"
            )));
        }
    };
    match properties
        .get(DISTRIBUTION_MODE)
        .map(|v| v.to_ascii_lowercase())
        .as_deref()
    {
        None | Some("hash") | Some("range") => Ok((true, !fanout)),
        Some("none") => Ok((false, false)),
        Some(other) => Err(FloeError::invalid(format!(
            "table property {DISTRIBUTION_MODE}: '{other}' is not none, hash or range"
        ))),
    }
}

pub fn check_write_properties(properties: &HashMap<String, String>) -> Result<()> {
    ParquetSettings::of(properties)?.writer_properties()?;
    distribution_mode(properties)?;
    merge_on_read(properties, DELETE_MODE)?;
    merge_on_read(properties, UPDATE_MODE)?;
    merge_on_read(properties, MERGE_MODE)?;
    for isolation in [DELETE_ISOLATION, UPDATE_ISOLATION, MERGE_ISOLATION] {
        serializable(properties, isolation)?;
    }
    target_file_size(properties)?;
    super::row_filter::RowFilter::of(properties)?;
    Ok(())
}

/// [`TARGET_FILE_SIZE`]: 512 MiB unless set.
pub fn target_file_size(properties: &HashMap<String, String>) -> Result<u64> {
    Ok(positive(properties, TARGET_FILE_SIZE)?.map_or(512 * 1024 * 1024, |size| size as u64))
}

/// Table property `key` as a positive number, if it is set.
fn positive(properties: &HashMap<String, String>, key: &str) -> Result<Option<usize>> {
    let Some(value) = properties.get(key) else {
        return Ok(None);
    };
    match value.parse::<usize>() {
        Ok(number) if number > 0 => Ok(Some(number)),
        _ => Err(FloeError::invalid(format!(
            "table property {key}: '{value}' is not a positive number"
        ))),
    }
}

/// Whether the table property `mode` ([`DELETE_MODE`], [`UPDATE_MODE`], [`MERGE_MODE`]) says
/// `merge-on-read`.
pub fn merge_on_read(properties: &HashMap<String, String>, mode: &str) -> Result<bool> {
    match properties
        .get(mode)
        .map(|m| m.to_ascii_lowercase())
        .as_deref()
    {
        None | Some("copy-on-write") => Ok(false),
        Some("merge-on-read") => Ok(true),
        Some(other) => Err(FloeError::invalid(format!(
            "table property {mode}: '{other}' is not copy-on-write or merge-on-read"
        ))),
    }
}

/// Whether the table property `isolation` ([`DELETE_ISOLATION`], …) says `serializable`.
pub fn serializable(properties: &HashMap<String, String>, isolation: &str) -> Result<bool> {
    match properties
        .get(isolation)
        .map(|m| m.to_ascii_lowercase())
        .as_deref()
    {
        None | Some("serializable") => Ok(true),
        Some("snapshot") => Ok(false),
        Some(other) => Err(FloeError::invalid(format!(
            "table property {isolation}: '{other}' is not serializable or snapshot"
        ))),
    }
}

const DEFAULT_PAGE_ROWS: usize = 20_000;
const DEFAULT_PAGE_BYTES: usize = 1024 * 1024;

/// How new data files are laid out, from the table's `write.parquet.*` properties.
#[derive(Clone, Debug, PartialEq)]
pub struct ParquetSettings {
    /// [`COMPRESSION_CODEC`]: zstd unless set.
    pub codec: String,
    /// [`PAGE_ROW_LIMIT`]: 20,000 unless set.
    pub page_row_limit: usize,
    /// [`PAGE_SIZE`]: 1 MiB unless set.
    pub page_size_bytes: usize,
}

impl ParquetSettings {
    pub fn of(properties: &HashMap<String, String>) -> Result<Self> {
        Ok(Self {
            codec: properties
                .get(COMPRESSION_CODEC)
                .cloned()
                .unwrap_or_else(|| "zstd".to_string()),
            page_row_limit: positive(properties, PAGE_ROW_LIMIT)?.unwrap_or(DEFAULT_PAGE_ROWS),
            page_size_bytes: positive(properties, PAGE_SIZE)?.unwrap_or(DEFAULT_PAGE_BYTES),
        })
    }

    /// Settings sent by a coordinator; a zero (a field it did not know) is the default.
    pub fn decoded(codec: String, page_row_limit: u64, page_size_bytes: u64) -> Self {
        let or = |value: u64, default: usize| match value {
            0 => default,
            value => usize::try_from(value).unwrap_or(usize::MAX),
        };
        Self {
            codec,
            page_row_limit: or(page_row_limit, DEFAULT_PAGE_ROWS),
            page_size_bytes: or(page_size_bytes, DEFAULT_PAGE_BYTES),
        }
    }

    /// The Parquet writer's settings. Pages are what a file's page index describes, so
    /// their size decides how little of a file a selective filter reads. (The writer
    /// checks the row limit between batches of its write batch size.)
    pub fn writer_properties(&self) -> DfResult<WriterProperties> {
        Ok(WriterProperties::builder()
            .set_compression(compression(&self.codec)?)
            .set_write_batch_size(self.page_row_limit.min(1024))
            .set_data_page_row_count_limit(self.page_row_limit)
            .set_data_page_size_limit(self.page_size_bytes)
            .build())
    }
}

/// The Parquet compression of codec name `codec`.
fn compression(codec: &str) -> DfResult<Compression> {
    let compression = match codec.to_ascii_lowercase().as_str() {
        "zstd" => Compression::ZSTD(ZstdLevel::default()),
        "snappy" => Compression::SNAPPY,
        "gzip" => Compression::GZIP(GzipLevel::default()),
        "lz4" => Compression::LZ4_RAW,
        "uncompressed" | "none" => Compression::UNCOMPRESSED,
        other => {
            return Err(FloeError::invalid(format!(
                "table property write.parquet.compression-codec: unknown codec '{other}'"
            ))
            .into());
        }
    };
    Ok(compression)
}

/// One descriptor row per written data file.
fn descriptors(spec: &WriteSpec, files: Vec<DataFile>) -> DfResult<RecordBatch> {
    let partition_type = spec
        .partition_spec
        .partition_type(&spec.schema)
        .map_err(iceberg_to_df)?;
    descriptor_batch(spec, files, &partition_type, spec.partition_spec.spec_id())
}

/// One descriptor row per file, of partition spec `spec_id`.
pub(super) fn descriptor_batch(
    spec: &WriteSpec,
    files: Vec<DataFile>,
    partition_type: &StructType,
    spec_id: i32,
) -> DfResult<RecordBatch> {
    let json = files
        .into_iter()
        .map(|file| serialize_data_file_to_json(file, partition_type, spec.format_version))
        .collect::<iceberg::Result<Vec<String>>>()
        .map_err(iceberg_to_df)?;
    let spec_ids = Int32Array::from(vec![spec_id; json.len()]);
    Ok(RecordBatch::try_new(
        descriptor_schema(),
        vec![Arc::new(StringArray::from(json)), Arc::new(spec_ids)],
    )?)
}
