//! `ALTER TABLE`: `ADD COLUMN`, `DROP COLUMN`, `RENAME COLUMN`, `ALTER COLUMN … TYPE`
//! (Iceberg's legal promotions), `ALTER COLUMN … DROP NOT NULL`, `SET TBLPROPERTIES`,
//! and `RENAME TO`. A statement's changes commit together as one metadata change (no
//! new snapshot), required to apply to the schema the statement read: a concurrent
//! schema change makes it fail, not mix. Columns keep their field ids, so data written
//! before reads on (a dropped column's data is no longer read; a re-added name is a new
//! column). Nested fields are named by their path, through structs and — by Spark's
//! names — a list's `element` and a map's `key` and `value` (map keys never change).

use std::collections::HashMap;
use std::sync::Arc;

use datafusion::sql::sqlparser::ast::{
    AlterColumnOperation, AlterTable, AlterTableOperation, ColumnDef, DataType, Expr, Ident,
    ObjectName, RenameTableNameKind, SqlOption,
};
use iceberg::spec::{
    NestedField, NestedFieldRef, PrimitiveType, Schema, StructType, Type, UnboundPartitionField,
    UnboundPartitionSpec,
};
use iceberg::{TableIdent, TableRequirement, TableUpdate};

use super::alter_forms::{ColumnChange, PartitionChange};
use super::ddl::{
    FORMAT_VERSION, Names, normalize, partition_field_name, property, table_schema, transform_of,
};
use crate::catalog::commit::{FloeCatalog, TableChanges};
use crate::error::{FloeError, Result};
use crate::table::replace::renumber;
use crate::table::write::check_write_properties;

/// `builder.set_current_schema(-1)`: the schema added in the same commit.
const LAST_ADDED: i32 = -1;

pub async fn alter_table(
    catalog: &dyn FloeCatalog,
    names: &Names<'_>,
    alter: &AlterTable,
) -> Result<()> {
    let ident = names.table(&alter.name)?;
    if !catalog.table_exists(&ident).await? {
        if alter.if_exists {
            return Ok(());
        }
        return Err(FloeError::not_found(format!("table '{ident}' not found")));
    }
    if let [AlterTableOperation::RenameTable { table_name }] = alter.operations.as_slice() {
        let (RenameTableNameKind::To(name) | RenameTableNameKind::As(name)) = table_name;
        let target = names.table(name)?;
        if catalog.table_exists(&target).await? {
            return Err(FloeError::already_exists(format!(
                "table '{target}' already exists"
            )));
        }
        return Ok(catalog.rename_table(&ident, &target).await?);
    }
    alter_schema(catalog, &ident, |change| {
        alter
            .operations
            .iter()
            .try_for_each(|operation| change.apply(operation))
    })
    .await
}

/// `ALTER TABLE t ADD|DROP|RENAME|ALTER COLUMN a.b…`: a change of a nested field (see
/// `alter_forms::ColumnChange`).
pub async fn alter_nested_column(
    catalog: &dyn FloeCatalog,
    names: &Names<'_>,
    table: &ObjectName,
    column: &ColumnChange,
) -> Result<()> {
    let ident = names.table(table)?;
    if !catalog.table_exists(&ident).await? {
        return Err(FloeError::not_found(format!("table '{ident}' not found")));
    }
    alter_schema(catalog, &ident, |change| change.apply_nested(column)).await
}

