//! Parsing in Floe's dialect: SQL text reaches the engine as written, and Floe's own
//! CREATE TABLE clauses land in the statement.

use datafusion::sql::parser::{DFParser, Statement};
use datafusion::sql::sqlparser::ast::{CommentDef, CreateTableOptions, Statement as SqlStatement};
use datafusion::sql::sqlparser::dialect::GenericDialect;
use floe::error::ErrorKind;
use floe::sql::dialect::partition_fields;
use floe::sql::like::{like_to_backslash, similar_to_regex};
use floe::sql::parse::parse;

fn create_table(sql: &str) -> datafusion::sql::sqlparser::ast::CreateTable {
    match parse(sql).expect("parses") {
        Statement::Statement(s) => match *s {
            SqlStatement::CreateTable(create) => create,
            other => panic!("not CREATE TABLE: {other}"),
        },
        other => panic!("not a SQL statement: {other}"),
    }
}

/// Statements without Floe syntax parse exactly as in the generic dialect: same AST,
/// same text back.
#[test]
fn statements_parse_as_in_the_generic_dialect() {
    let corpus = [
        "INSERT INTO t VALUES (1, 'O''Brien')",
        "SELECT 'it''s'",
        "SELECT * FROM t WHERE name = 'a'' OR ''1''=''1'",
        r#"SELECT "we""ird" FROM "my ""table""""#,
        "SELECT 'partitioned by (x)' AS \"PARTITIONED\" -- PARTITIONED BY (a)\n FROM t",
        "SELECT /* PARTITIONED BY (a) */ 1",
        "SELECT 'ünïcödé ✓ 漢字', \"列\" FROM \"表\"",
        "SELECT E'tab\\there'",
        "SELECT * FROM t WHERE s LIKE 'k!%%' ESCAPE '!'",
        "CREATE TABLE t (a INT, b STRING)",
        "CREATE TABLE t LIKE u",
        "CREATE TABLE t (a INT) WITH (k = 'v')",
        "CREATE SCHEMA IF NOT EXISTS s",
        "DROP TABLE IF EXISTS s.t",
        "EXPLAIN SELECT 1",
        "WITH x AS (SELECT 1 AS a) SELECT a FROM x UNION ALL SELECT 2",
        "SELECT 1;",
    ];
    for sql in corpus {
        let generic = DFParser::parse_sql_with_dialect(sql, &GenericDialect {})
            .unwrap_or_else(|e| panic!("generic dialect rejects {sql:?}: {e}"));
        let floe = parse(sql).unwrap_or_else(|e| panic!("Floe rejects {sql:?}: {e}"));
        assert_eq!(generic.len(), 1, "{sql}");
        assert_eq!(generic[0], floe, "{sql}");
    }
    let select = parse("SELECT 'O''Brien', \"a\"\"b\"").expect("parses");
    assert_eq!(select.to_string(), "SELECT 'O''Brien', \"a\"\"b\"");
}

#[test]
fn partition_clause_is_part_of_the_statement() {
    let create = create_table(
        "CREATE TABLE t (id INT, ts TIMESTAMP) PARTITIONED BY (bucket(4, id), day(ts))",
    );
    let fields = partition_fields(&create);
    assert_eq!(fields.len(), 2);
    assert_eq!(fields[0].to_string(), "bucket(4, id)");
    assert_eq!(fields[1].to_string(), "day(ts)");
    let create = create_table("CREATE TABLE t (d DECIMAL(10, 2), s STRING) PARTITION BY (d)");
    assert_eq!(partition_fields(&create).len(), 1);
    // A string that looks like the clause is a string.
    let create = create_table("CREATE TABLE t (s STRING COMMENT 'PARTITIONED BY (s)')");
    assert!(partition_fields(&create).is_empty());
}

