//! EXPLAIN ANALYZE on the cluster: a finished job's stages as they ran, each with its
//! plan, the metrics its tasks reported for every operator, and where its tasks ran.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

use ballista_core::serde::protobuf::task_status;
use ballista_scheduler::state::execution_graph::ExecutionGraphBox;
use ballista_scheduler::state::execution_stage::{ExecutionStage, SuccessfulStage};
use datafusion::physical_plan::metrics::MetricsSet;
use datafusion::physical_plan::{DisplayFormatType, ExecutionPlan, ExecutionPlanVisitor, accept};

/// One `(title, text)` row for the job, then one per stage in the order they ran.
pub(super) fn render(graph: &ExecutionGraphBox, elapsed: Duration) -> Vec<(String, String)> {
    let stages: BTreeMap<usize, &ExecutionStage> =
        graph.stages().iter().map(|(id, s)| (*id, s)).collect();
    let mut rows = vec![(
        "Job".to_string(),
        format!(
            "{} stage(s), {} task(s) in {} ms",
            stages.len(),
            stages.values().map(|s| task_count(s)).sum::<usize>(),
            elapsed.as_millis()
        ),
    )];
    let job_start = u128::from(graph.start_time());
    for (id, stage) in stages {
        let text = match stage {
            ExecutionStage::Successful(stage) => successful_stage(stage, job_start),
            // A finished job's stages all succeeded; say so if one did not.
            _ => "did not complete".to_string(),
        };
        rows.push((format!("Stage {id}"), text));
    }
    rows
}

fn task_count(stage: &ExecutionStage) -> usize {
    match stage {
        ExecutionStage::Successful(s) => s.task_infos.len(),
        _ => 0,
    }
}

/// The stage's header, plan and metrics. Its times are milliseconds since `job_start`:
/// when its first task was scheduled (all it waited for had finished), and when its
/// last task's result reached the scheduler.
fn successful_stage(stage: &SuccessfulStage, job_start: u128) -> String {
    let mut per_executor: BTreeMap<&str, usize> = BTreeMap::new();
    let (mut started, mut ended) = (u128::MAX, 0);
    let (mut scheduled, mut finished) = (u128::MAX, 0);
    for task in &stage.task_infos {
        if let task_status::Status::Successful(done) = &task.task_status {
            *per_executor.entry(&done.executor_id).or_default() += 1;
        }
        started = started.min(task.start_exec_time);
        ended = ended.max(task.end_exec_time);
        scheduled = scheduled.min(task.scheduled_time);
        finished = finished.max(task.finish_time);
    }
    let executors: Vec<String> = per_executor
        .iter()
        .map(|(id, tasks)| format!("{tasks} on executor {}", short_id(id)))
        .collect();
    let mut text = format!(
        "{} task(s) ({}), {} ms, from +{} to +{} ms",
        stage.partitions,
        executors.join(", "),
        ended.saturating_sub(started),
        scheduled.saturating_sub(job_start),
        finished.saturating_sub(job_start),
    );
    let mut inputs: Vec<usize> = stage.inputs.keys().copied().collect();
    inputs.sort_unstable();
    if !inputs.is_empty() {
        let inputs: Vec<String> = inputs.iter().map(|i| format!("stage {i}")).collect();
        let _ = write!(text, ", reads {}", inputs.join(", "));
    }
    text.push('\n');
    let mut visitor = WithMetrics {
        text: &mut text,
        metrics: &stage.stage_metrics,
        next: 0,
        indent: 0,
    };
    let _ = accept(stage.plan.as_ref(), &mut visitor);
    text
}

fn short_id(id: &str) -> &str {
    id.get(..8).unwrap_or(id)
}

/// Writes one line per operator with its metrics summed over the stage's tasks. Tasks
/// report a metrics set for each operator that keeps metrics, in plan order.
struct WithMetrics<'a> {
    text: &'a mut String,
    metrics: &'a [MetricsSet],
    next: usize,
    indent: usize,
}

impl ExecutionPlanVisitor for WithMetrics<'_> {
    type Error = std::fmt::Error;

    fn pre_visit(&mut self, plan: &dyn ExecutionPlan) -> Result<bool, Self::Error> {
        write!(self.text, "{:width$}", "", width = self.indent * 2)?;
        write!(self.text, "{}", Displayed(plan))?;
        if plan.metrics().is_some()
            && let Some(metrics) = self.metrics.get(self.next)
        {
            self.next += 1;
            let metrics = metrics
                .aggregate_by_name()
                .sorted_for_display()
                .timestamps_removed();
            write!(self.text, ", metrics=[{metrics}]")?;
        }
        self.text.push('\n');
        self.indent += 1;
        Ok(true)
    }

    fn post_visit(&mut self, _: &dyn ExecutionPlan) -> Result<bool, Self::Error> {
        self.indent -= 1;
        Ok(true)
    }
}

/// An operator's one-line description.
struct Displayed<'a>(&'a dyn ExecutionPlan);

impl std::fmt::Display for Displayed<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt_as(DisplayFormatType::Default, f)
    }
}
