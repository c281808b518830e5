//! Parsing, including Spark/Iceberg's PARTITIONED BY transform list.

use floe::error::ErrorKind;
use floe::sql::parse::parse;

#[test]
fn partition_clause_is_split_out() {
    let parsed =
        parse("CREATE TABLE t (id INT, ts TIMESTAMP) PARTITIONED BY (bucket(4, id), day(ts))")
            .expect("parses");
    let exprs = parsed.partitioned_by.expect("a partition clause");
    assert_eq!(exprs.len(), 2);
    assert_eq!(exprs[0].to_string(), "bucket(4, id)");
    assert_eq!(exprs[1].to_string(), "day(ts)");
}

#[test]
fn parentheses_inside_columns_do_not_confuse_the_split() {
    let parsed = parse("CREATE TABLE t (d DECIMAL(10, 2)) PARTITIONED BY (d)").expect("parses");
    assert_eq!(parsed.partitioned_by.expect("a partition clause").len(), 1);
    assert!(parse("SELECT 1").expect("parses").partitioned_by.is_none());
}

#[test]
fn malformed_sql_is_invalid_argument() {
    let err = parse("SELEC 1").err().expect("an error");
    assert_eq!(err.kind, ErrorKind::InvalidArgument);
    assert!(err.message.contains("SELEC"), "{}", err.message);
    let err = parse("SELECT 1; SELECT 2").err().expect("an error");
    assert_eq!(err.kind, ErrorKind::InvalidArgument);
    let err = parse("INSERT INTO t VALUES (1) PARTITIONED BY (a)")
        .err()
        .expect("an error");
    assert_eq!(err.kind, ErrorKind::InvalidArgument);
}
