//! Staging files of a bulk ingest: the coordinator spools the uploaded stream into them
//! as it arrives, executors read them back (`staged_scan`). Where they live and who
//! deletes them is set down in `write_protocol`.
//!
//! The format is Parquet, written for speed: no compression, no dictionaries, no
//! statistics, a row group per [`WRITE_CHUNK_BYTES`] or so. The files live inside the
//! table's data directory, where object stores that guard table locations (S3 table
//! buckets, SeaweedFS) accept data files only (`.parquet`, `.avro`, `.orc`), and where
//! vended credentials, scoped to the table, reach. The Arrow schema travels in the file
//! (parquet's `ARROW:schema`), so the batches come back in the types sent, for the
//! INSERT's own conversions. Compressing would make the coordinator's CPU (every byte of
//! an ingest passes through it) the bottleneck for files that are read once, shortly
//! after.

use std::sync::Arc;

use bytes::Bytes;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::arrow::ipc::writer::IpcWriteOptions;
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::execution::SendableRecordBatchStream;
use datafusion::parquet::arrow::{ArrowWriter, ParquetRecordBatchStreamBuilder};
use datafusion::parquet::basic::Compression;
use datafusion::parquet::file::properties::{EnabledStatistics, WriterProperties};
use datafusion::physical_plan::common::spawn_buffered;
use futures::{Stream, StreamExt, TryStreamExt};
use iceberg::arrow::ArrowFileReader;
use iceberg::io::{FileIO, FileMetadata, FileWrite};

use crate::error::{FloeError, Result};

/// Rows per batch read back (DataFusion's default batch size).
const READ_BATCH_ROWS: usize = 8192;

/// A row group is closed, and its bytes handed to storage, once it holds this many.
const WRITE_CHUNK_BYTES: usize = 4 * 1024 * 1024;

/// One finished staging file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StagedFile {
    pub path: String,
    /// Length of the file in bytes.
    pub size: u64,
    pub rows: u64,
}

/// Writes `upload` into staging files under `location`, as it arrives, starting a new
/// file once one holds `file_bytes`; returns the files in upload order. Holds at most
/// two batches and one row group in memory. On an error, files already written stay:
/// the caller deletes `location`.
pub async fn spool(
    upload: SendableRecordBatchStream,
    file_io: &FileIO,
    location: &str,
    name_prefix: &str,
    file_bytes: u64,
) -> Result<Vec<StagedFile>> {
    // Decoding the upload and encoding the files each take a core: side by side.
    let mut upload = spawn_buffered(upload, 1);
    let schema = upload.schema();
    let mut staged = Vec::new();
    let mut current: Option<StagingWriter> = None;
    while let Some(batch) = upload.next().await {
        let batch = batch?;
        if batch.num_rows() == 0 {
            continue;
        }
        let writer = match &mut current {
            Some(writer) => writer,
            None => {
                let path = format!(
                    "{}/{name_prefix}-{:05}.parquet",
                    location.trim_end_matches('/'),
                    staged.len()
                );
                current.insert(StagingWriter::create(file_io, path, &schema).await?)
            }
        };
        writer.write(&batch).await?;
        if writer.len() >= file_bytes
            && let Some(full) = current.take()
        {
            staged.push(full.finish().await?);
        }
    }
    if let Some(last) = current.take() {
        staged.push(last.finish().await?);
    }
    Ok(staged)
}

/// One staging file being written: batches are encoded into `encoder`'s buffer and
/// moved to storage whenever a row group is complete.
struct StagingWriter {
    path: String,
    encoder: ArrowWriter<Vec<u8>>,
    file: Box<dyn FileWrite>,
    /// Bytes handed to storage so far.
    size: u64,
    rows: u64,
}

impl StagingWriter {
    async fn create(file_io: &FileIO, path: String, schema: &SchemaRef) -> Result<Self> {
        let file = file_io.new_output(&path)?.writer().await?;
        let properties = WriterProperties::builder()
            .set_compression(Compression::UNCOMPRESSED)
            .set_dictionary_enabled(false)
            .set_statistics_enabled(EnabledStatistics::None)
            .build();
        let encoder = ArrowWriter::try_new(Vec::new(), schema.clone(), Some(properties))
            .map_err(|e| staging_error(&path, e))?;
        Ok(Self {
            path,
            encoder,
            file,
            size: 0,
            rows: 0,
        })
    }