#[test]
fn floe_clauses_come_in_any_order() {
    let create = create_table(
        "CREATE TABLE IF NOT EXISTS s.t (a INT) COMMENT 'it''s' USING iceberg \
         TBLPROPERTIES ('write.parquet.compression-codec' = 'zstd') \
         LOCATION '/tmp/x' PARTITIONED BY (a)",
    );
    assert!(create.if_not_exists);
    assert_eq!(create.location.as_deref(), Some("/tmp/x"));
    let Some(CommentDef::WithoutEq(comment)) = &create.comment else {
        panic!("a comment expected");
    };
    assert_eq!(comment, "it's");
    let CreateTableOptions::TableProperties(properties) = &create.table_options else {
        panic!("table properties expected");
    };
    assert_eq!(properties.len(), 1);
    assert_eq!(partition_fields(&create).len(), 1);
}

#[test]
fn malformed_sql_is_invalid_argument() {
    for sql in [
        "SELEC 1",
        "SELECT 1; SELECT 2",
        "",
        " ; ",
        "SELECT 'unterminated",
        "INSERT INTO t VALUES (1) PARTITIONED BY (a)",
        "CREATE TABLE t (a INT) PARTITIONED BY (a) PARTITIONED BY (a)",
        "CREATE TABLE t (a INT) USING parquet",
    ] {
        let err = parse(sql).err().unwrap_or_else(|| panic!("{sql:?} parsed"));
        assert_eq!(err.kind, ErrorKind::InvalidArgument, "{sql:?}: {err}");
    }
    assert!(
        parse("SELEC 1")
            .expect_err("an error")
            .message
            .contains("SELEC")
    );
}

#[test]
fn like_escapes_become_backslashes() {
    assert_eq!(like_to_backslash("k!%%", '!'), Ok(r"k\%%".to_string()));
    assert_eq!(like_to_backslash("a!_b_", '!'), Ok(r"a\_b_".to_string()));
    assert_eq!(like_to_backslash("a!!b", '!'), Ok("a!b".to_string()));
    assert_eq!(like_to_backslash(r"c:\d%", '!'), Ok(r"c:\\d%".to_string()));
    assert_eq!(like_to_backslash("%%x%%", '%'), Ok(r"\%x\%".to_string()));
    assert!(like_to_backslash("abc!", '!').is_err());
}

#[test]
fn similar_to_patterns_become_anchored_regular_expressions() {
    let regex = |pattern, escape| similar_to_regex(pattern, escape).unwrap();
    assert_eq!(regex("s%", '\\'), r"^(?s:s.*)$");
    assert_eq!(regex("s(1|2)_", '\\'), r"^(?s:s(1|2).)$");
    assert_eq!(regex("a.b^$", '\\'), r"^(?s:a\.b\^\$)$");
    assert_eq!(regex("a#%b#_[%_]", '#'), r"^(?s:a%b_[%_])$");
    assert_eq!(regex(r"c:\d+", '!'), r"^(?s:c:\\d+)$");
    assert!(similar_to_regex("abc!", '!').is_err());
    assert_eq!(regex("s[1-3]{1,2}", '\\'), r"^(?s:s[1-3]{1,2})$");
    assert!(similar_to_regex("a[bc", '\\').is_err());
    assert!(similar_to_regex("a{2", '\\').is_err());
    assert!(similar_to_regex("a(b", '\\').is_err());
}

/// Property: whatever the text, parsing answers Ok or an error, never panics, and an
/// error is the user's (`INVALID_ARGUMENT`).
/// `IS [NOT] DISTINCT FROM` binds as `IS` does: `a IS DISTINCT FROM b AND c` is
/// `(a IS DISTINCT FROM b) AND c`, as in PostgreSQL (the generic dialect read `b AND c`).
#[test]
fn is_distinct_from_binds_as_is() {
    use datafusion::sql::sqlparser::ast::{BinaryOperator, Expr, SelectItem, SetExpr};
    for (sql, negated) in [
        ("SELECT a IS DISTINCT FROM b AND c", false),
        ("SELECT a IS NOT DISTINCT FROM b AND c", true),
    ] {
        let Statement::Statement(statement) = parse(sql).expect("parses") else {
            panic!("not a SQL statement");
        };
        let SqlStatement::Query(query) = *statement else {
            panic!("not a query");
        };
        let SetExpr::Select(select) = *query.body else {
            panic!("not a select");
        };
        let [SelectItem::UnnamedExpr(Expr::BinaryOp { left, op, right })] =
            select.projection.as_slice()
        else {
            panic!("{sql}: not a binary operation: {:?}", select.projection);
        };
        assert_eq!(*op, BinaryOperator::And, "{sql}");
        assert!(matches!(**right, Expr::Identifier(_)), "{sql}");
        match (negated, left.as_ref()) {
            (false, Expr::IsDistinctFrom(..)) | (true, Expr::IsNotDistinctFrom(..)) => {}
            (_, other) => panic!("{sql}: left is {other:?}"),
        }
    }
}

