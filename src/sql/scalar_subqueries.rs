//! A scalar subquery (`k = (SELECT k FROM t WHERE …)`) stands for one value, so it may
//! give at most one row; DataFusion 53 joins with every row it gives, answering a row for
//! each, where PostgreSQL and DuckDB refuse ("more than one row returned by a subquery
//! used as an expression"). One that may give more (not an aggregate without `GROUP BY`,
//! not `LIMIT 1`) is aggregated by `floe_single_row`, which fails on a second row; a
//! correlated one so becomes an aggregate, which DataFusion 53 requires of it ("Correlated
//! scalar subquery must be aggregated"), and fails on a second row for one outer row.

use std::sync::Arc;

use datafusion::common::Column;
use datafusion::common::tree_node::Transformed;
use datafusion::logical_expr::{Expr, FetchType, LogicalPlan, LogicalPlanBuilder, Subquery};

use super::expr_rewrite::rewrite_keeping_names;
use crate::cluster::single_row;
use crate::error::Result;

/// `plan` with each scalar subquery that may give several rows checked.
pub(super) fn with_single_row_scalar_subqueries(plan: LogicalPlan) -> Result<LogicalPlan> {
    rewrite_keeping_names(plan, |e| match e {
        Expr::ScalarSubquery(subquery)
            if subquery.subquery.schema().fields().len() == 1
                && !at_most_one_row(&subquery.subquery) =>
        {
            Ok(Transformed::yes(Expr::ScalarSubquery(Subquery {
                subquery: Arc::new(single_row_of(&subquery.subquery)?),
                ..subquery
            })))
        }
        other => Ok(Transformed::no(other)),
    })
}

fn at_most_one_row(plan: &LogicalPlan) -> bool {
    match plan {
        LogicalPlan::Aggregate(aggregate) => aggregate.group_expr.is_empty(),
        LogicalPlan::Limit(limit) => {
            matches!(limit.get_fetch_type(), Ok(FetchType::Literal(Some(rows))) if rows <= 1)
        }
        LogicalPlan::Values(values) => values.values.len() <= 1,
        LogicalPlan::EmptyRelation(_) => true,
        LogicalPlan::Projection(_)
        | LogicalPlan::Filter(_)
        | LogicalPlan::SubqueryAlias(_)
        | LogicalPlan::Sort(_) => plan.inputs().into_iter().all(at_most_one_row),
        _ => false,
    }
}

/// `plan`'s one column, aggregated to its single value under its name.
fn single_row_of(plan: &LogicalPlan) -> Result<LogicalPlan> {
    let (qualifier, field) = plan.schema().qualified_field(0);
    let value = single_row::single_row()
        .call(vec![Expr::Column(Column::from((qualifier, field)))])
        .alias(field.name());
    Ok(LogicalPlanBuilder::from(plan.clone())
        .aggregate(Vec::<Expr>::new(), vec![value])?
        .build()?)
}
