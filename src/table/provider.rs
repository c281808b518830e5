//! The table provider DataFusion plans against: one per table per statement, holding
//! the table as loaded for that statement (so one snapshot and one schema for the
//! whole statement, and nothing cached beyond it).

use std::any::Any;
use std::collections::HashSet;
use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::catalog::{Session, TableProvider};
use datafusion::common::{Result as DfResult, not_impl_err};
use datafusion::logical_expr::dml::InsertOp;
use datafusion::logical_expr::utils::split_conjunction;
use datafusion::logical_expr::{Expr, TableProviderFilterPushDown, TableType};
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_expr::expressions::Column;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::projection::ProjectionExec;
use iceberg::expr::Predicate;
use iceberg::table::Table;

use super::filter::{Columns, filters_to_predicate};
use super::journal;
use super::position_deletes::PositionDeleteWriteExec;
use super::scan::{IcebergScanExec, Reading, plan_scan, with_position_columns};
use super::write::{
    IcebergWriteExec, ParquetSettings, WriteSpec, distribution_mode, target_file_size,
};
use super::write_protocol::{new_write_id, write_location};
use super::{plan_schema, transforms};
use crate::catalog::StorageSpec;
use crate::error::{FloeError, Result};

pub struct IcebergTableProvider {
    table: Table,
    name: String,
    schema: SchemaRef,
    /// Ids of the writes `insert_into` planned (the coordinator cleans up after them
    /// if their job fails).
    planned_writes: Mutex<Vec<String>>,
    /// The id the next planned write takes, if the statement chose it beforehand (an
    /// ingest stages its upload in the write's directory before planning).
    next_write_id: Mutex<Option<String>>,
    /// The error `scan` failed with. Ballista plans jobs on the coordinator but reports
    /// a planning failure only as text; the statement reads the error back from here.
    planning_error: Mutex<Option<FloeError>>,
    /// Which files scans read, and how (see [`Self::restricted_to`],
    /// [`Self::positions_of`]).
    reading: Reading,
    /// The next write planned writes position deletes, not rows (a merge-on-read
    /// DELETE).
    deletes_positions_next: AtomicBool,
    /// At most this many scan partitions (a compaction: fewer, larger output files).
    max_scan_partitions: Option<usize>,
    /// The scans planned so far: a statement is planned physically twice when the
    /// coordinator first checks whether it is small (`sql::small`) and then submits it,
    /// and its files are planned once.
    planned_scans: Mutex<Vec<(ScanRequest, IcebergScanExec)>>,
}

/// What a scan was asked for.
#[derive(PartialEq)]
struct ScanRequest {
    projection: Option<Vec<usize>>,
    filters: Vec<Expr>,
    target_partitions: usize,
}

impl IcebergTableProvider {
    pub fn try_new(table: Table) -> Result<Self> {
        let schema = plan_schema(table.metadata().current_schema())?;
        let name = table.identifier().to_string();
        Ok(Self {
            table,
            name,
            schema,
            planned_writes: Mutex::new(Vec::new()),
            next_write_id: Mutex::new(None),
            planning_error: Mutex::new(None),
            reading: Reading::default(),
            deletes_positions_next: AtomicBool::new(false),
            max_scan_partitions: None,
            planned_scans: Mutex::new(Vec::new()),
        })
    }

    /// A provider of the same table (same snapshot) whose scans read only `files`:
    /// what a copy-on-write rewrite (DELETE, UPDATE, MERGE, compaction) reads.
    pub fn restricted_to(&self, files: HashSet<String>) -> Result<Self> {
        let mut restricted = Self::try_new(self.table.clone())?;
        restricted.reading.only_files = Some(Arc::new(files));
        Ok(restricted)
    }

    /// A provider of the same table (same snapshot) whose scans read `files` whole,
    /// each row with its file and position (two more columns: `scan::FILE_COLUMN`,
    /// `scan::POS_COLUMN`): what a merge-on-read DELETE reads.
    pub fn positions_of(&self, files: HashSet<String>) -> Result<Self> {
        let mut positions = self.restricted_to(files)?;
        positions.reading.positions = true;
        positions.schema = with_position_columns(&positions.schema);
        Ok(positions)
    }

