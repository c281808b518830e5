//! DDL, executed by Floe against the Iceberg catalog (async, on the coordinator):
//! CREATE/DROP SCHEMA and CREATE/DROP TABLE with Iceberg types and partition transforms.

use std::collections::HashMap;
use std::sync::Arc;

use datafusion::sql::sqlparser::ast::helpers::stmt_create_table::CreateTableBuilder;
use datafusion::sql::sqlparser::ast::{
    ArrayElemTypeDef, ColumnDef, ColumnOption, CommentDef, CreateTable, CreateTableOptions,
    DataType, ExactNumberInfo, Expr, FunctionArg, FunctionArgExpr, FunctionArguments, Ident,
    ObjectName, SchemaName, SqlOption, StructField, TimezoneInfo, Value,
};
use iceberg::spec::{
    ListType, MapType, NestedField, NestedFieldRef, PrimitiveType, Schema, StructType, Transform,
    Type, UnboundPartitionSpec,
};
use iceberg::{Catalog, NamespaceIdent, TableCreation, TableIdent};

use super::dialect::partition_fields;
use crate::auth::Access;
use crate::error::{FloeError, Result};
use crate::table::write::check_write_properties;

/// How a SQL object name maps onto the catalog: `[catalog.]namespace.table` or `table`.
pub struct Names<'a> {
    pub catalog_name: &'a str,
    pub default_namespace: &'a str,
    /// DDL changes namespaces: the caller needs a write grant on each it names.
    pub access: &'a Access,
}

/// Unquoted identifiers are case-insensitive (lower-cased), as in DataFusion.
pub fn normalize(ident: &Ident) -> String {
    match ident.quote_style {
        Some(_) => ident.value.clone(),
        None => ident.value.to_lowercase(),
    }
}

/// A name's parts, each normalized ([`normalize`]).
pub fn parts(name: &ObjectName) -> Result<Vec<String>> {
    name.0
        .iter()
        .map(|part| {
            part.as_ident()
                .map(normalize)
                .ok_or_else(|| FloeError::invalid(format!("unsupported name {name}")))
        })
        .collect()
}

/// The schema `name` (`s` or `catalog.s`) names in the catalog called `catalog_name`.
pub fn schema_name(name: &ObjectName, catalog_name: &str) -> Result<String> {
    match parts(name)?.as_slice() {
        [schema] => Ok(schema.clone()),
        [catalog, schema] if catalog == catalog_name => Ok(schema.clone()),
        [catalog, _] => Err(unknown_catalog(catalog)),
        _ => Err(FloeError::invalid(format!("invalid schema name {name}"))),
    }
}

/// The table `name` (`t`, `s.t` or `catalog.s.t`) names in the catalog called
/// `catalog_name`; `t` is in `default_namespace`.
pub fn table_ident(
    name: &ObjectName,
    catalog_name: &str,
    default_namespace: &str,
) -> Result<TableIdent> {
    let ident = |ns: &str, t: &str| TableIdent::new(NamespaceIdent::new(ns.into()), t.into());
    match parts(name)?.as_slice() {
        [t] => Ok(ident(default_namespace, t)),
        [ns, t] => Ok(ident(ns, t)),
        [catalog, ns, t] if catalog == catalog_name => Ok(ident(ns, t)),
        [catalog, _, _] => Err(unknown_catalog(catalog)),
        _ => Err(FloeError::invalid(format!("invalid table name {name}"))),
    }
}

pub fn unknown_catalog(name: &str) -> FloeError {
    FloeError::not_found(format!("catalog '{name}' not found"))
}

impl Names<'_> {
    /// The namespace a DDL statement changes (the caller must be allowed to).
    pub fn namespace(&self, name: &ObjectName) -> Result<NamespaceIdent> {
        let namespace = self.resolve_namespace(name)?;
        self.access.check_write(&namespace.to_url_string())?;
        Ok(namespace)
    }

    /// The table a DDL statement changes (the caller must be allowed to change its
    /// namespace).
    pub fn table(&self, name: &ObjectName) -> Result<TableIdent> {
        let table = self.resolve_table(name)?;
        self.access
            .check_write(&table.namespace().to_url_string())?;
        Ok(table)
    }

    fn resolve_namespace(&self, name: &ObjectName) -> Result<NamespaceIdent> {
        Ok(NamespaceIdent::new(schema_name(name, self.catalog_name)?))
    }

    fn resolve_table(&self, name: &ObjectName) -> Result<TableIdent> {
        table_ident(name, self.catalog_name, self.default_namespace)
    }
}

