//! Long chains of operators. sqlparser reads `a OR b OR c …` (any chain of a
//! left-associative operator) into a tree as deep as the chain is long, and each later
//! step recurses through it: Floe's rewrites, DataFusion's planner and optimizer, the
//! encoding of the plan for executors. A filter of 20,000 equalities joined by `OR` (as
//! BI tools write a long selection) overflowed the stack and aborted the server; one of
//! 100 conditions joined by `AND` went past the nesting limit of the decoder on
//! executors, which refused the task (and Ballista took the executor for lost).
//!
//! Chains of `AND` and of `OR` longer than [`BALANCED_FROM`] are rebuilt as balanced
//! trees, which mean the same (both are associative): 20,000 conditions nest 15 deep.
//! A chain of any other operator (`+`, `||`, …) longer than [`MAX_CHAIN`] is refused
//! with `INVALID_ARGUMENT`. This runs first on a parsed statement; the chain is taken
//! apart without recursion.

use std::ops::ControlFlow;

use datafusion::sql::parser::Statement;
use datafusion::sql::sqlparser::ast::{BinaryOperator, Expr, Value, VisitMut, VisitorMut};

use super::parse::sql_statement_mut;
use crate::error::{FloeError, Result};
use crate::table::filter::BALANCED_FROM;

/// The longest chain of another operator a statement may hold.
pub const MAX_CHAIN: usize = 256;

/// `statement` with its long `AND` and `OR` chains balanced; an error if it holds a
/// chain of another operator longer than [`MAX_CHAIN`].
pub fn balance_chains(statement: &mut Statement) -> Result<()> {
    let Some(statement) = sql_statement_mut(statement) else {
        return Ok(());
    };
    match statement.visit(&mut Chains) {
        ControlFlow::Break(error) => Err(error),
        ControlFlow::Continue(()) => Ok(()),
    }
}

struct Chains;

impl VisitorMut for Chains {
    type Break = FloeError;

    /// Before the visit goes down into `expr`: so it goes down the balanced tree.
    fn pre_visit_expr(&mut self, expr: &mut Expr) -> ControlFlow<FloeError> {
        if let Expr::BinaryOp {
            op: op @ (BinaryOperator::And | BinaryOperator::Or),
            ..
        } = expr
        {
            let op = op.clone();
            if chain_length(expr) >= BALANCED_FROM {
                *expr = balanced(operands(expr, &op), &op);
            }
        }
        let length = chain_length(expr);
        if length > MAX_CHAIN {
            return ControlFlow::Break(FloeError::invalid(format!(
                "an expression chains {length} operators; at most {MAX_CHAIN} may follow one \
                 another (conditions joined by AND or OR may be as many as wanted)"
            )));
        }
        ControlFlow::Continue(())
    }
}

/// How many operators follow one another down `expr`'s left side.
fn chain_length(expr: &Expr) -> usize {
    let mut length = 0;
    let mut node = expr;
    while let Expr::BinaryOp { left, .. } = node {
        length += 1;
        node = left;
    }
    length
}

/// The operands of the chain of `op` at `expr`, left to right; `expr` is left a NULL.
/// Each node is taken apart as it is reached, so no deep tree is ever dropped.
fn operands(expr: &mut Expr, op: &BinaryOperator) -> Vec<Expr> {
    let mut operands = Vec::new();
    let mut node = std::mem::replace(expr, Expr::value(Value::Null));
    loop {
        match node {
            Expr::BinaryOp { left, op: o, right } if o == *op => {
                operands.push(*right);
                node = *left;
            }
            other => {
                operands.push(other);
                break;
            }
        }
    }
    operands.reverse();
    operands
}

/// `operands` joined by `op`, halves under each node.
fn balanced(mut operands: Vec<Expr>, op: &BinaryOperator) -> Expr {
    if operands.len() <= 1 {
        return operands.pop().unwrap_or(Expr::value(Value::Null));
    }
    let right = operands.split_off(operands.len() / 2);
    Expr::BinaryOp {
        left: Box::new(balanced(operands, op)),
        op: op.clone(),
        right: Box::new(balanced(right, op)),
    }
}
