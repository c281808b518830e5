//! Results held between GetFlightInfo and DoGet are bounded, and say why they are gone.

use std::sync::Arc;

use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::datatypes::Schema;
use floe::error::ErrorKind;
use floe::flight::results::{MAX_PENDING, PendingResults};
use floe::sql::Outcome;

fn done() -> Outcome {
    Outcome::Done {
        rows: RecordBatch::new_empty(Arc::new(Schema::empty())),
        affected: 0,
    }
}

#[test]
fn the_oldest_result_is_evicted_with_a_clear_error() {
    let pending = PendingResults::default();
    let handles: Vec<Vec<u8>> = (0..=MAX_PENDING)
        .map(|_| pending.insert(done(), None))
        .collect();
    let evicted = pending.take(&handles[0]).err().expect("evicted");
    assert_eq!(evicted.kind, ErrorKind::ResourceExhausted);
    assert!(evicted.message.contains("evicted"), "{}", evicted.message);
    assert!(pending.take(&handles[1]).is_ok());
    assert!(pending.take(&handles[MAX_PENDING]).is_ok());
    let taken = pending.take(&handles[1]).err().expect("single use");
    assert_eq!(taken.kind, ErrorKind::NotFound);
    assert_eq!(
        pending.take(b"bogus").err().expect("unknown").kind,
        ErrorKind::NotFound
    );
}
