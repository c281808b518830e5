//! A subquery's value renamed where the statement has a column of its name, or another
//! scalar subquery of the same expression has a value of its name (`SELECT (SELECT
//! count(*) FROM u WHERE u.a = t.a) AS x, (SELECT count(*) FROM u WHERE u.b = t.b) AS
//! y`: "Ambiguous reference to unqualified field count(*)").
//!
//! DataFusion 53's `scalar_subquery_to_join` joins a scalar subquery to the rows it is
//! compared with, its value keeping the name it has in the subquery
//! (`__scalar_sq_1."sum(big.k)"`). When those rows have an unqualified column of the
//! same name, as the outer aggregate of `SELECT v, sum(k) FROM big GROUP BY v HAVING
//! sum(k) > (SELECT sum(k) FROM big)` has, the joined schema is ambiguous and the
//! statement fails ("Schema contains qualified field name … and unqualified field name
//! … which would be ambiguous"). Such a subquery's value is renamed here first; the
//! names the statement outputs stay as they were.
//!
//! The subquery of `k > ALL (SELECT k FROM t …)` (and `ANY`, `SOME`) is renamed alike:
//! `rewrite_set_comparison` turns it into `EXISTS` subqueries comparing the outer `k` as
//! an outer reference with the inner one, and where both are `t.k` (the same table, not
//! aliased) the decorrelated join compared a column with itself: `k > ALL (SELECT k
//! FROM t WHERE k < 1990)` answered no row.
//!
//! An `IN` subquery whose value is an expression (`k IN (SELECT max(k) FROM t GROUP BY
//! g)`) gets a plain name too: under `NOT … IS TRUE` or `IS NOT TRUE` (how a DELETE keeps
//! the rows it does not delete), DataFusion 53's `decorrelate_predicate_subquery`
//! projects the value twice under its name and fails ("Projections require unique
//! expression names … __correlated_sq_1.max(d.k)").

use std::collections::HashSet;
use std::sync::Arc;

use datafusion::common::Column;
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::logical_expr::expr_rewriter::NamePreserver;
use datafusion::logical_expr::{Expr, LogicalPlan, LogicalPlanBuilder, Subquery};

use crate::error::Result;

/// `plan` with each scalar or set-comparison subquery whose value has the name of a
/// column of the rows it is evaluated over, and each `IN` subquery whose value is an
/// expression, giving its value a name of its own.
pub(super) fn with_subquery_values_renamed(plan: LogicalPlan) -> Result<LogicalPlan> {
    let mut renamed = 0usize;
    let rewritten = plan.transform_up_with_subqueries(|node| {
        let taken: HashSet<String> = node
            .inputs()
            .iter()
            .flat_map(|input| input.schema().fields().iter().map(|f| f.name().clone()))
            .collect();
        if taken.is_empty() {
            return Ok(Transformed::no(node));
        }
        let names = NamePreserver::new(&node);
        // The values of the node's scalar subqueries so far: two of one name were
        // ambiguous once joined.
        let mut values: HashSet<String> = HashSet::new();
        node.map_expressions(|expr| {
            let saved = names.save(&expr);
            let mut renamed_value = |subquery: Subquery| {
                renamed += 1;
                with_value_named(subquery, &format!("__floe_subquery_value_{renamed}"))
            };
            let rewritten = expr.transform_up(|expr| match expr {
                Expr::ScalarSubquery(subquery)
                    if value_name(&subquery).is_some_and(|name| {
                        taken.contains(name) || !values.insert(name.into())
                    }) =>
                {
                    Ok(Transformed::yes(Expr::ScalarSubquery(renamed_value(
                        subquery,
                    )?)))
                }
                Expr::InSubquery(mut in_subquery)
                    if value_name(&in_subquery.subquery).is_some_and(is_expression_name) =>
                {
                    in_subquery.subquery = renamed_value(in_subquery.subquery)?;
                    Ok(Transformed::yes(Expr::InSubquery(in_subquery)))
                }
                Expr::SetComparison(mut comparison)
                    if value_name(&comparison.subquery)
                        .is_some_and(|name| taken.contains(name)) =>
                {
                    comparison.subquery = renamed_value(comparison.subquery)?;
                    Ok(Transformed::yes(Expr::SetComparison(comparison)))
                }
                other => Ok(Transformed::no(other)),
            })?;
            Ok(rewritten.update_data(|expr| saved.restore(expr)))
        })
    })?;
    Ok(rewritten.data)
}

/// Whether `name` names an expression (`max(d.k)`), not a column.
fn is_expression_name(name: &str) -> bool {
    !name.chars().all(|c| c.is_alphanumeric() || c == '_')
}

/// The name of a scalar subquery's value; `None` if it has not exactly one column (an
/// error DataFusion reports as it is).
fn value_name(subquery: &Subquery) -> Option<&str> {
    match subquery.subquery.schema().fields().as_ref() {
        [value] => Some(value.name()),
        _ => None,
    }
}

/// `subquery` with its value (its one column) under `name`.
fn with_value_named(subquery: Subquery, name: &str) -> datafusion::error::Result<Subquery> {
    let (qualifier, field) = subquery.subquery.schema().qualified_field(0);
    let value = Expr::Column(Column::new(qualifier.cloned(), field.name())).alias(name);
    let plan = LogicalPlanBuilder::from(Arc::unwrap_or_clone(subquery.subquery.clone()))
        .project(vec![value])?
        .build()?;
    Ok(Subquery {
        subquery: Arc::new(plan),
        ..subquery
    })
}
