//! The share of rows a filter keeps, estimated from its input's column statistics (the
//! bounds in the manifests, distinct counts of strings): ranges on one column are
//! intersected, an equality keeps one of a column's distinct values, conditions on
//! different columns are taken as independent, and what the statistics cannot tell is
//! guessed.
//!
//! DataFusion estimates a filter only where interval arithmetic covers all of it (integer
//! and float columns, no `IN`, no strings), and takes 20% of the rows otherwise: every
//! filter on a date or a decimal, so most of TPC-H's.

use std::collections::HashMap;
use std::sync::Arc;

use datafusion::arrow::datatypes::{DataType, Schema};
use datafusion::common::ScalarValue;
use datafusion::common::stats::ColumnStatistics;
use datafusion::logical_expr::Operator;
use datafusion::physical_expr::expressions::{
    BinaryExpr, Column, InListExpr, IsNotNullExpr, IsNullExpr, LikeExpr, Literal, NotExpr,
};
use datafusion::physical_expr::{PhysicalExpr, split_conjunction};

/// The share of rows `column = value` keeps where the statistics do not tell (a status
/// column's value may well hold half of them, a name's one row), as DataFusion assumes
/// of a whole filter.
const EQUALITY: f64 = 0.2;
/// The least share the guessed conditions of a filter keep together: guesses multiplied
/// would claim more than any of them knows.
const GUESSED_AT_LEAST: f64 = 0.05;
/// The share of rows another condition keeps where nothing better is known (as
/// DataFusion assumes for a whole filter).
const OTHER: f64 = 0.2;
/// The share a comparison of a column without bounds (`<`, `>`, …) keeps.
const RANGE: f64 = 1.0 / 3.0;

/// The share of rows of an input with `schema` and statistics `columns` (in the
/// schema's order) that `predicate` keeps.
pub fn estimated_selectivity(
    predicate: &Arc<dyn PhysicalExpr>,
    schema: &Schema,
    columns: &[ColumnStatistics],
) -> f64 {
    let mut ranges: HashMap<usize, (Bounds, Range)> = HashMap::new();
    let (mut known, mut guessed) = (1.0, 1.0);
    for condition in split_conjunction(predicate) {
        let bounded = compared(condition).and_then(|(column, op, value)| {
            let bounds = Bounds::of(column, value, columns)?;
            Some((column.index(), op, bounds))
        });
        match bounded {
            Some((
                index,
                op @ (Operator::Lt | Operator::LtEq | Operator::Gt | Operator::GtEq),
                bounds,
            )) => {
                let (_, range) = ranges.entry(index).or_insert((bounds, bounds.all()));
                range.narrow(op, bounds.value);
            }
            Some((_, Operator::Eq, bounds)) if !bounds.hold_value() => known = 0.0,
            _ => match distinct_share(condition, schema, columns) {
                Some(share) => known *= share,
                None => guessed *= guess(condition, schema, columns),
            },
        }
    }
    let ranged: f64 = ranges.values().map(|(b, r)| b.share_of(*r)).product();
    known * ranged * guessed.clamp(GUESSED_AT_LEAST, 1.0)
}

/// The share an equality (`=`, `!=`, `IN`) of a column with literals keeps, where the
/// column's distinct values are known ([`distinct_values`]): one of them per literal.
fn distinct_share(
    condition: &Arc<dyn PhysicalExpr>,
    schema: &Schema,
    columns: &[ColumnStatistics],
) -> Option<f64> {
    let distinct = |column: &Column| {
        let count = column_distinct_values(columns, schema, column.index())?;
        (count > 0).then_some(count as f64)
    };
    if let Some((column, op, _)) = compared(condition) {
        let one = 1.0 / distinct(column)?;
        return match op {
            Operator::Eq => Some(one),
            Operator::NotEq => Some(1.0 - one),
            _ => None,
        };
    }
    let list = condition.as_any().downcast_ref::<InListExpr>()?;
    let column = list.expr().as_any().downcast_ref::<Column>()?;
    if !list
        .list()
        .iter()
        .all(|value| value.as_any().is::<Literal>())
    {
        return None;
    }
    let some = (list.list().len() as f64 / distinct(column)?).min(1.0);
    Some(if list.negated() { 1.0 - some } else { some })
}

/// [`distinct_values`] of column `index` of `schema`, with `columns` its statistics.
pub fn column_distinct_values(
    columns: &[ColumnStatistics],
    schema: &Schema,
    index: usize,
) -> Option<usize> {
    distinct_values(columns.get(index)?, schema.fields().get(index)?.data_type())
}

/// How many distinct values a column of `data_type` has at most, by its statistics: its
/// distinct count, or the values its range holds (integers, decimals at their scale,
/// dates).
pub fn distinct_values(column: &ColumnStatistics, data_type: &DataType) -> Option<usize> {
    if let Some(&count) = column.distinct_count.get_value() {
        return Some(count);
    }
    let (min, max) = (column.min_value.get_value()?, column.max_value.get_value()?);
    let width = match (min, max) {
        (ScalarValue::Date32(Some(min)), ScalarValue::Date32(Some(max))) => {
            usize::try_from(max.checked_sub(*min)?).ok()
        }
        _ if data_type.is_integer() || data_type.is_decimal() => min.distance(max),
        _ => None,
    };
    width.map(|width| width.saturating_add(1))
}

