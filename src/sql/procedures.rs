//! Table maintenance as statements, by Spark's procedure names:
//!
//! - `CALL floe.system.rewrite_data_files(table => 's.t' [, min_input_files => 2]
//!   [, target_file_size_bytes => n])`: compaction. The small data files of each
//!   partition holding at least `min_input_files` of them, and every data file with
//!   delete files, are rewritten by a distributed write (one file per partition value,
//!   deletes applied) and replaced in one `replace` snapshot; the rows stay as they
//!   were. Answers `(rewritten_data_files_count, added_data_files_count,
//!   rewritten_bytes_count)`.
//! - `CALL floe.system.expire_snapshots(table => 's.t' [, older_than => TIMESTAMP '…']
//!   [, retain_last => 1])`: see `table::maintenance::expire_snapshots`. Defaults: the
//!   table's `history.expire.max-snapshot-age-ms` (5 days) and
//!   `history.expire.min-snapshots-to-keep` (1). Answers `(expired_snapshots_count,
//!   deleted_data_files_count, deleted_delete_files_count, deleted_manifest_files_count,
//!   deleted_manifest_lists_count)`.
//!
//! - `CALL floe.system.remove_orphan_files(table => 's.t' [, older_than => TIMESTAMP '…']
//!   [, dry_run => true])`: deletes the files under the table's location that nothing
//!   references (see `table::maintenance::orphan_files`) and that are older than
//!   `older_than` (default: 3 days ago, as Spark's), which protects writes still running on
//!   other coordinators; this coordinator's writes in flight are always kept. Answers one
//!   row per file, `orphan_file_location` (with `dry_run`, deleting nothing). Local
//!   storage and S3.
//!
//! Arguments are given by name (`name => value`) or by position, as literals.

use std::sync::Arc;

use datafusion::arrow::array::{RecordBatch, StringArray};
use datafusion::arrow::compute::kernels::cast_utils::string_to_timestamp_nanos;
use datafusion::arrow::datatypes::{DataType, Field, Schema};
use datafusion::sql::sqlparser::ast::{
    Expr, Function, FunctionArg, FunctionArgExpr, FunctionArguments, Ident, ObjectName, Value,
};
use iceberg::TableIdent;
use iceberg::spec::Operation;

use super::parse::parse;
use super::row_level::reading;
use super::{Caller, Engine, Planned, counts_batch, quoted};
use crate::error::{FloeError, Result};
use crate::table::journal;
use crate::table::maintenance::{
    compaction_candidates, delete_files, expire_snapshots, orphan_files,
};
use crate::table::overwrite::{Overwrite, Removal};
use crate::table::write::TARGET_FILE_SIZE;
use crate::table::write_protocol::WriteCommit;

const REWRITE_COLUMNS: [&str; 3] = [
    "rewritten_data_files_count",
    "added_data_files_count",
    "rewritten_bytes_count",
];
const DEFAULT_TARGET_FILE_SIZE: u64 = 512 * 1024 * 1024;
const MAX_SNAPSHOT_AGE: &str = "history.expire.max-snapshot-age-ms";
const DEFAULT_MAX_SNAPSHOT_AGE_MS: i64 = 5 * 24 * 60 * 60 * 1000;
const MIN_SNAPSHOTS_TO_KEEP: &str = "history.expire.min-snapshots-to-keep";
/// Spark's default for `remove_orphan_files`' `older_than`: 3 days.
const DEFAULT_ORPHAN_AGE_MS: i64 = 3 * 24 * 60 * 60 * 1000;

/// The procedures, with their parameters in positional order.
const PROCEDURES: [(&str, &[&str]); 3] = [
    (
        "rewrite_data_files",
        &["table", "min_input_files", "target_file_size_bytes"],
    ),
    ("expire_snapshots", &["table", "older_than", "retain_last"]),
    ("remove_orphan_files", &["table", "older_than", "dry_run"]),
];

fn procedure_names() -> String {
    let names: Vec<&str> = PROCEDURES.iter().map(|(name, _)| *name).collect();
    names.join(", ")
}

/// A procedure's arguments, matched to its parameter names.
struct Arguments {
    procedure: String,
    values: Vec<(String, Literal)>,
}

#[derive(Debug, Clone)]
enum Literal {
    Text(String),
    Number(String),
    Bool(bool),
}

impl Arguments {
    fn of(procedure: &str, call: &Function, parameters: &[&str]) -> Result<Self> {
        let FunctionArguments::List(list) = &call.args else {
            return Ok(Self {
                procedure: procedure.to_string(),
                values: Vec::new(),
            });
        };
        let mut values = Vec::new();
        for (position, arg) in list.args.iter().enumerate() {
            let (name, expr) = match arg {
                FunctionArg::Named { name, arg, .. } => (name.value.to_lowercase(), arg),
                FunctionArg::Unnamed(arg) => {
                    let name = parameters.get(position).ok_or_else(|| {
                        FloeError::invalid(format!(
                            "{procedure} takes at most {} arguments",
                            parameters.len()
                        ))
                    })?;
                    (name.to_string(), arg)
                }
                FunctionArg::ExprNamed { name, .. } => {
                    return Err(FloeError::invalid(format!(
                        "{procedure}: name arguments as `name => value`, not {name}"
                    )));
                }
            };
            if !parameters.contains(&name.as_str()) {
                return Err(FloeError::invalid(format!(
                    "{procedure} has no argument '{name}'; it takes {}",
                    parameters.join(", ")
                )));
            }
            values.push((name, literal(procedure, expr)?));
        }
        Ok(Self {
            procedure: procedure.to_string(),
            values,
        })
    }

