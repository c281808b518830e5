//! Results between GetFlightInfo and DoGet.
//!
//! A result waits at most [`TICKET_TTL`], and at most [`MAX_PENDING`] results wait at
//! once: a new one evicts the oldest. A DoGet for a result that is gone says why.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::cluster::RESULT_RETENTION;
use crate::error::{ErrorKind, FloeError};
use crate::sql::Outcome;

/// How long a ticket stays valid.
pub const TICKET_TTL: Duration = Duration::from_secs(600);

/// How many results may wait for their DoGet at once.
pub const MAX_PENDING: usize = 1024;

/// How many evicted tickets are remembered, to tell their DoGet what happened.
const REMEMBERED_EVICTIONS: usize = 4 * MAX_PENDING;

// A query's result must outlive its ticket on the executors.
const _: () = assert!(TICKET_TTL.as_secs() <= RESULT_RETENTION.as_secs());

/// Statements described by GetFlightInfo and waiting for their DoGet. A ticket is
/// taken by its first DoGet.
#[derive(Default)]
pub struct PendingResults {
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    entries: HashMap<Vec<u8>, (Instant, Outcome)>,
    /// Handles in the order they were inserted (some may be taken already).
    order: VecDeque<Vec<u8>>,
    evicted: VecDeque<Vec<u8>>,
}

impl PendingResults {
    pub fn insert(&self, outcome: Outcome) -> Vec<u8> {
        let handle = uuid::Uuid::new_v4().as_bytes().to_vec();
        if let Ok(mut state) = self.state.lock() {
            state.expire();
            while state.entries.len() >= MAX_PENDING {
                state.evict_oldest();
            }
            state
                .entries
                .insert(handle.clone(), (Instant::now(), outcome));
            state.order.push_back(handle.clone());
        }
        handle
    }

    pub fn take(&self, handle: &[u8]) -> Result<Outcome, FloeError> {
        let mut state = self
            .state
            .lock()
            .map_err(|_| FloeError::internal("pending results are unavailable"))?;
        state.expire();
        if let Some((_, outcome)) = state.entries.remove(handle) {
            return Ok(outcome);
        }
        Err(if state.evicted.iter().any(|h| h == handle) {
            FloeError::new(
                ErrorKind::ResourceExhausted,
                format!(
                    "result evicted: more than {MAX_PENDING} results were waiting to be \
                     fetched; run the statement again and fetch it promptly"
                ),
            )
        } else {
            FloeError::not_found(format!(
                "result not found: tickets are single-use and expire after {} minutes",
                TICKET_TTL.as_secs() / 60
            ))
        })
    }
}

impl State {
    fn expire(&mut self) {
        while let Some(handle) = self.order.front() {
            match self.entries.get(handle) {
                Some((created, _)) if created.elapsed() < TICKET_TTL => break,
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
            self.evicted.push_back(handle);
            if self.evicted.len() > REMEMBERED_EVICTIONS {
                self.evicted.pop_front();
            }
        }
    }
}
