//! Staging files of a bulk ingest: the coordinator spools the uploaded stream into them
//! as it arrives, executors read them back (`staged_scan`). Where they live and who
//! deletes them is set down in `write_protocol`.
//!
//! The format is the Arrow IPC *stream* format (`.arrows`), one stream per file. The
//! upload arrives as Arrow IPC already, so spooling costs one copy and no encoding on
//! the coordinator (the one process every byte of an ingest passes through), and the
//! batches come back exactly as sent, in any Arrow type, for the INSERT's own
//! conversions. The stream format (rather than the file format) is written strictly
//! sequentially, so it suits object stores' streaming uploads, allows replacement
//! dictionaries, and is read back sequentially in bounded chunks. Files are
//! uncompressed: compressing would make the coordinator's CPU the ingest's bottleneck
//! for files that are read once, shortly after.

use std::sync::Arc;

use bytes::Bytes;
use datafusion::arrow::buffer::Buffer;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::arrow::ipc::reader::StreamDecoder;
use datafusion::arrow::ipc::writer::{IpcWriteOptions, StreamWriter};
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::execution::SendableRecordBatchStream;
use futures::{Stream, StreamExt};
use iceberg::io::{FileIO, FileRead, FileWrite};

use crate::error::{FloeError, Result};

/// Encoded bytes are handed to storage once at least this many are buffered.
const WRITE_CHUNK_BYTES: usize = 4 * 1024 * 1024;

/// A staging file is read back in ranges of this size.
const READ_CHUNK_BYTES: u64 = 8 * 1024 * 1024;

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
/// one batch and one write chunk in memory. On an error, files already written stay:
/// the caller deletes `location`.
pub async fn spool(
    mut upload: SendableRecordBatchStream,
    file_io: &FileIO,
    location: &str,
    name_prefix: &str,
    file_bytes: u64,
) -> Result<Vec<StagedFile>> {
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
                    "{}/{name_prefix}-{:05}.arrows",
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
/// moved to storage whenever it holds a chunk.
struct StagingWriter {
    path: String,
    encoder: StreamWriter<Vec<u8>>,
    file: Box<dyn FileWrite>,
    /// Bytes handed to storage so far.
    size: u64,
    rows: u64,
}

impl StagingWriter {
    async fn create(file_io: &FileIO, path: String, schema: &SchemaRef) -> Result<Self> {
        let file = file_io.new_output(&path)?.writer().await?;
        let encoder =
            StreamWriter::try_new_with_options(Vec::new(), schema, IpcWriteOptions::default())
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
        if self.encoder.get_ref().len() >= WRITE_CHUNK_BYTES {
            self.flush().await?;
        }
        Ok(())
    }

    /// Bytes written so far, in storage or still buffered.
    fn len(&self) -> u64 {
        self.size + self.encoder.get_ref().len() as u64
    }

    async fn flush(&mut self) -> Result<()> {
        let chunk = std::mem::take(self.encoder.get_mut());
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
        self.flush().await?;
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

/// The batches of one staging file, read in bounded ranges; each must have `schema`.
pub fn read_staged(
    file_io: FileIO,
    file: StagedFile,
    schema: SchemaRef,
) -> impl Stream<Item = Result<RecordBatch>> + Send {
    let state = ReadState {
        file_io,
        file,
        schema,
        reader: None,
        decoder: StreamDecoder::new(),
        buffer: Buffer::from(Vec::<u8>::new()),
        offset: 0,
        done: false,
    };
    futures::stream::try_unfold(state, |mut state| async move {
        let batch = state.next_batch().await?;
        Ok(batch.map(|batch| (batch, state)))
    })
}

struct ReadState {
    file_io: FileIO,
    file: StagedFile,
    schema: SchemaRef,
    reader: Option<Box<dyn FileRead>>,
    decoder: StreamDecoder,
    /// Read bytes not yet decoded.
    buffer: Buffer,
    /// Where the next range starts.
    offset: u64,
    done: bool,
}

impl ReadState {
    async fn next_batch(&mut self) -> Result<Option<RecordBatch>> {
        while !self.done {
            if !self.buffer.is_empty() {
                let decoded = self
                    .decoder
                    .decode(&mut self.buffer)
                    .map_err(|e| staging_error(&self.file.path, e))?;
                if let Some(batch) = decoded {
                    return self.check(batch).map(Some);
                }
                continue;
            }
            if self.offset < self.file.size {
                if self.reader.is_none() {
                    self.reader = Some(self.file_io.new_input(&self.file.path)?.reader().await?);
                }
                let Some(reader) = self.reader.as_deref() else {
                    continue;
                };
                let end = (self.offset + READ_CHUNK_BYTES).min(self.file.size);
                let chunk = reader.read(self.offset..end).await?;
                if chunk.is_empty() {
                    return Err(staging_error(&self.file.path, "the file ends early"));
                }
                self.offset += chunk.len() as u64;
                self.buffer = Buffer::from(chunk);
                continue;
            }
            // Everything read: the stream must have ended cleanly (a truncated file fails).
            self.decoder
                .finish()
                .map_err(|e| staging_error(&self.file.path, e))?;
            self.done = true;
        }
        Ok(None)
    }

    fn check(&self, batch: RecordBatch) -> Result<RecordBatch> {
        if batch.schema() != self.schema {
            return Err(staging_error(
                &self.file.path,
                "its schema is not the ingest's",
            ));
        }
        Ok(batch)
    }
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
