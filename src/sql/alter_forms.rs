//! The `ALTER TABLE` forms of Spark's Iceberg extensions, which sqlparser does not read:
//!
//! ```sql
//! ALTER TABLE t CREATE [OR REPLACE] TAG|BRANCH [IF NOT EXISTS] name
//!     [AS OF VERSION <snapshot id>] [RETAIN <n> DAYS|HOURS|MINUTES]
//! ALTER TABLE t REPLACE TAG|BRANCH name [AS OF VERSION …] [RETAIN …]
//! ALTER TABLE t DROP TAG|BRANCH [IF EXISTS] name
//! ALTER TABLE t ADD PARTITION FIELD <column | transform> [AS name]
//! ALTER TABLE t DROP PARTITION FIELD <column | transform | name>
//! ALTER TABLE t REPLACE PARTITION FIELD <…> WITH <column | transform> [AS name]
//! ALTER TABLE t UNSET TBLPROPERTIES [IF EXISTS] ('key', …)
//! ALTER TABLE t ADD COLUMN [IF NOT EXISTS] a.b… type [NULL] [COMMENT '…']
//! ALTER TABLE t DROP COLUMN [IF EXISTS] a.b…
//! ALTER TABLE t RENAME COLUMN a.b… TO c
//! ALTER TABLE t ALTER COLUMN a.b… TYPE type | SET DATA TYPE type | DROP NOT NULL
//! ```
//!
//! (the column forms with a nested path; sqlparser reads them with a plain name).
//!
//! A statement that starts as one of these is read here, before sqlparser sees it;
//! anything else goes on to the parser as it is. What they do is in `refs` (tags and
//! branches) and `alter` (partitioning, properties).

use datafusion::sql::sqlparser::ast::{
    ColumnDef, ColumnOption, ColumnOptionDef, DataType, Expr, Ident, ObjectName,
};
use datafusion::sql::sqlparser::keywords::Keyword;
use datafusion::sql::sqlparser::parser::{Parser, ParserError};
use datafusion::sql::sqlparser::tokenizer::Token;

use super::dialect::FloeDialect;
use super::refs::{RefAction, RefKind, RefStatement};
use crate::error::{FloeError, Result};

/// One of the statements this module reads.
#[derive(Debug, Clone, PartialEq)]
pub enum AlterForm {
    Ref(RefStatement),
    Partitioning {
        table: ObjectName,
        change: PartitionChange,
    },
    UnsetProperties {
        table: ObjectName,
        if_exists: bool,
        keys: Vec<String>,
    },
    NestedColumn {
        table: ObjectName,
        change: ColumnChange,
    },
}

/// A change of a field inside a struct column, named by its path (`point.x`).
#[derive(Debug, Clone, PartialEq)]
pub enum ColumnChange {
    Add {
        path: Vec<Ident>,
        /// The new field (its name is the path's last).
        column: ColumnDef,
        if_not_exists: bool,
    },
    Drop {
        path: Vec<Ident>,
        if_exists: bool,
    },
    Rename {
        path: Vec<Ident>,
        to: Ident,
    },
    Retype {
        path: Vec<Ident>,
        data_type: DataType,
    },
    DropNotNull {
        path: Vec<Ident>,
    },
    SetNotNull {
        path: Vec<Ident>,
    },
}

/// A change of the table's partition spec. Fields are given as in `PARTITIONED BY`
/// (`col`, `bucket(16, col)`, …); a field to drop may also be given by its name.
#[derive(Debug, Clone, PartialEq)]
pub enum PartitionChange {
    Add {
        field: Box<Expr>,
        name: Option<Ident>,
    },
    Drop {
        field: Box<Expr>,
    },
    Replace {
        old: Box<Expr>,
        new: Box<Expr>,
        name: Option<Ident>,
    },
}

type Parsed<T> = std::result::Result<T, ParserError>;

/// The statement `sql` is, if it is one of this module's forms.
pub fn parse_alter_form(sql: &str) -> Result<Option<AlterForm>> {
    // Every statement passes here: only an ALTER is tokenized.
    if !starts_with_alter(sql) {
        return Ok(None);
    }
    let dialect = FloeDialect::default();
    let mut parser = Parser::new(&dialect)
        .try_with_sql(sql)
        .map_err(|e| FloeError::invalid(format!("SQL error: {e}")))?;
    if !parser.parse_keywords(&[Keyword::ALTER, Keyword::TABLE]) {
        return Ok(None);
    }
    let Ok(table) = parser.parse_object_name(false) else {
        return Ok(None);
    };
    let Some(form) = form_start(&mut parser) else {
        return Ok(None);
    };
    let parsed = parse_form(&mut parser, table, form).and_then(|statement| {
        while parser.consume_token(&Token::SemiColon) {}
        match parser.peek_token().token {
            Token::EOF => Ok(statement),
            _ => parser.expected("end of statement", parser.peek_token()),
        }
    });
    parsed
        .map(Some)
        .map_err(|e| FloeError::invalid(format!("SQL error: {e}")))
}

