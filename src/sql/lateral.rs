//! `FROM t, unnest(t.l) AS u(x)`, `t CROSS JOIN UNNEST(t.l)` and `CROSS JOIN LATERAL
//! (SELECT unnest(t.l) …)`: PostgreSQL's, Trino's and DuckDB's way to give each element
//! of a list its row beside its row's other columns. DataFusion 53 plans them as a join
//! with a subquery that refers to the left side's row, and cannot run that ("Physical
//! plan does not support logical expression OuterReferenceColumn").
//!
//! Where the subquery only works on that one row (projections, filters and unnests over
//! the one-row relation) and the join is inner, the subquery's nodes are laid over the
//! left side instead, each carrying the left side's columns along: an unnest then repeats
//! them for each element, which is what the join meant. Its outputs keep the names and
//! qualifiers the join gave them, and the join's condition filters the result. Rows
//! whose list is empty or NULL have no element, so no row, as with the join; in a `LEFT
//! JOIN LATERAL … ON TRUE` (subquery without filters) they keep one row, of NULL.

use std::ops::ControlFlow;
use std::sync::Arc;

use datafusion::arrow::datatypes::DataType;
use datafusion::common::tree_node::{Transformed, TreeNode, TreeNodeRecursion};
use datafusion::common::{
    Column, DFSchema, NullEquality, Result as DfResult, ScalarValue, Spans, TableReference,
};
use datafusion::functions_nested::expr_fn::array_empty;
use datafusion::logical_expr::utils::{conjunction, split_conjunction_owned};
use datafusion::logical_expr::{
    Distinct, Expr, ExprFunctionExt, FetchType, Filter, Join, JoinType, LogicalPlan,
    LogicalPlanBuilder, Projection, SkipType, SortExpr, Subquery, SubqueryAlias, Unnest, lit, not,
    when,
};

use datafusion::sql::parser::Statement;
use datafusion::sql::sqlparser::ast::{
    Ident, TableAlias, TableAliasColumnDef, TableFactor, VisitMut, VisitorMut,
};

use super::expr_rewrite::{columns_of, holds_outer_reference, outer_columns, refers_outside};
use super::parse::sql_statement_mut;
use crate::cluster::signed;
use crate::error::Result;

/// Names the column of each `unnest(list)` in a `FROM` clause as PostgreSQL and DuckDB
/// do: `unnest` without an alias (`FROM t, unnest(t.l)`: `SELECT unnest`), the alias with
/// one but no column list (`unnest(t.l) AS u`: `SELECT u`). DataFusion 53 named it
/// `UNNEST(outer_ref(t.l))`.
pub(super) fn unnest_columns_named(statement: &mut Statement) {
    if let Some(statement) = sql_statement_mut(statement) {
        let _ = statement.visit(&mut UnnestNames);
    }
}

struct UnnestNames;

impl VisitorMut for UnnestNames {
    type Break = ();

    fn pre_visit_table_factor(&mut self, factor: &mut TableFactor) -> ControlFlow<()> {
        if let TableFactor::UNNEST {
            alias, array_exprs, ..
        } = factor
            && array_exprs.len() == 1
        {
            let alias = alias.get_or_insert_with(|| TableAlias {
                explicit: true,
                name: Ident::new("unnest"),
                columns: vec![],
            });
            if alias.columns.is_empty() {
                alias.columns = vec![TableAliasColumnDef {
                    name: alias.name.clone(),
                    data_type: None,
                }];
            }
        }
        ControlFlow::Continue(())
    }
}

/// `plan` with each inner join (or `LEFT … ON TRUE`) of a row-wise lateral subquery laid
/// over its left side.
pub(super) fn lateral_unnests_as_plain(plan: LogicalPlan) -> Result<LogicalPlan> {
    let plan = plan.transform_up_with_subqueries(|node| match node {
        LogicalPlan::Join(join) if join.join_type == JoinType::Inner || keeps_left_rows(&join) => {
            Ok(match laid_over_left(&join)? {
                Some(plan) => Transformed::yes(plan),
                None => Transformed::no(LogicalPlan::Join(join)),
            })
        }
        other => Ok(Transformed::no(other)),
    })?;
    Ok(plan.data)
}

/// Whether `join` is a `LEFT JOIN LATERAL … ON TRUE`: each left row stays, with NULLs
/// where the subquery gives no row.
fn keeps_left_rows(join: &Join) -> bool {
    join.join_type == JoinType::Left
        && join.on.is_empty()
        && matches!(
            join.filter,
            None | Some(Expr::Literal(ScalarValue::Boolean(Some(true)), _))
        )
}