#[test]
fn mangled_statements_never_panic() {
    let corpus = [
        "CREATE TABLE IF NOT EXISTS s.t (a INT COMMENT 'x', b STRING) PARTITIONED BY (bucket(4, a)) \
         LOCATION '/l' COMMENT 'c' TBLPROPERTIES ('k' = 'v') WITH (x = 1)",
        "SELECT 'O''Brien', \"a\"\"b\" FROM t WHERE s LIKE 'k!%' ESCAPE '!' -- c\n",
        "INSERT INTO t VALUES (1, 'ünï ✓'), (2, NULL); /* trailing */",
        "CREATE OR REPLACE TEMPORARY TABLE t (a INT) USING iceberg AS SELECT 1",
    ];
    let noise = [
        "'",
        "\"",
        "''",
        "\\",
        "(",
        ")",
        ";",
        "--",
        "/*",
        "*/",
        "\n",
        "\0",
        "漢",
        "🦆",
        "\u{202e}",
        "PARTITIONED BY (",
        "TBLPROPERTIES",
        "ESCAPE",
        "E'",
        "$$",
        ",",
        "=",
        "AS",
        "WITH (",
    ];
    let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut next = |bound: usize| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state % bound.max(1) as u64) as usize
    };
    for _ in 0..3000 {
        let mut sql: Vec<char> = corpus[next(corpus.len())].chars().collect();
        for _ in 0..1 + next(3) {
            let at = next(sql.len() + 1);
            match next(3) {
                0 => sql.truncate(at),
                1 => {
                    let inserted: Vec<char> = noise[next(noise.len())].chars().collect();
                    sql.splice(at..at, inserted);
                }
                _ => {
                    let end = (at + 1 + next(8)).min(sql.len());
                    sql.drain(at.min(end)..end);
                }
            }
        }
        let sql: String = sql.into_iter().collect();
        if let Err(e) = parse(&sql) {
            assert_eq!(e.kind, ErrorKind::InvalidArgument, "{sql:?}: {e}");
        }
    }
}

