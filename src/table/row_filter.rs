//! Whether the reader filters a scan's rows itself, by how many rows its filters are
//! estimated to keep (from the column bounds in the manifests).
//!
//! Iceberg's reader applies the predicate it is given as a Parquet row filter: it
//! decodes the predicate's columns, evaluates it, then decodes the other columns for the
//! rows it kept only. That pays when few rows are kept (a lookup) and costs when many
//! are: a filter keeping 15% of lineitem took 304 ms of CPU with the row filter and
//! 227 ms without (`benches/row_filter.py`). The filters are applied above the scan
//! anyway (pushdown is `Inexact`), and files are pruned by them at planning either way,
//! so by default the reader gets them only when they are estimated to keep at most
//! [`MAX_READER_SELECTIVITY`] of the rows. The table property [`ROW_FILTER`] overrides
//! that.

use std::collections::HashMap;

use datafusion::arrow::datatypes::Schema;
use datafusion::common::DFSchema;
use datafusion::common::stats::ColumnStatistics;
use datafusion::execution::context::ExecutionProps;
use datafusion::logical_expr::Expr;
use datafusion::logical_expr::expr_rewriter::unnormalize_cols;
use datafusion::logical_expr::utils::conjunction;
use datafusion::physical_expr::create_physical_expr;

use super::selectivity;

use crate::error::{FloeError, Result};

/// The largest estimated share of rows for which the reader filters rows itself.
pub const MAX_READER_SELECTIVITY: f64 = 0.02;

/// Table property: whether the reader filters rows itself: `auto` (the default: when
/// the filters are estimated to keep at most 2% of the rows), `always` or `never`.
pub const ROW_FILTER: &str = "read.parquet.row-filter";

/// What [`ROW_FILTER`] says.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum RowFilter {
    Auto,
    Always,
    Never,
}

impl RowFilter {
    /// The table's choice; a value other than the three is refused.
    pub fn of(properties: &HashMap<String, String>) -> Result<Self> {
        match properties
            .get(ROW_FILTER)
            .map(|v| v.to_ascii_lowercase())
            .as_deref()
        {
            None | Some("auto") => Ok(Self::Auto),
            Some("always") => Ok(Self::Always),
            Some("never") => Ok(Self::Never),
            Some(other) => Err(FloeError::invalid(format!(
                "table property {ROW_FILTER}: '{other}' is not auto, always or never"
            ))),
        }
    }

    /// Whether the reader should filter rows for `filters`, over columns of `schema` with
    /// statistics `columns`.
    pub fn wanted(self, filters: &[Expr], schema: &Schema, columns: &[ColumnStatistics]) -> bool {
        match self {
            Self::Always => true,
            Self::Never => false,
            Self::Auto => estimated_selectivity(filters, schema, columns)
                .is_none_or(|share| share <= MAX_READER_SELECTIVITY),
        }
    }
}

/// The share of rows estimated to pass all of `filters`, over columns of `schema` with
/// statistics `columns`; `None` where they cannot be planned over the scan's columns.
fn estimated_selectivity(
    filters: &[Expr],
    schema: &Schema,
    columns: &[ColumnStatistics],
) -> Option<f64> {
    let filter = conjunction(unnormalize_cols(filters.iter().cloned()))?;
    let df_schema = DFSchema::try_from(schema.clone()).ok()?;
    let predicate = create_physical_expr(&filter, &df_schema, &ExecutionProps::new()).ok()?;
    Some(selectivity::estimated_selectivity(
        &predicate, schema, columns,
    ))
}
