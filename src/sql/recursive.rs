//! Recursive queries (`WITH RECURSIVE`) run on the coordinator, in this process.
//!
//! DataFusion runs a recursive query by feeding each round's rows back through a work
//! table that its `RecursiveQueryExec` and `WorkTableExec` share in memory. Ballista
//! cannot ship those nodes to an executor (its scheduler only logs that it failed to
//! encode the task, and the job would wait forever), so a query that recurses runs on
//! the coordinator as DataFusion runs it, under the same statement timeout and `KILL`
//! as a job. Writes and EXPLAIN ANALYZE run as jobs: there a recursive query is refused
//! (`cluster::recurses`).
//!
//! DataFusion 53 also names the work table's columns after the static term's
//! expressions, not after the CTE's column list (`WITH RECURSIVE r(n) AS (SELECT 1 UNION
//! ALL SELECT n + 1 FROM r …)` fails with "No field named n"): [`named_columns`] writes
//! the list's names into the static term's SELECT as aliases first.

use std::ops::ControlFlow;
use std::sync::Arc;
use std::time::Duration;

use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{ExecutionPlan, execute_stream};
use datafusion::sql::parser::Statement;
use datafusion::sql::sqlparser::ast::{Query, SelectItem, SetExpr, VisitMut, VisitorMut};
use futures::StreamExt;
use tokio::sync::mpsc;

use super::parse::sql_statement_mut;
use crate::error::{FloeError, Result};
use crate::ops::statements;

/// Runs `plan` in this process and streams its result; the stream fails past `timeout`
/// or when the statement is killed, and dropping it stops the query.
pub fn run_on_coordinator(
    plan: Arc<dyn ExecutionPlan>,
    task: Arc<TaskContext>,
    timeout: Option<Duration>,
) -> Result<SendableRecordBatchStream> {
    let mut rows = execute_stream(plan, task)?;
    let schema = rows.schema();
    let (out, mut batches) = mpsc::channel(2);
    let limit = async move {
        match timeout {
            Some(limit) => {
                tokio::time::sleep(limit).await;
                FloeError::statement_timeout(limit)
            }
            None => std::future::pending().await,
        }
    };
    // In the statement's scope, so that KILL reaches it.
    statements::spawn(async move {
        tokio::pin!(limit);
        loop {
            let next = tokio::select! {
                next = rows.next() => next,
                error = &mut limit => Some(Err(error.into())),
                _ = statements::current_cancelled() => Some(Err(statements::killed().into())),
                _ = out.closed() => return,
            };
            let Some(batch) = next else { return };
            let failed = batch.is_err();
            if out.send(batch).await.is_err() || failed {
                return;
            }
        }
    });
    let batches = futures::stream::poll_fn(move |cx| batches.poll_recv(cx));
    Ok(Box::pin(RecordBatchStreamAdapter::new(schema, batches)))
}

/// Aliases the static term of each recursive CTE that has a column list with the list's
/// names (see the module docs); a static term that selects `*` or another number of
/// columns is left to DataFusion.
pub fn named_columns(statement: &mut Statement) {
    if let Some(statement) = sql_statement_mut(statement) {
        let _ = statement.visit(&mut RecursiveCtes);
    }
}

struct RecursiveCtes;

impl VisitorMut for RecursiveCtes {
    type Break = ();

    fn pre_visit_query(&mut self, query: &mut Query) -> ControlFlow<()> {
        let Some(with) = query.with.as_mut().filter(|with| with.recursive) else {
            return ControlFlow::Continue(());
        };
        for cte in &mut with.cte_tables {
            let names = cte.alias.columns.iter().map(|column| &column.name);
            let Some(items) = static_term_items(&mut cte.query.body) else {
                continue;
            };
            if names.len() != items.len() {
                continue;
            }
            let named: Option<Vec<SelectItem>> = items
                .iter()
                .zip(names)
                .map(|(item, name)| match item {
                    SelectItem::UnnamedExpr(expr) | SelectItem::ExprWithAlias { expr, .. } => {
                        Some(SelectItem::ExprWithAlias {
                            expr: expr.clone(),
                            alias: name.clone(),
                        })
                    }
                    _ => None,
                })
                .collect();
            if let Some(named) = named {
                *items = named;
            }
        }
        ControlFlow::Continue(())
    }
}

/// The SELECT list of a recursive CTE's static term: the leftmost SELECT of its body.
fn static_term_items(body: &mut SetExpr) -> Option<&mut Vec<SelectItem>> {
    match body {
        SetExpr::SetOperation { left, .. } => static_term_items(left),
        SetExpr::Select(select) => Some(&mut select.projection),
        SetExpr::Query(query) => static_term_items(&mut query.body),
        _ => None,
    }
}
