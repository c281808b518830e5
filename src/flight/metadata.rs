//! Flight SQL's catalog browsing: GetCatalogs, GetDbSchemas, GetTables (with each
//! table's Arrow schema and the `ARROW:FLIGHT:SQL:*` column metadata JDBC's
//! `getColumns` reads), GetTableTypes, the (empty) key listings and GetXdbcTypeInfo,
//! in the spec's result schemas.

use std::collections::HashMap;
use std::sync::Arc;

use arrow_flight::error::FlightError;
use arrow_flight::sql::metadata::{
    GetCatalogsBuilder, GetDbSchemasBuilder, GetTablesBuilder, XdbcTypeInfo, XdbcTypeInfoData,
    XdbcTypeInfoDataBuilder,
};
use arrow_flight::sql::{
    CommandGetCatalogs, CommandGetDbSchemas, CommandGetTableTypes, CommandGetTables, Nullable,
    Searchable, XdbcDataType,
};
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::arrow::record_batch::RecordBatch;

use crate::error::{FloeError, Result};
use crate::sql::metadata::TableColumns;
use crate::sql::{Caller, Engine};

/// Floe's one table type (Iceberg tables; no views yet).
const TABLE_TYPE: &str = "TABLE";

pub fn catalogs(engine: &Engine, query: CommandGetCatalogs) -> Result<RecordBatch> {
    let mut builder = query.into_builder();
    builder.append(engine.catalog_name());
    builder.build().map_err(arrow_error)
}

pub async fn db_schemas(
    engine: &Engine,
    caller: &Caller,
    query: CommandGetDbSchemas,
) -> Result<RecordBatch> {
    let names = match wants_catalog(engine, query.catalog.as_deref()) {
        true => {
            engine
                .schema_names(caller, query.db_schema_filter_pattern.as_deref())
                .await?
        }
        false => Vec::new(),
    };
    let mut builder = query.into_builder();
    for name in names {
        builder.append(engine.catalog_name(), name);
    }
    builder.build().map_err(arrow_error)
}

pub async fn tables(
    engine: &Engine,
    caller: &Caller,
    query: CommandGetTables,
) -> Result<RecordBatch> {
    let wanted = wants_catalog(engine, query.catalog.as_deref())
        && (query.table_types.is_empty() || query.table_types.iter().any(|t| t == TABLE_TYPE));
    let tables = match wanted {
        true => {
            engine
                .tables(
                    caller,
                    query.db_schema_filter_pattern.as_deref(),
                    query.table_name_filter_pattern.as_deref(),
                    query.include_schema,
                )
                .await?
        }
        false => Vec::new(),
    };
    let catalog = engine.catalog_name().to_string();
    let mut builder = query.into_builder();
    let no_columns = Schema::empty();
    for table in tables {
        let schema = table.columns.as_ref().map(|columns| {
            described_schema(columns, &catalog, &table.schema_name, &table.table_name)
        });
        builder
            .append(
                &catalog,
                &table.schema_name,
                &table.table_name,
                TABLE_TYPE,
                schema.as_ref().unwrap_or(&no_columns),
            )
            .map_err(arrow_error)?;
    }
    builder.build().map_err(arrow_error)
}

pub fn table_types(query: CommandGetTableTypes) -> Result<RecordBatch> {
    let mut builder = query.into_builder();
    builder.append(TABLE_TYPE);
    builder.build().map_err(arrow_error)
}

/// The result schemas, for GetFlightInfo (before anything is listed).
pub fn catalogs_schema() -> SchemaRef {
    GetCatalogsBuilder::new().schema()
}

pub fn db_schemas_schema() -> SchemaRef {
    GetDbSchemasBuilder::new(None::<String>, None::<String>).schema()
}

pub fn tables_schema(include_schema: bool) -> SchemaRef {
    let types: [&str; 0] = [];
    GetTablesBuilder::new(
        None::<String>,
        None::<String>,
        None::<String>,
        types,
        include_schema,
    )
    .schema()
}

pub fn table_types_schema() -> SchemaRef {
    CommandGetTableTypes {}.into_builder().schema()
}

/// An absent catalog filter matches every catalog; Floe has one.
fn wants_catalog(engine: &Engine, catalog: Option<&str>) -> bool {
    catalog.is_none_or(|c| c == engine.catalog_name())
}

/// The table's schema with the column metadata Flight SQL defines for GetTables.
fn described_schema(columns: &TableColumns, catalog: &str, schema: &str, table: &str) -> Schema {
    let fields: Vec<Field> = columns
        .schema
        .fields()
        .iter()
        .zip(&columns.docs)
        .map(|(field, doc)| {
            let data_type = field.data_type();
            let mut metadata = HashMap::from([
                ("CATALOG_NAME", catalog.to_string()),
                ("DB_SCHEMA_NAME", schema.to_string()),
                ("SCHEMA_NAME", schema.to_string()),
                ("TABLE_NAME", table.to_string()),
                ("TYPE_NAME", sql_type_name(data_type).to_string()),
                ("IS_AUTO_INCREMENT", "0".to_string()),
                ("IS_CASE_SENSITIVE", flag(is_text(data_type)).to_string()),
                ("IS_READ_ONLY", "0".to_string()),
                ("IS_SEARCHABLE", "1".to_string()),
            ]);
            if let Some((precision, scale)) = precision_and_scale(data_type) {
                metadata.insert("PRECISION", precision.to_string());
                metadata.insert("SCALE", scale.to_string());
            }
            if let Some(doc) = doc {
                metadata.insert("REMARKS", doc.clone());
            }
            let metadata = metadata
                .into_iter()
                .map(|(key, value)| (format!("ARROW:FLIGHT:SQL:{key}"), value))
                .collect();
            field.as_ref().clone().with_metadata(metadata)
        })
        .collect();
    Schema::new(fields)
}

