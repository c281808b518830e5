//! Row estimates from column statistics: the filter estimator (`table::selectivity`),
//! the distinct counts of strings (`table::statistics`) and the reader's row filter
//! choice (`table::row_filter`).

use std::sync::Arc;

use datafusion::arrow::datatypes::{DataType, Field, Schema};
use datafusion::common::stats::{ColumnStatistics, Precision};
use datafusion::common::{Column, DFSchema, ScalarValue};
use datafusion::execution::context::ExecutionProps;
use datafusion::logical_expr::{Expr, col, lit};
use datafusion::physical_expr::{PhysicalExpr, create_physical_expr};
use floe::table::row_filter::RowFilter;
use floe::table::selectivity::{distinct_values, estimated_selectivity};
use floe::table::statistics::estimated_distinct;

/// DataFusion's (and Floe's) guess for a condition the statistics cannot tell.
const GUESS: f64 = 0.2;
/// The least share guessed conditions keep together.
const GUESSED_AT_LEAST: f64 = 0.05;

fn schema() -> Schema {
    Schema::new(vec![
        Field::new("day", DataType::Int32, false),
        Field::new("name", DataType::Utf8, false),
        Field::new("price", DataType::Decimal128(10, 2), false),
        Field::new("status", DataType::Utf8, false),
    ])
}

/// `day` in 0..=1000, `price` in 0.00..=100.00, `status` of 4 distinct values, nothing
/// known of `name`.
fn statistics() -> Vec<ColumnStatistics> {
    let mut day = ColumnStatistics::new_unknown();
    day.min_value = Precision::Inexact(ScalarValue::Int32(Some(0)));
    day.max_value = Precision::Inexact(ScalarValue::Int32(Some(1000)));
    let mut price = ColumnStatistics::new_unknown();
    price.min_value = Precision::Exact(ScalarValue::Decimal128(Some(0), 10, 2));
    price.max_value = Precision::Exact(ScalarValue::Decimal128(Some(10_000), 10, 2));
    let mut status = ColumnStatistics::new_unknown();
    status.distinct_count = Precision::Inexact(4);
    vec![day, ColumnStatistics::new_unknown(), price, status]
}

fn physical(filter: Expr, schema: &Schema) -> Arc<dyn PhysicalExpr> {
    let df_schema = DFSchema::try_from(schema.clone()).expect("schema");
    create_physical_expr(&filter, &df_schema, &ExecutionProps::new()).expect("expr")
}

fn estimate(filter: Expr) -> f64 {
    let schema = schema();
    estimated_selectivity(&physical(filter, &schema), &schema, &statistics())
}

fn near(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-9
}

#[test]
fn ranges_on_one_column_are_intersected() {
    let range = col("day").gt_eq(lit(100)).and(col("day").lt(lit(110)));
    assert!(near(estimate(range), 0.01));
    assert!(estimate(col("day").lt_eq(lit(980))) > 0.9);
    let between = col("day")
        .between(lit(500), lit(509))
        .and(col("name").eq(lit("x")));
    assert!(near(estimate(between), 0.009 * GUESS));
    let decimal = Expr::Literal(ScalarValue::Decimal128(Some(2_500), 10, 2), None);
    assert!(near(estimate(col("price").lt(decimal)), 0.25));
}

#[test]
fn equality_counts_the_values_a_range_holds() {
    assert!(near(estimate(lit(7).eq(col("day"))), 1.0 / 1001.0));
    assert_eq!(estimate(col("day").eq(lit(5000))), 0.0);
    let names = col("name").in_list(vec![lit("a"), lit("b")], false);
    assert!(near(estimate(names), 2.0 * GUESS));
    assert!(near(estimate(col("name").like(lit("a%"))), GUESS));
    let null = Expr::Literal(ScalarValue::Int32(None), None);
    assert!(near(estimate(col("day").lt(null)), 1.0 / 3.0));
}

