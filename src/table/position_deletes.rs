//! Merge-on-read deletes: position delete files instead of rewritten data files.
//!
//! A DELETE (UPDATE) on a table with `write.delete.mode` (`write.update.mode`) =
//! `merge-on-read` reads the affected data files with positions (`scan::ScanParts::positions`), keeps the (file, position)
//! pairs of the rows it deletes, and writes them here: the pairs are distributed by
//! data file and sorted, and each data file's deletes go to one delete file of its own
//! (Iceberg's `file` delete granularity), which names it as `referenced_data_file`.
//! The delete files' partition is the data file's, which the coordinator fills in when
//! it commits them (`overwrite`, [`UNRESOLVED_SPEC_ID`]): there it also checks that
//! every data file is still in the table.

use std::any::Any;
use std::collections::HashSet;
use std::fmt;
use std::sync::Arc;

use datafusion::arrow::array::{Array, AsArray, RecordBatch};
use datafusion::arrow::compute::kernels::partition::partition as runs_of_equal;
use datafusion::arrow::compute::{SortOptions, cast};
use datafusion::arrow::datatypes::{DataType, Int64Type, SchemaRef};
use datafusion::common::{Result as DfResult, internal_err};
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use datafusion::physical_expr::expressions::Column;
use datafusion::physical_expr::{
    EquivalenceProperties, LexRequirement, OrderingRequirements, PhysicalExpr,
    PhysicalSortRequirement,
};
use datafusion::physical_plan::execution_plan::{Boundedness, EmissionType};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, Distribution, ExecutionPlan, ExecutionPlanProperties,
    Partitioning, PlanProperties,
};
use futures::StreamExt;
use iceberg::io::FileIO;
use iceberg::metadata_columns::{
    RESERVED_FIELD_ID_DELETE_FILE_PATH, RESERVED_FIELD_ID_DELETE_FILE_POS,
};
use iceberg::spec::{
    DataContentType, DataFile, DataFileBuilder, DataFileFormat, NestedField, PrimitiveType, Schema,
    Struct, StructType, Type,
};
use iceberg::writer::file_writer::ParquetWriterBuilder;
use iceberg::writer::file_writer::location_generator::DefaultFileNameGenerator;
use iceberg::writer::file_writer::rolling_writer::{RollingFileWriter, RollingFileWriterBuilder};

use super::arrow_schema;
use super::write::{
    DeleteOnDrop, RecordingLocations, WriteSpec, descriptor_batch, descriptor_schema,
};
use crate::error::{FloeError, Result, iceberg_to_df};

/// The spec id in the descriptor of a delete file: its partition is its data file's,
/// resolved at commit.
pub const UNRESOLVED_SPEC_ID: i32 = -1;

/// Writes its input, (data file path, position) rows, as position delete files.
#[derive(Debug)]
pub struct PositionDeleteWriteExec {
    input: Arc<dyn ExecutionPlan>,
    pub spec: Arc<WriteSpec>,
    properties: Arc<PlanProperties>,
}

