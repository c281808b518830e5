//! Long chains of `AND` and `OR` in a plan, joined as balanced trees. A statement's long
//! chains are balanced as it is parsed (`sql::chains`), but DataFusion's optimizer joins
//! a filter's conditions anew after moving them, one after another (`((a AND b) AND c)
//! …`), as deep as they are many; Ballista's encoding of the plan for executors then
//! recursed through 3,000 conditions until the stack overflowed and the server aborted.
//! This rule, the optimizer's last, joins each chain of at least
//! [`BALANCED_FROM`] conditions again as a balanced tree (`filter_order` does the same
//! for the physical plan's filters).

use datafusion::common::Result;
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::logical_expr::{BinaryExpr, Expr, LogicalPlan, Operator, binary_expr, lit};
use datafusion::optimizer::{OptimizerConfig, OptimizerRule};

use super::expression_rule::rewrite_nodes;
use crate::table::filter::{BALANCED_FROM, joined_balanced};

#[derive(Debug)]
pub(super) struct BalancedConditions;

impl OptimizerRule for BalancedConditions {
    fn name(&self) -> &str {
        "floe_balanced_conditions"
    }

    fn supports_rewrite(&self) -> bool {
        true
    }

    fn rewrite(
        &self,
        plan: LogicalPlan,
        _config: &dyn OptimizerConfig,
    ) -> Result<Transformed<LogicalPlan>> {
        rewrite_nodes(plan, |node| {
            node.map_expressions(|e| e.transform_down(|e| Ok(balanced(e))))
        })
    }
}

/// `expr` as a balanced tree, where it heads a long chain of `AND` or of `OR`; visited
/// top down, so a chain is joined anew once, at its head.
fn balanced(expr: Expr) -> Transformed<Expr> {
    let Expr::BinaryExpr(BinaryExpr { op, .. }) = &expr else {
        return Transformed::no(expr);
    };
    let op = *op;
    if !matches!(op, Operator::And | Operator::Or) || left_chain(&expr, op) < BALANCED_FROM {
        return Transformed::no(expr);
    }
    let joined = joined_balanced(operands(expr, op), &|a, b| binary_expr(a, op, b));
    // No operand at all would be the operator's identity (TRUE for AND, FALSE for OR).
    Transformed::yes(joined.unwrap_or_else(|| lit(op == Operator::And)))
}

/// How many `op`s follow one another down `expr`'s left side.
fn left_chain(expr: &Expr, op: Operator) -> usize {
    let mut length = 0;
    let mut node = expr;
    while let Expr::BinaryExpr(b) = node
        && b.op == op
    {
        length += 1;
        node = &b.left;
    }
    length
}

/// The operands `op` joins in `expr`, left to right, found without recursion.
fn operands(expr: Expr, op: Operator) -> Vec<Expr> {
    let mut operands = Vec::new();
    let mut pending = vec![expr];
    while let Some(next) = pending.pop() {
        match next {
            Expr::BinaryExpr(BinaryExpr { left, op: o, right }) if o == op => {
                pending.push(*right);
                pending.push(*left);
            }
            other => operands.push(other),
        }
    }
    operands
}
