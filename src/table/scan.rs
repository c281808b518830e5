//! The distributed scan: planned once on the coordinator, read on executors.
//!
//! [`plan_scan`] asks Iceberg for the file tasks of the statement's pinned snapshot
//! (projection and sound filters pushed into Iceberg planning), sorts them and
//! bin-packs them into `min(target_partitions, tasks)` groups, at least one. The
//! resulting [`IcebergScanExec`] has one partition per group; it crosses to executors
//! through Floe's codec with its groups, and each executor task reads exactly its own
//! group. Nothing is planned again on an executor.

use std::any::Any;
use std::collections::{HashMap, HashSet};
use std::fmt;
use std::sync::Arc;

use datafusion::arrow::array::{Int64Array, StringArray};
use datafusion::arrow::datatypes::{DataType, Field, FieldRef, Schema as ArrowSchema, SchemaRef};
use datafusion::arrow::record_batch::{RecordBatch, RecordBatchOptions};
use datafusion::common::stats::{ColumnStatistics, Precision};
use datafusion::common::{DataFusionError, Result as DfResult, Statistics, internal_err};
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::logical_expr::Expr;
use datafusion::physical_expr::EquivalenceProperties;
use datafusion::physical_plan::execution_plan::{Boundedness, EmissionType};
use datafusion::physical_plan::metrics::{
    Count, ExecutionPlanMetricsSet, MetricBuilder, MetricsSet, Time,
};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, Partitioning, PlanProperties,
};
use futures::future::BoxFuture;
use futures::stream::BoxStream;
use futures::{FutureExt, StreamExt, TryStreamExt};
use iceberg::arrow::{ArrowReader, ArrowReaderBuilder, ScanResult};
use iceberg::expr::Bind;
use iceberg::expr::{BoundPredicate, Predicate};
use iceberg::scan::{FileScanTask, FileScanTaskStream};
use iceberg::spec::{
    DataFileFormat, NameMapping, Schema, SchemaRef as IcebergSchemaRef, Transform,
};
use iceberg::table::Table;

use super::constants;
use super::filter::{Columns, filters_to_predicate, joined_balanced, to_predicate};
use super::nested::{fit_reshaped, in_file_shapes, reshaped_fields};
use super::row_filter::{self, RowFilter};
use super::{projected_arrow_schema, projected_id_schema};
use super::{statistics, warm};
use crate::arrow_compat::conform_batch;
use crate::catalog::StorageSpec;
use crate::codec::task_groups;
use crate::error::{FloeError, Result, iceberg_to_df};

/// Table property holding the name mapping for files written without field ids.
const NAME_MAPPING_PROPERTY: &str = "schema.name-mapping.default";

/// Reads a fixed set of Iceberg file tasks, one group per partition.
#[derive(Clone)]
pub struct IcebergScanExec {
    pub parts: ScanParts,
    /// Names this scan's task groups when the coordinator keeps them (see
    /// `codec::task_groups`).
    pub scan_id: String,
    /// One group of tasks per output partition (at least one group).
    pub groups: TaskGroups,
    /// What every task is read with.
    shape: TaskShape,
    output_schema: SchemaRef,
    /// The table's columns of the output (all of it, unless the scan has positions).
    read_schema: SchemaRef,
    /// The output columns labelled with field ids, for fitting reshaped columns.
    id_schema: SchemaRef,
    properties: Arc<PlanProperties>,
    /// Whether the scan returns every row of its files (no row filter, no deletes): its
    /// row count is then exact.
    reads_all_rows: bool,
    /// Per output column, over the whole scan (see `statistics`); on the coordinator only.
    column_statistics: Option<Vec<ColumnStatistics>>,
    /// The stored bytes of the output columns (see `statistics`); on the coordinator only.
    column_bytes: Option<u64>,
    metrics: ExecutionPlanMetricsSet,
}

/// Which tasks each partition of a scan reads.
#[derive(Clone, Debug, PartialEq)]
pub enum TaskGroups {
    /// Every partition's tasks: the coordinator's scan, and any scan small enough to
    /// list them in its plan.
    Listed(Arc<Vec<Vec<FileScanTask>>>),
    /// An executor's copy of a scan too big to list: this many partitions, whose tasks
    /// the coordinator keeps; each task fetches its own (see `codec::task_groups`).
    AtCoordinator(usize),
}

