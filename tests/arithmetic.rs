//! Floe's own arithmetic functions, called as the executors call them: decimal `+`, `-`
//! and `*` computed without a check per value where the values fit in 64 bits
//! (`cluster::decimal_arithmetic`), and an interval times a number
//! (`cluster::interval_times`).

use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, AsArray, Datum, Decimal128Array, Scalar};
use datafusion::arrow::compute::kernels::numeric;
use datafusion::arrow::datatypes::{
    DataType, Decimal128Type, Field, IntervalMonthDayNano, IntervalMonthDayNanoType,
};
use datafusion::common::{Result, ScalarValue};
use datafusion::config::ConfigOptions;
use datafusion::logical_expr::{ColumnarValue, ScalarFunctionArgs, ScalarUDF};
use floe::cluster::decimal_arithmetic::decimal_functions;
use floe::cluster::interval_times::interval_times;

fn call(function: &ScalarUDF, args: Vec<ColumnarValue>, rows: usize) -> Result<ColumnarValue> {
    let types: Vec<DataType> = args.iter().map(ColumnarValue::data_type).collect();
    let return_type = function.return_type(&types)?;
    function.invoke_with_args(ScalarFunctionArgs {
        arg_fields: (types.iter())
            .map(|t| Arc::new(Field::new("arg", t.clone(), true)))
            .collect(),
        args,
        number_rows: rows,
        return_field: Arc::new(Field::new("result", return_type, true)),
        config_options: Arc::new(ConfigOptions::default()),
    })
}

fn decimals(values: &[Option<i128>], scale: i8) -> Decimal128Array {
    Decimal128Array::from(values.to_vec())
        .with_precision_and_scale(38, scale)
        .expect("a decimal type")
}

fn decimal_function(name: &str) -> Arc<ScalarUDF> {
    let found = decimal_functions().into_iter().find(|f| f.name() == name);
    found.expect("a decimal function of that name")
}

/// What Arrow's checked kernel answers for `name` (DataFusion's `+`, `-`, `*`).
fn arrow_answer(name: &str, left: &dyn Datum, right: &dyn Datum) -> Result<ArrayRef> {
    Ok(match name {
        "floe_decimal_add" => numeric::add(left, right)?,
        "floe_decimal_subtract" => numeric::sub(left, right)?,
        _ => numeric::mul(left, right)?,
    })
}

fn values_of(value: ColumnarValue) -> Vec<Option<i128>> {
    let array = value.into_array(1).expect("an array");
    array.as_primitive::<Decimal128Type>().iter().collect()
}

const OPERATIONS: [&str; 3] = [
    "floe_decimal_add",
    "floe_decimal_subtract",
    "floe_decimal_multiply",
];

/// At the edges of 64 bits, with rescalings of up to 18 digits and a scalar on either
/// side, each function answers exactly what Arrow's checked kernels answer.
#[test]
fn decimal_operations_answer_as_arrows_checked_kernels_do() {
    let edges = [
        Some(i64::MAX as i128),
        Some(i64::MIN as i128),
        Some(-1),
        Some(0),
        None,
        Some(7),
    ];
    let mut reversed = edges;
    reversed.reverse();
    for (s1, s2) in [(0, 0), (2, 3), (0, 18), (18, 0), (10, 4)] {
        for name in OPERATIONS {
            let function = decimal_function(name);
            let left = decimals(&edges, s1);
            for right in [decimals(&edges, s2), decimals(&reversed, s2)] {
                let args = vec![
                    ColumnarValue::Array(Arc::new(left.clone())),
                    ColumnarValue::Array(Arc::new(right.clone())),
                ];
                let got = call(&function, args, edges.len()).expect("no overflow");
                let expected = arrow_answer(name, &left, &right).expect("no overflow");
                assert_eq!(
                    got.data_type(),
                    *expected.data_type(),
                    "{name} ({s1}, {s2})"
                );
                let expected: Vec<_> = expected.as_primitive::<Decimal128Type>().iter().collect();
                assert_eq!(values_of(got), expected, "{name} ({s1}, {s2})");
            }
            for scalar in [Some(i64::MIN as i128), Some(3), None] {
                let one = Scalar::new(decimals(&[scalar], s2));
                let args = vec![
                    ColumnarValue::Array(Arc::new(left.clone())),
                    ColumnarValue::Scalar(ScalarValue::Decimal128(scalar, 38, s2)),
                ];
                let got = call(&function, args, edges.len()).expect("no overflow");
                let expected = arrow_answer(name, &left, &one).expect("no overflow");
                let expected: Vec<_> = expected.as_primitive::<Decimal128Type>().iter().collect();
                assert_eq!(
                    values_of(got),
                    expected,
                    "{name} ({s1}, {s2}) with {scalar:?}"
                );
            }
        }
    }
}

