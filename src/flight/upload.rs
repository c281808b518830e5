//! Arrow data a client sends with DoPut (bound parameters, bulk ingest).

use arrow_flight::decode::{DecodedPayload, FlightDataDecoder, FlightRecordBatchStream};
use arrow_flight::error::FlightError;
use arrow_flight::sql::server::PeekableFlightDataStream;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::execution::SendableRecordBatchStream;
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use futures::{StreamExt, TryStreamExt};
use tonic::{Code, Status};

use crate::error::{ErrorKind, FloeError};

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

/// The uploaded batches as a stream read as they arrive (nothing is buffered here);
/// `None` if the client sent no schema. The stream fails if the client goes away, sends
/// data that does not decode, or changes the schema half-way.
pub async fn upload_stream(
    stream: PeekableFlightDataStream,
) -> Result<Option<SendableRecordBatchStream>, Status> {
    let mut decoder = FlightDataDecoder::new(stream.map_err(FlightError::from));
    let schema = loop {
        match decoder.next().await {
            None => return Ok(None),
            Some(Err(e)) => return Err(crate::flight::status(upload_error(e))),
            Some(Ok(data)) => match data.payload {
                DecodedPayload::Schema(schema) => break schema,
                DecodedPayload::None => continue,
                DecodedPayload::RecordBatch(_) => {
                    return Err(Status::invalid_argument(
                        "ingest: the upload sent a batch before its schema",
                    ));
                }
            },
        }
    };
    let expected = schema.clone();
    let batches = decoder.filter_map(move |data| {
        let item = match data {
            Err(e) => Some(Err(upload_error(e).into())),
            Ok(data) => match data.payload {
                DecodedPayload::RecordBatch(batch) => Some(Ok(batch)),
                DecodedPayload::Schema(schema) if schema == expected => None,
                DecodedPayload::Schema(_) => Some(Err(FloeError::invalid(
                    "ingest: the upload changed its schema half-way",
                )
                .into())),
                DecodedPayload::None => None,
            },
        };
        std::future::ready(item)
    });
    Ok(Some(Box::pin(RecordBatchStreamAdapter::new(
        schema, batches,
    ))))
}

/// A broken upload: the client's transport failing or going away, or data that does
/// not decode.
fn upload_error(error: FlightError) -> FloeError {
    match error {
        FlightError::Tonic(status) if status.code() == Code::Cancelled => FloeError::new(
            ErrorKind::Cancelled,
            "ingest: the client cancelled the upload",
        ),
        FlightError::Tonic(status) => FloeError::new(
            ErrorKind::Cancelled,
            format!(
                "ingest: the upload broke off before its end: {}",
                status.message()
            ),
        ),
        other => FloeError::invalid(format!("ingest: reading the uploaded data: {other}")),
    }
}