fn flag(value: bool) -> &'static str {
    if value { "1" } else { "0" }
}

fn is_text(data_type: &DataType) -> bool {
    matches!(
        data_type,
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View
    )
}

/// The name Floe's SQL gives the column's type.
fn sql_type_name(data_type: &DataType) -> &'static str {
    match data_type {
        DataType::Boolean => "BOOLEAN",
        DataType::Int32 => "INTEGER",
        DataType::Int64 => "BIGINT",
        DataType::Float32 => "REAL",
        DataType::Float64 => "DOUBLE",
        DataType::Decimal128(..) => "DECIMAL",
        DataType::Date32 => "DATE",
        DataType::Time64(_) => "TIME",
        DataType::Timestamp(_, None) => "TIMESTAMP",
        DataType::Timestamp(_, Some(_)) => "TIMESTAMP WITH TIME ZONE",
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => "VARCHAR",
        DataType::FixedSizeBinary(_) => "BINARY",
        DataType::Binary | DataType::LargeBinary | DataType::BinaryView => "VARBINARY",
        DataType::List(_) | DataType::LargeList(_) => "ARRAY",
        DataType::Struct(_) => "STRUCT",
        DataType::Map(..) => "MAP",
        _ => "OTHER",
    }
}

/// JDBC's column size and decimal digits for numeric types.
fn precision_and_scale(data_type: &DataType) -> Option<(u32, i32)> {
    match data_type {
        DataType::Int32 => Some((10, 0)),
        DataType::Int64 => Some((19, 0)),
        DataType::Float32 => Some((7, 0)),
        DataType::Float64 => Some((15, 0)),
        DataType::Decimal128(precision, scale) => Some((*precision as u32, *scale as i32)),
        _ => None,
    }
}

fn arrow_error(e: FlightError) -> FloeError {
    FloeError::internal(format!("building a metadata result: {e}"))
}

/// Iceberg tables have no primary or foreign keys: GetPrimaryKeys, GetImportedKeys,
/// GetExportedKeys and GetCrossReference answer an empty result in the spec's schema.
pub fn primary_keys_schema() -> SchemaRef {
    let utf8 = |name: &str, nullable| Field::new(name, DataType::Utf8, nullable);
    Arc::new(Schema::new(vec![
        utf8("catalog_name", true),
        utf8("db_schema_name", true),
        utf8("table_name", false),
        utf8("column_name", false),
        utf8("key_name", true),
        Field::new("key_sequence", DataType::Int32, false),
    ]))
}

pub fn foreign_keys_schema() -> SchemaRef {
    let utf8 = |name: &str, nullable| Field::new(name, DataType::Utf8, nullable);
    Arc::new(Schema::new(vec![
        utf8("pk_catalog_name", true),
        utf8("pk_db_schema_name", true),
        utf8("pk_table_name", false),
        utf8("pk_column_name", false),
        utf8("fk_catalog_name", true),
        utf8("fk_db_schema_name", true),
        utf8("fk_table_name", false),
        utf8("fk_column_name", false),
        Field::new("key_sequence", DataType::Int32, false),
        utf8("fk_key_name", true),
        utf8("pk_key_name", true),
        Field::new("update_rule", DataType::UInt8, false),
        Field::new("delete_rule", DataType::UInt8, false),
    ]))
}

/// GetXdbcTypeInfo: the SQL types Floe's CREATE TABLE takes (ODBC and Power BI ask).
pub fn xdbc_type_info() -> Result<XdbcTypeInfoData> {
    use XdbcDataType as T;
    // (name, type, column size, literal quote, case-sensitive)
    type Row = (&'static str, T, Option<i32>, Option<&'static str>, bool);
    let types: [Row; 12] = [
        ("BOOLEAN", T::XdbcBit, Some(1), None, false),
        ("INTEGER", T::XdbcInteger, Some(10), None, false),
        ("BIGINT", T::XdbcBigint, Some(19), None, false),
        ("REAL", T::XdbcReal, Some(7), None, false),
        ("DOUBLE", T::XdbcDouble, Some(15), None, false),
        ("DECIMAL", T::XdbcDecimal, Some(38), None, false),
        ("DATE", T::XdbcDate, Some(10), Some("'"), false),
        ("TIME", T::XdbcTime, Some(15), Some("'"), false),
        ("TIMESTAMP", T::XdbcTimestamp, Some(26), Some("'"), false),
        ("VARCHAR", T::XdbcVarchar, None, Some("'"), true),
        ("BINARY", T::XdbcBinary, None, None, false),
        ("VARBINARY", T::XdbcVarbinary, None, None, false),
    ];
    let mut builder = XdbcTypeInfoDataBuilder::new();
    for (name, data_type, column_size, quote, case_sensitive) in types {
        let decimal = data_type == T::XdbcDecimal;
        builder.append(XdbcTypeInfo {
            type_name: name.to_string(),
            data_type,
            column_size,
            literal_prefix: quote.map(str::to_string),
            literal_suffix: quote.map(str::to_string),
            create_params: decimal.then(|| vec!["precision".to_string(), "scale".to_string()]),
            nullable: Nullable::NullabilityNullable,
            case_sensitive,
            searchable: Searchable::Full,
            unsigned_attribute: column_size.map(|_| false),
            fixed_prec_scale: false,
            auto_increment: Some(false),
            local_type_name: Some(name.to_string()),
            minimum_scale: decimal.then_some(0),
            maximum_scale: decimal.then_some(38),
            sql_data_type: data_type,
            datetime_subcode: None,
            num_prec_radix: column_size.map(|_| 10),
            interval_precision: None,
        });
    }
    builder.build().map_err(arrow_error)
}
