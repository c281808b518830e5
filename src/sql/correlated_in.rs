//! A correlated `IN` or `NOT IN` subquery of a filter (`WHERE g NOT IN (SELECT h FROM t2
//! b WHERE b.s = a.s)`), as `EXISTS` over the subquery's rows.
//!
//! DataFusion 53 runs `NOT IN` as a null-aware anti join, which looks for NULLs among
//! all of the subquery's rows rather than among those of the outer row: correlated by
//! an inequality (`b.k < a.k`) it answered no row as soon as any row of `t2` held a
//! NULL, and correlated by an equality it refused the statement ("null_aware anti join
//! only supports single column join key"). A correlated `IN` whose value is cast
//! (`g + 1 IN (SELECT h … WHERE h = a.g)`) failed to plan ("Projections require unique
//! expression names").
//!
//! As a conjunct of a filter, where unknown and false both drop the row, `x IN (S)` is
//! `EXISTS (S WHERE value = x)`, and `x NOT IN (S)` is `NOT EXISTS (S WHERE (value = x)
//! IS NOT FALSE)`: a row is kept when every row of its own S differs from `x` in a
//! value known on both sides. DataFusion joins both by the correlation's equalities.

use std::sync::Arc;

use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::common::{DFSchema, Spans};
use datafusion::logical_expr::expr::{Exists, InSubquery};
use datafusion::logical_expr::utils::{conjunction, split_conjunction_owned};
use datafusion::logical_expr::{Expr, Filter, LogicalPlan, LogicalPlanBuilder, Subquery, lit};

use super::subquery_values::{outer, rows_and_value};
use crate::error::Result;

/// `plan` with the correlated `IN` and `NOT IN` subqueries that are conjuncts of its
/// filters as `EXISTS` and `NOT EXISTS`.
pub(super) fn with_correlated_in_as_exists(plan: LogicalPlan) -> Result<LogicalPlan> {
    let plan = plan.transform_up_with_subqueries(|node| match node {
        LogicalPlan::Filter(filter) if filter.predicate.exists(|e| Ok(is_correlated_in(e)))? => {
            exists_filter(filter).map_err(Into::into)
        }
        other => Ok(Transformed::no(other)),
    })?;
    Ok(plan.data)
}

fn is_correlated_in(expr: &Expr) -> bool {
    matches!(expr, Expr::InSubquery(is_in) if is_correlated_in_subquery(is_in))
}

fn exists_filter(filter: Filter) -> Result<Transformed<LogicalPlan>> {
    let input = Arc::clone(filter.input.schema());
    let mut changed = false;
    let mut conjuncts = Vec::new();
    for conjunct in split_conjunction_owned(filter.predicate) {
        let rewritten = match conjunct {
            Expr::InSubquery(is_in) if is_correlated_in_subquery(&is_in) => exists(is_in, &input)?,
            Expr::Not(negated) => match *negated {
                Expr::InSubquery(is_in) if !is_in.negated && is_correlated_in_subquery(&is_in) => {
                    exists(
                        InSubquery {
                            negated: true,
                            ..is_in
                        },
                        &input,
                    )?
                }
                other => Expr::Not(Box::new(other)),
            },
            other => {
                conjuncts.push(other);
                continue;
            }
        };
        changed = true;
        conjuncts.push(rewritten);
    }
    let predicate = conjunction(conjuncts).unwrap_or_else(|| lit(true));
    let filter = Filter::try_new(predicate, filter.input)?;
    Ok(Transformed::new_transformed(
        LogicalPlan::Filter(filter),
        changed,
    ))
}

fn is_correlated_in_subquery(is_in: &InSubquery) -> bool {
    !is_in.subquery.outer_ref_columns.is_empty()
        && is_in.subquery.subquery.schema().fields().len() == 1
}

/// `EXISTS` over the rows of `is_in`'s subquery that equal (or, for `NOT IN`, may equal)
/// its value, read from the outer query's `input`.
fn exists(is_in: InSubquery, input: &DFSchema) -> Result<Expr> {
    let (rows, value) = rows_and_value(&is_in.subquery.subquery)?;
    let equal = value.eq(outer(*is_in.expr, input)?);
    let condition = match is_in.negated {
        true => equal.is_not_false(),
        false => equal,
    };
    // One filter: DataFusion 53 failed to join a correlated filter over another.
    let rows = match rows {
        LogicalPlan::Filter(filter) => LogicalPlanBuilder::from(Arc::unwrap_or_clone(filter.input))
            .filter(filter.predicate.and(condition))?,
        rows => LogicalPlanBuilder::from(rows).filter(condition)?,
    }
    .build()?;
    Ok(Expr::Exists(Exists {
        subquery: Subquery {
            outer_ref_columns: rows.all_out_ref_exprs(),
            subquery: Arc::new(rows),
            spans: Spans::new(),
        },
        negated: is_in.negated,
    }))
}