/// Values past 64 bits, and rescalings past 18 digits, are still exact (Arrow's kernels
/// compute them), and an overflow of 128 bits fails instead of wrapping.
#[test]
fn decimal_operations_past_64_bits_are_exact_or_fail() {
    let past = i128::from(i64::MAX) * 1_000;
    let multiply = decimal_function("floe_decimal_multiply");
    let args = |l: i128, r: i128| {
        vec![
            ColumnarValue::Array(Arc::new(decimals(&[Some(2), Some(l)], 0))),
            ColumnarValue::Array(Arc::new(decimals(&[Some(3), Some(r)], 0))),
        ]
    };
    let product = call(&multiply, args(past, 3), 2).expect("no overflow");
    assert_eq!(values_of(product), [Some(6), Some(past * 3)]);
    let error = call(&multiply, args(past, 10_i128.pow(17)), 2).expect_err("an overflow");
    assert!(error.to_string().contains("Overflow"), "{error}");

    let add = decimal_function("floe_decimal_add");
    let far = vec![
        ColumnarValue::Array(Arc::new(decimals(&[Some(1)], 0))),
        ColumnarValue::Array(Arc::new(decimals(&[Some(1)], 19))),
    ];
    let sum = call(&add, far, 1).expect("no overflow");
    assert_eq!(values_of(sum), [Some(10_i128.pow(19) + 1)]);
}

fn interval(months: i32, days: i32, nanoseconds: i64) -> IntervalMonthDayNano {
    IntervalMonthDayNano {
        months,
        days,
        nanoseconds,
    }
}

fn times(value: IntervalMonthDayNano, factor: ScalarValue) -> Result<IntervalMonthDayNano> {
    let args = vec![
        ColumnarValue::Scalar(ScalarValue::IntervalMonthDayNano(Some(value))),
        ColumnarValue::Scalar(factor),
    ];
    let result = call(&interval_times(), args, 1)?.into_array(1)?;
    Ok(result.as_primitive::<IntervalMonthDayNanoType>().value(0))
}

#[test]
fn an_interval_times_a_whole_number_multiplies_each_part() {
    let product = times(interval(1, 2, 3), ScalarValue::Int64(Some(-4))).expect("in range");
    assert_eq!(product, interval(-4, -8, -12));
    assert!(times(interval(i32::MAX, 0, 0), ScalarValue::Int64(Some(2))).is_err());
}

#[test]
fn an_interval_times_a_fraction_carries_into_days_then_time() {
    // PostgreSQL: interval '1 month 1 day' * 1.5 = '1 mon 16 days 12:00:00'.
    let hour = 3_600_000_000_000;
    let product = times(interval(1, 1, 0), ScalarValue::Float64(Some(1.5))).expect("in range");
    assert_eq!(product, interval(1, 16, 12 * hour));
    // interval '1 day' / 3 = '08:00:00' (to the microsecond).
    let third = times(interval(0, 1, 0), ScalarValue::Float64(Some(1.0 / 3.0))).expect("in range");
    assert_eq!(third, interval(0, 0, 8 * hour));
    assert!(times(interval(0, 0, 1), ScalarValue::Float64(Some(f64::INFINITY))).is_err());
}
