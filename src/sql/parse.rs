//! Parsing: one statement per request, in [`FloeDialect`] (the generic dialect plus
//! Floe's own syntax). The text goes to the parser as it is; nothing is cut out or
//! re-joined.
//!
//! Table versions (`t VERSION AS OF 1`) are read only by a second parse, when the
//! first one fails: sqlparser's versioning also takes `t AT(…)` and `t BEFORE(…)`, which
//! would turn the table aliases `at` and `before` into errors. A statement keeps the
//! generic dialect's meaning wherever it has one.

use datafusion::sql::parser::{DFParser, DFParserBuilder, Statement};
use datafusion::sql::sqlparser::ast;
use datafusion::sql::sqlparser::dialect::Dialect;
use datafusion::sql::sqlparser::tokenizer::Token;

use super::dialect::FloeDialect;
use crate::error::{FloeError, Result};

pub fn parse(sql: &str) -> Result<Statement> {
    parse_in(sql, &FloeDialect::default()).or_else(|error| {
        let versions = FloeDialect {
            table_versions: true,
        };
        parse_in(sql, &versions).map_err(|_| error)
    })
}

fn parse_in(sql: &str, dialect: &FloeDialect) -> Result<Statement> {
    let mut parser = DFParserBuilder::new(sql).with_dialect(dialect).build()?;
    skip_semicolons(&mut parser);
    if parser.parser.peek_token().token == Token::EOF {
        return Err(FloeError::invalid("no SQL statement given"));
    }
    // DataFusion's parser reads CREATE itself, without the dialect's hook: try Floe's
    // syntax first, then DataFusion's.
    let statement = match dialect.parse_statement(&mut parser.parser) {
        Some(statement) => Statement::Statement(Box::new(
            statement.map_err(|e| FloeError::invalid(format!("SQL error: {e}")))?,
        )),
        None => parser.parse_statement()?,
    };
    skip_semicolons(&mut parser);
    if parser.parser.peek_token().token != Token::EOF {
        return Err(FloeError::invalid(
            "expected exactly one SQL statement per request",
        ));
    }
    Ok(statement)
}

/// The SQL statement inside `statement` (under any `EXPLAIN`), if it is one.
pub fn sql_statement_mut(statement: &mut Statement) -> Option<&mut ast::Statement> {
    match statement {
        Statement::Statement(statement) => Some(statement.as_mut()),
        Statement::Explain(explain) => sql_statement_mut(&mut explain.statement),
        _ => None,
    }
}

fn skip_semicolons(parser: &mut DFParser) {
    while parser.parser.consume_token(&Token::SemiColon) {}
}
