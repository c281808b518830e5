//! Prepared statement handles and parameter rows.

use std::sync::Arc;

use datafusion::arrow::array::{Int64Array, StringArray};
use datafusion::arrow::datatypes::{DataType, Field, Schema};
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::common::ScalarValue;
use datafusion::sql::parser::Statement;
use floe::flight::prepared::{decode, encode, rows};
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
fn handles_carry_sql_and_bound_rows() {
    let sql = "SELECT * FROM t WHERE id = $1 AND name = $2";
    let plain = decode(&encode(sql, None).expect("encodes")).expect("decodes");
    assert_eq!(
        (plain.sql.as_str(), plain.parameters.is_none()),
        (sql, true)
    );

    let bound = decode(&encode(sql, Some(&parameters())).expect("encodes")).expect("decodes");
    assert_eq!(bound.sql, sql);
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
    // A handle that is neither plain UTF-8 nor well-formed is refused, not trusted.
    assert!(decode(b"floe-prepared-1\n\xff\xff\xff\xff\xff\xff\xff\xff").is_err());
    assert!(decode(&[0xff, 0xfe]).is_err());
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
