//! Prepared statements: the server keeps each one's SQL and bound parameters under a
//! random handle, for the user who prepared it, until it is closed or has been idle for
//! [`IDLE`].
//!
//! Clients such as ADBC prepare every statement they run and execute it at once. A query
//! without parameters is therefore kept as planned when it was prepared, and its first
//! execution within [`FRESH`] runs that plan (with the snapshots it pinned then) rather
//! than planning it again. Every other execution plans it anew.

use std::time::{Duration, Instant};

use arrow_flight::sql::server::PeekableFlightDataStream;
use bytes::Bytes;
use datafusion::arrow::compute::concat_batches;
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::common::ScalarValue;
use tonic::Status;

use super::store::Store;
use super::upload::read_batches;
use crate::sql::Query;

/// A prepared statement unused this long is forgotten.
pub const IDLE: Duration = Duration::from_secs(3600);
/// At most this many prepared statements are kept (all users together).
pub const CAPACITY: usize = 10_000;
/// How long the plan made when preparing stays good for the first execution.
pub const FRESH: Duration = Duration::from_secs(1);

#[derive(Clone)]
pub struct Handle {
    pub sql: String,
    /// Bound parameter rows, one column per parameter.
    pub parameters: Option<RecordBatch>,
}

struct Kept {
    handle: Handle,
    /// The plan made when preparing, and when.
    plan: Option<(Instant, Box<Query>)>,
}

pub struct PreparedStatements(Store<Kept>);

impl Default for PreparedStatements {
    fn default() -> Self {
        Self::new(IDLE, CAPACITY)
    }
}

impl PreparedStatements {
    pub fn new(idle: Duration, capacity: usize) -> Self {
        Self(Store::new("prepared statements", idle, capacity))
    }

    /// Keeps `sql` for `owner`, with `plan` if it was planned just now; returns its
    /// handle.
    pub fn create(
        &self,
        owner: &str,
        sql: &str,
        plan: Option<Box<Query>>,
    ) -> Result<Bytes, Status> {
        let key = uuid::Uuid::new_v4().simple().to_string();
        let kept = Kept {
            handle: Handle {
                sql: sql.to_string(),
                parameters: None,
            },
            plan: plan.map(|plan| (Instant::now(), plan)),
        };
        self.0
            .insert(key.clone(), owner, kept)
            .map_err(super::status)?;
        Ok(Bytes::from(key))
    }

    /// The statement under `handle`, if `owner` prepared it and it is still kept.
    pub fn get(&self, handle: &[u8], owner: &str) -> Result<Handle, Status> {
        self.0
            .with(key(handle)?, owner, |kept| kept.handle.clone())
            .ok_or_else(not_found)
    }

    /// The plan made when `handle` was prepared, if this is its first execution, within
    /// [`FRESH`] of preparing, without parameters bound.
    pub fn take_fresh_plan(&self, handle: &[u8], owner: &str) -> Option<Box<Query>> {
        let key = key(handle).ok()?;
        self.0
            .with(key, owner, |kept| kept.plan.take())
            .flatten()
            .filter(|(planned, _)| planned.elapsed() < FRESH)
            .map(|(_, plan)| plan)
    }

    /// Binds parameter rows (`None`: unbinds).
    pub fn bind(
        &self,
        handle: &[u8],
        owner: &str,
        parameters: Option<RecordBatch>,
    ) -> Result<(), Status> {
        self.0
            .with(key(handle)?, owner, |kept| {
                kept.handle.parameters = parameters;
                kept.plan = None;
            })
            .ok_or_else(not_found)
    }

    pub fn close(&self, handle: &[u8], owner: &str) -> Result<(), Status> {
        match self.0.remove(key(handle)?, owner) {
            true => Ok(()),
            false => Err(not_found()),
        }
    }
}

fn key(handle: &[u8]) -> Result<&str, Status> {
    std::str::from_utf8(handle).map_err(|_| not_found())
}

fn not_found() -> Status {
    Status::not_found(
        "prepared statement not found: it was closed, was idle too long, or belongs to \
         another user; prepare it again",
    )
}

/// The parameter rows a client sent with DoPut (none if it sent no rows).
pub async fn read_parameters(
    stream: PeekableFlightDataStream,
) -> Result<Option<RecordBatch>, Status> {
    let (_, batches) = read_batches(stream).await?;
    let Some(first) = batches.first() else {
        return Ok(None);
    };
    let batch = concat_batches(&first.schema(), &batches)
        .map_err(|e| Status::invalid_argument(format!("parameters: {e}")))?;
    Ok((batch.num_rows() > 0).then_some(batch))
}

/// Each parameter row as the values of `$1`, `$2`, ….
pub fn rows(parameters: Option<&RecordBatch>) -> Result<Vec<Vec<ScalarValue>>, Status> {
    let Some(batch) = parameters else {
        return Ok(Vec::new());
    };
    (0..batch.num_rows())
        .map(|row| {
            batch
                .columns()
                .iter()
                .map(|column| ScalarValue::try_from_array(column, row))
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| Status::invalid_argument(format!("parameter row {row}: {e}")))
        })
        .collect()
}

/// The parameters of a query: none, or one row of them.
pub fn query_row(parameters: Option<&RecordBatch>) -> Result<Vec<ScalarValue>, Status> {
    match rows(parameters)?.as_slice() {
        [] => Ok(Vec::new()),
        [row] => Ok(row.clone()),
        rows => Err(Status::invalid_argument(format!(
            "a query takes one row of parameters, got {}",
            rows.len()
        ))),
    }
}