/// The join's rows computed without it, where its right side is a lateral subquery
/// over one row.
fn laid_over_left(join: &Join) -> DfResult<Option<LogicalPlan>> {
    let subquery = match join.right.as_ref() {
        LogicalPlan::SubqueryAlias(SubqueryAlias { input, .. }) => input.as_ref(),
        other => other,
    };
    let LogicalPlan::Subquery(Subquery { subquery, .. }) = subquery else {
        return Ok(None);
    };
    let keep_rows = join.join_type == JoinType::Left;
    let Some(rows) = over(subquery, &join.left, keep_rows)? else {
        return Ok(None);
    };
    // The left side's columns, then the subquery's, named as the join named them.
    let left_width = join.left.schema().fields().len();
    let rows_schema = Arc::clone(rows.schema());
    let mut columns = columns_of(join.left.schema());
    for (i, (qualifier, field)) in join.right.schema().iter().enumerate() {
        let (q, f) = rows_schema.qualified_field(left_width + i);
        columns.push(Expr::Column((q, f).into()).alias_qualified(qualifier.cloned(), field.name()));
    }
    let mut plan = LogicalPlan::Projection(Projection::try_new(columns, Arc::new(rows))?);
    let condition = join
        .on
        .iter()
        .map(|(l, r)| l.clone().eq(r.clone()))
        .chain(join.filter.clone())
        .reduce(Expr::and);
    if let Some(condition) = condition {
        plan = LogicalPlan::Filter(Filter::try_new(condition, Arc::new(plan))?);
    }
    Ok(Some(plan))
}

/// `subquery`'s nodes laid over `left`, each node's outputs after `left`'s columns;
/// `None` where `subquery` is not row-wise work on the one-row relation. With
/// `keep_rows`, every row of `left` stays: no filter, and an unnest of an empty or NULL
/// list gives one row of NULL.
fn over(
    subquery: &LogicalPlan,
    left: &Arc<LogicalPlan>,
    keep_rows: bool,
) -> DfResult<Option<LogicalPlan>> {
    let left_schema = left.schema();
    let plan = match subquery {
        LogicalPlan::EmptyRelation(empty) if empty.produce_one_row => {
            return Ok(Some(left.as_ref().clone()));
        }
        LogicalPlan::Projection(projection) => {
            let Some(input) = over(&projection.input, left, keep_rows)? else {
                return Ok(None);
            };
            let mut exprs = columns_of(left_schema);
            for expr in &projection.expr {
                let name = expr.schema_name().to_string();
                let (expr, renamed) = with_left_columns(expr.clone(), left_schema)?;
                exprs.push(match (renamed, expr) {
                    (true, expr @ Expr::Alias(_)) => expr,
                    (true, expr) => expr.alias(name),
                    (false, expr) => expr,
                });
            }
            LogicalPlan::Projection(Projection::try_new(exprs, Arc::new(input))?)
        }
        LogicalPlan::Filter(filter) if !keep_rows => {
            let Some(input) = over(&filter.input, left, keep_rows)? else {
                return Ok(None);
            };
            let (predicate, _) = with_left_columns(filter.predicate.clone(), left_schema)?;
            LogicalPlan::Filter(Filter::try_new(predicate, Arc::new(input))?)
        }
        LogicalPlan::Unnest(unnest) => {
            let Some(input) = over(&unnest.input, left, keep_rows)? else {
                return Ok(None);
            };
            let mut unnest = Unnest {
                input: Arc::new(input),
                ..unnest.clone()
            };
            if keep_rows {
                unnest.input = Arc::new(empty_lists_as_nulls(&unnest)?);
                unnest.options.preserve_nulls = true;
            }
            LogicalPlan::Unnest(unnest).recompute_schema()?
        }
        _ => return Ok(None),
    };
    Ok(Some(plan))
}