    /// Makes the next write planned on this provider write position delete files of
    /// its input, (data file, position) rows (see `position_deletes`).
    pub fn delete_positions_next(&self) {
        self.deletes_positions_next.store(true, Ordering::SeqCst);
    }

    /// Makes scans use at most `partitions` partitions.
    pub fn with_max_scan_partitions(mut self, partitions: usize) -> Self {
        self.max_scan_partitions = Some(partitions.max(1));
        self
    }

    /// The data files that may hold rows matching `filter`, as far as the table's
    /// metadata (partitions, column bounds) tells.
    pub async fn files_matching(&self, filter: &Expr) -> Result<HashSet<String>> {
        let columns = Vec::new();
        // Separately, as DataFusion pushes them: each conjunct Iceberg can use prunes.
        let filters: Vec<Expr> = split_conjunction(filter).into_iter().cloned().collect();
        let all = Reading::default();
        let scan = plan_scan(&self.table, &self.name, Some(&columns), &filters, &all, 1).await?;
        let tasks = scan.groups.listed().unwrap_or_default();
        Ok(tasks
            .iter()
            .flatten()
            .map(|task| task.data_file_path.clone())
            .collect())
    }

    /// `filter` as an Iceberg predicate: its conjuncts that translate exactly, else
    /// true. Rows matching `filter` match it.
    pub fn predicate_of(&self, filter: &Expr) -> Predicate {
        let metadata = self.table.metadata();
        let schema = metadata.current_schema();
        let columns = Columns::of_table(metadata, schema);
        let filters: Vec<Expr> = split_conjunction(filter).into_iter().cloned().collect();
        filters_to_predicate(&filters, &columns).unwrap_or(Predicate::AlwaysTrue)
    }

    pub fn table(&self) -> &Table {
        &self.table
    }

    pub fn planning_error(&self) -> Option<FloeError> {
        self.planning_error.lock().ok().and_then(|e| e.clone())
    }

    /// Makes the next write planned on this provider take `write_id`.
    pub fn set_next_write_id(&self, write_id: String) {
        if let Ok(mut next) = self.next_write_id.lock() {
            *next = Some(write_id);
        }
    }

    pub fn planned_writes(&self) -> Vec<String> {
        self.planned_writes
            .lock()
            .map(|w| w.clone())
            .unwrap_or_default()
    }

    /// The scan `request` asks for, planned the first time it is asked for; a copy with
    /// its own metrics after that.
    async fn plan_scan_once(&self, request: ScanRequest) -> Result<IcebergScanExec> {
        let planned = self.planned_scans.lock().ok().and_then(|scans| {
            let (_, scan) = scans.iter().find(|(asked, _)| *asked == request)?;
            Some(scan.fresh())
        });
        if let Some(scan) = planned {
            return Ok(scan);
        }
        let scan = plan_scan(
            &self.table,
            &self.name,
            request.projection.as_ref(),
            &request.filters,
            &self.reading,
            request.target_partitions,
        )
        .await?;
        if let Ok(mut scans) = self.planned_scans.lock() {
            scans.push((request, scan.fresh()));
        }
        Ok(scan)
    }

    /// The table's columns of a projection of this provider's schema (which, for a scan
    /// with positions, has two more).
    fn table_projection(&self, projection: Option<&Vec<usize>>) -> Option<Vec<usize>> {
        let columns = self
            .table
            .metadata()
            .current_schema()
            .as_struct()
            .fields()
            .len();
        match (self.reading.positions, projection) {
            (true, Some(projection)) => Some(
                projection
                    .iter()
                    .copied()
                    .filter(|&i| i < columns)
                    .collect(),
            ),
            (_, projection) => projection.cloned(),
        }
    }

