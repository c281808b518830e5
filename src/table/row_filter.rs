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
//!
//! The reader tests an `IN` list value by value (an equality and an `OR` per value and
//! row): with 57 values it took 470 ms to filter lineitem's 6 M rows, where the hash
//! lookup of DataFusion's filter above takes a few. So the reader gets a list of more
//! than [`MAX_READER_IN_VALUES`] values as the range its values span ([`for_reader`]),
//! which prunes row groups and filters rows as well as the list where its values are
//! close together, and not at all where they are spread out; `NOT IN` such a list it
//! does not get.

use std::collections::HashMap;

use datafusion::arrow::datatypes::Schema;
use datafusion::common::DFSchema;
use datafusion::common::ScalarValue;
use datafusion::common::stats::ColumnStatistics;
use datafusion::execution::context::ExecutionProps;
use datafusion::logical_expr::expr::InList;
use datafusion::logical_expr::expr_rewriter::unnormalize_cols;
use datafusion::logical_expr::utils::conjunction;
use datafusion::logical_expr::{Expr, lit};
use datafusion::physical_expr::create_physical_expr;

use super::selectivity;

use crate::error::{FloeError, Result};

/// The largest estimated share of rows for which the reader filters rows itself.
pub const MAX_READER_SELECTIVITY: f64 = 0.02;

/// The most values of an `IN` list the reader gets as a list (see [`for_reader`]).
pub const MAX_READER_IN_VALUES: usize = 8;

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

/// What the reader gets of `filter`, one of a scan's conjuncts: the filter itself, or an
/// `IN` list of more than [`MAX_READER_IN_VALUES`] literals as the range its values span
/// (keeping every row the list keeps); nothing for a `NOT IN` such a list, or for a
/// list that long of other than literals.
pub fn for_reader(filter: &Expr) -> Option<Expr> {
    let Expr::InList(InList {
        expr,
        list,
        negated,
    }) = filter
    else {
        return Some(filter.clone());
    };
    if list.len() <= MAX_READER_IN_VALUES {
        return Some(filter.clone());
    }
    if *negated {
        return None;
    }
    let (low, high) = literal_range(list)?;
    let expr = expr.as_ref().clone();
    Some(expr.clone().gt_eq(lit(low)).and(expr.lt_eq(lit(high))))
}

/// The least and greatest of `list`'s values, if all are comparable non-NULL literals
/// (NULLs match nothing: the range leaves them out).
fn literal_range(list: &[Expr]) -> Option<(ScalarValue, ScalarValue)> {
    let mut range: Option<(&ScalarValue, &ScalarValue)> = None;
    for value in list {
        let Expr::Literal(value, _) = value else {
            return None;
        };
        if value.is_null() {
            continue;
        }
        range = Some(match range {
            None => (value, value),
            Some((low, high)) => (
                match value.partial_cmp(low)? {
                    std::cmp::Ordering::Less => value,
                    _ => low,
                },
                match value.partial_cmp(high)? {
                    std::cmp::Ordering::Greater => value,
                    _ => high,
                },
            ),
        });
    }
    range.map(|(low, high)| (low.clone(), high.clone()))
}
