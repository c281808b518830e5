//! A rewrite of every expression of a plan, subqueries included, that keeps the names
//! the plan's columns have (a rewritten projection or aggregate expression is aliased to
//! its old name), so that the nodes above still find them.

use std::sync::Arc;

use datafusion::common::tree_node::{Transformed, TreeNode, TreeNodeRecursion};
use datafusion::common::{Column, DFSchema};
use datafusion::logical_expr::expr_rewriter::NamePreserver;
use datafusion::logical_expr::{Expr, LogicalPlan};

use crate::error::Result;

/// `plan` with `rewrite` applied to each expression, bottom up.
pub(super) fn rewrite_keeping_names(
    plan: LogicalPlan,
    mut rewrite: impl FnMut(Expr) -> Result<Transformed<Expr>>,
) -> Result<LogicalPlan> {
    rewrite_typed_keeping_names(plan, |expr, _| rewrite(expr))
}

/// `plan` with `rewrite` applied to each expression, bottom up, given the schema its
/// columns come from (the node's inputs'), so that it can ask the types of expressions.
pub(super) fn rewrite_typed_keeping_names(
    plan: LogicalPlan,
    mut rewrite: impl FnMut(Expr, &DFSchema) -> Result<Transformed<Expr>>,
) -> Result<LogicalPlan> {
    let plan = plan.transform_up_with_subqueries(|node| {
        let names = NamePreserver::new(&node);
        let schema = input_schema(&node);
        node.map_expressions(|expr| {
            let saved = names.save(&expr);
            let rewritten = expr.transform_up(|e| rewrite(e, &schema).map_err(Into::into))?;
            Ok(rewritten.update_data(|expr| saved.restore(expr)))
        })
    })?;
    Ok(plan.data)
}

/// The columns the expressions of `node` may name: its inputs' (all of a join's sides),
/// or its own where it has no input (a scan's filters).
fn input_schema(node: &LogicalPlan) -> Arc<DFSchema> {
    match node.inputs().as_slice() {
        [] => Arc::clone(node.schema()),
        [input] => Arc::clone(input.schema()),
        [first, rest @ ..] => {
            let mut merged = first.schema().as_ref().clone();
            for input in rest {
                merged.merge(input.schema());
            }
            Arc::new(merged)
        }
    }
}

/// Each column of `schema`, as an expression.
pub(super) fn columns_of(schema: &DFSchema) -> Vec<Expr> {
    schema.columns().into_iter().map(Expr::Column).collect()
}

/// `expr` (an aggregate of a statement, or an expression of aggregates) with each of its
/// aggregate calls but `grouping(…)` counting only the rows where `condition` holds (added
/// to its `FILTER`), under the name it had.
pub(super) fn aggregates_filtered(
    expr: Expr,
    condition: &Expr,
) -> datafusion::common::Result<Expr> {
    let name = expr.schema_name().to_string();
    let filtered = expr.transform_down(|e| match e {
        Expr::AggregateFunction(mut function) if function.func.name() != "grouping" => {
            function.params.filter = Some(Box::new(match function.params.filter.take() {
                Some(filter) => filter.as_ref().clone().and(condition.clone()),
                None => condition.clone(),
            }));
            Ok(Transformed::new(
                Expr::AggregateFunction(function),
                true,
                TreeNodeRecursion::Jump,
            ))
        }
        other => Ok(Transformed::no(other)),
    })?;
    Ok(match filtered.data {
        Expr::Alias(alias) => Expr::Alias(alias),
        expr if expr.schema_name().to_string() != name => expr.alias(name),
        expr => expr,
    })
}

/// Whether `expr` reads a column of a query outside its own.
pub(super) fn refers_outside(expr: &Expr) -> bool {
    expr.exists(|e| Ok(matches!(e, Expr::OuterReferenceColumn(..))))
        .unwrap_or(true)
}

/// Whether a node of `plan` (or of its subqueries) reads a column of a query outside it.
pub(super) fn holds_outer_reference(plan: &LogicalPlan) -> bool {
    let mut found = false;
    let _ = plan.apply_with_subqueries(|node| {
        found = node.expressions().iter().any(refers_outside);
        Ok(match found {
            true => TreeNodeRecursion::Stop,
            false => TreeNodeRecursion::Continue,
        })
    });
    found
}

/// The outer columns `correlation` reads, each once.
pub(super) fn outer_columns(correlation: &[Expr]) -> Vec<Column> {
    let mut columns: Vec<Column> = Vec::new();
    for expr in correlation {
        let _ = expr.apply(|e| {
            if let Expr::OuterReferenceColumn(_, column) = e
                && !columns.contains(column)
            {
                columns.push(column.clone());
            }
            Ok(TreeNodeRecursion::Continue)
        });
    }
    columns
}

/// Whether `expr` is a subquery (scalar, `EXISTS`, `IN`, `ANY`/`ALL`).
pub(super) fn is_subquery(expr: &Expr) -> bool {
    matches!(
        expr,
        Expr::ScalarSubquery(_) | Expr::Exists(_) | Expr::InSubquery(_) | Expr::SetComparison(_)
    )
}

/// Whether `expr` is or holds a subquery.
pub(super) fn holds_subquery(expr: &Expr) -> bool {
    expr.exists(|e| Ok(is_subquery(e))).unwrap_or(true)
}

/// Whether `plan` holds a subquery: in an expression, or as a node (a lateral join's
/// right side).
pub(super) fn holds_subqueries(plan: &LogicalPlan) -> bool {
    plan.exists(|node| {
        Ok(matches!(node, LogicalPlan::Subquery(_))
            || node.expressions().iter().any(holds_subquery))
    })
    .unwrap_or(true)
}
