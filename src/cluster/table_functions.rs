//! DataFusion's table functions (`generate_series`, `range`), made safe to ship to
//! executors.
//!
//! datafusion-proto 53 encodes a `generate_series` scan that selects no column (as in
//! `SELECT count(*) FROM generate_series(1, 10)`) with its narrowed, empty schema but
//! without the selection; the executor's generator then makes its `value` column for a
//! schema of none, and the task fails ("number of columns(1) must match number of
//! fields(0)"). Here such a scan reads the column and drops it in a projection of its
//! own, which encodes faithfully.

use std::any::Any;
use std::collections::HashMap;
use std::sync::Arc;

use async_trait::async_trait;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::catalog::{Session, TableFunction, TableFunctionImpl, TableProvider};
use datafusion::error::Result;
use datafusion::functions_table::all_default_table_functions;
use datafusion::logical_expr::{Expr, TableProviderFilterPushDown, TableType};
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::projection::{ProjectionExec, ProjectionExpr};

/// The default table functions, by name, each scanning as described above.
pub fn table_functions() -> HashMap<String, Arc<TableFunction>> {
    all_default_table_functions()
        .into_iter()
        .map(|f| {
            let encodable = Encodable(f.function().clone());
            let name = f.name().to_string();
            (
                name.clone(),
                Arc::new(TableFunction::new(name, Arc::new(encodable))),
            )
        })
        .collect()
}

#[derive(Debug)]
struct Encodable(Arc<dyn TableFunctionImpl>);

impl TableFunctionImpl for Encodable {
    fn call(&self, args: &[Expr]) -> Result<Arc<dyn TableProvider>> {
        Ok(Arc::new(WholeRows(self.0.call(args)?)))
    }
}

/// A table whose scans never select an empty set of columns.
#[derive(Debug)]
struct WholeRows(Arc<dyn TableProvider>);

#[async_trait]
impl TableProvider for WholeRows {
    fn as_any(&self) -> &dyn Any {
        self
    }

    fn schema(&self) -> SchemaRef {
        self.0.schema()
    }

    fn table_type(&self) -> TableType {
        self.0.table_type()
    }

    fn supports_filters_pushdown(
        &self,
        filters: &[&Expr],
    ) -> Result<Vec<TableProviderFilterPushDown>> {
        self.0.supports_filters_pushdown(filters)
    }

    async fn scan(
        &self,
        state: &dyn Session,
        projection: Option<&Vec<usize>>,
        filters: &[Expr],
        limit: Option<usize>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        if projection.is_some_and(|columns| columns.is_empty()) {
            let rows = self.0.scan(state, None, filters, limit).await?;
            let none: Vec<ProjectionExpr> = Vec::new();
            return Ok(Arc::new(ProjectionExec::try_new(none, rows)?));
        }
        self.0.scan(state, projection, filters, limit).await
    }
}
