//! Per-statement table resolution. Each statement gets its own catalog provider: the
//! tables it references are loaded fresh from the Iceberg catalog (one snapshot each,
//! pinned for the whole statement) and nothing outlives the statement, so a schema
//! change made by anyone is visible to the next statement.

use std::any::Any;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use datafusion::catalog::{CatalogProvider, SchemaProvider, TableProvider};
use datafusion::error::Result as DfResult;
use datafusion::execution::SessionState;
use datafusion::logical_expr::DmlStatement;
use datafusion::sql::TableReference;
use datafusion::sql::parser::Statement;
use datafusion::sql::sqlparser::ast;
use iceberg::{NamespaceIdent, TableIdent};

use super::Caller;
use super::ddl::parts;
use crate::catalog::DEFAULT_NAMESPACE;
use crate::catalog::commit::FloeCatalog;
use crate::error::{FloeError, Result};
use crate::table::metadata_tables::MetadataTable;
use crate::table::provider::IcebergTableProvider;
use crate::table::time_travel::AsOf;
use crate::table::warm;

const INFORMATION_SCHEMA: &str = "information_schema";

pub struct StatementCatalog {
    schemas: HashMap<String, Arc<StatementSchema>>,
}

pub struct StatementSchema {
    catalog: Arc<dyn FloeCatalog>,
    namespace: NamespaceIdent,
    /// Table names listed for information_schema (empty unless the statement needs them).
    listed: Vec<String>,
    resolved: Mutex<HashMap<String, Arc<IcebergTableProvider>>>,
    /// Metadata tables (`t$snapshots`, …) of resolved tables, by their full name.
    metadata: Mutex<HashMap<String, Arc<dyn TableProvider>>>,
}

/// What a statement references, resolved against the catalog.
pub struct Resolution {
    pub catalog: Arc<StatementCatalog>,
    /// The statement reads information_schema, which runs on the coordinator.
    pub uses_information_schema: bool,
    /// The statement reads a metadata table (`t$snapshots`, …), which runs on the
    /// coordinator too: its rows are in the coordinator's memory.
    pub uses_metadata_tables: bool,
}

pub async fn resolve(
    catalog: &Arc<dyn FloeCatalog>,
    catalog_name: &str,
    caller: &Caller,
    statement: &Statement,
    state: &SessionState,
) -> Result<Resolution> {
    // Table functions (`generate_series(…)`) come back as bare references too.
    let references: Vec<TableReference> = state
        .resolve_table_references(statement)?
        .into_iter()
        .filter(|r| !(r.schema().is_none() && state.table_functions().contains_key(r.table())))
        .collect();
    let (info_schema, tables): (Vec<_>, Vec<_>) = references
        .into_iter()
        .partition(|r| r.schema() == Some(INFORMATION_SCHEMA));
    let target = write_target(statement);
    let tables: Vec<(TableReference, Use)> = tables
        .into_iter()
        .map(|reference| {
            let is_target = target.as_ref().is_some_and(|t| {
                t.table() == reference.table()
                    && t.schema().unwrap_or(&caller.schema)
                        == reference.schema().unwrap_or(&caller.schema)
            });
            let how = if is_target { Use::Write } else { Use::Read };
            (reference, how)
        })
        .collect();
    resolve_tables(
        catalog,
        catalog_name,
        caller,
        &tables,
        !info_schema.is_empty(),
    )
    .await
}

/// What a statement does with a table: the caller needs the matching grant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Use {
    Read,
    Write,
}

