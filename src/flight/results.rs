//! Results between GetFlightInfo and DoGet, and while DoGet streams them.
//!
//! A result waits at most [`TICKET_TTL`], and at most [`MAX_PENDING`] results wait at
//! once: a new one evicts the oldest. A DoGet for a result that is gone says why.
//! CancelFlightInfo drops a waiting result, or stops one being streamed (and with it
//! its Ballista job).

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use crate::cluster::RESULT_RETENTION;
use crate::error::{ErrorKind, FloeError};
use crate::ops::statements::Running;
use crate::sql::Outcome;

/// How long a ticket stays valid.
pub const TICKET_TTL: Duration = Duration::from_secs(600);

/// How many results may wait for their DoGet at once.
pub const MAX_PENDING: usize = 1024;

/// How many dropped results are remembered, to tell their DoGet what happened.
const REMEMBERED: usize = 4 * MAX_PENDING;

// A query's result must outlive its ticket on the executors.
const _: () = assert!(TICKET_TTL.as_secs() <= RESULT_RETENTION.as_secs());

/// Statements described by GetFlightInfo and waiting for their DoGet. A ticket is
/// taken by its first DoGet.
#[derive(Clone, Default)]
pub struct PendingResults {
    state: Arc<Mutex<State>>,
}

#[derive(Default)]
struct State {
    entries: HashMap<Vec<u8>, Waiting>,
    /// Handles in the order they were inserted (some may be taken already).
    order: VecDeque<Vec<u8>>,
    /// Results taken by a DoGet that is still streaming them.
    streaming: HashMap<Vec<u8>, CancellationToken>,
    /// Recently dropped results, and why, for their DoGet.
    gone: VecDeque<(Vec<u8>, Gone)>,
}

/// A result waiting for its DoGet, and the statement it belongs to (a query's
/// statement ends when its rows have been streamed).
struct Waiting {
    created: Instant,
    outcome: Outcome,
    running: Option<Running>,
}

#[derive(Clone, Copy)]
enum Gone {
    Evicted,
    Cancelled,
}

/// What CancelFlightInfo did with a result.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cancelled {
    /// It was waiting, and is dropped.
    Dropped,
    /// It was being streamed; the stream ends with CANCELLED.
    Stopped,
    /// Unknown, finished or already gone.
    Nothing,
}

/// A result taken by its DoGet.
pub struct Taken {
    pub outcome: Outcome,
    pub running: Option<Running>,
    pub streaming: Streaming,
}

/// A result being streamed; dropping it ends the registration.
pub struct Streaming {
    state: Arc<Mutex<State>>,
    handle: Vec<u8>,
    pub token: CancellationToken,
}

impl Drop for Streaming {
    fn drop(&mut self) {
        if let Ok(mut state) = self.state.lock() {
            state.streaming.remove(&self.handle);
        }
    }
}

impl PendingResults {
    pub fn insert(&self, outcome: Outcome, running: Option<Running>) -> Vec<u8> {
        let handle = uuid::Uuid::new_v4().as_bytes().to_vec();
        if let Ok(mut state) = self.state.lock() {
            state.expire();
            while state.entries.len() >= MAX_PENDING {
                state.evict_oldest();
            }
            let waiting = Waiting {
                created: Instant::now(),
                outcome,
                running,
            };
            state.entries.insert(handle.clone(), waiting);
            state.order.push_back(handle.clone());
        }
        handle
    }

    /// Takes the result for its DoGet; the returned token is cancelled if
    /// CancelFlightInfo names the result while it streams.
    pub fn take(&self, handle: &[u8]) -> Result<Taken, FloeError> {
        let mut state = self
            .state
            .lock()
            .map_err(|_| FloeError::internal("pending results are unavailable"))?;
        state.expire();
        if let Some(waiting) = state.entries.remove(handle) {
            let token = CancellationToken::new();
            state.streaming.insert(handle.to_vec(), token.clone());
            let streaming = Streaming {
                state: self.state.clone(),
                handle: handle.to_vec(),
                token,
            };
            return Ok(Taken {
                outcome: waiting.outcome,
                running: waiting.running,
                streaming,
            });
        }
        let gone = state
            .gone
            .iter()
            .find(|(h, _)| h == handle)
            .map(|(_, why)| *why);
        Err(match gone {
            Some(Gone::Evicted) => FloeError::new(
                ErrorKind::ResourceExhausted,
                format!(
                    "result evicted: more than {MAX_PENDING} results were waiting to be \
                     fetched; run the statement again and fetch it promptly"
                ),
            ),
            Some(Gone::Cancelled) => cancelled(),
            None => FloeError::not_found(format!(
                "result not found: tickets are single-use and expire after {} minutes",
                TICKET_TTL.as_secs() / 60
            )),
        })
    }

    pub fn cancel(&self, handle: &[u8]) -> Cancelled {
        let Ok(mut state) = self.state.lock() else {
            return Cancelled::Nothing;
        };
        if state.entries.remove(handle).is_some() {
            state.remember(handle.to_vec(), Gone::Cancelled);
            return Cancelled::Dropped;
        }
        match state.streaming.get(handle) {
            Some(token) => {
                token.cancel();
                Cancelled::Stopped
            }
            None => Cancelled::Nothing,
        }
    }
}

/// The error a cancelled statement ends with.
pub fn cancelled() -> FloeError {
    FloeError::new(
        ErrorKind::Cancelled,
        "the statement was cancelled (CancelFlightInfo)",
    )
}

impl State {
    fn expire(&mut self) {
        while let Some(handle) = self.order.front() {
            match self.entries.get(handle) {
                Some(waiting) if waiting.created.elapsed() < TICKET_TTL => break,
                _ => {
                    let handle = self.order.pop_front();
                    if let Some(handle) = handle {
                        self.entries.remove(&handle);
                    }
                }
            }
        }
    }

    fn evict_oldest(&mut self) {
        let Some(handle) = self.order.pop_front() else {
            return;
        };
        if self.entries.remove(&handle).is_some() {
            self.remember(handle, Gone::Evicted);
        }
    }

    fn remember(&mut self, handle: Vec<u8>, why: Gone) {
        self.gone.push_back((handle, why));
        if self.gone.len() > REMEMBERED {
            self.gone.pop_front();
        }
    }
}
