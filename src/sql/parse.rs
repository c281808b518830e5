//! Parsing: one statement per request, in [`FloeDialect`] (the generic dialect plus
//! Floe's own syntax). The text goes to the parser as it is; nothing is cut out or
//! re-joined.

use datafusion::sql::parser::{DFParser, DFParserBuilder, Statement};
use datafusion::sql::sqlparser::ast;
use datafusion::sql::sqlparser::dialect::Dialect;
use datafusion::sql::sqlparser::tokenizer::Token;

use super::dialect::FloeDialect;
use crate::error::{FloeError, Result};

pub fn parse(sql: &str) -> Result<Statement> {
    let mut parser = DFParserBuilder::new(sql)
        .with_dialect(&FloeDialect)
        .build()?;
    skip_semicolons(&mut parser);
    if parser.parser.peek_token().token == Token::EOF {
        return Err(FloeError::invalid("no SQL statement given"));
    }
    // DataFusion's parser reads CREATE itself, without the dialect's hook: try Floe's
    // syntax first, then DataFusion's.
    let statement = match FloeDialect.parse_statement(&mut parser.parser) {
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
