//! Reading nested columns whose shape changed since a data file was written (a field
//! added to, renamed in or dropped from a struct, list element or map value).
//!
//! Iceberg 0.10.1's reader fits such a column to the table's type with an Arrow cast,
//! which matches nested fields by name or position, not by field id: it fails when a
//! field was added and silently mixes up fields after a rename. So for these columns
//! the reader is asked for the file's own shape (restricted to the field ids the table
//! still has), and [`crate::arrow_compat::conform_by_field_id`] fits the result to the
//! table's type by field id. A file without the column at all reads it through a
//! primitive stand-in (the reader cannot make NULL lists or maps), which the fitting
//! turns into NULLs of the table's type.

use std::collections::HashSet;
use std::sync::Arc;

use datafusion::arrow::array::{RecordBatch, RecordBatchOptions};
use datafusion::arrow::datatypes::{Schema as ArrowSchema, SchemaRef};
use datafusion::common::internal_err;
use datafusion::parquet::arrow::async_reader::AsyncFileReader;
use datafusion::parquet::arrow::parquet_to_arrow_schema;
use futures::StreamExt;
use iceberg::arrow::{ArrowFileReader, arrow_schema_to_schema};
use iceberg::io::{FileIO, FileMetadata};
use iceberg::scan::{FileScanTask, FileScanTaskStream};
use iceberg::spec::{ListType, MapType, NestedField, PrimitiveType, Schema, StructType, Type};

use crate::arrow_compat::{conform_by_field_id, field_id};
use crate::error::{FloeError, Result};

/// The projected nested fields some data file may hold in another shape or not at all:
/// their type differs in, or they are missing from, an older schema.
pub fn reshaped_fields<'h>(
    schema: &Schema,
    history: impl IntoIterator<Item = &'h Schema>,
    projected: &[i32],
) -> Vec<i32> {
    let mut reshaped = HashSet::new();
    for old in history {
        for id in projected {
            let Some(field) = schema.field_by_id(*id) else {
                continue;
            };
            let differs = old
                .field_by_id(*id)
                .is_none_or(|f| f.field_type != field.field_type);
            if !field.field_type.is_primitive() && differs {
                reshaped.insert(*id);
            }
        }
    }
    projected
        .iter()
        .copied()
        .filter(|id| reshaped.contains(id))
        .collect()
}

/// The tasks, each reading the `reshaped` fields in the shape its file holds them.
pub fn in_file_shapes(
    tasks: Vec<FileScanTask>,
    reshaped: Arc<Vec<i32>>,
    file_io: FileIO,
) -> FileScanTaskStream {
    futures::stream::iter(tasks)
        .then(move |task| {
            let (file_io, reshaped) = (file_io.clone(), reshaped.clone());
            async move {
                with_file_shapes(task, &reshaped, &file_io)
                    .await
                    .map_err(|e| iceberg::Error::new(iceberg::ErrorKind::Unexpected, e.to_string()))
            }
        })
        .boxed()
}

/// Fits the reshaped columns of a batch (read in their file's shape) to the table's
/// types by field id.
pub fn fit_reshaped(
    batch: RecordBatch,
    project_field_ids: &[i32],
    reshaped: &[i32],
    id_schema: &SchemaRef,
) -> datafusion::common::Result<RecordBatch> {
    let mut columns = batch.columns().to_vec();
    for (i, id) in project_field_ids.iter().enumerate() {
        if !reshaped.contains(id) {
            continue;
        }
        let (Some(column), Some(field)) = (columns.get_mut(i), id_schema.fields().get(i)) else {
            return internal_err!("IcebergScanExec: batch lacks reshaped column {id}");
        };
        *column = conform_by_field_id(column, field.data_type())?;
    }
    let fields: Vec<_> = id_schema
        .fields()
        .iter()
        .zip(&columns)
        .map(|(f, c)| f.as_ref().clone().with_data_type(c.data_type().clone()))
        .collect();
    let options = RecordBatchOptions::new().with_row_count(Some(batch.num_rows()));
    Ok(RecordBatch::try_new_with_options(
        Arc::new(ArrowSchema::new(fields)),
        columns,
        &options,
    )?)
}