/// Loads `tables` (and, for information_schema, lists every namespace's tables the
/// caller may read). A table in a namespace the caller may not use that way is
/// PERMISSION_DENIED before anything is loaded, whether it exists or not.
pub async fn resolve_tables(
    catalog: &Arc<dyn FloeCatalog>,
    catalog_name: &str,
    caller: &Caller,
    tables: &[(TableReference, Use)],
    uses_information_schema: bool,
) -> Result<Resolution> {
    let default_namespace = caller.schema.as_str();
    let mut namespaces: Vec<String> = if uses_information_schema {
        catalog
            .list_namespaces(None)
            .await?
            .iter()
            .map(|ns| ns.to_url_string())
            .filter(|ns| caller.access.can_read(ns))
            .collect()
    } else {
        Vec::new()
    };
    for (reference, how) in tables {
        if let Some(name) = reference.catalog()
            && name != catalog_name
        {
            return Err(FloeError::not_found(format!("catalog '{name}' not found")));
        }
        let namespace = reference.schema().unwrap_or(default_namespace);
        match how {
            Use::Read => caller.access.check_read(namespace)?,
            Use::Write => caller.access.check_write(namespace)?,
        }
        namespaces.push(namespace.to_string());
    }
    namespaces.sort();
    namespaces.dedup();

    let mut schemas = HashMap::new();
    for name in namespaces {
        let namespace = NamespaceIdent::new(name.clone());
        if !catalog.namespace_exists(&namespace).await? {
            continue;
        }
        let listed = if uses_information_schema && caller.access.can_read(&name) {
            catalog
                .list_tables(&namespace)
                .await?
                .into_iter()
                .map(|t| t.name().to_string())
                .collect()
        } else {
            Vec::new()
        };
        let schema = StatementSchema {
            catalog: catalog.clone(),
            namespace,
            listed,
            resolved: Mutex::new(HashMap::new()),
            metadata: Mutex::new(HashMap::new()),
        };
        schemas.insert(name, Arc::new(schema));
    }

    // Load every referenced table now: a missing one is NOT_FOUND before planning.
    let mut uses_metadata_tables = false;
    for (reference, how) in tables {
        let namespace = reference.schema().unwrap_or(default_namespace);
        let display = display_name(reference, namespace);
        let Some(schema) = schemas.get(namespace) else {
            return Err(FloeError::not_found(format!(
                "table '{display}' not found: schema '{namespace}' does not exist"
            )));
        };
        let name = reference.table();
        if let Some((base, kind)) = MetadataTable::split(name) {
            if *how == Use::Write {
                return Err(FloeError::invalid(format!(
                    "metadata table '{display}' is read-only"
                )));
            }
            let Some(table) = schema.load(base).await? else {
                return Err(FloeError::not_found(format!(
                    "table '{namespace}.{base}' not found"
                )));
            };
            schema.add_metadata_table(name, kind.provider(table.table()).await?)?;
            uses_metadata_tables = true;
        } else if let Some((base, as_of)) = AsOf::split(name) {
            if *how == Use::Write {
                return Err(FloeError::invalid(format!(
                    "'{namespace}.{base}' as of a snapshot is read-only"
                )));
            }
            let Some(table) = schema.load(base).await? else {
                return Err(FloeError::not_found(format!(
                    "table '{namespace}.{base}' not found"
                )));
            };
            let provider = IcebergTableProvider::try_new(as_of.apply(table.table())?)?;
            schema.add_table(name, Arc::new(provider))?;
        } else if schema.load(name).await?.is_none() {
            return Err(FloeError::not_found(format!("table '{display}' not found")));
        }
    }
    Ok(Resolution {
        catalog: Arc::new(StatementCatalog { schemas }),
        uses_information_schema,
        uses_metadata_tables,
    })
}

/// The table an `INSERT`, `DELETE` or `UPDATE` writes to (it needs a write grant, not
/// a read grant).
fn write_target(statement: &Statement) -> Option<TableReference> {
    let Statement::Statement(statement) = statement else {
        return None;
    };
    let name = match statement.as_ref() {
        ast::Statement::Insert(ast::Insert {
            table: ast::TableObject::TableName(name),
            ..
        }) => name,
        ast::Statement::Delete(ast::Delete {
            from: ast::FromTable::WithFromKeyword(from) | ast::FromTable::WithoutKeyword(from),
            ..
        }) => table_name(from.first()?)?,
        ast::Statement::Update(ast::Update { table, .. }) => table_name(table)?,
        _ => return None,
    };
    match parts(name).ok()?.as_slice() {
        [table] => Some(TableReference::bare(table.as_str())),
        [schema, table] => Some(TableReference::partial(schema.as_str(), table.as_str())),
        [catalog, schema, table] => Some(TableReference::full(
            catalog.as_str(),
            schema.as_str(),
            table.as_str(),
        )),
        _ => None,
    }
}

fn table_name(table: &ast::TableWithJoins) -> Option<&ast::ObjectName> {
    match &table.relation {
        ast::TableFactor::Table { name, .. } => Some(name),
        _ => None,
    }
}

fn display_name(reference: &TableReference, namespace: &str) -> String {
    format!("{namespace}.{}", reference.table())
}