impl TaskGroups {
    pub fn len(&self) -> usize {
        match self {
            Self::Listed(groups) => groups.len(),
            Self::AtCoordinator(count) => *count,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Every partition's tasks, where this plan lists them.
    pub fn listed(&self) -> Option<&[Vec<FileScanTask>]> {
        match self {
            Self::Listed(groups) => Some(groups),
            Self::AtCoordinator(_) => None,
        }
    }
}

/// Everything about a scan except its tasks.
#[derive(Clone)]
pub struct ScanParts {
    /// `namespace.table`, for display and logs.
    pub table: String,
    /// Schema the files are read with (the table's current schema).
    pub schema: IcebergSchemaRef,
    /// Output columns, by field id; empty for a scan that only counts rows.
    pub project_field_ids: Vec<i32>,
    /// Predicate shared by every task (bound to `schema`).
    pub predicate: Option<BoundPredicate>,
    /// Raw JSON of the table's name mapping, if it has one.
    pub name_mapping: Option<String>,
    pub storage: StorageSpec,
    pub case_sensitive: bool,
    /// Projected nested fields whose shape changed in the table's history (see
    /// [`super::nested`]).
    pub reshaped_field_ids: Vec<i32>,
    /// Every row of each file, in file order, with two more columns: the file's path
    /// ([`FILE_COLUMN`]) and the row's position in it ([`POS_COLUMN`]). Files are read
    /// whole, without a row filter and without the table's delete files: what a
    /// merge-on-read DELETE needs to name the rows it deletes.
    pub positions: bool,
}

/// In a scan with positions: the data file a row is in, and its position there.
pub const FILE_COLUMN: &str = "__floe_file";
pub const POS_COLUMN: &str = "__floe_pos";

/// Which files a scan reads, and how.
#[derive(Clone, Debug, Default)]
pub struct Reading {
    /// Only these data files, if given (a rewrite of some files).
    pub only_files: Option<Arc<HashSet<String>>>,
    /// See [`ScanParts::positions`].
    pub positions: bool,
}

/// The parts of a scan every one of its tasks carries for the reader: set on each task,
/// whether planned, decoded or fetched.
#[derive(Clone)]
struct TaskShape {
    schema: IcebergSchemaRef,
    read_field_ids: Vec<i32>,
    predicate: Option<BoundPredicate>,
    name_mapping: Option<Arc<NameMapping>>,
    case_sensitive: bool,
}

impl TaskShape {
    fn of(parts: &ScanParts) -> Result<Self> {
        let name_mapping = match &parts.name_mapping {
            Some(json) => Some(Arc::new(
                serde_json::from_str::<NameMapping>(json).map_err(|e| {
                    FloeError::invalid(format!("table property {NAME_MAPPING_PROPERTY}: {e}"))
                })?,
            )),
            None => None,
        };
        Ok(Self {
            schema: parts.schema.clone(),
            read_field_ids: read_field_ids(&parts.schema, &parts.project_field_ids),
            predicate: parts.predicate.clone(),
            name_mapping,
            case_sensitive: parts.case_sensitive,
        })
    }

    fn apply(&self, task: &mut FileScanTask) {
        task.schema = self.schema.clone();
        task.project_field_ids = self.read_field_ids.clone();
        task.predicate = self.predicate.clone();
        task.name_mapping = self.name_mapping.clone();
        task.case_sensitive = self.case_sensitive;
        // A planned tuple without a spec is unused by the reader and does not
        // serialise; identity constants come with a spec (see `constants`).
        if task.partition_spec.is_none() {
            task.partition = None;
        }
    }
}

impl IcebergScanExec {
    /// Builds a new scan from already grouped tasks.
    pub fn try_new(parts: ScanParts, groups: Vec<Vec<FileScanTask>>) -> Result<Self> {
        let scan_id = uuid::Uuid::new_v4().simple().to_string();
        Self::with_groups(parts, scan_id, TaskGroups::Listed(Arc::new(groups)))
    }

    /// Builds scan `scan_id` (a decoded one); every listed task is normalised to the
    /// node's schema, projection, predicate and name mapping.
    pub fn with_groups(parts: ScanParts, scan_id: String, groups: TaskGroups) -> Result<Self> {
        let read_schema = projected_arrow_schema(&parts.schema, &parts.project_field_ids)?;
        let output_schema = match parts.positions {
            true => with_position_columns(&read_schema),
            false => read_schema.clone(),
        };
        let id_schema = projected_id_schema(&parts.schema, &parts.project_field_ids)?;
        let shape = TaskShape::of(&parts)?;
        let mut groups = groups;
        if let TaskGroups::Listed(listed) = &mut groups {
            let listed = Arc::make_mut(listed);
            if listed.is_empty() {
                listed.push(Vec::new());
            }
            listed
                .iter_mut()
                .flatten()
                .for_each(|task| shape.apply(task));
        }
        let properties = Arc::new(PlanProperties::new(
            EquivalenceProperties::new(output_schema.clone()),
            Partitioning::UnknownPartitioning(groups.len().max(1)),
            EmissionType::Incremental,
            Boundedness::Bounded,
        ));
        let no_deletes = groups
            .listed()
            .is_some_and(|listed| listed.iter().flatten().all(|t| t.deletes.is_empty()));
        let reads_all_rows = parts.predicate.is_none() && no_deletes;
        Ok(Self {
            parts,
            scan_id,
            groups,
            shape,
            output_schema,
            read_schema,
            id_schema,
            properties,
            reads_all_rows,
            column_statistics: None,
            column_bytes: None,
            metrics: ExecutionPlanMetricsSet::new(),
        })
    }

    /// The same scan with the reader filtering no rows (see [`super::row_filter`]).
    fn without_read_predicate(self) -> Result<Self> {
        let mut parts = self.parts;
        parts.predicate = None;
        Self::with_groups(parts, self.scan_id, self.groups)
    }

    /// How many file tasks the scan reads, where its plan lists them.
    pub fn task_count(&self) -> Option<usize> {
        self.groups
            .listed()
            .map(|groups| groups.iter().map(Vec::len).sum())
    }

    /// A copy with its own metrics.
    pub fn fresh(&self) -> Self {
        let mut fresh = self.clone();
        fresh.metrics = ExecutionPlanMetricsSet::new();
        fresh
    }

    /// The bytes of data files the scan reads, where its plan lists its tasks: those of
    /// its columns where the manifests record them, else its files' (or ranges') sizes.
    pub fn planned_bytes(&self) -> Option<u64> {
        let listed = self.groups.listed()?;
        Some(
            self.column_bytes
                .unwrap_or_else(|| listed.iter().flatten().map(|t| t.length).sum()),
        )
    }

    /// The tasks `partition` reads, normalised.
    fn tasks_of(&self, partition: usize) -> BoxFuture<'static, DfResult<Vec<FileScanTask>>> {
        match &self.groups {
            TaskGroups::Listed(groups) => {
                let tasks = groups.get(partition).cloned().ok_or_else(|| {
                    DataFusionError::Internal(format!(
                        "IcebergScanExec: partition {partition} of {}",
                        groups.len()
                    ))
                });
                futures::future::ready(tasks).boxed()
            }
            TaskGroups::AtCoordinator(_) => {
                let (scan_id, shape) = (self.scan_id.clone(), self.shape.clone());
                async move {
                    let mut tasks = task_groups::fetch(&scan_id, partition, &shape.schema).await?;
                    tasks.iter_mut().for_each(|task| shape.apply(task));
                    Ok(tasks)
                }
                .boxed()
            }
        }
    }
}

/// The columns actually read: a count-only scan still reads one column to learn the
/// row counts of its batches.
fn read_field_ids(schema: &IcebergSchemaRef, project_field_ids: &[i32]) -> Vec<i32> {
    if !project_field_ids.is_empty() {
        return project_field_ids.to_vec();
    }
    schema
        .as_struct()
        .fields()
        .iter()
        .find(|f| f.field_type.is_primitive())
        .or_else(|| schema.as_struct().fields().first())
        .map(|f| vec![f.id])
        .unwrap_or_default()
}

/// `schema` and the two columns of a scan with positions.
pub fn with_position_columns(schema: &SchemaRef) -> SchemaRef {
    let mut fields: Vec<FieldRef> = schema.fields().iter().cloned().collect();
    fields.push(Arc::new(Field::new(FILE_COLUMN, DataType::Utf8, false)));
    fields.push(Arc::new(Field::new(POS_COLUMN, DataType::Int64, false)));
    Arc::new(ArrowSchema::new(fields))
}

/// Plans the scan of `table` (already pinned to one snapshot for the statement), read
/// as `reading` says.
pub async fn plan_scan(
    table: &Table,
    table_name: &str,
    projection: Option<&Vec<usize>>,
    filters: &[Expr],
    reading: &Reading,
    target_partitions: usize,
) -> Result<IcebergScanExec> {
    let metadata = table.metadata();
    let schema = metadata.current_schema().clone();
    let fields = schema.as_struct().fields();
    let project_field_ids: Vec<i32> = match projection {
        Some(indices) => indices
            .iter()
            .map(|&i| {
                fields.get(i).map(|f| f.id).ok_or_else(|| {
                    FloeError::internal(format!("projection index {i} out of range"))
                })
            })
            .collect::<Result<_>>()?,
        None => fields.iter().map(|f| f.id).collect(),
    };
    let mut parts = ScanParts {
        table: table_name.to_string(),
        schema: schema.clone(),
        project_field_ids,
        predicate: None,
        name_mapping: metadata.properties().get(NAME_MAPPING_PROPERTY).cloned(),
        storage: StorageSpec::from_file_io(table.file_io()),
        case_sensitive: true,
        reshaped_field_ids: Vec::new(),
        positions: reading.positions,
    };
    parts.reshaped_field_ids = reshaped_fields(
        &schema,
        metadata.schemas_iter().map(|s| s.as_ref()),
        &parts.project_field_ids,
    );
    let Some(snapshot) = metadata.current_snapshot() else {
        return IcebergScanExec::try_new(parts, vec![]);
    };
    let snapshot_schema = snapshot.schema(metadata)?;

    // Iceberg plans with the snapshot's schema; a column added since the last snapshot
    // is read as NULL from every file. Filters are pushed only when both schemas agree,
    // so a name can never resolve to a different field than the SQL meant (a renamed
    // or re-added column binds by the current name to its current field id).
    let same_schema = snapshot_schema.schema_id() == schema.schema_id();
    let (predicate, read_filters) = if same_schema {
        let columns = || Columns::of_table(metadata, &schema);
        let read_columns = columns()
            .excluding(filled_without_file(metadata, &schema))
            .without_decimal_comparisons();
        let read_filters: Vec<(Expr, Predicate)> = filters
            .iter()
            .filter_map(row_filter::for_reader)
            .filter_map(|f| {
                let predicate = to_predicate(&f, &read_columns)?;
                Some((f, predicate))
            })
            .collect();
        (filters_to_predicate(filters, &columns()), read_filters)
    } else {
        (None, Vec::new())
    };
    let select: Vec<String> = parts
        .project_field_ids
        .iter()
        .filter_map(|id| snapshot_schema.field_by_id(*id))
        .map(|f| f.name.clone())
        .collect();
    let planned = |table: Table| {
        let (select, predicate) = (select.clone(), predicate.clone());
        async move {
            let mut builder = table.scan().snapshot_id(snapshot.snapshot_id());
            builder = if select.is_empty() {
                builder.select_empty()
            } else {
                builder.select(select)
            };
            if let Some(predicate) = predicate {
                builder = builder.with_filter(predicate);
            }
            let tasks: Vec<FileScanTask> =
                builder.build()?.plan_files().await?.try_collect().await?;
            Ok::<_, FloeError>(tasks)
        }
    };
    let mut tasks = planned(table.clone()).await?;
    if tasks.is_empty() && data_files(snapshot.summary()) > 0 {
        // Nothing planned may be the truth (a filter), or a lost runtime: ask again on
        // this statement's runtime (see `warm::on_current_runtime`).
        tasks = planned(warm::on_current_runtime(table)?).await?;
    }
    for task in &mut tasks {
        let identity = constants::planned_constants(task, metadata, &schema);
        constants::attach(task, &identity, &schema)?;
    }
    guard_against_lost_files(&tasks, predicate.is_some(), snapshot.summary())?;
    if let Some(files) = &reading.only_files {
        tasks.retain(|task| files.contains(&task.data_file_path));
    }
    refuse_unreadable_files(&parts.table, &tasks)?;

    let split = Splitting::of(metadata.properties());
    if reading.positions {
        // Positions count every row of the whole file.
        tasks.iter_mut().for_each(|task| task.deletes.clear());
    } else {
        let read_predicates = read_filters.iter().map(|(_, p)| p.clone()).collect();
        parts.predicate = joined_balanced(read_predicates, &Predicate::and)
            .map(|p| p.bind(schema.clone(), parts.case_sensitive))
            .transpose()?;
        tasks = split.split(tasks);
    }
    let groups = group_tasks(tasks, target_partitions, split.open_file_cost);
    let mut scan = IcebergScanExec::try_new(parts, groups)?;
    let statistics = statistics::column_statistics(
        table,
        snapshot,
        scan.groups.listed().unwrap_or_default().iter().flatten(),
        &scan.parts.project_field_ids,
        &scan.output_schema,
    )
    .await?;
    if scan.parts.predicate.is_some() {
        let read_filters: Vec<Expr> = read_filters.into_iter().map(|(f, _)| f).collect();
        let bounds = statistics.columns(false);
        // Tables other writers made may hold any value: those read as `auto`.
        let row_filter = RowFilter::of(metadata.properties()).unwrap_or(RowFilter::Auto);
        if !row_filter.wanted(&read_filters, &scan.read_schema, &bounds) {
            scan = scan.without_read_predicate()?;
        }
    }
    scan.column_statistics = Some(statistics.columns(scan.reads_all_rows));
    scan.column_bytes = statistics.column_bytes;
    Ok(scan)
}

/// Floe reads Parquet data files with Parquet position and equality deletes; anything
/// else is refused by name before it reaches a reader (which would report a corrupt
/// Parquet footer).
fn refuse_unreadable_files(table: &str, tasks: &[FileScanTask]) -> Result<()> {
    for task in tasks {
        if task.data_file_format != DataFileFormat::Parquet {
            return Err(FloeError::unimplemented(format!(
                "table {table}: data file {} is {:?}; Floe reads Parquet data files only",
                task.data_file_path, task.data_file_format
            )));
        }
        for delete in &task.deletes {
            let path = delete.file_path.to_ascii_lowercase();
            if path.ends_with(".puffin") {
                return Err(FloeError::unimplemented(format!(
                    "table {table}: deletion vector {} (Iceberg format version 3) is not supported",
                    delete.file_path
                )));
            }
            if path.ends_with(".orc") || path.ends_with(".avro") {
                return Err(FloeError::unimplemented(format!(
                    "table {table}: delete file {} is not Parquet; Floe reads Parquet delete files only",
                    delete.file_path
                )));
            }
        }
    }
    Ok(())
}

/// Fields the reader may fill without reading them from a file: identity-partition
/// sources and fields with an initial default.
fn filled_without_file(metadata: &iceberg::spec::TableMetadata, schema: &Schema) -> Vec<i32> {
    let partition_sources = metadata.partition_specs_iter().flat_map(|spec| {
        spec.fields()
            .iter()
            .filter(|f| f.transform == Transform::Identity)
            .map(|f| f.source_id)
    });
    let defaults = schema
        .as_struct()
        .fields()
        .iter()
        .filter(|f| f.initial_default.is_some())
        .map(|f| f.id);
    partition_sources.chain(defaults).collect()
}

/// The second line of defence against an empty stream for a lost runtime (see
/// [`on_current_runtime`]): a snapshot that has files never scans to nothing without a
/// filter.
fn guard_against_lost_files(
    tasks: &[FileScanTask],
    filtered: bool,
    summary: &iceberg::spec::Summary,
) -> Result<()> {
    let files = data_files(summary);
    if tasks.is_empty() && !filtered && files > 0 {
        return Err(FloeError::internal(format!(
            "scan planning returned no files for a snapshot with {files} data files"
        )));
    }
    Ok(())
}

/// Bytes a row of `schema` takes in memory, roughly: what the join planner compares with
/// its broadcast threshold (the files' compressed size would understate it).
fn estimated_row_width(schema: &SchemaRef) -> usize {
    /// A guess for variable-width values (strings, binary, nested).
    const VARIABLE_WIDTH: usize = 24;
    schema
        .fields()
        .iter()
        .map(|f| f.data_type().primitive_width().unwrap_or(VARIABLE_WIDTH))
        .sum::<usize>()
        .max(1)
}

/// How a scan's files are cut into tasks (Iceberg's read properties).
pub struct Splitting {
    /// Files larger than this are read as byte ranges of about this size, by different
    /// tasks (a row group belongs to the range holding its midpoint).
    pub target_size: u64,
    /// What opening a file costs, in bytes, when tasks are balanced over partitions.
    pub open_file_cost: u64,
}

impl Splitting {
    const TARGET_SIZE: &str = "read.split.target-size";
    const OPEN_FILE_COST: &str = "read.split.open-file-cost";

