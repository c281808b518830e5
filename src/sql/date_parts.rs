//! `extract`/`date_part` where DataFusion 53 answers other than SQL does:
//! - `isodow` numbers the days Monday 1 to Sunday 7, as ISO 8601, PostgreSQL, DuckDB and
//!   Spark (`DAYOFWEEK_ISO`) do; DataFusion numbers them Monday 0 to Sunday 6, so its
//!   answer is taken one higher.
//! - `epoch` of a duration (`t2 - t1`) is its exact number of seconds; DataFusion counts
//!   whole seconds in 32 bits plus a fraction that wraps (so `epoch` of 23:59:59.5 was
//!   82,799) and fails past 68 years. It is computed here from the duration's count.
//! - `decade`, `century` and `millennium`, which DataFusion does not know ("Date part
//!   'CENTURY' not supported"), are computed from the year as PostgreSQL and DuckDB
//!   count them: the decade is the year divided by 10; the 21st century and the 3rd
//!   millennium begin in 2001, and the years before 1 AD count back from -1.
//!
//! Names stay as written.

use datafusion::arrow::datatypes::{DataType, TimeUnit};
use datafusion::common::tree_node::Transformed;
use datafusion::common::{DFSchema, ScalarValue};
use datafusion::logical_expr::expr::Case;
use datafusion::logical_expr::{Expr, ExprSchemable, LogicalPlan, cast, lit};

use super::expr_rewrite::rewrite_typed_keeping_names;
use crate::error::Result;

/// `plan` with ISO days of the week numbered from 1 and epochs of durations exact.
pub(super) fn with_sql_date_parts(plan: LogicalPlan) -> Result<LogicalPlan> {
    rewrite_typed_keeping_names(plan, |e, schema| {
        Ok(match part_of(&e) {
            Some(part) if part.eq_ignore_ascii_case("isodow") => {
                Transformed::yes(e + lit(ScalarValue::Int32(Some(1))))
            }
            Some(part) if part.eq_ignore_ascii_case("epoch") => match duration_unit(&e, schema) {
                Some(unit) => Transformed::yes(epoch_of_duration(e, unit)),
                None => Transformed::no(e),
            },
            Some(part) => match years_per(part) {
                Some(years) => Transformed::yes(counted_in_years(e, years)),
                None => Transformed::no(e),
            },
            _ => Transformed::no(e),
        })
    })
}

/// The part a `date_part` call extracts.
fn part_of(expr: &Expr) -> Option<&str> {
    let Expr::ScalarFunction(call) = expr else {
        return None;
    };
    if call.func.name() != "date_part" {
        return None;
    }
    match call.args.first() {
        Some(Expr::Literal(
            ScalarValue::Utf8(Some(part)) | ScalarValue::Utf8View(Some(part)),
            _,
        )) => Some(part),
        _ => None,
    }
}

/// The unit of a `date_part` call's source, where that is a duration.
fn duration_unit(call: &Expr, schema: &DFSchema) -> Option<TimeUnit> {
    let Expr::ScalarFunction(call) = call else {
        return None;
    };
    match call.args.get(1)?.get_type(schema).ok()? {
        DataType::Duration(unit) => Some(unit),
        _ => None,
    }
}

/// The seconds of the duration a `date_part('epoch', …)` call extracts from.
fn epoch_of_duration(call: Expr, unit: TimeUnit) -> Expr {
    let Expr::ScalarFunction(mut call) = call else {
        return call;
    };
    let duration = call.args.swap_remove(1);
    let per_second = match unit {
        TimeUnit::Second => 1.0,
        TimeUnit::Millisecond => 1e3,
        TimeUnit::Microsecond => 1e6,
        TimeUnit::Nanosecond => 1e9,
    };
    cast(cast(duration, DataType::Int64), DataType::Float64) / lit(per_second)
}

/// The years a decade, a century or a millennium holds.
fn years_per(part: &str) -> Option<i32> {
    [("decade", 10), ("century", 100), ("millennium", 1000)]
        .into_iter()
        .find(|(name, _)| part.eq_ignore_ascii_case(name))
        .map(|(_, years)| years)
}

/// A `date_part` call of a decade, a century or a millennium, from its year.
fn counted_in_years(call: Expr, years: i32) -> Expr {
    let Expr::ScalarFunction(mut call) = call else {
        return call;
    };
    call.args[0] = lit("year");
    let year = Expr::ScalarFunction(call);
    let n = |v: i32| lit(ScalarValue::Int32(Some(v)));
    if years == 10 {
        return year / n(10);
    }
    let after_christ = (year.clone() - n(1)) / n(years) + n(1);
    Expr::Case(Case::new(
        None,
        vec![(Box::new(year.clone().gt(n(0))), Box::new(after_christ))],
        Some(Box::new(year / n(years) - n(1))),
    ))
}
