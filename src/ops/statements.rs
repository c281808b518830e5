//! The statements running now: admission, the query log, cancellation by id.
//!
//! Every statement a client sends is admitted first ([`Statements::admit`]): at most
//! `max_concurrent_statements` run at once, the others wait up to
//! `statement_queue_timeout_secs` and are then refused with `RESOURCE_EXHAUSTED`. The
//! [`Running`] guard an admitted statement gets holds its place until the statement
//! ends (a query: its last row streamed, or the client gone; between GetFlightInfo and
//! DoGet a query gives its place back and takes one again to run), then writes the
//! query log line (`floe::query`) and counts it in the metrics.
//!
//! While it runs, the statement's [`Scope`] is a task-local: the layers below read it
//! without it being passed through every call, to note the tables resolved, the jobs
//! submitted (for progress) and to stop when the statement is cancelled (`KILL`).

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use super::metrics::{StatementGauges, metrics};
use crate::error::{ErrorKind, FloeError, Result};

/// The longest statement text kept for the statement list.
const SQL_SHOWN: usize = 1000;

/// The statements admitted and waiting.
pub struct Statements {
    next_id: AtomicU64,
    running: Mutex<BTreeMap<u64, Entry>>,
    admission: Arc<Semaphore>,
    limit: usize,
    queue_timeout: Duration,
    queued: AtomicUsize,
}

/// What is known of a running statement.
struct Entry {
    user: String,
    kind: &'static str,
    sql: String,
    started_at: SystemTime,
    scope: Scope,
}

/// A running statement as `SHOW STATEMENTS` lists it.
#[derive(Debug, Clone)]
pub struct StatementInfo {
    pub id: u64,
    pub user: String,
    pub kind: &'static str,
    pub sql: String,
    pub started_at: SystemTime,
    pub jobs: Vec<String>,
    /// `running`, or `waiting` for its client to fetch it.
    pub state: &'static str,
}

/// What the layers below a statement see of it.
#[derive(Clone, Debug, Default)]
pub struct Scope {
    pub id: u64,
    cancel: CancellationToken,
    shared: Arc<Mutex<Shared>>,
}

#[derive(Debug, Default)]
struct Shared {
    tables: Vec<String>,
    jobs: Vec<String>,
    /// Planned and waiting for its client to fetch it (holding no place).
    waiting: bool,
}

tokio::task_local! {
    static CURRENT: Scope;
}

impl Scope {
    /// The scope of the statement the calling task works for, if any.
    pub fn current() -> Option<Scope> {
        CURRENT.try_with(Scope::clone).ok()
    }

    /// Runs `work` as part of this statement (in its scope and its log span).
    pub fn run<F: Future>(self, work: F) -> impl Future<Output = F::Output> {
        // No parent: work spawned for a statement is not nested in its caller's span.
        let span = tracing::info_span!(parent: None, "statement", id = self.id);
        CURRENT.scope(self, work).instrument(span)
    }

    /// Completes when the statement is cancelled by id (`KILL`).
    pub async fn cancelled(&self) {
        self.cancel.cancelled().await
    }

    pub fn is_cancelled(&self) -> bool {
        self.cancel.is_cancelled()
    }

    pub fn note_tables(&self, tables: Vec<String>) {
        self.with(|s| {
            for table in tables {
                if !s.tables.contains(&table) {
                    s.tables.push(table);
                }
            }
        });
    }

    fn with<R>(&self, f: impl FnOnce(&mut Shared) -> R) -> Option<R> {
        self.shared.lock().ok().map(|mut shared| f(&mut shared))
    }

    fn tables(&self) -> Vec<String> {
        self.with(|s| s.tables.clone()).unwrap_or_default()
    }

    /// The Ballista jobs the statement submitted so far.
    pub fn jobs(&self) -> Vec<String> {
        self.with(|s| s.jobs.clone()).unwrap_or_default()
    }
}

/// Notes that the current statement uses `tables` (for the query log).
pub fn note_tables(tables: Vec<String>) {
    if let Some(scope) = Scope::current() {
        scope.note_tables(tables);
    }
}

/// Notes that the current statement submitted Ballista job `job_id`.
pub fn note_job(job_id: &str) {
    if let Some(scope) = Scope::current() {
        scope.with(|s| s.jobs.push(job_id.to_string()));
    }
}

