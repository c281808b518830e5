//! Scan task groups that travel outside the plan.
//!
//! Ballista ships a stage's whole plan with every task, so a scan that listed every
//! partition's files would send each task all of them: O(files) per task, past the
//! gRPC message limit for a table of a million files. A scan of more than
//! [`INLINE_TASKS`] tasks is therefore encoded without its groups: the coordinator keeps
//! them here under the scan's id for as long as its plan lives, and each task fetches
//! only the group it reads, in messages of at most [`TASKS_PER_MESSAGE`] tasks (the
//! [`FETCH_ACTION`] Flight action on the scheduler port). In-process executors find the
//! groups in this same registry, without a request.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex, Weak};

use bytes::Bytes;
use iceberg::scan::FileScanTask;
use iceberg::spec::Schema;
use prost::Message;

use super::{decode_task, encode_task, proto};
use crate::coordinator_link;
use crate::error::{FloeError, Result};

/// Scans of at most this many tasks list them in the plan.
pub const INLINE_TASKS: usize = 1_000;

/// The Flight action a task sends the coordinator for its group (body: a
/// `TaskGroupRequest`; answers: `TaskGroup` messages).
pub const FETCH_ACTION: &str = "floe.scan-task-group";

const TASKS_PER_MESSAGE: usize = 1_000;

type Groups = Vec<Vec<FileScanTask>>;

/// The groups of the scans whose plans are alive, by scan id.
static KEPT: LazyLock<Mutex<HashMap<String, Weak<Groups>>>> = LazyLock::new(Mutex::default);

fn kept() -> std::sync::MutexGuard<'static, HashMap<String, Weak<Groups>>> {
    KEPT.lock().unwrap_or_else(|e| e.into_inner())
}

/// The coordinator: keeps `groups` findable under `scan_id` while anything holds them.
pub fn keep(scan_id: &str, groups: &Arc<Groups>) {
    let mut kept = kept();
    kept.retain(|_, groups| groups.strong_count() > 0);
    kept.insert(scan_id.to_string(), Arc::downgrade(groups));
}

fn find(scan_id: &str, partition: usize) -> Result<Option<Vec<FileScanTask>>> {
    let Some(groups) = kept().get(scan_id).and_then(Weak::upgrade) else {
        return Ok(None);
    };
    match groups.get(partition) {
        Some(group) => Ok(Some(group.clone())),
        None => Err(FloeError::internal(format!(
            "scan {scan_id} has {} partitions, not {partition}",
            groups.len()
        ))),
    }
}

/// The coordinator: the answers to a [`FETCH_ACTION`] with `body`.
pub fn serve(body: &[u8]) -> Result<Vec<Bytes>> {
    let request = proto::TaskGroupRequest::decode(body)
        .map_err(|e| FloeError::invalid(format!("task group request: {e}")))?;
    let group = find(&request.scan_id, request.partition as usize)?.ok_or_else(|| {
        FloeError::not_found(format!(
            "scan {} is no longer planned at the coordinator",
            request.scan_id
        ))
    })?;
    group
        .chunks(TASKS_PER_MESSAGE)
        .map(|tasks| {
            let message = proto::TaskGroup {
                tasks: tasks.iter().map(encode_task).collect::<Result<_>>()?,
            };
            Ok(message.encode_to_vec().into())
        })
        .collect()
}

/// The tasks partition `partition` of scan `scan_id` reads: from this process if it
/// keeps them (the coordinator and its in-process executors), else from the
/// coordinator. Decoded tasks carry only their own parts (see `decode_task`).
pub async fn fetch(
    scan_id: &str,
    partition: usize,
    schema: &Arc<Schema>,
) -> Result<Vec<FileScanTask>> {
    if let Some(tasks) = find(scan_id, partition)? {
        return Ok(tasks);
    }
    let request = proto::TaskGroupRequest {
        scan_id: scan_id.to_string(),
        partition: partition as u32,
    };
    let answers = coordinator_link::ask(FETCH_ACTION, request.encode_to_vec().into())
        .await
        .map_err(|e| FloeError::unavailable(format!("fetching the scan's files: {e}")))?;
    let mut tasks = Vec::new();
    for answer in answers {
        let group = proto::TaskGroup::decode(answer)
            .map_err(|e| FloeError::internal(format!("decoding a task group: {e}")))?;
        for task in group.tasks {
            tasks.push(decode_task(task, schema)?);
        }
    }
    Ok(tasks)
}
