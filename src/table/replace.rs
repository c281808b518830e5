//! Replacing a table's contents with rows of a possibly different schema (ingest mode
//! `replace`): the table keeps its identity (uuid, location, history, properties), the
//! rows become its only rows, and the schema of the rows becomes the table's current
//! schema, all in one overwrite commit (`overwrite`).
//!
//! The new schema's columns are the uploaded ones, in upload order, with the uploaded
//! nullability. A column whose name and type (nested types included) are those of a
//! column of the current schema keeps that column's field id; any other column gets
//! new field ids. So an unchanged schema stays the current schema (no new schema), and
//! partition fields and sort fields over kept columns stay valid.
//!
//! Partitioning: the default partition spec keeps the fields whose source column is
//! kept; fields whose source column is gone (dropped, or its type changed) are removed
//! from the new default spec (no field left: the table becomes unpartitioned). The
//! default sort order becomes unsorted if it uses a column that is gone. Old specs and
//! schemas stay in the metadata, so older snapshots remain readable.

use std::sync::Arc;

use datafusion::arrow::datatypes::Schema as ArrowSchema;
use iceberg::TableUpdate;
use iceberg::spec::{
    ListType, MapType, NestedField, NestedFieldRef, Schema, SortOrder, StructType, Type,
    UnboundPartitionField, UnboundPartitionSpec,
};
use iceberg::table::Table;

use super::overwrite::{Overwrite, Removal, staged_table};
use crate::error::{FloeError, Result};

/// `builder.set_current_schema(-1)` and friends: the one added in the same commit.
const LAST_ADDED: i64 = -1;

/// What replacing `table`'s rows with rows of `uploaded` schema commits, and the table
/// the write is planned against (the table with the new schema and spec).
pub fn replacement(table: &Table, uploaded: &ArrowSchema) -> Result<(Table, Overwrite)> {
    let fresh = super::iceberg_schema_of(uploaded).map_err(|e| {
        FloeError::invalid(format!(
            "ingest: the uploaded schema has no Iceberg form: {e}"
        ))
    })?;
    let updates = metadata_updates(table, &fresh)?;
    let staged = staged_table(table, &updates).map_err(|e| {
        FloeError::invalid(format!(
            "ingest: table '{}' cannot take the uploaded schema: {}",
            table.identifier(),
            e.message
        ))
    })?;
    let overwrite = Overwrite {
        metadata_updates: updates,
        ..Overwrite::of(Removal::All)
    };
    Ok((staged, overwrite))
}

/// The schema, partition spec and sort order changes that make `fresh` (ids assigned
/// from 1) the table's schema.
fn metadata_updates(table: &Table, fresh: &Schema) -> Result<Vec<TableUpdate>> {
    let metadata = table.metadata();
    let current = metadata.current_schema();
    let mut next_id = metadata.last_column_id();
    let fields: Vec<NestedFieldRef> = fresh
        .as_struct()
        .fields()
        .iter()
        .map(
            |field| match current.as_struct().field_by_name(&field.name) {
                Some(old) if same_shape(&old.field_type, &field.field_type) => {
                    Arc::new(NestedField {
                        required: field.required,
                        ..old.as_ref().clone()
                    })
                }
                _ => Arc::new(renumber(field, &mut next_id)),
            },
        )
        .collect();
    if fields.as_slice() == current.as_struct().fields() {
        return Ok(Vec::new());
    }
    let identifiers: Vec<i32> = current
        .identifier_field_ids()
        .filter(|id| fields.iter().any(|f| f.id == *id && f.required))
        .collect();
    let schema = Schema::builder()
        .with_fields(fields)
        .with_identifier_field_ids(identifiers)
        .build()?;
    let mut updates = vec![
        TableUpdate::AddSchema {
            schema: schema.clone(),
        },
        TableUpdate::SetCurrentSchema {
            schema_id: LAST_ADDED as i32,
        },
    ];

    let spec = metadata.default_partition_spec();
    let kept: Vec<UnboundPartitionField> = spec
        .fields()
        .iter()
        .filter(|f| schema.field_by_id(f.source_id).is_some())
        .map(|f| f.clone().into_unbound())
        .collect();
    if kept.len() != spec.fields().len() {
        let spec = UnboundPartitionSpec::builder()
            .add_partition_fields(kept)?
            .build();
        updates.extend([
            TableUpdate::AddSpec { spec },
            TableUpdate::SetDefaultSpec {
                spec_id: LAST_ADDED as i32,
            },
        ]);
    }

    let order = metadata.default_sort_order();
    if order
        .fields
        .iter()
        .any(|f| schema.field_by_id(f.source_id).is_none())
    {
        updates.extend([
            TableUpdate::AddSortOrder {
                sort_order: SortOrder::unsorted_order(),
            },
            TableUpdate::SetDefaultSortOrder {
                sort_order_id: LAST_ADDED,
            },
        ]);
    }
    Ok(updates)
}

/// Whether two types are the same but for field ids.
fn same_shape(a: &Type, b: &Type) -> bool {
    let same_field = |x: &NestedField, y: &NestedField| {
        x.name == y.name && x.required == y.required && same_shape(&x.field_type, &y.field_type)
    };
    match (a, b) {
        (Type::Primitive(x), Type::Primitive(y)) => x == y,
        (Type::Struct(x), Type::Struct(y)) => {
            x.fields().len() == y.fields().len()
                && x.fields()
                    .iter()
                    .zip(y.fields())
                    .all(|(x, y)| same_field(x, y))
        }
        (Type::List(x), Type::List(y)) => same_field(&x.element_field, &y.element_field),
        (Type::Map(x), Type::Map(y)) => {
            same_field(&x.key_field, &y.key_field) && same_field(&x.value_field, &y.value_field)
        }
        _ => false,
    }
}

/// The field with new ids above `next_id` (its nested fields too).
pub fn renumber(field: &NestedField, next_id: &mut i32) -> NestedField {
    *next_id += 1;
    let id = *next_id;
    NestedField {
        id,
        field_type: Box::new(renumber_type(&field.field_type, next_id)),
        ..field.clone()
    }
}

fn renumber_type(field_type: &Type, next_id: &mut i32) -> Type {
    let mut again = |f: &NestedFieldRef| Arc::new(renumber(f, next_id));
    match field_type {
        Type::Primitive(_) => field_type.clone(),
        Type::Struct(s) => Type::Struct(StructType::new(s.fields().iter().map(again).collect())),
        Type::List(l) => Type::List(ListType {
            element_field: again(&l.element_field),
        }),
        Type::Map(m) => {
            let key_field = again(&m.key_field);
            Type::Map(MapType {
                key_field,
                value_field: again(&m.value_field),
            })
        }
    }
}
