//! An INSERT's query fills the table's columns by position, so the names of its output
//! columns mean nothing. DataFusion still refuses a projection whose names repeat
//! (`INSERT INTO t SELECT 1, 1`, `SELECT v, v FROM …`); Floe gives each repeat an alias
//! of its own before planning. (A plain `SELECT`, whose names reach the client, is
//! named by `output_names` only where DataFusion refuses it.)
//!
//! DataFusion also plans every `VALUES` inside an INSERT's query with the table's types
//! (a hint meant for `INSERT … VALUES` itself), so `INSERT INTO t SELECT v.k FROM
//! (VALUES (7, 'a')) v(k, s)` failed casting `'a'` to `t`'s second column, and `(VALUES
//! (8)) v(k)` with "expected 2" values. Such a `VALUES` is written as `SELECT … AS
//! column1, … UNION ALL SELECT …` first: the same rows, names and common types.

use std::collections::HashSet;
use std::ops::ControlFlow;

use datafusion::sql::parser::Statement;
use datafusion::sql::sqlparser::ast::{
    self, Expr, Ident, Query, SelectItem, SetExpr, Values, VisitMut, VisitorMut,
};

use super::ddl::normalize;
use super::parse::{parse, sql_statement_mut};
use crate::error::{FloeError, Result};

/// `INSERT … VALUES (…, DEFAULT, …)` with each `DEFAULT` as `NULL`: an Iceberg v2 column
/// has no default value but NULL (DataFusion 53 read `DEFAULT` as a column name; a
/// `NOT NULL` column still refuses it).
pub fn defaults_as_nulls(statement: &mut Statement) {
    let Some(ast::Statement::Insert(insert)) = sql_statement_mut(statement) else {
        return;
    };
    let Some(SetExpr::Values(values)) = insert.source.as_deref_mut().map(|q| q.body.as_mut())
    else {
        return;
    };
    for value in values.rows.iter_mut().flatten() {
        if matches!(value, Expr::Identifier(ident) if ident.quote_style.is_none()
            && ident.value.eq_ignore_ascii_case("default"))
        {
            *value = Expr::value(ast::Value::Null);
        }
    }
}

/// A nested `VALUES` of more rows than this is left as it is (a `UNION ALL` of that many
/// selects would cost more to plan than the statement is worth).
const MAX_REWRITTEN_ROWS: usize = 1000;

/// Writes each `VALUES` nested in an INSERT's query as selects (see the module
/// documentation); a query that is itself a `VALUES` stays.
pub fn nested_values_as_selects(statement: &mut Statement) -> Result<()> {
    let Some(ast::Statement::Insert(insert)) = sql_statement_mut(statement) else {
        return Ok(());
    };
    let Some(source) = insert.source.as_mut() else {
        return Ok(());
    };
    if matches!(*source.body, SetExpr::Values(_)) {
        return Ok(());
    }
    match source.visit(&mut NestedValues) {
        ControlFlow::Break(e) => Err(e),
        ControlFlow::Continue(()) => Ok(()),
    }
}

struct NestedValues;

impl VisitorMut for NestedValues {
    type Break = FloeError;

    fn pre_visit_query(&mut self, query: &mut Query) -> ControlFlow<FloeError> {
        if let SetExpr::Values(values) = query.body.as_ref()
            && values.rows.len() <= MAX_REWRITTEN_ROWS
        {
            match as_selects(values) {
                Ok(body) => *query.body = body,
                Err(e) => return ControlFlow::Break(e),
            }
        }
        ControlFlow::Continue(())
    }
}

/// `values` as `SELECT a AS column1, … UNION ALL SELECT …`.
fn as_selects(values: &Values) -> Result<SetExpr> {
    let selects: Vec<String> = values
        .rows
        .iter()
        .enumerate()
        .map(|(r, row)| {
            let items: Vec<String> = row
                .iter()
                .enumerate()
                .map(|(i, value)| match r {
                    0 => format!("{value} AS column{}", i + 1),
                    _ => value.to_string(),
                })
                .collect();
            format!("SELECT {}", items.join(", "))
        })
        .collect();
    let not_a_query =
        || FloeError::internal("VALUES rewritten as selects did not parse as a query");
    let Statement::Statement(statement) = parse(&selects.join(" UNION ALL "))? else {
        return Err(not_a_query());
    };
    match *statement {
        ast::Statement::Query(query) => Ok(*query.body),
        _ => Err(not_a_query()),
    }
}

/// Aliases the repeated output names of an INSERT's query (in each branch of a set
/// operation), leaving the first of each name as it is.
pub fn unique_insert_names(statement: &mut Statement) {
    if let Some(ast::Statement::Insert(insert)) = sql_statement_mut(statement)
        && let Some(source) = insert.source.as_mut()
    {
        unique_query_names(source);
    }
}

fn unique_query_names(query: &mut Query) {
    unique_body_names(&mut query.body);
}

fn unique_body_names(body: &mut SetExpr) {
    match body {
        SetExpr::Select(select) => unique_projection_names(&mut select.projection),
        SetExpr::SetOperation { left, right, .. } => {
            unique_body_names(left);
            unique_body_names(right);
        }
        SetExpr::Query(query) => unique_query_names(query),
        _ => {}
    }
}

fn unique_projection_names(projection: &mut [SelectItem]) {
    let mut seen = HashSet::new();
    for (position, item) in projection.iter_mut().enumerate() {
        let Some(name) = output_name(item) else {
            continue;
        };
        if seen.insert(name) {
            continue;
        }
        if let SelectItem::UnnamedExpr(expr) | SelectItem::ExprWithAlias { expr, .. } = item {
            *item = SelectItem::ExprWithAlias {
                expr: expr.clone(),
                alias: Ident::new(format!("__floe_insert_column_{position}")),
            };
        }
    }
}

/// The name DataFusion gives an item's column, as far as it matters here: a column is
/// known by its last name part (`t.a` and `a` collide), anything else by its text.
/// Wildcards have no single name.
fn output_name(item: &SelectItem) -> Option<String> {
    match item {
        SelectItem::ExprWithAlias { alias, .. } => Some(normalize(alias)),
        SelectItem::UnnamedExpr(Expr::Identifier(ident)) => Some(normalize(ident)),
        SelectItem::UnnamedExpr(Expr::CompoundIdentifier(parts)) => parts.last().map(normalize),
        SelectItem::UnnamedExpr(expr) => Some(expr.to_string()),
        SelectItem::QualifiedWildcard(..) | SelectItem::Wildcard(_) => None,
    }
}