impl StatementCatalog {
    /// The error a table of the statement failed to plan its scan with, if any.
    /// The tables resolved, as `namespace.table`.
    pub fn table_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self
            .schemas
            .values()
            .flat_map(|schema| {
                let namespace = schema.namespace.to_url_string();
                let resolved = schema.resolved.lock().map(|r| r.keys().cloned().collect());
                resolved
                    .unwrap_or_else(|_| Vec::new())
                    .into_iter()
                    .map(move |table| format!("{namespace}.{table}"))
            })
            .collect();
        names.sort();
        names
    }

    pub fn planning_error(&self) -> Option<FloeError> {
        self.schemas.values().find_map(|schema| {
            let resolved = schema.resolved.lock().ok()?;
            resolved
                .values()
                .find_map(|provider| provider.planning_error())
        })
    }

    /// The provider the statement resolved for `reference`, if any.
    pub fn provider(
        &self,
        reference: &TableReference,
        default_namespace: &str,
    ) -> Option<Arc<IcebergTableProvider>> {
        let schema = self
            .schemas
            .get(reference.schema().unwrap_or(default_namespace))?;
        schema.resolved.lock().ok()?.get(reference.table()).cloned()
    }

    /// The provider of the table `dml` writes to.
    pub fn target_of(&self, dml: &DmlStatement) -> Result<Arc<IcebergTableProvider>> {
        self.provider(&dml.table_name, DEFAULT_NAMESPACE)
            .ok_or_else(|| {
                FloeError::internal(format!(
                    "{} target {} was not resolved",
                    dml.op.name(),
                    dml.table_name
                ))
            })
    }

    /// Makes the statement plan against `table` for `reference` (the table with changes
    /// its commit will make, e.g. a new schema) instead of the table as loaded.
    pub fn stage(
        &self,
        reference: &TableReference,
        default_namespace: &str,
        table: iceberg::table::Table,
    ) -> Result<Arc<IcebergTableProvider>> {
        let schema = self
            .schemas
            .get(reference.schema().unwrap_or(default_namespace))
            .ok_or_else(|| FloeError::internal(format!("{reference} was not resolved")))?;
        let provider = Arc::new(IcebergTableProvider::try_new(table)?);
        schema
            .resolved
            .lock()
            .map_err(|_| FloeError::internal("table resolution lock poisoned"))?
            .insert(reference.table().to_string(), provider.clone());
        Ok(provider)
    }
}

impl StatementSchema {
    /// Resolves `name` to `provider` (a table as of a snapshot).
    fn add_table(&self, name: &str, provider: Arc<IcebergTableProvider>) -> Result<()> {
        self.resolved
            .lock()
            .map_err(|_| FloeError::internal("table resolution lock poisoned"))?
            .insert(name.to_string(), provider);
        Ok(())
    }

    fn add_metadata_table(&self, name: &str, provider: Arc<dyn TableProvider>) -> Result<()> {
        self.metadata
            .lock()
            .map_err(|_| FloeError::internal("table resolution lock poisoned"))?
            .insert(name.to_string(), provider);
        Ok(())
    }

    fn metadata_table(&self, name: &str) -> Option<Arc<dyn TableProvider>> {
        self.metadata.lock().ok()?.get(name).cloned()
    }

    /// The table as loaded for this statement (loaded on first use).
    async fn load(&self, name: &str) -> Result<Option<Arc<IcebergTableProvider>>> {
        if let Some(provider) = self.resolved.lock().ok().and_then(|r| r.get(name).cloned()) {
            return Ok(Some(provider));
        }
        let ident = TableIdent::new(self.namespace.clone(), name.to_string());
        let kept = match self.catalog.metadata_location(&ident).await {
            Some(location) => warm::kept_at(&ident, &location),
            None => None,
        };
        let table = match kept {
            Some(table) => table,
            None => match self.catalog.load_table(&ident).await {
                Ok(table) => warm::warm(table),
                Err(e) if e.kind() == iceberg::ErrorKind::TableNotFound => return Ok(None),
                Err(e) => return Err(e.into()),
            },
        };
        let provider = Arc::new(IcebergTableProvider::try_new(table)?);
        let mut resolved = self
            .resolved
            .lock()
            .map_err(|_| FloeError::internal("table resolution lock poisoned"))?;
        // A concurrent first use may have won: keep one provider per table.
        Ok(Some(
            resolved.entry(name.to_string()).or_insert(provider).clone(),
        ))
    }
}

impl std::fmt::Debug for StatementSchema {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StatementSchema")
            .field("namespace", &self.namespace)
            .finish()
    }
}

impl std::fmt::Debug for StatementCatalog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StatementCatalog")
            .field("schemas", &self.schemas.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl CatalogProvider for StatementCatalog {
    fn as_any(&self) -> &dyn Any {
        self
    }

    fn schema_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self.schemas.keys().cloned().collect();
        names.sort();
        names
    }

    fn schema(&self, name: &str) -> Option<Arc<dyn SchemaProvider>> {
        self.schemas
            .get(name)
            .map(|s| s.clone() as Arc<dyn SchemaProvider>)
    }
}

#[async_trait]
impl SchemaProvider for StatementSchema {
    fn as_any(&self) -> &dyn Any {
        self
    }

    fn table_names(&self) -> Vec<String> {
        let mut names = self.listed.clone();
        if let Ok(resolved) = self.resolved.lock() {
            names.extend(resolved.keys().cloned());
        }
        names.sort();
        names.dedup();
        names
    }

    async fn table(&self, name: &str) -> DfResult<Option<Arc<dyn TableProvider>>> {
        if let Some(metadata) = self.metadata_table(name) {
            return Ok(Some(metadata));
        }
        Ok(self.load(name).await?.map(|p| p as Arc<dyn TableProvider>))
    }

    fn table_exist(&self, name: &str) -> bool {
        self.metadata_table(name).is_some()
            || self.listed.iter().any(|t| t == name)
            || self
                .resolved
                .lock()
                .map(|r| r.contains_key(name))
                .unwrap_or(false)
    }
}
