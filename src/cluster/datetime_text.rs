//! Timestamps and times as text, written as PostgreSQL, DuckDB and Spark write them:
//! `2024-02-29 23:59:59.5`, `10:00:00.25`, a `TIMESTAMPTZ` with its offset
//! (`2024-01-01 08:00:00+00`). Arrow's cast wrote `2024-02-29T23:59:59.500`, so did
//! `CAST(ts AS VARCHAR)`, `'at ' || ts` and `concat('x', ts)` (DataFusion's coercion
//! casts), and the text of a `TIMESTAMPTZ` had no offset.
//!
//! An analyzer rule after DataFusion's coercion writes each cast of a timestamp or a time
//! to a string as a call of `floe_datetime_text`, before constants are folded.

use std::any::Any;
use std::sync::Arc;

use chrono::{DateTime, NaiveDateTime, NaiveTime, Offset, TimeZone, Timelike};
use datafusion::arrow::array::timezone::Tz;
use datafusion::arrow::array::{Array, ArrayRef, AsArray, StringArray};
use datafusion::arrow::datatypes::{
    ArrowPrimitiveType, ArrowTimestampType, DataType, Time32MillisecondType, Time32SecondType,
    Time64MicrosecondType, Time64NanosecondType, TimeUnit, TimestampMicrosecondType,
    TimestampMillisecondType, TimestampNanosecondType, TimestampSecondType,
};
use datafusion::arrow::temporal_conversions::{as_datetime, as_time};
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::Transformed;
use datafusion::common::{DFSchema, Result, ScalarValue, exec_err, plan_err};
use datafusion::logical_expr::ExprSchemable;
use datafusion::logical_expr::expr::{Cast, ScalarFunction, TryCast};
use datafusion::logical_expr::{
    ColumnarValue, Expr, LogicalPlan, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature,
    Volatility,
};
use datafusion::optimizer::AnalyzerRule;

use super::expression_rule;

const DATETIME_TEXT: &str = "floe_datetime_text";

#[derive(Debug)]
pub(super) struct DatetimeText;

impl AnalyzerRule for DatetimeText {
    fn name(&self) -> &str {
        "floe_datetime_text"
    }

    fn analyze(&self, plan: LogicalPlan, _config: &ConfigOptions) -> Result<LogicalPlan> {
        let is_text_cast = |e: &Expr| match e {
            Expr::Cast(Cast { data_type, .. }) | Expr::TryCast(TryCast { data_type, .. }) => {
                is_text(data_type)
            }
            _ => false,
        };
        Ok(expression_rule::rewrite_expressions(plan, is_text_cast, written_as_text)?.data)
    }
}

fn is_text(data_type: &DataType) -> bool {
    matches!(
        data_type,
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View
    )
}

fn is_datetime(data_type: &DataType) -> bool {
    matches!(
        data_type,
        DataType::Timestamp(..) | DataType::Time32(_) | DataType::Time64(_)
    )
}

/// A cast of a timestamp or a time to a string as `floe_datetime_text` (cast on to the
/// string type asked, where it is not `Utf8`).
fn written_as_text(expr: Expr, schema: &DFSchema) -> Transformed<Expr> {
    let (inner, data_type) = match &expr {
        Expr::Cast(Cast { expr, data_type }) | Expr::TryCast(TryCast { expr, data_type }) => {
            (expr, data_type)
        }
        _ => return Transformed::no(expr),
    };
    if !is_text(data_type) || !inner.get_type(schema).is_ok_and(|t| is_datetime(&t)) {
        return Transformed::no(expr);
    }
    let text = Expr::ScalarFunction(ScalarFunction::new_udf(
        datetime_text(),
        vec![inner.as_ref().clone()],
    ));
    Transformed::yes(match data_type {
        DataType::Utf8 => text,
        other => Expr::Cast(Cast::new(Box::new(text), other.clone())),
    })
}

