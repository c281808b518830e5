//! Statement text as clients write it, made DataFusion's: a `TIMESTAMP` without a
//! precision is microseconds, like Iceberg's `timestamp` and the table columns it is
//! compared with (DataFusion's default is nanoseconds, which cannot hold years before
//! 1677 or after 2262); JDBC/ODBC-style `?` parameters become `$1`, `$2`, ….

use std::ops::ControlFlow;

use datafusion::common::ScalarValue;
use datafusion::sql::parser::Statement;
use datafusion::sql::sqlparser::ast::{
    self as sql, DataType, Expr, SetExpr, Value, visit_expressions_mut,
};

/// Gives every `TIMESTAMP` in a cast or typed literal (`TIMESTAMP '…'`, `CAST(… AS
/// TIMESTAMP)`, `…::TIMESTAMP`) without a precision the precision 6.
pub fn microsecond_timestamps(statement: &mut Statement) {
    match statement {
        Statement::Statement(statement) => {
            let _ = visit_expressions_mut(statement.as_mut(), |expr| {
                if let Some(DataType::Timestamp(precision @ None, _)) = target_type(expr) {
                    *precision = Some(6);
                }
                ControlFlow::<()>::Continue(())
            });
        }
        Statement::Explain(explain) => microsecond_timestamps(&mut explain.statement),
        _ => {}
    }
}

/// Numbers `?` parameters in the order they appear: `?` … `?` → `$1` … `$2`.
pub fn number_placeholders(statement: &mut Statement) {
    match statement {
        Statement::Statement(statement) => {
            let mut next = 0;
            let _ = visit_expressions_mut(statement.as_mut(), |expr| {
                if let Expr::Value(value) = expr
                    && let Value::Placeholder(name) = &mut value.value
                    && name == "?"
                {
                    next += 1;
                    *name = format!("${next}");
                }
                ControlFlow::<()>::Continue(())
            });
        }
        Statement::Explain(explain) => number_placeholders(&mut explain.statement),
        _ => {}
    }
}

/// `INSERT … VALUES (one row of expressions)` run for many parameter rows becomes one
/// statement with a VALUES row per parameter row, its parameters renumbered (row `r`
/// of `n` parameters uses `$(r·n+1)` … `$(r·n+n)`); returns the parameters flattened
/// to match. `None` if the statement is not such an INSERT.
pub fn expand_insert_values(
    statement: &mut Statement,
    rows: &[Vec<ScalarValue>],
) -> Option<Vec<ScalarValue>> {
    let Statement::Statement(statement) = statement else {
        return None;
    };
    let sql::Statement::Insert(insert) = statement.as_mut() else {
        return None;
    };
    let SetExpr::Values(values) = insert.source.as_mut()?.body.as_mut() else {
        return None;
    };
    let [template] = values.rows.as_slice() else {
        return None;
    };
    let width = rows.first()?.len();
    if rows.iter().any(|row| row.len() != width) {
        return None;
    }
    let template = template.clone();
    values.rows = (0..rows.len())
        .map(|r| {
            let mut row = template.clone();
            for expr in &mut row {
                let _ = visit_expressions_mut(expr, |e| {
                    if let Expr::Value(value) = e
                        && let Value::Placeholder(name) = &mut value.value
                        && let Ok(k) = name.trim_start_matches('$').parse::<usize>()
                    {
                        *name = format!("${}", r * width + k);
                    }
                    ControlFlow::<()>::Continue(())
                });
            }
            row
        })
        .collect();
    Some(rows.concat())
}

fn target_type(expr: &mut Expr) -> Option<&mut DataType> {
    match expr {
        Expr::Cast { data_type, .. } => Some(data_type),
        Expr::TypedString(typed) => Some(&mut typed.data_type),
        _ => None,
    }
}
