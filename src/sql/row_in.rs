//! A row of values compared with a subquery's rows, `(a, b) IN (SELECT x, y FROM …)` and
//! `NOT IN`, which PostgreSQL, Spark, Trino and DuckDB take and DataFusion 53 refuses ("Too
//! many columns! The subquery should only return one column"), with SQL's NULLs as
//! PostgreSQL has them (DuckDB answers unknown for any row holding a NULL). Each becomes `EXISTS`
//! over the subquery's rows, named `__floe_row_in_N (__floe_c1, …)` so that the row's
//! expressions still name the outer query's columns:
//!
//! * as a condition a `WHERE` or `HAVING` only filters by (alone or under `AND`), where
//!   unknown and false both drop the row: `IN` is `EXISTS (… WHERE __floe_c1 = a AND …)`,
//!   a semi join on the values; `NOT IN` is `NOT EXISTS (… WHERE (__floe_c1 = a) IS NOT
//!   FALSE AND …)`: a row is kept when every row of the subquery differs in a value
//!   known on both sides, as SQL's `NOT IN` with NULLs keeps it. No equality key, so it
//!   runs as a nested loop join.
//! * anywhere else, with SQL's three values: true if a row equals, else unknown if a row
//!   could equal (a NULL on either side where the others equal), else false.
//!
//! A single value's `NOT IN (subquery)` inside a filter condition but not one of its
//! conjuncts (under `OR`), and its `IN` under a negation or inside another expression (a
//! `CASE`, `IS FALSE`), also get SQL's three values here: DataFusion 53 runs them as mark
//! joins, true or false only, so `s NOT IN (…) OR k < 2` kept rows whose `s` is NULL. As
//! a conjunct (`IN`, `NOT IN`, `NOT (… IN …)`), and an `IN` under `AND`/`OR` only (where
//! an unknown taken for false drops the row all the same), they stay DataFusion's joins.

use std::ops::ControlFlow;

use datafusion::sql::parser::Statement as DfStatement;
use datafusion::sql::sqlparser::ast::{
    BinaryOperator, Expr, GroupByExpr, Query, Select, SelectItem, SetExpr, Statement,
    UnaryOperator, Value, VisitMut, VisitorMut, visit_expressions, visit_expressions_mut,
};

use super::outer_names::{same_name, tables_of_select};
use super::parse::{parse, selects_mut, sql_statement_mut};
use crate::error::{FloeError, Result};

/// Rewrites every row `IN` subquery of `statement` (see the module documentation).
pub(super) fn row_in_as_exists(statement: &mut DfStatement) -> Result<()> {
    let Some(statement) = sql_statement_mut(statement) else {
        return Ok(());
    };
    let mut rewriter = Rewriter { subqueries: 0 };
    if let ControlFlow::Break(e) = statement.visit(&mut rewriter) {
        return Err(e);
    }
    let flow = visit_expressions_mut(statement, |expr| match rewriter.anywhere(expr) {
        Ok(()) => ControlFlow::Continue(()),
        Err(e) => ControlFlow::Break(e),
    });
    match flow {
        ControlFlow::Break(e) => Err(e),
        ControlFlow::Continue(()) => Ok(()),
    }
}

struct Rewriter {
    /// Subqueries named so far, for the next name.
    subqueries: usize,
}

impl VisitorMut for Rewriter {
    type Break = FloeError;

    fn pre_visit_query(&mut self, query: &mut Query) -> ControlFlow<FloeError> {
        match self.filters_of(&mut query.body) {
            Ok(()) => ControlFlow::Continue(()),
            Err(e) => ControlFlow::Break(e),
        }
    }

    fn pre_visit_statement(&mut self, statement: &mut Statement) -> ControlFlow<FloeError> {
        let selection = match statement {
            Statement::Delete(delete) => delete.selection.as_mut(),
            Statement::Update(update) => update.selection.as_mut(),
            _ => None,
        };
        // Not only a filter: a rewrite of data files keeps the rows where the condition
        // is not true, and a mark join's false for unknown kept too few there (`NOT (k
        // IN (…))` deleted the rows whose `k` is NULL). Only an `IN` under `AND`/`OR`
        // stays a mark join.
        match selection.map_or(Ok(()), |condition| self.monotone(condition)) {
            Ok(()) => ControlFlow::Continue(()),
            Err(e) => ControlFlow::Break(e),
        }
    }
}

impl Rewriter {
    /// The `WHERE` and `HAVING` conditions of the selects of `body`.
    fn filters_of(&mut self, body: &mut SetExpr) -> Result<()> {
        for select in selects_mut(body) {
            for condition in [&mut select.selection, &mut select.having]
                .into_iter()
                .flatten()
            {
                self.filter(condition)?;
            }
        }
        Ok(())
    }

