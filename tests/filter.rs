//! Filter pushdown is sound: a translated predicate is never stronger than the filter.

use datafusion::arrow::datatypes::DataType;
use datafusion::logical_expr::{cast, col, lit, not};
use floe::table::filter::{filters_to_predicate, to_predicate};

use crate::support::schema;

#[test]
fn exact_comparisons_are_translated() {
    let p = to_predicate(&col("id").gt(lit(5i64)), &schema()).expect("translated");
    assert_eq!(p.to_string(), "id > 5");
    let p = to_predicate(&lit(5i64).lt(col("id")), &schema()).expect("translated");
    assert_eq!(p.to_string(), "id > 5");
    let p = to_predicate(
        &col("name").is_null().or(col("name").eq(lit("x"))),
        &schema(),
    );
    assert!(p.is_some());
}

#[test]
fn partial_translations_are_never_negated_or_strengthened() {
    let like = col("name").like(lit("%x%"));
    // NOT (id > 5 AND name LIKE ..) must not become NOT (id > 5).
    assert!(to_predicate(&not(col("id").gt(lit(5i64)).and(like.clone())), &schema()).is_none());
    // An OR with an untranslatable side says nothing.
    assert!(to_predicate(&col("id").gt(lit(5i64)).or(like.clone()), &schema()).is_none());
    // Top-level conjuncts may be dropped (the rest is weaker than the filter).
    let p = filters_to_predicate(&[col("id").gt(lit(5i64)), like], &schema()).expect("some");
    assert_eq!(p.to_string(), "id > 5");
}

#[test]
fn casts_literal_type_mismatches_and_float_ranges_are_left_to_datafusion() {
    assert!(
        to_predicate(
            &cast(col("price"), DataType::Int32).eq(lit(1i32)),
            &schema()
        )
        .is_none()
    );
    assert!(to_predicate(&col("id").eq(lit(5i32)), &schema()).is_none());
    assert!(to_predicate(&col("price").gt(lit(1.5f64)), &schema()).is_none());
    assert!(to_predicate(&col("price").eq(lit(f64::NAN)), &schema()).is_none());
    assert!(to_predicate(&col("price").eq(lit(1.5f64)), &schema()).is_some());
}
