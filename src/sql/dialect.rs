//! Floe's SQL dialect: the generic dialect plus Floe's own syntax, parsed in one pass
//! over the statement's tokens (text is never cut up and re-joined, which would lose
//! quoting).
//!
//! Floe's syntax today is Spark/Iceberg's `CREATE TABLE`:
//!
//! ```sql
//! CREATE [OR REPLACE] [TEMPORARY] TABLE [IF NOT EXISTS] name (columns)
//!   [USING iceberg]
//!   [PARTITIONED BY (col, bucket(16, id), truncate(4, s), year(ts) | month | day | hour)]
//!   [LOCATION 'uri'] [COMMENT 'text']
//!   [TBLPROPERTIES ('key' = 'value', …)] [WITH (key = value, …)]
//!   [AS query]
//! ```
//!
//! The clauses may come in any order, each at most once. A `CREATE TABLE` with any
//! other clause is left to the generic dialect, so DDL can refuse what Floe does not
//! honour by name instead of failing to parse it.
//!
//! The partition list is kept in [`CreateTable::partition_by`] as an [`Expr::Tuple`];
//! [`partition_fields`] reads it back. TBLPROPERTIES and WITH options both end up in
//! [`CreateTable::table_options`].

use std::any::TypeId;

use datafusion::sql::sqlparser::ast::{
    CommentDef, CreateTable, CreateTableOptions, Expr, SqlOption, Statement, Use,
};
use datafusion::sql::sqlparser::dialect::{Dialect, GenericDialect};
use datafusion::sql::sqlparser::keywords::Keyword;
use datafusion::sql::sqlparser::parser::{Parser, ParserError};
use datafusion::sql::sqlparser::tokenizer::Token;

/// The generic dialect with Floe's `CREATE TABLE`, and, when `table_versions` is on,
/// `t VERSION AS OF …` / `t TIMESTAMP AS OF …` (see [`super::parse`]).
#[derive(Debug, Default)]
pub struct FloeDialect {
    pub table_versions: bool,
}

/// Forwards the dialect switches to [`GenericDialect`], so Floe parses everything else
/// exactly as the generic dialect does.
macro_rules! generic_switches {
    ($($name:ident),* $(,)?) => {
        $(fn $name(&self) -> bool { GenericDialect.$name() })*
    };
}

impl Dialect for FloeDialect {
    /// The parser's own dialect checks treat Floe as the generic dialect.
    fn dialect(&self) -> TypeId {
        TypeId::of::<GenericDialect>()
    }

    fn is_delimited_identifier_start(&self, ch: char) -> bool {
        GenericDialect.is_delimited_identifier_start(ch)
    }

    fn is_identifier_start(&self, ch: char) -> bool {
        GenericDialect.is_identifier_start(ch)
    }

    fn is_identifier_part(&self, ch: char) -> bool {
        GenericDialect.is_identifier_part(ch)
    }

    /// `t VERSION AS OF …` and `t TIMESTAMP AS OF …` (see `time_travel`).
    fn supports_table_versioning(&self) -> bool {
        self.table_versions
    }

    generic_switches!(
        supports_unicode_string_literal,
        supports_group_by_expr,
        supports_group_by_with_modifier,
        supports_left_associative_joins_without_parens,
        supports_connect_by,
        supports_match_recognize,
        supports_pipe_operator,
        supports_start_transaction_modifier,
        supports_window_function_null_treatment_arg,
        supports_dictionary_syntax,
        supports_window_clause_named_window_reference,
        supports_parenthesized_set_variables,
        supports_select_wildcard_except,
        support_map_literal_syntax,
        allow_extract_custom,
        allow_extract_single_quotes,
        supports_extract_comma_syntax,
        supports_create_view_comment_syntax,
        supports_parens_around_table_factor,
        supports_values_as_table_factor,
        supports_create_index_with_clause,
        supports_explain_with_utility_options,
        supports_limit_comma,
        supports_from_first_select,
        supports_projection_trailing_commas,
        supports_asc_desc_in_column_definition,
        supports_try_convert,
        supports_bitwise_shift_operators,
        supports_comment_on,
        supports_load_extension,
        supports_named_fn_args_with_assignment_operator,
        supports_struct_literal,
        supports_empty_projections,
        supports_nested_comments,
        supports_multiline_comment_hints,
        supports_user_host_grantee,
        supports_string_escape_constant,
        supports_array_typedef_with_brackets,
        supports_match_against,
        supports_set_names,
        supports_comma_separated_set_assignments,
        supports_filter_during_aggregation,
        supports_select_wildcard_exclude,
        supports_data_type_signed_suffix,
        supports_interval_options,
        supports_quote_delimited_string,
        supports_lambda_functions,
        supports_select_wildcard_replace,
        supports_select_wildcard_ilike,
        supports_select_wildcard_rename,
        supports_optimize_table,
        supports_install,
        supports_detach,
        supports_prewhere,
        supports_with_fill,
        supports_limit_by,
        supports_interpolate,
        supports_settings,
        supports_select_format,
        supports_comment_optimizer_hint,
        supports_constraint_keyword_without_name,
    );