/// Whether the first word of `sql`, after blanks and comments, is ALTER.
fn starts_with_alter(mut sql: &str) -> bool {
    loop {
        sql = sql.trim_start();
        if let Some(rest) = sql.strip_prefix("--") {
            sql = rest.split_once('\n').map_or("", |(_, after)| after);
        } else if let Some(rest) = sql.strip_prefix("/*") {
            sql = rest.split_once("*/").map_or("", |(_, after)| after);
        } else {
            return sql
                .get(..5)
                .is_some_and(|w| w.eq_ignore_ascii_case("alter"));
        }
    }
}

/// How a form starts, once it is sure to be one.
enum Start {
    Ref {
        verb: Keyword,
        or_replace: bool,
        kind: RefKind,
    },
    Partition(Keyword),
    Unset,
    /// A column form (ADD, DROP, RENAME or ALTER) whose path is nested.
    NestedColumn(Keyword),
}

fn form_start(parser: &mut Parser) -> Option<Start> {
    if parser.parse_keywords(&[Keyword::UNSET, Keyword::TBLPROPERTIES]) {
        return Some(Start::Unset);
    }
    if let Some(verb) = nested_column_start(parser) {
        return Some(Start::NestedColumn(verb));
    }
    let verb = parser.parse_one_of_keywords(&[
        Keyword::CREATE,
        Keyword::REPLACE,
        Keyword::DROP,
        Keyword::ADD,
    ])?;
    if verb != Keyword::CREATE && parser.peek_keyword(Keyword::PARTITION) {
        let index = parser.index();
        parser.next_token();
        if next_word_is(parser, "FIELD") {
            return Some(Start::Partition(verb));
        }
        while parser.index() > index {
            parser.prev_token();
        }
        return None;
    }
    let or_replace =
        verb == Keyword::CREATE && parser.parse_keywords(&[Keyword::OR, Keyword::REPLACE]);
    let kind = if parser.parse_keyword(Keyword::TAG) {
        RefKind::Tag
    } else if next_word_is(parser, "BRANCH") {
        RefKind::Branch
    } else {
        return None;
    };
    (verb != Keyword::ADD).then_some(Start::Ref {
        verb,
        or_replace,
        kind,
    })
}

/// `ADD|DROP|RENAME|ALTER COLUMN [IF [NOT] EXISTS] a.b`: consumes the verb and COLUMN,
/// leaving the parser at IF or the path, if the path has a dot; else consumes nothing.
fn nested_column_start(parser: &mut Parser) -> Option<Keyword> {
    let keyword = |token: &Token| match token {
        Token::Word(word) => Some(word.keyword),
        _ => None,
    };
    let ahead = parser.peek_tokens::<7>();
    let verb = keyword(&ahead[0])
        .filter(|k| [Keyword::ADD, Keyword::DROP, Keyword::RENAME, Keyword::ALTER].contains(k))?;
    if keyword(&ahead[1]) != Some(Keyword::COLUMN) {
        return None;
    }
    let path_at = match (keyword(&ahead[2]), keyword(&ahead[3])) {
        (Some(Keyword::IF), Some(Keyword::NOT)) => 5,
        (Some(Keyword::IF), _) => 4,
        _ => 2,
    };
    let dotted = matches!(ahead[path_at], Token::Word(_)) && ahead[path_at + 1] == Token::Period;
    if !dotted {
        return None;
    }
    parser.next_token();
    parser.next_token();
    Some(verb)
}

fn parse_nested_column(parser: &mut Parser, verb: Keyword) -> Parsed<ColumnChange> {
    match verb {
        Keyword::ADD => {
            let if_not_exists =
                parser.parse_keywords(&[Keyword::IF, Keyword::NOT, Keyword::EXISTS]);
            let path = column_path(parser)?;
            let data_type = parser.parse_data_type()?;
            let mut options = Vec::new();
            loop {
                let option = if parser.parse_keyword(Keyword::COMMENT) {
                    ColumnOption::Comment(parser.parse_literal_string()?)
                } else if parser.parse_keywords(&[Keyword::NOT, Keyword::NULL]) {
                    ColumnOption::NotNull
                } else if parser.parse_keyword(Keyword::NULL) {
                    ColumnOption::Null
                } else {
                    break;
                };
                options.push(ColumnOptionDef { name: None, option });
            }
            let name = path.last().cloned().unwrap_or_else(|| Ident::new(""));
            Ok(ColumnChange::Add {
                path,
                column: ColumnDef {
                    name,
                    data_type,
                    options,
                },
                if_not_exists,
            })
        }
        Keyword::DROP => {
            let if_exists = parser.parse_keywords(&[Keyword::IF, Keyword::EXISTS]);
            Ok(ColumnChange::Drop {
                path: column_path(parser)?,
                if_exists,
            })
        }
        Keyword::RENAME => {
            let path = column_path(parser)?;
            parser.expect_keyword(Keyword::TO)?;
            Ok(ColumnChange::Rename {
                path,
                to: parser.parse_identifier()?,
            })
        }
        _ => {
            let path = column_path(parser)?;
            if parser.parse_keyword(Keyword::TYPE)
                || parser.parse_keywords(&[Keyword::SET, Keyword::DATA, Keyword::TYPE])
            {
                let data_type = parser.parse_data_type()?;
                return Ok(ColumnChange::Retype { path, data_type });
            }
            if parser.parse_keywords(&[Keyword::DROP, Keyword::NOT, Keyword::NULL]) {
                return Ok(ColumnChange::DropNotNull { path });
            }
            if parser.parse_keywords(&[Keyword::SET, Keyword::NOT, Keyword::NULL]) {
                return Ok(ColumnChange::SetNotNull { path });
            }
            parser.expected("TYPE, SET DATA TYPE or DROP NOT NULL", parser.peek_token())
        }
    }
}