/// `VERSION AS OF '<name>'` reaches the engine as the table name standing for that
/// reference; other text is untouched, and a quoted name keeps its case.
#[test]
fn named_versions_become_table_names() {
    let statement = parse(r#"SELECT * FROM s.Events VERSION AS OF 'v1' AS e JOIN "Other" VERSION AS OF 'it''s' o ON true"#)
        .expect("parses");
    let text = statement.to_string();
    assert!(text.contains(r#"s."events$as-of$rv1" AS e"#), "{text}");
    assert!(text.contains(r#""Other$as-of$rit's" o"#), "{text}");
    assert!(parse("SELECT 'VERSION AS OF ''x''' FROM t").is_ok());
}

#[test]
fn spark_alter_table_forms_are_read_by_floe() {
    use floe::sql::alter_forms::{AlterForm, ColumnChange, PartitionChange, parse_alter_form};
    use floe::sql::refs::{RefAction, RefKind};
    let form = |sql: &str| parse_alter_form(sql).expect("valid");
    let Some(AlterForm::Ref(create)) = form(
        "ALTER TABLE s.t CREATE OR REPLACE TAG IF NOT EXISTS v1 AS OF VERSION 42 RETAIN 2 HOURS;",
    ) else {
        panic!("a tag statement")
    };
    assert_eq!(
        (create.table.to_string(), create.kind, create.name.as_str()),
        ("s.t".into(), RefKind::Tag, "v1")
    );
    assert_eq!(
        create.action,
        RefAction::Create {
            or_replace: true,
            if_not_exists: true,
            snapshot_id: Some(42),
            retain_ms: Some(2 * 3600 * 1000),
        }
    );
    let Some(AlterForm::Ref(drop)) = form("alter table t drop branch if exists dev") else {
        panic!("a branch statement")
    };
    assert_eq!(
        (drop.kind, drop.action),
        (RefKind::Branch, RefAction::Drop { if_exists: true })
    );
    let Some(AlterForm::Partitioning { change, .. }) =
        form("ALTER TABLE t REPLACE PARTITION FIELD day(ts) WITH hour(ts) AS ts_hour")
    else {
        panic!("a partition statement")
    };
    assert!(matches!(
        change,
        PartitionChange::Replace { name: Some(_), .. }
    ));
    assert!(matches!(
        form("ALTER TABLE t UNSET TBLPROPERTIES IF EXISTS ('a', 'b')"),
        Some(AlterForm::UnsetProperties { if_exists: true, ref keys, .. }) if keys == &["a", "b"]
    ));
    // Columns inside structs, which sqlparser cannot name.
    let nested = |sql: &str| match form(sql) {
        Some(AlterForm::NestedColumn { change, .. }) => change,
        other => panic!("a nested column statement: {other:?}"),
    };
    let ColumnChange::Add {
        path,
        column,
        if_not_exists: true,
    } = nested("ALTER TABLE t ADD COLUMN IF NOT EXISTS p.q.z DOUBLE COMMENT 'h'")
    else {
        panic!("an ADD")
    };
    let names: Vec<&str> = path.iter().map(|i| i.value.as_str()).collect();
    assert_eq!(
        (names, column.name.value.as_str()),
        (vec!["p", "q", "z"], "z")
    );
    assert_eq!(column.options.len(), 1);
    assert!(matches!(
        nested("alter table t drop column if exists p.y"),
        ColumnChange::Drop { if_exists: true, ref path } if path.len() == 2
    ));
    assert!(matches!(
        nested("ALTER TABLE t RENAME COLUMN p.x TO east"),
        ColumnChange::Rename { ref to, .. } if to.value == "east"
    ));
    assert!(matches!(
        nested("ALTER TABLE t ALTER COLUMN p.x SET DATA TYPE BIGINT"),
        ColumnChange::Retype { .. }
    ));
    assert!(matches!(
        nested("ALTER TABLE t ALTER COLUMN p.x DROP NOT NULL"),
        ColumnChange::DropNotNull { .. }
    ));
    // Other ALTER TABLE statements (Hive's partitions too) are not Floe's to read here.
    assert_eq!(form("ALTER TABLE t ADD COLUMN c INT"), None);
    assert_eq!(form("ALTER TABLE t DROP COLUMN IF EXISTS c"), None);
    assert_eq!(form("ALTER TABLE t DROP PARTITION (p = 1)"), None);
    assert_eq!(form("SELECT 1"), None);
    // Comments before ALTER are skipped as the parser skips them.
    assert!(matches!(
        form("-- tag it\n/* now */ ALTER TABLE t CREATE TAG v2"),
        Some(AlterForm::Ref(_))
    ));
    let bad = parse_alter_form("ALTER TABLE t CREATE TAG x RETAIN 3 WEEKS").expect_err("invalid");
    assert_eq!(bad.kind, ErrorKind::InvalidArgument);
}

#[test]
fn long_and_or_chains_are_balanced_and_other_long_chains_refused() {
    use datafusion::sql::sqlparser::ast::{Expr, SetExpr};
    fn depth(expr: &Expr) -> usize {
        match expr {
            Expr::BinaryOp { left, right, .. } => 1 + depth(left).max(depth(right)),
            _ => 0,
        }
    }
    let terms: Vec<String> = (0..20_000).map(|i| format!("k = {i}")).collect();
    let sql = format!("SELECT k FROM t WHERE {}", terms.join(" OR "));
    let Ok(Statement::Statement(statement)) = parse(&sql) else {
        panic!("a long OR chain parses");
    };
    let SqlStatement::Query(query) = *statement else {
        panic!("a query");
    };
    let SetExpr::Select(select) = *query.body else {
        panic!("a select");
    };
    let filter = select.selection.expect("a WHERE clause");
    // 20,000 operands: 15 levels of OR above an equality.
    assert_eq!(depth(&filter), 16);
    assert!(filter.to_string().starts_with("k = 0 OR k = 1 OR k = 2"));

    // Short chains keep their shape.
    let Ok(Statement::Statement(statement)) = parse("SELECT 1 WHERE a OR b OR c") else {
        panic!("parses");
    };
    assert!(statement.to_string().ends_with("WHERE a OR b OR c"));

    let sum = (0..300)
        .map(|i| format!("k{i}"))
        .collect::<Vec<_>>()
        .join(" + ");
    let error = parse(&format!("SELECT {sum} FROM t")).expect_err("a chain of 299 + is refused");
    assert_eq!(error.kind, ErrorKind::InvalidArgument);
    assert!(error.message.contains("chains 299 operators"), "{error}");
    let sum = (0..200)
        .map(|i| format!("k{i}"))
        .collect::<Vec<_>>()
        .join(" + ");
    assert!(parse(&format!("SELECT {sum} FROM t")).is_ok());
}

#[test]
fn long_union_chains_are_balanced_and_other_long_set_chains_refused() {
    use datafusion::sql::sqlparser::ast::SetExpr;
    fn depth(body: &SetExpr) -> usize {
        match body {
            SetExpr::SetOperation { left, right, .. } => 1 + depth(left).max(depth(right)),
            _ => 0,
        }
    }
    let selects: Vec<String> = (0..3000).map(|i| format!("SELECT {i} AS k")).collect();
    let Ok(Statement::Statement(statement)) = parse(&selects.join(" UNION ALL ")) else {
        panic!("a long UNION ALL chain parses");
    };
    let SqlStatement::Query(query) = *statement else {
        panic!("a query");
    };
    assert_eq!(depth(&query.body), 12);
    assert!(
        query
            .to_string()
            .starts_with("SELECT 0 AS k UNION ALL SELECT 1 AS k UNION ALL")
    );

    let error = parse(&selects[..300].join(" EXCEPT ")).expect_err("300 EXCEPTs are refused");
    assert_eq!(error.kind, ErrorKind::InvalidArgument);
    assert!(error.message.contains("chains 299 operators"), "{error}");
}

#[test]
fn deeply_nested_types_are_refused_before_they_are_parsed() {
    let nested = |levels: usize| {
        format!(
            "CREATE TABLE t (x {}INT{})",
            "ARRAY<".repeat(levels),
            ">".repeat(levels)
        )
    };
    assert!(parse(&nested(32)).is_ok());
    let error = parse(&nested(3000)).expect_err("3,000 levels are refused");
    assert_eq!(error.kind, ErrorKind::InvalidArgument);
    assert!(error.message.contains("nests more than 32"), "{error}");
    // `>>` closes two levels; comparisons do not open any.
    let closed = format!(
        "SELECT CAST(NULL AS {}INT{}) WHERE 1 < 2",
        "ARRAY<".repeat(20),
        ">>".repeat(10)
    );
    assert!(parse(&closed).is_ok(), "{closed}");
    let many = (0..100)
        .map(|i| format!("a < {i}"))
        .collect::<Vec<_>>()
        .join(" AND ");
    assert!(parse(&format!("SELECT 1 WHERE {many}")).is_ok());
    // `<` and `[]` inside quotes are text, not types.
    let quoted = format!(
        "SELECT '{}' AS \"{}\"",
        "ARRAY<".repeat(100).replace('\'', "''"),
        "STRUCT<[]".repeat(100)
    );
    assert!(parse(&quoted).is_ok(), "{quoted}");
    let brackets = format!("CREATE TABLE t (x INT{})", "[]".repeat(40));
    assert!(parse(&brackets).is_err());
}