pub async fn create_schema(
    catalog: &dyn Catalog,
    names: &Names<'_>,
    schema_name: &SchemaName,
    if_not_exists: bool,
) -> Result<()> {
    let SchemaName::Simple(name) = schema_name else {
        return Err(FloeError::unimplemented(
            "CREATE SCHEMA … AUTHORIZATION is not supported",
        ));
    };
    let namespace = names.namespace(name)?;
    if catalog.namespace_exists(&namespace).await? {
        if if_not_exists {
            return Ok(());
        }
        return Err(FloeError::already_exists(format!(
            "schema '{}' already exists",
            namespace.to_url_string()
        )));
    }
    match catalog.create_namespace(&namespace, HashMap::new()).await {
        Ok(_) => Ok(()),
        // A concurrent CREATE SCHEMA IF NOT EXISTS won the race.
        Err(_) if if_not_exists && catalog.namespace_exists(&namespace).await? => Ok(()),
        Err(e) => Err(e.into()),
    }
}

pub async fn drop_schemas(
    catalog: &dyn Catalog,
    names: &Names<'_>,
    schemas: &[ObjectName],
    if_exists: bool,
    cascade: bool,
) -> Result<()> {
    // Every name is checked before anything is dropped.
    let namespaces = schemas
        .iter()
        .map(|name| names.namespace(name))
        .collect::<Result<Vec<_>>>()?;
    for namespace in namespaces {
        if !catalog.namespace_exists(&namespace).await? {
            if if_exists {
                continue;
            }
            return Err(FloeError::not_found(format!(
                "schema '{}' not found",
                namespace.to_url_string()
            )));
        }
        let tables = catalog.list_tables(&namespace).await?;
        if !tables.is_empty() && !cascade {
            return Err(FloeError::invalid(format!(
                "schema '{}' is not empty ({} tables); use DROP SCHEMA … CASCADE",
                namespace.to_url_string(),
                tables.len()
            )));
        }
        for table in tables {
            catalog.drop_table(&table).await?;
        }
        catalog.drop_namespace(&namespace).await?;
    }
    Ok(())
}

pub async fn drop_tables(
    catalog: &dyn Catalog,
    names: &Names<'_>,
    tables: &[ObjectName],
    if_exists: bool,
) -> Result<()> {
    // Every name is checked before anything is dropped.
    let idents = tables
        .iter()
        .map(|name| names.table(name))
        .collect::<Result<Vec<_>>>()?;
    for ident in idents {
        let exists = catalog.namespace_exists(ident.namespace()).await?
            && catalog.table_exists(&ident).await?;
        if !exists {
            if if_exists {
                continue;
            }
            return Err(FloeError::not_found(format!("table '{ident}' not found")));
        }
        catalog.drop_table(&ident).await?;
    }
    Ok(())
}

