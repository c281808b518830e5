//! `SHOW TABLES [FROM | IN schema] [LIKE 'pattern']` and `SHOW SCHEMAS | DATABASES
//! [LIKE 'pattern']`, as queries of `information_schema` (DataFusion plans only a bare
//! `SHOW TABLES`). They list what the caller may read, as the information schema does,
//! sorted by name. Spark's `SHOW TBLPROPERTIES t` and `SHOW PARTITIONS t` read the
//! metadata tables `"t$properties"` and `"t$partitions"`.

use datafusion::sql::parser::Statement as DfStatement;
use datafusion::sql::sqlparser::ast::{
    BinaryOperator, Expr, Ident, Query, SetExpr, ShowStatementFilter, ShowStatementFilterPosition,
    ShowStatementIn, ShowStatementOptions, Statement, Value,
};

use super::ddl::{normalize, parts, schema_name, unknown_catalog};
use super::parse::{parse, sql_statement_mut};
use super::quoted;
use crate::error::{FloeError, Result};

/// Replaces a `SHOW TABLES`, `SHOW SCHEMAS`, `SHOW TBLPROPERTIES` or `SHOW PARTITIONS`
/// (of `catalog`) by its query.
pub fn rewrite(statement: &mut DfStatement, catalog: &str) -> Result<()> {
    let Some(sql) = sql_statement_mut(statement) else {
        return Ok(());
    };
    let query = match sql {
        Statement::ShowTables {
            extended: false,
            full: false,
            terse: false,
            history: false,
            external: false,
            show_options,
        } => tables(show_options, catalog)?,
        Statement::ShowSchemas {
            terse: false,
            history: false,
            show_options,
        }
        | Statement::ShowDatabases {
            terse: false,
            history: false,
            show_options,
        } => schemas(show_options, catalog)?,
        Statement::ShowVariable { variable } => match metadata_listing(variable)? {
            Some(query) => query,
            None => return Ok(()),
        },
        _ => return Ok(()),
    };
    *sql = Statement::Query(Box::new(query));
    Ok(())
}

fn tables(options: &ShowStatementOptions, catalog: &str) -> Result<Query> {
    let mut conditions = Vec::new();
    if let Some(ShowStatementIn {
        parent_name: Some(name),
        ..
    }) = &options.show_in
    {
        let schema = schema_name(name, catalog)?;
        conditions.push(Expr::BinaryOp {
            left: Box::new(column("table_schema")),
            op: BinaryOperator::Eq,
            right: Box::new(text(schema)),
        });
    }
    conditions.extend(name_filter(options, "table_name")?);
    listing_query(
        "SELECT * FROM information_schema.tables ORDER BY table_schema, table_name",
        conditions,
    )
}

fn schemas(options: &ShowStatementOptions, catalog: &str) -> Result<Query> {
    let mut conditions = Vec::new();
    if let Some(ShowStatementIn {
        parent_name: Some(name),
        ..
    }) = &options.show_in
    {
        // `SHOW SCHEMAS FROM catalog`: Floe serves one.
        if parts(name)? != [catalog] {
            return Err(unknown_catalog(&name.to_string()));
        }
    }
    conditions.extend(name_filter(options, "schema_name")?);
    listing_query(
        "SELECT schema_name FROM information_schema.schemata ORDER BY schema_name",
        conditions,
    )
}

/// `SHOW TBLPROPERTIES t` / `SHOW PARTITIONS t` (the parser reads them as a variable
/// named by their words), else `None`.
fn metadata_listing(words: &[Ident]) -> Result<Option<Query>> {
    let Some((what, [table @ .., name])) = words.split_first() else {
        return Ok(None);
    };
    if what.quote_style.is_some() {
        return Ok(None);
    }
    let (suffix, listing) = match what.value.to_lowercase().as_str() {
        "tblproperties" => ("properties", "SELECT key, value FROM {} ORDER BY key"),
        "partitions" => ("partitions", "SELECT * FROM {}"),
        _ => return Ok(None),
    };
    let metadata_table = format!("{}${suffix}", normalize(name));
    let parts: Vec<String> = table
        .iter()
        .map(normalize)
        .chain([metadata_table])
        .map(|part| quoted(&part))
        .collect();
    let query = listing.replace("{}", &parts.join("."));
    listing_query(&query, Vec::new()).map(Some)
}

/// `LIKE 'pattern'` / `ILIKE 'pattern'` on the listed names; the other options are
/// refused by name.
fn name_filter(options: &ShowStatementOptions, name_column: &str) -> Result<Option<Expr>> {
    if options.starts_with.is_some() || options.limit.is_some() || options.limit_from.is_some() {
        return Err(FloeError::unimplemented(
            "SHOW … STARTS WITH / LIMIT is not supported",
        ));
    }
    let filter = match &options.filter_position {
        None => return Ok(None),
        Some(ShowStatementFilterPosition::Infix(filter))
        | Some(ShowStatementFilterPosition::Suffix(filter)) => filter,
    };
    let (pattern, case_insensitive) = match filter {
        ShowStatementFilter::Like(pattern) => (pattern, false),
        ShowStatementFilter::ILike(pattern) => (pattern, true),
        ShowStatementFilter::Where(_) | ShowStatementFilter::NoKeyword(_) => {
            return Err(FloeError::unimplemented(
                "SHOW takes LIKE 'pattern' or ILIKE 'pattern' as its filter",
            ));
        }
    };
    let (expr, pattern) = (
        Box::new(column(name_column)),
        Box::new(text(pattern.clone())),
    );
    Ok(Some(match case_insensitive {
        false => Expr::Like {
            negated: false,
            any: false,
            expr,
            pattern,
            escape_char: None,
        },
        true => Expr::ILike {
            negated: false,
            any: false,
            expr,
            pattern,
            escape_char: None,
        },
    }))
}

/// `query` (a fixed listing) with `conditions` as its WHERE clause.
fn listing_query(query: &str, conditions: Vec<Expr>) -> Result<Query> {
    let mut statement = parse(query)?;
    let Some(Statement::Query(query)) = sql_statement_mut(&mut statement).cloned() else {
        return Err(FloeError::internal("a listing query that is not a query"));
    };
    let mut query = *query;
    let SetExpr::Select(select) = query.body.as_mut() else {
        return Err(FloeError::internal("a listing query that is not a SELECT"));
    };
    select.selection = conditions.into_iter().reduce(|all, next| Expr::BinaryOp {
        left: Box::new(all),
        op: BinaryOperator::And,
        right: Box::new(next),
    });
    Ok(query)
}

fn column(name: &str) -> Expr {
    Expr::Identifier(Ident::new(name))
}

fn text(value: String) -> Expr {
    Expr::Value(Value::SingleQuotedString(value).into())
}
