//! Subqueries inside an aggregate's arguments or grouping (`sum(CASE WHEN x > (SELECT
//! avg(y) FROM u WHERE u.g = t.g) THEN 1 ELSE 0 END)`), which DataFusion 53 decorrelates
//! only in projections and filters: the statement failed ("No field named
//! \"sum(CASE WHEN …)\"").
//!
//! Each such subquery is computed by a projection below the aggregate, beside the input's
//! columns, and the aggregate reads its column; the aggregate's outputs keep their names.

use std::sync::Arc;

use datafusion::common::Column;
use datafusion::common::tree_node::{Transformed, TreeNode, TreeNodeRecursion};
use datafusion::logical_expr::expr_rewriter::NamePreserver;
use datafusion::logical_expr::{Aggregate, Expr, LogicalPlan, Projection};

use super::expr_rewrite::{columns_of, is_subquery};
use crate::error::Result;

/// `plan` with the subqueries of its aggregates' expressions computed below them.
pub(super) fn with_aggregate_subqueries_projected(plan: LogicalPlan) -> Result<LogicalPlan> {
    let mut computed = 0usize;
    let plan = plan.transform_up_with_subqueries(|node| match node {
        LogicalPlan::Aggregate(aggregate) if holds_subquery(&aggregate) => {
            projected(aggregate, &mut computed).map(Transformed::yes)
        }
        other => Ok(Transformed::no(other)),
    })?;
    Ok(plan.data)
}

fn holds_subquery(aggregate: &Aggregate) -> bool {
    (aggregate.group_expr.iter().chain(&aggregate.aggr_expr))
        .any(|e| e.exists(|e| Ok(is_subquery(e))).unwrap_or(false))
}

/// `aggregate` reading each of its subqueries from a column of a projection below it.
fn projected(aggregate: Aggregate, computed: &mut usize) -> datafusion::error::Result<LogicalPlan> {
    let names = NamePreserver::new(&LogicalPlan::Aggregate(aggregate.clone()));
    let mut below = columns_of(aggregate.input.schema());
    let mut read_below = |expr: Expr| -> datafusion::error::Result<Expr> {
        let name = names.save(&expr);
        let rewritten = expr.transform_down(|e| {
            if !is_subquery(&e) {
                return Ok(Transformed::no(e));
            }
            *computed += 1;
            let column = format!("__floe_subquery_{computed}");
            below.push(e.alias(&column));
            Ok(Transformed::new(
                Expr::Column(Column::from_name(column)),
                true,
                TreeNodeRecursion::Jump,
            ))
        })?;
        Ok(name.restore(rewritten.data))
    };
    let group_expr = (aggregate.group_expr.into_iter())
        .map(&mut read_below)
        .collect::<datafusion::error::Result<Vec<_>>>()?;
    let aggr_expr = (aggregate.aggr_expr.into_iter())
        .map(&mut read_below)
        .collect::<datafusion::error::Result<Vec<_>>>()?;
    let input = Projection::try_new(below, aggregate.input)?;
    Ok(LogicalPlan::Aggregate(Aggregate::try_new(
        Arc::new(LogicalPlan::Projection(input)),
        group_expr,
        aggr_expr,
    )?))
}
