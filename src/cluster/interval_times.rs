//! `floe_interval_times(interval, n)`: an interval `n` times over, what SQL writes as
//! `n * INTERVAL '1 day'` (DataFusion 53 cannot multiply an interval; Floe's SQL layer
//! rewrites such products into this call). As PostgreSQL computes it: a whole number
//! multiplies months, days and time each; a fraction of a month carries into days (30 to
//! a month) and a fraction of a day into time, rounded to the microsecond.

use std::any::Any;
use std::sync::Arc;

use datafusion::arrow::array::{ArrayRef, AsArray, IntervalMonthDayNanoArray};
use datafusion::arrow::compute::try_binary;
use datafusion::arrow::datatypes::{
    DataType, Float64Type, Int64Type, IntervalMonthDayNano, IntervalMonthDayNanoType, IntervalUnit,
};
use datafusion::arrow::error::ArrowError;
use datafusion::common::{Result, plan_err};
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};

/// The function's name, by which SQL and executors find it.
pub const NAME: &str = "floe_interval_times";

const NANOS_PER_DAY: f64 = 86_400e9;
const DAYS_PER_MONTH: f64 = 30.0;

pub fn interval_times() -> Arc<ScalarUDF> {
    Arc::new(ScalarUDF::new_from_impl(IntervalTimes::default()))
}

#[derive(Debug, PartialEq, Eq, Hash)]
pub struct IntervalTimes {
    signature: Signature,
}

impl Default for IntervalTimes {
    fn default() -> Self {
        Self {
            signature: Signature::user_defined(Volatility::Immutable),
        }
    }
}

impl ScalarUDFImpl for IntervalTimes {
    fn as_any(&self) -> &dyn Any {
        self
    }

    fn name(&self) -> &str {
        NAME
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        let [interval, factor] = arg_types else {
            return plan_err!("{NAME} takes an interval and a number");
        };
        if !matches!(interval, DataType::Interval(_) | DataType::Null) {
            return plan_err!("cannot multiply {interval} by a number: not an interval");
        }
        let factor = match factor {
            DataType::Null => DataType::Int64,
            t if t.is_integer() => DataType::Int64,
            t if t.is_floating()
                || matches!(t, DataType::Decimal128(..) | DataType::Decimal256(..)) =>
            {
                DataType::Float64
            }
            other => return plan_err!("cannot multiply an interval by {other}"),
        };
        Ok(vec![interval_type(), factor])
    }

    fn return_type(&self, _arg_types: &[DataType]) -> Result<DataType> {
        Ok(interval_type())
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let arrays = ColumnarValue::values_to_arrays(&args.args)?;
        let [intervals, factors] = arrays.as_slice() else {
            return plan_err!("{NAME} takes an interval and a number");
        };
        let intervals = intervals.as_primitive::<IntervalMonthDayNanoType>();
        let products: IntervalMonthDayNanoArray = match factors.data_type() {
            DataType::Float64 => try_binary(
                intervals,
                factors.as_primitive::<Float64Type>(),
                times_fraction,
            )?,
            _ => try_binary(intervals, factors.as_primitive::<Int64Type>(), times_whole)?,
        };
        Ok(ColumnarValue::Array(Arc::new(products) as ArrayRef))
    }
}

fn interval_type() -> DataType {
    DataType::Interval(IntervalUnit::MonthDayNano)
}

fn out_of_range() -> ArrowError {
    ArrowError::ArithmeticOverflow("interval out of range".to_string())
}

fn times_whole(v: IntervalMonthDayNano, n: i64) -> Result<IntervalMonthDayNano, ArrowError> {
    let part = |value: i64| value.checked_mul(n).ok_or_else(out_of_range);
    Ok(IntervalMonthDayNano {
        months: i32::try_from(part(v.months.into())?).map_err(|_| out_of_range())?,
        days: i32::try_from(part(v.days.into())?).map_err(|_| out_of_range())?,
        nanoseconds: part(v.nanoseconds)?,
    })
}

fn times_fraction(v: IntervalMonthDayNano, f: f64) -> Result<IntervalMonthDayNano, ArrowError> {
    let months = f64::from(v.months) * f;
    let days = f64::from(v.days) * f;
    let month_days = months.fract() * DAYS_PER_MONTH;
    // The fractions of a day left over, as time; whole days of it move to the days.
    let spilled = (days.fract() + month_days.fract()) * NANOS_PER_DAY;
    let spilled_days = (spilled / NANOS_PER_DAY).trunc();
    let days = days.trunc() + month_days.trunc() + spilled_days;
    let nanos = v.nanoseconds as f64 * f + (spilled - spilled_days * NANOS_PER_DAY);
    let nanos = (nanos / 1e3).round() * 1e3;
    let whole = |value: f64, max: f64| {
        (value.is_finite() && value.abs() <= max)
            .then_some(value)
            .ok_or_else(out_of_range)
    };
    Ok(IntervalMonthDayNano {
        months: whole(months.trunc(), f64::from(i32::MAX))? as i32,
        days: whole(days, f64::from(i32::MAX))? as i32,
        nanoseconds: whole(nanos, 9.2e18)? as i64,
    })
}
