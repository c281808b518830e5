//! Long chains of operators. sqlparser reads `a OR b OR c …` (any chain of a
//! left-associative operator) into a tree as deep as the chain is long, and each later
//! step recurses through it: Floe's rewrites, DataFusion's planner and optimizer, the
//! encoding of the plan for executors. A filter of 20,000 equalities joined by `OR` (as
//! BI tools write a long selection) overflowed the stack and aborted the server; one of
//! 100 conditions joined by `AND` went past the nesting limit of the decoder on
//! executors, which refused the task (and Ballista took the executor for lost).
//!
//! Set operations chain the same way: 3,000 `SELECT`s joined by `UNION ALL` (as tools
//! write inline rows) aborted the server, 300 took 25 s to plan.
//!
//! Chains of `AND` and of `OR`, and of `UNION [ALL]`, longer than [`BALANCED_FROM`] are
//! rebuilt as balanced trees, which mean the same (each is associative): 20,000
//! conditions nest 15 deep. A chain of any other operator (`+`, `||`, `EXCEPT`, …)
//! longer than [`MAX_CHAIN`] is refused with `INVALID_ARGUMENT`. This runs first on a
//! parsed statement; a chain is taken apart without recursion.

use std::ops::ControlFlow;

use datafusion::sql::parser::Statement;
use datafusion::sql::sqlparser::ast::{
    BinaryOperator, Expr, Query, SetExpr, SetOperator, Value, Values, VisitMut, VisitorMut,
};

use super::parse::sql_statement_mut;
use crate::error::{FloeError, Result};
use crate::table::filter::{BALANCED_FROM, joined_balanced};

/// The longest chain of another operator a statement may hold.
pub const MAX_CHAIN: usize = 256;

/// `statement` with its long `AND`, `OR` and `UNION` chains balanced; an error if it holds a
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

    /// Before the visit goes down into the query's set operations.
    fn pre_visit_query(&mut self, query: &mut Query) -> ControlFlow<FloeError> {
        let body = query.body.as_mut();
        if let SetExpr::SetOperation {
            op: SetOperator::Union,
            set_quantifier,
            ..
        } = body
        {
            let quantifier = *set_quantifier;
            if set_chain_length(body) >= BALANCED_FROM {
                let chain = std::mem::replace(body, no_rows());
                let operands = chain_operands(chain, |b| match b {
                    SetExpr::SetOperation {
                        op: SetOperator::Union,
                        set_quantifier,
                        left,
                        right,
                    } if set_quantifier == quantifier => Link::Joins(*left, *right),
                    other => Link::Operand(other),
                });
                let join = |left, right| SetExpr::SetOperation {
                    op: SetOperator::Union,
                    set_quantifier: quantifier,
                    left: Box::new(left),
                    right: Box::new(right),
                };
                *body = joined_balanced(operands, &join).unwrap_or_else(no_rows);
            }
        }
        too_long(set_chain_length(body))
    }

    /// Before the visit goes down into `expr`: so it goes down the balanced tree.
    fn pre_visit_expr(&mut self, expr: &mut Expr) -> ControlFlow<FloeError> {
        if let Expr::BinaryOp {
            op: op @ (BinaryOperator::And | BinaryOperator::Or),
            ..
        } = expr
        {
            let op = op.clone();
            if chain_length(expr) >= BALANCED_FROM {
                let chain = std::mem::replace(expr, Expr::value(Value::Null));
                let operands = chain_operands(chain, |e| match e {
                    Expr::BinaryOp { left, op: o, right } if o == op => Link::Joins(*left, *right),
                    other => Link::Operand(other),
                });
                let join = |left, right| Expr::BinaryOp {
                    left: Box::new(left),
                    op: op.clone(),
                    right: Box::new(right),
                };
                *expr = joined_balanced(operands, &join).unwrap_or(Expr::value(Value::Null));
            }
        }
        too_long(chain_length(expr))
    }
}

fn too_long(length: usize) -> ControlFlow<FloeError> {
    if length <= MAX_CHAIN {
        return ControlFlow::Continue(());
    }
    ControlFlow::Break(FloeError::invalid(format!(
        "a statement chains {length} operators; at most {MAX_CHAIN} may follow one another \
         (conditions joined by AND or OR, and queries joined by UNION, may be as many as \
         wanted)"
    )))
}

/// How many set operations follow one another down `body`'s left side.
fn set_chain_length(body: &SetExpr) -> usize {
    let mut length = 0;
    let mut node = body;
    while let SetExpr::SetOperation { left, .. } = node {
        length += 1;
        node = left;
    }
    length
}

fn no_rows() -> SetExpr {
    SetExpr::Values(Values {
        explicit_row: false,
        value_keyword: false,
        rows: vec![],
    })
}

/// How many operators follow one another down `expr`'s left side (binary operators,
/// and those written after their operand, as `x::INT` and `x IS NULL`).
fn chain_length(expr: &Expr) -> usize {
    let mut length = 0;
    let mut node = expr;
    while let Some(left) = left_operand(node) {
        length += 1;
        node = left;
    }
    length
}

fn left_operand(expr: &Expr) -> Option<&Expr> {
    match expr {
        Expr::BinaryOp { left, .. } => Some(left),
        Expr::Cast { expr, .. }
        | Expr::Collate { expr, .. }
        | Expr::IsNull(expr)
        | Expr::IsNotNull(expr)
        | Expr::IsTrue(expr)
        | Expr::IsNotTrue(expr)
        | Expr::IsFalse(expr)
        | Expr::IsNotFalse(expr)
        | Expr::IsUnknown(expr)
        | Expr::IsNotUnknown(expr) => Some(expr),
        Expr::AtTimeZone { timestamp, .. } => Some(timestamp),
        _ => None,
    }
}

/// A node of a chain: the two sides it joins, or an operand.
enum Link<T> {
    Joins(T, T),
    Operand(T),
}

/// The operands of a chain leaning left, left to right: `split` takes a node of the
/// chain apart into its two sides, or gives back an operand. Each node is taken apart
/// as it is reached, without recursion, so no deep tree is ever dropped.
fn chain_operands<T>(mut node: T, split: impl Fn(T) -> Link<T>) -> Vec<T> {
    let mut operands = Vec::new();
    loop {
        match split(node) {
            Link::Joins(left, right) => {
                operands.push(right);
                node = left;
            }
            Link::Operand(operand) => {
                operands.push(operand);
                break;
            }
        }
    }
    operands.reverse();
    operands
}
