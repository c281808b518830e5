//! `extract(isodow FROM d)` numbers the days Monday 1 to Sunday 7, as ISO 8601,
//! PostgreSQL, DuckDB and Spark (`DAYOFWEEK_ISO`) do; DataFusion 53 numbers them Monday 0
//! to Sunday 6. Its `date_part('isodow', …)` is taken one higher here; names stay.

use datafusion::common::ScalarValue;
use datafusion::common::tree_node::Transformed;
use datafusion::logical_expr::{Expr, LogicalPlan, lit};

use super::expr_rewrite::rewrite_keeping_names;
use crate::error::Result;

/// `plan` with every ISO day of the week numbered from 1.
pub(super) fn iso_weekdays_from_one(plan: LogicalPlan) -> Result<LogicalPlan> {
    rewrite_keeping_names(plan, |e| {
        Ok(if is_iso_weekday(&e) {
            Transformed::yes(e + lit(ScalarValue::Int32(Some(1))))
        } else {
            Transformed::no(e)
        })
    })
}

fn is_iso_weekday(expr: &Expr) -> bool {
    let Expr::ScalarFunction(call) = expr else {
        return false;
    };
    call.func.name() == "date_part"
        && matches!(
            call.args.first(),
            Some(Expr::Literal(ScalarValue::Utf8(Some(part)) | ScalarValue::Utf8View(Some(part)), _))
                if part.eq_ignore_ascii_case("isodow")
        )
}
