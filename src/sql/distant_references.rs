//! Subqueries inside subqueries that read a column of the query two levels out
//! (`FROM t1 a WHERE NOT EXISTS (SELECT 1 FROM t2 b WHERE NOT EXISTS (SELECT 1 FROM t3 c
//! WHERE c.k = b.k AND c.s = a.s))`, the usual form of "every b has a c").
//!
//! DataFusion 53 joins the innermost subquery into the middle one first; that join's
//! condition then names `a.s`, a column the middle query does not have, and the statement
//! failed ("No field named a.s").
//!
//! Here the middle subquery reads those columns as its own: its rows are crossed with the
//! distinct values of the columns in the outer query's input (`SELECT DISTINCT a.s FROM
//! …`) and kept where the values are the outer row's, NULL equal to NULL, so that it has
//! the rows it had, each beside the outer row's values; the inner subquery reads those,
//! one level out. Each level is then correlated with the one just outside it, which
//! DataFusion joins. The middle subquery's rows are crossed with every distinct outer
//! value before they meet the outer rows, which is as much work as the statement asks
//! where the inner subquery is negated, and more than it needs where it is not.

use std::sync::Arc;

use datafusion::arrow::datatypes::FieldRef;
use datafusion::common::Column;
use datafusion::common::tree_node::{Transformed, TreeNode, TreeNodeRecursion};
use datafusion::logical_expr::expr_rewriter::NamePreserver;
use datafusion::logical_expr::utils::conjunction;
use datafusion::logical_expr::{
    BinaryExpr, Expr, Filter, LogicalPlan, LogicalPlanBuilder, Operator, Projection, Subquery, lit,
};

use super::expr_rewrite::{columns_of, holds_subquery};
use crate::error::Result;

/// `plan` with each subquery whose own subqueries read the columns of the query outside
/// it carrying those columns itself (see the module documentation).
pub(super) fn with_distant_references_carried(plan: LogicalPlan) -> Result<LogicalPlan> {
    let mut carried = 0usize;
    let plan = plan.transform_down_with_subqueries(|node| {
        // The outer input's references are looked for only where a subquery may read them.
        if !matches!(node, LogicalPlan::Projection(_) | LogicalPlan::Filter(_))
            || !node.expressions().iter().any(holds_subquery)
        {
            return Ok(Transformed::no(node));
        }
        let outer = node.inputs()[0].clone();
        if !outer.all_out_ref_exprs().is_empty() {
            return Ok(Transformed::no(node));
        }
        node.map_subqueries(|subquery| match subquery {
            LogicalPlan::Subquery(subquery) => {
                Ok(carrying(subquery, &outer, &mut carried)?.update_data(LogicalPlan::Subquery))
            }
            other => Ok(Transformed::no(other)),
        })
    })?;
    Ok(plan.data)
}

/// `subquery` carrying the columns of `outer` that its own subqueries read.
fn carrying(
    subquery: Subquery,
    outer: &LogicalPlan,
    carried: &mut usize,
) -> datafusion::error::Result<Transformed<Subquery>> {
    let own = own_columns(&subquery.subquery);
    let distant = |node: &LogicalPlan| -> Vec<(FieldRef, Column)> {
        nested_outer_references(node)
            .into_iter()
            .filter(|(_, c)| outer.schema().has_column(c) && !own.contains(c))
            .collect()
    };
    let mut found = false;
    let mut supported = true;
    let _ = subquery.subquery.apply(|node| {
        if !distant(node).is_empty() {
            found = true;
            supported &= matches!(node, LogicalPlan::Projection(_) | LogicalPlan::Filter(_));
        }
        Ok(TreeNodeRecursion::Continue)
    });
    if !found || !supported {
        return Ok(Transformed::no(subquery));
    }
    let rewritten = Arc::unwrap_or_clone(Arc::clone(&subquery.subquery)).transform_up(|node| {
        let columns = distant(&node);
        if columns.is_empty() {
            return Ok(Transformed::no(node));
        }
        *carried += 1;
        carried_through(node, outer, &columns, *carried).map(Transformed::yes)
    })?;
    let plan = Arc::new(rewritten.data);
    Ok(Transformed::yes(Subquery {
        outer_ref_columns: plan.all_out_ref_exprs(),
        subquery: plan,
        spans: subquery.spans,
    }))
}

