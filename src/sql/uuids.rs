//! UUIDs written as strings. Iceberg's `uuid` is 16 bytes (Arrow `FixedSizeBinary(16)`),
//! and DataFusion neither casts strings to it nor compares them with it; Floe turns a
//! string literal into the UUID's bytes where it meets a UUID:
//!
//! - `CAST('…' AS UUID)`, `'…'::UUID` and `UUID '…'`, anywhere;
//! - a string in `INSERT … VALUES` for a UUID column;
//! - a string compared with (`=`, `<>`, `<`, …, `IN`) a 16-byte value.

use std::ops::ControlFlow;

use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::common::{DFSchema, ScalarValue};
use datafusion::logical_expr::expr::InList;
use datafusion::logical_expr::utils::merge_schema;
use datafusion::logical_expr::{BinaryExpr, Expr, ExprSchemable, LogicalPlan, Operator};
use datafusion::sql::parser::Statement;
use datafusion::sql::planner::object_name_to_table_reference;
use datafusion::sql::sqlparser::ast::{
    self as sql, DataType, SetExpr, TableObject, Value, visit_expressions_mut,
};
use datafusion::sql::sqlparser::dialect::GenericDialect;
use datafusion::sql::sqlparser::parser::Parser;
use iceberg::spec::{PrimitiveType, Type};

use super::parse::sql_statement_mut;
use super::resolve::StatementCatalog;
use crate::error::{FloeError, Result};

const UUID_TYPE: datafusion::arrow::datatypes::DataType =
    datafusion::arrow::datatypes::DataType::FixedSizeBinary(16);

/// Rewrites UUID casts of string literals, and strings inserted into UUID columns.
pub fn rewrite_statement(
    statement: &mut Statement,
    catalog: &StatementCatalog,
    default_namespace: &str,
) -> Result<()> {
    let Some(statement) = sql_statement_mut(statement) else {
        return Ok(());
    };
    if let sql::Statement::Insert(insert) = statement {
        rewrite_inserted_values(insert, catalog, default_namespace)?;
    }
    let flow = visit_expressions_mut(statement, |expr| {
        let text = match expr {
            sql::Expr::Cast {
                expr: inner,
                data_type: DataType::Uuid,
                ..
            } => string_literal(inner),
            sql::Expr::TypedString(typed) if typed.data_type == DataType::Uuid => {
                match &typed.value.value {
                    Value::SingleQuotedString(s) => Some(s.clone()),
                    _ => None,
                }
            }
            _ => None,
        };
        match text.map(|text| uuid_expr(&text)) {
            Some(Ok(bytes)) => *expr = bytes,
            Some(Err(e)) => return ControlFlow::Break(e),
            None => {}
        }
        ControlFlow::Continue(())
    });
    match flow {
        ControlFlow::Break(e) => Err(e),
        ControlFlow::Continue(()) => Ok(()),
    }
}

fn rewrite_inserted_values(
    insert: &mut sql::Insert,
    catalog: &StatementCatalog,
    default_namespace: &str,
) -> Result<()> {
    let TableObject::TableName(name) = &insert.table else {
        return Ok(());
    };
    let Some(provider) = object_name_to_table_reference(name.clone(), true)
        .ok()
        .and_then(|reference| catalog.provider(&reference, default_namespace))
    else {
        return Ok(());
    };
    let schema = provider.table().metadata().current_schema().clone();
    let columns: Vec<String> = if insert.columns.is_empty() {
        schema
            .as_struct()
            .fields()
            .iter()
            .map(|f| f.name.clone())
            .collect()
    } else {
        insert.columns.iter().map(super::ddl::normalize).collect()
    };
    let is_uuid: Vec<bool> = columns
        .iter()
        .map(|c| {
            schema
                .field_by_name(c)
                .is_some_and(|f| *f.field_type == Type::Primitive(PrimitiveType::Uuid))
        })
        .collect();
    let Some(SetExpr::Values(values)) = insert.source.as_mut().map(|q| q.body.as_mut()) else {
        return Ok(());
    };
    for row in &mut values.rows {
        for (value, _) in row.iter_mut().zip(&is_uuid).filter(|(_, uuid)| **uuid) {
            if let Some(text) = string_literal(value) {
                *value = uuid_expr(&text)?;
            }
        }
    }
    Ok(())
}