/// Spawns `work` in the current statement's scope (if any): a spawned task does not
/// inherit the task-local scope or the log span.
pub fn spawn<F>(work: F) -> tokio::task::JoinHandle<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    match Scope::current() {
        Some(scope) => tokio::spawn(scope.run(work)),
        None => tokio::spawn(work),
    }
}

/// Completes when the current statement is cancelled by id; never if there is none.
pub async fn current_cancelled() {
    match Scope::current() {
        Some(scope) => scope.cancelled().await,
        None => std::future::pending().await,
    }
}

/// The error of a statement cancelled by id.
pub fn killed() -> FloeError {
    FloeError::new(ErrorKind::Cancelled, "the statement was cancelled (KILL)")
}

impl Statements {
    /// `limit` statements at once (0: no limit); others wait up to `queue_timeout`.
    pub fn new(limit: usize, queue_timeout: Duration) -> Arc<Self> {
        let permits = match limit {
            0 => Semaphore::MAX_PERMITS,
            n => n,
        };
        Arc::new(Self {
            next_id: AtomicU64::new(1),
            running: Mutex::default(),
            admission: Arc::new(Semaphore::new(permits)),
            limit,
            queue_timeout,
            queued: AtomicUsize::new(0),
        })
    }

    /// Waits for a place for a statement of `user`; past the queue timeout refuses
    /// it with `RESOURCE_EXHAUSTED`.
    pub async fn admit(self: &Arc<Self>, user: &str, sql: &str) -> Result<Running> {
        let kind = statement_kind(sql);
        let started = Instant::now();
        // KILL and SHOW must work when the server is full: they are how it is relieved.
        let permit = match kind {
            "kill" | "show" => None,
            _ => match self.admission.clone().try_acquire_owned() {
                Ok(permit) => Some(permit),
                Err(_) => Some(self.wait_for_place(kind).await?),
            },
        };
        Ok(self.register(user, sql, kind, started, permit))
    }

    /// Logs and counts a statement that failed before it could run (while it was
    /// prepared).
    pub fn failed_early(self: &Arc<Self>, user: &str, sql: &str, error: &FloeError) {
        let running = self.register(user, sql, statement_kind(sql), Instant::now(), None);
        running.end(Err(error));
    }

    fn register(
        self: &Arc<Self>,
        user: &str,
        sql: &str,
        kind: &'static str,
        started: Instant,
        permit: Option<OwnedSemaphorePermit>,
    ) -> Running {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let scope = Scope {
            id,
            ..Scope::default()
        };
        let entry = Entry {
            user: user.to_string(),
            kind,
            sql: sql.chars().take(SQL_SHOWN).collect(),
            started_at: SystemTime::now(),
            scope: scope.clone(),
        };
        if let Ok(mut running) = self.running.lock() {
            running.insert(id, entry);
        }
        Running {
            registry: self.clone(),
            scope,
            user: user.to_string(),
            kind,
            started,
            permit,
            rows: 0,
            bytes: 0,
            ended: false,
        }
    }

    async fn wait_for_place(&self, kind: &'static str) -> Result<OwnedSemaphorePermit> {
        self.queued.fetch_add(1, Ordering::Relaxed);
        let waited =
            tokio::time::timeout(self.queue_timeout, self.admission.clone().acquire_owned()).await;
        self.queued.fetch_sub(1, Ordering::Relaxed);
        match waited {
            Ok(Ok(permit)) => Ok(permit),
            Ok(Err(_)) => Err(FloeError::unavailable("the server is shutting down")),
            Err(_) => {
                metrics().admission_rejected();
                metrics().statement_ended(kind, "resource_exhausted", self.queue_timeout);
                Err(FloeError::new(
                    ErrorKind::ResourceExhausted,
                    format!(
                        "the server is busy: {} statements are running and this one waited \
                         {} s for a place (max_concurrent_statements, \
                         statement_queue_timeout_secs); retry later",
                        self.limit,
                        self.queue_timeout.as_secs()
                    ),
                ))
            }
        }
    }

    /// The running statements, oldest first.
    pub fn list(&self) -> Vec<StatementInfo> {
        let Ok(running) = self.running.lock() else {
            return Vec::new();
        };
        running
            .iter()
            .map(|(id, entry)| StatementInfo {
                id: *id,
                user: entry.user.clone(),
                kind: entry.kind,
                sql: entry.sql.clone(),
                started_at: entry.started_at,
                jobs: entry.scope.jobs(),
                state: match entry.scope.with(|s| s.waiting).unwrap_or(false) {
                    true => "waiting",
                    false => "running",
                },
            })
            .collect()
    }

