//! `SHOW STATEMENTS` and `KILL [QUERY] <id>`: the statements running now, and
//! cancelling one. A user sees and cancels their own statements; a user who may change
//! every namespace (`write = ["*"]`) sees and cancels everyone's.

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use datafusion::arrow::array::{
    ArrayRef, Float64Array, Int64Array, RecordBatch, StringArray, TimestampMicrosecondArray,
};
use datafusion::arrow::datatypes::{DataType, Field, Schema, TimeUnit};

use super::{Caller, Engine};
use crate::error::Result;

/// Whether `sql` is `SHOW STATEMENTS` (which sqlparser does not know).
pub fn is_show_statements(sql: &str) -> bool {
    let words: Vec<String> = sql
        .trim()
        .trim_end_matches(';')
        .split_whitespace()
        .map(str::to_ascii_lowercase)
        .collect();
    words == ["show", "statements"]
}

impl Engine {
    /// One row per running statement the caller may see, oldest first.
    pub(super) async fn show_statements(&self, caller: &Caller) -> Result<RecordBatch> {
        let statements: Vec<_> = self
            .statements()
            .list()
            .into_iter()
            .filter(|s| caller.access.may_manage_statements_of(&s.user))
            .collect();
        let mut progress = Vec::with_capacity(statements.len());
        for statement in &statements {
            progress.push(self.progress(&statement.jobs).await);
        }
        let now = SystemTime::now();
        let micros = |t: SystemTime| {
            t.duration_since(UNIX_EPOCH)
                .map(|d| d.as_micros() as i64)
                .unwrap_or(0)
        };
        let columns: Vec<ArrayRef> = vec![
            Arc::new(Int64Array::from_iter_values(
                statements.iter().map(|s| s.id as i64),
            )),
            Arc::new(StringArray::from_iter_values(
                statements.iter().map(|s| s.user.as_str()),
            )),
            Arc::new(StringArray::from_iter_values(
                statements.iter().map(|s| s.kind),
            )),
            Arc::new(StringArray::from_iter_values(
                statements.iter().map(|s| s.state),
            )),
            Arc::new(
                TimestampMicrosecondArray::from_iter_values(
                    statements.iter().map(|s| micros(s.started_at)),
                )
                .with_timezone("UTC"),
            ),
            Arc::new(Int64Array::from_iter_values(statements.iter().map(|s| {
                now.duration_since(s.started_at)
                    .map(|d| d.as_millis() as i64)
                    .unwrap_or(0)
            }))),
            Arc::new(Float64Array::from(progress)),
            Arc::new(StringArray::from_iter_values(
                statements.iter().map(|s| s.sql.as_str()),
            )),
        ];
        Ok(RecordBatch::try_new(statements_schema(), columns)?)
    }

    /// Cancels statement `id`: its job stops and its client gets `CANCELLED`.
    pub(super) fn kill(&self, caller: &Caller, id: u64) -> Result<()> {
        self.statements()
            .cancel(id, |user| caller.access.may_manage_statements_of(user))
    }
}

pub(super) fn statements_schema() -> Arc<Schema> {
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("user", DataType::Utf8, false),
        Field::new("kind", DataType::Utf8, false),
        Field::new("state", DataType::Utf8, false),
        Field::new(
            "started_at",
            DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
            false,
        ),
        Field::new("elapsed_ms", DataType::Int64, false),
        Field::new("progress", DataType::Float64, true),
        Field::new("sql", DataType::Utf8, false),
    ]))
}
