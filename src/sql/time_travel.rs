//! `FROM t VERSION AS OF 123` and `FROM t TIMESTAMP AS OF '2026-01-01 00:00:00'`:
//! DataFusion does not plan table versions, so each versioned reference is renamed to
//! the name that stands for the table as of that snapshot (`table::time_travel`), which
//! the statement then resolves like any table name.

use std::ops::ControlFlow;

use datafusion::arrow::compute::kernels::cast_utils::string_to_timestamp_nanos;
use datafusion::sql::parser::Statement;
use datafusion::sql::sqlparser::ast::{
    Expr, ObjectNamePart, TableFactor, TableVersion, Value, VisitMut, VisitorMut,
};

use super::parse::sql_statement_mut;
use crate::error::{FloeError, Result};
use crate::table::time_travel::AsOf;

/// Renames every versioned table reference of `statement` (see the module docs).
pub fn rewrite(statement: &mut Statement) -> Result<()> {
    let Some(statement) = sql_statement_mut(statement) else {
        return Ok(());
    };
    match statement.visit(&mut Versions) {
        ControlFlow::Break(e) => Err(e),
        ControlFlow::Continue(()) => Ok(()),
    }
}

struct Versions;

impl VisitorMut for Versions {
    type Break = FloeError;

    fn pre_visit_table_factor(&mut self, factor: &mut TableFactor) -> ControlFlow<FloeError> {
        let TableFactor::Table { name, version, .. } = factor else {
            return ControlFlow::Continue(());
        };
        let Some(asked) = version.take() else {
            return ControlFlow::Continue(());
        };
        let as_of = match as_of(&asked) {
            Ok(as_of) => as_of,
            Err(e) => return ControlFlow::Break(e),
        };
        match name.0.last_mut() {
            Some(ObjectNamePart::Identifier(table)) => {
                table.value = as_of.name(&table.value);
                ControlFlow::Continue(())
            }
            _ => ControlFlow::Break(FloeError::invalid(format!(
                "cannot read {name} as of a version"
            ))),
        }
    }
}

fn as_of(version: &TableVersion) -> Result<AsOf> {
    match version {
        TableVersion::VersionAsOf(Expr::Value(value)) => match &value.value {
            Value::Number(id, _) => id
                .parse()
                .map(AsOf::Snapshot)
                .map_err(|_| FloeError::invalid(format!("VERSION AS OF {id}: not a snapshot id"))),
            Value::SingleQuotedString(name) => Ok(AsOf::Ref(name.clone())),
            other => Err(FloeError::invalid(format!(
                "VERSION AS OF {other}: give a snapshot id, or a tag's or branch's name as a string"
            ))),
        },
        TableVersion::TimestampAsOf(expr) => {
            let text = match expr {
                Expr::Value(value) => value.value.clone().into_string(),
                Expr::TypedString(typed) => typed.value.value.clone().into_string(),
                _ => None,
            };
            let text = text.ok_or_else(|| {
                FloeError::invalid(format!(
                    "TIMESTAMP AS OF {expr}: give a timestamp literal, such as '2026-01-31 12:00:00'"
                ))
            })?;
            let nanos = string_to_timestamp_nanos(&text)
                .map_err(|e| FloeError::invalid(format!("TIMESTAMP AS OF '{text}': {e}")))?;
            Ok(AsOf::Time(nanos.div_euclid(1_000_000)))
        }
        other => Err(FloeError::unimplemented(format!(
            "{other}: Floe reads `VERSION AS OF <snapshot id>` and `TIMESTAMP AS OF '<timestamp>'`"
        ))),
    }
}
