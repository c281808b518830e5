//! Queries small enough to run on the coordinator: a job's fixed cost (stages planned
//! and shipped, tasks launched and reported, results fetched) is several milliseconds,
//! more than reading a few megabytes takes. A query runs there when every leaf of its
//! physical plan is an Iceberg scan with its files listed, or rows the statement spells
//! out, its scans read at most the configured number of bytes in all, and its work is
//! bounded by what it reads: no join (a join of small tables can still produce a
//! quadratic number of rows, and DataFusion cannot interrupt a join that computes a
//! batch for minutes, which on the coordinator would hold a thread of the server) and
//! no recursive query. Such a query is over before a timeout or a KILL would matter.

use std::sync::Arc;

use datafusion::common::tree_node::{TreeNode, TreeNodeRecursion};
use datafusion::datasource::memory::MemorySourceConfig;
use datafusion::datasource::source::DataSourceExec;
use datafusion::logical_expr::LogicalPlan;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::empty::EmptyExec;
use datafusion::physical_plan::joins::{
    CrossJoinExec, HashJoinExec, NestedLoopJoinExec, SortMergeJoinExec, SymmetricHashJoinExec,
};
use datafusion::physical_plan::placeholder_row::PlaceholderRowExec;
use datafusion::physical_plan::recursive_query::RecursiveQueryExec;

use super::expr_rewrite::is_subquery;
use crate::table::scan::IcebergScanExec;

/// Whether the logical `plan` may be small: it joins nothing (no join, no subquery, which
/// becomes one) and recurses nowhere. Checked first, so that a query that cannot be
/// small is not planned physically twice (here, and by the scheduler).
pub fn may_be_small(plan: &LogicalPlan) -> bool {
    let mut small = true;
    let _ = plan.apply_with_subqueries(|node| {
        small = !matches!(node, LogicalPlan::Join(_) | LogicalPlan::RecursiveQuery(_))
            && !node
                .expressions()
                .iter()
                .any(|e| e.exists(|e| Ok(is_subquery(e))).unwrap_or(true));
        Ok(match small {
            true => TreeNodeRecursion::Continue,
            false => TreeNodeRecursion::Stop,
        })
    });
    small
}

/// Whether `plan` reads at most `max_bytes` of data files and nothing else that could
/// be large (a table function, a staged upload), and does work bounded by that.
pub fn is_small(plan: &Arc<dyn ExecutionPlan>, max_bytes: u64) -> bool {
    let mut bytes = 0u64;
    let mut small = true;
    let _ = plan.apply(|node| {
        if is_unbounded_work(node.as_ref()) {
            small = false;
        } else if node.children().is_empty() {
            match node.as_any().downcast_ref::<IcebergScanExec>() {
                Some(scan) => match scan.planned_bytes() {
                    Some(planned) => bytes = bytes.saturating_add(planned),
                    None => small = false,
                },
                None => small &= is_literal_rows(node.as_ref()),
            }
        }
        Ok(match small && bytes <= max_bytes {
            true => TreeNodeRecursion::Continue,
            false => TreeNodeRecursion::Stop,
        })
    });
    small && bytes <= max_bytes
}

/// A node whose work is not bounded by its input's size.
fn is_unbounded_work(node: &dyn ExecutionPlan) -> bool {
    let any = node.as_any();
    any.is::<HashJoinExec>()
        || any.is::<NestedLoopJoinExec>()
        || any.is::<CrossJoinExec>()
        || any.is::<SortMergeJoinExec>()
        || any.is::<SymmetricHashJoinExec>()
        || any.is::<RecursiveQueryExec>()
}

/// A leaf whose rows are in the plan: none, one empty row, or `VALUES`.
fn is_literal_rows(node: &dyn ExecutionPlan) -> bool {
    let any = node.as_any();
    any.is::<EmptyExec>()
        || any.is::<PlaceholderRowExec>()
        || any
            .downcast_ref::<DataSourceExec>()
            .is_some_and(|source| source.data_source().as_any().is::<MemorySourceConfig>())
}