    async fn write(&mut self, batch: &RecordBatch) -> Result<()> {
        self.encoder
            .write(batch)
            .map_err(|e| staging_error(&self.path, e))?;
        self.rows += batch.num_rows() as u64;
        if self.encoder.in_progress_size() >= WRITE_CHUNK_BYTES {
            self.encoder
                .flush()
                .map_err(|e| staging_error(&self.path, e))?;
            self.hand_over().await?;
        }
        Ok(())
    }

    /// Bytes written so far, in storage or still buffered.
    fn len(&self) -> u64 {
        self.size + (self.encoder.inner().len() + self.encoder.in_progress_size()) as u64
    }

    /// Moves the encoded bytes to storage.
    async fn hand_over(&mut self) -> Result<()> {
        let chunk = std::mem::take(self.encoder.inner_mut());
        if chunk.is_empty() {
            return Ok(());
        }
        self.size += chunk.len() as u64;
        self.file.write(Bytes::from(chunk)).await?;
        Ok(())
    }

    async fn finish(mut self) -> Result<StagedFile> {
        self.encoder
            .finish()
            .map_err(|e| staging_error(&self.path, e))?;
        self.hand_over().await?;
        self.file.close().await?;
        Ok(StagedFile {
            path: self.path,
            size: self.size,
            rows: self.rows,
        })
    }
}

fn staging_error(path: &str, e: impl std::fmt::Display) -> FloeError {
    FloeError::internal(format!("staging file {path}: {e}"))
}

/// The batches of one staging file, a row group at a time; each must have `schema`.
pub fn read_staged(
    file_io: FileIO,
    file: StagedFile,
    schema: SchemaRef,
) -> impl Stream<Item = Result<RecordBatch>> + Send {
    futures::stream::once(async move {
        let reader = file_io.new_input(&file.path)?.reader().await?;
        let reader = ArrowFileReader::new(FileMetadata { size: file.size }, reader);
        let batches = ParquetRecordBatchStreamBuilder::new(reader)
            .await
            .and_then(|builder| builder.with_batch_size(READ_BATCH_ROWS).build())
            .map_err(|e| staging_error(&file.path, e))?;
        let path = file.path;
        Ok::<_, FloeError>(batches.map(move |batch| {
            let batch = batch.map_err(|e| staging_error(&path, e))?;
            if batch.schema() != schema {
                return Err(staging_error(&path, "its schema is not the ingest's"));
            }
            Ok(batch)
        }))
    })
    .try_flatten()
}

/// Splits files into at most `partitions` groups (at least one, possibly empty),
/// round robin: staging files are all about the same size.
pub fn group_staged(files: &[StagedFile], partitions: usize) -> Vec<Vec<StagedFile>> {
    let count = partitions.clamp(1, files.len().max(1));
    let mut groups = vec![Vec::new(); count];
    for (i, file) in files.iter().enumerate() {
        groups[i % count].push(file.clone());
    }
    groups
}

/// The schema of a staged scan as bytes for the plan (an IPC schema message).
pub fn schema_to_ipc(schema: &SchemaRef) -> Vec<u8> {
    let generator = datafusion::arrow::ipc::writer::IpcDataGenerator::default();
    let mut tracker = datafusion::arrow::ipc::writer::DictionaryTracker::new(false);
    generator
        .schema_to_bytes_with_dictionary_tracker(schema, &mut tracker, &IpcWriteOptions::default())
        .ipc_message
}

pub fn schema_from_ipc(bytes: &[u8]) -> Result<SchemaRef> {
    let schema = datafusion::arrow::ipc::convert::try_schema_from_flatbuffer_bytes(bytes)
        .map_err(|e| FloeError::internal(format!("decoding a staged scan's schema: {e}")))?;
    Ok(Arc::new(schema))
}
