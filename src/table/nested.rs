//! Reading nested columns whose shape changed since a data file was written (a field
//! added to, renamed in or dropped from a struct, list element or map value).
//!
//! Iceberg 0.10.1's reader fits such a column to the table's type with an Arrow cast,
//! which matches nested fields by name or position, not by field id: it fails when a
//! field was added and silently mixes up fields after a rename. So for these columns
//! the reader is asked for the file's own shape (restricted to the field ids the table
//! still has), and [`crate::arrow_compat::conform_by_field_id`] fits the result to the
//! table's type by field id.

use std::sync::Arc;

use datafusion::arrow::datatypes::Schema as ArrowSchema;
use datafusion::parquet::arrow::async_reader::AsyncFileReader;
use datafusion::parquet::arrow::parquet_to_arrow_schema;
use iceberg::arrow::{ArrowFileReader, arrow_schema_to_schema};
use iceberg::io::{FileIO, FileMetadata};
use iceberg::scan::FileScanTask;
use iceberg::spec::{ListType, MapType, NestedField, Schema, StructType, Type};

use crate::arrow_compat::field_id;
use crate::error::{FloeError, Result};

/// `task` reading the `reshaped` top-level fields in the shape its file holds them.
pub async fn with_file_shapes(
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

    let mut fields: Vec<Arc<NestedField>> = task.schema.as_struct().fields().to_vec();
    for field in fields.iter_mut() {
        if !reshaped.contains(&field.id) {
            continue;
        }
        // Files without field ids (read through a name mapping) keep the table's shape.
        let Some(file_field) = file_arrow
            .fields()
            .iter()
            .find(|f| field_id(f) == Some(field.id))
        else {
            continue;
        };
        let Ok(file_schema) = arrow_schema_to_schema(&ArrowSchema::new(vec![file_field.clone()]))
        else {
            continue;
        };
        let Some(file_type) = file_schema
            .field_by_id(field.id)
            .map(|f| f.field_type.clone())
        else {
            continue;
        };
        if let Some(shape) = restrict(&file_type, &field.field_type) {
            let mut reshaped_field = field.as_ref().clone();
            reshaped_field.field_type = Box::new(shape);
            *field = Arc::new(reshaped_field);
        }
    }
    let schema = Schema::builder()
        .with_schema_id(task.schema.schema_id())
        .with_fields(fields)
        .build()?;
    task.schema = Arc::new(schema);
    Ok(task)
}

/// The file's type keeping only the nested fields the table's type still has (by id),
/// or `None` if nothing of it is left.
fn restrict(file: &Type, table: &Type) -> Option<Type> {
    match (file, table) {
        (Type::Struct(file), Type::Struct(table)) => {
            let fields: Vec<Arc<NestedField>> = file
                .fields()
                .iter()
                .filter_map(|f| {
                    let wanted = table.field_by_id(f.id)?;
                    let mut kept = f.as_ref().clone();
                    kept.field_type = Box::new(restrict(&f.field_type, &wanted.field_type)?);
                    Some(Arc::new(kept))
                })
                .collect();
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
