//! A scalar subquery of an aggregate that refers to the outer query by more than
//! equalities (`(SELECT sum(b.h) FROM t2 b WHERE b.dt < a.dt)`), as a join.
//!
//! DataFusion 53 joins a correlated scalar subquery only by the equalities its filter
//! requires, grouping by their inner sides; any other reference to the outer query left
//! the subquery in place, and the statement was refused ("Physical plan does not
//! support logical expression ScalarSubquery"). PostgreSQL, DuckDB and Trino answer it.
//!
//! Here the subquery is computed once for each distinct value of the outer columns it
//! reads (`SELECT DISTINCT a.dt`): those values joined (left) with the subquery's rows
//! by its correlation, grouped by the values, each aggregate counting only the joined
//! rows (so that `count(*)` of no rows is 0 and `sum` NULL); the outer rows are then
//! joined (left) with these values, NULLs equal to NULLs. Other subqueries stay as
//! DataFusion plans them.

use std::sync::Arc;

use datafusion::common::tree_node::{Transformed, TreeNode, TreeNodeRecursion};
use datafusion::common::{Column, NullEquality};
use datafusion::logical_expr::expr_rewriter::NamePreserver;
use datafusion::logical_expr::utils::{conjunction, split_conjunction_owned};
use datafusion::logical_expr::{
    Aggregate, Expr, Filter, JoinType, LogicalPlan, LogicalPlanBuilder, Projection, Subquery, lit,
};

use super::expr_rewrite::{
    aggregates_filtered, columns_of, holds_outer_reference, outer_columns, refers_outside,
};
use crate::error::Result;

/// Marks the rows of a subquery joined with an outer value.
const MATCHED: &str = "__floe_matched";

/// `plan` with the scalar subqueries of its filters and projections that DataFusion
/// cannot join computed by joins (see the module documentation).
pub(super) fn with_inequality_subqueries_joined(plan: LogicalPlan) -> Result<LogicalPlan> {
    let mut named = 0usize;
    let plan = plan.transform_up_with_subqueries(|mut node| {
        let mut changed = false;
        while matches!(node, LogicalPlan::Projection(_) | LogicalPlan::Filter(_)) {
            let Some(joined) = join_one(&node, &mut named)? else {
                break;
            };
            node = joined;
            changed = true;
        }
        Ok(Transformed::new_transformed(node, changed))
    })?;
    Ok(plan.data)
}

/// `node` with its first subquery that DataFusion cannot join read from a join instead,
/// if it has one.
fn join_one(
    node: &LogicalPlan,
    named: &mut usize,
) -> datafusion::error::Result<Option<LogicalPlan>> {
    let input = node.inputs()[0].clone();
    let mut found = None;
    for expr in node.expressions() {
        expr.apply(|e| {
            if let Expr::ScalarSubquery(subquery) = e
                && let Some(parts) = Parts::of(subquery, &input)
            {
                found = Some((subquery.clone(), parts));
                return Ok(TreeNodeRecursion::Stop);
            }
            Ok(TreeNodeRecursion::Continue)
        })?;
        if found.is_some() {
            break;
        }
    }
    let Some((subquery, parts)) = found else {
        return Ok(None);
    };
    *named += 1;
    let value_name = format!("__floe_value_{named}");
    let joined = parts.joined_to(&input, *named, &value_name)?;
    let value = Expr::Column(Column::from_name(value_name));
    let replace = |expr: Expr| {
        expr.transform_up(|e| match e {
            Expr::ScalarSubquery(s) if s == subquery => Ok(Transformed::yes(value.clone())),
            other => Ok(Transformed::no(other)),
        })
        .map(|t| t.data)
    };
    let rebuilt = match node {
        LogicalPlan::Projection(projection) => {
            let names = NamePreserver::new_for_projection();
            let exprs = (projection.expr.iter())
                .map(|e| Ok(names.save(e).restore(replace(e.clone())?)))
                .collect::<datafusion::error::Result<Vec<_>>>()?;
            LogicalPlan::Projection(Projection::try_new(exprs, Arc::new(joined))?)
        }
        LogicalPlan::Filter(filter) => {
            let kept = Filter::try_new(replace(filter.predicate.clone())?, Arc::new(joined))?;
            let columns = columns_of(input.schema());
            LogicalPlanBuilder::from(LogicalPlan::Filter(kept))
                .project(columns)?
                .build()?
        }
        _ => return Ok(None),
    };
    Ok(Some(rebuilt))
}

/// A scalar subquery `SELECT value FROM (SELECT aggregates FROM [SELECT …] rows WHERE
/// correlation AND local)`.
struct Parts {
    /// The value of the subquery's projection, of the aggregate's columns.
    value: Expr,
    aggregate: Aggregate,
    /// A projection between the aggregate and the filter.
    projection: Option<Vec<Expr>>,
    rows: LogicalPlan,
    correlation: Vec<Expr>,
    local: Vec<Expr>,
    /// The outer columns the correlation reads.
    outer: Vec<Column>,
}