    fn get(&self, name: &str) -> Option<&Literal> {
        self.values.iter().find(|(n, _)| n == name).map(|(_, v)| v)
    }

    fn text(&self, name: &str) -> Result<Option<String>> {
        match self.get(name) {
            Some(Literal::Text(text)) => Ok(Some(text.clone())),
            Some(other) => Err(self.wrong(name, other, "a string")),
            None => Ok(None),
        }
    }

    fn number(&self, name: &str) -> Result<Option<u64>> {
        match self.get(name) {
            Some(Literal::Number(n)) => n
                .parse()
                .map(Some)
                .map_err(|_| self.wrong(name, &Literal::Number(n.clone()), "a whole number")),
            Some(other) => Err(self.wrong(name, other, "a number")),
            None => Ok(None),
        }
    }

    fn flag(&self, name: &str) -> Result<Option<bool>> {
        match self.get(name) {
            Some(Literal::Bool(b)) => Ok(Some(*b)),
            Some(other) => Err(self.wrong(name, other, "true or false")),
            None => Ok(None),
        }
    }

    /// A timestamp argument, in milliseconds since the epoch (UTC unless it says).
    fn timestamp_ms(&self, name: &str) -> Result<Option<i64>> {
        let Some(text) = self.text(name)? else {
            return Ok(None);
        };
        let nanos = string_to_timestamp_nanos(&text)
            .map_err(|e| FloeError::invalid(format!("{}: {name} '{text}': {e}", self.procedure)))?;
        Ok(Some(nanos.div_euclid(1_000_000)))
    }

    fn wrong(&self, name: &str, value: &Literal, wanted: &str) -> FloeError {
        FloeError::invalid(format!(
            "{}: {name} must be {wanted}, not {value:?}",
            self.procedure
        ))
    }
}

fn literal(procedure: &str, arg: &FunctionArgExpr) -> Result<Literal> {
    let FunctionArgExpr::Expr(expr) = arg else {
        return Err(FloeError::invalid(format!(
            "{procedure}: arguments are literals"
        )));
    };
    match expr {
        Expr::Value(value) => match &value.value {
            Value::Number(n, _) => Ok(Literal::Number(n.clone())),
            Value::Boolean(b) => Ok(Literal::Bool(*b)),
            other => other
                .clone()
                .into_string()
                .map(Literal::Text)
                .ok_or_else(|| FloeError::invalid(format!("{procedure}: cannot take {other}"))),
        },
        Expr::TypedString(typed) => typed
            .value
            .value
            .clone()
            .into_string()
            .map(Literal::Text)
            .ok_or_else(|| FloeError::invalid(format!("{procedure}: cannot take {expr}"))),
        other => Err(FloeError::invalid(format!(
            "{procedure}: arguments are literals, not {other}"
        ))),
    }
}

/// The procedure a `CALL` names: `[catalog.]system.<name>`.
fn procedure_name(name: &ObjectName, catalog_name: &str) -> Result<String> {
    let parts: Vec<String> = name
        .0
        .iter()
        .filter_map(|p| p.as_ident())
        .map(|i| i.value.to_lowercase())
        .collect();
    match parts.as_slice() {
        [catalog, system, procedure] if catalog == catalog_name && system == "system" => {
            Ok(procedure.clone())
        }
        [system, procedure] if system == "system" => Ok(procedure.clone()),
        _ => Err(FloeError::not_found(format!(
            "procedure {name} not found: Floe has {}, in {catalog_name}.system",
            procedure_names()
        ))),
    }
}

impl Engine {
    /// Runs `CALL …` (see the module documentation); returns its result row.
    pub(super) async fn call(&self, caller: &Caller, call: &Function) -> Result<RecordBatch> {
        let name = procedure_name(&call.name, &self.catalog_name)?;
        let Some((name, parameters)) = PROCEDURES.iter().find(|(known, _)| *known == name) else {
            return Err(FloeError::not_found(format!(
                "procedure system.{name} not found: Floe has {}",
                procedure_names()
            )));
        };
        let args = Arguments::of(name, call, parameters)?;
        match *name {
            "rewrite_data_files" => self.rewrite_data_files(caller, &args).await,
            "expire_snapshots" => self.expire_snapshots(caller, &args).await,
            _ => self.remove_orphan_files(caller, &args).await,
        }
    }

    /// The table a procedure's `table` argument names, which the caller may change.
    fn procedure_table(&self, caller: &Caller, args: &Arguments) -> Result<TableIdent> {
        let name = args.text("table")?.ok_or_else(|| {
            FloeError::invalid(format!(
                "{}: name the table (table => 's.t')",
                args.procedure
            ))
        })?;
        let parts: Vec<Ident> = name.split('.').map(Ident::new).collect();
        self.names(caller).table(&ObjectName::from(parts))
    }

