//! An aggregate ordered and limited by the value it groups by (`SELECT DISTINCT g FROM t
//! ORDER BY g DESC LIMIT 2`) or by its one `min`/`max`: DataFusion 53's `TopKAggregation`
//! has it keep only its first `LIMIT` groups as it goes, by a heap that knows no NULL,
//! so the group whose value is NULL was lost (PostgreSQL sorts it first when descending;
//! also apache/datafusion#23440 for `min`/`max`). Such a limit stays only where that
//! value cannot be NULL; elsewhere the aggregate keeps all its groups and the sort above
//! takes the first.

use std::sync::Arc;

use datafusion::error::Result;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::aggregates::AggregateExec;

use super::node_rule::NodeRule;

pub(super) const TOP_GROUPS_WITH_NULLS: NodeRule = NodeRule {
    name: "floe_top_groups_with_nulls",
    rewrite: without_top_groups_of_nullable_values,
};

fn without_top_groups_of_nullable_values(
    node: &Arc<dyn ExecutionPlan>,
) -> Result<Option<Arc<dyn ExecutionPlan>>> {
    let Some(aggregate) = node.as_any().downcast_ref::<AggregateExec>() else {
        return Ok(None);
    };
    let ordered = aggregate
        .limit_options()
        .and_then(|limit| limit.descending());
    if ordered.is_none() || !orders_by_nullable_value(aggregate) {
        return Ok(None);
    }
    Ok(Some(Arc::new(aggregate.with_new_limit_options(None))))
}

fn orders_by_nullable_value(aggregate: &AggregateExec) -> bool {
    match aggregate.get_minmax_desc() {
        Some((field, _)) => field.is_nullable(),
        None => {
            let input = aggregate.input_schema();
            (aggregate.group_expr().expr().iter())
                .any(|(key, _)| key.nullable(&input).unwrap_or(true))
        }
    }
}
