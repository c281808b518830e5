//! The write protocol: which files a write may create, who deletes them, and when.
//!
//! 1. **One directory per write.** Planning an INSERT (`provider::insert_into`) gives
//!    the write a fresh id (UUIDv7) and its own directory, [`write_location`]:
//!    `<data location>/<write id>/` (partition directories below it). The write's tasks
//!    create files only there, named uniquely per task attempt
//!    (`<write id>-<partition>-<attempt uuid>-NNNNN.parquet`, see `write`), so no two
//!    writes or task attempts ever share a file, and everything a write made is found
//!    under one prefix, on any storage.
//! 2. **A task that fails deletes its own files.** A write task that fails or is
//!    cancelled before it returned its file list deletes the files it opened
//!    (`write::DeleteOnDrop`). Files a task returned belong to the coordinator.
//! 3. **A failed job deletes the write's directory.** If the job fails, nothing was
//!    committed: the coordinator lets no more of the write's tasks start in its own
//!    process (`floe serve`'s executors, see [`RunningTask`]; one launched just before
//!    the failure would write into the directory being deleted), waits (up to
//!    [`TASK_STOP_WAIT`]) until those running have stopped and deleted what they
//!    opened, then deletes the write's directory
//!    through the table's `FileIO` ([`discard_writes`]), and again after
//!    [`SWEEP_DELAYS`] for tasks of other processes that were still finishing (a sweep
//!    that finds the directory there again says so in the log). The cost is that of one
//!    write.
//! 4. **One commit, then by outcome** ([`commit_write`]). The coordinator commits the
//!    job's files once, in one snapshot whose summary holds the write id
//!    (`floe.write-id`): an append, or an overwrite that also removes files (`overwrite`);
//!    concurrent commits are retried (refresh, re-apply).
//!    The catalog acknowledges a commit only once it has seen it
//!    (`catalog::verified`). Then:
//!    * *committed* (the write id is in a snapshot): the rows are acknowledged; the
//!      files belong to the table, and only table maintenance may delete them;
//!    * *definitely not committed* (refused before it was sent, or the table read back
//!      has no snapshot with the write id): the write's directory is deleted and the
//!      client gets `ABORTED` (conflicts that survived every retry, a schema change) or
//!      `UNAVAILABLE` (the catalog lost the commit, tried [`COMMIT_ATTEMPTS`] times),
//!      saying that nothing was committed and retrying is safe;
//!    * *unknown* (the commit failed and the table cannot be read back): **nothing is
//!      deleted**; the client gets `UNAVAILABLE` saying the outcome is unknown.
//! 5. **An ingest stages its upload inside the write's directory.** A bulk ingest
//!    chooses its write id before the upload arrives and spools the upload into
//!    staging files under [`staging_location`], `<write directory>/_staging/`
//!    (`<write id>-NNNNN.parquet`, see `staging`), written through the table's `FileIO`.
//!    No commit references them, so they are never table data (and the leading `_`
//!    hides the directory from tools that list data directories). The coordinator
//!    deletes them once the write job has ended, whatever its outcome
//!    ([`discard_staging`]), and with the whole directory when the upload or the job
//!    fails (as 3).
//! 6. **Nothing else deletes data files.** What is left behind — the directory of a
//!    write whose outcome stayed unknown, files of task attempts the commit did not
//!    reference, staging files of a coordinator that died mid-ingest — is for an
//!    orphan sweep: a `<data location>/<write id>/` directory whose write id is in no
//!    snapshot summary of the table, and any `_staging/` directory, older than any
//!    running statement. (Floe does not run such a sweep yet.)

use std::collections::{HashMap, HashSet};
use std::sync::{LazyLock, Mutex};
use std::time::{Duration, Instant};

use iceberg::io::FileIO;
use iceberg::spec::TableMetadata;
use iceberg::table::Table;

use super::commit::{CommitOutcome, WrittenFile, commit_append};
use super::data_location;
use super::journal;
use super::overwrite::{Overwrite, commit_overwrite};
use crate::catalog::commit::FloeCatalog;
use crate::error::{ErrorKind, FloeError, Result};
use crate::ops::metrics::metrics;

