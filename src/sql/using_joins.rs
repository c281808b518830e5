//! The merged column of a `RIGHT` or `FULL` join `USING (k)` (or `NATURAL`) is SQL's
//! `COALESCE(left.k, right.k)`: a row only the right side has still has its `k`.
//! DataFusion 53 takes the left side's `k`, NULL on such rows (apache/datafusion#22881),
//! so `SELECT k`, `SELECT *`, `GROUP BY k` and the joins above answered NULL.
//!
//! A projection over each such join gives the left side's column that value, under the
//! same name, so that everything the planner resolved to it (the merged column) sees it.
//! Writing the left column explicitly (`a.k`) then also gives the merged value, where
//! PostgreSQL answers NULL on right-only rows.
//!
//! DataFusion also refuses the merged column in a `WHERE` clause ("ambiguous reference");
//! there it is qualified before planning, as the left side's.

use std::collections::HashMap;
use std::ops::ControlFlow;
use std::sync::Arc;

use datafusion::common::Column;
use datafusion::common::tree_node::{Transformed, TreeNode, TreeNodeRecursion};
use datafusion::functions::core::expr_fn::coalesce;
use datafusion::logical_expr::{
    Expr, ExprSchemable, Join, JoinConstraint, JoinType, LogicalPlan, Projection, cast,
};

use datafusion::sql::parser::Statement;
use datafusion::sql::sqlparser::ast::{
    Expr as SqlExpr, Ident, JoinConstraint as SqlJoinConstraint, JoinOperator, Query, Select,
    SelectItem, SetExpr, Statement as SqlStatement, TableFactor, VisitMut, VisitorMut,
};

use super::ddl::normalize;
use super::parse::{selects_mut, sql_statement_mut};
use crate::error::Result;

/// `plan` with the merged columns of right and full `USING` joins coalesced.
pub(super) fn with_merged_using_columns(plan: LogicalPlan) -> Result<LogicalPlan> {
    let plan = plan.transform_up_with_subqueries(|node| match node {
        LogicalPlan::Join(join)
            if join.join_constraint == JoinConstraint::Using
                && matches!(join.join_type, JoinType::Right | JoinType::Full) =>
        {
            merged(join).map(Transformed::yes)
        }
        other => Ok(Transformed::no(other)),
    })?;
    Ok(plan.data)
}

fn merged(join: Join) -> datafusion::error::Result<LogicalPlan> {
    let pairs: Vec<(Column, Expr)> = join
        .on
        .iter()
        .filter_map(|(left, right)| match left {
            Expr::Column(column) => Some((column.clone(), right.clone())),
            _ => None,
        })
        .collect();
    let join = Arc::new(LogicalPlan::Join(join));
    let schema = Arc::clone(join.schema());
    let columns = schema
        .iter()
        .map(|(qualifier, field)| {
            let column = Column::from((qualifier, field));
            let Some((_, right)) = pairs.iter().find(|(left, _)| *left == column) else {
                return Ok(Expr::Column(column));
            };
            let mut value = coalesce(vec![Expr::Column(column), right.clone()]);
            if value.get_type(&schema)? != *field.data_type() {
                value = cast(value, field.data_type().clone());
            }
            Ok(value.alias_qualified(qualifier.cloned(), field.name()))
        })
        .collect::<datafusion::error::Result<Vec<_>>>()?;
    Ok(LogicalPlan::Projection(Projection::try_new(columns, join)?))
}

/// Qualifies the merged columns of `USING` joins where a statement names them in a
/// `WHERE` clause or a later join's `ON` condition (`FROM a JOIN b USING (k) WHERE k =
/// 1`), which DataFusion 53 refuses as an ambiguous reference while it takes them in
/// the select list: `k` becomes the left side's `a.k`, the column the select list's `k`
/// resolves to (and which the projection above holds the merged value in).
pub(super) fn qualify_merged_columns(statement: &mut Statement) {
    if let Some(statement) = sql_statement_mut(statement) {
        let _ = statement.visit(&mut Selects);
    }
}

struct Selects;

impl VisitorMut for Selects {
    type Break = ();

    fn pre_visit_query(&mut self, query: &mut Query) -> ControlFlow<()> {
        selects_mut(&mut query.body)
            .into_iter()
            .for_each(qualify_in_select);
        ControlFlow::Continue(())
    }
}

fn qualify_in_select(select: &mut Select) {
    // The relation owning each merged column of the joins so far, where known: the left
    // side's, where that is one relation or owned the column already.
    let mut merged = HashMap::new();
    for from in &mut select.from {
        let mut single = relation_name(&from.relation);
        for join in &mut from.joins {
            if let Some(SqlJoinConstraint::On(condition)) = constraint_mut(&mut join.join_operator)
            {
                qualify(condition, &merged);
            }
            if let Some(SqlJoinConstraint::Using(columns)) = constraint_mut(&mut join.join_operator)
            {
                for column in columns.iter().filter_map(|c| c.0.last()?.as_ident()) {
                    let key = normalize(column);
                    let owner = merged.get(&key).cloned().or_else(|| single.clone());
                    if let Some(owner) = owner {
                        merged.insert(key, owner);
                    }
                }
            }
            single = None;
        }
    }
    if let Some(selection) = &mut select.selection {
        qualify(selection, &merged);
    }
}

/// `expr` with its unqualified references to `merged` columns qualified, outside the
/// subqueries in it (their names are theirs first).
fn qualify(expr: &mut SqlExpr, merged: &HashMap<String, Vec<Ident>>) {
    if merged.is_empty() {
        return;
    }
    let _ = expr.visit(&mut Unqualified { merged, depth: 0 });
}

struct Unqualified<'a> {
    merged: &'a HashMap<String, Vec<Ident>>,
    depth: usize,
}