/// `a.b.c`: a column's name after the structs it is in.
fn column_path(parser: &mut Parser) -> Parsed<Vec<Ident>> {
    let mut path = vec![parser.parse_identifier()?];
    while parser.consume_token(&Token::Period) {
        path.push(parser.parse_identifier()?);
    }
    Ok(path)
}

fn parse_form(parser: &mut Parser, table: ObjectName, start: Start) -> Parsed<AlterForm> {
    match start {
        Start::NestedColumn(verb) => Ok(AlterForm::NestedColumn {
            table,
            change: parse_nested_column(parser, verb)?,
        }),
        Start::Unset => {
            let if_exists = parser.parse_keywords(&[Keyword::IF, Keyword::EXISTS]);
            parser.expect_token(&Token::LParen)?;
            let keys = parser.parse_comma_separated(|p| p.parse_literal_string())?;
            parser.expect_token(&Token::RParen)?;
            Ok(AlterForm::UnsetProperties {
                table,
                if_exists,
                keys,
            })
        }
        Start::Partition(verb) => {
            let field = Box::new(parser.parse_expr()?);
            let change = match verb {
                Keyword::ADD => PartitionChange::Add {
                    field,
                    name: field_name(parser)?,
                },
                Keyword::DROP => PartitionChange::Drop { field },
                _ => {
                    parser.expect_keyword(Keyword::WITH)?;
                    PartitionChange::Replace {
                        old: field,
                        new: Box::new(parser.parse_expr()?),
                        name: field_name(parser)?,
                    }
                }
            };
            Ok(AlterForm::Partitioning { table, change })
        }
        Start::Ref {
            verb,
            or_replace,
            kind,
        } => parse_ref(parser, table, kind, verb, or_replace).map(AlterForm::Ref),
    }
}

fn field_name(parser: &mut Parser) -> Parsed<Option<Ident>> {
    match parser.parse_keyword(Keyword::AS) {
        true => parser.parse_identifier().map(Some),
        false => Ok(None),
    }
}

fn parse_ref(
    parser: &mut Parser,
    table: ObjectName,
    kind: RefKind,
    verb: Keyword,
    or_replace: bool,
) -> Parsed<RefStatement> {
    let if_not_exists = verb == Keyword::CREATE
        && parser.parse_keywords(&[Keyword::IF, Keyword::NOT, Keyword::EXISTS]);
    let if_exists = verb == Keyword::DROP && parser.parse_keywords(&[Keyword::IF, Keyword::EXISTS]);
    let name = parser.parse_identifier()?.value;
    let action = match verb {
        Keyword::DROP => RefAction::Drop { if_exists },
        _ => {
            let snapshot_id =
                match parser.parse_keywords(&[Keyword::AS, Keyword::OF, Keyword::VERSION]) {
                    true => Some(snapshot_id(parser)?),
                    false => None,
                };
            let retain_ms = match parser.parse_keyword(Keyword::RETAIN) {
                true => Some(retention_ms(parser)?),
                false => None,
            };
            match verb {
                Keyword::CREATE => RefAction::Create {
                    or_replace,
                    if_not_exists,
                    snapshot_id,
                    retain_ms,
                },
                _ => RefAction::Replace {
                    snapshot_id,
                    retain_ms,
                },
            }
        }
    };
    Ok(RefStatement {
        table,
        kind,
        name,
        action,
    })
}

fn next_word_is(parser: &mut Parser, word: &str) -> bool {
    match &parser.peek_token().token {
        Token::Word(w) if w.value.eq_ignore_ascii_case(word) && w.quote_style.is_none() => {
            parser.next_token();
            true
        }
        _ => false,
    }
}

fn snapshot_id(parser: &mut Parser) -> Parsed<i64> {
    let negative = parser.consume_token(&Token::Minus);
    let id = parser.parse_literal_uint()? as i64;
    Ok(if negative { -id } else { id })
}

fn retention_ms(parser: &mut Parser) -> Parsed<i64> {
    let count = parser.parse_literal_uint()? as i64;
    let unit =
        match parser.parse_one_of_keywords(&[Keyword::DAYS, Keyword::HOURS, Keyword::MINUTES]) {
            Some(Keyword::DAYS) => 24 * 60 * 60 * 1000,
            Some(Keyword::HOURS) => 60 * 60 * 1000,
            Some(_) => 60 * 1000,
            None => return parser.expected("DAYS, HOURS or MINUTES", parser.peek_token()),
        };
    Ok(count.saturating_mul(unit))
}