    /// Rewrites the row `IN`s of a condition that only filters, as far as unknown and
    /// false still mean the same (through `AND`).
    fn filter(&mut self, condition: &mut Expr) -> Result<()> {
        match condition {
            Expr::BinaryOp {
                left,
                op: BinaryOperator::And,
                right,
            } => {
                self.filter(left)?;
                self.filter(right)
            }
            Expr::Nested(inner) => self.filter(inner),
            Expr::InSubquery {
                expr,
                subquery,
                negated,
            } => {
                let Some(values) = row(expr) else {
                    return Ok(());
                };
                let text = if *negated {
                    format!("NOT {}", self.exists(subquery, &values, could_equal))
                } else {
                    self.exists(subquery, &values, equal)
                };
                *condition = parsed_expr(&text)?;
                Ok(())
            }
            // DataFusion's null-aware anti join runs a `NOT IN` conjunct right.
            Expr::UnaryOp {
                op: UnaryOperator::Not,
                expr: negated,
            } if is_single_in(negated) => Ok(()),
            other => self.monotone(other),
        }
    }

    /// Under `AND` and `OR` only, a single value's `IN` may stay a mark join: an unknown
    /// taken for false drops the row all the same. Under a negation or inside another
    /// expression it may not (see [`Self::single_ins_within`]).
    fn monotone(&mut self, part: &mut Expr) -> Result<()> {
        match part {
            Expr::BinaryOp {
                left,
                op: BinaryOperator::And | BinaryOperator::Or,
                right,
            } => {
                self.monotone(left)?;
                self.monotone(right)
            }
            Expr::Nested(inner) => self.monotone(inner),
            Expr::InSubquery {
                expr,
                negated: false,
                ..
            } if row(expr).is_none() => Ok(()),
            other => self.single_ins_within(other),
        }
    }

    /// Rewrites the single-value `IN` subqueries of a condition part that is not a
    /// conjunct (under `OR`, `CASE`, …) with SQL's three values. There DataFusion 53 runs
    /// them as mark joins, which know only true and false: `s NOT IN (…) OR k < 2` kept
    /// the rows whose `s` is NULL (PostgreSQL: unknown, so not kept).
    fn single_ins_within(&mut self, part: &mut Expr) -> Result<()> {
        let flow = visit_expressions_mut(part, |expr| {
            let Expr::InSubquery {
                expr: value,
                subquery,
                negated,
            } = expr
            else {
                return ControlFlow::Continue(());
            };
            if row(value).is_some() {
                return ControlFlow::Continue(());
            }
            let is_in = format!(
                "CASE WHEN ({value}) IN ({subquery}) THEN TRUE \
                 WHEN ({value}) IS NULL AND EXISTS ({subquery}) THEN NULL \
                 WHEN {} THEN NULL ELSE FALSE END",
                self.holds_null(subquery)
            );
            let text = if *negated {
                format!("(NOT {is_in})")
            } else {
                format!("({is_in})")
            };
            match parsed_expr(&text) {
                Ok(rewritten) => {
                    *expr = rewritten;
                    ControlFlow::Continue(())
                }
                Err(e) => ControlFlow::Break(e),
            }
        });
        match flow {
            ControlFlow::Break(e) => Err(e),
            ControlFlow::Continue(()) => Ok(()),
        }
    }

    /// Rewrites `expr` if it is a row `IN`, with SQL's three values.
    fn anywhere(&mut self, expr: &mut Expr) -> Result<()> {
        let Expr::InSubquery {
            expr: compared,
            subquery,
            negated,
        } = expr
        else {
            return Ok(());
        };
        let Some(values) = row(compared) else {
            return Ok(());
        };
        let is_in = format!(
            "CASE WHEN {} THEN TRUE WHEN {} THEN NULL ELSE FALSE END",
            self.exists(subquery, &values, equal),
            self.exists(subquery, &values, could_equal)
        );
        let text = if *negated {
            format!("(NOT {is_in})")
        } else {
            format!("({is_in})")
        };
        *expr = parsed_expr(&text)?;
        Ok(())
    }

    /// A name for the next subquery's rows.
    fn next_name(&mut self) -> String {
        self.subqueries += 1;
        format!("__floe_row_in_{}", self.subqueries)
    }

    /// `EXISTS` of a NULL among the values of `subquery` (of one column).
    fn holds_null(&mut self, subquery: &Query) -> String {
        if let Some((select, columns)) = plain_columns(subquery)
            && let [column] = columns.as_slice()
        {
            let rows = rows_where(select, Expr::IsNull(Box::new((*column).clone())));
            return format!("EXISTS ({rows})");
        }
        let name = self.next_name();
        format!(
            "EXISTS (SELECT 1 FROM ({subquery}) AS {name} (__floe_c1) WHERE {name}.__floe_c1 IS NULL)"
        )
    }

