//! Filter pushdown is sound: a translated predicate is never stronger than the filter.

use datafusion::arrow::datatypes::DataType;
use datafusion::common::ScalarValue;
use datafusion::logical_expr::{cast, col, lit, not};
use floe::table::filter::{Columns, filters_to_predicate, to_predicate};
use std::sync::Arc;

use iceberg::spec::{NestedField, PrimitiveType, Schema, Type};

use crate::support::schema;

#[test]
fn exact_comparisons_are_translated() {
    let p = to_predicate(&col("id").gt(lit(5i64)), &columns(&schema())).expect("translated");
    assert_eq!(p.to_string(), "id > 5");
    let p = to_predicate(&lit(5i64).lt(col("id")), &columns(&schema())).expect("translated");
    assert_eq!(p.to_string(), "id > 5");
    let p = to_predicate(
        &col("name").is_null().or(col("name").eq(lit("x"))),
        &columns(&schema()),
    );
    assert!(p.is_some());
}

#[test]
fn partial_translations_are_never_negated_or_strengthened() {
    let like = col("name").like(lit("%x%"));
    // NOT (id > 5 AND name LIKE ..) must not become NOT (id > 5).
    assert!(
        to_predicate(
            &not(col("id").gt(lit(5i64)).and(like.clone())),
            &columns(&schema())
        )
        .is_none()
    );
    // An OR with an untranslatable side says nothing.
    assert!(
        to_predicate(
            &col("id").gt(lit(5i64)).or(like.clone()),
            &columns(&schema())
        )
        .is_none()
    );
    // Top-level conjuncts may be dropped (the rest is weaker than the filter).
    let p =
        filters_to_predicate(&[col("id").gt(lit(5i64)), like], &columns(&schema())).expect("some");
    assert_eq!(p.to_string(), "id > 5");
}

#[test]
fn casts_literal_type_mismatches_and_float_ranges_are_left_to_datafusion() {
    assert!(
        to_predicate(
            &cast(col("price"), DataType::Int32).eq(lit(1i32)),
            &columns(&schema())
        )
        .is_none()
    );
    assert!(to_predicate(&col("id").eq(lit(5i32)), &columns(&schema())).is_none());
    assert!(to_predicate(&col("price").gt(lit(1.5f64)), &columns(&schema())).is_none());
    assert!(to_predicate(&col("price").eq(lit(f64::NAN)), &columns(&schema())).is_none());
    assert!(to_predicate(&col("price").eq(lit(1.5f64)), &columns(&schema())).is_some());
}

fn columns(schema: &Schema) -> Columns<'_> {
    Columns::new(schema, [])
}

#[test]
fn promoted_columns_take_only_null_checks() {
    let current = schema();
    // Schema 2 had `id` as int and `price` as float; `name` kept its type.
    let old = Schema::builder()
        .with_schema_id(2)
        .with_fields(vec![
            Arc::new(NestedField::required(
                1,
                "id",
                Type::Primitive(PrimitiveType::Int),
            )),
            Arc::new(NestedField::optional(
                2,
                "name",
                Type::Primitive(PrimitiveType::String),
            )),
            Arc::new(NestedField::optional(
                3,
                "price",
                Type::Primitive(PrimitiveType::Float),
            )),
        ])
        .build()
        .expect("valid schema");
    let columns = Columns::new(&current, [&old, current.as_ref()]);
    assert!(to_predicate(&col("id").lt(lit(5i64)), &columns).is_none());
    assert!(to_predicate(&col("id").eq(lit(5i64)), &columns).is_none());
    assert!(to_predicate(&col("id").in_list(vec![lit(5i64)], false), &columns).is_none());
    assert!(to_predicate(&col("price").eq(lit(1.5f64)), &columns).is_none());
    assert!(to_predicate(&col("id").is_null(), &columns).is_some());
    assert!(to_predicate(&col("name").eq(lit("x")), &columns).is_some());
}

#[test]
fn excluded_columns_are_never_referenced() {
    let current = schema();
    let columns = Columns::new(&current, []).excluding([2]);
    assert!(to_predicate(&col("name").eq(lit("x")), &columns).is_none());
    assert!(to_predicate(&col("name").is_not_null(), &columns).is_none());
    let both = col("id").gt(lit(5i64)).or(col("name").is_null());
    assert!(to_predicate(&both, &columns).is_none());
    let p = filters_to_predicate(&[col("id").gt(lit(5i64)), col("name").is_null()], &columns);
    assert_eq!(p.expect("some").to_string(), "id > 5");
}

#[test]
fn decimals_compared_with_literals_of_their_scale_prune_but_never_reach_the_reader() {
    let schema = Schema::builder()
        .with_fields(vec![Arc::new(NestedField::optional(
            1,
            "p",
            Type::decimal(12, 2).expect("valid type"),
        ))])
        .build()
        .expect("valid schema");
    let decimal =
        |v: i128, precision: u8, scale: i8| lit(ScalarValue::Decimal128(Some(v), precision, scale));
    let planning = Columns::new(&schema, []);
    let p = to_predicate(&col("p").lt_eq(decimal(-150, 12, 2)), &planning).expect("translated");
    assert_eq!(p.to_string(), "p <= -1.50");
    // A literal of another precision takes the column's where its value fits.
    let p = to_predicate(&col("p").eq(decimal(100, 3, 2)), &planning).expect("translated");
    assert_eq!(p.to_string(), "p = 1.00");
    let max = 10i128.pow(38) - 1;
    assert!(to_predicate(&col("p").eq(decimal(max, 38, 2)), &planning).is_none());
    assert!(to_predicate(&col("p").eq(decimal(150, 12, 3)), &planning).is_none());
    let reader = Columns::new(&schema, []).without_decimal_comparisons();
    assert!(to_predicate(&col("p").lt_eq(decimal(150, 12, 2)), &reader).is_none());
    assert!(to_predicate(&col("p").is_null(), &reader).is_some());
    let truncated = Columns::new(&schema, []).not_comparing([1]);
    assert!(to_predicate(&col("p").eq(decimal(150, 12, 2)), &truncated).is_none());
}

#[test]
fn long_in_lists_reach_the_reader_as_their_range() {
    use floe::table::row_filter::{MAX_READER_IN_VALUES, for_reader};
    let values = |n: i64| (0..n).map(|v| lit(100 - 7 * v)).collect::<Vec<_>>();
    let short = col("id").in_list(values(MAX_READER_IN_VALUES as i64), false);
    assert_eq!(for_reader(&short), Some(short.clone()));
    let mut long = values(20);
    long.push(lit(datafusion::common::ScalarValue::Int64(None)));
    let range = for_reader(&col("id").in_list(long.clone(), false)).expect("a range");
    assert_eq!(
        range,
        col("id")
            .gt_eq(lit(-33i64))
            .and(col("id").lt_eq(lit(100i64)))
    );
    // NOT IN a long list is left to DataFusion; so is a list of expressions.
    assert_eq!(for_reader(&col("id").in_list(long, true)), None);
    let mut computed = values(20);
    computed.push(col("id") + lit(1i64));
    assert_eq!(for_reader(&col("id").in_list(computed, false)), None);
    let other = col("id").gt(lit(5i64));
    assert_eq!(for_reader(&other), Some(other.clone()));
}