/// `node` (a filter or a projection of the middle subquery, whose subqueries read
/// `columns` of `outer`) reading its input crossed with those columns' distinct values,
/// where they are the outer row's; its subqueries read them there.
fn carried_through(
    node: LogicalPlan,
    outer: &LogicalPlan,
    columns: &[(FieldRef, Column)],
    n: usize,
) -> datafusion::error::Result<LogicalPlan> {
    let alias = format!("__floe_outer_{n}");
    let names: Vec<String> = (0..columns.len()).map(|i| format!("v{i}")).collect();
    let values = LogicalPlanBuilder::from(outer.clone())
        .project(
            (columns.iter().zip(&names)).map(|((_, c), name)| Expr::Column(c.clone()).alias(name)),
        )?
        .distinct()?
        .alias(&alias)?
        .build()?;
    let replacements: Vec<(Column, Expr)> = (columns.iter().zip(&names))
        .map(|((field, column), name)| {
            let field = Arc::new(field.as_ref().clone().with_name(name));
            let carried = Column::new(Some(alias.as_str()), name);
            (column.clone(), Expr::OuterReferenceColumn(field, carried))
        })
        .collect();
    let same_row = (columns.iter().zip(&names)).map(|((field, column), name)| {
        Expr::BinaryExpr(BinaryExpr::new(
            Box::new(Expr::Column(Column::new(Some(alias.as_str()), name))),
            Operator::IsNotDistinctFrom,
            Box::new(Expr::OuterReferenceColumn(
                Arc::clone(field),
                column.clone(),
            )),
        ))
    });
    let input = node.inputs()[0].clone();
    let same_row = conjunction(same_row).unwrap_or_else(|| lit(true));
    let crossed = LogicalPlanBuilder::from(input.clone())
        .cross_join(values)?
        .build()?;
    let saved: Vec<_> = match &node {
        LogicalPlan::Projection(projection) => {
            let names = NamePreserver::new(&node);
            projection.expr.iter().map(|e| names.save(e)).collect()
        }
        _ => Vec::new(),
    };
    let node = node.map_subqueries(|subquery| {
        let LogicalPlan::Subquery(subquery) = subquery else {
            return Ok(Transformed::no(subquery));
        };
        let plan = references_replaced(Arc::unwrap_or_clone(subquery.subquery), &replacements)?;
        Ok(Transformed::yes(LogicalPlan::Subquery(Subquery {
            outer_ref_columns: plan.all_out_ref_exprs(),
            subquery: Arc::new(plan),
            spans: subquery.spans,
        })))
    })?;
    let rebuilt = match node.data {
        LogicalPlan::Filter(filter) => {
            let kept = Filter::try_new(filter.predicate.and(same_row), Arc::new(crossed))?;
            LogicalPlanBuilder::from(LogicalPlan::Filter(kept))
                .project(columns_of(input.schema()))?
                .build()?
        }
        LogicalPlan::Projection(projection) => {
            let exprs = (projection.expr.into_iter().zip(saved)).map(|(e, name)| name.restore(e));
            let crossed = LogicalPlanBuilder::from(crossed)
                .filter(same_row)?
                .build()?;
            LogicalPlan::Projection(Projection::try_new(exprs.collect(), Arc::new(crossed))?)
        }
        other => return Ok(other),
    };
    Ok(rebuilt)
}

/// `plan` (a subquery, with its own subqueries) reading each replaced outer column from
/// its replacement.
fn references_replaced(
    plan: LogicalPlan,
    replacements: &[(Column, Expr)],
) -> datafusion::error::Result<LogicalPlan> {
    let plan = plan.transform_up_with_subqueries(|node| {
        node.map_expressions(|expr| {
            expr.transform_up(|e| match e {
                Expr::OuterReferenceColumn(_, ref column) => {
                    match replacements.iter().find(|(c, _)| c == column) {
                        Some((_, replacement)) => Ok(Transformed::yes(replacement.clone())),
                        None => Ok(Transformed::no(e)),
                    }
                }
                other => Ok(Transformed::no(other)),
            })
        })
    })?;
    let plan = plan.data.transform_up_with_subqueries(|node| {
        node.map_subqueries(|subquery| match subquery {
            LogicalPlan::Subquery(mut subquery) => {
                subquery.outer_ref_columns = subquery.subquery.all_out_ref_exprs();
                Ok(Transformed::yes(LogicalPlan::Subquery(subquery)))
            }
            other => Ok(Transformed::no(other)),
        })
    })?;
    Ok(plan.data)
}

/// The columns of the nodes of `plan` itself (not of its subqueries): what a reference
/// from inside its subqueries finds before the query outside it.
fn own_columns(plan: &LogicalPlan) -> Vec<Column> {
    let mut columns = Vec::new();
    let _ = plan.apply(|node| {
        columns.extend(node.schema().columns());
        Ok(TreeNodeRecursion::Continue)
    });
    columns
}

/// The outer columns read anywhere inside the subqueries of `node`'s expressions.
fn nested_outer_references(node: &LogicalPlan) -> Vec<(FieldRef, Column)> {
    let mut found: Vec<(FieldRef, Column)> = Vec::new();
    let _ = node.apply_subqueries(|subquery| {
        subquery.apply_with_subqueries(|inner| {
            inner.apply_expressions(|expr| {
                expr.apply(|e| {
                    if let Expr::OuterReferenceColumn(field, column) = e
                        && !found.iter().any(|(_, c)| c == column)
                    {
                        found.push((Arc::clone(field), column.clone()));
                    }
                    Ok(TreeNodeRecursion::Continue)
                })
            })
        })
    });
    found
}