    pub fn of(properties: &HashMap<String, String>) -> Self {
        let bytes = |key: &str, default: u64| {
            properties
                .get(key)
                .and_then(|v| v.trim().parse::<u64>().ok())
                .filter(|v| *v > 0)
                .unwrap_or(default)
        };
        Self {
            target_size: bytes(Self::TARGET_SIZE, 128 * 1024 * 1024),
            open_file_cost: bytes(Self::OPEN_FILE_COST, 4 * 1024 * 1024),
        }
    }

    /// Cuts the tasks of files larger than the target size into byte ranges. Files with
    /// delete files stay whole (their deletes are by position in the whole file). The
    /// ranges' row counts are shares that add up to the file's.
    pub fn split(&self, tasks: Vec<FileScanTask>) -> Vec<FileScanTask> {
        let mut out = Vec::with_capacity(tasks.len());
        for task in tasks {
            let size = task.file_size_in_bytes;
            if size <= self.target_size || !task.deletes.is_empty() || task.start != 0 {
                out.push(task);
                continue;
            }
            let pieces = size.div_ceil(self.target_size);
            let rows = task.record_count;
            for i in 0..pieces {
                let start = i * self.target_size;
                let mut piece = task.clone();
                piece.start = start;
                piece.length = self.target_size.min(size - start);
                piece.record_count = rows.map(|r| r * (i + 1) / pieces - r * i / pieces);
                out.push(piece);
            }
        }
        out
    }
}

/// The data files a snapshot's summary counts (0 if it does not say).
fn data_files(summary: &iceberg::spec::Summary) -> u64 {
    summary
        .additional_properties
        .get("total-data-files")
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

/// Sorts tasks by (path, start) and bin-packs them by length (at least
/// `open_file_cost`) into `min(target_partitions, tasks)` groups (at least one): largest
/// task first into the least loaded group, ties broken by position. Deterministic for
/// the same input.
pub fn group_tasks(
    mut tasks: Vec<FileScanTask>,
    target_partitions: usize,
    open_file_cost: u64,
) -> Vec<Vec<FileScanTask>> {
    tasks.sort_by(|a, b| (&a.data_file_path, a.start).cmp(&(&b.data_file_path, b.start)));
    let n = target_partitions.min(tasks.len()).max(1);
    let mut order: Vec<usize> = (0..tasks.len()).collect();
    let weight = |task: &FileScanTask| task.length.max(open_file_cost).max(1);
    order.sort_by(|&a, &b| weight(&tasks[b]).cmp(&weight(&tasks[a])).then(a.cmp(&b)));

    let mut assignment = vec![0usize; tasks.len()];
    let mut load = vec![0u64; n];
    for i in order {
        let group = (0..n).min_by_key(|&g| (load[g], g)).unwrap_or(0);
        load[group] += weight(&tasks[i]);
        assignment[i] = group;
    }
    let mut groups = vec![Vec::new(); n];
    for (task, group) in tasks.into_iter().zip(assignment) {
        groups[group].push(task);
    }
    groups
}

impl fmt::Debug for IcebergScanExec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("IcebergScanExec")
            .field("table", &self.parts.table)
            .field("project_field_ids", &self.parts.project_field_ids)
            .field("scan_id", &self.scan_id)
            .field("groups", &self.groups.len())
            .field("tasks", &self.task_count())
            .field("storage", &self.parts.storage)
            .finish()
    }
}

