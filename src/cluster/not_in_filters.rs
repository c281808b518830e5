//! `NOT IN` keeps its NULLs through filter pushdown. DataFusion 53 plans `x NOT IN
//! (SELECT k …)` as a null-aware anti join, and its `push_down_filter` infers a
//! condition on `x` for `k` too (`x < 185` gives `k < 185`), which drops the subquery's
//! NULLs: `… WHERE x < 185 AND x NOT IN (SELECT k …)` answered rows where a NULL `k`
//! makes every row unknown (apache/datafusion#23900, fixed after 53).
//!
//! Floe runs DataFusion's rule with the subquery keys of null-aware joins hidden from
//! it: the rule infers conditions only across keys that are plain columns, so each such
//! key is wrapped in a cast to its own type for the call, and unwrapped after.

use std::sync::Arc;

use datafusion::common::tree_node::{Transformed, TreeNode, TreeNodeRecursion};
use datafusion::common::{DFSchema, Result};
use datafusion::logical_expr::{Cast, Expr, ExprSchemable, LogicalPlan};
use datafusion::optimizer::optimizer::ApplyOrder;
use datafusion::optimizer::{OptimizerConfig, OptimizerRule};

/// `rules` with DataFusion's `push_down_filter` run around null-aware joins.
pub fn with_not_in_kept(
    rules: Vec<Arc<dyn OptimizerRule + Send + Sync>>,
) -> Vec<Arc<dyn OptimizerRule + Send + Sync>> {
    rules
        .into_iter()
        .map(|rule| match rule.name() {
            "push_down_filter" => Arc::new(NotInKept(rule)) as _,
            _ => rule,
        })
        .collect()
}

#[derive(Debug)]
struct NotInKept(Arc<dyn OptimizerRule + Send + Sync>);

impl OptimizerRule for NotInKept {
    fn name(&self) -> &str {
        self.0.name()
    }

    fn apply_order(&self) -> Option<ApplyOrder> {
        self.0.apply_order()
    }

    fn rewrite(
        &self,
        plan: LogicalPlan,
        config: &dyn OptimizerConfig,
    ) -> Result<Transformed<LogicalPlan>> {
        if !reaches_null_aware_join(&plan) {
            return self.0.rewrite(plan, config);
        }
        let hidden = plan.transform_down(|node| hide_keys(node, true))?;
        let rewritten = self.0.rewrite(hidden.data, config)?;
        rewritten.transform_data(|plan| {
            let shown = plan.transform_down(|node| hide_keys(node, false))?;
            Ok(Transformed::yes(shown.data))
        })
    }
}

/// Whether `plan` holds a null-aware join: DataFusion's rule reads a join's keys at the
/// join, at a filter over it, and at a filter further up that it merges into that one
/// and pushes down again in the same call (the outer query's `WHERE v > 10` over a
/// `WITH` query's `WHERE k NOT IN (…) AND g <> 10` took the `NOT IN`'s NULLs).
fn reaches_null_aware_join(plan: &LogicalPlan) -> bool {
    plan.exists(|node| Ok(matches!(node, LogicalPlan::Join(join) if join.null_aware)))
        .unwrap_or(true)
}

/// Wraps (`hide`) or unwraps the right keys of a null-aware join.
fn hide_keys(node: LogicalPlan, hide: bool) -> Result<Transformed<LogicalPlan>> {
    let LogicalPlan::Join(mut join) = node else {
        return Ok(Transformed::no(node));
    };
    if !join.null_aware {
        return Ok(Transformed::no(LogicalPlan::Join(join)));
    }
    let schema = Arc::clone(join.right.schema());
    join.on = std::mem::take(&mut join.on)
        .into_iter()
        .map(|(left, right)| Ok((left, toggled(right, &schema, hide)?)))
        .collect::<Result<_>>()?;
    Ok(Transformed::new(
        LogicalPlan::Join(join),
        true,
        TreeNodeRecursion::Continue,
    ))
}

fn toggled(key: Expr, schema: &DFSchema, hide: bool) -> Result<Expr> {
    match (key, hide) {
        (Expr::Column(column), true) => {
            let data_type = Expr::Column(column.clone()).get_type(schema)?;
            Ok(Expr::Cast(Cast::new(
                Box::new(Expr::Column(column)),
                data_type,
            )))
        }
        // Only a cast to the column's own type, as `hide` wraps it (a coercion's cast of
        // a key changes its type).
        (Expr::Cast(cast), false)
            if matches!(*cast.expr, Expr::Column(_))
                && cast.expr.get_type(schema).ok().as_ref() == Some(&cast.data_type) =>
        {
            Ok(*cast.expr)
        }
        (key, _) => Ok(key),
    }
}
