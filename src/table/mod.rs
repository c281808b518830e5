//! Iceberg ⇄ DataFusion: the per-statement table provider, the distributed scan and
//! write nodes, filter translation, the coordinator-side commit, the write protocol
//! that says which files a write may create and who deletes them, and the staging
//! files a bulk ingest is spooled into and scanned from.

pub mod commit;
pub mod constants;
pub mod filter;
pub mod journal;
pub mod maintenance;
pub mod metadata_tables;
pub mod nested;
pub mod overwrite;
pub mod position_deletes;
pub mod provider;
pub mod replace;
pub mod row_filter;
pub mod scan;
pub mod selectivity;
pub mod staged_scan;
pub mod staging;
pub mod statistics;
pub mod time_travel;
pub mod transforms;
pub mod warm;
pub mod write;
pub mod write_protocol;

use std::sync::Arc;

use datafusion::arrow::datatypes::{
    DataType, Field, FieldRef, Schema as ArrowSchema, SchemaRef, TimeUnit,
};
use iceberg::arrow::{arrow_schema_to_schema_auto_assign_ids, schema_to_arrow_schema};
use iceberg::spec::Schema;

use crate::arrow_compat::strip_metadata;
use crate::error::{FloeError, Result};

/// The Iceberg schema of a new table for columns of Arrow schema `columns` (a query's,
/// an upload's), fresh field ids assigned. Types an Iceberg v2 table has no form for are
/// taken in the form it stores, as the writes then cast the values: timestamps and
/// times in microseconds (`now()`, pandas' timestamps: nanoseconds, which only v3's
/// `timestamp_ns` holds), `Date64` as a date, `Float16` as a float.
pub fn iceberg_schema_of(columns: &ArrowSchema) -> Result<Schema> {
    let fields: Vec<Field> = columns
        .fields()
        .iter()
        .map(|field| {
            field
                .as_ref()
                .clone()
                .with_data_type(storable(field.data_type()))
        })
        .collect();
    let columns = ArrowSchema::new_with_metadata(fields, columns.metadata().clone());
    Ok(arrow_schema_to_schema_auto_assign_ids(&columns)?)
}

/// `data_type` with the types Iceberg v2 stores otherwise replaced, at any depth.
fn storable(data_type: &DataType) -> DataType {
    let field = |f: &FieldRef| Arc::new(f.as_ref().clone().with_data_type(storable(f.data_type())));
    match data_type {
        DataType::Timestamp(_, zone) => DataType::Timestamp(TimeUnit::Microsecond, zone.clone()),
        DataType::Time32(_) | DataType::Time64(_) => DataType::Time64(TimeUnit::Microsecond),
        DataType::Date64 => DataType::Date32,
        DataType::Float16 => DataType::Float32,
        DataType::Struct(fields) => DataType::Struct(fields.iter().map(field).collect()),
        DataType::List(f) => DataType::List(field(f)),
        DataType::LargeList(f) => DataType::LargeList(field(f)),
        DataType::FixedSizeList(f, n) => DataType::FixedSizeList(field(f), *n),
        DataType::Map(f, sorted) => DataType::Map(field(f), *sorted),
        other => other.clone(),
    }
}

/// The Arrow schema of an Iceberg schema (field ids kept as `PARQUET:field_id`
/// metadata, required fields non-nullable).
pub fn arrow_schema(schema: &Schema) -> Result<SchemaRef> {
    Ok(Arc::new(schema_to_arrow_schema(schema)?))
}

/// The Arrow schema DataFusion plans with: as [`arrow_schema`], without metadata.
pub fn plan_schema(schema: &Schema) -> Result<SchemaRef> {
    Ok(strip_metadata(&schema_to_arrow_schema(schema)?))
}

/// The plan schema of the given top-level fields of `schema`, in that order.
pub fn projected_arrow_schema(schema: &Schema, field_ids: &[i32]) -> Result<SchemaRef> {
    project(plan_schema(schema)?, schema, field_ids)
}

/// As [`projected_arrow_schema`], with every (nested) field labelled with its field id.
pub fn projected_id_schema(schema: &Schema, field_ids: &[i32]) -> Result<SchemaRef> {
    project(arrow_schema(schema)?, schema, field_ids)
}

fn project(full: SchemaRef, schema: &Schema, field_ids: &[i32]) -> Result<SchemaRef> {
    let fields = schema.as_struct().fields();
    let indices = field_ids
        .iter()
        .map(|id| {
            fields.iter().position(|f| f.id == *id).ok_or_else(|| {
                FloeError::internal(format!("field id {id} is not a top-level field"))
            })
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(Arc::new(
        full.project(&indices)
            .map_err(|e| FloeError::internal(e.to_string()))?,
    ))
}

/// Where new data files of a table go: `write.data.path`, else `<location>/data`.
pub fn data_location(metadata: &iceberg::spec::TableMetadata) -> String {
    let props = metadata.properties();
    props
        .get("write.data.path")
        .or_else(|| props.get("write.folder-storage.path"))
        .cloned()
        .unwrap_or_else(|| format!("{}/data", metadata.location().trim_end_matches('/')))
}
