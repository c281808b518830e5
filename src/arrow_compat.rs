//! Fitting Arrow arrays to a schema that describes the same data differently.
//!
//! Iceberg's Arrow schemas carry field ids as metadata on every (nested) field, while
//! DataFusion, its cast kernels and clients work with plain fields. Nested types
//! compare unequal when only that metadata differs, so arrays are re-labelled (no data
//! is copied) rather than cast; real type differences (view types, widening) are cast.

use std::collections::HashMap;
use std::sync::Arc;

use datafusion::arrow::array::{
    Array, ArrayData, ArrayRef, AsArray, LargeListArray, ListArray, MapArray, RecordBatch,
    StructArray, make_array, new_null_array,
};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, Field, FieldRef, Fields, Schema, SchemaRef};
use datafusion::arrow::error::ArrowError;
use datafusion::parquet::arrow::PARQUET_FIELD_ID_META_KEY;

/// The same schema without any field metadata, at any depth.
pub fn strip_metadata(schema: &Schema) -> SchemaRef {
    plain_schema(schema, false)
}

/// The schema sent to clients: no field metadata, and view types (which common
/// clients cannot read) replaced by their plain forms.
pub fn client_schema(schema: &Schema) -> SchemaRef {
    plain_schema(schema, true)
}

fn plain_schema(schema: &Schema, no_views: bool) -> SchemaRef {
    let fields: Vec<FieldRef> = schema
        .fields()
        .iter()
        .map(|f| plain_field(f, no_views))
        .collect();
    Arc::new(Schema::new(fields))
}

fn plain_field(field: &Field, no_views: bool) -> FieldRef {
    Arc::new(
        field
            .clone()
            .with_data_type(plain_type(field.data_type(), no_views))
            .with_metadata(HashMap::new()),
    )
}

fn plain_type(data_type: &DataType, no_views: bool) -> DataType {
    let field = |f: &Field| plain_field(f, no_views);
    match data_type {
        DataType::Utf8View if no_views => DataType::Utf8,
        DataType::BinaryView if no_views => DataType::Binary,
        DataType::List(f) => DataType::List(field(f)),
        DataType::LargeList(f) => DataType::LargeList(field(f)),
        DataType::FixedSizeList(f, n) => DataType::FixedSizeList(field(f), *n),
        DataType::Struct(fields) => {
            DataType::Struct(Fields::from_iter(fields.iter().map(|f| field(f))))
        }
        DataType::Map(f, sorted) => DataType::Map(field(f), *sorted),
        other => other.clone(),
    }
}

/// `batch` with `schema`: same columns, each re-labelled or cast to the schema's type.
pub fn conform_batch(batch: &RecordBatch, schema: &SchemaRef) -> Result<RecordBatch, ArrowError> {
    if batch.schema() == *schema {
        return Ok(batch.clone());
    }
    let columns = batch
        .columns()
        .iter()
        .zip(schema.fields())
        .map(|(column, field)| conform_array(column, field.data_type()))
        .collect::<Result<Vec<_>, _>>()?;
    RecordBatch::try_new(schema.clone(), columns)
}

/// `array` as `target`: unchanged, re-labelled if only field names/metadata differ,
/// cast otherwise.
pub fn conform_array(array: &ArrayRef, target: &DataType) -> Result<ArrayRef, ArrowError> {
    if array.data_type() == target {
        return Ok(array.clone());
    }
    if array.data_type().equals_datatype(target) {
        return Ok(make_array(relabel(&array.to_data(), target)?));
    }
    cast(array, target)
}

fn relabel(data: &ArrayData, target: &DataType) -> Result<ArrayData, ArrowError> {
    if data.data_type() == target {
        return Ok(data.clone());
    }
    let child_types: Vec<&DataType> = match target {
        DataType::List(f)
        | DataType::LargeList(f)
        | DataType::FixedSizeList(f, _)
        | DataType::Map(f, _) => {
            vec![f.data_type()]
        }
        DataType::Struct(fields) => fields.iter().map(|f| f.data_type()).collect(),
        _ => Vec::new(),
    };
    let children = if child_types.len() == data.child_data().len() {
        data.child_data()
            .iter()
            .zip(child_types)
            .map(|(child, ty)| relabel(child, ty))
            .collect::<Result<Vec<_>, _>>()?
    } else {
        data.child_data().to_vec()
    };
    data.clone()
        .into_builder()
        .data_type(target.clone())
        .child_data(children)
        .build()
}

/// The Iceberg field id an Arrow field is labelled with.
pub fn field_id(field: &Field) -> Option<i32> {
    field
        .metadata()
        .get(PARQUET_FIELD_ID_META_KEY)?
        .parse()
        .ok()
}

/// `array` as `target`, both labelled with Iceberg field ids: nested fields are matched
/// by id (whatever their names and order), fields the array lacks are NULL, fields the
/// target lacks are dropped, and leaves are cast. An array of NULLs only is NULLs of
/// any type.
pub fn conform_by_field_id(array: &ArrayRef, target: &DataType) -> Result<ArrayRef, ArrowError> {
    if array.logical_null_count() == array.len() && array.data_type() != target {
        return Ok(new_null_array(target, array.len()));
    }
    match (array.data_type(), target) {
        (DataType::Struct(source_fields), DataType::Struct(target_fields)) => {
            let source = array.as_struct();
            let columns = target_fields
                .iter()
                .map(|t| {
                    let found = source_fields
                        .iter()
                        .position(|s| field_id(s).is_some_and(|id| Some(id) == field_id(t)));
                    match found {
                        Some(i) => conform_by_field_id(source.column(i), t.data_type()),
                        None => Ok(new_null_array(t.data_type(), source.len())),
                    }
                })
                .collect::<Result<Vec<_>, _>>()?;
            Ok(Arc::new(StructArray::try_new_with_length(
                target_fields.clone(),
                columns,
                source.nulls().cloned(),
                source.len(),
            )?))
        }
        (DataType::List(_), DataType::List(element)) => {
            let list = array.as_list::<i32>();
            Ok(Arc::new(ListArray::try_new(
                element.clone(),
                list.offsets().clone(),
                conform_by_field_id(list.values(), element.data_type())?,
                list.nulls().cloned(),
            )?))
        }
        (DataType::LargeList(_), DataType::LargeList(element)) => {
            let list = array.as_list::<i64>();
            Ok(Arc::new(LargeListArray::try_new(
                element.clone(),
                list.offsets().clone(),
                conform_by_field_id(list.values(), element.data_type())?,
                list.nulls().cloned(),
            )?))
        }
        (DataType::Map(_, _), DataType::Map(entries, sorted)) => {
            let map = array.as_map();
            let fitted: ArrayRef = Arc::new(map.entries().clone());
            let fitted = conform_by_field_id(&fitted, entries.data_type())?;
            Ok(Arc::new(MapArray::try_new(
                entries.clone(),
                map.offsets().clone(),
                fitted.as_struct().clone(),
                map.nulls().cloned(),
                *sorted,
            )?))
        }
        _ => conform_array(array, target),
    }
}
