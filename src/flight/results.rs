//! Results between GetFlightInfo and DoGet, and the shape they take on the wire.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use datafusion::arrow::array::{ArrayRef, RecordBatch};
use datafusion::arrow::datatypes::{DataType, Field, FieldRef, Fields, Schema, SchemaRef};

use crate::arrow_compat::conform_array;
use crate::error::{FloeError, Result};
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

/// The schema clients receive: view types (which common clients cannot read) become
/// their plain forms, and Iceberg's field-id metadata is left out.
pub fn client_schema(schema: &Schema) -> SchemaRef {
    let fields: Vec<FieldRef> = schema
        .fields()
        .iter()
        .map(|f| client_field(f, true))
        .collect();
    Arc::new(Schema::new(fields))
}

fn client_field(field: &Field, top_level: bool) -> FieldRef {
    let field = field.clone().with_data_type(client_type(field.data_type()));
    Arc::new(if top_level {
        field.with_metadata(HashMap::new())
    } else {
        field
    })
}

fn client_type(data_type: &DataType) -> DataType {
    match data_type {
        DataType::Utf8View => DataType::Utf8,
        DataType::BinaryView => DataType::Binary,
        DataType::List(f) => DataType::List(client_field(f, false)),
        DataType::LargeList(f) => DataType::LargeList(client_field(f, false)),
        DataType::FixedSizeList(f, n) => DataType::FixedSizeList(client_field(f, false), *n),
        DataType::Struct(fields) => DataType::Struct(Fields::from_iter(
            fields.iter().map(|f| client_field(f, false)),
        )),
        DataType::Map(f, sorted) => DataType::Map(client_field(f, false), *sorted),
        other => other.clone(),
    }
}

/// A result batch in the client schema.
pub fn client_batch(batch: RecordBatch, schema: &SchemaRef) -> Result<RecordBatch> {
    let columns = batch
        .columns()
        .iter()
        .zip(schema.fields())
        .map(|(column, field)| {
            conform_array(column, field.data_type()).map_err(|e| FloeError::internal(e.to_string()))
        })
        .collect::<Result<Vec<ArrayRef>>>()?;
    RecordBatch::try_new(schema.clone(), columns).map_err(|e| FloeError::internal(e.to_string()))
}
