//! `INTERSECT ALL` and `EXCEPT ALL` with SQL's multiset meaning.
//!
//! DataFusion 53 plans `a INTERSECT ALL b` as a semi join and `a EXCEPT ALL b` as an anti
//! join of `a` with `b` on all columns (NULLs equal), which keeps every copy of a row of
//! `a` that occurs in `b` at all, or drops every copy: `SELECT g FROM t EXCEPT ALL SELECT g
//! FROM t WHERE k < 1990` answers nothing where SQL answers each `g` as many times as it
//! has more rows in `a` than in `b`. Here each side's rows are numbered within their
//! copies first (`row_number() OVER (PARTITION BY` every column`)`) and the number is a
//! join key too: the n-th copy of a row of `a` matches only the n-th copy in `b`, so
//! `INTERSECT ALL` keeps `min(m, n)` copies and `EXCEPT ALL` `m - n`, as SQL says.
//!
//! Only the joins DataFusion plans for those two forms are rewritten: a semi or anti join
//! on every column of its left side, NULLs equal, without filter, whose left side is not
//! made distinct first (`INTERSECT` and `EXCEPT` without `ALL` are, and are right).

use std::sync::Arc;

use datafusion::common::tree_node::Transformed;
use datafusion::common::{JoinType, NullEquality};
use datafusion::logical_expr::{Expr, ExprFunctionExt, Join, LogicalPlan, LogicalPlanBuilder, col};

use crate::cluster::signed;
use crate::error::Result;

/// `plan` with its `INTERSECT ALL` and `EXCEPT ALL` counting copies.
pub(super) fn with_multiset_intersect_and_except(plan: LogicalPlan) -> Result<LogicalPlan> {
    let rewritten = plan.transform_up_with_subqueries(|node| match node {
        LogicalPlan::Join(join) if is_intersect_or_except_all(&join) => {
            Ok(Transformed::yes(counting_copies(join)?))
        }
        node => Ok(Transformed::no(node)),
    })?;
    Ok(rewritten.data)
}

fn is_intersect_or_except_all(join: &Join) -> bool {
    let columns = join.left.schema().fields().len();
    matches!(join.join_type, JoinType::LeftSemi | JoinType::LeftAnti)
        && join.null_equality == NullEquality::NullEqualsNull
        && join.filter.is_none()
        && !join.null_aware
        && columns > 0
        && join.on.len() == columns
        && join.right.schema().fields().len() == columns
        && !matches!(join.left.as_ref(), LogicalPlan::Distinct(_))
}

/// The join of both sides with each row's copy number as one more key, then the left
/// side's columns.
fn counting_copies(join: Join) -> Result<LogicalPlan> {
    const LEFT: &str = "__floe_left_copy";
    const RIGHT: &str = "__floe_right_copy";
    let columns: Vec<Expr> = join
        .left
        .schema()
        .columns()
        .into_iter()
        .map(Expr::Column)
        .collect();
    let left = numbered_copies(&join.left, LEFT)?;
    let right = numbered_copies(&join.right, RIGHT)?;
    let mut on = join.on;
    on.push((col(LEFT), col(RIGHT)));
    let joined = Join::try_new(
        Arc::new(left),
        Arc::new(right),
        on,
        None,
        join.join_type,
        join.join_constraint,
        NullEquality::NullEqualsNull,
        false,
    )?;
    Ok(LogicalPlanBuilder::from(LogicalPlan::Join(joined))
        .project(columns)?
        .build()?)
}

/// `plan` with a column `name` numbering each row among its copies (1, 2, …).
fn numbered_copies(plan: &Arc<LogicalPlan>, name: &str) -> Result<LogicalPlan> {
    let every_column: Vec<Expr> = plan
        .schema()
        .columns()
        .into_iter()
        .map(Expr::Column)
        .collect();
    let copy = signed::row_number()
        .call(vec![])
        .partition_by(every_column)
        .build()?
        .alias(name);
    Ok(LogicalPlanBuilder::from(Arc::clone(plan))
        .window(vec![copy])?
        .build()?)
}
