//! The empty grouping set over no rows. SQL gives `GROUP BY ROLLUP (g)`, `CUBE (g)` and
//! `GROUPING SETS ((g), ())` a grand total row even where no row is grouped (`count(*)`
//! 0, `sum(x)` NULL), as a query without `GROUP BY` has; DataFusion 53 answers no row.
//!
//! Floe adds one padding row to the aggregate's input, marked by a column of its own,
//! which every aggregate leaves out (`FILTER (WHERE NOT pad)`): it makes the empty set's
//! group exist. A group of another set that holds nothing but the padding row is
//! dropped above the aggregate, by a count of the real rows and `grouping(…)` of all
//! the grouping columns (the empty set's has every bit set).

use std::ops::ControlFlow;
use std::sync::Arc;

use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::common::{Column, ScalarValue};
use datafusion::functions_aggregate::count::count_udaf;
use datafusion::functions_aggregate::grouping::grouping_udaf;
use datafusion::logical_expr::expr::AggregateFunction;
use datafusion::logical_expr::utils::grouping_set_to_exprlist;
use datafusion::logical_expr::{
    Aggregate, Expr, GroupingSet, LogicalPlan, LogicalPlanBuilder, cast, lit,
};

use datafusion::sql::parser::Statement;
use datafusion::sql::sqlparser::ast::{self, GroupByExpr, Query, SetExpr, VisitMut, VisitorMut};

use super::parse::sql_statement_mut;
use crate::error::Result;

/// Marks the padding row.
const PAD: &str = "__floe_pad";
/// The real rows of a group.
const REAL_ROWS: &str = "__floe_real_rows";
/// `grouping(…)` is an INT: the bits of at most 31 columns (one of them twice).
const MAX_GROUPING_COLUMNS: usize = 30;

/// `statement` with `GROUP BY ()` (which DataFusion 53 cannot plan) as `GROUP BY
/// GROUPING SETS (())`, and a `()` beside other grouping expressions dropped (it adds
/// nothing to their groups).
pub(super) fn empty_groupings_as_sets(statement: &mut Statement) {
    let Some(statement) = sql_statement_mut(statement) else {
        return;
    };
    let _ = statement.visit(&mut EmptyGroupings);
}

struct EmptyGroupings;

impl VisitorMut for EmptyGroupings {
    type Break = ();

    fn pre_visit_query(&mut self, query: &mut Query) -> ControlFlow<()> {
        if let SetExpr::Select(select) = query.body.as_mut()
            && let GroupByExpr::Expressions(expressions, _) = &mut select.group_by
        {
            let empty = |e: &ast::Expr| matches!(e, ast::Expr::Tuple(items) if items.is_empty());
            if expressions.iter().all(empty) && !expressions.is_empty() {
                *expressions = vec![ast::Expr::GroupingSets(vec![vec![]])];
            } else {
                expressions.retain(|e| !empty(e));
            }
        }
        ControlFlow::Continue(())
    }
}

/// `plan` with each aggregate whose grouping sets include the empty one answering its
/// grand total over no rows too; `GROUPING SETS (())` alone is an aggregate without
/// grouping.
pub(super) fn with_grand_totals_over_no_rows(plan: LogicalPlan) -> Result<LogicalPlan> {
    let plan = plan.transform_up_with_subqueries(|node| match node {
        LogicalPlan::Aggregate(aggregate) => match grouping_columns_with_empty_set(&aggregate) {
            Some(columns) if columns.is_empty() => {
                let Aggregate {
                    input, aggr_expr, ..
                } = aggregate;
                Aggregate::try_new(input, vec![], aggr_expr)
                    .map(|plain| Transformed::yes(LogicalPlan::Aggregate(plain)))
            }
            Some(columns) => padded(aggregate, columns).map(Transformed::yes),
            None => Ok(Transformed::no(LogicalPlan::Aggregate(aggregate))),
        },
        other => Ok(Transformed::no(other)),
    })?;
    Ok(plan.data)
}

/// The distinct grouping columns of `aggregate` (maybe none), if its grouping sets
/// include the empty one.
fn grouping_columns_with_empty_set(aggregate: &Aggregate) -> Option<Vec<Expr>> {
    let [Expr::GroupingSet(set)] = aggregate.group_expr.as_slice() else {
        return None;
    };
    let has_empty = match set {
        GroupingSet::Rollup(_) | GroupingSet::Cube(_) => true,
        GroupingSet::GroupingSets(sets) => sets.iter().any(Vec::is_empty),
    };
    let columns = grouping_set_to_exprlist(&aggregate.group_expr).ok()?;
    (has_empty && columns.len() <= MAX_GROUPING_COLUMNS)
        .then(|| columns.into_iter().cloned().collect())
}