/// `floe_datetime_text(x)`: a timestamp or a time as SQL engines write it.
pub fn datetime_text() -> Arc<ScalarUDF> {
    Arc::new(ScalarUDF::new_from_impl(DatetimeTextFunction {
        signature: Signature::any(1, Volatility::Immutable),
    }))
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct DatetimeTextFunction {
    signature: Signature,
}

impl ScalarUDFImpl for DatetimeTextFunction {
    fn as_any(&self) -> &dyn Any {
        self
    }

    fn name(&self) -> &str {
        DATETIME_TEXT
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, arg_types: &[DataType]) -> Result<DataType> {
        match arg_types {
            [t] if is_datetime(t) => Ok(DataType::Utf8),
            _ => plan_err!("{DATETIME_TEXT} takes a timestamp or a time"),
        }
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let [value] = args.args.as_slice() else {
            return exec_err!("{DATETIME_TEXT} takes one argument");
        };
        let is_scalar = matches!(value, ColumnarValue::Scalar(_));
        let text = Arc::new(as_text(&value.to_array(args.number_rows)?)?) as ArrayRef;
        Ok(match is_scalar {
            true => ColumnarValue::Scalar(ScalarValue::try_from_array(&text, 0)?),
            false => ColumnarValue::Array(text),
        })
    }
}

fn as_text(values: &ArrayRef) -> Result<StringArray> {
    match values.data_type() {
        DataType::Timestamp(unit, zone) => {
            let zone: Option<Tz> = zone.as_deref().map(str::parse).transpose()?;
            match unit {
                TimeUnit::Second => timestamps::<TimestampSecondType>(values, zone),
                TimeUnit::Millisecond => timestamps::<TimestampMillisecondType>(values, zone),
                TimeUnit::Microsecond => timestamps::<TimestampMicrosecondType>(values, zone),
                TimeUnit::Nanosecond => timestamps::<TimestampNanosecondType>(values, zone),
            }
        }
        DataType::Time32(TimeUnit::Second) => times::<Time32SecondType>(values),
        DataType::Time32(TimeUnit::Millisecond) => times::<Time32MillisecondType>(values),
        DataType::Time64(TimeUnit::Microsecond) => times::<Time64MicrosecondType>(values),
        DataType::Time64(TimeUnit::Nanosecond) => times::<Time64NanosecondType>(values),
        other => exec_err!("{DATETIME_TEXT} of {other}"),
    }
}

fn timestamps<T: ArrowTimestampType>(values: &ArrayRef, zone: Option<Tz>) -> Result<StringArray> {
    values
        .as_primitive::<T>()
        .iter()
        .map(|v| {
            let Some(v) = v else { return Ok(None) };
            let text = match zone {
                None => as_datetime::<T>(v).map(|t| timestamp_text(&t)),
                Some(zone) => {
                    as_datetime::<T>(v).map(|utc| zone_text(&zone.from_utc_datetime(&utc)))
                }
            };
            match text {
                Some(text) => Ok(Some(text)),
                None => exec_err!("timestamp {v} is out of range"),
            }
        })
        .collect()
}

fn times<T: ArrowPrimitiveType>(values: &ArrayRef) -> Result<StringArray>
where
    T::Native: Into<i64>,
{
    values
        .as_primitive::<T>()
        .iter()
        .map(|v| {
            let Some(v) = v else { return Ok(None) };
            match as_time::<T>(v.into()) {
                Some(time) => Ok(Some(time_text(&time))),
                None => exec_err!("time {} is out of range", v.into()),
            }
        })
        .collect()
}

/// `2024-02-29 23:59:59.5`: the fraction of a second without its trailing zeros.
fn timestamp_text(t: &NaiveDateTime) -> String {
    format!("{} {}", t.date().format("%Y-%m-%d"), time_text(&t.time()))
}

/// `2024-01-01 08:00:00+00`, `… 13:30:00+05:30`: the time where the zone is, and the
/// zone's offset from UTC in hours (and minutes, where it has some).
fn zone_text(t: &DateTime<Tz>) -> String {
    let offset = t.offset().fix().local_minus_utc();
    let sign = if offset < 0 { '-' } else { '+' };
    let (hours, minutes) = (offset.abs() / 3600, offset.abs() % 3600 / 60);
    let local = timestamp_text(&t.naive_local());
    match minutes {
        0 => format!("{local}{sign}{hours:02}"),
        _ => format!("{local}{sign}{hours:02}:{minutes:02}"),
    }
}

fn time_text(t: &NaiveTime) -> String {
    let whole = t.format("%H:%M:%S").to_string();
    match t.nanosecond() % 1_000_000_000 {
        0 => whole,
        nanos => {
            let fraction = format!("{nanos:09}");
            format!("{whole}.{}", fraction.trim_end_matches('0'))
        }
    }
}
