//! Parsing: one statement per request, in [`FloeDialect`] (the generic dialect plus
//! Floe's own syntax). The text goes to the parser as it is; nothing is cut out or
//! re-joined.
//!
//! Table versions (`t VERSION AS OF 1`) are read only by a second parse, when the
//! first one fails: sqlparser's versioning also takes `t AT(…)` and `t BEFORE(…)`, which
//! would turn the table aliases `at` and `before` into errors. A statement keeps the
//! generic dialect's meaning wherever it has one. Only if that fails too, a `VERSION AS
//! OF '<tag or branch>'` (which sqlparser does not read) is written as the table name
//! standing for it, and the text parsed a third time.

use datafusion::sql::parser::{DFParser, DFParserBuilder, Statement};
use datafusion::sql::sqlparser::ast;
use datafusion::sql::sqlparser::dialect::Dialect;
use datafusion::sql::sqlparser::keywords::Keyword;
use datafusion::sql::sqlparser::tokenizer::{Token, Tokenizer, Whitespace};

use super::chains::balance_chains;
use super::dialect::FloeDialect;
use crate::error::{FloeError, Result};
use crate::table::time_travel::AsOf;

pub fn parse(sql: &str) -> Result<Statement> {
    refuse_deeply_nested_types(sql)?;
    let mut statement = parse_text(sql)?;
    balance_chains(&mut statement)?;
    Ok(statement)
}

/// Most levels a type may nest (`ARRAY<ARRAY<…>>`, `STRUCT<a STRUCT<…>>`, `INT[][]…`).
/// sqlparser reads nested types by a recursion it does not limit (as it limits nested
/// expressions to 50): a type nested 3,000 deep overflowed the stack and aborted the
/// server. And Iceberg 0.10.1 reads table metadata with serde_json's nesting limit of
/// 128, each level of a struct taking three: a table with a struct nested 45 deep was
/// created in the catalog, then could not be loaded.
pub const MAX_TYPE_NESTING: usize = 32;

fn refuse_deeply_nested_types(sql: &str) -> Result<()> {
    // Only a statement with that many `<` or `[` at all is looked at closely.
    let openings = sql.bytes().filter(|b| matches!(b, b'<' | b'[')).count();
    if openings <= MAX_TYPE_NESTING {
        return Ok(());
    }
    // Text that does not tokenize is for the parser to refuse.
    let Ok(tokens) = Tokenizer::new(&FloeDialect::default(), sql).tokenize() else {
        return Ok(());
    };
    let tokens: Vec<&Token> = tokens
        .iter()
        .filter(|t| !matches!(t, Token::Whitespace(_)))
        .collect();
    let (mut depth, mut brackets) = (0usize, 0usize);
    let mut after_type_name = false;
    for (i, token) in tokens.iter().enumerate() {
        match token {
            Token::Lt if after_type_name => depth += 1,
            Token::Gt => depth = depth.saturating_sub(1),
            Token::ShiftRight => depth = depth.saturating_sub(2),
            // `[]` after `[]`: an array of arrays.
            Token::LBracket if tokens.get(i + 1) == Some(&&Token::RBracket) => brackets += 1,
            Token::RBracket => {}
            _ => brackets = 0,
        }
        if depth > MAX_TYPE_NESTING || brackets > MAX_TYPE_NESTING {
            return Err(FloeError::invalid(format!(
                "a type nests more than {MAX_TYPE_NESTING} levels deep"
            )));
        }
        after_type_name = matches!(token, Token::Word(w)
            if matches!(w.keyword, Keyword::ARRAY | Keyword::STRUCT | Keyword::MAP));
    }
    Ok(())
}

fn parse_text(sql: &str) -> Result<Statement> {
    parse_in(sql, &FloeDialect::default()).or_else(|error| {
        let versions = FloeDialect {
            table_versions: true,
        };
        parse_in(sql, &versions)
            .or_else(|_| match with_named_versions(sql) {
                Some(renamed) => parse_in(&renamed, &versions),
                None => Err(error.clone()),
            })
            .map_err(|_| error)
    })
}

/// `sql` with each `t VERSION AS OF '<tag or branch>'` written as the table name that
/// stands for it (`"t$as-of$r<name>"`, see `table::time_travel`), if it has any:
/// sqlparser reads only snapshot ids after `VERSION AS OF`.
fn with_named_versions(sql: &str) -> Option<String> {
    let dialect = FloeDialect::default();
    let mut tokens = Tokenizer::new(&dialect, sql).tokenize().ok()?;
    let words: Vec<usize> = (0..tokens.len())
        .filter(|&i| !matches!(tokens[i], Token::Whitespace(_)))
        .collect();
    let is_keyword =
        |i: usize, keyword: Keyword| matches!(&tokens[i], Token::Word(w) if w.keyword == keyword);
    let mut found = Vec::new();
    for window in words.windows(5) {
        let [table, version, as_, of, name] = *window else {
            continue;
        };
        if is_keyword(version, Keyword::VERSION)
            && is_keyword(as_, Keyword::AS)
            && is_keyword(of, Keyword::OF)
            && let (Token::Word(table_word), Token::SingleQuotedString(name)) =
                (&tokens[table], &tokens[name])
        {
            let table_name = match table_word.quote_style {
                Some(_) => table_word.value.clone(),
                None => table_word.value.to_lowercase(),
            };
            found.push((
                table,
                version,
                window[4],
                AsOf::Ref(name.clone()).name(&table_name),
            ));
        }
    }
    if found.is_empty() {
        return None;
    }
    for (table, version, last, renamed) in found.into_iter().rev() {
        tokens[table] = Token::make_word(&renamed, Some('"'));
        for token in &mut tokens[version..=last] {
            *token = Token::Whitespace(Whitespace::Space);
        }
    }
    Some(tokens.iter().map(ToString::to_string).collect())
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

/// The selects of a query's body, through its set operations (`UNION`, …), not into
/// subqueries.
pub(super) fn selects_mut(body: &mut ast::SetExpr) -> Vec<&mut ast::Select> {
    match body {
        ast::SetExpr::Select(select) => vec![select.as_mut()],
        ast::SetExpr::SetOperation { left, right, .. } => {
            let mut selects = selects_mut(left);
            selects.extend(selects_mut(right));
            selects
        }
        _ => Vec::new(),
    }
}

/// The call `name(args…)`, as the parser would read it.
pub(super) fn function_call(name: &str, args: Vec<ast::Expr>) -> ast::Expr {
    ast::Expr::Function(ast::Function {
        name: ast::ObjectName::from(vec![ast::Ident::new(name)]),
        uses_odbc_syntax: false,
        parameters: ast::FunctionArguments::None,
        args: ast::FunctionArguments::List(ast::FunctionArgumentList {
            duplicate_treatment: None,
            args: args
                .into_iter()
                .map(|arg| ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(arg)))
                .collect(),
            clauses: vec![],
        }),
        filter: None,
        null_treatment: None,
        over: None,
        within_group: vec![],
    })
}

fn skip_semicolons(parser: &mut DFParser) {
    while parser.parser.consume_token(&Token::SemiColon) {}
}