/// `task` reading the `reshaped` top-level fields in the shape its file holds them.
async fn with_file_shapes(
    mut task: FileScanTask,
    reshaped: &[i32],
    file_io: &FileIO,
) -> Result<FileScanTask> {
    let input = file_io.new_input(&task.data_file_path)?;
    let mut file = ArrowFileReader::new(
        FileMetadata {
            size: task.file_size_in_bytes,
        },
        input.reader().await?,
    );
    let metadata = file.get_metadata(None).await.map_err(|e| {
        FloeError::internal(format!(
            "reading the footer of {}: {e}",
            task.data_file_path
        ))
    })?;
    let file_meta = metadata.file_metadata();
    let file_arrow =
        parquet_to_arrow_schema(file_meta.schema_descr(), file_meta.key_value_metadata())
            .map_err(|e| FloeError::internal(format!("schema of {}: {e}", task.data_file_path)))?;

    // Files without field ids (read through a name mapping) keep the table's shape.
    if !file_arrow.fields().iter().any(|f| field_id(f).is_some()) {
        return Ok(task);
    }
    let mut fields: Vec<Arc<NestedField>> = task.schema.as_struct().fields().to_vec();
    for field in fields.iter_mut() {
        if !reshaped.contains(&field.id) {
            continue;
        }
        let file_type = file_arrow
            .fields()
            .iter()
            .find(|f| field_id(f) == Some(field.id))
            .and_then(|f| arrow_schema_to_schema(&ArrowSchema::new(vec![f.clone()])).ok())
            .and_then(|s| s.field_by_id(field.id).map(|f| f.field_type.clone()));
        let shape = file_type
            .and_then(|t| restrict(&t, &field.field_type))
            .unwrap_or(Type::Primitive(PrimitiveType::Boolean));
        let mut reshaped_field = field.as_ref().clone();
        reshaped_field.field_type = Box::new(shape);
        *field = Arc::new(reshaped_field);
    }
    let schema = Schema::builder()
        .with_schema_id(task.schema.schema_id())
        .with_fields(fields)
        .build()?;
    task.schema = Arc::new(schema);
    Ok(task)
}

/// The file's type keeping only the nested fields the table's type still has (by id),
/// or `None` if the two do not match.
///
/// A struct none of whose fields the table still has keeps its first file field: the
/// struct's values are still there (a map's entries, a list's elements, non-null
/// structs), only their fields all read as NULL, and reading one field is how the reader
/// finds them; fitting by field id drops it afterwards.
fn restrict(file: &Type, table: &Type) -> Option<Type> {
    match (file, table) {
        (Type::Struct(file), Type::Struct(table)) => {
            let mut fields: Vec<Arc<NestedField>> = file
                .fields()
                .iter()
                .filter_map(|f| {
                    let wanted = table.field_by_id(f.id)?;
                    let mut kept = f.as_ref().clone();
                    kept.field_type = Box::new(restrict(&f.field_type, &wanted.field_type)?);
                    Some(Arc::new(kept))
                })
                .collect();
            if fields.is_empty() {
                fields.extend(file.fields().first().cloned());
            }
            (!fields.is_empty()).then(|| Type::Struct(StructType::new(fields)))
        }
        (Type::List(file), Type::List(table)) => {
            let element = same_field(&file.element_field, &table.element_field)?;
            Some(Type::List(ListType::new(element)))
        }
        (Type::Map(file), Type::Map(table)) => Some(Type::Map(MapType::new(
            same_field(&file.key_field, &table.key_field)?,
            same_field(&file.value_field, &table.value_field)?,
        ))),
        (Type::Primitive(_), Type::Primitive(_)) => Some(file.clone()),
        _ => None,
    }
}

fn same_field(file: &Arc<NestedField>, table: &Arc<NestedField>) -> Option<Arc<NestedField>> {
    if file.id != table.id {
        return None;
    }
    let mut kept = file.as_ref().clone();
    kept.field_type = Box::new(restrict(&file.field_type, &table.field_type)?);
    Some(Arc::new(kept))
}
