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
//! joined (left) with these values, NULLs equal to NULLs. The value and the aggregates
//! may read the outer row too (`max(b.k) + a.k`): they then read those values.
//!
//! A scalar subquery of its first row (`(SELECT b.s FROM t2 b WHERE b.h = a.g ORDER BY
//! b.dt DESC LIMIT 1)`, however correlated) is computed once for each distinct value of
//! the outer columns its filter reads, as a lateral subquery is (`lateral::PerOuterValue`),
//! and joined (left) the same way. Other subqueries stay as DataFusion plans them.

use std::sync::Arc;

use datafusion::common::tree_node::{Transformed, TreeNode, TreeNodeRecursion};
use datafusion::common::{Column, NullEquality};
use datafusion::logical_expr::expr_rewriter::NamePreserver;
use datafusion::logical_expr::utils::{conjunction, split_conjunction_owned};
use datafusion::logical_expr::{
    Aggregate, Expr, FetchType, Filter, JoinType, LogicalPlan, LogicalPlanBuilder, Projection,
    Subquery, lit,
};

use super::expr_rewrite::{
    aggregates_filtered, columns_of, holds_outer_reference, is_subquery, outer_columns,
    refers_outside,
};
use super::lateral::PerOuterValue;
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
            if let Expr::ScalarSubquery(subquery) = e {
                if let Some(parts) = Parts::of(subquery, &input) {
                    found = Some((subquery.clone(), Joinable::Aggregated(Box::new(parts))));
                } else if let Some(rows) = first_row_per_outer_value(subquery, &input)? {
                    found = Some((subquery.clone(), Joinable::FirstRow(Box::new(rows))));
                }
            }
            Ok(match found {
                Some(_) => TreeNodeRecursion::Stop,
                None => TreeNodeRecursion::Continue,
            })
        })?;
        if found.is_some() {
            break;
        }
    }
    let Some((subquery, joinable)) = found else {
        return Ok(None);
    };
    *named += 1;
    let value_name = format!("__floe_value_{named}");
    let joined = match joinable {
        Joinable::Aggregated(parts) => parts.joined_to(&input, *named, &value_name)?,
        Joinable::FirstRow(rows) => first_row_joined_to(*rows, &input, *named, &value_name)?,
    };
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

/// How a scalar subquery is computed by a join.
enum Joinable {
    /// An aggregate of the rows its correlation matches.
    Aggregated(Box<Parts>),
    /// At most one row, by its `LIMIT 1` (`ORDER BY b.dt DESC LIMIT 1`, the latest row).
    FirstRow(Box<PerOuterValue>),
}

/// A scalar subquery of one column whose steps stop at one row (`LIMIT 1` or `0`),
/// computed for each distinct value of the outer columns its filter reads.
fn first_row_per_outer_value(
    subquery: &Subquery,
    input: &LogicalPlan,
) -> datafusion::error::Result<Option<PerOuterValue>> {
    let mut one_row = false;
    subquery.subquery.apply(|node| {
        Ok(match node {
            LogicalPlan::Limit(limit) => {
                one_row = matches!(limit.get_fetch_type()?, FetchType::Literal(Some(0 | 1)));
                TreeNodeRecursion::Stop
            }
            LogicalPlan::Projection(_) | LogicalPlan::Sort(_) => TreeNodeRecursion::Continue,
            _ => TreeNodeRecursion::Stop,
        })
    })?;
    if !one_row || subquery.subquery.schema().fields().len() != 1 {
        return Ok(None);
    }
    PerOuterValue::of(&subquery.subquery, input)
}

/// `input` joined (left) with the one row `rows` has for each outer value, its column
/// under the name `value_name`.
fn first_row_joined_to(
    rows: PerOuterValue,
    input: &LogicalPlan,
    n: usize,
    value_name: &str,
) -> datafusion::error::Result<LogicalPlan> {
    let alias = format!("__floe_first_row_{n}");
    let keys: Vec<Column> = (rows.keys.iter())
        .map(|k| Column::new(Some(alias.as_str()), k))
        .collect();
    let value = Column::from(rows.plan.schema().qualified_field(rows.keys.len()));
    let value = Expr::Column(Column::new(Some(alias.as_str()), value.name));
    let right = LogicalPlanBuilder::from(rows.plan).alias(&alias)?.build()?;
    let mut columns = columns_of(input.schema());
    columns.push(value.alias(value_name));
    LogicalPlanBuilder::from(input.clone())
        .join_detailed(
            right,
            JoinType::Left,
            (rows.outer, keys),
            None,
            NullEquality::NullEqualsNull,
        )?
        .project(columns)?
        .build()
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
        // Without a filter, only the value or the aggregates read the outer row.
        let (predicate, rows) = match filtered {
            LogicalPlan::Filter(filter) => (filter.predicate.clone(), filter.input.as_ref()),
            rows => (lit(true), rows),
        };
        let (correlation, local): (Vec<Expr>, Vec<Expr>) = split_conjunction_owned(predicate)
            .into_iter()
            .partition(refers_outside);
        let clean = aggregate.group_expr.is_empty()
            && !projection.iter().flatten().any(refers_outside)
            && !holds_outer_reference(rows)
            && !(correlation.iter().chain([&value]))
                .any(|c| c.exists(|e| Ok(is_subquery(e))).unwrap_or(true));
        // The value, or an aggregate, may read the outer row too (`max(b.k) + a.k`).
        let reads_outer_row =
            refers_outside(&value) || aggregate.aggr_expr.iter().any(refers_outside);
        let mut reading = correlation.clone();
        reading.push(value.clone());
        reading.extend(aggregate.aggr_expr.iter().cloned());
        let outer = outer_columns(&reading);
        let readable = outer.iter().all(|c| input.schema().has_column(c));
        let joinable_by_datafusion = !reads_outer_row && correlation.iter().all(is_equality);
        if !clean || !readable || outer.is_empty() || joinable_by_datafusion {
            return None;
        }
        Some(Self {
            value,
            aggregate: aggregate.clone(),
            projection,
            rows: rows.clone(),
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
        let outer = &self.outer;
        let read_from_keys = |expr: Expr| {
            expr.transform(|e| match e {
                Expr::OuterReferenceColumn(_, column) => {
                    let i = outer.iter().position(|c| *c == column).unwrap_or(0);
                    Ok(Transformed::yes(Expr::Column(Column::from_name(&keys[i]))))
                }
                other => Ok(Transformed::no(other)),
            })
            .map(|t| t.data)
        };
        let mut on_keys = (self.correlation.into_iter())
            .map(read_from_keys)
            .collect::<datafusion::error::Result<Vec<_>>>()?;
        if on_keys.is_empty() {
            // Only the value reads the outer row: every row joins every value.
            on_keys.push(lit(true));
        }
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
        let aggregates = (self.aggregate.aggr_expr.into_iter()).map(|a| {
            let name = a.schema_name().to_string();
            let filtered = aggregates_filtered(read_from_keys(a)?, &matched)?;
            Ok(filtered.unalias().alias(name))
        });
        let aggregates = aggregates.collect::<datafusion::error::Result<Vec<_>>>()?;
        let value = read_from_keys(self.value)?;
        let values = joined
            .aggregate(key_columns(), aggregates)?
            .project(key_columns().chain([value.alias(value_name)]))?
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