    fn parse_infix(
        &self,
        parser: &mut Parser,
        expr: &Expr,
        precedence: u8,
    ) -> Option<Result<Expr, ParserError>> {
        parse_distinct_from(parser, expr, precedence)
    }

    fn parse_statement(&self, parser: &mut Parser) -> Option<Result<Statement, ParserError>> {
        if let Some(use_statement) = parse_use_schema(parser) {
            return Some(use_statement);
        }
        let start = parser.index();
        let header = create_table_header(parser)?;
        match parse_create_table(parser, header) {
            Ok(Some(create)) => Some(Ok(Statement::CreateTable(create))),
            Ok(None) => {
                rewind(parser, start);
                None
            }
            Err(e) => Some(Err(e)),
        }
    }
}

/// `a IS [NOT] DISTINCT FROM b`, `b` taking only what binds tighter than `IS` (as in SQL
/// and PostgreSQL): the generic dialect reads the whole rest of the expression as `b`,
/// so `x IS DISTINCT FROM y AND z` was `x IS DISTINCT FROM (y AND z)`, a wrong answer
/// over booleans and a type error otherwise. `precedence` is that of `IS`.
fn parse_distinct_from(
    parser: &mut Parser,
    expr: &Expr,
    precedence: u8,
) -> Option<Result<Expr, ParserError>> {
    let negated = if parser.parse_keywords(&[Keyword::IS, Keyword::DISTINCT, Keyword::FROM]) {
        false
    } else if parser.parse_keywords(&[Keyword::IS, Keyword::NOT, Keyword::DISTINCT, Keyword::FROM])
    {
        true
    } else {
        return None;
    };
    Some(parser.parse_subexpr(precedence).map(|other| {
        let (left, right) = (Box::new(expr.clone()), Box::new(other));
        if negated {
            Expr::IsNotDistinctFrom(left, right)
        } else {
            Expr::IsDistinctFrom(left, right)
        }
    }))
}

/// The partition expressions of a `CREATE TABLE`: Floe's `PARTITIONED BY (…)` list, or
/// the generic dialect's single `PARTITION BY expr`.
pub fn partition_fields(create: &CreateTable) -> &[Expr] {
    match create.partition_by.as_deref() {
        Some(Expr::Tuple(fields)) => fields,
        Some(field) => std::slice::from_ref(field),
        None => &[],
    }
}

/// `USE SCHEMA s` / `USE DATABASE s` (Spark, Databricks, Snowflake), which the generic
/// dialect reads as `USE` of a schema named `schema`; `None` (nothing consumed) for
/// any other statement.
fn parse_use_schema(parser: &mut Parser) -> Option<Result<Statement, ParserError>> {
    let keyword = |n: usize| match parser.peek_nth_token_ref(n).token {
        Token::Word(ref word) if word.quote_style.is_none() => Some(word.keyword),
        _ => None,
    };
    if keyword(0) != Some(Keyword::USE)
        || !matches!(parser.peek_nth_token_ref(2).token, Token::Word(_))
    {
        return None;
    }
    let form = match keyword(1)? {
        Keyword::SCHEMA => Use::Schema,
        Keyword::DATABASE => Use::Database,
        _ => return None,
    };
    parser.next_token();
    parser.next_token();
    Some(
        parser
            .parse_object_name(false)
            .map(|name| Statement::Use(form(name))),
    )
}

struct Header {
    or_replace: bool,
    temporary: bool,
}

