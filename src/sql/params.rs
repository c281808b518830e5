//! Statement parameters: JDBC/ODBC-style `?` numbered as DataFusion's `$1`, `$2`, …,
//! the parameter types a client is told at prepare, NULLs bound where a value is
//! needed, and `executemany` of an INSERT folded into one statement.

use std::ops::ControlFlow;
use std::sync::Arc;

use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::common::ScalarValue;
use datafusion::logical_expr::LogicalPlan;
use datafusion::sql::parser::Statement;
use datafusion::sql::sqlparser::ast::{self as sql, Expr, SetExpr, Value, visit_expressions_mut};

use super::parse::sql_statement_mut;
use crate::error::{FloeError, Result};

/// Numbers `?` parameters in the order they appear: `?` … `?` → `$1` … `$2`.
pub fn number_placeholders(statement: &mut Statement) {
    let Some(statement) = sql_statement_mut(statement) else {
        return;
    };
    let mut next = 0;
    let _ = visit_expressions_mut(statement, |expr| {
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

/// The statement's parameters in order (`$1`, `$2`, …), typed where DataFusion could
/// infer the type from where the parameter is used.
pub fn parameter_schema(plan: &LogicalPlan) -> Result<SchemaRef> {
    let mut parameters: Vec<(usize, String, DataType)> = plan
        .get_parameter_types()?
        .into_iter()
        .map(|(id, data_type)| {
            let position = id.trim_start_matches('$').parse().unwrap_or(usize::MAX);
            (position, id, data_type.unwrap_or(DataType::Null))
        })
        .collect();
    parameters.sort();
    let fields: Vec<Field> = parameters
        .into_iter()
        .map(|(_, id, data_type)| Field::new(id, data_type, true))
        .collect();
    Ok(Arc::new(Schema::new(fields)))
}

/// A NULL bound where the statement needs a value (an INSERT's NOT NULL column).
pub fn check_not_null(plan: &LogicalPlan, params: &[ScalarValue]) -> Result<()> {
    for (id, field) in plan.get_parameter_fields()? {
        let Some(field) = field.filter(|f| !f.is_nullable()) else {
            continue;
        };
        let position: usize = id.trim_start_matches('$').parse().unwrap_or(0);
        if position > 0 && params.get(position - 1).is_some_and(ScalarValue::is_null) {
            return Err(FloeError::invalid(format!(
                "NULL value in NOT NULL column '{}' (parameter {id})",
                field.name()
            )));
        }
    }
    Ok(())
}
