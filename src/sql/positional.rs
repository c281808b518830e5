//! An INSERT's query fills the table's columns by position, so the names of its output
//! columns mean nothing. DataFusion still refuses a projection whose names repeat
//! (`INSERT INTO t SELECT 1, 1`, `SELECT v, v FROM …`); Floe gives each repeat an alias
//! of its own before planning. A plain `SELECT` keeps DataFusion's error: there the
//! names reach the client.

use std::collections::HashSet;

use datafusion::sql::parser::Statement;
use datafusion::sql::sqlparser::ast::{self, Expr, Ident, Query, SelectItem, SetExpr};

use super::ddl::normalize;
use super::parse::sql_statement_mut;

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