impl DisplayAs for IcebergScanExec {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        write!(
            f,
            "IcebergScanExec: table={}, partitions={}, ",
            self.parts.table,
            self.groups.len(),
        )?;
        match self.task_count() {
            Some(files) => write!(f, "files={files}")?,
            None => write!(f, "files at the coordinator")?,
        }
        write!(f, ", projection={:?}", self.parts.project_field_ids)?;
        if let Some(predicate) = &self.parts.predicate {
            write!(f, ", predicate={predicate}")?;
        }
        Ok(())
    }
}

impl ExecutionPlan for IcebergScanExec {
    fn name(&self) -> &str {
        "IcebergScanExec"
    }

    fn as_any(&self) -> &dyn Any {
        self
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        &self.properties
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        vec![]
    }

    fn with_new_children(
        self: Arc<Self>,
        children: Vec<Arc<dyn ExecutionPlan>>,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        if !children.is_empty() {
            return internal_err!("IcebergScanExec has no children");
        }
        Ok(self)
    }

    fn metrics(&self) -> Option<MetricsSet> {
        Some(self.metrics.clone_inner())
    }

    /// A copy with its own metrics: an executor runs each task on a fresh plan, so that
    /// a task reports only what it did.
    fn reset_state(self: Arc<Self>) -> DfResult<Arc<dyn ExecutionPlan>> {
        Ok(Arc::new(self.fresh()))
    }

