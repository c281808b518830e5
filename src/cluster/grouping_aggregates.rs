//! Grouping-set aggregates that compute the same aggregate twice.
//!
//! Two aggregates of a statement can become one expression once DataFusion has
//! simplified them (`count(*) FILTER (WHERE lower('q') LIKE 'B')` and `count(*) FILTER
//! (WHERE 1 > 2)` both filter on `false`). DataFusion 53's `common_sub_expression_eliminate`
//! then computes it once under a projection that leaves out the aggregate's grouping id,
//! which `grouping(…)` above reads (apache/datafusion#24143, fixed after 53): the
//! statement failed with "No field named __grouping_id". Floe merges such aggregates of a
//! grouping-set aggregate itself, just before that rule, and keeps every column.

use std::sync::Arc;

use datafusion::common::tree_node::Transformed;
use datafusion::logical_expr::{Aggregate, Expr, LogicalPlan, Projection};
use datafusion::optimizer::{OptimizerConfig, OptimizerRule};

/// `rules` with Floe's merge of repeated grouping-set aggregates before DataFusion's
/// common subexpression elimination.
pub fn with_grouping_id_kept(
    rules: Vec<Arc<dyn OptimizerRule + Send + Sync>>,
) -> Vec<Arc<dyn OptimizerRule + Send + Sync>> {
    let mut kept = Vec::with_capacity(rules.len() + 1);
    for rule in rules {
        if rule.name() == "common_sub_expression_eliminate" {
            kept.push(Arc::new(RepeatedGroupingAggregates) as _);
        }
        kept.push(rule);
    }
    kept
}

#[derive(Debug)]
struct RepeatedGroupingAggregates;

impl OptimizerRule for RepeatedGroupingAggregates {
    fn name(&self) -> &str {
        "floe_repeated_grouping_aggregates"
    }

    fn rewrite(
        &self,
        plan: LogicalPlan,
        _config: &dyn OptimizerConfig,
    ) -> datafusion::error::Result<Transformed<LogicalPlan>> {
        plan.transform_up_with_subqueries(|node| match node {
            LogicalPlan::Aggregate(aggregate) if repeats_in_grouping_sets(&aggregate) => {
                merged(aggregate).map(Transformed::yes)
            }
            other => Ok(Transformed::no(other)),
        })
    }
}

fn repeats_in_grouping_sets(aggregate: &Aggregate) -> bool {
    let grouping_sets = aggregate
        .schema
        .has_column_with_unqualified_name(Aggregate::INTERNAL_GROUPING_ID);
    let exprs: Vec<&Expr> = aggregate.aggr_expr.iter().map(unaliased).collect();
    grouping_sets && (1..exprs.len()).any(|i| exprs[..i].contains(&exprs[i]))
}

/// The aggregate computing each distinct expression once, under a projection that gives
/// every column of `aggregate` its name again.
fn merged(aggregate: Aggregate) -> datafusion::error::Result<LogicalPlan> {
    let mut distinct: Vec<Expr> = Vec::new();
    let mut position = Vec::with_capacity(aggregate.aggr_expr.len());
    for expr in &aggregate.aggr_expr {
        match distinct
            .iter()
            .position(|d| unaliased(d) == unaliased(expr))
        {
            Some(i) => position.push(i),
            None => {
                position.push(distinct.len());
                distinct.push(expr.clone());
            }
        }
    }
    let grouped = aggregate.schema.fields().len() - aggregate.aggr_expr.len();
    let computed =
        Aggregate::try_new(Arc::clone(&aggregate.input), aggregate.group_expr, distinct)?;
    let columns = computed.schema.columns();
    let output = (aggregate.schema.iter().enumerate())
        .map(|(i, (qualifier, field))| {
            let source = match i.checked_sub(grouped) {
                Some(j) => &columns[grouped + position[j]],
                None => &columns[i],
            };
            Expr::Column(source.clone()).alias_qualified(qualifier.cloned(), field.name())
        })
        .collect();
    let projection = Projection::try_new(output, Arc::new(LogicalPlan::Aggregate(computed)))?;
    Ok(LogicalPlan::Projection(projection))
}

fn unaliased(expr: &Expr) -> &Expr {
    match expr {
        Expr::Alias(alias) => unaliased(&alias.expr),
        expr => expr,
    }
}