impl PositionDeleteWriteExec {
    pub fn try_new(input: Arc<dyn ExecutionPlan>, spec: Arc<WriteSpec>) -> Result<Self> {
        let schema = input.schema();
        let types: Vec<&DataType> = schema.fields().iter().map(|f| f.data_type()).collect();
        if types != [&DataType::Utf8, &DataType::Int64] {
            return Err(FloeError::internal(format!(
                "position deletes are written from (file path, position), not {types:?}"
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
            properties,
        })
    }

    fn input_column(&self, index: usize) -> Arc<dyn PhysicalExpr> {
        let schema = self.input.schema();
        Arc::new(Column::new(schema.field(index).name(), index))
    }
}

impl DisplayAs for PositionDeleteWriteExec {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        write!(
            f,
            "PositionDeleteWriteExec: table={}, write_id={}",
            self.spec.table, self.spec.write_id
        )
    }
}

impl ExecutionPlan for PositionDeleteWriteExec {
    fn name(&self) -> &str {
        "PositionDeleteWriteExec"
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

    /// All deletes of a data file in one task, whatever read them.
    fn required_input_distribution(&self) -> Vec<Distribution> {
        vec![Distribution::HashPartitioned(vec![self.input_column(0)])]
    }

    /// Delete files are sorted by file and position (the spec requires it), and each
    /// data file's deletes are then one run.
    fn required_input_ordering(&self) -> Vec<Option<OrderingRequirements>> {
        let by_file_and_position = (0..2).map(|i| {
            PhysicalSortRequirement::new(self.input_column(i), Some(SortOptions::default()))
        });
        vec![LexRequirement::new(by_file_and_position).map(OrderingRequirements::new)]
    }

    fn with_new_children(
        self: Arc<Self>,
        children: Vec<Arc<dyn ExecutionPlan>>,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        match <[_; 1]>::try_from(children) {
            Ok([input]) => Ok(Arc::new(Self::try_new(input, self.spec.clone())?)),
            Err(_) => internal_err!("PositionDeleteWriteExec takes exactly one input"),
        }
    }

    fn execute(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> DfResult<SendableRecordBatchStream> {
        let input = self.input.execute(partition, context)?;
        let spec = self.spec.clone();
        let written = futures::stream::once(async move {
            let files = write_partition(&spec, partition, input).await?;
            descriptor_batch(
                &spec,
                files,
                &StructType::new(Vec::new()),
                UNRESOLVED_SPEC_ID,
            )
        });
        Ok(Box::pin(RecordBatchStreamAdapter::new(
            descriptor_schema(),
            written,
        )))
    }
}

/// The positions of `data_file` that the position delete file at `path` deletes.
pub async fn positions_deleted_in(
    file_io: &FileIO,
    path: &str,
    data_file: &str,
) -> Result<HashSet<i64>> {
    let unreadable = |e: &dyn fmt::Display| {
        FloeError::internal(format!("could not read position delete file {path}: {e}"))
    };
    let bytes = file_io.new_input(path)?.read().await?;
    let reader = ParquetRecordBatchReaderBuilder::try_new(bytes)
        .and_then(|builder| builder.build())
        .map_err(|e| unreadable(&e))?;
    let mut positions = HashSet::new();
    for batch in reader {
        let batch = batch?;
        let (Some(paths), Some(pos)) = (
            batch.column_by_name("file_path"),
            batch.column_by_name("pos"),
        ) else {
            return Err(unreadable(&"no file_path and pos columns"));
        };
        let paths = cast(paths, &DataType::Utf8)?;
        let pos = cast(pos, &DataType::Int64)?;
        let (paths, pos) = (paths.as_string::<i32>(), pos.as_primitive::<Int64Type>());
        for row in 0..batch.num_rows() {
            if paths.is_valid(row) && paths.value(row) == data_file && pos.is_valid(row) {
                positions.insert(pos.value(row));
            }
        }
    }
    Ok(positions)
}

/// The schema of position delete files (the spec's reserved field ids).
fn delete_file_schema() -> Result<Schema> {
    Ok(Schema::builder()
        .with_fields([
            Arc::new(NestedField::required(
                RESERVED_FIELD_ID_DELETE_FILE_PATH,
                "file_path",
                Type::Primitive(PrimitiveType::String),
            )),
            Arc::new(NestedField::required(
                RESERVED_FIELD_ID_DELETE_FILE_POS,
                "pos",
                Type::Primitive(PrimitiveType::Long),
            )),
        ])
        .build()?)
}

type Writer = RollingFileWriter<ParquetWriterBuilder, RecordingLocations, DefaultFileNameGenerator>;

/// The delete file being written: for which data file, and its writer.
struct Open {
    data_file: String,
    writer: Writer,
}

/// Writes one input partition, sorted by file and position; returns the delete files.
async fn write_partition(
    spec: &WriteSpec,
    partition: usize,
    mut input: SendableRecordBatchStream,
) -> DfResult<Vec<DataFile>> {
    let prefix = format!(
        "{}-{partition:05}-{}-deletes",
        spec.write_id,
        uuid::Uuid::new_v4()
    );
    let file_io = spec.storage.file_io();
    let locations = RecordingLocations::under(&spec.data_location);
    let mut cleanup = DeleteOnDrop::new(&locations, &file_io, &spec.write_id)?;
    let schema = delete_file_schema()?;
    let file_schema = arrow_schema(&schema)?;
    let parquet = ParquetWriterBuilder::new(spec.parquet.writer_properties()?, Arc::new(schema));
    let rolling = RollingFileWriterBuilder::new(
        parquet,
        spec.target_file_size_bytes as usize,
        file_io,
        locations,
        DefaultFileNameGenerator::new(prefix, None, DataFileFormat::Parquet),
    );
    let mut open: Option<Open> = None;
    let mut files = Vec::new();
    while let Some(batch) = input.next().await {
        let batch = batch?;
        let paths = batch.column(0).as_string::<i32>();
        for run in runs_of_equal(&batch.columns()[..1])?.ranges() {
            let data_file = paths.value(run.start);
            if open.as_ref().is_none_or(|o| o.data_file != data_file) {
                if let Some(done) = open.take() {
                    files.extend(close(done).await?);
                }
                open = Some(Open {
                    data_file: data_file.to_string(),
                    writer: rolling.build(),
                });
            }
            if let Some(open) = open.as_mut() {
                let rows = in_file_schema(&batch.slice(run.start, run.len()), &file_schema)?;
                open.writer
                    .write(&None, &rows)
                    .await
                    .map_err(iceberg_to_df)?;
            }
        }
    }
    if let Some(done) = open.take() {
        files.extend(close(done).await?);
    }
    cleanup.disarm();
    Ok(files)
}

/// The rows with the delete file schema's field ids, refusing NULLs (a position is
/// never NULL; a NULL here is a bug upstream, not a row to skip).
fn in_file_schema(rows: &RecordBatch, schema: &SchemaRef) -> DfResult<RecordBatch> {
    if rows.columns().iter().any(|c| c.null_count() > 0) {
        return internal_err!("a row to delete without a file or position");
    }
    Ok(RecordBatch::try_new(
        schema.clone(),
        rows.columns().to_vec(),
    )?)
}

async fn close(open: Open) -> DfResult<Vec<DataFile>> {
    let builders = open.writer.close().await.map_err(iceberg_to_df)?;
    builders
        .into_iter()
        .map(|mut builder| {
            builder
                .content(DataContentType::PositionDeletes)
                .referenced_data_file(Some(open.data_file.clone()));
            let file = builder
                .build()
                .map_err(|e| FloeError::internal(format!("a delete file's metadata: {e}")))?;
            tracing::debug!(
                target: "floe::write",
                data_file = %open.data_file,
                file = %file.file_path(),
                rows = file.record_count(),
                "wrote position delete file"
            );
            Ok(file)
        })
        .collect()
}

/// `file` (a delete file decoded without its partition) in the partition and spec of
/// the data file it applies to. iceberg 0.10.1 cannot set a `DataFile`'s partition, so
/// the file is rebuilt field by field: a field a later iceberg adds must be added here.
pub fn in_partition(file: &DataFile, partition: Struct, spec_id: i32) -> Result<DataFile> {
    let mut builder = DataFileBuilder::default();
    builder
        .content(file.content_type())
        .file_path(file.file_path().to_string())
        .file_format(file.file_format())
        .partition(partition)
        .partition_spec_id(spec_id)
        .record_count(file.record_count())
        .file_size_in_bytes(file.file_size_in_bytes())
        .column_sizes(file.column_sizes().clone())
        .value_counts(file.value_counts().clone())
        .null_value_counts(file.null_value_counts().clone())
        .nan_value_counts(file.nan_value_counts().clone())
        .lower_bounds(file.lower_bounds().clone())
        .upper_bounds(file.upper_bounds().clone())
        .split_offsets(file.split_offsets().map(<[i64]>::to_vec))
        .referenced_data_file(file.referenced_data_file());
    builder
        .build()
        .map_err(|e| FloeError::internal(format!("a delete file's metadata: {e}")))
}