/// Applies `edit` to the table's columns and properties, and commits what changed.
async fn alter_schema(
    catalog: &dyn FloeCatalog,
    ident: &TableIdent,
    edit: impl FnOnce(&mut Change) -> Result<()>,
) -> Result<()> {
    catalog.check_commit_changes()?;
    let table = catalog.load_table(ident).await?;
    let metadata = table.metadata();
    let current = metadata.current_schema();
    let mut change = Change {
        ident,
        fields: current.as_struct().fields().to_vec(),
        next_id: metadata.last_column_id(),
        properties: HashMap::new(),
        partition_sources: metadata
            .partition_specs_iter()
            .flat_map(|spec| spec.fields().iter().map(|f| f.source_id))
            .collect(),
    };
    edit(&mut change)?;
    let mut updates = Vec::new();
    if change.fields.as_slice() != current.as_struct().fields() {
        let schema = Schema::builder()
            .with_fields(change.fields)
            .with_identifier_field_ids(current.identifier_field_ids())
            .build()
            .map_err(|e| FloeError::invalid(format!("ALTER TABLE {ident}: {}", e.message())))?;
        updates.push(TableUpdate::AddSchema { schema });
        updates.push(TableUpdate::SetCurrentSchema {
            schema_id: LAST_ADDED,
        });
    }
    if !change.properties.is_empty() {
        check_write_properties(&change.properties)?;
        updates.push(TableUpdate::SetProperties {
            updates: change.properties,
        });
    }
    if updates.is_empty() {
        return Ok(());
    }
    let changes = TableChanges::of_table(
        metadata,
        [TableRequirement::CurrentSchemaIdMatch {
            current_schema_id: metadata.current_schema_id(),
        }],
        updates,
    );
    catalog.commit_changes(ident, &changes).await?;
    Ok(())
}

/// The table's columns and properties as the statement's operations change them.
struct Change<'a> {
    ident: &'a TableIdent,
    fields: Vec<NestedFieldRef>,
    next_id: i32,
    properties: HashMap<String, String>,
    /// Field ids some partition spec reads.
    partition_sources: Vec<i32>,
}

/// A column's path: its name, after the names of the structs it is in.
type Path = [String];

fn path_of(idents: &[Ident]) -> Vec<String> {
    idents.iter().map(normalize).collect()
}