/// Consumes `CREATE [OR REPLACE] [TEMPORARY | TEMP] TABLE` if the statement starts so;
/// otherwise consumes nothing.
fn create_table_header(parser: &mut Parser) -> Option<Header> {
    let start = parser.index();
    let header = (|| {
        if !parser.parse_keyword(Keyword::CREATE) {
            return None;
        }
        let or_replace = parser.parse_keywords(&[Keyword::OR, Keyword::REPLACE]);
        let temporary = parser
            .parse_one_of_keywords(&[Keyword::TEMPORARY, Keyword::TEMP])
            .is_some();
        parser.parse_keyword(Keyword::TABLE).then_some(Header {
            or_replace,
            temporary,
        })
    })();
    if header.is_none() {
        rewind(parser, start);
    }
    header
}

fn rewind(parser: &mut Parser, index: usize) {
    while parser.index() > index {
        parser.prev_token();
    }
}

/// Parses the rest of a `CREATE TABLE` in Floe's grammar; `None` if a clause is not
/// Floe's (the caller rewinds and lets the generic dialect try).
fn parse_create_table(
    parser: &mut Parser,
    header: Header,
) -> Result<Option<CreateTable>, ParserError> {
    let if_not_exists = parser.parse_keywords(&[Keyword::IF, Keyword::NOT, Keyword::EXISTS]);
    let name = parser.parse_object_name(false)?;
    let (columns, constraints) = parser.parse_columns()?;
    let mut create =
        datafusion::sql::sqlparser::ast::helpers::stmt_create_table::CreateTableBuilder::new(name)
            .or_replace(header.or_replace)
            .temporary(header.temporary)
            .if_not_exists(if_not_exists)
            .columns(columns)
            .constraints(constraints)
            .build();
    let mut properties: Option<Vec<SqlOption>> = None;
    let mut seen = Vec::new();
    loop {
        let clause = if parser.parse_keywords(&[Keyword::PARTITIONED, Keyword::BY])
            || parser.parse_keywords(&[Keyword::PARTITION, Keyword::BY])
        {
            create.partition_by = Some(Box::new(Expr::Tuple(parse_partition_list(parser)?)));
            "PARTITIONED BY"
        } else if parser.parse_keyword(Keyword::USING) {
            let format = parser.parse_identifier()?;
            if !format.value.eq_ignore_ascii_case("iceberg") {
                return Err(ParserError::ParserError(format!(
                    "USING {format}: Floe tables are Iceberg tables (USING iceberg)"
                )));
            }
            "USING"
        } else if parser.parse_keyword(Keyword::LOCATION) {
            create.location = Some(parser.parse_literal_string()?);
            "LOCATION"
        } else if parser.parse_keyword(Keyword::COMMENT) {
            let with_eq = parser.consume_token(&Token::Eq);
            let text = parser.parse_literal_string()?;
            create.comment = Some(if with_eq {
                CommentDef::WithEq(text)
            } else {
                CommentDef::WithoutEq(text)
            });
            "COMMENT"
        } else if parser.parse_keyword(Keyword::TBLPROPERTIES) {
            properties
                .get_or_insert_default()
                .extend(parse_option_list(parser)?);
            "TBLPROPERTIES"
        } else if parser.parse_keyword(Keyword::WITH) {
            properties
                .get_or_insert_default()
                .extend(parse_option_list(parser)?);
            "WITH"
        } else if parser.parse_keyword(Keyword::AS) {
            create.query = Some(parser.parse_query()?);
            break;
        } else {
            break;
        };
        if seen.contains(&clause) {
            return Err(ParserError::ParserError(format!(
                "CREATE TABLE: {clause} given twice"
            )));
        }
        seen.push(clause);
    }
    if !matches!(parser.peek_token().token, Token::EOF | Token::SemiColon) {
        return Ok(None);
    }
    if let Some(properties) = properties {
        // Only WITH stays WITH, so the statement prints back as it was written.
        create.table_options = if seen.contains(&"TBLPROPERTIES") {
            CreateTableOptions::TableProperties(properties)
        } else {
            CreateTableOptions::With(properties)
        };
    }
    Ok(Some(create))
}

fn parse_partition_list(parser: &mut Parser) -> Result<Vec<Expr>, ParserError> {
    parser.expect_token(&Token::LParen)?;
    let fields = parser.parse_comma_separated(Parser::parse_expr)?;
    parser.expect_token(&Token::RParen)?;
    Ok(fields)
}

fn parse_option_list(parser: &mut Parser) -> Result<Vec<SqlOption>, ParserError> {
    parser.expect_token(&Token::LParen)?;
    let options = parser.parse_comma_separated(Parser::parse_sql_option)?;
    parser.expect_token(&Token::RParen)?;
    Ok(options)
}
