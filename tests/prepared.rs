//! Prepared statement handles and parameter rows.

use std::sync::Arc;
use std::time::Duration;

use datafusion::arrow::array::{Int64Array, StringArray};
use datafusion::arrow::datatypes::{DataType, Field, Schema};
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::common::ScalarValue;
use datafusion::sql::parser::Statement;
use floe::flight::prepared::{PreparedStatements, rows};
use floe::sql::params::{expand_insert_values, number_placeholders};
use floe::sql::parse::parse;

fn parameters() -> RecordBatch {
    let schema = Arc::new(Schema::new(vec![
        Field::new("$1", DataType::Int64, true),
        Field::new("$2", DataType::Utf8, true),
    ]));
    RecordBatch::try_new(
        schema,
        vec![
            Arc::new(Int64Array::from(vec![Some(1), None])),
            Arc::new(StringArray::from(vec![Some("O'Brien"), Some("ünï")])),
        ],
    )
    .expect("a batch")
}

#[test]
fn handles_keep_sql_and_bound_rows_for_their_owner() {
    let statements = PreparedStatements::default();
    let sql = "SELECT * FROM t WHERE id = $1 AND name = $2";
    let handle = statements.create("alice", sql, None).expect("created");
    let plain = statements.get(&handle, "alice").expect("found");
    assert_eq!(
        (plain.sql.as_str(), plain.parameters.is_none()),
        (sql, true)
    );

    statements
        .bind(&handle, "alice", Some(parameters()))
        .expect("bound");
    let bound = statements.get(&handle, "alice").expect("found");
    let rows = rows(bound.parameters.as_ref()).expect("rows");
    assert_eq!(
        rows,
        vec![
            vec![
                ScalarValue::Int64(Some(1)),
                ScalarValue::Utf8(Some("O'Brien".into()))
            ],
            vec![
                ScalarValue::Int64(None),
                ScalarValue::Utf8(Some("ünï".into()))
            ],
        ]
    );

    // Another user cannot use, rebind or close it; it looks missing to them.
    for status in [
        statements.get(&handle, "mallory").err(),
        statements.bind(&handle, "mallory", None).err(),
        statements.close(&handle, "mallory").err(),
    ] {
        assert_eq!(status.expect("refused").code(), tonic::Code::NotFound);
    }
    assert!(statements.get(&handle, "alice").is_ok());
    // Handles are not guessable from one another, and garbage is refused, not trusted.
    let other = statements.create("alice", sql, None).expect("created");
    assert_ne!(handle, other);
    assert!(statements.get(&[0xff, 0xfe], "alice").is_err());

    statements.close(&handle, "alice").expect("closed");
    assert_eq!(
        statements.get(&handle, "alice").err().map(|s| s.code()),
        Some(tonic::Code::NotFound)
    );
}

#[test]
fn idle_handles_expire_and_the_count_is_limited() {
    let statements = PreparedStatements::new(Duration::from_millis(50), 2);
    let first = statements
        .create("alice", "SELECT 1", None)
        .expect("created");
    statements.create("bob", "SELECT 2", None).expect("created");
    let full = statements
        .create("alice", "SELECT 3", None)
        .expect_err("full");
    assert_eq!(full.code(), tonic::Code::ResourceExhausted);

    std::thread::sleep(Duration::from_millis(80));
    assert_eq!(
        statements.get(&first, "alice").err().map(|s| s.code()),
        Some(tonic::Code::NotFound)
    );
    // Idle handles make room for new ones.
    let fresh = statements
        .create("alice", "SELECT 3", None)
        .expect("room again");
    assert_eq!(
        statements.get(&fresh, "alice").expect("found").sql,
        "SELECT 3"
    );
}

#[test]
fn executemany_inserts_fold_into_one_values_list() {
    let mut statement = parse("INSERT INTO t (b, a) VALUES (?, ? + 1)").expect("parses");
    number_placeholders(&mut statement);
    let rows = vec![
        vec![ScalarValue::from("x"), ScalarValue::from(1i64)],
        vec![ScalarValue::from("y"), ScalarValue::from(2i64)],
    ];
    let params = expand_insert_values(&mut statement, &rows).expect("an INSERT … VALUES");
    assert_eq!(params.len(), 4);
    assert_eq!(
        statement.to_string(),
        "INSERT INTO t (b, a) VALUES ($1, $2 + 1), ($3, $4 + 1)"
    );
    let mut query: Statement = parse("SELECT $1").expect("parses");
    assert!(expand_insert_values(&mut query, &rows).is_none());
}