impl Parts {
    fn of(subquery: &Subquery, input: &LogicalPlan) -> Option<Self> {
        let (value, below) = match subquery.subquery.as_ref() {
            LogicalPlan::Projection(p) if p.expr.len() == 1 => {
                (p.expr[0].clone().unalias_nested().data, p.input.as_ref())
            }
            plan => (
                Expr::Column(plan.schema().columns().into_iter().next()?),
                plan,
            ),
        };
        let LogicalPlan::Aggregate(aggregate) = below else {
            return None;
        };
        let (projection, filtered) = match aggregate.input.as_ref() {
            LogicalPlan::Projection(p) => (Some(p.expr.clone()), p.input.as_ref()),
            plan => (None, plan),
        };
        let LogicalPlan::Filter(filter) = filtered else {
            return None;
        };
        let (correlation, local): (Vec<Expr>, Vec<Expr>) =
            split_conjunction_owned(filter.predicate.clone())
                .into_iter()
                .partition(refers_outside);
        let clean = !refers_outside(&value)
            && aggregate.group_expr.is_empty()
            && !aggregate.aggr_expr.iter().any(refers_outside)
            && !projection.iter().flatten().any(refers_outside)
            && !local.iter().any(refers_outside)
            && !holds_outer_reference(filter.input.as_ref())
            && !correlation
                .iter()
                .any(|c| c.exists(|e| Ok(is_subquery(e))).unwrap_or(true));
        let outer = outer_columns(&correlation);
        let readable = outer.iter().all(|c| input.schema().has_column(c));
        let joinable_by_datafusion = correlation.iter().all(is_equality);
        if !clean || !readable || outer.is_empty() || joinable_by_datafusion {
            return None;
        }
        Some(Self {
            value,
            aggregate: aggregate.clone(),
            projection,
            rows: filter.input.as_ref().clone(),
            correlation,
            local,
            outer,
        })
    }

    /// `input` joined (left) with the subquery's value for each distinct value of the
    /// outer columns, under the name `value_name`.
    fn joined_to(
        self,
        input: &LogicalPlan,
        n: usize,
        value_name: &str,
    ) -> datafusion::error::Result<LogicalPlan> {
        let keys: Vec<String> = (0..self.outer.len())
            .map(|i| format!("__floe_key_{n}_{i}"))
            .collect();
        let key_columns = || keys.iter().map(|k| Expr::Column(Column::from_name(k)));
        let distinct = LogicalPlanBuilder::from(input.clone())
            .aggregate(
                (self.outer.iter().zip(&keys)).map(|(c, k)| Expr::Column(c.clone()).alias(k)),
                Vec::<Expr>::new(),
            )?
            .build()?;
        let on_keys = self.correlation.into_iter().map(|c| {
            c.transform(|e| match e {
                Expr::OuterReferenceColumn(_, column) => {
                    let i = self.outer.iter().position(|c| *c == column).unwrap_or(0);
                    Ok(Transformed::yes(Expr::Column(Column::from_name(&keys[i]))))
                }
                other => Ok(Transformed::no(other)),
            })
            .map(|t| t.data)
        });
        let on_keys = on_keys.collect::<datafusion::error::Result<Vec<_>>>()?;
        let mut rows = LogicalPlanBuilder::from(self.rows);
        if let Some(local) = conjunction(self.local) {
            rows = rows.filter(local)?;
        }
        let mut marked = columns_of(rows.schema());
        marked.push(lit(true).alias(MATCHED));
        let mut joined = LogicalPlanBuilder::from(distinct).join_on(
            rows.project(marked)?.build()?,
            JoinType::Left,
            on_keys,
        )?;
        if let Some(projection) = self.projection {
            let carried = key_columns().chain([Expr::Column(Column::from_name(MATCHED))]);
            joined = joined.project(carried.chain(projection))?;
        }
        let matched = Expr::Column(Column::from_name(MATCHED)).is_not_null();
        let aggregates = (self.aggregate.aggr_expr.into_iter())
            .map(|a| aggregates_filtered(a, &matched))
            .collect::<datafusion::error::Result<Vec<_>>>()?;
        let values = joined
            .aggregate(key_columns(), aggregates)?
            .project(key_columns().chain([self.value.alias(value_name)]))?
            .build()?;
        let outer_keys: Vec<Column> = self.outer;
        let key_names: Vec<Column> = keys.iter().map(Column::from_name).collect();
        let joined = LogicalPlanBuilder::from(input.clone())
            .join_detailed(
                values,
                JoinType::Left,
                (outer_keys, key_names),
                None,
                NullEquality::NullEqualsNull,
            )?
            .build()?;
        let mut columns = columns_of(input.schema());
        columns.push(Expr::Column(Column::from_name(value_name)));
        LogicalPlanBuilder::from(joined).project(columns)?.build()
    }
}

fn is_subquery(expr: &Expr) -> bool {
    matches!(
        expr,
        Expr::ScalarSubquery(_) | Expr::Exists(_) | Expr::InSubquery(_) | Expr::SetComparison(_)
    )
}

/// `column = outer value` (either way round): DataFusion joins by these. It does not
/// join by an expression of the subquery's columns (`b.h + 1 = a.g`).
fn is_equality(expr: &Expr) -> bool {
    let Expr::BinaryExpr(equality) = expr else {
        return false;
    };
    let only_outer = |e: &Expr| {
        refers_outside(e)
            && !e
                .exists(|e| Ok(matches!(e, Expr::Column(_))))
                .unwrap_or(true)
    };
    let (left, right) = (equality.left.as_ref(), equality.right.as_ref());
    equality.op == datafusion::logical_expr::Operator::Eq
        && ((matches!(left, Expr::Column(_)) && only_outer(right))
            || (matches!(right, Expr::Column(_)) && only_outer(left)))
}