/// How many times a commit the catalog lost (`UNAVAILABLE`, nothing committed) is tried.
pub const COMMIT_ATTEMPTS: usize = 2;

/// When a failed write's directory is deleted again, after the first time.
pub const SWEEP_DELAYS: [Duration; 3] = [
    Duration::from_secs(1),
    Duration::from_secs(5),
    Duration::from_secs(30),
];

const RETRY_PAUSE: Duration = Duration::from_millis(200);

/// How long a failed write waits for its tasks in this process to stop before its
/// directory is deleted (they were cancelled with the job; the sweeps catch later ones).
pub const TASK_STOP_WAIT: Duration = Duration::from_secs(5);

/// The writes of this process's tasks: how many tasks of each write run, and the writes
/// being discarded, whose tasks may not start any more (a file written after the
/// deletion of the write's directory began would stay).
#[derive(Default)]
struct LocalWrites {
    running: HashMap<String, usize>,
    discarded: HashSet<String>,
}

static LOCAL_WRITES: LazyLock<Mutex<LocalWrites>> = LazyLock::new(Default::default);

fn local_writes() -> std::sync::MutexGuard<'static, LocalWrites> {
    LOCAL_WRITES.lock().unwrap_or_else(|e| e.into_inner())
}

/// A write task running in this process, from its start until it stopped and, if it
/// failed, deleted the files it opened.
pub struct RunningTask {
    write_id: String,
}

impl RunningTask {
    /// Counts a task of `write_id` as running; fails if the write is being discarded.
    pub fn start(write_id: &str) -> Result<Self> {
        let mut writes = local_writes();
        if writes.discarded.contains(write_id) {
            return Err(FloeError::aborted(format!(
                "write {write_id} failed; its remaining tasks do not start"
            )));
        }
        *writes.running.entry(write_id.to_string()).or_default() += 1;
        Ok(Self {
            write_id: write_id.to_string(),
        })
    }
}

impl Drop for RunningTask {
    fn drop(&mut self) {
        let mut writes = local_writes();
        if let Some(count) = writes.running.get_mut(&self.write_id) {
            *count -= 1;
            if *count == 0 {
                writes.running.remove(&self.write_id);
            }
        }
    }
}

fn tasks_running(write_ids: &[String]) -> bool {
    let writes = local_writes();
    write_ids.iter().any(|id| writes.running.contains_key(id))
}

/// Marks writes as discarded (`true`) or forgets them (`false`).
fn set_discarded(write_ids: &[String], discarded: bool) {
    let mut writes = local_writes();
    for id in write_ids {
        match discarded {
            true => writes.discarded.insert(id.clone()),
            false => writes.discarded.remove(id),
        };
    }
}