/// The input of `unnest` with each list it unnests NULL where empty (an unnest that
/// keeps NULLs gives a NULL list one row of NULL).
fn empty_lists_as_nulls(unnest: &Unnest) -> DfResult<LogicalPlan> {
    let columns = unnest
        .input
        .schema()
        .iter()
        .map(|(qualifier, field)| {
            let column = Column::from((qualifier, field));
            let list = matches!(
                field.data_type(),
                DataType::List(_) | DataType::LargeList(_) | DataType::FixedSizeList(..)
            );
            if !list || !unnest.exec_columns.contains(&column) {
                return Ok(Expr::Column(column));
            }
            let non_empty = not(array_empty(Expr::Column(column.clone())));
            Ok(when(non_empty, Expr::Column(column))
                .end()?
                .alias_qualified(qualifier.cloned(), field.name()))
        })
        .collect::<DfResult<Vec<_>>>()?;
    Ok(LogicalPlan::Projection(Projection::try_new(
        columns,
        Arc::clone(&unnest.input),
    )?))
}

/// `expr` with its references to `left`'s row as plain columns; whether it had any.
fn with_left_columns(expr: Expr, left: &DFSchema) -> DfResult<(Expr, bool)> {
    let rewritten = expr.transform_up(|e| match e {
        Expr::OuterReferenceColumn(_, column) if left.has_column(&column) => {
            Ok(Transformed::yes(Expr::Column(column)))
        }
        other => Ok(Transformed::no(other)),
    })?;
    Ok((rewritten.data, rewritten.transformed))
}

/// The join's rows as the left side's with a scalar subquery for each column of its
/// right side, where that is a lateral subquery of one aggregated row.
fn aggregate_as_values(join: &Join) -> DfResult<Option<LogicalPlan>> {
    if join.join_type != JoinType::Inner && !keeps_left_rows(join) {
        return Ok(None);
    }
    let subquery = match join.right.as_ref() {
        LogicalPlan::SubqueryAlias(SubqueryAlias { input, .. }) => input.as_ref(),
        other => other,
    };
    let LogicalPlan::Subquery(Subquery { subquery, .. }) = subquery else {
        return Ok(None);
    };
    let (values, aggregate) = match subquery.as_ref() {
        LogicalPlan::Projection(projection) => (projection.expr.clone(), &projection.input),
        aggregate => (columns_of(aggregate.schema()), subquery),
    };
    let LogicalPlan::Aggregate(grouping) = aggregate.as_ref() else {
        return Ok(None);
    };
    if !grouping.group_expr.is_empty() {
        return Ok(None);
    }
    let mut columns = columns_of(join.left.schema());
    for (value, (qualifier, field)) in values.into_iter().zip(join.right.schema().iter()) {
        let one_value =
            LogicalPlan::Projection(Projection::try_new(vec![value], Arc::clone(aggregate))?);
        let scalar = Expr::ScalarSubquery(Subquery {
            outer_ref_columns: one_value.all_out_ref_exprs(),
            subquery: Arc::new(one_value),
            spans: Spans::new(),
        });
        columns.push(scalar.alias_qualified(qualifier.cloned(), field.name()));
    }
    let mut plan = LogicalPlan::Projection(Projection::try_new(columns, Arc::clone(&join.left))?);
    let condition = (join.on.iter())
        .map(|(l, r)| l.clone().eq(r.clone()))
        .chain(join.filter.clone())
        .reduce(Expr::and);
    if let Some(condition) = condition.filter(|_| join.join_type == JoinType::Inner) {
        plan = LogicalPlan::Filter(Filter::try_new(condition, Arc::new(plan))?);
    }
    Ok(Some(plan))
}

/// Lateral subqueries over a table that DataFusion 53 refused ("Physical plan does not
/// support logical expression OuterReferenceColumn"):
///
/// * one that aggregates without grouping (`t CROSS JOIN LATERAL (SELECT max(u.k) AS m
///   FROM u WHERE u.g = t.g) l`, also `JOIN … ON`, `LEFT JOIN … ON TRUE`) gives each left
///   row exactly one row, so each of its columns is a scalar subquery of that row, which
///   DataFusion (or `src/sql/inequality_subqueries.rs`) joins;
/// * one that filters a table by the left row (`t JOIN LATERAL (SELECT u.k FROM u WHERE
///   u.g = t.g AND …) l ON …`, also `CROSS`, `LEFT`) is a join with that table on the
///   filter: the columns the filter reads of the table are carried out of the subquery's
///   projection under names of their own, and dropped above the join;
/// * one that also sorts and limits, groups or drops repeated rows (`CROSS JOIN LATERAL
///   (SELECT u.k FROM u WHERE u.g = t.g ORDER BY u.x DESC LIMIT 3) l`, each row's first
///   rows) is computed once for each distinct value of the left columns its filter reads
///   (`per_outer_value`).
pub(super) fn lateral_subqueries_joined(plan: LogicalPlan) -> Result<LogicalPlan> {
    let plan = plan.transform_up_with_subqueries(|node| match node {
        LogicalPlan::Join(join) => {
            let joined = match aggregate_as_values(&join)? {
                Some(plan) => Some(plan),
                None => match filter_as_join(&join)? {
                    Some(plan) => Some(plan),
                    None => per_outer_value(&join)?,
                },
            };
            Ok(match joined {
                Some(plan) => Transformed::yes(plan),
                None => Transformed::no(LogicalPlan::Join(join)),
            })
        }
        other => Ok(Transformed::no(other)),
    })?;
    Ok(plan.data)
}

