//! The shape of Floe's logical rules (analyzer and optimizer) that rewrite a plan in
//! place: its nodes, or the expressions in them (keeping the names DataFusion gave
//! those).

use datafusion::common::tree_node::{Transformed, TreeNode, TreeNodeRecursion};
use datafusion::common::{DFSchema, Result};
use datafusion::logical_expr::Expr;
use datafusion::logical_expr::LogicalPlan;
use datafusion::logical_expr::expr_rewriter::NamePreserver;

/// `plan` with `rewrite` applied to every node, bottom up (subqueries too). Once a node
/// changed, the nodes above it (which come later) take their schemas anew from their
/// inputs, since a rewrite may change a type.
pub(super) fn rewrite_nodes(
    plan: LogicalPlan,
    mut rewrite: impl FnMut(LogicalPlan) -> Result<Transformed<LogicalPlan>>,
) -> Result<Transformed<LogicalPlan>> {
    let mut changed = false;
    plan.transform_up_with_subqueries(|node| {
        let node = rewrite(node)?;
        changed |= node.transformed;
        match changed {
            true => Ok(Transformed::yes(node.data.recompute_schema()?)),
            false => Ok(node),
        }
    })
}

/// `plan` with `rewrite` applied, bottom up, to every expression that holds a
/// `candidate`, keeping their names; `rewrite` is given the schema of the node's inputs.
pub(super) fn rewrite_expressions(
    plan: LogicalPlan,
    candidate: impl Fn(&Expr) -> bool,
    rewrite: impl Fn(Expr, &DFSchema) -> Transformed<Expr>,
) -> Result<Transformed<LogicalPlan>> {
    rewrite_nodes(plan, |node| {
        let mut found = false;
        node.apply_expressions(|e| {
            found = e.exists(|e| Ok(candidate(e)))?;
            Ok(match found {
                true => TreeNodeRecursion::Stop,
                false => TreeNodeRecursion::Continue,
            })
        })?;
        if !found {
            return Ok(Transformed::no(node));
        }
        let mut schema = DFSchema::empty();
        for input in node.inputs() {
            schema.merge(input.schema());
        }
        let names = NamePreserver::new(&node);
        node.map_expressions(|expr| {
            let name = names.save(&expr);
            let rewritten = expr.transform_up(|e| Ok(rewrite(e, &schema)))?;
            Ok(rewritten.update_data(|e| name.restore(e)))
        })
    })
}
