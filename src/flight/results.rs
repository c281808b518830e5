//! Results between GetFlightInfo and DoGet.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::sql::Outcome;

/// How long a ticket stays valid.
const TICKET_TTL: Duration = Duration::from_secs(600);

/// Statements described by GetFlightInfo and waiting for their DoGet. A ticket is
/// taken by its first DoGet.
#[derive(Default)]
pub struct PendingResults {
    entries: Mutex<HashMap<Vec<u8>, (Instant, Outcome)>>,
}

impl PendingResults {
    pub fn insert(&self, outcome: Outcome) -> Vec<u8> {
        let handle = uuid::Uuid::new_v4().as_bytes().to_vec();
        if let Ok(mut entries) = self.entries.lock() {
            entries.retain(|_, (created, _)| created.elapsed() < TICKET_TTL);
            entries.insert(handle.clone(), (Instant::now(), outcome));
        }
        handle
    }

    pub fn take(&self, handle: &[u8]) -> Option<Outcome> {
        let mut entries = self.entries.lock().ok()?;
        entries
            .remove(handle)
            .filter(|(created, _)| created.elapsed() < TICKET_TTL)
            .map(|(_, outcome)| outcome)
    }
}