/// Waits until no task of these writes runs in this process, or `limit` has passed.
async fn tasks_stopped(write_ids: &[String], limit: Duration) {
    let started = Instant::now();
    while tasks_running(write_ids) && started.elapsed() < limit {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// The directory a write's files go to; nothing else is ever written there.
pub fn write_location(metadata: &TableMetadata, write_id: &str) -> String {
    format!(
        "{}/{write_id}",
        data_location(metadata).trim_end_matches('/')
    )
}

/// A fresh write id (UUIDv7: directories sort by age).
pub fn new_write_id() -> String {
    uuid::Uuid::now_v7().to_string()
}

/// Directory of a write's staging files (bulk ingest): inside the write's directory.
pub fn staging_location(metadata: &TableMetadata, write_id: &str) -> String {
    format!("{}/_staging", write_location(metadata, write_id))
}

/// Deletes a write's staging files (once its job has ended: no task reads them any
/// more).
pub async fn discard_staging(planned: &Table, write_id: &str) {
    let location = staging_location(planned.metadata(), write_id);
    delete_all(planned.file_io(), &[location]).await;
}

/// How a write's files are committed.
pub enum WriteCommit {
    /// Added to the table's files.
    Append,
    /// Replacing some or all of the table's files.
    Overwrite(Overwrite),
}

/// Commits a write's files (see the module documentation for each outcome) and
/// returns the rows it added.
pub async fn commit_write(
    catalog: &dyn FloeCatalog,
    planned: &Table,
    write_id: &str,
    files: &[WrittenFile],
    how: &WriteCommit,
) -> Result<u64> {
    journal::crash_point("before-commit");
    let mut attempt = 1;
    loop {
        let outcome = match how {
            WriteCommit::Append => commit_append(catalog, planned, write_id, files).await,
            WriteCommit::Overwrite(overwrite) => {
                commit_overwrite(catalog, planned, write_id, files, overwrite).await
            }
        };
        match outcome {
            CommitOutcome::Committed(rows) => {
                journal::crash_point("after-commit");
                journal::end(write_id);
                metrics().written(rows, written_bytes(files), files.len() as u64);
                return Ok(rows);
            }
            CommitOutcome::NotCommitted(e)
                if e.kind == ErrorKind::Unavailable && attempt < COMMIT_ATTEMPTS =>
            {
                tracing::info!(write_id, "the catalog lost the commit; trying again: {e}");
                metrics().commit_retried();
                attempt += 1;
                tokio::time::sleep(RETRY_PAUSE).await;
            }
            CommitOutcome::NotCommitted(e) => {
                discard_writes(planned, &[write_id.to_string()]).await;
                return Err(e);
            }
            CommitOutcome::Unknown(e) => {
                tracing::warn!(
                    write_id,
                    location = write_location(planned.metadata(), write_id),
                    "commit outcome unknown; the write's files are kept for an orphan sweep"
                );
                return Err(e);
            }
        }
    }
}

fn written_bytes(files: &[WrittenFile]) -> u64 {
    files.iter().map(WrittenFile::size).sum()
}

/// Deletes the directories of writes that are definitely not committed, once their
/// tasks in this process have stopped, and again after [`SWEEP_DELAYS`] (tasks of a
/// failed job in other processes may still be finishing).
pub async fn discard_writes(planned: &Table, write_ids: &[String]) {
    set_discarded(write_ids, true);
    tasks_stopped(write_ids, TASK_STOP_WAIT).await;
    let locations: Vec<String> = write_ids
        .iter()
        .map(|id| write_location(planned.metadata(), id))
        .collect();
    let file_io = planned.file_io().clone();
    delete_all(&file_io, &locations).await;
    let write_ids = write_ids.to_vec();
    tokio::spawn(async move {
        let failed = Instant::now();
        for delay in SWEEP_DELAYS {
            tokio::time::sleep(delay).await;
            note_late_files(&file_io, &locations, failed.elapsed()).await;
            delete_all(&file_io, &locations).await;
        }
        // Until here a coordinator restart deletes them again.
        for write_id in &write_ids {
            journal::end(write_id);
        }
        set_discarded(&write_ids, false);
    });
}

/// Warns of each directory of a failed write that is there again after its deletion,
/// where the storage can tell (a local file system; an object store's prefix never
/// "exists").
async fn note_late_files(file_io: &FileIO, locations: &[String], since_failure: Duration) {
    for location in locations {
        if file_io.exists(location).await.unwrap_or(false) {
            tracing::warn!(
                location,
                seconds = since_failure.as_secs_f64(),
                "files of a failed write are there again (a task that finished after the \
                 write failed, or a deletion that failed); deleting them again"
            );
        }
    }
}

/// Deletes the given write directories. Some storages (the local file system) block
/// inside their async calls: the deletion runs on a blocking thread.
pub(super) async fn delete_all(file_io: &FileIO, locations: &[String]) {
    let (file_io, locations) = (file_io.clone(), locations.to_vec());
    let runtime = tokio::runtime::Handle::current();
    let deletion = tokio::task::spawn_blocking(move || {
        runtime.block_on(async {
            for location in &locations {
                // The trailing slash keeps an object store's prefix delete inside the
                // directory.
                if let Err(e) = file_io.delete_prefix(format!("{location}/")).await {
                    tracing::warn!("could not delete the files at {location}: {e}");
                }
            }
        })
    });
    if let Err(e) = deletion.await {
        tracing::warn!("deleting the files of a failed write stopped: {e}");
    }
}
