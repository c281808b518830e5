//! Statements whose select lists repeat a name, which DataFusion refuses ("Projections
//! require unique expression names"): `SELECT k, k`, `SELECT k, CAST(k AS SMALLINT)`
//! (DataFusion names the cast `k`), `SELECT 2 + 3 * 4, (2 + 3) * 4`. PostgreSQL answers
//! them, with repeated column names. Such a statement is planned again with its select
//! lists named: an expression without a name is named as written, and a name already
//! taken in its list gets `_1`, `_2`, … (the first keeps it). Statements DataFusion
//! plans as they are keep its names.

use std::collections::HashSet;
use std::ops::ControlFlow;

use datafusion::sql::parser::Statement as DfStatement;
use datafusion::sql::sqlparser::ast::{
    Expr, Ident, Query, SelectItem, SetExpr, VisitMut, VisitorMut,
};

use super::parse::sql_statement_mut;

/// Whether DataFusion refused a statement for a repeated name in a select list.
pub(super) fn repeats_a_name(error: &datafusion::error::DataFusionError) -> bool {
    error
        .to_string()
        .contains("Projections require unique expression names")
}

/// Names the select lists of `statement` (see the module documentation).
pub(super) fn name_select_lists(statement: &mut DfStatement) {
    if let Some(statement) = sql_statement_mut(statement) {
        let _ = statement.visit(&mut SelectLists);
    }
}

struct SelectLists;

impl VisitorMut for SelectLists {
    type Break = ();

    fn pre_visit_query(&mut self, query: &mut Query) -> ControlFlow<()> {
        name_selects(&mut query.body);
        ControlFlow::Continue(())
    }
}

fn name_selects(body: &mut SetExpr) {
    match body {
        SetExpr::Select(select) => name_items(&mut select.projection),
        SetExpr::SetOperation { left, right, .. } => {
            name_selects(left);
            name_selects(right);
        }
        _ => {}
    }
}

fn name_items(items: &mut [SelectItem]) {
    let mut taken = HashSet::new();
    for item in items {
        let (expr, name) = match item {
            SelectItem::UnnamedExpr(expr) => {
                let name = match &*expr {
                    Expr::Identifier(ident) => ident.value.clone(),
                    Expr::CompoundIdentifier(parts) => match parts.last() {
                        Some(last) => last.value.clone(),
                        None => continue,
                    },
                    other => other.to_string(),
                };
                (expr.clone(), name)
            }
            SelectItem::ExprWithAlias { expr, alias } => (expr.clone(), alias.value.clone()),
            _ => continue,
        };
        let unique = unique_name(&name, &taken);
        taken.insert(unique.clone());
        if matches!(item, SelectItem::UnnamedExpr(_)) || unique != name {
            *item = SelectItem::ExprWithAlias {
                expr,
                alias: Ident::with_quote('"', unique),
            };
        }
    }
}

/// `name`, or with the first suffix `_1`, `_2`, … that `taken` lacks.
fn unique_name(name: &str, taken: &HashSet<String>) -> String {
    if !taken.contains(name) {
        return name.to_string();
    }
    (1..)
        .map(|n| format!("{name}_{n}"))
        .find(|candidate| !taken.contains(candidate))
        .unwrap_or_else(|| name.to_string())
}
