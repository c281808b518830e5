//! Calls other engines take that DataFusion 53 has no function for: `mod(a, b)`
//! (PostgreSQL, Spark, Trino, DuckDB, MySQL) is written as `a % b`, which computes the
//! same remainder (its sign that of `a`).

use std::ops::ControlFlow;

use datafusion::sql::parser::Statement;
use datafusion::sql::sqlparser::ast::{
    BinaryOperator, Expr, FunctionArg, FunctionArgExpr, FunctionArguments, visit_expressions_mut,
};

use super::parse::sql_statement_mut;

/// `statement` with each `mod(a, b)` as `(a) % (b)`.
pub(super) fn mod_as_remainder(statement: &mut Statement) {
    let Some(statement) = sql_statement_mut(statement) else {
        return;
    };
    let _ = visit_expressions_mut(statement, |expr| {
        if let Some((a, b)) = mod_arguments(expr) {
            *expr = Expr::BinaryOp {
                left: Box::new(Expr::Nested(Box::new(a))),
                op: BinaryOperator::Modulo,
                right: Box::new(Expr::Nested(Box::new(b))),
            };
        }
        ControlFlow::<()>::Continue(())
    });
}

/// The two arguments of a plain `mod(a, b)` call.
fn mod_arguments(expr: &Expr) -> Option<(Expr, Expr)> {
    let Expr::Function(call) = expr else {
        return None;
    };
    let [name] = call.name.0.as_slice() else {
        return None;
    };
    let plain = call.over.is_none() && call.filter.is_none() && call.within_group.is_empty();
    if !plain || !name.as_ident()?.value.eq_ignore_ascii_case("mod") {
        return None;
    }
    let FunctionArguments::List(list) = &call.args else {
        return None;
    };
    match list.args.as_slice() {
        [
            FunctionArg::Unnamed(FunctionArgExpr::Expr(a)),
            FunctionArg::Unnamed(FunctionArgExpr::Expr(b)),
        ] if list.duplicate_treatment.is_none() && list.clauses.is_empty() => {
            Some((a.clone(), b.clone()))
        }
        _ => None,
    }
}
