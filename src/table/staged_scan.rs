//! The scan of a bulk ingest's staging files: [`StagedTable`] is the upload as a table
//! the INSERT reads from, [`StagedScanExec`] its node, one partition per group of
//! staging files, read on executors. The node carries plain data only (file paths,
//! sizes, the Arrow schema, storage properties).

use std::any::Any;
use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::catalog::{Session, TableProvider};
use datafusion::common::stats::Precision;
use datafusion::common::{DataFusionError, Result as DfResult, Statistics, internal_err};
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::logical_expr::{Expr, TableType};
use datafusion::physical_expr::expressions::Column;
use datafusion::physical_expr::{EquivalenceProperties, PhysicalExpr};
use datafusion::physical_plan::execution_plan::{Boundedness, EmissionType};
use datafusion::physical_plan::projection::{ProjectionExec, ProjectionExpr};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, Partitioning, PlanProperties,
};
use futures::{StreamExt, TryStreamExt};

use super::staging::{StagedFile, group_staged, read_staged};
use crate::catalog::StorageSpec;

/// Reads staging files, one group of files per partition (at least one group).
#[derive(Debug, Clone)]
pub struct StagedScanExec {
    pub schema: SchemaRef,
    pub storage: StorageSpec,
    pub groups: Vec<Vec<StagedFile>>,
    properties: Arc<PlanProperties>,
}

impl StagedScanExec {
    pub fn new(schema: SchemaRef, storage: StorageSpec, mut groups: Vec<Vec<StagedFile>>) -> Self {
        if groups.is_empty() {
            groups.push(Vec::new());
        }
        let properties = Arc::new(PlanProperties::new(
            EquivalenceProperties::new(schema.clone()),
            Partitioning::UnknownPartitioning(groups.len()),
            EmissionType::Incremental,
            Boundedness::Bounded,
        ));
        Self {
            schema,
            storage,
            groups,
            properties,
        }
    }

    fn files(&self) -> impl Iterator<Item = &StagedFile> {
        self.groups.iter().flatten()
    }
}

impl DisplayAs for StagedScanExec {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        write!(
            f,
            "StagedScanExec: files={}, rows={}",
            self.files().count(),
            self.files().map(|file| file.rows).sum::<u64>()
        )
    }
}

impl ExecutionPlan for StagedScanExec {
    fn name(&self) -> &str {
        "StagedScanExec"
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
        if children.is_empty() {
            Ok(self)
        } else {
            internal_err!("StagedScanExec has no inputs")
        }
    }

    fn partition_statistics(&self, partition: Option<usize>) -> DfResult<Statistics> {
        let rows: u64 = match partition {
            None => self.files().map(|file| file.rows).sum(),
            Some(p) => self
                .groups
                .get(p)
                .into_iter()
                .flatten()
                .map(|f| f.rows)
                .sum(),
        };
        let mut statistics = Statistics::new_unknown(&self.schema);
        statistics.num_rows = Precision::Exact(rows as usize);
        Ok(statistics)
    }

    fn execute(
        &self,
        partition: usize,
        _context: Arc<TaskContext>,
    ) -> DfResult<SendableRecordBatchStream> {
        let Some(files) = self.groups.get(partition).cloned() else {
            return internal_err!(
                "StagedScanExec: partition {partition} of {}",
                self.groups.len()
            );
        };
        let file_io = self.storage.file_io();
        let schema = self.schema.clone();
        let batches = futures::stream::iter(files)
            .map(move |file| {
                tracing::debug!(
                    target: "floe::ingest",
                    partition,
                    file = %file.path,
                    "reading staging file"
                );
                read_staged(file_io.clone(), file, schema.clone())
            })
            .flatten()
            .map_err(Into::into);
        Ok(Box::pin(RecordBatchStreamAdapter::new(
            self.schema.clone(),
            batches,
        )))
    }
}

/// An ingest's staging files as the table an INSERT reads from (on the coordinator).
#[derive(Debug)]
pub struct StagedTable {
    schema: SchemaRef,
    storage: StorageSpec,
    files: Vec<StagedFile>,
}

impl StagedTable {
    pub fn new(schema: SchemaRef, storage: StorageSpec, files: Vec<StagedFile>) -> Self {
        Self {
            schema,
            storage,
            files,
        }
    }
}

#[async_trait]
impl TableProvider for StagedTable {
    fn as_any(&self) -> &dyn Any {
        self
    }

    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    fn table_type(&self) -> TableType {
        TableType::Temporary
    }

    async fn scan(
        &self,
        state: &dyn Session,
        projection: Option<&Vec<usize>>,
        _filters: &[Expr],
        _limit: Option<usize>,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        let groups = group_staged(&self.files, state.config().target_partitions());
        let scan: Arc<dyn ExecutionPlan> = Arc::new(StagedScanExec::new(
            self.schema.clone(),
            self.storage.clone(),
            groups,
        ));
        match projection {
            Some(indices) if !is_identity(indices, self.schema.fields().len()) => {
                let exprs = indices
                    .iter()
                    .map(|&i| {
                        let field = self.schema.fields().get(i).ok_or_else(|| {
                            DataFusionError::Internal(format!("projection index {i} out of range"))
                        })?;
                        let column: Arc<dyn PhysicalExpr> = Arc::new(Column::new(field.name(), i));
                        Ok(ProjectionExpr::new(column, field.name().clone()))
                    })
                    .collect::<DfResult<Vec<_>>>()?;
                Ok(Arc::new(ProjectionExec::try_new(exprs, scan)?))
            }
            _ => Ok(scan),
        }
    }
}

fn is_identity(indices: &[usize], width: usize) -> bool {
    indices.len() == width && indices.iter().enumerate().all(|(i, &j)| i == j)
}
