//! What the cluster is doing, as operators see it: executors, jobs and tasks running,
//! and how far a job has got.

use std::collections::HashSet;
use std::sync::Arc;

use ballista_core::execution_plans::{ShuffleWriterExec, SortShuffleWriterExec};
use ballista_core::serde::protobuf::task_status;
use ballista_scheduler::state::execution_stage::{ExecutionStage, TaskInfo};
use datafusion::physical_plan::{ExecutionPlan, ExecutionPlanProperties};

use super::Cluster;
use crate::ops::metrics::ClusterGauges;

/// A job's tasks: how many there are in all its stages, and how many have finished.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct TaskCounts {
    pub done: usize,
    pub total: usize,
    pub running: usize,
}

impl TaskCounts {
    /// The fraction of the tasks done, 0 to 1.
    pub fn fraction(&self) -> f64 {
        match self.total {
            0 => 0.0,
            total => self.done as f64 / total as f64,
        }
    }
}

impl Cluster {
    pub async fn gauges(&self) -> ClusterGauges {
        let jobs = self.jobs.running();
        let mut tasks_running = 0;
        for job in &jobs {
            if let Some(counts) = self.task_counts(job).await {
                tasks_running += counts.running;
            }
        }
        ClusterGauges {
            executors_alive: self.registered_executors().await,
            jobs_running: jobs.len(),
            tasks_running,
            shuffle_memory_bytes: super::held_outputs::held_outputs().bytes(),
        }
    }

    /// The ids of the executors registered now.
    pub(super) async fn executor_ids(&self) -> HashSet<String> {
        let manager = &self.scheduler.state.executor_manager;
        match manager.get_executors_state().await {
            Ok(executors) => executors.into_iter().map(|(m, _, _)| m.id).collect(),
            Err(_) => HashSet::new(),
        }
    }

    /// The executors a running job depends on: those running its tasks and those
    /// holding the outputs of its finished tasks.
    pub(super) async fn job_executors(&self, job_id: &str) -> HashSet<String> {
        let jobs = self.scheduler.state.task_manager.get_running_job_cache();
        let Some(job) = jobs.get(job_id) else {
            return HashSet::new();
        };
        let graph = job.execution_graph.read().await;
        let mut executors = HashSet::new();
        for stage in graph.stages().values() {
            let infos: Vec<&TaskInfo> = match stage {
                ExecutionStage::Running(s) => s.task_infos.iter().flatten().collect(),
                ExecutionStage::Successful(s) => s.task_infos.iter().collect(),
                _ => Vec::new(),
            };
            for info in infos {
                match &info.task_status {
                    task_status::Status::Running(task) => {
                        executors.insert(task.executor_id.clone());
                    }
                    task_status::Status::Successful(task) => {
                        executors.insert(task.executor_id.clone());
                    }
                    _ => {}
                }
            }
        }
        executors
    }

    /// The task counts of a running job; `None` once it has left the scheduler's
    /// running jobs (finished, failed or cancelled).
    pub async fn task_counts(&self, job_id: &str) -> Option<TaskCounts> {
        let jobs = self.scheduler.state.task_manager.get_running_job_cache();
        let graph = jobs.get(job_id)?.execution_graph.read().await;
        let mut counts = TaskCounts::default();
        for stage in graph.stages().values() {
            let (done, total, running) = match stage {
                ExecutionStage::UnResolved(s) => (0, stage_tasks(&s.plan), 0),
                ExecutionStage::Resolved(s) => (0, s.partitions, 0),
                ExecutionStage::Running(s) => {
                    (s.successful_tasks(), s.partitions, s.running_tasks().len())
                }
                ExecutionStage::Successful(s) => (s.partitions, s.partitions, 0),
                ExecutionStage::Failed(s) => (0, s.partitions, 0),
            };
            counts.done += done;
            counts.total += total;
            counts.running += running;
        }
        Some(counts)
    }
}

/// How many tasks a stage not yet resolved will run (as Ballista counts them).
fn stage_tasks(plan: &Arc<dyn ExecutionPlan>) -> usize {
    if let Some(writer) = plan.as_any().downcast_ref::<ShuffleWriterExec>() {
        return writer.input_partition_count();
    }
    if let Some(writer) = plan.as_any().downcast_ref::<SortShuffleWriterExec>() {
        return writer.input_partition_count();
    }
    plan.output_partitioning().partition_count()
}
