//! `x IN (subquery)`, `EXISTS (subquery)` and `x > ALL (subquery)` as values of a select
//! list or `GROUP BY` (`SELECT k IN (SELECT …) AS found`, `CASE WHEN EXISTS (…) THEN …`),
//! as PostgreSQL, DuckDB and Trino answer them. DataFusion 53 turns them into joins only in filters
//! (`WHERE`, `HAVING`) and refuses them in a projection ("Physical plan does not support
//! logical expression InSubquery"; those of an aggregate are computed by a projection
//! below it, `src/sql/subqueries_below.rs`). There they become counts of the
//! subquery's rows, scalar subqueries that DataFusion joins (correlated ones by their
//! equalities, as any scalar subquery; by more than equalities,
//! `src/sql/inequality_subqueries.rs` joins them), computed by projections below:
//!
//! * `x IN (S)` is true where S has a row equal to `x`, else unknown where S holds a
//!   NULL, or `x` is NULL and S has rows, else false (SQL's three values);
//! * `EXISTS (S)` is whether S has a row;
//! * `x > ALL (S)`, `x <= ANY (S)`, …: by S's least and greatest values.
//!
//! The value S gives is compared where it is computed, below S's projection, so that the
//! comparison reads the outer query's `x` as resolved and S's own columns.

use std::sync::Arc;

use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::common::{Column, DFSchema, ExprSchema, ScalarValue, Spans};
use datafusion::functions_aggregate::count::count_all;
use datafusion::functions_aggregate::expr_fn::{max, min};
use datafusion::logical_expr::expr::{Exists, InSubquery, SetComparison, SetQuantifier};
use datafusion::logical_expr::expr_rewriter::NamePreserver;
use datafusion::logical_expr::{
    Expr, LogicalPlan, LogicalPlanBuilder, Operator, Projection, Subquery, binary_expr, lit, not,
    when,
};

use super::expr_rewrite::columns_of;
use crate::error::{FloeError, Result};

/// How many scalar subqueries a statement's values may become: each is a join, and
/// planning a chain of joins takes time and stack as it grows (60 took 2.6 s in a debug
/// build). Beyond that they stay as they are, refused by DataFusion.
const MAX_SUBQUERIES: usize = 64;

/// The most scalar subqueries one value becomes (`x > ALL (S)`).
const SUBQUERIES_PER_VALUE: usize = 4;

/// `plan` with the `IN`, `EXISTS`, `ANY` and `ALL` subqueries of its projections computed
/// by scalar subqueries (see the module documentation).
pub(super) fn with_subqueries_as_counts(plan: LogicalPlan) -> Result<LogicalPlan> {
    let mut named = 0;
    let plan = plan.transform_up_with_subqueries(|node| {
        // Every statement passes here: only a node holding such a subquery is rebuilt.
        match node {
            node if !holds_subquery_values(&node) => Ok(Transformed::no(node)),
            LogicalPlan::Projection(projection) => counted_projection(projection, &mut named),
            other => Ok(Transformed::no(other)),
        }
        .map_err(Into::into)
    })?;
    Ok(plan.data)
}

fn is_subquery_value(expr: &Expr) -> bool {
    matches!(
        expr,
        Expr::InSubquery(_) | Expr::Exists(_) | Expr::SetComparison(_)
    )
}

/// Whether `node`'s expressions hold such subqueries.
fn holds_subquery_values(node: &LogicalPlan) -> bool {
    node.expressions()
        .iter()
        .any(|e| e.exists(|e| Ok(is_subquery_value(e))).unwrap_or(false))
}

/// `projection` over others that compute whether each of its subqueries has rows, if
/// it has any; `named` counts the names given to those.
fn counted_projection(
    projection: Projection,
    named: &mut usize,
) -> Result<Transformed<LogicalPlan>> {
    let input = Arc::clone(&projection.input);
    let columns = Arc::clone(input.schema());
    let mut counts = Counts {
        input: &columns,
        below: Vec::new(),
        named,
    };
    let names = NamePreserver::new_for_projection();
    let mut exprs = Vec::with_capacity(projection.expr.len());
    for expr in projection.expr {
        let saved = names.save(&expr);
        let counted = expr.transform_up(|e| counts.of(e).map_err(Into::into))?;
        exprs.push(saved.restore(counted.data));
    }
    if counts.below.is_empty() {
        let unchanged = Projection::try_new_with_schema(exprs, input, projection.schema)?;
        return Ok(Transformed::no(LogicalPlan::Projection(unchanged)));
    }
    // One subquery per projection: DataFusion 53 joins two correlated ones of one
    // projection wrong ("Ambiguous reference to unqualified field __always_true").
    let mut below = input;
    for has_rows in counts.below {
        let mut columns = columns_of(below.schema());
        columns.push(has_rows);
        below = Arc::new(LogicalPlan::Projection(Projection::try_new(
            columns, below,
        )?));
    }
    let above = Projection::try_new(exprs, below)?;
    Ok(Transformed::yes(LogicalPlan::Projection(above)))
}