    fn partition_statistics(&self, partition: Option<usize>) -> DfResult<Statistics> {
        let Some(groups) = self.groups.listed() else {
            return Ok(Statistics::new_unknown(&self.output_schema));
        };
        let tasks: Vec<&FileScanTask> = match partition {
            Some(p) => groups.get(p).into_iter().flatten().collect(),
            None => groups.iter().flatten().collect(),
        };
        let rows: Option<u64> = tasks.iter().map(|t| t.record_count).sum();
        let mut stats = Statistics::new_unknown(&self.output_schema);
        if let Some(rows) = rows {
            let width = estimated_row_width(&self.output_schema);
            stats.total_byte_size = Precision::Inexact(rows as usize * width);
            // Only the whole scan's count can be exact: a file read in ranges counts
            // each range's share of its rows.
            stats.num_rows = if self.reads_all_rows && partition.is_none() {
                Precision::Exact(rows as usize)
            } else {
                Precision::Inexact(rows as usize)
            };
        }
        if let Some(columns) = &self.column_statistics {
            stats.column_statistics = match partition {
                None => columns.clone(),
                // A part of the scan: the bounds still bound it and the distinct values
                // are still a value's share of its rows; the counts do not hold.
                Some(_) => columns
                    .iter()
                    .map(|c| ColumnStatistics {
                        min_value: c.min_value.clone().to_inexact(),
                        max_value: c.max_value.clone().to_inexact(),
                        distinct_count: c.distinct_count.to_inexact(),
                        ..ColumnStatistics::new_unknown()
                    })
                    .collect(),
            };
            // A scan with positions: nothing is known of those.
            let columns = self.output_schema.fields().len();
            stats
                .column_statistics
                .resize(columns, ColumnStatistics::new_unknown());
        }
        Ok(stats)
    }

