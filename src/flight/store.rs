//! Per-user state kept between calls (sessions, prepared statements): each entry
//! belongs to the user who made it, is forgotten after it has not been used for a
//! while, and there is a limit on how many are kept.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::error::{ErrorKind, FloeError, Result};

pub struct Store<V> {
    entries: Mutex<HashMap<String, Entry<V>>>,
    idle: Duration,
    capacity: usize,
    /// What the entries are, for errors ("prepared statements").
    what: &'static str,
}

struct Entry<V> {
    owner: String,
    value: V,
    last_used: Instant,
}

impl<V> Store<V> {
    pub fn new(what: &'static str, idle: Duration, capacity: usize) -> Self {
        Self {
            entries: Mutex::default(),
            idle,
            capacity,
            what,
        }
    }

    /// Keeps `value` under `key` for `owner` (replacing what `key` held). When the
    /// store is full even after forgetting idle entries: RESOURCE_EXHAUSTED.
    pub fn insert(&self, key: String, owner: &str, value: V) -> Result<()> {
        let mut entries = self.lock();
        if entries.len() >= self.capacity && !entries.contains_key(&key) {
            let idle = self.idle;
            entries.retain(|_, entry| entry.last_used.elapsed() < idle);
            if entries.len() >= self.capacity {
                return Err(FloeError::new(
                    ErrorKind::ResourceExhausted,
                    format!(
                        "the server keeps at most {} {}; close some",
                        self.capacity, self.what
                    ),
                ));
            }
        }
        let entry = Entry {
            owner: owner.to_string(),
            value,
            last_used: Instant::now(),
        };
        entries.insert(key, entry);
        Ok(())
    }

    /// Runs `f` on the entry under `key` if `owner` owns it and it has not expired;
    /// `None` otherwise (another user's entry looks the same as a missing one).
    pub fn with<R>(&self, key: &str, owner: &str, f: impl FnOnce(&mut V) -> R) -> Option<R> {
        let mut entries = self.lock();
        let entry = entries.get_mut(key)?;
        if entry.last_used.elapsed() >= self.idle {
            entries.remove(key);
            return None;
        }
        if entry.owner != owner {
            return None;
        }
        entry.last_used = Instant::now();
        Some(f(&mut entry.value))
    }

    /// Forgets the entry under `key` if `owner` owns it; whether there was one.
    pub fn remove(&self, key: &str, owner: &str) -> bool {
        let mut entries = self.lock();
        match entries.get(key) {
            Some(entry) if entry.owner == owner => entries.remove(key).is_some(),
            _ => false,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Entry<V>>> {
        // The map stays consistent whatever a panicking holder did: every change is
        // one insert or remove.
        self.entries
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}
