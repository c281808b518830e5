//! Named windows resolved as PostgreSQL resolves them. DataFusion 53 replaces only a
//! bare `OVER w` in the select list, and ignores the name inside parentheses:
//! `sum(k) OVER (w ROWS 1 PRECEDING)` with `WINDOW w AS (PARTITION BY g ORDER BY k)`
//! summed over the whole input in no order, a silent wrong answer. Floe writes every
//! window that names another (in the select list, `QUALIFY`, the query's `ORDER BY` and
//! other windows' definitions) as the full specification before planning:
//! the named window's `PARTITION BY` and `ORDER BY`, then the referring window's own
//! `ORDER BY` (where the named one has none) and frame. As in PostgreSQL, a referring
//! window may not repeat `PARTITION BY`, nor an `ORDER BY` the named one has, nor copy
//! a named window that has a frame (`OVER w` uses that frame as it is).
//!
//! A window function in `ORDER BY` only (`SELECT k FROM t ORDER BY row_number() OVER
//! (…)`) was left by DataFusion 53 inside the sort, which its physical planner refuses;
//! Floe computes it in a window below the sort and projects it away above.
//!
//! A window over a filter whose subqueries DataFusion 53 turns into mark joins (`IN
//! (…)` under `OR`) kept the columns of the filter's old input while the filter passed
//! the marks on; its common subexpression elimination then refused the plan ("Window
//! schema has wrong number of fields"). A projection of the filter's columns between
//! them drops the marks.

use std::collections::HashMap;
use std::ops::ControlFlow;
use std::sync::Arc;

use datafusion::common::Column;
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::logical_expr::utils::find_window_exprs;
use datafusion::logical_expr::{Expr as PlanExpr, LogicalPlan, LogicalPlanBuilder, Sort, Window};
use datafusion::sql::parser::Statement;
use datafusion::sql::sqlparser::ast::{
    Expr, Ident, NamedWindowDefinition, NamedWindowExpr, Query, Select, SetExpr, VisitMut,
    VisitorMut, WindowSpec, WindowType, visit_expressions_mut,
};

use super::ddl::normalize;
use super::parse::{selects_mut, sql_statement_mut};
use crate::error::{FloeError, Result};

/// `statement` with each reference to a named window replaced by what it names.
pub(super) fn named_windows_resolved(statement: &mut Statement) -> Result<()> {
    let Some(statement) = sql_statement_mut(statement) else {
        return Ok(());
    };
    match statement.visit(&mut NamedWindows) {
        ControlFlow::Break(e) => Err(e),
        ControlFlow::Continue(()) => Ok(()),
    }
}

/// `plan` with a projection of its columns over each filter with subqueries under a
/// window (see the module documentation).
pub(super) fn subquery_filters_under_windows_projected(plan: LogicalPlan) -> Result<LogicalPlan> {
    let plan = plan.transform_up_with_subqueries(|node| match node {
        LogicalPlan::Window(window) if filters_by_subqueries(&window.input) => {
            let columns = window.input.schema().columns();
            let projected = LogicalPlanBuilder::from(Arc::unwrap_or_clone(window.input))
                .project(columns.into_iter().map(PlanExpr::Column))?
                .build()?;
            let window = Window::try_new(window.window_expr, Arc::new(projected))?;
            Ok(Transformed::yes(LogicalPlan::Window(window)))
        }
        other => Ok(Transformed::no(other)),
    })?;
    Ok(plan.data)
}

fn filters_by_subqueries(plan: &LogicalPlan) -> bool {
    let LogicalPlan::Filter(filter) = plan else {
        return false;
    };
    let is_subquery = |e: &PlanExpr| {
        Ok(matches!(
            e,
            PlanExpr::InSubquery(_) | PlanExpr::Exists(_) | PlanExpr::ScalarSubquery(_)
        ))
    };
    filter.predicate.exists(is_subquery).unwrap_or(true)
}

/// `plan` with the window functions of each sort computed below it.
pub(super) fn windows_in_sorts_computed(plan: LogicalPlan) -> Result<LogicalPlan> {
    let plan = plan.transform_up_with_subqueries(|node| match node {
        LogicalPlan::Sort(sort) => {
            let windows = find_window_exprs(sort.expr.iter().map(|s| &s.expr));
            if windows.is_empty() {
                Ok(Transformed::no(LogicalPlan::Sort(sort)))
            } else {
                sorted_by_computed_windows(sort, windows).map(Transformed::yes)
            }
        }
        other => Ok(Transformed::no(other)),
    })?;
    Ok(plan.data)
}

/// `sort` over its input with `windows` added as columns, then only the input's columns.
fn sorted_by_computed_windows(
    sort: Sort,
    windows: Vec<PlanExpr>,
) -> datafusion::common::Result<LogicalPlan> {
    let columns: Vec<PlanExpr> = sort
        .input
        .schema()
        .columns()
        .into_iter()
        .map(PlanExpr::Column)
        .collect();
    let input = Arc::unwrap_or_clone(sort.input);
    let with_windows = LogicalPlanBuilder::window_plan(input, windows.clone())?;
    let order = sort
        .expr
        .into_iter()
        .map(|mut key| {
            let expr = std::mem::take(&mut key.expr).transform_down(|e| {
                Ok(if windows.contains(&e) {
                    Transformed::yes(PlanExpr::Column(Column::from_name(
                        e.schema_name().to_string(),
                    )))
                } else {
                    Transformed::no(e)
                })
            })?;
            key.expr = expr.data;
            Ok(key)
        })
        .collect::<datafusion::common::Result<Vec<_>>>()?;
    LogicalPlanBuilder::from(with_windows)
        .sort_with_limit(order, sort.fetch)?
        .project(columns)?
        .build()
}

