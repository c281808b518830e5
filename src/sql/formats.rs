//! `to_char(value, format)` (also `date_format`) takes DataFusion's format: chrono's
//! strftime fields, `'%Y-%m-%d'`. A format in PostgreSQL's or Spark's style
//! (`'YYYY-MM-DD'`, `'yyyy-MM-dd'`) has no `%` field, and DataFusion 53 answered the
//! format itself for every row. Such a literal format is refused, naming the form that
//! works, instead of answering rows that look like data.

use datafusion::common::ScalarValue;
use datafusion::common::tree_node::{TreeNode, TreeNodeRecursion};
use datafusion::logical_expr::{Expr, LogicalPlan};

use crate::error::{FloeError, Result};

/// Refuses `plan` if it formats with a literal format that has no `%` field.
pub(super) fn check_formats(plan: &LogicalPlan) -> Result<()> {
    let mut refused = None;
    plan.apply_with_subqueries(|node| {
        node.apply_expressions(|expr| {
            expr.apply(|e| {
                refused = refused.take().or_else(|| fieldless_format(e));
                Ok(match refused {
                    Some(_) => TreeNodeRecursion::Stop,
                    None => TreeNodeRecursion::Continue,
                })
            })
        })
    })?;
    match refused {
        Some(format) => Err(FloeError::invalid(format!(
            "to_char: the format '{format}' has no field; it takes strftime fields, as \
             '%Y-%m-%d %H:%M:%S' (for PostgreSQL's 'YYYY-MM-DD HH24:MI:SS')"
        ))),
        None => Ok(()),
    }
}

/// The literal format of a `to_char` call, if it has no `%` field.
fn fieldless_format(expr: &Expr) -> Option<String> {
    let Expr::ScalarFunction(call) = expr else {
        return None;
    };
    if call.func.name() != "to_char" {
        return None;
    }
    match call.args.get(1)? {
        Expr::Literal(ScalarValue::Utf8(Some(format)) | ScalarValue::Utf8View(Some(format)), _)
            if !format.is_empty() && !format.contains('%') =>
        {
            Some(format.clone())
        }
        _ => None,
    }
}
