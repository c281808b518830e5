//! Prepared statement handles. A handle carries the statement's SQL and, once a
//! client has bound parameters (DoPut), their values: the server keeps nothing between
//! calls, and DoPut answers with the new handle, as the spec allows.

use arrow_flight::sql::server::PeekableFlightDataStream;
use bytes::Bytes;
use datafusion::arrow::compute::concat_batches;
use datafusion::arrow::ipc::reader::StreamReader;
use datafusion::arrow::ipc::writer::StreamWriter;
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::common::ScalarValue;
use tonic::Status;

use super::upload::read_batches;

/// Marks a handle with bound parameters; a plain handle is the SQL text itself.
const WITH_PARAMETERS: &[u8] = b"floe-prepared-1\n";

pub struct Handle {
    pub sql: String,
    /// Bound parameter rows, one column per parameter.
    pub parameters: Option<RecordBatch>,
}

pub fn encode(sql: &str, parameters: Option<&RecordBatch>) -> Result<Bytes, Status> {
    let Some(parameters) = parameters else {
        return Ok(Bytes::copy_from_slice(sql.as_bytes()));
    };
    let mut handle = WITH_PARAMETERS.to_vec();
    handle.extend_from_slice(&(sql.len() as u64).to_le_bytes());
    handle.extend_from_slice(sql.as_bytes());
    let ipc = (|| {
        let mut writer = StreamWriter::try_new(Vec::new(), &parameters.schema())?;
        writer.write(parameters)?;
        writer.finish()?;
        writer.into_inner()
    })()
    .map_err(|e| Status::internal(format!("encoding bound parameters: {e}")))?;
    handle.extend_from_slice(&ipc);
    Ok(handle.into())
}

pub fn decode(handle: &[u8]) -> Result<Handle, Status> {
    let invalid = || Status::invalid_argument("prepared statement handle is not valid");
    let Some(rest) = handle.strip_prefix(WITH_PARAMETERS) else {
        let sql = std::str::from_utf8(handle).map_err(|_| invalid())?;
        return Ok(Handle {
            sql: sql.to_string(),
            parameters: None,
        });
    };
    let (length, rest) = rest.split_first_chunk::<8>().ok_or_else(invalid)?;
    let length = usize::try_from(u64::from_le_bytes(*length)).map_err(|_| invalid())?;
    let sql = rest.get(..length).ok_or_else(invalid)?;
    let sql = std::str::from_utf8(sql).map_err(|_| invalid())?.to_string();
    let reader = StreamReader::try_new(&rest[length..], None).map_err(|_| invalid())?;
    let schema = reader.schema();
    let batches = reader
        .collect::<Result<Vec<_>, _>>()
        .map_err(|_| invalid())?;
    let parameters = concat_batches(&schema, &batches).map_err(|_| invalid())?;
    Ok(Handle {
        sql,
        parameters: Some(parameters),
    })
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