impl Change<'_> {
    fn apply(&mut self, operation: &AlterTableOperation) -> Result<()> {
        match operation {
            AlterTableOperation::AddColumn {
                if_not_exists,
                column_def,
                column_position: None,
                ..
            } => self.add(&[normalize(&column_def.name)], column_def, *if_not_exists),
            AlterTableOperation::DropColumn {
                column_names,
                if_exists,
                ..
            } => column_names
                .iter()
                .try_for_each(|name| self.drop(&[normalize(name)], *if_exists)),
            AlterTableOperation::RenameColumn {
                old_column_name,
                new_column_name,
            } => self.rename(&[normalize(old_column_name)], new_column_name),
            AlterTableOperation::AlterColumn { column_name, op } => {
                let path = [normalize(column_name)];
                match op {
                    AlterColumnOperation::DropNotNull => self.drop_not_null(&path),
                    AlterColumnOperation::SetNotNull => Err(self.cannot_set_not_null(&path)),
                    AlterColumnOperation::SetDataType { data_type, .. } => {
                        self.retype(&path, data_type)
                    }
                    other => Err(unsupported(other)),
                }
            }
            AlterTableOperation::SetTblProperties { table_properties } => table_properties
                .iter()
                .try_for_each(|p| self.set_property(p)),
            AlterTableOperation::RenameTable { .. } => Err(FloeError::unimplemented(
                "ALTER TABLE: RENAME TO goes in a statement of its own",
            )),
            other => Err(unsupported(other)),
        }
    }

    fn apply_nested(&mut self, column: &ColumnChange) -> Result<()> {
        match column {
            ColumnChange::Add {
                path,
                column,
                if_not_exists,
            } => self.add(&path_of(path), column, *if_not_exists),
            ColumnChange::Drop { path, if_exists } => self.drop(&path_of(path), *if_exists),
            ColumnChange::Rename { path, to } => self.rename(&path_of(path), to),
            ColumnChange::Retype { path, data_type } => self.retype(&path_of(path), data_type),
            ColumnChange::DropNotNull { path } => self.drop_not_null(&path_of(path)),
            ColumnChange::SetNotNull { path } => Err(self.cannot_set_not_null(&path_of(path))),
        }
    }

    /// The field at `path`, if there is one.
    fn find(&self, path: &Path) -> Option<&NestedFieldRef> {
        let (first, rest) = path.split_first()?;
        let mut field = self.fields.iter().find(|f| f.name == *first)?;
        for name in rest {
            field = child(&field.field_type, name)?;
        }
        Some(field)
    }

    fn existing(&self, path: &Path) -> Result<&NestedFieldRef> {
        self.find(path).ok_or_else(|| {
            FloeError::not_found(format!(
                "ALTER TABLE {}: no column {}",
                self.ident,
                path.join(".")
            ))
        })
    }

    /// Refuses a change at `path` if it is inside a map's key: Iceberg keeps keys as
    /// they are, since changing them could make two keys of a map equal.
    fn outside_map_keys(&self, path: &Path) -> Result<()> {
        for end in 1..path.len() {
            if let Some(parent) = self.find(&path[..end])
                && matches!(parent.field_type.as_ref(), Type::Map(_))
                && path[end] == "key"
            {
                return Err(FloeError::invalid(format!(
                    "ALTER TABLE {}: {} is a map's key, which cannot change",
                    self.ident,
                    path[..=end].join(".")
                )));
            }
        }
        Ok(())
    }

    /// Refuses adding, dropping or renaming a field of `parents` unless it is a struct
    /// (or the table: no parents): a list's element and a map's key and value stay.
    fn in_struct(&self, parents: &Path) -> Result<()> {
        if parents.is_empty() {
            return Ok(());
        }
        let what = match self.existing(parents)?.field_type.as_ref() {
            Type::Struct(_) => return Ok(()),
            Type::List(_) => "a list: its fields are under element",
            Type::Map(_) => "a map: its fields are under key and value",
            Type::Primitive(_) => "not a struct",
        };
        Err(FloeError::invalid(format!(
            "ALTER TABLE {}: column {} is {what}",
            self.ident,
            parents.join(".")
        )))
    }

    /// Runs `edit` on the table's columns as one struct type.
    fn edit_columns(
        &mut self,
        edit: impl FnOnce(&mut Self, &mut Type) -> Result<()>,
    ) -> Result<()> {
        let mut columns = Type::Struct(StructType::new(std::mem::take(&mut self.fields)));
        let result = edit(self, &mut columns);
        if let Type::Struct(columns) = columns {
            self.fields = columns.fields().to_vec();
        }
        result
    }

    /// Runs `edit` on the fields of the struct `path` is in (the table's columns for a
    /// top-level one), with the last name of `path`.
    fn edit_parent(
        &mut self,
        path: &Path,
        mut edit: impl FnMut(&mut Self, &mut Vec<NestedFieldRef>, &str) -> Result<()>,
    ) -> Result<()> {
        let Some((name, parents)) = path.split_last() else {
            return Err(FloeError::internal("ALTER TABLE: an empty column path"));
        };
        self.outside_map_keys(path)?;
        self.in_struct(parents)?;
        self.edit_columns(|change, columns| {
            edit_type_at(columns, parents, &mut |parent| {
                let Type::Struct(parent) = parent else {
                    return Err(FloeError::internal(
                        "ALTER TABLE: a parent that is no struct",
                    ));
                };
                let mut fields = parent.fields().to_vec();
                edit(change, &mut fields, name)?;
                *parent = StructType::new(fields);
                Ok(())
            })
        })
    }

    fn add(&mut self, path: &Path, column: &ColumnDef, if_not_exists: bool) -> Result<()> {
        if self.find(path).is_some() {
            if if_not_exists {
                return Ok(());
            }
            return Err(FloeError::already_exists(format!(
                "ALTER TABLE {}: column {} already exists",
                self.ident,
                path.join(".")
            )));
        }
        let parsed = table_schema(std::slice::from_ref(column))?;
        let field = parsed
            .as_struct()
            .fields()
            .first()
            .ok_or_else(|| FloeError::internal("a column definition without a field"))?
            .clone();
        if field.required {
            return Err(FloeError::invalid(format!(
                "ALTER TABLE {}: an added column cannot be NOT NULL: the rows already \
                 written have no value for it",
                self.ident
            )));
        }
        self.edit_parent(path, |change, fields, name| {
            let mut added = renumber(&field, &mut change.next_id);
            added.name = name.to_string();
            fields.push(Arc::new(added));
            Ok(())
        })
    }

    fn drop(&mut self, path: &Path, if_exists: bool) -> Result<()> {
        let field = match self.find(path) {
            Some(field) => field.clone(),
            None if if_exists => return Ok(()),
            None => return self.existing(path).map(|_| ()),
        };
        if let Some(source) = field_ids(&field)
            .into_iter()
            .find(|id| self.partition_sources.contains(id))
        {
            let what = match source == field.id {
                true => "is a partition source".to_string(),
                false => format!("holds partition source field {source}"),
            };
            return Err(FloeError::invalid(format!(
                "ALTER TABLE {}: column {} {what} and cannot be dropped",
                self.ident,
                path.join(".")
            )));
        }
        self.edit_parent(path, |change, fields, name| {
            if fields.len() == 1 {
                let what = match path.len() {
                    1 => "the table's only column".to_string(),
                    _ => format!("the only field of {}", path[..path.len() - 1].join(".")),
                };
                return Err(FloeError::invalid(format!(
                    "ALTER TABLE {}: cannot drop {what}",
                    change.ident
                )));
            }
            fields.retain(|f| f.name != name);
            Ok(())
        })
    }

    fn rename(&mut self, path: &Path, to: &Ident) -> Result<()> {
        self.existing(path)?;
        self.in_struct(&path[..path.len() - 1])?;
        let new_name = normalize(to);
        let mut target = path.to_vec();
        if let Some(last) = target.last_mut() {
            *last = new_name.clone();
        }
        if self.find(&target).is_some() {
            return Err(FloeError::already_exists(format!(
                "ALTER TABLE {}: column {} already exists",
                self.ident,
                target.join(".")
            )));
        }
        self.update(path, |field| field.name = new_name.clone())
    }

    fn retype(&mut self, path: &Path, data_type: &DataType) -> Result<()> {
        let field = self.existing(path)?.clone();
        self.outside_map_keys(path)?;
        let probe = ColumnDef {
            name: Ident::new(field.name.clone()),
            data_type: data_type.clone(),
            options: Vec::new(),
        };
        let wanted = table_schema(std::slice::from_ref(&probe))?;
        let wanted = wanted
            .as_struct()
            .fields()
            .first()
            .map(|f| f.field_type.as_ref().clone())
            .ok_or_else(|| FloeError::internal("a column definition without a field"))?;
        if !is_promotion(&field.field_type, &wanted) {
            return Err(FloeError::invalid(format!(
                "ALTER TABLE {}: column {} cannot change from {} to {wanted}: Iceberg \
                 allows int to bigint, float to double, and widening a decimal's precision",
                self.ident,
                path.join("."),
                field.field_type
            )));
        }
        self.update(path, |field| *field.field_type = wanted.clone())
    }

    fn drop_not_null(&mut self, path: &Path) -> Result<()> {
        self.update(path, |field| field.required = false)
    }

    fn cannot_set_not_null(&self, path: &Path) -> FloeError {
        FloeError::invalid(format!(
            "ALTER TABLE {}: column {} cannot become NOT NULL: rows already written may \
             hold NULL",
            self.ident,
            path.join(".")
        ))
    }

    fn update(&mut self, path: &Path, mut change: impl FnMut(&mut NestedField)) -> Result<()> {
        self.existing(path)?;
        self.outside_map_keys(path)?;
        let Some((name, parents)) = path.split_last() else {
            return Err(FloeError::internal("ALTER TABLE: an empty column path"));
        };
        self.edit_columns(|_, columns| {
            edit_type_at(columns, parents, &mut |parent| {
                edit_child(parent, name, &mut |field| {
                    change(field);
                    Ok(())
                })
            })
        })
    }

    fn set_property(&mut self, option: &SqlOption) -> Result<()> {
        let (key, value) = property(option)?;
        if key == FORMAT_VERSION {
            return Err(FloeError::unimplemented(
                "ALTER TABLE: changing format-version is not supported",
            ));
        }
        self.properties.insert(key, value);
        Ok(())
    }
}

