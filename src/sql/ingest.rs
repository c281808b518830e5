//! Bulk ingest (Flight SQL's `CommandStatementIngest`, ADBC's `adbc_ingest`): the
//! uploaded stream is spooled, as it arrives, into staging files in the write's own
//! directory (`table::staging`, `write_protocol`), then written by the same distributed
//! write as `INSERT` (executors read the staging files and write the data files, the
//! coordinator commits once), after the target table is created if the mode asks for
//! it. The coordinator never holds more than a batch of the upload. Mode `replace`
//! commits the rows as the table's only rows, with the upload's schema, in one overwrite
//! snapshot (`table::replace`).

use std::sync::Arc;

use datafusion::arrow::compute::can_cast_types;
use datafusion::arrow::datatypes::Schema;
use datafusion::common::ScalarValue;
use datafusion::common::TableReference;
use datafusion::datasource::{TableProvider, provider_as_source};
use datafusion::execution::SendableRecordBatchStream;
use datafusion::logical_expr::dml::InsertOp;
use datafusion::logical_expr::{Expr, LogicalPlan, LogicalPlanBuilder, cast, col, lit};
use iceberg::table::Table;
use iceberg::{NamespaceIdent, TableCreation, TableIdent};
use tokio_util::sync::CancellationToken;

use super::resolve::{Use, resolve_tables};
use super::{Caller, Engine};
use crate::catalog::StorageSpec;
use crate::error::{ErrorKind, FloeError, Result};
use crate::table::replace::replacement;
use crate::table::staged_scan::StagedTable;
use crate::table::staging::{StagedFile, spool};
use crate::table::write_protocol::{
    WriteCommit, discard_staging, discard_writes, new_write_id, staging_location,
};

/// The upload is staged in files of about this size. Each file is read by one executor
/// task (several files per partition when there are more files than partitions), so a
/// large ingest spreads over the cluster.
pub const STAGING_FILE_BYTES: u64 = 32 * 1024 * 1024;

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
    /// Writes the uploaded batches into the target table in one commit; returns the row
    /// count. `upload` is read as it arrives; if it fails half-way (bad data, the client
    /// went away), nothing is committed and nothing it staged is left.
    pub async fn ingest(
        &self,
        caller: &Caller,
        target: IngestTarget,
        if_missing: IfMissing,
        if_exists: IfExists,
        upload: SendableRecordBatchStream,
    ) -> Result<i64> {
        // The ingest runs in its own task so that it always ends with a commit or a
        // clean-up. This future is the client's call: if the client cancels, hyper drops
        // it, which is the only sign of it (tonic ends a cancelled upload as if it were
        // complete); the guard tells the ingest, which then commits nothing.
        let client_gone = CancellationToken::new();
        let _guard = client_gone.clone().drop_guard();
        let engine = self.clone();
        let caller = caller.clone();
        tokio::spawn(async move {
            engine
                .run_ingest(&caller, target, if_missing, if_exists, upload, client_gone)
                .await
                .inspect_err(|e| tracing::info!(target: "floe::ingest", "ingest failed: {e}"))
        })
        .await
        .map_err(|e| FloeError::internal(format!("ingest task failed: {e}")))?
    }

    async fn run_ingest(
        &self,
        caller: &Caller,
        target: IngestTarget,
        if_missing: IfMissing,
        if_exists: IfExists,
        upload: SendableRecordBatchStream,
        client_gone: CancellationToken,
    ) -> Result<i64> {
        let schema = upload.schema();
        if let Some(catalog) = target
            .catalog
            .as_deref()
            .filter(|c| *c != self.catalog_name)
        {
            return Err(FloeError::not_found(format!(
                "catalog '{catalog}' not found"
            )));
        }
        let namespace = target.schema.unwrap_or_else(|| caller.schema.clone());
        caller.access.check_write(&namespace)?;
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
            &self.catalog,
            &self.catalog_name,
            caller,
            &[(reference.clone(), Use::Write)],
            false,
        )
        .await?;
        let mut provider = resolution
            .catalog
            .provider(&reference, &namespace)
            .ok_or_else(|| FloeError::internal(format!("table '{ident}' was not resolved")))?;
        let how = if replace {
            self.catalog.check_commit_changes()?;
            let (staged, overwrite) = replacement(provider.table(), &schema)?;
            provider = resolution.catalog.stage(&reference, &namespace, staged)?;
            WriteCommit::Overwrite(overwrite)
        } else {
            WriteCommit::Append
        };
        check_columns(&schema, &provider.schema(), &ident)?;

        let write_id = new_write_id();
        crate::table::journal::begin(provider.table(), &write_id)?;
        provider.set_next_write_id(write_id.clone());
        let staged = stage_upload(upload, provider.table(), &write_id).await?;
        if client_gone.is_cancelled() {
            discard_writes(provider.table(), std::slice::from_ref(&write_id)).await;
            return Err(cancelled_upload());
        }
        tracing::info!(
            target: "floe::ingest",
            table = %ident,
            write_id,
            files = staged.len(),
            rows = staged.iter().map(|file| file.rows).sum::<u64>(),
            bytes = staged.iter().map(|file| file.size).sum::<u64>(),
            "upload staged"
        );
        let uploaded = LogicalPlanBuilder::scan(
            "ingest",
            provider_as_source(Arc::new(StagedTable::new(
                schema.clone(),
                StorageSpec::from_file_io(provider.table().file_io()),
                staged,
            ))),
            None,
        )?
        .build()?;
        let written = async {
            let input = to_table_columns(uploaded, &schema, &provider.schema())?;
            let LogicalPlan::Dml(dml) = LogicalPlanBuilder::insert_into(
                input,
                reference,
                provider_as_source(provider.clone()),
                InsertOp::Append,
            )?
            .build()?
            else {
                return Err(FloeError::internal("an ingest plan is an INSERT"));
            };
            let ctx = self.cluster.statement_context(&namespace);
            ctx.register_catalog(&self.catalog_name, resolution.catalog.clone());
            let may_commit = || match client_gone.is_cancelled() {
                true => Err(cancelled_upload()),
                false => Ok(()),
            };
            self.run_write(&ctx, dml, &resolution.catalog, &how, &may_commit)
                .await
        }
        .await;
        discard_staging(provider.table(), &write_id).await;
        Ok(written? as i64)
    }

    /// Creates the table; `false` if someone else created it meanwhile.
    async fn create_for_ingest(&self, ident: &TableIdent, schema: &Schema) -> Result<bool> {
        let iceberg_schema = crate::table::iceberg_schema_of(schema).map_err(|e| {
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
            // Created meanwhile by someone else.
            Err(_) if self.catalog.table_exists(ident).await? => Ok(false),
            Err(e) => Err(e.into()),
        }
    }
}

