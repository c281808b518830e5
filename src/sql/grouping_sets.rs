//! Grouping sets as SQL answers them.
//!
//! The empty set over no rows. SQL gives `GROUP BY ROLLUP (g)`, `CUBE (g)` and
//! `GROUPING SETS ((g), ())` a grand total row even where no row is grouped (`count(*)`
//! 0, `sum(x)` NULL), as a query without `GROUP BY` has; DataFusion 53 answers no row.
//!
//! Floe adds one padding row to the aggregate's input, marked by a column of its own,
//! which every aggregate leaves out (`FILTER (WHERE NOT pad)`): it makes the empty set's
//! group exist. A group of another set that holds nothing but the padding row is
//! dropped above the aggregate, by a count of the real rows and `grouping(…)` of all
//! the grouping columns (the empty set's has every bit set).
//!
//! A set written twice (`GROUP BY a, ROLLUP (a, b)` writes `(a)` twice) answers its
//! groups twice; DataFusion 53 merged them, each counting its rows twice. The aggregate
//! runs over the distinct sets, and its rows are joined, by that `grouping(…)` value,
//! with a row for each time their set is written. `GROUP BY ()` (which DataFusion
//! cannot parse) is `GROUPING SETS (())`, an aggregate without grouping.

use std::ops::ControlFlow;
use std::sync::Arc;

use datafusion::common::JoinType;
use datafusion::common::tree_node::Transformed;
use datafusion::common::{Column, ScalarValue};
use datafusion::functions_aggregate::count::count_udaf;
use datafusion::functions_aggregate::grouping::grouping_udaf;
use datafusion::logical_expr::expr::AggregateFunction;
use datafusion::logical_expr::utils::grouping_set_to_exprlist;
use datafusion::logical_expr::{
    Aggregate, Expr, GroupingSet, LogicalPlan, LogicalPlanBuilder, cast, col, lit,
};

use datafusion::sql::parser::Statement;
use datafusion::sql::sqlparser::ast::{self, GroupByExpr, Query, VisitMut, VisitorMut};

use super::expr_rewrite::aggregates_filtered;
use super::parse::{selects_mut, sql_statement_mut};
use crate::error::Result;

/// Marks the padding row.
const PAD: &str = "__floe_pad";
/// The real rows of a group.
const REAL_ROWS: &str = "__floe_real_rows";
/// The `grouping(…)` value of a set, and a copy of its rows.
const SET: &str = "__floe_set";
const COPY: &str = "__floe_copy";
/// A `CUBE` of column lists is written out as its sets up to this many lists.
const MAX_CUBE_ITEMS: usize = 12;

/// `grouping(…)` is an INT: the bits of at most 31 columns (one of them twice).
const MAX_GROUPING_COLUMNS: usize = 30;

/// `statement` with `GROUP BY ()` (which DataFusion 53 cannot plan) as `GROUP BY
/// GROUPING SETS (())`, and a `()` beside other grouping expressions dropped (it adds
/// nothing to their groups); a `ROLLUP` or `CUBE` of a column list (`ROLLUP ((a, b),
/// c)`, which DataFusion refuses) as the grouping sets it names.
pub(super) fn empty_groupings_as_sets(statement: &mut Statement) {
    let Some(statement) = sql_statement_mut(statement) else {
        return;
    };
    let _ = statement.visit(&mut EmptyGroupings);
}

struct EmptyGroupings;

impl VisitorMut for EmptyGroupings {
    type Break = ();

    fn pre_visit_expr(&mut self, expr: &mut ast::Expr) -> ControlFlow<()> {
        let sets = match expr {
            ast::Expr::Rollup(items) if items.iter().any(|i| i.len() > 1) => (0..=items.len())
                .rev()
                .map(|n| items[..n].concat())
                .collect(),
            ast::Expr::Cube(items)
                if items.iter().any(|i| i.len() > 1) && items.len() <= MAX_CUBE_ITEMS =>
            {
                (0..1usize << items.len())
                    .rev()
                    .map(|mask| {
                        let held = items
                            .iter()
                            .enumerate()
                            .filter(|(i, _)| mask & (1 << i) != 0);
                        held.flat_map(|(_, item)| item.clone()).collect()
                    })
                    .collect()
            }
            _ => return ControlFlow::Continue(()),
        };
        *expr = ast::Expr::GroupingSets(sets);
        ControlFlow::Continue(())
    }