/// The field `name` of a value of type `parent`: a struct's field, or — by Spark's names
/// for them — a list's `element`, a map's `key` or `value`.
fn child<'t>(parent: &'t Type, name: &str) -> Option<&'t NestedFieldRef> {
    match parent {
        Type::Struct(inner) => inner.fields().iter().find(|f| f.name == name),
        Type::List(list) if name == "element" => Some(&list.element_field),
        Type::Map(map) if name == "key" => Some(&map.key_field),
        Type::Map(map) if name == "value" => Some(&map.value_field),
        _ => None,
    }
}

/// Runs `edit` on the field `name` (see [`child`]) of `parent`, which exists.
fn edit_child(
    parent: &mut Type,
    name: &str,
    edit: &mut dyn FnMut(&mut NestedField) -> Result<()>,
) -> Result<()> {
    let mut edited = |slot: &mut NestedFieldRef| {
        let mut field = slot.as_ref().clone();
        edit(&mut field)?;
        *slot = Arc::new(field);
        Ok(())
    };
    match parent {
        Type::Struct(inner) => {
            let mut fields = inner.fields().to_vec();
            let slot = fields
                .iter_mut()
                .find(|f| f.name == name)
                .ok_or_else(|| FloeError::internal(format!("no field {name}")))?;
            edited(slot)?;
            *inner = StructType::new(fields);
            Ok(())
        }
        Type::List(list) if name == "element" => edited(&mut list.element_field),
        Type::Map(map) if name == "key" => edited(&mut map.key_field),
        Type::Map(map) if name == "value" => edited(&mut map.value_field),
        _ => Err(FloeError::internal(format!("no field {name}"))),
    }
}