struct NamedWindows;

impl VisitorMut for NamedWindows {
    type Break = FloeError;

    /// After the query's subqueries, which resolve their own windows first: a window
    /// name does not reach into a subquery.
    fn post_visit_query(&mut self, query: &mut Query) -> ControlFlow<FloeError> {
        let result = match query.body.as_mut() {
            SetExpr::Select(select) => {
                resolve_select(select).and_then(|windows| match &mut query.order_by {
                    Some(order_by) => resolve_in(order_by, &windows),
                    None => Ok(()),
                })
            }
            body => selects_mut(body)
                .into_iter()
                .try_for_each(|select| resolve_select(select).map(|_| ())),
        };
        match result {
            Ok(()) => ControlFlow::Continue(()),
            Err(e) => ControlFlow::Break(e),
        }
    }
}

/// Resolves the windows of `select`'s own expressions; returns its named windows, which
/// its query's `ORDER BY` may also name.
fn resolve_select(select: &mut Select) -> Result<Windows> {
    let windows = Windows::of(&select.named_window)?;
    resolve_in(&mut select.projection, &windows)?;
    if let Some(qualify) = &mut select.qualify {
        resolve_in(qualify, &windows)?;
    }
    if let Some(having) = &mut select.having {
        resolve_in(having, &windows)?;
    }
    for NamedWindowDefinition(_, definition) in &mut select.named_window {
        if let NamedWindowExpr::WindowSpec(spec) = definition {
            *spec = windows.resolved(spec)?;
        }
    }
    Ok(windows)
}

/// Replaces the windows of the calls in `node` that name another.
fn resolve_in<V: VisitMut>(node: &mut V, windows: &Windows) -> Result<()> {
    let mut failure = None;
    let _ = visit_expressions_mut(node, |expr| {
        if let Expr::Function(call) = expr {
            let resolved = match &call.over {
                Some(WindowType::NamedWindow(name)) => Some(windows.named(name)),
                Some(WindowType::WindowSpec(spec)) if spec.window_name.is_some() => {
                    Some(windows.resolved(spec))
                }
                _ => None,
            };
            match resolved {
                Some(Ok(spec)) => call.over = Some(WindowType::WindowSpec(spec)),
                Some(Err(e)) => {
                    failure = Some(e);
                    return ControlFlow::Break(());
                }
                None => {}
            }
        }
        ControlFlow::Continue(())
    });
    failure.map_or(Ok(()), Err)
}

/// A select's `WINDOW` clause by normalized name.
struct Windows(HashMap<String, NamedWindowExpr>);

impl Windows {
    fn of(definitions: &[NamedWindowDefinition]) -> Result<Self> {
        let mut windows = HashMap::new();
        for NamedWindowDefinition(name, definition) in definitions {
            if windows
                .insert(normalize(name), definition.clone())
                .is_some()
            {
                return Err(FloeError::invalid(format!(
                    "window \"{}\" is already defined",
                    name.value
                )));
            }
        }
        Ok(Self(windows))
    }

    /// The full specification of the window called `name`.
    fn named(&self, name: &Ident) -> Result<WindowSpec> {
        self.named_within(name, 0)
    }

    fn named_within(&self, name: &Ident, depth: usize) -> Result<WindowSpec> {
        if depth > self.0.len() {
            return Err(FloeError::invalid(format!(
                "window \"{}\" is defined in terms of itself",
                name.value
            )));
        }
        match self.0.get(&normalize(name)) {
            None => Err(FloeError::invalid(format!(
                "window \"{}\" does not exist",
                name.value
            ))),
            Some(NamedWindowExpr::NamedWindow(other)) => self.named_within(other, depth + 1),
            Some(NamedWindowExpr::WindowSpec(spec)) => self.resolved_within(spec, depth + 1),
        }
    }

    /// `spec` with the window it names (if any) copied into it.
    fn resolved(&self, spec: &WindowSpec) -> Result<WindowSpec> {
        self.resolved_within(spec, 0)
    }

    fn resolved_within(&self, spec: &WindowSpec, depth: usize) -> Result<WindowSpec> {
        let Some(name) = &spec.window_name else {
            return Ok(spec.clone());
        };
        let base = self.named_within(name, depth)?;
        let refused = |what: &str| {
            Err(FloeError::invalid(format!(
                "cannot {what} of window \"{}\"",
                name.value
            )))
        };
        if !spec.partition_by.is_empty() {
            return refused("override PARTITION BY clause");
        }
        if !spec.order_by.is_empty() && !base.order_by.is_empty() {
            return refused("override ORDER BY clause");
        }
        if base.window_frame.is_some() {
            return Err(FloeError::invalid(format!(
                "cannot copy window \"{}\" because it has a frame clause",
                name.value
            )));
        }
        Ok(WindowSpec {
            window_name: None,
            partition_by: base.partition_by,
            order_by: if spec.order_by.is_empty() {
                base.order_by
            } else {
                spec.order_by.clone()
            },
            window_frame: spec.window_frame.clone(),
        })
    }
}
