//! Parsing: DataFusion's parser (generic dialect), plus Spark/Iceberg's
//! `CREATE TABLE … PARTITIONED BY (col, bucket(16, id), day(ts), …)`, which no stock
//! dialect accepts. The partition clause is cut out of the token stream before
//! parsing and its expressions are parsed separately.

use datafusion::sql::parser::{DFParser, Statement};
use datafusion::sql::sqlparser::ast::Expr;
use datafusion::sql::sqlparser::dialect::GenericDialect;
use datafusion::sql::sqlparser::keywords::Keyword;
use datafusion::sql::sqlparser::parser::Parser;
use datafusion::sql::sqlparser::tokenizer::{Token, Tokenizer};

use crate::error::{FloeError, Result};

pub struct ParsedStatement {
    pub statement: Statement,
    /// The expressions of a `PARTITIONED BY (…)` clause, if the statement had one.
    pub partitioned_by: Option<Vec<Expr>>,
}

pub fn parse(sql: &str) -> Result<ParsedStatement> {
    let dialect = GenericDialect {};
    let tokens = Tokenizer::new(&dialect, sql)
        .tokenize()
        .map_err(|e| FloeError::invalid(format!("SQL error: {e}")))?;
    let (tokens, clause) = split_partition_clause(tokens)?;
    let partitioned_by = match clause {
        Some(clause) => Some(
            Parser::new(&dialect)
                .with_tokens(clause)
                .parse_comma_separated(Parser::parse_expr)
                .map_err(|e| FloeError::invalid(format!("PARTITIONED BY: {e}")))?,
        ),
        None => None,
    };
    let text: String = tokens.iter().map(ToString::to_string).collect();
    let mut statements = DFParser::parse_sql_with_dialect(&text, &dialect)?;
    let statement = match (statements.pop_front(), statements.is_empty()) {
        (Some(statement), true) => statement,
        (None, _) => return Err(FloeError::invalid("no SQL statement given")),
        (Some(_), false) => {
            return Err(FloeError::invalid(
                "expected exactly one SQL statement per request",
            ));
        }
    };
    if partitioned_by.is_some() && !is_create_table(&statement) {
        return Err(FloeError::invalid(
            "PARTITIONED BY is only valid in CREATE TABLE",
        ));
    }
    Ok(ParsedStatement {
        statement,
        partitioned_by,
    })
}

fn is_create_table(statement: &Statement) -> bool {
    matches!(
        statement,
        Statement::Statement(s)
            if matches!(s.as_ref(), datafusion::sql::sqlparser::ast::Statement::CreateTable(_))
    )
}

/// Removes `PARTITIONED BY ( … )` (outside any parentheses) from a CREATE statement's
/// tokens; returns the remaining tokens and the tokens inside the clause's parentheses.
fn split_partition_clause(tokens: Vec<Token>) -> Result<(Vec<Token>, Option<Vec<Token>>)> {
    let significant: Vec<usize> = tokens
        .iter()
        .enumerate()
        .filter(|(_, t)| !matches!(t, Token::Whitespace(_)))
        .map(|(i, _)| i)
        .collect();
    let is_keyword = |i: usize, k: Keyword| matches!(&tokens[i], Token::Word(w) if w.keyword == k);
    if significant
        .first()
        .is_none_or(|&i| !is_keyword(i, Keyword::CREATE))
    {
        return Ok((tokens, None));
    }
    let mut depth = 0usize;
    for (pos, &i) in significant.iter().enumerate() {
        match &tokens[i] {
            Token::LParen => depth += 1,
            Token::RParen => depth = depth.saturating_sub(1),
            Token::Word(w) if depth == 0 && w.value.eq_ignore_ascii_case("partitioned") => {
                let (Some(&by), Some(&open)) = (significant.get(pos + 1), significant.get(pos + 2))
                else {
                    break;
                };
                if !is_keyword(by, Keyword::BY) || tokens[open] != Token::LParen {
                    return Err(FloeError::invalid(
                        "PARTITIONED BY takes a parenthesised list: PARTITIONED BY (col, day(ts), …)",
                    ));
                }
                let close = matching_paren(&tokens, open)?;
                let clause = tokens[open + 1..close].to_vec();
                let mut rest = tokens[..i].to_vec();
                rest.extend_from_slice(&tokens[close + 1..]);
                return Ok((rest, Some(clause)));
            }
            _ => {}
        }
    }
    Ok((tokens, None))
}

fn matching_paren(tokens: &[Token], open: usize) -> Result<usize> {
    let mut depth = 0usize;
    for (i, token) in tokens.iter().enumerate().skip(open) {
        match token {
            Token::LParen => depth += 1,
            Token::RParen => {
                depth -= 1;
                if depth == 0 {
                    return Ok(i);
                }
            }
            _ => {}
        }
    }
    Err(FloeError::invalid("PARTITIONED BY: missing ')'"))
}