impl VisitorMut for Unqualified<'_> {
    type Break = ();

    fn pre_visit_query(&mut self, _query: &mut Query) -> ControlFlow<()> {
        self.depth += 1;
        ControlFlow::Continue(())
    }

    fn post_visit_query(&mut self, _query: &mut Query) -> ControlFlow<()> {
        self.depth -= 1;
        ControlFlow::Continue(())
    }

    fn post_visit_expr(&mut self, expr: &mut SqlExpr) -> ControlFlow<()> {
        if self.depth == 0
            && let SqlExpr::Identifier(ident) = expr
            && let Some(owner) = self.merged.get(&normalize(ident))
        {
            let mut parts = owner.clone();
            parts.push(ident.clone());
            *expr = SqlExpr::CompoundIdentifier(parts);
        }
        ControlFlow::Continue(())
    }
}

/// The name a relation's columns are qualified by: its alias, else a table's name.
fn relation_name(relation: &TableFactor) -> Option<Vec<Ident>> {
    match relation {
        TableFactor::Table {
            alias: Some(alias), ..
        }
        | TableFactor::Derived {
            alias: Some(alias), ..
        } => Some(vec![alias.name.clone()]),
        TableFactor::Table {
            name, alias: None, ..
        } => name.0.iter().map(|part| part.as_ident().cloned()).collect(),
        _ => None,
    }
}

/// For `SELECT * FROM …` over joins that merge columns (`USING`, `NATURAL`), whose
/// columns SQL lists merged ones first: whether each such join, in the order written, is
/// `NATURAL`.
pub(super) fn merging_joins_of_star(statement: &Statement) -> Option<Vec<bool>> {
    let Statement::Statement(statement) = statement else {
        return None;
    };
    let SqlStatement::Query(query) = statement.as_ref() else {
        return None;
    };
    let SetExpr::Select(select) = query.body.as_ref() else {
        return None;
    };
    let [SelectItem::Wildcard(options)] = select.projection.as_slice() else {
        return None;
    };
    let plain_star = options.opt_ilike.is_none()
        && options.opt_exclude.is_none()
        && options.opt_except.is_none()
        && options.opt_replace.is_none()
        && options.opt_rename.is_none();
    let naturals: Vec<bool> = (select.from.iter())
        .flat_map(|from| &from.joins)
        .filter_map(|join| match constraint(&join.join_operator) {
            Some(SqlJoinConstraint::Using(_)) => Some(false),
            Some(SqlJoinConstraint::Natural) => Some(true),
            _ => None,
        })
        .collect();
    (plain_star && !naturals.is_empty()).then_some(naturals)
}

/// `plan`, of `SELECT *` over joins that merge columns (`naturals` as
/// [`merging_joins_of_star`] gives them), with the merged columns first, as SQL (and
/// PostgreSQL, DuckDB, Spark) list them: those of the outermost join first, in the order
/// of its `USING` list (of the left side, for `NATURAL`), then the rest in order.
/// DataFusion 53 keeps each merged column where the left side has it.
pub(super) fn merged_columns_first(plan: LogicalPlan, naturals: &[bool]) -> Result<LogicalPlan> {
    Ok(match plan {
        LogicalPlan::Projection(projection) => {
            let position = |column: &Column| {
                (projection.expr.iter()).position(|e| matches!(e, Expr::Column(c) if c == column))
            };
            // Outermost first: the last join written.
            let mut merged = vec![];
            let mut natural = naturals.iter().rev();
            projection.input.apply(|node| {
                if let LogicalPlan::Join(join) = node
                    && join.join_constraint == JoinConstraint::Using
                {
                    let mut positions: Vec<usize> = (join.on.iter())
                        .filter_map(|(left, _)| match left {
                            Expr::Column(column) => position(column),
                            _ => None,
                        })
                        .collect();
                    if natural.next() == Some(&true) {
                        positions.sort_unstable();
                    }
                    for p in positions {
                        if !merged.contains(&p) {
                            merged.push(p);
                        }
                    }
                }
                Ok(TreeNodeRecursion::Continue)
            })?;
            let others = (0..projection.expr.len()).filter(|p| !merged.contains(p));
            let exprs = (merged.iter().copied().chain(others))
                .map(|p| projection.expr[p].clone())
                .collect();
            LogicalPlan::Projection(Projection::try_new(exprs, projection.input)?)
        }
        plan @ (LogicalPlan::Sort(_) | LogicalPlan::Limit(_)) => {
            let inputs: Vec<LogicalPlan> = plan.inputs().into_iter().cloned().collect();
            let Ok([input]) = <[LogicalPlan; 1]>::try_from(inputs) else {
                return Ok(plan);
            };
            plan.with_new_exprs(
                plan.expressions(),
                vec![merged_columns_first(input, naturals)?],
            )?
        }
        plan => plan,
    })
}

fn constraint(operator: &JoinOperator) -> Option<&SqlJoinConstraint> {
    match operator {
        JoinOperator::Join(c)
        | JoinOperator::Inner(c)
        | JoinOperator::Left(c)
        | JoinOperator::LeftOuter(c)
        | JoinOperator::Right(c)
        | JoinOperator::RightOuter(c)
        | JoinOperator::FullOuter(c) => Some(c),
        _ => None,
    }
}

fn constraint_mut(operator: &mut JoinOperator) -> Option<&mut SqlJoinConstraint> {
    match operator {
        JoinOperator::Join(c)
        | JoinOperator::Inner(c)
        | JoinOperator::Left(c)
        | JoinOperator::LeftOuter(c)
        | JoinOperator::Right(c)
        | JoinOperator::RightOuter(c)
        | JoinOperator::FullOuter(c) => Some(c),
        _ => None,
    }
}
