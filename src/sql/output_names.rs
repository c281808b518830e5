//! Statements whose select lists repeat a name, which DataFusion refuses ("Projections
//! require unique expression names"): `SELECT k, k`, `SELECT k, CAST(k AS SMALLINT)`
//! (DataFusion names the cast `k`), `SELECT 2 + 3 * 4, (2 + 3) * 4`. PostgreSQL answers
//! them, with repeated column names. Such a statement is planned again with its select
//! lists named: an expression without a name is named as written, and a name already
//! taken in its list gets `_1`, `_2`, … (the first keeps it). Statements DataFusion
//! plans as they are keep its names.
//!
//! DataFusion also names a cast by what it casts, so `sum(k), sum(CAST(k AS DOUBLE))`
//! gives two aggregates of one name ("duplicate unqualified field name"; windows alike).
//! On the same retry, each cast that is an argument of a call is labelled with its type
//! (`floe_cast_label(CAST(k AS DOUBLE), 'DOUBLE')`, the value itself).

use std::collections::HashSet;
use std::ops::ControlFlow;

use datafusion::sql::parser::Statement as DfStatement;
use datafusion::sql::sqlparser::ast::{
    Expr, Function, FunctionArg, FunctionArgExpr, FunctionArguments, Ident, Query, SelectItem,
    Value, VisitMut, VisitorMut, visit_expressions_mut,
};

use super::parse::{function_call, selects_mut, sql_statement_mut};
use crate::cluster::cast_label;

/// Whether DataFusion refused a statement for a repeated name in a select list or
/// among its aggregates.
pub(super) fn repeats_a_name(error: &datafusion::error::DataFusionError) -> bool {
    let message = error.to_string();
    message.contains("require unique expression names") // projections, windows
        || message.contains("duplicate unqualified field name") // aggregates
}

/// Names the select lists of `statement` and labels the casts in its calls (see the
/// module documentation).
pub(super) fn name_select_lists(statement: &mut DfStatement) {
    if let Some(statement) = sql_statement_mut(statement) {
        let _ = statement.visit(&mut SelectLists);
        let _ = visit_expressions_mut(statement, |expr| {
            if let Expr::Function(call) = expr {
                label_cast_arguments(call);
            }
            ControlFlow::<()>::Continue(())
        });
    }
}

fn label_cast_arguments(call: &mut Function) {
    let FunctionArguments::List(list) = &mut call.args else {
        return;
    };
    for arg in &mut list.args {
        let FunctionArg::Unnamed(FunctionArgExpr::Expr(arg)) = arg else {
            continue;
        };
        let Expr::Cast { data_type, .. } = &*arg else {
            continue;
        };
        let label = Expr::value(Value::SingleQuotedString(data_type.to_string()));
        let cast = std::mem::replace(arg, Expr::value(Value::Null));
        *arg = function_call(cast_label::NAME, vec![cast, label]);
    }
}

struct SelectLists;

impl VisitorMut for SelectLists {
    type Break = ();

    fn pre_visit_query(&mut self, query: &mut Query) -> ControlFlow<()> {
        for select in selects_mut(&mut query.body) {
            name_items(&mut select.projection);
        }
        ControlFlow::Continue(())
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
