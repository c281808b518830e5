//! Bulk ingest (Flight SQL's `CommandStatementIngest`, ADBC's `adbc_ingest`): uploaded
//! Arrow batches are written by the same distributed write as `INSERT` (executors write
//! the files, the coordinator commits once), after the target table is created if the
//! mode asks for it. Mode `replace` commits the rows as the table's only rows, with the
//! upload's schema, in one overwrite snapshot (`table::replace`).

use std::sync::Arc;

use datafusion::arrow::datatypes::{Schema, SchemaRef};
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::catalog::MemTable;
use datafusion::common::ScalarValue;
use datafusion::common::TableReference;
use datafusion::datasource::{TableProvider, provider_as_source};
use datafusion::logical_expr::dml::InsertOp;
use datafusion::logical_expr::{Expr, LogicalPlan, LogicalPlanBuilder, cast, col, lit};
use iceberg::arrow::arrow_schema_to_schema_auto_assign_ids;
use iceberg::{NamespaceIdent, TableCreation, TableIdent};

use super::Engine;
use super::resolve::resolve_tables;
use crate::cluster::MAX_MESSAGE_SIZE;
use crate::error::{ErrorKind, FloeError, Result};
use crate::table::replace::replacement;
use crate::table::write_protocol::WriteCommit;

/// The uploaded batches travel to the executor inside the job's plan, which must fit
/// one cluster message (with room for the rest of the plan).
const MAX_INGEST_BYTES: usize = MAX_MESSAGE_SIZE / 2;

/// Where the rows go.
pub struct IngestTarget {
    pub catalog: Option<String>,
    pub schema: Option<String>,
    pub table: String,
}

/// What to do when the table is missing, and when it exists.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IfMissing {
    Create,
    Fail,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IfExists {
    Append,
    Fail,
    Replace,
}

impl Engine {
    /// Writes `batches` into the target table in one commit; returns the row count.
    pub async fn ingest(
        &self,
        target: IngestTarget,
        if_missing: IfMissing,
        if_exists: IfExists,
        schema: SchemaRef,
        batches: Vec<RecordBatch>,
    ) -> Result<i64> {
        let size: usize = batches.iter().map(RecordBatch::get_array_memory_size).sum();
        if size > MAX_INGEST_BYTES {
            return Err(FloeError::new(
                ErrorKind::ResourceExhausted,
                format!(
                    "ingest: {} MB uploaded; one ingest takes at most {} MB of Arrow data for \
                     now (split the data into several ingests)",
                    size / 1_000_000,
                    MAX_INGEST_BYTES / 1_000_000
                ),
            ));
        }
        if let Some(catalog) = target
            .catalog
            .as_deref()
            .filter(|c| *c != self.catalog_name)
        {
            return Err(FloeError::not_found(format!(
                "catalog '{catalog}' not found"
            )));
        }
        let namespace = target
            .schema
            .unwrap_or_else(|| crate::catalog::DEFAULT_NAMESPACE.to_string());
        let ident = TableIdent::new(NamespaceIdent::new(namespace.clone()), target.table.clone());
        if !self.catalog.namespace_exists(ident.namespace()).await? {
            return Err(FloeError::not_found(format!(
                "schema '{namespace}' not found"
            )));
        }
        let replace = match (
            self.catalog.table_exists(&ident).await?,
            if_missing,
            if_exists,
        ) {
            (true, _, IfExists::Append) => false,
            (true, _, IfExists::Fail) => {
                return Err(FloeError::already_exists(format!(
                    "table '{ident}' already exists (ingest mode create)"
                )));
            }
            (true, _, IfExists::Replace) => true,
            // A table someone else created meanwhile is replaced (mode replace) or appended to.
            (false, IfMissing::Create, _) => {
                !self.create_for_ingest(&ident, &schema).await? && if_exists == IfExists::Replace
            }
            (false, IfMissing::Fail, _) => {
                return Err(FloeError::not_found(format!(
                    "table '{ident}' not found (ingest mode append)"
                )));
            }
        };
        let reference = TableReference::partial(namespace.as_str(), target.table.as_str());
        let resolution = resolve_tables(
            &self.iceberg_catalog(),
            &self.catalog_name,
            crate::catalog::DEFAULT_NAMESPACE,
            std::slice::from_ref(&reference),
            false,
        )
        .await?;
        let mut provider = resolution
            .catalog
            .provider(&reference, crate::catalog::DEFAULT_NAMESPACE)
            .ok_or_else(|| FloeError::internal(format!("table '{ident}' was not resolved")))?;
        let how = if replace {
            self.catalog.check_commit_changes()?;
            let (staged, overwrite) = replacement(provider.table(), &schema)?;
            provider =
                resolution
                    .catalog
                    .stage(&reference, crate::catalog::DEFAULT_NAMESPACE, staged)?;
            WriteCommit::Overwrite(overwrite)
        } else {
            WriteCommit::Append
        };
        let uploaded = LogicalPlanBuilder::scan(
            "ingest",
            provider_as_source(Arc::new(MemTable::try_new(schema.clone(), vec![batches])?)),
            None,
        )?
        .build()?;
        let input = to_table_columns(uploaded, &schema, &provider.schema(), &ident)?;
        let LogicalPlan::Dml(dml) = LogicalPlanBuilder::insert_into(
            input,
            reference,
            provider_as_source(provider),
            InsertOp::Append,
        )?
        .build()?
        else {
            return Err(FloeError::internal("an ingest plan is an INSERT"));
        };
        let ctx = self.cluster.statement_context().await?;
        ctx.register_catalog(&self.catalog_name, resolution.catalog.clone());
        let rows = self.run_write(&ctx, dml, &resolution.catalog, &how).await?;
        Ok(rows as i64)
    }

    /// Creates the table; `false` if someone else created it meanwhile.
    async fn create_for_ingest(&self, ident: &TableIdent, schema: &Schema) -> Result<bool> {
        let iceberg_schema = arrow_schema_to_schema_auto_assign_ids(schema).map_err(|e| {
            FloeError::invalid(format!(
                "ingest: the uploaded schema has no Iceberg form: {e}"
            ))
        })?;
        let creation = TableCreation::builder()
            .name(ident.name().to_string())
            .schema(iceberg_schema)
            .build();
        match self.catalog.create_table(ident.namespace(), creation).await {
            Ok(_) => Ok(true),
            // Created meanwhile by someone else: append to it.
            Err(_) if self.catalog.table_exists(ident).await? => Ok(false),
            Err(e) => Err(e.into()),
        }
    }
}

/// The uploaded columns laid out as the table's, by name: cast to the table's types,
/// NULL for table columns the upload lacks. An uploaded column the table does not have
/// is refused (its values would be lost).
fn to_table_columns(
    uploaded: LogicalPlan,
    uploaded_schema: &Schema,
    table: &Schema,
    ident: &TableIdent,
) -> Result<LogicalPlan> {
    if let Some(extra) = uploaded_schema
        .fields()
        .iter()
        .find(|f| table.field_with_name(f.name()).is_err())
    {
        return Err(FloeError::invalid(format!(
            "ingest: table '{ident}' has no column '{}'",
            extra.name()
        )));
    }
    let exprs: Vec<Expr> = table
        .fields()
        .iter()
        .map(|field| {
            let value = match uploaded_schema.field_with_name(field.name()) {
                Ok(_) => col(datafusion::common::Column::new_unqualified(field.name())),
                Err(_) => lit(ScalarValue::Null),
            };
            cast(value, field.data_type().clone()).alias(field.name())
        })
        .collect();
    Ok(LogicalPlanBuilder::from(uploaded).project(exprs)?.build()?)
}