fn string_literal(expr: &sql::Expr) -> Option<String> {
    match expr {
        sql::Expr::Value(v) => match &v.value {
            Value::SingleQuotedString(s) => Some(s.clone()),
            _ => None,
        },
        _ => None,
    }
}

/// `arrow_cast(X'<16 bytes>', 'FixedSizeBinary(16)')`: DataFusion's SQL has no
/// syntax for a fixed-size binary value.
fn uuid_expr(text: &str) -> Result<sql::Expr> {
    let hex: String = parse_uuid(text)?
        .as_bytes()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    Parser::new(&GenericDialect {})
        .try_with_sql(&format!("arrow_cast(X'{hex}', 'FixedSizeBinary(16)')"))
        .and_then(|mut parser| parser.parse_expr())
        .map_err(|e| FloeError::internal(format!("building a UUID literal: {e}")))
}

fn parse_uuid(text: &str) -> Result<uuid::Uuid> {
    uuid::Uuid::parse_str(text)
        .map_err(|e| FloeError::invalid(format!("'{text}' is not a UUID: {e}")))
}

/// Turns string literals compared with 16-byte values into 16-byte literals.
pub fn rewrite_comparisons(plan: LogicalPlan) -> Result<LogicalPlan> {
    let plan = plan.transform_up_with_subqueries(|node| {
        let schema = merge_schema(&node.inputs());
        node.map_expressions(|expr| {
            expr.transform_up(|e| compared_uuid(e, &schema).map_err(Into::into))
        })
    })?;
    Ok(plan.data)
}

fn compared_uuid(expr: Expr, schema: &DFSchema) -> Result<Transformed<Expr>> {
    let is_uuid = |e: &Expr| e.get_type(schema).is_ok_and(|t| t == UUID_TYPE);
    match expr {
        Expr::BinaryExpr(BinaryExpr { left, op, right }) if is_comparison(op) => {
            let (left, right) = match (is_uuid(&left), is_uuid(&right)) {
                (true, false) => (left, as_uuid_literal(*right)?),
                (false, true) => (as_uuid_literal(*left)?, right),
                _ => {
                    return Ok(Transformed::no(Expr::BinaryExpr(BinaryExpr {
                        left,
                        op,
                        right,
                    })));
                }
            };
            Ok(Transformed::yes(Expr::BinaryExpr(BinaryExpr {
                left,
                op,
                right,
            })))
        }
        Expr::InList(InList {
            expr,
            list,
            negated,
        }) if is_uuid(&expr) => {
            let list = list
                .into_iter()
                .map(|e| as_uuid_literal(e).map(|e| *e))
                .collect::<Result<_>>()?;
            Ok(Transformed::yes(Expr::InList(InList {
                expr,
                list,
                negated,
            })))
        }
        other => Ok(Transformed::no(other)),
    }
}

fn is_comparison(op: Operator) -> bool {
    use Operator::*;
    matches!(
        op,
        Eq | NotEq | Lt | LtEq | Gt | GtEq | IsDistinctFrom | IsNotDistinctFrom
    )
}

/// A string literal as a 16-byte literal; anything else as it is.
fn as_uuid_literal(expr: Expr) -> Result<Box<Expr>> {
    match expr {
        Expr::Literal(
            ScalarValue::Utf8(Some(s))
            | ScalarValue::LargeUtf8(Some(s))
            | ScalarValue::Utf8View(Some(s)),
            _,
        ) => {
            let bytes = parse_uuid(&s)?.as_bytes().to_vec();
            Ok(Box::new(Expr::Literal(
                ScalarValue::FixedSizeBinary(16, Some(bytes)),
                None,
            )))
        }
        other => Ok(Box::new(other)),
    }
}