/// The subqueries of a projection's expressions, each moved to a projection below as
/// the counts or values it is computed from.
struct Counts<'a> {
    /// The columns of the projection's input.
    input: &'a DFSchema,
    /// `(SELECT count(*) …) > 0 AS __floe_subquery_N` and the like, for the projections
    /// below.
    below: Vec<Expr>,
    named: &'a mut usize,
}

impl Counts<'_> {
    /// `expr` computed by scalar subqueries if it is an `IN`, `EXISTS`, `ANY` or `ALL`
    /// subquery, and the statement's limit allows.
    fn of(&mut self, expr: Expr) -> Result<Transformed<Expr>> {
        if *self.named + SUBQUERIES_PER_VALUE > MAX_SUBQUERIES {
            return Ok(Transformed::no(expr));
        }
        let (value, negated) = match expr {
            Expr::InSubquery(InSubquery {
                expr: compared,
                subquery,
                negated,
            }) => {
                let (rows, item) = rows_and_value(&subquery.subquery)?;
                let equal = item.clone().eq(outer(*compared.clone(), self.input)?);
                let found = self.has_rows(&rows, Some(equal))?;
                let holds_null = self.has_rows(&rows, Some(item.is_null()))?;
                let any = self.has_rows(&rows, None)?;
                let unknown = holds_null.or(compared.is_null().and(any));
                let is_in = when(found, lit(true))
                    .when(unknown, lit(ScalarValue::Boolean(None)))
                    .otherwise(lit(false))?;
                (is_in, negated)
            }
            Expr::SetComparison(comparison) => return self.set_comparison(comparison),
            Expr::Exists(Exists { subquery, negated }) => {
                // What the subquery selects does not matter.
                let rows = match subquery.subquery.as_ref() {
                    LogicalPlan::Projection(projection) => projection.input.as_ref(),
                    rows => rows,
                };
                (self.has_rows(rows, None)?, negated)
            }
            other => return Ok(Transformed::no(other)),
        };
        Ok(Transformed::yes(match negated {
            true => not(value),
            false => value,
        }))
    }

    /// `x op ANY (S)` or `x op ALL (S)` by S's least and greatest values (a comparison of
    /// each row with `x` would not be an equality DataFusion can join by), with SQL's
    /// NULLs: `ANY` is true where some row compares true, else unknown where a row or `x`
    /// is NULL and S has rows, else false; `ALL` is false where some row compares false,
    /// else unknown where a row or `x` is NULL, else true (so for no rows).
    fn set_comparison(&mut self, comparison: SetComparison) -> Result<Transformed<Expr>> {
        use Operator::{Eq, Gt, GtEq, Lt, LtEq, NotEq};
        let (quantifier, op) = (comparison.quantifier, comparison.op);
        if let (SetQuantifier::Any, Eq) | (SetQuantifier::All, NotEq) = (quantifier, op) {
            let is_in = InSubquery::new(comparison.expr, comparison.subquery, op == NotEq);
            return self.of(Expr::InSubquery(is_in));
        }
        if !matches!(op, Eq | NotEq | Gt | GtEq | Lt | LtEq) {
            return Ok(Transformed::no(Expr::SetComparison(comparison)));
        }
        let (rows, item) = rows_and_value(&comparison.subquery.subquery)?;
        let x = *comparison.expr;
        let compare = |extreme: &Expr| binary_expr(x.clone(), op, extreme.clone());
        let any = self.has_rows(&rows, None)?;
        let holds_null = self.has_rows(&rows, Some(item.clone().is_null()))?;
        let least = self.aggregated(&rows, None, min(item.clone()), |v| v)?;
        let greatest = self.aggregated(&rows, None, max(item), |v| v)?;
        let unknown = lit(ScalarValue::Boolean(None));
        let (no_rows, decided, decides) = match (quantifier, op) {
            // `= ALL` is false where a row differs; `<> ANY` true.
            (_, Eq) => (
                true,
                not(compare(&least)).or(not(compare(&greatest))),
                false,
            ),
            (_, NotEq) => (false, compare(&least).or(compare(&greatest)), true),
            // `> ANY` is true where x is greater than the least; `> ALL` false where it
            // is not greater than the greatest.
            (SetQuantifier::Any, Gt | GtEq) => (false, compare(&least), true),
            (SetQuantifier::Any, _) => (false, compare(&greatest), true),
            (SetQuantifier::All, Gt | GtEq) => (true, not(compare(&greatest)), false),
            (SetQuantifier::All, _) => (true, not(compare(&least)), false),
        };
        let value = when(not(any), lit(no_rows))
            .when(x.clone().is_null(), unknown.clone())
            .when(decided, lit(decides))
            .when(holds_null, unknown)
            .otherwise(lit(!decides))?;
        Ok(Transformed::yes(value))
    }

    /// A column of the projection below: whether `rows` has one where `condition` holds,
    /// `(SELECT count(*) FROM rows WHERE condition) > 0`.
    fn has_rows(&mut self, rows: &LogicalPlan, condition: Option<Expr>) -> Result<Expr> {
        self.aggregated(rows, condition, count_all(), |count| count.gt(lit(0i64)))
    }

    /// A column of the projection below: `value` of `(SELECT aggregate FROM rows WHERE
    /// condition)`. Each aggregate and column has a name of its own: DataFusion 53 joins
    /// two scalar subqueries of one name wrong ("Ambiguous reference").
    fn aggregated(
        &mut self,
        rows: &LogicalPlan,
        condition: Option<Expr>,
        aggregate: Expr,
        value: impl FnOnce(Expr) -> Expr,
    ) -> Result<Expr> {
        *self.named += 1;
        let builder = match (rows, condition) {
            // One filter: DataFusion 53 failed to join a correlated filter over another
            // ("No field named z.k").
            (LogicalPlan::Filter(filter), Some(condition)) => {
                LogicalPlanBuilder::from(filter.input.as_ref().clone())
                    .filter(filter.predicate.clone().and(condition))?
            }
            (rows, Some(condition)) => LogicalPlanBuilder::from(rows.clone()).filter(condition)?,
            (rows, None) => LogicalPlanBuilder::from(rows.clone()),
        };
        let counted = builder
            .aggregate(
                Vec::<Expr>::new(),
                vec![aggregate.alias(format!("__floe_aggregate_{}", self.named))],
            )?
            .build()?;
        let subquery = Expr::ScalarSubquery(Subquery {
            outer_ref_columns: counted.all_out_ref_exprs(),
            subquery: Arc::new(counted),
            spans: Spans::new(),
        });
        let name = format!("__floe_subquery_{}", self.named);
        self.below.push(value(subquery).alias(&name));
        Ok(Expr::Column(Column::from_name(name)))
    }
}

/// The rows a one-column subquery filters, and the value it gives of each: under its
/// projection, where the projection is one expression.
pub(super) fn rows_and_value(subquery: &LogicalPlan) -> Result<(LogicalPlan, Expr)> {
    if let LogicalPlan::Projection(projection) = subquery
        && let [item] = projection.expr.as_slice()
    {
        return Ok((
            projection.input.as_ref().clone(),
            item.clone().unalias_nested().data,
        ));
    }
    let column = subquery.schema().columns().into_iter().next();
    let column = column.ok_or_else(|| FloeError::invalid("an IN subquery must give one column"))?;
    Ok((subquery.clone(), Expr::Column(column)))
}

/// `expr`, of the outer query's columns (`input`), as the subquery refers to them.
pub(super) fn outer(expr: Expr, input: &DFSchema) -> Result<Expr> {
    let outer = expr.transform(|e| match e {
        Expr::Column(column) => {
            let field = input.field_from_column(&column)?;
            Ok(Transformed::yes(Expr::OuterReferenceColumn(
                Arc::clone(field),
                column,
            )))
        }
        other => Ok(Transformed::no(other)),
    })?;
    Ok(outer.data)
}
