//! Arrow data a client sends with DoPut (bound parameters, bulk ingest).

use arrow_flight::decode::FlightRecordBatchStream;
use arrow_flight::error::FlightError;
use arrow_flight::sql::server::PeekableFlightDataStream;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::arrow::record_batch::RecordBatch;
use futures::TryStreamExt;
use tonic::Status;

/// Every batch of the stream, and its schema (`None` if the client sent no schema).
pub async fn read_batches(
    stream: PeekableFlightDataStream,
) -> Result<(Option<SchemaRef>, Vec<RecordBatch>), Status> {
    let mut batches =
        FlightRecordBatchStream::new_from_flight_data(stream.map_err(FlightError::from));
    let mut collected = Vec::new();
    while let Some(batch) = batches
        .try_next()
        .await
        .map_err(|e| Status::invalid_argument(format!("reading the uploaded data: {e}")))?
    {
        collected.push(batch);
    }
    Ok((batches.schema().cloned(), collected))
}