    fn execute(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> DfResult<SendableRecordBatchStream> {
        let tasks = self.tasks_of(partition);
        let mut metrics = ScanMetrics::new(&self.metrics, partition);
        let runtime = iceberg::Runtime::try_current().map_err(iceberg_to_df)?;
        // Row selection reads a file's page index (where it has one, as every file Floe
        // writes does) and skips the pages the predicate rules out: a lookup decodes one
        // page per column instead of whole row groups.
        let reader = ArrowReaderBuilder::new(self.parts.storage.file_io(), runtime)
            .with_batch_size(context.session_config().batch_size())
            .with_data_file_concurrency_limit(1)
            .with_row_group_filtering_enabled(true)
            .with_row_selection_enabled(true)
            .build();
        let reshaped = Arc::new(self.parts.reshaped_field_ids.clone());
        let (table, file_io) = (self.parts.table.clone(), self.parts.storage.file_io());
        let output_schema = self.output_schema.clone();
        let read_schema = self.read_schema.clone();
        let positions = self.parts.positions;
        let id_schema = self.id_schema.clone();
        let project_field_ids = self.parts.project_field_ids.clone();
        let count_only = project_field_ids.is_empty();
        let batches = async move {
            let tasks = tasks.await?;
            for task in &tasks {
                tracing::debug!(
                    target: "floe::scan",
                    table = %table,
                    partition,
                    file = %task.data_file_path,
                    "reading data file"
                );
            }
            metrics.planned(&tasks);
            let tasks = if reshaped.is_empty() {
                futures::stream::iter(tasks.into_iter().map(Ok)).boxed()
            } else {
                in_file_shapes(tasks, reshaped.clone(), file_io)
            };
            let bytes_read = metrics.bytes_read.clone();
            let batches = match positions {
                true => read_with_positions(reader, tasks, bytes_read),
                false => counting_bytes(reader.read(tasks).map_err(iceberg_to_df)?, bytes_read)
                    .map(|batch| Ok((batch?, None)))
                    .boxed(),
            };
            Ok::<_, DataFusionError>(batches.map(move |read| {
                let (mut batch, position) = read?;
                if !reshaped.is_empty() {
                    batch = fit_reshaped(batch, &project_field_ids, &reshaped, &id_schema)?;
                }
                let mut batch = conform(batch, &read_schema, count_only)?;
                if let Some(position) = position {
                    batch = position.append_to(batch, &output_schema)?;
                }
                metrics.read(&batch);
                Ok(batch)
            }))
        };
        Ok(Box::pin(RecordBatchStreamAdapter::new(
            self.output_schema.clone(),
            futures::stream::once(batches).try_flatten(),
        )))
    }
}

/// What EXPLAIN ANALYZE shows of a scan, per partition: the files (or file ranges) and
/// bytes planned, the bytes read from storage (of data files: footers, page indexes and
/// the pages not skipped; and delete files), the rows read, and the wall time from the
/// partition's start to its last batch (reading, and waiting for storage and for the
/// operators above).
struct ScanMetrics {
    files: Count,
    bytes_planned: Count,
    bytes_read: Count,
    rows: Count,
    scanning: Time,
    since: std::time::Instant,
}

impl ScanMetrics {
    fn new(set: &ExecutionPlanMetricsSet, partition: usize) -> Self {
        Self {
            files: MetricBuilder::new(set).counter("files", partition),
            bytes_planned: MetricBuilder::new(set).counter("bytes_planned", partition),
            bytes_read: MetricBuilder::new(set).counter("bytes_read", partition),
            rows: MetricBuilder::new(set).output_rows(partition),
            scanning: MetricBuilder::new(set).subset_time("time_elapsed_scanning", partition),
            since: std::time::Instant::now(),
        }
    }