/// Runs `edit` on the type at `path` (which exists) inside `ty`; on `ty` itself for an
/// empty path.
fn edit_type_at(
    ty: &mut Type,
    path: &Path,
    edit: &mut dyn FnMut(&mut Type) -> Result<()>,
) -> Result<()> {
    match path.split_first() {
        None => edit(ty),
        Some((first, rest)) => edit_child(ty, first, &mut |field| {
            edit_type_at(&mut field.field_type, rest, edit)
        }),
    }
}

/// The ids of a field and of every field nested in it.
fn field_ids(field: &NestedField) -> Vec<i32> {
    let mut ids = vec![field.id];
    match field.field_type.as_ref() {
        Type::Struct(inner) => inner.fields().iter().for_each(|f| ids.extend(field_ids(f))),
        Type::List(list) => ids.extend(field_ids(&list.element_field)),
        Type::Map(map) => {
            ids.extend(field_ids(&map.key_field));
            ids.extend(field_ids(&map.value_field));
        }
        Type::Primitive(_) => {}
    }
    ids
}

/// Iceberg's legal type promotions.
fn is_promotion(from: &Type, to: &Type) -> bool {
    use PrimitiveType::{Decimal, Double, Float, Int, Long};
    match (from, to) {
        (Type::Primitive(from), Type::Primitive(to)) => match (from, to) {
            (Int, Long) | (Float, Double) => true,
            (
                Decimal { precision, scale },
                Decimal {
                    precision: wider,
                    scale: same,
                },
            ) => scale == same && wider >= precision,
            (from, to) => from == to,
        },
        _ => false,
    }
}

fn unsupported(operation: &impl std::fmt::Display) -> FloeError {
    FloeError::unimplemented(format!("ALTER TABLE … {operation} is not supported"))
}

