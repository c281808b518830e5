//! `SHOW CREATE TABLE t`: the `CREATE TABLE` statement, in Floe's dialect, that makes a
//! table like `t`: its columns (types, `NOT NULL`, comments), partitioning, comment and
//! properties. It names no `LOCATION`, so running it again (under another name) makes a
//! new table in a place of its own. What the statement cannot say is left out: the
//! nullability of nested fields (Floe creates them optional), partition field names
//! chosen by `ALTER TABLE … AS name`, and `void` partition fields.

use std::sync::Arc;

use datafusion::arrow::array::{RecordBatch, StringArray};
use datafusion::arrow::datatypes::{DataType, Field, Schema as ArrowSchema, SchemaRef};
use datafusion::sql::sqlparser::ast::ObjectName;
use datafusion::sql::sqlparser::keywords::ALL_KEYWORDS;
use iceberg::TableIdent;
use iceberg::spec::{NestedField, PrimitiveType, Schema, TableMetadata, Transform, Type};

use super::ddl::table_ident;
use super::{Caller, Engine};
use crate::error::{FloeError, Result};

/// The table property Floe keeps `COMMENT` in.
const COMMENT_PROPERTY: &str = "comment";

/// The one column `SHOW CREATE TABLE` answers.
pub fn result_schema() -> SchemaRef {
    Arc::new(ArrowSchema::new(vec![Field::new(
        "create_statement",
        DataType::Utf8,
        false,
    )]))
}

impl Engine {
    /// `SHOW CREATE TABLE name`, for a caller who may read the table's schema.
    pub(super) async fn show_create_table(
        &self,
        caller: &Caller,
        name: &ObjectName,
    ) -> Result<RecordBatch> {
        let ident = table_ident(name, self.catalog_name(), &caller.schema)?;
        let namespace = ident.namespace().to_url_string();
        let not_found =
            || FloeError::not_found(format!("table '{namespace}.{}' not found", ident.name()));
        // An unreadable table is, to the caller, one that does not exist.
        if !caller.access.can_read(&namespace) {
            return Err(not_found());
        }
        let table = match self.catalog.load_table(&ident).await {
            Err(e) if e.kind() == iceberg::ErrorKind::TableNotFound => return Err(not_found()),
            loaded => loaded?,
        };
        let statement = create_statement(self.catalog_name(), &ident, table.metadata())?;
        let column = StringArray::from(vec![statement]);
        Ok(RecordBatch::try_new(
            result_schema(),
            vec![Arc::new(column)],
        )?)
    }
}

fn create_statement(catalog: &str, ident: &TableIdent, metadata: &TableMetadata) -> Result<String> {
    let schema = metadata.current_schema();
    let columns = schema
        .as_struct()
        .fields()
        .iter()
        .map(|field| column(field))
        .collect::<Result<Vec<_>>>()?;
    let mut statement = format!(
        "CREATE TABLE {}.{}.{} (\n  {}\n)\nUSING iceberg",
        identifier(catalog),
        identifier(&ident.namespace().to_url_string()),
        identifier(ident.name()),
        columns.join(",\n  ")
    );
    let partitioning = partition_items(metadata, schema)?;
    if !partitioning.is_empty() {
        statement += &format!("\nPARTITIONED BY ({})", partitioning.join(", "));
    }
    if let Some(comment) = metadata.properties().get(COMMENT_PROPERTY) {
        statement += &format!("\nCOMMENT {}", literal(comment));
    }
    let mut properties: Vec<_> = metadata
        .properties()
        .iter()
        .filter(|(key, _)| *key != COMMENT_PROPERTY)
        .map(|(key, value)| format!("{} = {}", literal(key), literal(value)))
        .collect();
    if !properties.is_empty() {
        properties.sort();
        statement += &format!("\nTBLPROPERTIES (\n  {}\n)", properties.join(",\n  "));
    }
    Ok(statement)
}

fn column(field: &NestedField) -> Result<String> {
    let mut column = format!(
        "{} {}",
        identifier(&field.name),
        sql_type(&field.field_type)?
    );
    if field.required {
        column += " NOT NULL";
    }
    if let Some(doc) = &field.doc {
        column += &format!(" COMMENT {}", literal(doc));
    }
    Ok(column)
}

/// The type's name in Floe's `CREATE TABLE`.
fn sql_type(ty: &Type) -> Result<String> {
    use PrimitiveType as P;
    Ok(match ty {
        Type::Primitive(primitive) => match primitive {
            P::Boolean => "BOOLEAN".into(),
            P::Int => "INT".into(),
            P::Long => "BIGINT".into(),
            P::Float => "REAL".into(),
            P::Double => "DOUBLE".into(),
            P::Decimal { precision, scale } => format!("DECIMAL({precision}, {scale})"),
            P::Date => "DATE".into(),
            P::Time => "TIME".into(),
            P::Timestamp => "TIMESTAMP".into(),
            P::Timestamptz => "TIMESTAMPTZ".into(),
            P::TimestampNs => "TIMESTAMP_NS".into(),
            P::TimestamptzNs => "TIMESTAMPTZ_NS".into(),
            P::String => "STRING".into(),
            P::Uuid => "UUID".into(),
            P::Fixed(length) => format!("BINARY({length})"),
            P::Binary => "VARBINARY".into(),
        },
        Type::Struct(fields) => {
            let fields = fields
                .fields()
                .iter()
                .map(|f| {
                    Ok(format!(
                        "{} {}",
                        identifier(&f.name),
                        sql_type(&f.field_type)?
                    ))
                })
                .collect::<Result<Vec<_>>>()?;
            format!("STRUCT<{}>", fields.join(", "))
        }
        Type::List(list) => format!("ARRAY<{}>", sql_type(&list.element_field.field_type)?),
        Type::Map(map) => format!(
            "MAP({}, {})",
            sql_type(&map.key_field.field_type)?,
            sql_type(&map.value_field.field_type)?
        ),
    })
}

/// The default partition spec's fields as `PARTITIONED BY` items.
fn partition_items(metadata: &TableMetadata, schema: &Schema) -> Result<Vec<String>> {
    let mut items = Vec::new();
    for field in metadata.default_partition_spec().fields() {
        let source = schema.name_by_field_id(field.source_id).ok_or_else(|| {
            FloeError::internal(format!("partition field {} has no column", field.name))
        })?;
        let column = identifier(source);
        items.push(match field.transform {
            Transform::Identity => column,
            Transform::Bucket(n) => format!("bucket({n}, {column})"),
            Transform::Truncate(width) => format!("truncate({width}, {column})"),
            Transform::Year => format!("year({column})"),
            Transform::Month => format!("month({column})"),
            Transform::Day => format!("day({column})"),
            Transform::Hour => format!("hour({column})"),
            Transform::Void | Transform::Unknown => continue,
        });
    }
    Ok(items)
}

/// `name` as it must be written to mean itself: bare if it is a lower-case word that
/// is no keyword, double-quoted otherwise.
fn identifier(name: &str) -> String {
    let plain = name.starts_with(|c: char| c.is_ascii_lowercase() || c == '_')
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        && ALL_KEYWORDS
            .binary_search(&name.to_ascii_uppercase().as_str())
            .is_err();
    match plain {
        true => name.to_string(),
        false => format!("\"{}\"", name.replace('"', "\"\"")),
    }
}

fn literal(text: &str) -> String {
    format!("'{}'", text.replace('\'', "''"))
}
