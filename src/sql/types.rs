//! SQL types in statements mean what they mean in Iceberg: a `TIMESTAMP` without a
//! precision is microseconds, like Iceberg's `timestamp` and the table columns it is
//! compared with. (DataFusion's default is nanoseconds, which cannot hold years
//! before 1677 or after 2262.)

use std::ops::ControlFlow;

use datafusion::sql::parser::Statement;

use super::parse::sql_statement_mut;
use datafusion::sql::sqlparser::ast::{DataType, Expr, visit_expressions_mut};

/// Gives every `TIMESTAMP` in a cast or typed literal (`TIMESTAMP '…'`, `CAST(… AS
/// TIMESTAMP)`, `…::TIMESTAMP`) without a precision the precision 6.
pub fn microsecond_timestamps(statement: &mut Statement) {
    let Some(statement) = sql_statement_mut(statement) else {
        return;
    };
    let _ = visit_expressions_mut(statement, |expr| {
        if let Some(DataType::Timestamp(precision @ None, _)) = target_type(expr) {
            *precision = Some(6);
        }
        ControlFlow::<()>::Continue(())
    });
}

fn target_type(expr: &mut Expr) -> Option<&mut DataType> {
    match expr {
        Expr::Cast { data_type, .. } => Some(data_type),
        Expr::TypedString(typed) => Some(&mut typed.data_type),
        _ => None,
    }
}