    /// `EXISTS` over the rows of `subquery` of which `holds` holds for each column and
    /// its value.
    fn exists(
        &mut self,
        subquery: &Query,
        values: &[Expr],
        holds: fn(&str, &Expr) -> String,
    ) -> String {
        if let Some((select, columns)) = plain_columns(subquery)
            && columns.len() == values.len()
            && values.iter().all(|v| reads_only_outer_tables(v, select))
        {
            let conditions: Vec<String> = (columns.iter().zip(values))
                .map(|(column, value)| holds(&column.to_string(), value))
                .collect();
            if let Ok(condition) = parsed_expr(&conditions.join(" AND ")) {
                return format!("EXISTS ({})", rows_where(select, condition));
            }
        }
        let name = self.next_name();
        let columns: Vec<String> = (1..=values.len()).map(|i| format!("__floe_c{i}")).collect();
        let conditions: Vec<String> = columns
            .iter()
            .zip(values)
            .map(|(column, value)| holds(&format!("{name}.{column}"), value))
            .collect();
        format!(
            "EXISTS (SELECT 1 FROM ({subquery}) AS {name} ({}) WHERE {})",
            columns.join(", "),
            conditions.join(" AND ")
        )
    }
}

/// The select and columns of a plain `SELECT c1, … FROM … [WHERE …]` of columns (no
/// grouping, `DISTINCT` or `LIMIT`): its rows can be filtered further in its own `WHERE`,
/// where a correlated one keeps its references to the outer query and DataFusion joins by
/// them (under a derived table they are not found: "No field named __floe_row_in_1.s").
fn plain_columns(subquery: &Query) -> Option<(&Select, Vec<&Expr>)> {
    let SetExpr::Select(select) = subquery.body.as_ref() else {
        return None;
    };
    let plain_query = subquery.with.is_none()
        && subquery.limit_clause.is_none()
        && subquery.fetch.is_none()
        && subquery.pipe_operators.is_empty();
    let plain_select = select.distinct.is_none()
        && select.top.is_none()
        && select.having.is_none()
        && select.qualify.is_none()
        && !select.from.is_empty()
        && matches!(&select.group_by, GroupByExpr::Expressions(keys, modifiers) if keys.is_empty() && modifiers.is_empty());
    if !(plain_query && plain_select) {
        return None;
    }
    let columns = select.projection.iter().map(|item| match item {
        SelectItem::UnnamedExpr(column) | SelectItem::ExprWithAlias { expr: column, .. }
            if matches!(column, Expr::Identifier(_) | Expr::CompoundIdentifier(_)) =>
        {
            Some(column)
        }
        _ => None,
    });
    Some((select, columns.collect::<Option<Vec<_>>>()?))
}

/// `select`'s rows where `condition` also holds, as `SELECT 1 FROM … WHERE …`.
fn rows_where(select: &Select, condition: Expr) -> Select {
    let mut rows = select.clone();
    rows.projection = vec![SelectItem::UnnamedExpr(Expr::value(Value::Number(
        "1".into(),
        false,
    )))];
    rows.selection = Some(match rows.selection.take() {
        Some(own) => Expr::BinaryOp {
            left: Box::new(Expr::Nested(Box::new(own))),
            op: BinaryOperator::And,
            right: Box::new(Expr::Nested(Box::new(condition))),
        },
        None => condition,
    });
    rows
}

/// Whether `value` reads only tables that are not among `select`'s own, each by a
/// qualified name: written inside the subquery's `WHERE`, it still names the outer row.
fn reads_only_outer_tables(value: &Expr, select: &Select) -> bool {
    let own = tables_of_select(select);
    let mut outer_only = true;
    let _ = visit_expressions(value, |e| {
        outer_only &= match e {
            Expr::Identifier(_)
            | Expr::Subquery(_)
            | Expr::Exists { .. }
            | Expr::InSubquery { .. } => false,
            Expr::CompoundIdentifier(parts) => parts.first().is_some_and(|table| {
                !own.iter()
                    .any(|w| w.last().is_some_and(|last| same_name(last, table)))
            }),
            _ => true,
        };
        ControlFlow::<()>::Continue(())
    });
    outer_only
}

/// Whether `expr` is a single value's `IN` subquery, possibly in parentheses.
fn is_single_in(expr: &Expr) -> bool {
    match expr {
        Expr::Nested(inner) => is_single_in(inner),
        Expr::InSubquery { expr, .. } => row(expr).is_none(),
        _ => false,
    }
}

/// The values of a row of two or more.
fn row(expr: &Expr) -> Option<Vec<Expr>> {
    match expr {
        Expr::Tuple(values) if values.len() > 1 => Some(values.clone()),
        _ => None,
    }
}

fn equal(column: &str, value: &Expr) -> String {
    format!("{column} = ({value})")
}

/// Not known to differ: equal, or NULL on either side.
fn could_equal(column: &str, value: &Expr) -> String {
    format!("({column} = ({value})) IS NOT FALSE")
}

/// `text` parsed as an expression.
fn parsed_expr(text: &str) -> Result<Expr> {
    let not_an_expression = || FloeError::internal(format!("row IN: {text} is not an expression"));
    let DfStatement::Statement(statement) = parse(&format!("SELECT {text}"))? else {
        return Err(not_an_expression());
    };
    let Statement::Query(query) = *statement else {
        return Err(not_an_expression());
    };
    let SetExpr::Select(select) = *query.body else {
        return Err(not_an_expression());
    };
    match select.projection.into_iter().next() {
        Some(SelectItem::UnnamedExpr(expr)) => Ok(expr),
        _ => Err(not_an_expression()),
    }
}