/// `ALTER TABLE t ADD|DROP|REPLACE PARTITION FIELD …` (see `alter_forms`): a new default
/// partition spec, in one commit that requires the spec it was made from. Fields kept
/// keep their ids, so files written before stay readable and prunable; new writes use
/// the new spec.
pub async fn evolve_partitioning(
    catalog: &dyn FloeCatalog,
    names: &Names<'_>,
    table: &ObjectName,
    change: &PartitionChange,
) -> Result<()> {
    let ident = names.table(table)?;
    catalog.check_commit_changes()?;
    let table = catalog.load_table(&ident).await?;
    let metadata = table.metadata();
    let schema = metadata.current_schema();
    let current = metadata.default_partition_spec();
    let mut fields: Vec<UnboundPartitionField> = current
        .fields()
        .iter()
        .map(|f| UnboundPartitionField {
            source_id: f.source_id,
            field_id: Some(f.field_id),
            name: f.name.clone(),
            transform: f.transform,
        })
        .collect();
    let add = |fields: &mut Vec<UnboundPartitionField>, expr: &Expr, name: &Option<Ident>| {
        let (transform, column) = transform_of(expr)?;
        let source = schema.field_by_name(&column).ok_or_else(|| {
            FloeError::not_found(format!("ALTER TABLE {ident}: no column {column}"))
        })?;
        if transform.result_type(&source.field_type).is_err() {
            return Err(FloeError::invalid(format!(
                "ALTER TABLE {ident}: {transform} cannot be applied to column {column} of type {}",
                source.field_type
            )));
        }
        if fields
            .iter()
            .any(|f| f.source_id == source.id && f.transform == transform)
        {
            return Err(FloeError::already_exists(format!(
                "ALTER TABLE {ident}: already partitioned by {expr}"
            )));
        }
        let name = match name {
            Some(name) => normalize(name),
            None => partition_field_name(transform, &column),
        };
        if fields.iter().any(|f| f.name == name)
            || schema
                .field_by_name(&name)
                .is_some_and(|f| f.id != source.id)
        {
            return Err(FloeError::already_exists(format!(
                "ALTER TABLE {ident}: a partition field or column is named {name} already"
            )));
        }
        fields.push(UnboundPartitionField {
            source_id: source.id,
            field_id: None,
            name,
            transform,
        });
        Ok(())
    };
    let drop = |fields: &mut Vec<UnboundPartitionField>, expr: &Expr| {
        let by_name = match expr {
            Expr::Identifier(ident) => fields.iter().position(|f| f.name == normalize(ident)),
            _ => None,
        };
        let at = match by_name {
            Some(at) => Some(at),
            None => {
                let (transform, column) = transform_of(expr)?;
                let source = schema.field_by_name(&column).map(|f| f.id);
                fields
                    .iter()
                    .position(|f| Some(f.source_id) == source && f.transform == transform)
            }
        };
        match at {
            Some(at) => {
                fields.remove(at);
                Ok(())
            }
            None => Err(FloeError::not_found(format!(
                "ALTER TABLE {ident}: not partitioned by {expr}"
            ))),
        }
    };
    match change {
        PartitionChange::Add { field, name } => add(&mut fields, field, name)?,
        PartitionChange::Drop { field } => drop(&mut fields, field)?,
        PartitionChange::Replace { old, new, name } => {
            drop(&mut fields, old)?;
            add(&mut fields, new, name)?;
        }
    }
    let spec = UnboundPartitionSpec::builder()
        .add_partition_fields(fields)
        .map_err(|e| FloeError::invalid(format!("ALTER TABLE {ident}: {}", e.message())))?
        .build();
    let changes = TableChanges::of_table(
        metadata,
        [
            TableRequirement::DefaultSpecIdMatch {
                default_spec_id: metadata.default_partition_spec_id(),
            },
            TableRequirement::LastAssignedPartitionIdMatch {
                last_assigned_partition_id: metadata.last_partition_id(),
            },
        ],
        vec![
            TableUpdate::AddSpec { spec },
            TableUpdate::SetDefaultSpec {
                spec_id: LAST_ADDED,
            },
        ],
    );
    catalog.commit_changes(&ident, &changes).await?;
    Ok(())
}

/// `ALTER TABLE t UNSET TBLPROPERTIES [IF EXISTS] ('k', …)`: one commit.
pub async fn unset_properties(
    catalog: &dyn FloeCatalog,
    names: &Names<'_>,
    table: &ObjectName,
    if_exists: bool,
    keys: &[String],
) -> Result<()> {
    let ident = names.table(table)?;
    catalog.check_commit_changes()?;
    let table = catalog.load_table(&ident).await?;
    let metadata = table.metadata();
    let properties = metadata.properties();
    let (present, missing): (Vec<&String>, Vec<&String>) =
        keys.iter().partition(|k| properties.contains_key(*k));
    if let Some(key) = missing.first()
        && !if_exists
    {
        return Err(FloeError::not_found(format!(
            "ALTER TABLE {ident}: no table property '{key}'"
        )));
    }
    if present.is_empty() {
        return Ok(());
    }
    let changes = TableChanges::of_table(
        metadata,
        [],
        vec![TableUpdate::RemoveProperties {
            removals: present.into_iter().cloned().collect(),
        }],
    );
    catalog.commit_changes(&ident, &changes).await?;
    Ok(())
}
