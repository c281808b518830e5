//! Statement text as clients write it, made DataFusion's: a `TIMESTAMP` without a
//! precision is microseconds, like Iceberg's `timestamp` and the table columns it is
//! compared with (DataFusion's default is nanoseconds, which cannot hold years before
//! 1677 or after 2262); JDBC/ODBC-style `?` parameters become `$1`, `$2`, ….

use std::ops::ControlFlow;

use datafusion::sql::parser::Statement;
use datafusion::sql::sqlparser::ast::{DataType, Expr, Value, visit_expressions_mut};

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

fn target_type(expr: &mut Expr) -> Option<&mut DataType> {
    match expr {
        Expr::Cast { data_type, .. } => Some(data_type),
        Expr::TypedString(typed) => Some(&mut typed.data_type),
        _ => None,
    }
}