/// The subquery and alias of the right side of `join`, an inner or left join with a
/// lateral subquery.
fn inner_or_left_lateral(join: &Join) -> Option<(&LogicalPlan, &TableReference)> {
    if !matches!(join.join_type, JoinType::Inner | JoinType::Left) {
        return None;
    }
    let LogicalPlan::SubqueryAlias(SubqueryAlias { input, alias, .. }) = join.right.as_ref() else {
        return None;
    };
    let LogicalPlan::Subquery(Subquery { subquery, .. }) = input.as_ref() else {
        return None;
    };
    Some((subquery.as_ref(), alias))
}

fn filter_as_join(join: &Join) -> DfResult<Option<LogicalPlan>> {
    let Some((subquery, alias)) = inner_or_left_lateral(join) else {
        return Ok(None);
    };
    let LogicalPlan::Projection(projection) = subquery else {
        return Ok(None);
    };
    let LogicalPlan::Filter(filter) = projection.input.as_ref() else {
        return Ok(None);
    };
    let (correlation, local): (Vec<Expr>, Vec<Expr>) =
        split_conjunction_owned(filter.predicate.clone())
            .into_iter()
            .partition(refers_outside);
    let plain = !correlation.is_empty()
        && !projection.expr.iter().any(refers_outside)
        && !holds_outer_reference(&filter.input);
    if !plain {
        return Ok(None);
    }
    // The table's columns the correlation reads, carried out under names of their own.
    let mut carried: Vec<Column> = Vec::new();
    for conjunct in &correlation {
        conjunct.apply(|e| {
            if let Expr::Column(column) = e
                && !carried.contains(column)
            {
                carried.push(column.clone());
            }
            Ok(TreeNodeRecursion::Continue)
        })?;
    }
    let carried_name = |i: usize| format!("__floe_lateral_{i}");
    let mut rows = Arc::clone(&filter.input);
    if let Some(local) = conjunction(local) {
        rows = Arc::new(LogicalPlan::Filter(Filter::try_new(local, rows)?));
    }
    let mut exprs = projection.expr.clone();
    exprs.extend(
        (carried.iter().enumerate()).map(|(i, c)| Expr::Column(c.clone()).alias(carried_name(i))),
    );
    let rows = LogicalPlan::Projection(Projection::try_new(exprs, rows)?);
    let right = LogicalPlan::SubqueryAlias(SubqueryAlias::try_new(Arc::new(rows), alias.clone())?);
    let on_rows = correlation.into_iter().map(|conjunct| {
        conjunct
            .transform(|e| match e {
                Expr::OuterReferenceColumn(_, column) => Ok(Transformed::yes(Expr::Column(column))),
                Expr::Column(column) => {
                    let i = carried.iter().position(|c| *c == column).unwrap_or(0);
                    Ok(Transformed::yes(Expr::Column(Column::new(
                        Some(alias.clone()),
                        carried_name(i),
                    ))))
                }
                other => Ok(Transformed::no(other)),
            })
            .map(|t| t.data)
    });
    let condition = (join.on.iter())
        .map(|(l, r)| Ok(l.clone().eq(r.clone())))
        .chain(join.filter.clone().map(Ok))
        .chain(on_rows)
        .collect::<DfResult<Vec<Expr>>>()?;
    let joined = LogicalPlanBuilder::from(join.left.as_ref().clone())
        .join_on(right, join.join_type, condition)?
        .project(columns_of(&join.schema))?
        .build()?;
    Ok(Some(joined))
}

/// Names the number of a row among those of its outer value, by the subquery's order.
const RANK: &str = "__floe_lateral_rank";