    fn planned(&self, tasks: &[FileScanTask]) {
        self.files.add(tasks.len());
        self.bytes_planned
            .add(tasks.iter().map(|t| t.length as usize).sum());
    }

    fn read(&mut self, batch: &RecordBatch) {
        self.rows.add(batch.num_rows());
        let now = std::time::Instant::now();
        self.scanning.add_duration(now - self.since);
        self.since = now;
    }
}

/// Where a batch of a scan with positions starts: its file and its first row's position.
struct Position {
    file: Arc<str>,
    first: i64,
}

impl Position {
    /// `batch` with the file and position columns.
    fn append_to(&self, batch: RecordBatch, schema: &SchemaRef) -> DfResult<RecordBatch> {
        let rows = batch.num_rows();
        let mut columns = batch.columns().to_vec();
        columns.push(Arc::new(StringArray::from_iter_values(
            std::iter::repeat_n(self.file.as_ref(), rows),
        )));
        columns.push(Arc::new(Int64Array::from_iter_values(
            self.first..self.first + rows as i64,
        )));
        let options = RecordBatchOptions::new().with_row_count(Some(rows));
        Ok(RecordBatch::try_new_with_options(
            schema.clone(),
            columns,
            &options,
        )?)
    }
}

type PositionedBatches = BoxStream<'static, DfResult<(RecordBatch, Option<Position>)>>;

/// Reads the tasks one after another, each file on its own, counting its rows: with
/// neither a row filter nor deletes, the n-th row read is the file's n-th row.
fn read_with_positions(
    reader: ArrowReader,
    tasks: FileScanTaskStream,
    bytes_read: Count,
) -> PositionedBatches {
    tasks
        .map(move |task| {
            let (reader, bytes_read) = (reader.clone(), bytes_read.clone());
            async move {
                let task = task.map_err(iceberg_to_df)?;
                let file: Arc<str> = task.data_file_path.as_str().into();
                let one = futures::stream::iter([Ok(task)]).boxed();
                let read = reader.read(one).map_err(iceberg_to_df)?;
                let batches = counting_bytes(read, bytes_read);
                let mut next = 0i64;
                Ok::<_, DataFusionError>(batches.map(move |batch| {
                    let batch = batch?;
                    let first = next;
                    next += batch.num_rows() as i64;
                    let file = file.clone();
                    Ok((batch, Some(Position { file, first })))
                }))
            }
        })
        .buffered(1)
        .try_flatten()
        .boxed()
}

/// The batches of `read`; when they end, the bytes it read from storage are added to
/// `bytes_read`.
fn counting_bytes(
    read: ScanResult,
    bytes_read: Count,
) -> BoxStream<'static, DfResult<RecordBatch>> {
    let storage = read.metrics().clone();
    let done = futures::stream::once(async move {
        bytes_read.add(usize::try_from(storage.bytes_read()).unwrap_or(usize::MAX));
        None
    });
    read.stream()
        .map(|batch| Some(batch.map_err(iceberg_to_df)))
        .chain(done)
        .filter_map(futures::future::ready)
        .boxed()
}

/// Gives a batch from the reader exactly the node's declared schema.
fn conform(batch: RecordBatch, schema: &SchemaRef, count_only: bool) -> DfResult<RecordBatch> {
    if count_only {
        let options = RecordBatchOptions::new().with_row_count(Some(batch.num_rows()));
        return Ok(RecordBatch::try_new_with_options(
            schema.clone(),
            vec![],
            &options,
        )?);
    }
    Ok(conform_batch(&batch, schema)?)
}