pub async fn create_table(
    catalog: &dyn Catalog,
    names: &Names<'_>,
    create: &CreateTable,
) -> Result<()> {
    refuse_unhonoured_clauses(create)?;
    let ident = names.table(&create.name)?;
    if !may_create(catalog, &ident, create.if_not_exists).await? {
        return Ok(());
    }
    let creation = creation(create, &ident, table_schema(&create.columns)?)?;
    match catalog.create_table(ident.namespace(), creation).await {
        Ok(_) => Ok(()),
        // A concurrent CREATE … IF NOT EXISTS won the race: the table exists, as asked.
        Err(_) if create.if_not_exists && catalog.table_exists(&ident).await? => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// Whether `ident` is to be created: its schema must exist, and the table must not
/// (`false`: it exists, and `IF NOT EXISTS` makes that fine).
pub async fn may_create(
    catalog: &dyn Catalog,
    ident: &TableIdent,
    if_not_exists: bool,
) -> Result<bool> {
    if !catalog.namespace_exists(ident.namespace()).await? {
        return Err(FloeError::not_found(format!(
            "schema '{}' not found",
            ident.namespace().to_url_string()
        )));
    }
    if catalog.table_exists(ident).await? {
        if if_not_exists {
            return Ok(false);
        }
        return Err(FloeError::already_exists(format!(
            "table '{ident}' already exists"
        )));
    }
    Ok(true)
}

/// The creation `create` asks for, of a table with `schema`.
pub fn creation(create: &CreateTable, ident: &TableIdent, schema: Schema) -> Result<TableCreation> {
    let spec = partition_spec(&schema, partition_fields(create))?;
    Ok(TableCreation::builder()
        .name(ident.name().to_string())
        .schema(schema)
        .partition_spec(spec)
        .location_opt(table_location(create)?)
        .properties(table_properties(create)?)
        .build())
}

/// `CREATE TABLE … AS SELECT`: the clauses Floe honours are those of `CREATE TABLE`,
/// without a column list (the query's result gives the columns).
pub fn refuse_unhonoured_clauses_of_ctas(create: &CreateTable) -> Result<()> {
    if !create.columns.is_empty() {
        return Err(unhonoured("a column list with AS SELECT"));
    }
    let mut rest = create.clone();
    rest.query = None;
    refuse_unhonoured_clauses(&rest)
}

/// Refuses every clause of a parsed `CREATE TABLE` that Floe would otherwise drop
/// silently. Floe honours the name, columns (NOT NULL, COMMENT), IF NOT EXISTS,
/// PARTITIONED BY, LOCATION, COMMENT and TBLPROPERTIES/WITH.
fn refuse_unhonoured_clauses(create: &CreateTable) -> Result<()> {
    let named = [
        (create.temporary, "TEMPORARY"),
        (create.or_replace, "OR REPLACE"),
        (create.external, "EXTERNAL"),
        (
            create.query.is_some(),
            "AS query (CREATE TABLE … AS SELECT)",
        ),
        (create.like.is_some(), "LIKE"),
        (create.clone.is_some(), "CLONE"),
        (!create.constraints.is_empty(), "table constraints"),
        (create.primary_key.is_some(), "PRIMARY KEY"),
        (create.order_by.is_some(), "ORDER BY"),
        (create.cluster_by.is_some(), "CLUSTER BY"),
        (create.clustered_by.is_some(), "CLUSTERED BY"),
    ];
    if let Some((_, clause)) = named.iter().find(|(present, _)| *present) {
        return Err(unhonoured(clause));
    }
    if let CreateTableOptions::Options(_) | CreateTableOptions::Plain(_) = create.table_options {
        return Err(unhonoured(&create.table_options.to_string()));
    }
    // Whatever else the generic dialect accepts: reset what Floe honours and compare
    // with a bare CREATE TABLE; any difference is a clause Floe would ignore.
    let mut rest = create.clone();
    rest.if_not_exists = false;
    rest.columns.clear();
    rest.location = None;
    rest.comment = None;
    rest.table_options = CreateTableOptions::None;
    rest.partition_by = None;
    let bare = CreateTableBuilder::new(create.name.clone()).build();
    if rest != bare {
        return Err(unhonoured(&rest.to_string()));
    }
    Ok(())
}

fn unhonoured(clause: &str) -> FloeError {
    FloeError::unimplemented(format!("CREATE TABLE: {clause} is not supported"))
}

fn table_location(create: &CreateTable) -> Result<Option<String>> {
    match &create.location {
        Some(location) if !location.contains("://") && !location.starts_with('/') => {
            Err(FloeError::invalid(format!(
                "LOCATION '{location}': give an absolute path or a URI (file:///…, s3://…)"
            )))
        }
        location => Ok(location
            .as_ref()
            .map(|l| l.trim_end_matches('/').to_string())),
    }
}

/// Table properties from TBLPROPERTIES/WITH, plus `comment` from COMMENT.
fn table_properties(create: &CreateTable) -> Result<HashMap<String, String>> {
    let options = match &create.table_options {
        CreateTableOptions::With(options) | CreateTableOptions::TableProperties(options) => {
            options.as_slice()
        }
        _ => &[],
    };
    let mut properties = HashMap::new();
    for option in options {
        let (key, value) = property(option)?;
        if key == FORMAT_VERSION && value != "2" {
            return Err(FloeError::unimplemented(format!(
                "table property {FORMAT_VERSION} = {value}: Floe creates format version 2 tables"
            )));
        }
        properties.insert(key, value);
    }
    properties.remove(FORMAT_VERSION);
    check_write_properties(&properties)?;
    if let Some(comment) = &create.comment {
        let (CommentDef::WithEq(text) | CommentDef::WithoutEq(text)) = comment;
        properties.insert("comment".to_string(), text.clone());
    }
    Ok(properties)
}

pub const FORMAT_VERSION: &str = "format-version";

/// A table property given as `'key' = 'value'`.
pub fn property(option: &SqlOption) -> Result<(String, String)> {
    let SqlOption::KeyValue { key, value } = option else {
        return Err(FloeError::invalid(format!(
            "table property {option}: expected 'key' = 'value'"
        )));
    };
    let value = property_value(value).ok_or_else(|| {
        FloeError::invalid(format!(
            "table property {key}: value {value} is not a string, number or boolean"
        ))
    })?;
    Ok((key.value.clone(), value))
}

fn property_value(value: &Expr) -> Option<String> {
    match value {
        Expr::Value(v) => match &v.value {
            Value::SingleQuotedString(s) | Value::DoubleQuotedString(s) => Some(s.clone()),
            Value::Number(n, _) => Some(n.clone()),
            Value::Boolean(b) => Some(b.to_string()),
            _ => None,
        },
        Expr::Identifier(ident) => Some(ident.value.clone()),
        _ => None,
    }
}

/// Assigns field ids depth-first, starting at 1.
struct FieldIds(i32);

impl FieldIds {
    fn next(&mut self) -> i32 {
        self.0 += 1;
        self.0
    }
}

pub fn table_schema(columns: &[ColumnDef]) -> Result<Schema> {
    if columns.is_empty() {
        return Err(FloeError::invalid("CREATE TABLE needs at least one column"));
    }
    let mut ids = FieldIds(0);
    let mut fields = Vec::with_capacity(columns.len());
    for column in columns {
        let ColumnOptions { required, doc } = column_options(column)?;
        let id = ids.next();
        let ty = iceberg_type(&column.data_type, &mut ids)?;
        let field = NestedField::new(id, normalize(&column.name), ty, required);
        fields.push(Arc::new(match doc {
            Some(doc) => field.with_doc(doc),
            None => field,
        }));
    }
    Ok(Schema::builder().with_fields(fields).build()?)
}

struct ColumnOptions {
    required: bool,
    doc: Option<String>,
}

/// NOT NULL / NULL and COMMENT; any other column option (DEFAULT, PRIMARY KEY, CHECK,
/// …) would be ignored, so it is refused.
fn column_options(column: &ColumnDef) -> Result<ColumnOptions> {
    let mut options = ColumnOptions {
        required: false,
        doc: None,
    };
    for option in &column.options {
        match &option.option {
            ColumnOption::NotNull => options.required = true,
            ColumnOption::Null => options.required = false,
            ColumnOption::Comment(text) => options.doc = Some(text.clone()),
            other => {
                return Err(FloeError::unimplemented(format!(
                    "CREATE TABLE: column '{}': {other} is not supported",
                    column.name
                )));
            }
        }
    }
    Ok(options)
}

/// The Iceberg type of a SQL type. Nested types: `STRUCT<a INT, b STRING>`,
/// `ARRAY<T>`, `MAP(K, V)`; their children are optional.
fn iceberg_type(data_type: &DataType, ids: &mut FieldIds) -> Result<Type> {
    use PrimitiveType as P;
    let primitive = |p: P| Ok(Type::Primitive(p));
    match data_type {
        DataType::Boolean | DataType::Bool => primitive(P::Boolean),
        DataType::TinyInt(_)
        | DataType::SmallInt(_)
        | DataType::Int2(_)
        | DataType::Int(_)
        | DataType::Int4(_)
        | DataType::Integer(_)
        | DataType::Int32 => primitive(P::Int),
        DataType::BigInt(_) | DataType::Int8(_) | DataType::Int64 => primitive(P::Long),
        DataType::Real | DataType::Float4 | DataType::Float32 => primitive(P::Float),
        DataType::Float(info) => match info {
            ExactNumberInfo::Precision(p) if *p <= 24 => primitive(P::Float),
            _ => primitive(P::Double),
        },
        DataType::Double(_) | DataType::DoublePrecision | DataType::Float8 | DataType::Float64 => {
            primitive(P::Double)
        }
        DataType::Decimal(info) | DataType::Numeric(info) | DataType::Dec(info) => {
            let (precision, scale) = match info {
                ExactNumberInfo::PrecisionAndScale(p, s) => (*p, *s),
                ExactNumberInfo::Precision(p) => (*p, 0),
                ExactNumberInfo::None => (38, 0),
            };
            if !(1..=38).contains(&precision) || scale < 0 || scale as u64 > precision {
                return Err(FloeError::invalid(format!(
                    "DECIMAL({precision}, {scale}) is out of range (precision 1..38, 0 <= scale <= precision)"
                )));
            }
            primitive(P::Decimal {
                precision: precision as u32,
                scale: scale as u32,
            })
        }
        DataType::Date => primitive(P::Date),
        DataType::Time(_, TimezoneInfo::None | TimezoneInfo::WithoutTimeZone) => primitive(P::Time),
        DataType::Timestamp(precision, tz) => {
            let with_tz = matches!(tz, TimezoneInfo::WithTimeZone | TimezoneInfo::Tz);
            match (precision.unwrap_or(6) > 6, with_tz) {
                (false, false) => primitive(P::Timestamp),
                (false, true) => primitive(P::Timestamptz),
                (true, _) => nanosecond_timestamps(data_type),
            }
        }
        DataType::TimestampNtz(_) => primitive(P::Timestamp),
        DataType::String(_)
        | DataType::Varchar(_)
        | DataType::Char(_)
        | DataType::Character(_)
        | DataType::CharacterVarying(_)
        | DataType::CharVarying(_)
        | DataType::Nvarchar(_)
        | DataType::Text => primitive(P::String),
        DataType::Uuid => primitive(P::Uuid),
        DataType::Binary(Some(n)) => primitive(P::Fixed(*n)),
        DataType::Binary(None)
        | DataType::Varbinary(_)
        | DataType::Bytea
        | DataType::Blob(_)
        | DataType::Bytes(_) => primitive(P::Binary),
        DataType::Custom(name, args) if args.is_empty() => {
            match name.to_string().to_lowercase().as_str() {
                "long" => primitive(P::Long),
                "timestamptz" => primitive(P::Timestamptz),
                "timestamp_ns" | "timestamptz_ns" => nanosecond_timestamps(data_type),
                _ => unsupported(data_type),
            }
        }
        DataType::Custom(name, args) if name.to_string().eq_ignore_ascii_case("fixed") => {
            match args.as_slice() {
                [n] => n
                    .parse()
                    .map(|n| Type::Primitive(P::Fixed(n)))
                    .map_err(|_| {
                        FloeError::invalid(format!("FIXED({n}): length must be a number"))
                    }),
                _ => unsupported(data_type),
            }
        }
        DataType::Array(ArrayElemTypeDef::AngleBracket(element))
        | DataType::Array(ArrayElemTypeDef::SquareBracket(element, _))
        | DataType::Array(ArrayElemTypeDef::Parenthesis(element)) => {
            let id = ids.next();
            let element = iceberg_type(element, ids)?;
            Ok(Type::List(ListType::new(Arc::new(
                NestedField::list_element(id, element, false),
            ))))
        }
        DataType::Map(key, value) => {
            let (key_id, value_id) = (ids.next(), ids.next());
            let key = iceberg_type(key, ids)?;
            let value = iceberg_type(value, ids)?;
            Ok(Type::Map(MapType::new(
                Arc::new(NestedField::map_key_element(key_id, key)),
                Arc::new(NestedField::map_value_element(value_id, value, false)),
            )))
        }
        DataType::Struct(fields, _) => {
            Ok(Type::Struct(StructType::new(struct_fields(fields, ids)?)))
        }
        _ => unsupported(data_type),
    }
}

fn struct_fields(fields: &[StructField], ids: &mut FieldIds) -> Result<Vec<NestedFieldRef>> {
    let ids_for_fields: Vec<i32> = fields.iter().map(|_| ids.next()).collect();
    fields
        .iter()
        .zip(ids_for_fields)
        .map(|(field, id)| {
            let name =
                field.field_name.as_ref().map(normalize).ok_or_else(|| {
                    FloeError::invalid("STRUCT fields need names: STRUCT<a INT, …>")
                })?;
            let ty = iceberg_type(&field.field_type, ids)?;
            Ok(Arc::new(NestedField::optional(id, name, ty)))
        })
        .collect()
}

/// Iceberg has nanosecond timestamps from format version 3 on; Floe creates version 2.
fn nanosecond_timestamps<T>(data_type: &DataType) -> Result<T> {
    Err(FloeError::unimplemented(format!(
        "type {data_type}: nanosecond timestamps need Iceberg format version 3, and Floe \
         creates format version 2 tables; use TIMESTAMP (microseconds)"
    )))
}

fn unsupported<T>(data_type: &DataType) -> Result<T> {
    Err(FloeError::invalid(format!(
        "type {data_type} is not supported by Iceberg tables"
    )))
}

/// `PARTITIONED BY (col, bucket(N, col), truncate(W, col), year(col), month(col),
/// day(col), hour(col))`, with Spark's partition field names (`col_bucket`, …).
pub fn partition_spec(schema: &Schema, exprs: &[Expr]) -> Result<UnboundPartitionSpec> {
    let mut builder = UnboundPartitionSpec::builder();
    for expr in exprs {
        let (transform, column) = transform_of(expr)?;
        let field = schema.field_by_name(&column).ok_or_else(|| {
            FloeError::invalid(format!(
                "PARTITIONED BY: column '{column}' is not in the table"
            ))
        })?;
        let name = partition_field_name(transform, &column);
        if matches!(transform, Transform::Truncate(_))
            && *field.field_type == Type::Primitive(PrimitiveType::Binary)
        {
            return Err(FloeError::unimplemented(format!(
                "PARTITIONED BY: truncate on binary column '{column}' is not supported yet"
            )));
        }
        if transform.result_type(&field.field_type).is_err() {
            return Err(FloeError::invalid(format!(
                "PARTITIONED BY: {transform} cannot be applied to column '{column}' of type {}",
                field.field_type
            )));
        }
        builder = builder.add_partition_field(field.id, name, transform)?;
    }
    Ok(builder.build())
}

/// Spark's name for a partition field: `col`, `col_bucket`, `col_trunc`, `col_day`, …
pub fn partition_field_name(transform: Transform, column: &str) -> String {
    match transform {
        Transform::Identity => column.to_string(),
        Transform::Bucket(_) => format!("{column}_bucket"),
        Transform::Truncate(_) => format!("{column}_trunc"),
        Transform::Year => format!("{column}_year"),
        Transform::Month => format!("{column}_month"),
        Transform::Day => format!("{column}_day"),
        Transform::Hour => format!("{column}_hour"),
        Transform::Void => format!("{column}_null"),
        Transform::Unknown => format!("{column}_unknown"),
    }
}

/// The transform and source column of a `PARTITIONED BY` item.
pub fn transform_of(expr: &Expr) -> Result<(Transform, String)> {
    let invalid = || {
        FloeError::invalid(format!(
            "PARTITIONED BY: '{expr}' is not a column or one of bucket(N, col), truncate(W, col), year(col), month(col), day(col), hour(col)"
        ))
    };
    match expr {
        Expr::Identifier(ident) => Ok((Transform::Identity, normalize(ident))),
        Expr::Function(function) => {
            let FunctionArguments::List(list) = &function.args else {
                return Err(invalid());
            };
            let args: Vec<&Expr> = list
                .args
                .iter()
                .map(|a| match a {
                    FunctionArg::Unnamed(FunctionArgExpr::Expr(e)) => Ok(e),
                    _ => Err(invalid()),
                })
                .collect::<Result<_>>()?;
            let column = |e: &Expr| match e {
                Expr::Identifier(ident) => Ok(normalize(ident)),
                _ => Err(invalid()),
            };
            let number = |e: &Expr| match e {
                Expr::Value(v) => match &v.value {
                    Value::Number(n, _) => {
                        n.parse::<u32>().ok().filter(|n| *n > 0).ok_or_else(invalid)
                    }
                    _ => Err(invalid()),
                },
                _ => Err(invalid()),
            };
            let name = function.name.to_string().to_lowercase();
            match (name.as_str(), args.as_slice()) {
                ("bucket", [n, c]) => Ok((Transform::Bucket(number(n)?), column(c)?)),
                ("truncate", [w, c]) => Ok((Transform::Truncate(number(w)?), column(c)?)),
                ("year" | "years", [c]) => Ok((Transform::Year, column(c)?)),
                ("month" | "months", [c]) => Ok((Transform::Month, column(c)?)),
                ("day" | "days", [c]) => Ok((Transform::Day, column(c)?)),
                ("hour" | "hours", [c]) => Ok((Transform::Hour, column(c)?)),
                _ => Err(invalid()),
            }
        }
        _ => Err(invalid()),
    }
}