/// A lateral subquery whose steps above its filter by the left row (sort and limit,
/// aggregate, window, `DISTINCT`, projections, filters) cannot go above a join: computed
/// for each distinct value of the left columns the filter reads (`PerOuterValue`), then
/// joined (inner or left, the join's condition kept) to the left rows on those values,
/// NULL equal to NULL.
fn per_outer_value(join: &Join) -> DfResult<Option<LogicalPlan>> {
    let Some((subquery, alias)) = inner_or_left_lateral(join) else {
        return Ok(None);
    };
    let Some(rows) = PerOuterValue::of(subquery, &join.left)? else {
        return Ok(None);
    };
    let right =
        LogicalPlan::SubqueryAlias(SubqueryAlias::try_new(Arc::new(rows.plan), alias.clone())?);
    let right_keys: Vec<Column> = (rows.keys.iter())
        .map(|k| Column::new(Some(alias.clone()), k))
        .collect();
    let condition = (join.on.iter())
        .map(|(l, r)| l.clone().eq(r.clone()))
        .chain(join.filter.clone())
        .reduce(Expr::and);
    let joined = LogicalPlanBuilder::from(join.left.as_ref().clone())
        .join_detailed(
            right,
            join.join_type,
            (rows.outer, right_keys),
            condition,
            NullEquality::NullEqualsNull,
        )?
        .project(columns_of(&join.schema))?
        .build()?;
    Ok(Some(joined))
}

/// A correlated subquery's rows for each distinct value of the outer columns its filter
/// reads: those values (`keys`) joined with the rows of its tables on the filter, each
/// of its steps above the filter applied per value (grouped and windows partitioned by
/// it; a limit a row number within it, in the subquery's order).
pub(super) struct PerOuterValue {
    /// The key columns, then the subquery's.
    pub(super) plan: LogicalPlan,
    /// The outer columns, in the order of `keys`.
    pub(super) outer: Vec<Column>,
    pub(super) keys: Vec<String>,
}