    async fn rewrite_data_files(&self, caller: &Caller, args: &Arguments) -> Result<RecordBatch> {
        self.catalog.check_commit_changes()?;
        let ident = self.procedure_table(caller, args)?;
        let name = format!(
            "{}.{}",
            quoted(&ident.namespace().to_url_string()),
            quoted(ident.name())
        );
        let insert = parse(&format!("INSERT INTO {name} SELECT * FROM {name}"))?;
        let (catalog, planned, _) = self.plan(caller, insert, &[]).await?;
        let Planned::Write(ctx, mut dml) = planned else {
            return Err(FloeError::internal("rewrite_data_files planned as a query"));
        };
        let provider = catalog.target_of(&dml)?;
        let table = provider.table().clone();
        let target_size = match args.number("target_file_size_bytes")? {
            Some(size) => size,
            None => table
                .metadata()
                .properties()
                .get(TARGET_FILE_SIZE)
                .and_then(|v| v.parse().ok())
                .unwrap_or(DEFAULT_TARGET_FILE_SIZE),
        };
        let min_input_files = args.number("min_input_files")?.unwrap_or(2) as usize;
        let chosen = compaction_candidates(&table, target_size, min_input_files).await?;
        if chosen.files.is_empty() {
            return counts_batch(&REWRITE_COLUMNS, &[0, 0, 0]);
        }
        // One task per output file of the target size (for an unpartitioned table, each
        // task writes one file; a partitioned one is shuffled by partition anyway).
        let tasks = chosen.bytes.div_ceil(target_size.max(1)) as usize;
        let restricted = provider
            .restricted_to(chosen.files.clone())?
            .with_max_scan_partitions(tasks);
        dml.input = Arc::new(reading(
            Arc::unwrap_or_clone(dml.input),
            &provider,
            restricted,
        )?);
        let rewritten = chosen.files.len() as u64;
        let how = WriteCommit::Overwrite(Overwrite {
            operation: Operation::Replace,
            ..Overwrite::of(Removal::Files(chosen.files))
        });
        self.run_write(&ctx, dml, &catalog, &how, &|| Ok(()))
            .await?;
        let added = self
            .catalog
            .load_table(&ident)
            .await?
            .metadata()
            .current_snapshot()
            .and_then(|s| {
                s.summary()
                    .additional_properties
                    .get("added-data-files")
                    .cloned()
            })
            .and_then(|n| n.parse().ok())
            .unwrap_or(0);
        counts_batch(&REWRITE_COLUMNS, &[rewritten, added, chosen.bytes])
    }

    async fn expire_snapshots(&self, caller: &Caller, args: &Arguments) -> Result<RecordBatch> {
        self.catalog.check_commit_changes()?;
        let ident = self.procedure_table(caller, args)?;
        let table = self.catalog.load_table(&ident).await?;
        let properties = table.metadata().properties();
        let older_than = match args.timestamp_ms("older_than")? {
            Some(ms) => ms,
            None => {
                let age = properties
                    .get(MAX_SNAPSHOT_AGE)
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(DEFAULT_MAX_SNAPSHOT_AGE_MS);
                chrono::Utc::now().timestamp_millis() - age
            }
        };
        let retain_last = match args.number("retain_last")? {
            Some(n) => n as usize,
            None => properties
                .get(MIN_SNAPSHOTS_TO_KEEP)
                .and_then(|v| v.parse().ok())
                .unwrap_or(1),
        };
        let expired =
            expire_snapshots(self.catalog.as_ref(), &table, older_than, retain_last).await?;
        counts_batch(
            &[
                "expired_snapshots_count",
                "deleted_data_files_count",
                "deleted_delete_files_count",
                "deleted_manifest_files_count",
                "deleted_manifest_lists_count",
            ],
            &[
                expired.snapshots,
                expired.data_files,
                expired.delete_files,
                expired.manifests,
                expired.manifest_lists,
            ],
        )
    }

    async fn remove_orphan_files(&self, caller: &Caller, args: &Arguments) -> Result<RecordBatch> {
        let ident = self.procedure_table(caller, args)?;
        let table = self.catalog.load_table(&ident).await?;
        let older_than = match args.timestamp_ms("older_than")? {
            Some(ms) => ms,
            None => chrono::Utc::now().timestamp_millis() - DEFAULT_ORPHAN_AGE_MS,
        };
        let orphans = orphan_files(&table, older_than, &journal::in_flight()).await?;
        if !args.flag("dry_run")?.unwrap_or(false) {
            let deleted = delete_files(&table, &orphans).await;
            tracing::info!(table = %ident, orphans = orphans.len(), deleted, "remove_orphan_files");
        }
        let schema = Arc::new(Schema::new(vec![Field::new(
            "orphan_file_location",
            DataType::Utf8,
            false,
        )]));
        let column = StringArray::from_iter_values(orphans.iter().map(String::as_str));
        Ok(RecordBatch::try_new(schema, vec![Arc::new(column)])?)
    }
}