/// A condition's share where the column statistics do not tell it as a whole.
fn guess(condition: &Arc<dyn PhysicalExpr>, schema: &Schema, columns: &[ColumnStatistics]) -> f64 {
    if let Some(share) = distinct_share(condition, schema, columns) {
        return share;
    }
    let guess = |condition| guess(condition, schema, columns);
    let any = condition.as_any();
    if let Some(binary) = any.downcast_ref::<BinaryExpr>() {
        return match binary.op() {
            Operator::And => guess(binary.left()) * guess(binary.right()),
            Operator::Or => (guess(binary.left()) + guess(binary.right())).min(1.0),
            Operator::Eq => EQUALITY,
            Operator::NotEq => 1.0 - EQUALITY,
            Operator::Lt | Operator::LtEq | Operator::Gt | Operator::GtEq => RANGE,
            _ => OTHER,
        };
    }
    if let Some(list) = any.downcast_ref::<InListExpr>() {
        let some = (list.list().len() as f64 * EQUALITY).min(1.0);
        return if list.negated() { 1.0 - some } else { some };
    }
    if let Some(like) = any.downcast_ref::<LikeExpr>() {
        return if like.negated() { 1.0 - OTHER } else { OTHER };
    }
    if let Some(not) = any.downcast_ref::<NotExpr>() {
        return 1.0 - guess(not.arg());
    }
    if any.is::<IsNullExpr>() {
        return EQUALITY;
    }
    if any.is::<IsNotNullExpr>() {
        return 1.0;
    }
    OTHER
}

/// `column op value`, also written `value op column` (then with `op` swapped).
pub fn compared(condition: &Arc<dyn PhysicalExpr>) -> Option<(&Column, Operator, &ScalarValue)> {
    let binary = condition.as_any().downcast_ref::<BinaryExpr>()?;
    let (left, right) = (binary.left().as_any(), binary.right().as_any());
    match (
        left.downcast_ref::<Column>(),
        right.downcast_ref::<Literal>(),
    ) {
        (Some(column), Some(literal)) => Some((column, *binary.op(), literal.value())),
        _ => {
            let column = right.downcast_ref::<Column>()?;
            let literal = left.downcast_ref::<Literal>()?;
            Some((column, binary.op().swap()?, literal.value()))
        }
    }
}

/// A column's smallest and largest value and a value compared with it, as numbers.
#[derive(Clone, Copy)]
struct Bounds {
    min: f64,
    max: f64,
    value: f64,
}

#[derive(Clone, Copy)]
struct Range {
    low: f64,
    high: f64,
}

impl Bounds {
    /// Column `column`'s bounds and `value`, compared as values of `value`'s type.
    fn of(column: &Column, value: &ScalarValue, columns: &[ColumnStatistics]) -> Option<Self> {
        let statistics = columns.get(column.index())?;
        let data_type = value.data_type();
        let as_value = |bound: &ScalarValue| number(&bound.cast_to(&data_type).ok()?);
        Some(Self {
            min: as_value(statistics.min_value.get_value()?)?,
            max: as_value(statistics.max_value.get_value()?)?,
            value: number(value)?,
        })
    }

    fn all(&self) -> Range {
        Range {
            low: self.min,
            high: self.max,
        }
    }

    fn share_of(&self, range: Range) -> f64 {
        let width = self.max - self.min;
        if range.high < range.low {
            0.0
        } else if width <= 0.0 {
            1.0
        } else {
            ((range.high - range.low) / width).clamp(0.0, 1.0)
        }
    }

    /// Whether `value` lies within the bounds (`column = value` keeps no row otherwise).
    fn hold_value(&self) -> bool {
        self.min <= self.value && self.value <= self.max
    }
}

impl Range {
    fn narrow(&mut self, op: Operator, value: f64) {
        match op {
            Operator::Lt | Operator::LtEq => self.high = self.high.min(value),
            _ => self.low = self.low.max(value),
        }
    }
}

/// A numeric, date or time value as a number on its type's own scale.
fn number(value: &ScalarValue) -> Option<f64> {
    let number = match value {
        ScalarValue::Int8(v) => v.map(f64::from),
        ScalarValue::Int16(v) => v.map(f64::from),
        ScalarValue::Int32(v) | ScalarValue::Date32(v) => v.map(f64::from),
        ScalarValue::UInt8(v) => v.map(f64::from),
        ScalarValue::UInt16(v) => v.map(f64::from),
        ScalarValue::UInt32(v) => v.map(f64::from),
        ScalarValue::UInt64(v) => v.map(|v| v as f64),
        ScalarValue::Int64(v)
        | ScalarValue::Date64(v)
        | ScalarValue::Time64Microsecond(v)
        | ScalarValue::Time64Nanosecond(v)
        | ScalarValue::TimestampMicrosecond(v, _)
        | ScalarValue::TimestampNanosecond(v, _)
        | ScalarValue::TimestampMillisecond(v, _)
        | ScalarValue::TimestampSecond(v, _) => v.map(|v| v as f64),
        ScalarValue::Float32(v) => v.map(f64::from),
        ScalarValue::Float64(v) => *v,
        ScalarValue::Decimal128(v, _, scale) => v.map(|v| v as f64 / 10f64.powi(i32::from(*scale))),
        _ => None,
    };
    number.filter(|n| n.is_finite())
}