    /// A scan with positions (the table's projected columns, then file and position)
    /// with exactly the columns of `projection`, in its order.
    fn project_positions(
        &self,
        scan: IcebergScanExec,
        projection: Option<&Vec<usize>>,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        let Some(projection) = projection else {
            return Ok(Arc::new(scan));
        };
        let scanned = scan.schema();
        let columns = projection
            .iter()
            .map(|&i| {
                let name = self.schema.field(i).name();
                let column = Column::new(name, scanned.index_of(name)?);
                Ok((Arc::new(column) as Arc<dyn PhysicalExpr>, name.clone()))
            })
            .collect::<DfResult<Vec<_>>>()?;
        Ok(Arc::new(ProjectionExec::try_new(columns, Arc::new(scan))?))
    }
}

impl fmt::Debug for IcebergTableProvider {
    // Written by hand: the table's FileIO holds storage credentials.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("IcebergTableProvider")
            .field("table", &self.name)
            .field("snapshot", &self.table.metadata().current_snapshot_id())
            .finish()
    }
}

#[async_trait]
impl TableProvider for IcebergTableProvider {
    fn as_any(&self) -> &dyn Any {
        self
    }

    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    fn table_type(&self) -> TableType {
        TableType::Base
    }

    fn supports_filters_pushdown(
        &self,
        filters: &[&Expr],
    ) -> DfResult<Vec<TableProviderFilterPushDown>> {
        // Iceberg prunes with what it can translate; DataFusion re-applies every filter.
        Ok(vec![TableProviderFilterPushDown::Inexact; filters.len()])
    }

    async fn scan(
        &self,
        state: &dyn Session,
        projection: Option<&Vec<usize>>,
        filters: &[Expr],
        _limit: Option<usize>,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        let target_partitions = match self.max_scan_partitions {
            Some(max) => state.config().target_partitions().min(max),
            None => state.config().target_partitions(),
        };
        let request = ScanRequest {
            projection: self.table_projection(projection),
            filters: filters.to_vec(),
            target_partitions,
        };
        match self.plan_scan_once(request).await {
            Ok(scan) if self.reading.positions => self.project_positions(scan, projection),
            Ok(scan) => Ok(Arc::new(scan)),
            Err(e) => {
                if let Ok(mut error) = self.planning_error.lock() {
                    *error = Some(e.clone());
                }
                Err(e.into())
            }
        }
    }

    async fn insert_into(
        &self,
        _state: &dyn Session,
        input: Arc<dyn ExecutionPlan>,
        insert_op: InsertOp,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        if insert_op != InsertOp::Append {
            return not_impl_err!("{insert_op} is not supported yet; only INSERT INTO appends");
        }
        let metadata = self.table.metadata();
        let write_id = self
            .next_write_id
            .lock()
            .ok()
            .and_then(|mut next| next.take())
            .unwrap_or_else(new_write_id);
        let (shuffled, clustered) = distribution_mode(metadata.properties())?;
        let target_file_size_bytes = target_file_size(metadata.properties())?;
        let parquet = ParquetSettings::of(metadata.properties())?;
        journal::begin(&self.table, &write_id)?;
        let spec = WriteSpec {
            table: self.name.clone(),
            schema: metadata.current_schema().clone(),
            partition_spec: metadata.default_partition_spec().clone(),
            storage: StorageSpec::from_file_io(self.table.file_io()),
            data_location: write_location(metadata, &write_id),
            write_id: write_id.clone(),
            format_version: metadata.format_version(),
            target_file_size_bytes,
            parquet,
            clustered,
        };
        if let Ok(mut writes) = self.planned_writes.lock() {
            writes.push(write_id);
        }
        if self.deletes_positions_next.swap(false, Ordering::SeqCst) {
            return Ok(Arc::new(PositionDeleteWriteExec::try_new(
                input,
                Arc::new(spec),
            )?));
        }
        let input = match shuffled {
            true => transforms::with_partition_values(input, &spec.partition_spec, &spec.schema)?,
            false => input,
        };
        Ok(Arc::new(IcebergWriteExec::try_new(input, Arc::new(spec))?))
    }
}