    fn pre_visit_query(&mut self, query: &mut Query) -> ControlFlow<()> {
        for select in selects_mut(&mut query.body) {
            let GroupByExpr::Expressions(expressions, _) = &mut select.group_by else {
                continue;
            };
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
/// grand total over no rows too, and each whose sets repeat answering a repeated
/// set's groups once per repetition; `GROUPING SETS (())` alone is an aggregate
/// without grouping.
pub(super) fn with_sql_grouping_sets(plan: LogicalPlan) -> Result<LogicalPlan> {
    let plan = plan.transform_up_with_subqueries(|node| match node {
        LogicalPlan::Aggregate(aggregate) => match Grouping::of(&aggregate) {
            Some(grouping) if grouping.columns.is_empty() => {
                grouping.without_columns(aggregate).map(Transformed::yes)
            }
            Some(grouping) => grouping.plan(aggregate).map(Transformed::yes),
            None => Ok(Transformed::no(LogicalPlan::Aggregate(aggregate))),
        },
        other => Ok(Transformed::no(other)),
    })?;
    Ok(plan.data)
}

/// An aggregate's grouping sets, where SQL and DataFusion 53 answer differently.
struct Grouping {
    /// The distinct grouping columns.
    columns: Vec<Expr>,
    /// The distinct sets (by the columns they hold), each with how often it is written.
    sets: Vec<(Vec<usize>, usize)>,
}

impl Grouping {
    fn of(aggregate: &Aggregate) -> Option<Self> {
        let [Expr::GroupingSet(set)] = aggregate.group_expr.as_slice() else {
            return None;
        };
        let columns: Vec<Expr> = grouping_set_to_exprlist(&aggregate.group_expr)
            .ok()?
            .into_iter()
            .cloned()
            .collect();
        let mut sets: Vec<(Vec<usize>, usize)> = Vec::new();
        for written in expanded(set) {
            let mut held: Vec<usize> = written
                .iter()
                .filter_map(|e| columns.iter().position(|c| c == *e))
                .collect();
            held.sort_unstable();
            held.dedup();
            match sets.iter_mut().find(|(other, _)| *other == held) {
                Some((_, times)) => *times += 1,
                None => sets.push((held, 1)),
            }
        }
        let grouping = Self { columns, sets };
        let differs = grouping.has_empty_set() || grouping.repeats();
        (differs && grouping.columns.len() <= MAX_GROUPING_COLUMNS).then_some(grouping)
    }

    fn has_empty_set(&self) -> bool {
        self.sets.iter().any(|(held, _)| held.is_empty())
    }

    fn repeats(&self) -> bool {
        self.sets.iter().any(|(_, times)| *times > 1)
    }

    /// `GROUPING SETS ((), …)`: the aggregate without grouping, its one row repeated
    /// as often as `()` is written.
    fn without_columns(self, aggregate: Aggregate) -> datafusion::common::Result<LogicalPlan> {
        let output = visible_columns(&aggregate);
        let plain = LogicalPlanBuilder::from(Arc::unwrap_or_clone(aggregate.input))
            .aggregate(Vec::<Expr>::new(), aggregate.aggr_expr)?;
        match self.sets.as_slice() {
            [(_, times)] if *times > 1 => {
                plain.cross_join(self.copies()?)?.project(output)?.build()
            }
            _ => plain.build(),
        }
    }

    /// The aggregate computed over its distinct sets (and a padding row, for the empty
    /// set), its rows then dropped or repeated as SQL answers them.
    fn plan(self, aggregate: Aggregate) -> datafusion::common::Result<LogicalPlan> {
        let output = visible_columns(&aggregate);
        let group_expr = match self.repeats() {
            true => vec![Expr::GroupingSet(GroupingSet::GroupingSets(
                self.sets
                    .iter()
                    .map(|(held, _)| held.iter().map(|&i| self.columns[i].clone()).collect())
                    .collect(),
            ))],
            false => aggregate.group_expr,
        };
        let (input, mut aggregates) = match self.has_empty_set() {
            true => padded(aggregate.input, aggregate.aggr_expr)?,
            false => (Arc::unwrap_or_clone(aggregate.input), aggregate.aggr_expr),
        };
        // Unaliased, or DataFusion would not compute it; the first column once more keeps
        // its name apart from the statement's own `grouping(…)`.
        let mut arguments = self.columns.clone();
        arguments.push(self.columns[0].clone());
        let grouping = Expr::AggregateFunction(AggregateFunction::new_udf(
            grouping_udaf(),
            arguments,
            false,
            None,
            vec![],
            None,
        ));
        let grouped_by = Column::from_name(grouping.schema_name().to_string());
        aggregates.push(grouping);
        let mut plan = LogicalPlanBuilder::from(input).aggregate(group_expr, aggregates)?;
        if self.has_empty_set() {
            let real_rows = Expr::Column(Column::from_name(REAL_ROWS)).gt(lit(0i64));
            let empty_set = Expr::Column(grouped_by.clone()).eq(lit(self.grouping_value(&[])));
            plan = plan.filter(real_rows.or(empty_set))?;
        }
        if self.repeats() {
            let copies = self.copies()?;
            plan = plan.join(
                copies,
                JoinType::Inner,
                (vec![grouped_by], vec![Column::from_name(SET)]),
                None,
            )?;
        }
        plan.project(output)?.build()
    }

    /// What `grouping(columns…, first column)` answers for the rows of the set `held`:
    /// a bit for each argument, the last the lowest, set where it is not grouped by.
    fn grouping_value(&self, held: &[usize]) -> i32 {
        let arguments = (0..self.columns.len()).chain([0]);
        arguments.fold(0, |value, i| (value << 1) | i32::from(!held.contains(&i)))
    }

    /// A row for each time each set is written: `(SET, copy)`.
    fn copies(&self) -> datafusion::common::Result<LogicalPlan> {
        let rows: Vec<Vec<Expr>> = self
            .sets
            .iter()
            .flat_map(|(held, times)| {
                let value = self.grouping_value(held);
                (0..*times as i64).map(move |copy| vec![lit(value), lit(copy)])
            })
            .collect();
        LogicalPlanBuilder::values(rows)?
            .project([col("column1").alias(SET), col("column2").alias(COPY)])?
            .build()
    }
}

/// The columns of `aggregate` that the nodes above may read: DataFusion computes
/// `grouping(…)` above an aggregate from its grouping id, which no node above reads.
fn visible_columns(aggregate: &Aggregate) -> Vec<Expr> {
    aggregate
        .schema
        .columns()
        .into_iter()
        .filter(|column| column.name != Aggregate::INTERNAL_GROUPING_ID)
        .map(Expr::Column)
        .collect()
}

/// The sets a grouping set names, as written (repeats kept).
fn expanded(set: &GroupingSet) -> Vec<Vec<&Expr>> {
    match set {
        GroupingSet::Rollup(exprs) => (0..=exprs.len())
            .rev()
            .map(|n| exprs[..n].iter().collect())
            .collect(),
        GroupingSet::Cube(exprs) => (0..1usize << exprs.len())
            .map(|mask| {
                let held = exprs
                    .iter()
                    .enumerate()
                    .filter(|(i, _)| mask & (1 << i) != 0);
                held.map(|(_, e)| e).collect()
            })
            .collect(),
        GroupingSet::GroupingSets(sets) => sets.iter().map(|s| s.iter().collect()).collect(),
    }
}

/// The aggregate's input with a padding row, and its aggregates leaving that row out
/// and counting the real rows (`REAL_ROWS`).
fn padded(
    input: Arc<LogicalPlan>,
    aggregates: Vec<Expr>,
) -> datafusion::common::Result<(LogicalPlan, Vec<Expr>)> {
    let not_pad = !Expr::Column(Column::from_name(PAD));
    let mut aggregates: Vec<Expr> = aggregates
        .into_iter()
        .map(|expr| aggregates_filtered(expr, &not_pad))
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
    Ok((with_padding_row(Arc::unwrap_or_clone(input))?, aggregates))
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
