//! DataFusion 53's `ProjectionPushdown` pushes a projection into a join's two sides
//! reading the join's output as the left side's columns followed by the right side's
//! (`try_pushdown_through_join`). A semi, anti or mark join outputs one side only (and
//! its mark): the projection's columns were taken from the wrong side, and the statement
//! failed ("Input field name x does not match with the projection expression k": `SELECT
//! k FROM t a WHERE a.x > ALL (SELECT b.x FROM t b WHERE b.k < 1990)`, whose `ALL`
//! becomes mark joins; plain DataFusion fails it alike) or could read the wrong column.
//!
//! [`PROJECTIONS_STAY_ABOVE_ONE_SIDED_JOINS`] gives such a hash or nested loop join a
//! projection of all its columns: a join with a projection of its own is never pushed
//! through, so the projection above it stays where it is.

use std::sync::Arc;

use datafusion::common::tree_node::TreeNode;
use datafusion::common::{JoinSide, JoinType};
use datafusion::error::Result;
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_expr::expressions::Column;
use datafusion::physical_expr_common::physical_expr::is_volatile;
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::joins::{HashJoinExec, NestedLoopJoinExec};

use super::node_rule::NodeRule;

/// See the module documentation.
const PROJECTIONS_STAY_ABOVE_ONE_SIDED_JOINS: NodeRule = NodeRule {
    name: "floe_projections_stay_above_one_sided_joins",
    rewrite: with_all_columns_projected,
};

/// `rules` with [`PROJECTIONS_STAY_ABOVE_ONE_SIDED_JOINS`] right before the first
/// `ProjectionPushdown`.
pub(super) fn with_one_sided_joins_kept(
    mut rules: Vec<Arc<dyn PhysicalOptimizerRule + Send + Sync>>,
) -> Vec<Arc<dyn PhysicalOptimizerRule + Send + Sync>> {
    let pushdown = rules
        .iter()
        .position(|r| r.name() == "ProjectionPushdown")
        .unwrap_or(rules.len());
    rules.insert(pushdown, Arc::new(PROJECTIONS_STAY_ABOVE_ONE_SIDED_JOINS));
    rules
}

/// Whether `ProjectionPushdown`, computing a part of `join`'s filter on its left side
/// (`a.g + 1` of `b.h = a.g + 1 OR …`), would move the columns of a projection the join
/// has as if the join output both sides: for a right semi or anti join (which outputs the
/// right side only) they pointed past its columns and the job panicked ("index out of
/// bounds", "ended without a status"). Without a projection, that pushdown gives the
/// join the right one (and so a projection of its own), so none is added here.
fn projection_shifted_by_filter_pushdown(join: &NestedLoopJoinExec) -> bool {
    let right_only = matches!(join.join_type(), JoinType::RightSemi | JoinType::RightAnti);
    let Some(filter) = join.filter().filter(|_| right_only) else {
        return false;
    };
    let reads = |expr: &Arc<dyn PhysicalExpr>, side: JoinSide| {
        expr.exists(|e| {
            Ok(e.as_any().downcast_ref::<Column>().is_some_and(|c| {
                (filter.column_indices().get(c.index())).is_some_and(|i| i.side == side)
            }))
        })
        .unwrap_or(true)
    };
    fn left_computation(
        expr: &Arc<dyn PhysicalExpr>,
        reads: &dyn Fn(&Arc<dyn PhysicalExpr>, JoinSide) -> bool,
    ) -> bool {
        if !reads(expr, JoinSide::Left) {
            return false;
        }
        if reads(expr, JoinSide::Right) || is_volatile(expr) {
            return expr
                .children()
                .into_iter()
                .any(|c| left_computation(c, reads));
        }
        !expr.children().is_empty()
    }
    left_computation(filter.expression(), &reads)
}

/// Whether a join of this type outputs the columns of one side only.
fn one_sided(join_type: &JoinType) -> bool {
    !matches!(
        join_type,
        JoinType::Inner | JoinType::Left | JoinType::Right | JoinType::Full
    )
}

/// `node` projecting all its columns, if it is a one-sided hash or nested loop join
/// without a projection.
fn with_all_columns_projected(
    node: &Arc<dyn ExecutionPlan>,
) -> Result<Option<Arc<dyn ExecutionPlan>>> {
    let all = || Some((0..node.schema().fields().len()).collect::<Vec<_>>());
    let any = node.as_any();
    if let Some(join) = any.downcast_ref::<HashJoinExec>()
        && one_sided(join.join_type())
        && !join.contains_projection()
    {
        return Ok(Some(Arc::new(join.with_projection(all())?)));
    }
    if let Some(join) = any.downcast_ref::<NestedLoopJoinExec>()
        && one_sided(join.join_type())
        && !join.contains_projection()
        && !projection_shifted_by_filter_pushdown(join)
    {
        return Ok(Some(Arc::new(join.with_projection(all())?)));
    }
    Ok(None)
}