#[test]
fn decimals_and_dates_count_the_values_their_range_holds() {
    let price = Expr::Literal(ScalarValue::Decimal128(Some(2_500), 10, 2), None);
    assert!(near(estimate(col("price").eq(price)), 1.0 / 10_001.0));
    let mut days = ColumnStatistics::new_unknown();
    days.min_value = Precision::Inexact(ScalarValue::Date32(Some(10)));
    days.max_value = Precision::Inexact(ScalarValue::Date32(Some(40)));
    assert_eq!(distinct_values(&days, &DataType::Date32), Some(31));
    days.distinct_count = Precision::Inexact(7);
    assert_eq!(distinct_values(&days, &DataType::Date32), Some(7));
    let unknown = ColumnStatistics::new_unknown();
    assert_eq!(distinct_values(&unknown, &DataType::Int64), None);
}

#[test]
fn equality_keeps_one_of_the_distinct_values() {
    assert!(near(estimate(col("status").eq(lit("F"))), 0.25));
    assert!(near(estimate(lit("F").eq(col("status"))), 0.25));
    assert!(near(estimate(col("status").not_eq(lit("F"))), 0.75));
    let two = col("status").in_list(vec![lit("F"), lit("O")], false);
    assert!(near(estimate(two), 0.5));
    let not_two = col("status").in_list(vec![lit("F"), lit("O")], true);
    assert!(near(estimate(not_two), 0.5));
    // Known shares are not held up by the guesses' floor.
    let both = col("status")
        .eq(lit("F"))
        .and(col("day").gt_eq(lit(0)).and(col("day").lt(lit(10))));
    assert!(near(estimate(both), 0.25 * 0.01));
    // Inside an OR the distinct count still tells each side.
    let either = col("status").eq(lit("F")).or(col("status").eq(lit("O")));
    assert!(near(estimate(either), 0.5));
}

#[test]
fn guesses_together_keep_at_least_a_floor() {
    let guessed = col("name").eq(lit("a")).and(col("name").like(lit("%b")));
    assert!(near(estimate(guessed.clone()), GUESSED_AT_LEAST));
    let with_range = guessed.and(col("day").lt(lit(100)));
    assert!(near(estimate(with_range), GUESSED_AT_LEAST * 0.1));
}

#[test]
fn distinct_strings_are_about_two_to_the_bits_per_value() {
    // TPC-H SF1 as pyiceberg writes it: l_linestatus (2 values), l_shipmode (7),
    // p_container (40), o_clerk (1,000), and c_name (150,000 names, all different).
    let rows = 6_001_215u64;
    let distinct = |bits_per_value: f64, rows: u64| {
        estimated_distinct((bits_per_value * rows as f64 / 8.0) as u64, rows).expect("values")
    };
    assert_eq!(distinct(0.915, rows), 2);
    assert_eq!(distinct(3.017, rows), 8);
    assert!((30..=80).contains(&distinct(5.922, 200_000)));
    assert!((800..=1_500).contains(&distinct(10.142, 1_500_000)));
    assert_eq!(distinct(18.791, 150_000), 150_000);
    assert_eq!(estimated_distinct(0, 100), Some(1));
    assert_eq!(estimated_distinct(100, 0), None);
    assert_eq!(estimated_distinct(u64::MAX, 10), Some(10));
}

#[test]
fn the_reader_filters_when_few_rows_pass() {
    let schema = Schema::new(vec![Field::new("day", DataType::Int32, false)]);
    let stats = [statistics().swap_remove(0)];
    let qualified = Expr::Column(Column::new(Some("t"), "day"));
    let few = [qualified.clone().gt_eq(lit(100)), col("day").lt(lit(110))];
    assert!(RowFilter::Auto.wanted(&few, &schema, &stats));
    let many = [qualified.lt(lit(900))];
    assert!(!RowFilter::Auto.wanted(&many, &schema, &stats));
    assert!(RowFilter::Always.wanted(&many, &schema, &stats));
    assert!(!RowFilter::Never.wanted(&few, &schema, &stats));
}

#[test]
fn a_list_of_whole_numbers_keeps_its_share_of_their_range() {
    let sizes = col("day").in_list(vec![lit(1), lit(2), lit(3)], false);
    assert!(near(estimate(sizes), 3.0 / 1001.0));
    assert!(near(
        estimate(col("day").not_eq(lit(3))),
        1.0 - 1.0 / 1001.0
    ));
}