fn padded(aggregate: Aggregate, columns: Vec<Expr>) -> datafusion::common::Result<LogicalPlan> {
    // DataFusion computes `grouping(…)` above the aggregate, from its grouping id,
    // which no node above reads.
    let output: Vec<Expr> = aggregate
        .schema
        .columns()
        .into_iter()
        .filter(|column| column.name != Aggregate::INTERNAL_GROUPING_ID)
        .map(Expr::Column)
        .collect();
    let not_pad = !Expr::Column(Column::from_name(PAD));
    let mut aggregates: Vec<Expr> = aggregate
        .aggr_expr
        .into_iter()
        .map(|expr| without_padding(expr, &not_pad))
        .collect::<datafusion::common::Result<_>>()?;
    let count = AggregateFunction::new_udf(
        count_udaf(),
        vec![lit(1)],
        false,
        Some(Box::new(not_pad)),
        vec![],
        None,
    );
    aggregates.push(Expr::AggregateFunction(count).alias(REAL_ROWS));
    // Unaliased, or DataFusion would not compute it; the first column once more keeps
    // its name apart from the statement's own `grouping(…)`.
    let mut arguments = columns.clone();
    arguments.push(columns[0].clone());
    let all_bits = (1i32 << arguments.len()) - 1;
    let grouping = Expr::AggregateFunction(AggregateFunction::new_udf(
        grouping_udaf(),
        arguments,
        false,
        None,
        vec![],
        None,
    ));
    let grouped_by = Expr::Column(Column::from_name(grouping.schema_name().to_string()));
    aggregates.push(grouping);
    let real_rows = Expr::Column(Column::from_name(REAL_ROWS)).gt(lit(0i64));
    let empty_set = grouped_by.eq(lit(all_bits));
    LogicalPlanBuilder::from(with_padding_row(Arc::unwrap_or_clone(aggregate.input))?)
        .aggregate(aggregate.group_expr, aggregates)?
        .filter(real_rows.or(empty_set))?
        .project(output)?
        .build()
}

/// `input` with a `PAD` column, false, and one more row of NULLs where it is true.
fn with_padding_row(input: LogicalPlan) -> datafusion::common::Result<LogicalPlan> {
    let schema = Arc::clone(input.schema());
    let mut real: Vec<Expr> = schema.columns().into_iter().map(Expr::Column).collect();
    real.push(lit(false).alias(PAD));
    let mut padding: Vec<Expr> = schema
        .iter()
        .map(|(qualifier, field)| {
            cast(lit(ScalarValue::Null), field.data_type().clone())
                .alias_qualified(qualifier.cloned(), field.name())
        })
        .collect();
    padding.push(lit(true).alias(PAD));
    let padding_row = LogicalPlanBuilder::empty(true).project(padding)?.build()?;
    let both = LogicalPlanBuilder::from(input)
        .project(real)?
        .union(padding_row)?
        .build()?;
    // The union's columns lose their tables' names, which the grouping refers to.
    let mut requalified: Vec<Expr> = schema
        .iter()
        .zip(both.schema().columns())
        .map(|((qualifier, field), column)| {
            Expr::Column(column).alias_qualified(qualifier.cloned(), field.name())
        })
        .collect();
    requalified.push(Expr::Column(Column::from_name(PAD)));
    LogicalPlanBuilder::from(both).project(requalified)?.build()
}

/// An aggregate of the statement that leaves the padding row out, under its own name.
fn without_padding(expr: Expr, not_pad: &Expr) -> datafusion::common::Result<Expr> {
    let name = expr.schema_name().to_string();
    let filtered = expr.transform_down(|e| match e {
        Expr::AggregateFunction(mut function) if function.func.name() != "grouping" => {
            function.params.filter = Some(Box::new(match function.params.filter.take() {
                Some(filter) => filter.as_ref().clone().and(not_pad.clone()),
                None => not_pad.clone(),
            }));
            Ok(Transformed::new(
                Expr::AggregateFunction(function),
                true,
                datafusion::common::tree_node::TreeNodeRecursion::Jump,
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
