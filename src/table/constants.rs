//! Identity-partition values as per-task constants.
//!
//! A file added to a table without its identity-partition columns (pyiceberg
//! `add_files`, migrated tables) holds those values only in its partition tuple. The
//! reader fills a column from a task's `partition` and `partition_spec` (identity
//! fields only), but iceberg 0.10.1's planner leaves the spec unset and neither field
//! serialises. So the coordinator works out each task's identity values, and a task
//! carries them as a spec of identity fields only, over the current schema, with its
//! values — rebuilt the same way on executors from `(field id, value)` pairs.

use std::sync::Arc;

use iceberg::scan::FileScanTask;
use iceberg::spec::{
    Literal, PartitionSpec, PrimitiveLiteral, PrimitiveType, Schema, Struct, TableMetadata,
    Transform, Type, UnboundPartitionField,
};

use crate::error::{FloeError, Result};

/// One identity-partition value: the source field id and the value in the field's
/// current type.
pub type Constant = (i32, PrimitiveLiteral);

/// The identity values of a planned task. The task does not say which spec its file
/// was written with, so every spec of the table whose tuple could be this one is
/// tried; they must agree, else the task gets none (and reads its files as they are).
pub fn planned_constants(
    task: &FileScanTask,
    metadata: &TableMetadata,
    schema: &Schema,
) -> Vec<Constant> {
    let Some(partition) = &task.partition else {
        return Vec::new();
    };
    let mut answers = metadata
        .partition_specs_iter()
        .filter(|spec| spec.fields().len() == partition.fields().len())
        .filter_map(|spec| constants_of(spec, partition, schema));
    let Some(first) = answers.next() else {
        return Vec::new();
    };
    if answers.all(|other| other == first) {
        first
    } else {
        Vec::new()
    }
}

/// The identity values of `partition` read with `spec`, or `None` if the tuple does not
/// fit the spec.
fn constants_of(
    spec: &PartitionSpec,
    partition: &Struct,
    schema: &Schema,
) -> Option<Vec<Constant>> {
    let mut constants = Vec::new();
    for (field, value) in spec.fields().iter().zip(partition.iter()) {
        if field.transform != Transform::Identity {
            continue;
        }
        let Some(source) = schema.field_by_id(field.source_id) else {
            // The source column was dropped: nothing to fill.
            continue;
        };
        let Type::Primitive(ty) = source.field_type.as_ref() else {
            return None;
        };
        match value {
            None => {}
            Some(Literal::Primitive(v)) => {
                constants.push((field.source_id, in_type(v, ty)?));
            }
            Some(_) => return None,
        }
    }
    Some(constants)
}

/// `value` in the column's current type (a value stored before int→long or
/// float→double promotion is widened), or `None` if it does not belong to it.
fn in_type(value: &PrimitiveLiteral, ty: &PrimitiveType) -> Option<PrimitiveLiteral> {
    use PrimitiveLiteral as L;
    use PrimitiveType as T;
    Some(match (ty, value) {
        (T::Long, L::Int(v)) => L::Long(i64::from(*v)),
        (T::Double, L::Float(v)) => L::Double((f64::from(v.0)).into()),
        (T::Boolean, L::Boolean(_))
        | (T::Int | T::Date, L::Int(_))
        | (
            T::Long | T::Time | T::Timestamp | T::Timestamptz | T::TimestampNs | T::TimestamptzNs,
            L::Long(_),
        )
        | (T::Float, L::Float(_))
        | (T::Double, L::Double(_))
        | (T::String, L::String(_))
        | (T::Binary | T::Fixed(_), L::Binary(_))
        | (T::Decimal { .. }, L::Int128(_))
        | (T::Uuid, L::UInt128(_)) => value.clone(),
        _ => return None,
    })
}

/// Sets `task.partition_spec`/`partition` to carry `constants` (or clears them).
pub fn attach(task: &mut FileScanTask, constants: &[Constant], schema: &Arc<Schema>) -> Result<()> {
    if constants.is_empty() {
        task.partition = None;
        task.partition_spec = None;
        return Ok(());
    }
    let mut builder = PartitionSpec::builder(schema.clone());
    for (source_id, _) in constants {
        let name = schema
            .name_by_field_id(*source_id)
            .ok_or_else(|| FloeError::internal(format!("partition source field {source_id}")))?;
        builder = builder.add_unbound_field(UnboundPartitionField {
            source_id: *source_id,
            field_id: None,
            name: name.to_string(),
            transform: Transform::Identity,
        })?;
    }
    task.partition_spec = Some(Arc::new(builder.build()?));
    task.partition = Some(Struct::from_iter(
        constants
            .iter()
            .map(|(_, v)| Some(Literal::Primitive(v.clone()))),
    ));
    Ok(())
}

/// The constants a task carries (as set by [`attach`]).
pub fn attached(task: &FileScanTask) -> Vec<Constant> {
    let (Some(spec), Some(partition)) = (&task.partition_spec, &task.partition) else {
        return Vec::new();
    };
    spec.fields()
        .iter()
        .zip(partition.iter())
        .filter_map(|(field, value)| match value {
            Some(Literal::Primitive(v)) => Some((field.source_id, v.clone())),
            _ => None,
        })
        .collect()
}

/// A constant as JSON (Iceberg's single-value form in the field's type).
pub fn to_json(constant: &Constant, schema: &Schema) -> Result<String> {
    let ty = field_type(constant.0, schema)?;
    let json = Literal::Primitive(constant.1.clone()).try_into_json(&ty)?;
    Ok(json.to_string())
}

pub fn from_json(field_id: i32, json: &str, schema: &Schema) -> Result<Constant> {
    let ty = field_type(field_id, schema)?;
    let value: serde_json::Value = serde_json::from_str(json)
        .map_err(|e| FloeError::internal(format!("partition value of field {field_id}: {e}")))?;
    match Literal::try_from_json(value, &ty)? {
        Some(Literal::Primitive(v)) => Ok((field_id, v)),
        _ => Err(FloeError::internal(format!(
            "partition value of field {field_id} is not a primitive"
        ))),
    }
}

fn field_type(field_id: i32, schema: &Schema) -> Result<Type> {
    schema
        .field_by_id(field_id)
        .map(|f| f.field_type.as_ref().clone())
        .ok_or_else(|| FloeError::internal(format!("partition source field {field_id}")))
}