/// Refuses an upload whose columns cannot go into the table, before anything is
/// staged: a column the table does not have (its values would be lost), or one whose
/// type cannot be cast to the table's.
fn check_columns(uploaded: &Schema, table: &Schema, ident: &TableIdent) -> Result<()> {
    for field in uploaded.fields() {
        let Ok(column) = table.field_with_name(field.name()) else {
            return Err(FloeError::invalid(format!(
                "ingest: table '{ident}' has no column '{}'",
                field.name()
            )));
        };
        if !can_cast_types(field.data_type(), column.data_type()) {
            return Err(FloeError::invalid(format!(
                "ingest: column '{}' is {} in the upload and {} in table '{ident}'",
                field.name(),
                field.data_type(),
                column.data_type()
            )));
        }
    }
    Ok(())
}

fn cancelled_upload() -> FloeError {
    FloeError::new(
        ErrorKind::Cancelled,
        "ingest: the client cancelled the upload; nothing was committed",
    )
}

/// Spools the upload into the write's staging directory; if the upload fails, deletes
/// the write's directory (it holds nothing else yet).
async fn stage_upload(
    upload: SendableRecordBatchStream,
    table: &Table,
    write_id: &str,
) -> Result<Vec<StagedFile>> {
    let location = staging_location(table.metadata(), write_id);
    match spool(
        upload,
        table.file_io(),
        &location,
        write_id,
        STAGING_FILE_BYTES,
    )
    .await
    {
        Ok(staged) => Ok(staged),
        Err(e) => {
            discard_writes(table, &[write_id.to_string()]).await;
            Err(FloeError::new(
                e.kind,
                format!("{}; nothing was committed", e.message),
            ))
        }
    }
}

/// The uploaded columns laid out as the table's, by name: cast to the table's types,
/// NULL for table columns the upload lacks (see [`check_columns`] for the others).
fn to_table_columns(
    uploaded: LogicalPlan,
    uploaded_schema: &Schema,
    table: &Schema,
) -> Result<LogicalPlan> {
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