impl PerOuterValue {
    /// `subquery` computed per value of the columns of `outer_input` it reads, where each
    /// of its steps above its filter can be.
    pub(super) fn of(subquery: &LogicalPlan, outer_input: &LogicalPlan) -> DfResult<Option<Self>> {
        // The subquery's steps above its correlated filter, from the top.
        let mut steps = Vec::new();
        let mut node = subquery;
        let filter = loop {
            match node {
                LogicalPlan::Filter(filter) if refers_outside(&filter.predicate) => break filter,
                step => {
                    let [input] = step.inputs()[..] else {
                        return Ok(None);
                    };
                    if step.expressions().iter().any(refers_outside) {
                        return Ok(None);
                    }
                    steps.push(step);
                    node = input;
                }
            }
        };
        let (correlation, local): (Vec<Expr>, Vec<Expr>) =
            split_conjunction_owned(filter.predicate.clone())
                .into_iter()
                .partition(refers_outside);
        let outer = outer_columns(&correlation);
        if holds_outer_reference(&filter.input)
            || !outer.iter().all(|c| outer_input.schema().has_column(c))
        {
            return Ok(None);
        }
        let keys: Vec<String> = (0..outer.len())
            .map(|i| format!("__floe_lateral_key_{i}"))
            .collect();
        let key_columns = || keys.iter().map(|k| Expr::Column(Column::from_name(k)));
        let values = LogicalPlanBuilder::from(outer_input.clone())
            .aggregate(
                (outer.iter().zip(&keys)).map(|(c, k)| Expr::Column(c.clone()).alias(k)),
                Vec::<Expr>::new(),
            )?
            .build()?;
        let on_keys = correlation.into_iter().map(|conjunct| {
            conjunct
                .transform(|e| match e {
                    Expr::OuterReferenceColumn(_, column) => {
                        let i = outer.iter().position(|c| *c == column).unwrap_or(0);
                        Ok(Transformed::yes(Expr::Column(Column::from_name(&keys[i]))))
                    }
                    other => Ok(Transformed::no(other)),
                })
                .map(|t| t.data)
        });
        let mut rows = LogicalPlanBuilder::from(filter.input.as_ref().clone());
        if let Some(local) = conjunction(local) {
            rows = rows.filter(local)?;
        }
        let mut plan = LogicalPlanBuilder::from(values)
            .join_on(
                rows.build()?,
                JoinType::Inner,
                on_keys.collect::<DfResult<Vec<_>>>()?,
            )?
            .build()?;
        let mut ranked = false;
        for (i, step) in steps.iter().enumerate().rev() {
            let limited = steps[..i]
                .iter()
                .any(|s| matches!(s, LogicalPlan::Limit(_)));
            plan = match step {
                LogicalPlan::Projection(projection) => {
                    let mut exprs: Vec<Expr> = key_columns().collect();
                    exprs.extend(ranked.then(|| Expr::Column(Column::from_name(RANK))));
                    exprs.extend(projection.expr.iter().cloned());
                    LogicalPlan::Projection(Projection::try_new(exprs, Arc::new(plan))?)
                }
                LogicalPlan::Filter(filter) => {
                    LogicalPlan::Filter(Filter::try_new(filter.predicate.clone(), Arc::new(plan))?)
                }
                LogicalPlan::Aggregate(aggregate)
                    if !ranked
                        && !aggregate.group_expr.is_empty()
                        && !(aggregate.group_expr.iter())
                            .any(|e| matches!(e, Expr::GroupingSet(_))) =>
                {
                    let groups = key_columns().chain(aggregate.group_expr.iter().cloned());
                    LogicalPlanBuilder::from(plan)
                        .aggregate(groups, aggregate.aggr_expr.clone())?
                        .build()?
                }
                LogicalPlan::Window(window) if !ranked => {
                    let keys: Vec<Expr> = key_columns().collect();
                    let exprs = (window.window_expr.iter())
                        .map(|e| partitioned_by(e.clone(), &keys))
                        .collect::<DfResult<Vec<_>>>()?;
                    LogicalPlanBuilder::from(plan).window(exprs)?.build()?
                }
                LogicalPlan::Distinct(Distinct::All(_)) if !ranked => {
                    LogicalPlanBuilder::from(plan).distinct()?.build()?
                }
                LogicalPlan::Sort(sort) if sort.fetch.is_none() && limited && !ranked => {
                    ranked = true;
                    ranked_by(plan, key_columns().collect(), sort.expr.clone())?
                }
                // Without a limit, the order of a lateral subquery's rows is no matter.
                LogicalPlan::Sort(sort) if sort.fetch.is_none() && !limited => plan,
                LogicalPlan::Limit(limit) => {
                    let (Ok(SkipType::Literal(skip)), Ok(FetchType::Literal(fetch))) =
                        (limit.get_skip_type(), limit.get_fetch_type())
                    else {
                        return Ok(None);
                    };
                    if !ranked {
                        plan = ranked_by(plan, key_columns().collect(), Vec::new())?;
                    }
                    ranked = false;
                    let rank = || Expr::Column(Column::from_name(RANK));
                    let mut kept = rank().gt(lit(skip as i64));
                    if let Some(fetch) = fetch {
                        kept = kept.and(rank().lt_eq(lit((skip + fetch) as i64)));
                    }
                    let columns = (plan.schema().columns().into_iter())
                        .filter(|c| c.name != RANK)
                        .map(Expr::Column);
                    LogicalPlanBuilder::from(plan)
                        .filter(kept)?
                        .project(columns)?
                        .build()?
                }
                _ => return Ok(None),
            };
        }
        Ok(Some(Self { plan, outer, keys }))
    }
}

/// `window`, a window function of a statement, also partitioned by `keys` (first), under
/// the name it had.
fn partitioned_by(window: Expr, keys: &[Expr]) -> DfResult<Expr> {
    let name = window.schema_name().to_string();
    let partitioned = window.transform_down(|e| match e {
        Expr::WindowFunction(mut function) => {
            let partition_by = std::mem::take(&mut function.params.partition_by);
            function.params.partition_by = keys.iter().cloned().chain(partition_by).collect();
            Ok(Transformed::new(
                Expr::WindowFunction(function),
                true,
                TreeNodeRecursion::Jump,
            ))
        }
        other => Ok(Transformed::no(other)),
    })?;
    Ok(match partitioned.data {
        Expr::Alias(alias) => Expr::Alias(alias),
        expr => expr.alias(name),
    })
}

/// `plan` with each row's number among those of its `keys` (`RANK`), in `order`.
fn ranked_by(plan: LogicalPlan, keys: Vec<Expr>, order: Vec<SortExpr>) -> DfResult<LogicalPlan> {
    let rank = signed::row_number()
        .call(vec![])
        .partition_by(keys)
        .order_by(order)
        .build()?
        .alias(RANK);
    LogicalPlanBuilder::from(plan).window(vec![rank])?.build()
}
