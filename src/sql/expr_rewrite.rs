//! A rewrite of every expression of a plan, subqueries included, that keeps the names
//! the plan's columns have (a rewritten projection or aggregate expression is aliased to
//! its old name), so that the nodes above still find them.

use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::logical_expr::expr_rewriter::NamePreserver;
use datafusion::logical_expr::{Expr, LogicalPlan};

use crate::error::Result;

/// `plan` with `rewrite` applied to each expression, bottom up.
pub(super) fn rewrite_keeping_names(
    plan: LogicalPlan,
    mut rewrite: impl FnMut(Expr) -> Result<Transformed<Expr>>,
) -> Result<LogicalPlan> {
    let plan = plan.transform_up_with_subqueries(|node| {
        let names = NamePreserver::new(&node);
        node.map_expressions(|expr| {
            let saved = names.save(&expr);
            let rewritten = expr.transform_up(|e| rewrite(e).map_err(Into::into))?;
            Ok(rewritten.update_data(|expr| saved.restore(expr)))
        })
    })?;
    Ok(plan.data)
}