    /// Cancels statement `id` if `may_cancel` agrees to cancel a statement of its user.
    pub fn cancel(&self, id: u64, may_cancel: impl Fn(&str) -> bool) -> Result<()> {
        let running = self
            .running
            .lock()
            .map_err(|_| FloeError::internal("the statement list is unavailable"))?;
        match running.get(&id) {
            Some(entry) if may_cancel(&entry.user) => {
                entry.scope.cancel.cancel();
                Ok(())
            }
            _ => Err(FloeError::not_found(format!(
                "no running statement {id} that you may cancel"
            ))),
        }
    }

    pub fn gauges(&self) -> StatementGauges {
        StatementGauges {
            running: self.running.lock().map(|r| r.len()).unwrap_or(0),
            queued: self.queued.load(Ordering::Relaxed),
            limit: self.limit,
        }
    }
}

/// An admitted statement; ending it (or dropping it: the client went away) frees its
/// place and logs it.
pub struct Running {
    registry: Arc<Statements>,
    scope: Scope,
    user: String,
    kind: &'static str,
    started: Instant,
    permit: Option<OwnedSemaphorePermit>,
    rows: u64,
    bytes: u64,
    ended: bool,
}

impl Running {
    pub fn id(&self) -> u64 {
        self.scope.id
    }

    pub fn scope(&self) -> Scope {
        self.scope.clone()
    }

    /// Gives the statement's place back while it waits for its client (a query between
    /// GetFlightInfo and DoGet): a client that never fetches must not hold it.
    pub fn release_place(&mut self) {
        self.permit = None;
        self.scope.with(|s| s.waiting = true);
    }

    /// Takes a place again (see [`Self::release_place`]), waiting as [`Statements::admit`]
    /// does.
    pub async fn take_place(&mut self) -> Result<()> {
        if self.permit.is_some() {
            return Ok(());
        }
        let permit = match self.registry.admission.clone().try_acquire_owned() {
            Ok(permit) => permit,
            Err(_) => self.registry.wait_for_place(self.kind).await?,
        };
        self.permit = Some(permit);
        self.scope.with(|s| s.waiting = false);
        Ok(())
    }

    /// Counts rows streamed to the client.
    pub fn returned(&mut self, rows: u64, bytes: u64) {
        self.rows += rows;
        self.bytes += bytes;
        metrics().returned(rows, bytes);
    }

    /// Ends the statement: `rows` it returned or affected, or its error.
    pub fn end(mut self, outcome: std::result::Result<u64, &FloeError>) {
        let (status, error) = match outcome {
            Ok(rows) => {
                self.rows = self.rows.max(rows);
                ("ok", None)
            }
            Err(e) => (e.kind.name(), Some(e.message.as_str())),
        };
        self.log(status, error);
    }

    fn log(&mut self, status: &'static str, error: Option<&str>) {
        self.ended = true;
        if let Ok(mut running) = self.registry.running.lock() {
            running.remove(&self.scope.id);
        }
        let took = self.started.elapsed();
        metrics().statement_ended(self.kind, status, took);
        tracing::info!(
            target: "floe::query",
            statement = self.scope.id,
            user = %self.user,
            kind = self.kind,
            tables = %self.scope.tables().join(","),
            duration_ms = took.as_millis() as u64,
            rows = self.rows,
            bytes = self.bytes,
            status,
            error = error.unwrap_or(""),
            "statement ended"
        );
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if !self.ended {
            let status = match self.scope.is_cancelled() {
                true => "cancelled",
                false => "abandoned",
            };
            self.log(status, None);
        }
    }
}

/// The statement's kind for metrics and the log: its first keyword, from a closed set.
pub fn statement_kind(sql: &str) -> &'static str {
    let first = sql
        .trim_start_matches(|c: char| c.is_whitespace() || c == '(')
        .split(|c: char| !c.is_ascii_alphabetic())
        .next()
        .unwrap_or("")
        .to_ascii_lowercase();
    match first.as_str() {
        "select" | "with" | "values" | "table" | "from" => "query",
        "explain" | "describe" => "explain",
        "show" => "show",
        "insert" => "insert",
        "delete" => "delete",
        "update" => "update",
        "merge" => "merge",
        "create" => "create",
        "drop" => "drop",
        "alter" => "alter",
        "call" => "call",
        "kill" => "kill",
        "ingest" => "ingest",
        _ => "other",
    }
}
