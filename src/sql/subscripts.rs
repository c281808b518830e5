//! `array_agg(x)[i]`: DataFusion 53 plans any subscript of an `array_agg` call as
//! `nth_value(x, i)`, which takes only a nonzero integer literal: `[0]` failed as an
//! internal error ("Nth value indices are 1 based") and `[g]` as not implemented, where
//! a subscript of any other array answers (NULL past the ends). Those subscripts are
//! written as the `array_element` call that other arrays' subscripts are.

use std::ops::ControlFlow;

use datafusion::sql::parser::Statement;
use datafusion::sql::sqlparser::ast::{
    AccessExpr, Expr, Function, FunctionArg, FunctionArgExpr, FunctionArgumentList,
    FunctionArguments, Ident, ObjectName, Subscript, UnaryOperator, Value, visit_expressions_mut,
};

use super::parse::sql_statement_mut;

/// `statement` with each `array_agg(…)[i]` that `nth_value` cannot take as
/// `array_element(array_agg(…), i)`.
pub(super) fn aggregate_subscripts_as_elements(statement: &mut Statement) {
    let Some(statement) = sql_statement_mut(statement) else {
        return;
    };
    let _ = visit_expressions_mut(statement, |expr| {
        if let Expr::CompoundFieldAccess { root, access_chain } = expr
            && is_array_agg(root)
            && let Some(AccessExpr::Subscript(Subscript::Index { index })) = access_chain.first()
            && !is_nonzero_integer(index)
        {
            let element = array_element(root.as_ref().clone(), index.clone());
            access_chain.remove(0);
            *expr = match access_chain.is_empty() {
                true => element,
                false => Expr::CompoundFieldAccess {
                    root: Box::new(element),
                    access_chain: std::mem::take(access_chain),
                },
            };
        }
        ControlFlow::<()>::Continue(())
    });
}

fn is_array_agg(expr: &Expr) -> bool {
    match expr {
        Expr::Nested(inner) => is_array_agg(inner),
        Expr::Function(call) => {
            let [name] = call.name.0.as_slice() else {
                return false;
            };
            call.over.is_none()
                && name
                    .as_ident()
                    .is_some_and(|n| n.value.eq_ignore_ascii_case("array_agg"))
        }
        _ => false,
    }
}

/// A literal `nth_value` takes: an integer other than zero, maybe negated.
fn is_nonzero_integer(expr: &Expr) -> bool {
    match expr {
        Expr::UnaryOp {
            op: UnaryOperator::Minus | UnaryOperator::Plus,
            expr,
        } => is_nonzero_integer(expr),
        Expr::Value(value) => match &value.value {
            Value::Number(n, _) => n.parse::<i64>().is_ok_and(|n| n != 0),
            _ => false,
        },
        _ => false,
    }
}

fn array_element(array: Expr, index: Expr) -> Expr {
    let argument = |e| FunctionArg::Unnamed(FunctionArgExpr::Expr(e));
    Expr::Function(Function {
        name: ObjectName::from(vec![Ident::new("array_element")]),
        uses_odbc_syntax: false,
        parameters: FunctionArguments::None,
        args: FunctionArguments::List(FunctionArgumentList {
            duplicate_treatment: None,
            args: vec![argument(array), argument(index)],
            clauses: vec![],
        }),
        filter: None,
        null_treatment: None,
        over: None,
        within_group: vec![],
    })
}
