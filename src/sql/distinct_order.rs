//! `SELECT DISTINCT k * 2 FROM t ORDER BY k * 2`: DataFusion 53 refuses an ORDER BY
//! expression under `DISTINCT` unless it is a column or names a select item ("For SELECT
//! DISTINCT, ORDER BY expressions t.k must appear in select list"), where PostgreSQL and
//! DuckDB order by the select item the expression repeats. Such an expression is written
//! as that item's position first.

use std::ops::ControlFlow;

use datafusion::sql::parser::Statement;
use datafusion::sql::sqlparser::ast::{
    Distinct, Expr, Ident, OrderBy, OrderByKind, Query, SelectItem, SetExpr, Value, VisitMut,
    VisitorMut, visit_expressions_mut,
};

use super::ddl::normalize;
use super::parse::sql_statement_mut;

/// `statement` with each ORDER BY expression of a `SELECT DISTINCT` that repeats one of
/// its select items as that item's position.
pub(super) fn orders_by_select_items(statement: &mut Statement) {
    if let Some(statement) = sql_statement_mut(statement) {
        let _ = statement.visit(&mut DistinctOrders);
    }
}

struct DistinctOrders;

impl VisitorMut for DistinctOrders {
    type Break = ();

    fn pre_visit_query(&mut self, query: &mut Query) -> ControlFlow<()> {
        let Query { body, order_by, .. } = query;
        let (SetExpr::Select(select), Some(order_by)) = (body.as_ref(), order_by) else {
            return ControlFlow::Continue(());
        };
        let OrderBy {
            kind: OrderByKind::Expressions(orders),
            ..
        } = order_by
        else {
            return ControlFlow::Continue(());
        };
        if !matches!(select.distinct, Some(Distinct::Distinct)) {
            return ControlFlow::Continue(());
        }
        for order in orders {
            if matches!(
                order.expr,
                Expr::Identifier(_) | Expr::CompoundIdentifier(_) | Expr::Value(_)
            ) {
                continue;
            }
            let order_expr = with_names_normalized(&order.expr);
            let repeated = select.projection.iter().position(|item| match item {
                SelectItem::UnnamedExpr(expr) | SelectItem::ExprWithAlias { expr, .. } => {
                    with_names_normalized(expr) == order_expr
                }
                _ => false,
            });
            if let Some(index) = repeated {
                order.expr = Expr::value(Value::Number((index + 1).to_string(), false));
            }
        }
        ControlFlow::Continue(())
    }
}

/// `expr` with each column name as SQL resolves it (`"k"` and `K` are `k`), so that two
/// spellings of one expression compare equal.
fn with_names_normalized(expr: &Expr) -> Expr {
    let mut expr = expr.clone();
    let _ = visit_expressions_mut(&mut expr, |e| {
        let names = match e {
            Expr::Identifier(name) => std::slice::from_mut(name),
            Expr::CompoundIdentifier(names) => names.as_mut_slice(),
            _ => &mut [],
        };
        for name in names {
            *name = Ident::new(normalize(name));
        }
        ControlFlow::<()>::Continue(())
    });
    expr
}
