"""SQL text reaches the engine as written, LIKE escapes work, errors carry a status a
client can act on, and DDL does what it says or refuses."""

import threading
from decimal import Decimal

import adbc_driver_manager
import duckdb
import pyarrow as pa
import pyarrow.flight as flight
import pyarrow.parquet as pq
import pytest

from conftest import Server, query
from floe_flight import _SQL_PREFIX, _length_delimited


def fails(cur, sql, *fragments):
    with pytest.raises(adbc_driver_manager.Error) as err:
        cur.execute(sql)
        cur.fetch_arrow_table()
    for fragment in fragments:
        assert fragment in str(err.value), str(err.value)
    return str(err.value)


def test_quotes_survive_to_the_engine(cur, catalog, schema):
    table = schema + '."odd ""name"""'
    cur.execute(f'CREATE TABLE {table} (id INT, "it""s" STRING)')
    cur.execute(f"INSERT INTO {table} VALUES (1, 'O''Brien'), (2, 'a'' OR ''1''=''1')")
    cur.execute(f"INSERT INTO {table} VALUES (3, 'PARTITIONED BY (id) -- no comment'), (4, 'ünï ✓ 漢字')")
    assert query(cur, "SELECT 'it''s' AS s").to_pylist() == [{"s": "it's"}]
    rows = query(cur, f'SELECT id, "it""s" AS v FROM {table} ORDER BY id').to_pylist()
    assert [r["v"] for r in rows] == [
        "O'Brien", "a' OR '1'='1", "PARTITIONED BY (id) -- no comment", "ünï ✓ 漢字",
    ]
    # The injection-shaped literal is one string: it matches one row, not every row.
    matched = query(cur, f"""SELECT id FROM {table} WHERE "it""s" = 'a'' OR ''1''=''1'""")
    assert matched.to_pylist() == [{"id": 2}]
    commented = query(cur, f"SELECT /* PARTITIONED BY (x) */ count(*) AS n -- trailing\nFROM {table}")
    assert commented.to_pylist() == [{"n": 4}]
    by_pyiceberg = catalog.load_table((schema, 'odd "name"')).scan().to_arrow()
    assert sorted(by_pyiceberg.column('it"s').to_pylist()) == sorted(r["v"] for r in rows)


def test_like_with_any_escape_character(cur, schema):
    cur.execute(f"CREATE TABLE {schema}.words (s STRING)")
    cur.execute(
        f"""INSERT INTO {schema}.words VALUES ('k%x'), ('kx'), ('k_1'), ('kk1'), ('a!b'), ('a\\b'), ('K%Y')"""
    )

    def words(where):
        return sorted(r["s"] for r in query(cur, f"SELECT s FROM {schema}.words WHERE {where}").to_pylist())

    assert words("s LIKE 'k!%%' ESCAPE '!'") == ["k%x"]
    assert words("s ILIKE 'k!%%' ESCAPE '!'") == ["K%Y", "k%x"]
    assert words("s NOT LIKE 'k!%%' ESCAPE '!'") == ["K%Y", "a!b", "a\\b", "k_1", "kk1", "kx"]
    assert words("s LIKE 'k#_1' ESCAPE '#'") == ["k_1"]
    assert words("s LIKE 'a!!b' ESCAPE '!'") == ["a!b"]
    assert words("s LIKE 'a\\b' ESCAPE '!'") == ["a\\b"]
    assert words("s LIKE 'k\\%%'") == ["k%x"]
    fails(cur, f"SELECT s FROM {schema}.words WHERE s LIKE 'k!' ESCAPE '!'", "INVALID_ARGUMENT", "escape")
    fails(cur, f"SELECT s FROM {schema}.words WHERE 'x' LIKE s ESCAPE '!'", "Unimplemented", "literal pattern")


def test_similar_to_matches_the_whole_text_as_sql_says(cur, schema):
    """DataFusion 53 searched a SIMILAR TO pattern anywhere in the text as a regular
    expression (`'xs1' SIMILAR TO 's1'` was true, `'s1' SIMILAR TO 's%'` false); SQL
    (and PostgreSQL) match the whole text, `%` and `_` as in LIKE, `.` an ordinary
    character (src/sql/like.rs)."""
    cur.execute(f"CREATE TABLE {schema}.similar (s STRING)")
    cur.execute(f"INSERT INTO {schema}.similar VALUES ('s1'), ('xs1'), ('s12'), ('s.'), ('sx'), "
                f"('s2'), ('a%b'), ('ab'), ('line\nbreak'), (NULL)")

    def texts(where):
        return sorted(r["s"] for r in query(cur, f"SELECT s FROM {schema}.similar WHERE {where}").to_pylist())

    assert texts("s SIMILAR TO 's1'") == ["s1"]
    assert texts("s SIMILAR TO 's%'") == ["s.", "s1", "s12", "s2", "sx"]
    assert texts("s SIMILAR TO 's_'") == ["s.", "s1", "s2", "sx"]
    assert texts("s SIMILAR TO 's.'") == ["s."]
    assert texts("s SIMILAR TO 's(1|2)'") == ["s1", "s2"]
    assert texts("s SIMILAR TO 's[0-9]+'") == ["s1", "s12", "s2"]
    assert texts("s SIMILAR TO '%1{1,2}'") == ["s1", "xs1"]
    assert texts("s SIMILAR TO 'a#%b' ESCAPE '#'") == ["a%b"]
    assert texts("s SIMILAR TO 'line%'") == ["line\nbreak"]
    assert texts("s NOT SIMILAR TO '%1%'") == ["a%b", "ab", "line\nbreak", "s.", "s2", "sx"]
    fails(cur, f"SELECT s FROM {schema}.similar WHERE s SIMILAR TO 'a[b'", "INVALID_ARGUMENT", "missing")
    fails(cur, f"SELECT s FROM {schema}.similar WHERE 'x' SIMILAR TO s", "Unimplemented", "literal pattern")


def test_like_patterns_of_several_parts_answer_as_duckdb_does(tmp_path):
    """Patterns of several `%`-separated parts are matched by Floe's own function (part
    after part) instead of Arrow's regular expressions, on an executor process here, so
    the function also travels in the task's plan. Patterns with `_` or an escape are
    left to Arrow, and must still answer the same."""
    values = ["", "a", "ab", "aba", "abab", "ba", "cba", "abcabc", "aXbXc", "a%b", "%",
              "special requests", "requests special", "xspecialyrequestsz", "ünï ✓ 漢字", "漢字ünï",
              "it's a % sale", "a_b", None]
    patterns = ["%special%requests%", "a%b", "ab%ba", "a%b%", "%a%b", "%%a%%b%%", "%b%a%", "a%b%c",
                "%c%b%a%", "abc%abc", "ün%字", "%✓%字", "%''s%sale", "a_%b", "%!%%sale' ESCAPE '!"]
    server = Server(tmp_path / "data", ["--local-executors", "0", "--local-query-max-bytes", "0"])
    executor = server.start_executor(tmp_path / "executor.log", slots=1)
    reference = duckdb.connect()
    reference.execute("CREATE TABLE words (s VARCHAR)")
    reference.executemany("INSERT INTO words VALUES (?)", [[v] for v in values])
    try:
        with server.connect() as conn, conn.cursor() as cur:
            literals = ", ".join("(NULL)" if v is None else "('" + v.replace("'", "''") + "')" for v in values)
            cur.execute("CREATE TABLE words (s STRING)")
            cur.execute(f"INSERT INTO words VALUES {literals}")
            plan = query(cur, "EXPLAIN SELECT s FROM words WHERE s NOT LIKE 'a%b'")["plan"].to_pylist()
            assert "NOT floe_like_segments(s@0, a%b)" in plan[-1]
            for pattern in patterns:
                for op in ["LIKE", "NOT LIKE"]:
                    sql = f"SELECT s FROM words WHERE s {op} '{pattern}'"
                    got = sorted(row["s"] for row in query(cur, sql).to_pylist())
                    assert got == sorted(row[0] for row in reference.sql(sql).fetchall()), sql
    finally:
        executor.stop()
        server.stop()


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT 1/0",
        "SELECT CAST('abc' AS INT)",
        "SELECT CAST(n AS INT) FROM (VALUES ('1'), ('abc')) AS t(n)",
        "SELECT abs(n) FROM (VALUES (-9223372036854775807 - 1)) AS t(n)",
        "SELECT CAST(n AS DECIMAL(4, 1)) FROM (VALUES (12345.6)) AS t(n)",
    ],
)
def test_errors_in_the_users_data_are_invalid_argument(cur, sql):
    fails(cur, sql, "INVALID_ARGUMENT")


def test_errors_raised_on_executors_keep_their_status(cur, schema):
    cur.execute(f"CREATE TABLE {schema}.nums (n INT, s STRING)")
    cur.execute(f"INSERT INTO {schema}.nums VALUES (1, '1'), (0, 'x')")
    fails(cur, f"SELECT 10 / n FROM {schema}.nums", "INVALID_ARGUMENT", "Divide by zero")
    fails(cur, f"SELECT CAST(s AS INT) FROM {schema}.nums", "INVALID_ARGUMENT", "x")
    # The server is fine afterwards.
    assert query(cur, f"SELECT count(*) AS c FROM {schema}.nums").to_pylist() == [{"c": 2}]


def test_create_table_honours_location_comment_and_properties(server, cur, catalog, schema, tmp_path):
    location = tmp_path / "elsewhere"
    cur.execute(
        f"CREATE TABLE {schema}.placed (id INT COMMENT 'the key', s STRING) "
        f"COMMENT 'placed by hand' LOCATION '{location}' "
        f"TBLPROPERTIES ('write.parquet.compression-codec' = 'gzip', 'owner' = 'ops')"
    )
    table = catalog.load_table(f"{schema}.placed")
    assert table.location().rstrip("/").endswith(str(location))
    assert table.properties["comment"] == "placed by hand"
    assert table.properties["owner"] == "ops"
    assert table.schema().find_field("id").doc == "the key"
    cur.execute(f"INSERT INTO {schema}.placed VALUES (1, 'a'), (2, 'b')")
    files = list(location.rglob("*.parquet"))
    assert files, "data files are written under LOCATION"
    assert pq.ParquetFile(files[0]).metadata.row_group(0).column(0).compression == "GZIP"
    assert query(cur, f"SELECT count(*) AS n FROM {schema}.placed").to_pylist() == [{"n": 2}]

    cur.execute(f"CREATE TABLE {schema}.with_opts (a INT) WITH ('write.parquet.compression-codec' = 'snappy')")
    assert catalog.load_table(f"{schema}.with_opts").properties["write.parquet.compression-codec"] == "snappy"
    # A table no INSERT could write is refused when it is created.
    fails(cur, f"CREATE TABLE {schema}.bad_codec (a INT) WITH ('write.parquet.compression-codec' = 'zip')",
          "INVALID_ARGUMENT", "zip")
    fails(cur, f"CREATE TABLE {schema}.bad_size (a INT) TBLPROPERTIES ('write.target-file-size-bytes' = 'big')",
          "INVALID_ARGUMENT", "write.target-file-size-bytes")
    fails(cur, f"CREATE TABLE {schema}.bad_page (a INT) TBLPROPERTIES ('write.parquet.page-row-limit' = '0')",
          "INVALID_ARGUMENT", "write.parquet.page-row-limit")


@pytest.mark.parametrize(
    "clause, named",
    [
        ("CREATE TEMPORARY TABLE {t} (a INT)", "TEMPORARY"),
        ("CREATE OR REPLACE TABLE {t} (a INT)", "OR REPLACE"),
        ("CREATE TABLE {t} (a INT) AS SELECT 1 AS a", "column list with AS SELECT"),
        ("CREATE TABLE {t} (a INT PRIMARY KEY)", "PRIMARY KEY"),
        ("CREATE TABLE {t} (a INT, PRIMARY KEY (a))", "constraints"),
        ("CREATE TABLE {t} (a INT DEFAULT 1)", "DEFAULT"),
        ("CREATE TABLE {t} (a INT) TBLPROPERTIES ('format-version' = '3')", "format-version"),
        ("CREATE TABLE {t} (ts TIMESTAMP(9))", "nanosecond"),
        ("CREATE TABLE {t} (b BYTEA) PARTITIONED BY (truncate(4, b))", "truncate on binary"),
    ],
)
def test_create_table_refuses_what_it_cannot_honour(cur, catalog, schema, clause, named):
    fails(cur, clause.format(t=f"{schema}.refused"), "Unimplemented", named)
    assert catalog.list_tables(schema) == []


def test_create_if_not_exists_is_idempotent_under_concurrency(server, schema):
    errors = []

    def create(i):
        try:
            with server.connect() as conn, conn.cursor() as cur:
                cur.execute(f"CREATE SCHEMA IF NOT EXISTS {schema}_race")
                cur.execute(f"CREATE TABLE IF NOT EXISTS {schema}_race.t (a INT)")
        except Exception as e:  # noqa: BLE001 - collected and asserted below
            errors.append(e)

    threads = [threading.Thread(target=create, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


def test_unknown_or_malformed_tickets_get_a_status(server):
    client = flight.FlightClient(server.uri)
    handle = _length_delimited(1, b"0123456789abcdef")
    ticket = _length_delimited(1, (_SQL_PREFIX + "TicketStatementQuery").encode()) + _length_delimited(2, handle)
    with pytest.raises(pa.ArrowKeyError, match="tickets are single-use"):
        client.do_get(flight.Ticket(ticket)).read_all()
    with pytest.raises(pa.ArrowInvalid):
        client.do_get(flight.Ticket(b"not a ticket")).read_all()
    client.close()


def test_table_functions_with_no_column_selected(cur):
    # The scan selects no column: its plan must still reach the executors intact
    # (datafusion-proto drops the empty selection of a generate_series scan).
    assert query(cur, "SELECT count(*) AS n FROM generate_series(1, 10)").to_pylist() == [{"n": 10}]
    assert query(cur, "SELECT count(1) AS n FROM range(7)").to_pylist() == [{"n": 7}]
    assert query(cur, "SELECT 1 AS one FROM generate_series(1, 3)").to_pylist() == [{"one": 1}] * 3
    assert query(cur, "SELECT sum(value) AS s FROM generate_series(1, 4)").to_pylist() == [{"s": 10}]


RECURSIVE = [
    "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r WHERE n < 10) SELECT sum(n) FROM r",
    "WITH RECURSIVE r(n, m) AS (SELECT 1, 'a' UNION ALL SELECT n + 1, m || 'b' FROM r WHERE n < 5) SELECT * FROM r",
    "WITH RECURSIVE r AS (SELECT min(k) AS n FROM {t} UNION ALL SELECT n + 100 FROM r WHERE n < 1000) "
    "SELECT count(*), sum(n) FROM r",
    "SELECT k FROM {t} WHERE k IN (WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n * 2 FROM r WHERE n < 1000) "
    "SELECT n FROM r)",
    "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r WHERE n < 10) "
    "SELECT count(*), sum(k) FROM {t} JOIN r ON {t}.k = r.n * 3",
    "WITH RECURSIVE r AS (SELECT k AS n FROM {t} WHERE k < 3 UNION ALL "
    "SELECT {t}.k FROM r JOIN {t} ON {t}.k = r.n + 500) SELECT count(*), sum(n) FROM r",
    "WITH RECURSIVE \"it's r\"(\"n \"\"x\"\"\") AS (SELECT 1 UNION ALL SELECT \"n \"\"x\"\"\" + 1 "
    "FROM \"it's r\" WHERE \"n \"\"x\"\"\" < 4) SELECT * FROM \"it's r\"",
    "WITH RECURSIVE r(n) AS (SELECT 1 WHERE false UNION ALL SELECT n + 1 FROM r WHERE n < 4) SELECT * FROM r",
]


def test_recursive_queries_answer_as_duckdb_does(cur, schema):
    """Ballista cannot ship a recursive query's nodes (its job would wait forever): it
    runs on the coordinator. A column list names the work table's columns (DataFusion 53
    alone fails the first two: "No field named n")."""
    table = f"{schema}.nums"
    cur.execute(f"CREATE TABLE {table} (k BIGINT, g INT) PARTITIONED BY (g)")
    rows = ", ".join(f"({k}, {k % 3})" for k in range(2000))
    cur.execute(f"INSERT INTO {table} VALUES {rows}")
    reference = duckdb.connect()
    reference.execute(f"CREATE TABLE nums AS SELECT * FROM (VALUES {rows}) v(k, g)")
    for sql in RECURSIVE:
        got = sorted(query(cur, sql.format(t=table)).to_pylist(), key=repr)
        want = sorted(reference.sql(sql.format(t="nums")).to_arrow_table().to_pylist(), key=repr)
        assert [tuple(r.values()) for r in got] == [tuple(r.values()) for r in want], sql


def test_a_recursive_query_in_a_write_is_refused_not_left_waiting(cur, schema):
    table = f"{schema}.target"
    cur.execute(f"CREATE TABLE {table} (n INT)")
    recursive = "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r WHERE n < 3) SELECT n FROM r"
    for sql in [f"INSERT INTO {table} {recursive}", f"CREATE TABLE {schema}.copy AS {recursive}",
                f"EXPLAIN ANALYZE {recursive}"]:
        fails(cur, sql, "(Unimplemented;", "recursive query")
    assert query(cur, f"SELECT count(*) AS n FROM {table}").to_pylist() == [{"n": 0}]
    assert query(cur, f"SHOW TABLES IN {schema}")["table_name"].to_pylist() == ["target"]


SET_OPERATIONS = [
    "SELECT a, b FROM {t} EXCEPT ALL SELECT a, b FROM {t} WHERE k % 3 = 0",
    "SELECT a, b FROM {t} WHERE k < 40 INTERSECT ALL SELECT a, b FROM {t} WHERE k % 2 = 0",
    "SELECT a FROM {t} EXCEPT ALL SELECT a FROM {t} WHERE k < 50",
    "SELECT a, b FROM {t} EXCEPT SELECT a, b FROM {t} WHERE k % 3 = 0",
    "SELECT a, b FROM {t} INTERSECT SELECT a, b FROM {t} WHERE k % 2 = 0",
    "SELECT count(*), count(a) FROM (SELECT a, b FROM {t} EXCEPT ALL SELECT b, a FROM {t})",
    "SELECT b FROM {t} WHERE a IN (SELECT a FROM {t} INTERSECT ALL SELECT a FROM {t} WHERE k < 10)",
    "SELECT a FROM {t} EXCEPT ALL (SELECT a FROM {t} WHERE k < 30 INTERSECT ALL SELECT a FROM {t} WHERE k > 20)",
    "SELECT a, b FROM {t} EXCEPT ALL SELECT a, b FROM {t}",
    "SELECT b AS \"it's \"\"b\"\"\" FROM {t} INTERSECT ALL SELECT b FROM {t} WHERE b LIKE '1%'",
]


def test_intersect_all_and_except_all_count_copies_as_duckdb_does(cur, schema):
    """DataFusion 53 alone keeps or drops every copy of a row (src/sql/set_operations.rs)."""
    table = f"{schema}.bag"
    cur.execute(f"CREATE TABLE {table} (k INT, a INT, b STRING) PARTITIONED BY (bucket(2, k))")
    rows = ", ".join(f"({k}, {'NULL' if k % 7 == 0 else k % 4}, {'NULL' if k % 5 == 0 else repr(str(k % 3))})"
                     for k in range(100))
    cur.execute(f"INSERT INTO {table} VALUES {rows}")
    reference = duckdb.connect()
    reference.execute(f"CREATE TABLE bag AS SELECT * FROM (VALUES {rows}) v(k, a, b)")
    for sql in SET_OPERATIONS:
        got = sorted((tuple(r.values()) for r in query(cur, sql.format(t=table)).to_pylist()), key=repr)
        want = sorted(reference.sql(sql.format(t="bag")).fetchall(), key=repr)
        assert got == want, sql
    quoted = query(cur, SET_OPERATIONS[-1].format(t=table))
    assert quoted.column_names == ["it's \"b\""]


def test_a_query_datafusion_cannot_plan_is_unimplemented_not_internal(cur, schema):
    table = f"{schema}.nums"
    cur.execute(f"CREATE TABLE {table} (k INT, g INT)")
    cur.execute(f"INSERT INTO {table} VALUES (1, 1), (2, 1), (3, 2)")
    # A correlated scalar subquery of its first row whose value also reads the outer row:
    # neither DataFusion 53 nor Floe (src/sql/inequality_subqueries.rs) decorrelates it.
    fails(cur, f"SELECT k, (SELECT b.k + a.k FROM {table} b WHERE b.k < a.k ORDER BY b.k LIMIT 1) FROM {table} a",
          "(Unimplemented;", "not supported: Physical plan does not support logical expression ScalarSubquery")



def test_case_and_union_answer_their_common_type(cur, catalog, schema):
    """DataFusion's SQL planner types a CASE by its first branch and a UNION by its first
    input, and only its analyzer coerces them; Floe cast the rows to the planner's types,
    so `CASE … THEN 1 ELSE 2.5 END` answered 2, `k UNION ALL 1.5` answered 1, and a
    CREATE TABLE AS of them made a BIGINT column of the fractions (src/sql/mod.rs,
    `Query::new`)."""
    cur.execute(f"CREATE TABLE {schema}.whole (k BIGINT)")
    cur.execute(f"INSERT INTO {schema}.whole VALUES (0), (3)")
    # 2.5 is a DECIMAL(2, 1); with a BIGINT, a DECIMAL(21, 1).
    case = query(cur, f"SELECT k, CASE WHEN k < 2 THEN 1 ELSE 2.5 END AS c FROM {schema}.whole ORDER BY k")
    assert case.schema.field("c").type == pa.decimal128(21, 1)
    assert case["c"].to_pylist() == [Decimal("1.0"), Decimal("2.5")]
    union = query(cur, f"SELECT k FROM {schema}.whole UNION ALL SELECT 1.5 ORDER BY k")
    assert union.schema.field("k").type == pa.decimal128(21, 1)
    assert union["k"].to_pylist() == [Decimal("0.0"), Decimal("1.5"), Decimal("3.0")]
    doubles = query(cur, f"SELECT k FROM {schema}.whole UNION ALL SELECT 1.5e0 ORDER BY k")
    assert doubles.schema.field("k").type == pa.float64()
    assert doubles["k"].to_pylist() == [0.0, 1.5, 3.0]
    cur.execute(f"CREATE TABLE {schema}.fractions AS SELECT k, CASE WHEN k < 2 THEN 1 ELSE 2.5 END AS c "
                f"FROM {schema}.whole")
    by_pyiceberg = catalog.load_table((schema, "fractions")).scan().to_arrow()
    assert by_pyiceberg.schema.field("c").type == pa.decimal128(21, 1)
    assert sorted(by_pyiceberg["c"].to_pylist()) == [Decimal("1.0"), Decimal("2.5")]
    # The schema a client asks for before running it is the same.
    announced = cur.adbc_execute_schema(f"SELECT CASE WHEN k < 2 THEN 1 ELSE 2.5 END AS c FROM {schema}.whole")
    assert announced.field("c").type == pa.decimal128(21, 1)


def test_is_distinct_from_binds_as_postgresql_binds_it(cur, schema):
    """`a IS DISTINCT FROM b AND c` is `(a IS DISTINCT FROM b) AND c`; the generic SQL
    dialect read `a IS DISTINCT FROM (b AND c)`: a wrong answer over booleans, a type
    error otherwise (src/sql/dialect.rs)."""
    got = query(cur, "SELECT (true IS DISTINCT FROM false AND false) AS a, "
                     "(1 IS NOT DISTINCT FROM 1 OR 1 = 2) AS b").to_pylist()
    assert got == [{"a": False, "b": True}]
    cur.execute(f"CREATE TABLE {schema}.maybe (k BIGINT, s STRING)")
    cur.execute(f"INSERT INTO {schema}.maybe VALUES (1, 'a'), (2, NULL), (3, 'c')")
    sql = (f"SELECT a.k FROM {schema}.maybe a JOIN {schema}.maybe b "
           f"ON a.s IS NOT DISTINCT FROM b.s AND b.k < 3 ORDER BY a.k")
    assert query(cur, sql)["k"].to_pylist() == [1, 2]


def test_a_select_list_that_repeats_a_name_is_answered(cur, schema):
    """DataFusion refuses select lists whose names repeat ("Projections require unique
    expression names"); PostgreSQL answers them. Floe plans such a statement again with
    its lists named: as written, a repeated name suffixed `_1`, `_2`, …
    (src/sql/output_names.rs). Statements DataFusion plans keep its names."""
    cur.execute(f"CREATE TABLE {schema}.names (k BIGINT)")
    cur.execute(f"INSERT INTO {schema}.names VALUES (1)")
    for sql, expected in [
        (f"SELECT k, k FROM {schema}.names", {"k": 1, "k_1": 1}),
        (f"SELECT k, CAST(k AS SMALLINT) FROM {schema}.names", {"k": 1, "CAST(k AS SMALLINT)": 1}),
        ("SELECT 2 + 3 * 4, (2 + 3) * 4", {"2 + 3 * 4": 14, "(2 + 3) * 4": 20}),
        (f"SELECT k_1 FROM (SELECT k, k FROM {schema}.names) z", {"k_1": 1}),
        (f"SELECT k + 1 FROM {schema}.names", {f"{schema}.names.k + Int64(1)": 2}),
    ]:
        assert query(cur, sql).to_pylist() == [expected], sql


def test_a_date_format_without_fields_is_refused_not_answered(cur):
    """DataFusion's to_char takes strftime fields; a PostgreSQL- or Spark-style format
    (`'YYYY-MM'`) has none, and every row answered the format itself
    (src/sql/formats.rs)."""
    got = query(cur, "SELECT to_char(DATE '2024-01-05', '%Y-%m') AS a, "
                     "date_format(DATE '2024-01-05', '%d.%m.%Y') AS b").to_pylist()
    assert got == [{"a": "2024-01", "b": "05.01.2024"}]
    for fmt in ["YYYY-MM", "yyyy-MM-dd"]:
        fails(cur, f"SELECT to_char(DATE '2024-01-05', '{fmt}')", "INVALID_ARGUMENT", "%Y-%m-%d")


def test_iso_day_of_week_runs_from_monday_1_to_sunday_7(cur):
    """DataFusion 53 numbers `isodow` Monday 0 to Sunday 6; ISO 8601, PostgreSQL, DuckDB
    and Spark 1 to 7 (src/sql/date_parts.rs). Grouping by it keeps its name."""
    week = ", ".join(f"(DATE '2024-01-{day:02d}')" for day in range(8, 15))  # Monday to Sunday
    got = query(cur, f"SELECT extract(isodow FROM d) AS iso, date_part('ISODOW', d) AS part, "
                     f"extract(dow FROM d) AS dow FROM (VALUES {week}) v(d) ORDER BY d").to_pylist()
    assert [r["iso"] for r in got] == [1, 2, 3, 4, 5, 6, 7]
    assert [r["part"] for r in got] == [1, 2, 3, 4, 5, 6, 7]
    assert [r["dow"] for r in got] == [1, 2, 3, 4, 5, 6, 0]
    grouped = query(cur, f"SELECT extract(isodow FROM d) AS iso, count(*) AS n FROM (VALUES {week}) v(d) "
                         f"GROUP BY extract(isodow FROM d) HAVING extract(isodow FROM d) > 5 ORDER BY 1")
    assert grouped.to_pylist() == [{"iso": 6, "n": 1}, {"iso": 7, "n": 1}]


def test_decades_centuries_and_millennia_are_counted_as_postgresql_counts_them(cur):
    """`decade`, `century` and `millennium`, which DataFusion 53 refused ("Date part
    'CENTURY' not supported"): the 21st century and the 3rd millennium begin in 2001, as
    PostgreSQL and DuckDB count them (src/sql/date_parts.rs)."""
    days = ["0001-01-01", "1999-12-31", "2000-12-31", "2001-01-01", "2024-02-29"]
    values = ", ".join(f"(DATE '{d}')" for d in days)
    got = query(cur, f"SELECT extract(decade FROM d) AS dec, extract(CENTURY FROM d) AS cen, "
                     f"date_part('millennium', d) AS mil, "
                     f"extract(century FROM CAST(d AS TIMESTAMP) + INTERVAL '1 hour') AS ts_cen "
                     f"FROM (VALUES {values}) v(d) ORDER BY d").to_pylist()
    assert [r["dec"] for r in got] == [0, 199, 200, 200, 202]
    assert [r["cen"] for r in got] == [1, 20, 20, 21, 21]
    assert [r["mil"] for r in got] == [1, 2, 2, 3, 3]
    assert [r["ts_cen"] for r in got] == [1, 20, 20, 21, 21]


def test_lateral_unnest_gives_each_element_its_row_as_duckdb_does(cur, schema):
    """`FROM t, unnest(t.l) AS u(x)` and its `CROSS JOIN` / `LATERAL` spellings, which
    DataFusion 53 plans but cannot run (src/sql/lateral.rs). Empty and NULL lists give no
    row (one of NULL in a `LEFT JOIN LATERAL … ON TRUE`); a NULL element does."""
    rows = "(1, 10, [1, 2]), (2, 20, []), (3, 30, NULL), (4, 40, [5, NULL, 5]), (5, 50, [7])"
    cur.execute(f"CREATE TABLE {schema}.lists (k INT, v INT, l ARRAY<INT>)")
    cur.execute(f"INSERT INTO {schema}.lists VALUES {rows}")
    reference = duckdb.connect()
    reference.execute("CREATE SCHEMA s")
    reference.execute("CREATE TABLE s.lists (k INT, v INT, l INT[])")
    reference.execute(f"INSERT INTO s.lists VALUES {rows}")
    queries = [
        "SELECT k, x FROM {t}, unnest(l) AS u(x)",
        "SELECT lists.k, u.x, lists.v FROM {t} lists CROSS JOIN unnest(lists.l) AS u(x)",
        "SELECT a.k, u.x FROM {t} a CROSS JOIN LATERAL (SELECT unnest(a.l) AS x) u",
        "SELECT a.k, u.x FROM {t} a JOIN LATERAL (SELECT unnest(a.l) AS x) u ON u.x > a.k",
        "SELECT x, count(*) AS n, sum(k) AS s FROM {t}, unnest(l) AS u(x) GROUP BY x",
        "SELECT a.k, x, y FROM {t} a, unnest(a.l) AS u(x), unnest(a.l) AS w(y) WHERE x < y",
        "SELECT a.k, b.k AS bk FROM {t} a CROSS JOIN unnest(a.l) AS u(x) JOIN {t} b ON b.k = x",
        # Rows whose list is empty or NULL stay, with a NULL element.
        "SELECT a.k, u.x FROM {t} a LEFT JOIN LATERAL (SELECT unnest(a.l) AS x) u ON TRUE",
        "SELECT k, unnest FROM {t}, unnest(l)",  # an unnest's column is named `unnest`
        "SELECT a.k, count(u.x) AS n FROM {t} a LEFT JOIN LATERAL (SELECT unnest(a.l) AS x, a.v AS w) u "
        "ON TRUE GROUP BY a.k",
    ]
    for sql in queries:
        got = query(cur, sql.format(t=f"{schema}.lists")).to_pylist()
        expected = reference.sql(sql.format(t="s.lists")).to_arrow_table().to_pylist()
        key = lambda r: repr(sorted(r.items()))  # noqa: E731
        assert sorted(got, key=key) == sorted(expected, key=key), sql
        assert got, sql
    # With an alias and no column list, the column takes the alias, as in PostgreSQL.
    got = query(cur, f"SELECT k, u FROM {schema}.lists, unnest(l) AS u WHERE u > 1 ORDER BY k, u")
    assert got.to_pylist() == [{"k": 1, "u": 2}, {"k": 4, "u": 5}, {"k": 4, "u": 5}, {"k": 5, "u": 7}]


def test_lengths_and_positions_are_bigint(cur, schema):
    """`cardinality`, `array_length`, `array_ndims` and `array_position` are BIGINT, as
    in DuckDB and Trino: DataFusion 53's unsigned `cardinality(l) - 2` wrapped around
    below zero and `-cardinality(l)` failed (src/cluster/signed.rs)."""
    cur.execute(f"CREATE TABLE {schema}.lengths (k INT, l ARRAY<INT>)")
    cur.execute(f"INSERT INTO {schema}.lengths VALUES (1, [1, 2]), (2, []), (3, NULL), (4, [5, NULL, 5])")
    got = query(cur, "SELECT k, cardinality(l) - 2 AS c, -array_length(l) AS n, "
                     "array_position(l, 5) - array_position(l, 2) AS p, array_ndims(l) - 2 AS d "
                     f"FROM {schema}.lengths ORDER BY k")
    assert got.schema.types == [pa.int32()] + [pa.int64()] * 4
    assert got.to_pylist() == [
        {"k": 1, "c": 0, "n": -2, "p": None, "d": -1},
        {"k": 2, "c": -2, "n": 0, "p": None, "d": -1},
        {"k": 3, "c": None, "n": None, "p": None, "d": None},
        {"k": 4, "c": 1, "n": -3, "p": None, "d": -1},
    ]
    assert query(cur, "SELECT array_position([4, 5], 4) - array_position([4, 5], 5) AS p").to_pylist() == [
        {"p": -1}]


def test_functions_by_the_names_other_engines_give_them(cur):
    """`sign`, `variance`, `every` and `mod`, which DataFusion 53 names `signum`,
    `var_samp`, `bool_and` and `%` (src/cluster/mod.rs, src/sql/calls.rs); values as
    PostgreSQL answers them."""
    got = query(cur, "SELECT sign(-3) AS s, mod(-7, 3) AS m, MOD(7, -3) AS m2, variance(v) AS var, "
                     "every(v > 0) AS e, every(v > 1) AS e2, sum(mod(v, 2)) AS odd "
                     "FROM (VALUES (1), (2), (4)) AS t(v)").to_pylist()
    assert got == [{"s": -1.0, "m": -1, "m2": 1, "var": pytest.approx(7 / 3), "e": True, "e2": False,
                    "odd": 1}]


def test_fetch_first_rows_only_is_a_limit(cur):
    """SQL's `FETCH FIRST n ROWS ONLY`, which DataFusion 53 refuses (src/sql/fetch.rs)."""
    numbers = "(SELECT value AS n FROM generate_series(1, 10)) AS t"
    got = lambda sql: [r["n"] for r in query(cur, sql).to_pylist()]  # noqa: E731
    assert got(f"SELECT n FROM {numbers} ORDER BY n FETCH FIRST 3 ROWS ONLY") == [1, 2, 3]
    assert got(f"SELECT n FROM {numbers} ORDER BY n OFFSET 2 ROWS FETCH NEXT 2 ROWS ONLY") == [3, 4]
    assert got(f"SELECT n FROM {numbers} ORDER BY n DESC FETCH FIRST ROW ONLY") == [10]
    fails(cur, f"SELECT n FROM {numbers} ORDER BY n FETCH FIRST 2 ROWS WITH TIES", "NOT_IMPLEMENTED")


def test_using_joins_merge_their_columns_as_duckdb_does(cur, schema):
    """The column a `RIGHT`/`FULL JOIN … USING (g)` (or `NATURAL`) merges is
    `COALESCE(a.g, b.g)`; DataFusion 53 answered the left side's, NULL on rows only the
    right side has (apache/datafusion#22881), and refused the column in `WHERE`
    (src/sql/using_joins.rs)."""
    reference = duckdb.connect()
    reference.execute("CREATE SCHEMA s")
    for name, columns, rows in [("a", "g INT, k INT", "(1, 10), (2, 20), (NULL, 5)"),
                                ("b", "g INT, k INT, v INT", "(2, 20, 1), (3, 30, 2), (NULL, 6, 3)")]:
        cur.execute(f"CREATE TABLE {schema}.{name} ({columns})")
        cur.execute(f"INSERT INTO {schema}.{name} VALUES {rows}")
        reference.execute(f"CREATE TABLE s.{name} ({columns})")
        reference.execute(f"INSERT INTO s.{name} VALUES {rows}")
    queries = [
        "SELECT g, k FROM {s}.a FULL JOIN {s}.b USING (g, k)",
        "SELECT * FROM {s}.a FULL JOIN {s}.b USING (g)",
        "SELECT g, v FROM {s}.a x RIGHT JOIN {s}.b y USING (g)",
        "SELECT * FROM {s}.a NATURAL FULL JOIN {s}.b",
        "SELECT g, count(*) AS n FROM {s}.a FULL JOIN {s}.b USING (g) GROUP BY g",
        "SELECT * FROM {s}.a FULL JOIN {s}.b USING (g) WHERE g = 3",
        "SELECT a.k, b.v FROM {s}.a JOIN {s}.b USING (g) WHERE g < 3",
        "SELECT g FROM {s}.a LEFT JOIN {s}.b USING (g) WHERE g IS NOT NULL",
    ]
    def rows(table):
        return sorted((tuple(row.values()) for row in table.to_pylist()), key=repr)

    for sql in queries:
        expected = reference.sql(sql.format(s="s")).to_arrow_table()
        assert rows(query(cur, sql.format(s=schema))) == rows(expected), sql

    # A quoted name is its own: USING ("K") merges "K", not k, which stays ambiguous.
    for name in ("qa", "qb"):
        cur.execute(f'CREATE TABLE {schema}.{name} (k INT, "K" INT)')
    cur.execute(f"INSERT INTO {schema}.qa VALUES (1, 10), (2, 20)")
    cur.execute(f"INSERT INTO {schema}.qb VALUES (3, 10), (4, 30)")
    merged = query(cur, f'SELECT qa.k AS ak, qb.k AS bk, "K" FROM {schema}.qa FULL JOIN {schema}.qb '
                        f'USING ("K") WHERE "K" >= 20')
    assert rows(merged) == [(2, None, 20), (None, 4, 30)]
    fails(cur, f'SELECT qa.k FROM {schema}.qa JOIN {schema}.qb USING ("K") WHERE k = 1',
          "INVALID_ARGUMENT", "Ambiguous reference")


def test_numbers_are_typed_and_rounded_as_postgresql_and_duckdb_do(cur, catalog, schema):
    """`0.1` is an exact DECIMAL (`0.1 + 0.2` is 0.3, not 0.30000000000000004), a number
    with an exponent a DOUBLE, a division with a decimal operand a DOUBLE (as in DuckDB:
    DataFusion kept 4 more digits than the dividend, `1 / 3.0` was 0.3333), and a cast to
    an integer rounds, as PostgreSQL and DuckDB cast (a decimal's halves away from zero, a
    float's to even; Arrow's cast truncated: `CAST(2.7 AS INT)` was 2). Select items with
    such literals are named as written (src/sql/numbers.rs,
    src/cluster/number_semantics.rs)."""
    literals = query(cur, "SELECT 0.1 + 0.2, 1.5 * 2.25 AS p, 1e3 AS e, 1 / 3.0 AS q, 5.5 % 2 AS m")
    assert literals.column_names == ["0.1 + 0.2", "p", "e", "q", "m"]
    assert [f.type for f in literals.schema] == [
        pa.decimal128(2, 1), pa.decimal128(6, 3), pa.float64(), pa.float64(), pa.decimal128(2, 1)]
    assert literals.to_pylist() == [{"0.1 + 0.2": Decimal("0.3"), "p": Decimal("3.375"), "e": 1000.0,
                                     "q": 1 / 3, "m": Decimal("1.5")}]
    quoted = query(cur, "SELECT 'it''s ' || 1.5, 2.5 * 2 AS \"a \"\"b\"\"\" WHERE 1 = 1")
    assert quoted.to_pylist() == [{"'it''s ' || 1.5": "it's 1.5", 'a "b"': Decimal("5.0")}]
    empty = query(cur, "SELECT 1.5 AS v WHERE 1 = 0")
    assert empty.num_rows == 0 and empty.schema.field("v").type == pa.decimal128(2, 1)
    casts = query(cur, "SELECT CAST(2.5 AS INT) AS a, CAST(-2.5 AS INT) AS b, CAST(2.7 AS BIGINT) AS c, "
                       "CAST(CAST(2.5 AS DOUBLE) AS INT) AS d, CAST(CAST(3.5 AS DOUBLE) AS INT) AS e, "
                       "CAST(CAST(-2.7 AS DOUBLE) AS SMALLINT) AS f, TRY_CAST(7 / 2.0 AS INT) AS g")
    assert casts.to_pylist() == [{"a": 3, "b": -3, "c": 3, "d": 2, "e": 4, "f": -3, "g": 4}]

    cur.execute(f"CREATE TABLE {schema}.prices (k INT, price DECIMAL(10, 2), x DOUBLE, n INT)")
    cur.execute(f"INSERT INTO {schema}.prices VALUES (1, 2.55, 2.5, 1), (2, -2.45, -3.5, 2), (3, 19.99, 0.1, 7.5)")
    rows = query(cur, f"SELECT k, price * 1.1, CAST(price AS INT) AS whole, CAST(x AS INT) AS xi, n, "
                      f"price / n AS each FROM {schema}.prices ORDER BY k")
    assert rows.column_names == ["k", "price * 1.1", "whole", "xi", "n", "each"]
    assert rows["price * 1.1"].to_pylist() == [Decimal("2.805"), Decimal("-2.695"), Decimal("21.989")]
    assert rows["whole"].to_pylist() == [3, -2, 20]
    assert rows["xi"].to_pylist() == [2, -4, 0]
    assert rows["n"].to_pylist() == [1, 2, 8]  # 7.5 inserted into an INT column
    assert rows["each"].to_pylist() == pytest.approx([2.55, -1.225, 19.99 / 8])
    assert query(cur, f"SELECT sum(price * 1.1) AS s FROM {schema}.prices")["s"].to_pylist() == [Decimal("22.099")]
    assert query(cur, f"SELECT k FROM {schema}.prices WHERE price = 19.99")["k"].to_pylist() == [3]
    # DataFusion took `CAST(price AS INT) = 2` for `price = 2.00` (its cast unwrapping),
    # which kept neither 2.45 nor 2.55: a filter on a cast is the cast's value.
    count = f"SELECT count(*) AS n FROM {schema}.prices WHERE "
    assert query(cur, count + "CAST(price AS INT) = 3")["n"].to_pylist() == [1]
    assert query(cur, count + "CAST(price AS INT) > 2")["n"].to_pylist() == [2]
    assert query(cur, count + "CAST(x AS INT) = 2")["n"].to_pylist() == [1]
    # A decimal meets a float as a DOUBLE: DataFusion cast the float to DECIMAL(30, 15),
    # which a NaN or a value past 10^15 failed.
    cur.execute(f"INSERT INTO {schema}.prices VALUES (4, 0, CAST('NaN' AS DOUBLE), 0), (5, 0, 1e20, 0)")
    assert query(cur, f"SELECT k FROM {schema}.prices WHERE x > 100.1 ORDER BY k")["k"].to_pylist() == [4, 5]
    assert query(cur, f"SELECT k FROM {schema}.prices WHERE x BETWEEN -3.5 AND 2.5 OR x IN (0.1) "
                      f"ORDER BY k")["k"].to_pylist() == [1, 2, 3]
    assert query(cur, f"SELECT k FROM {schema}.prices WHERE x > price ORDER BY k")["k"].to_pylist() == [4, 5]
    # An unaliased comparison of two columns keeps its name (the float-zero rule renamed
    # it, and DataFusion refused the changed schema).
    compared = query(cur, f"SELECT x > price, x >= x FROM {schema}.prices WHERE k = 5")
    assert compared.to_pylist() == [{f"{schema}.prices.x > {schema}.prices.price": True,
                                     f"{schema}.prices.x >= {schema}.prices.x": True}]
    cur.execute(f"DELETE FROM {schema}.prices WHERE k > 3")
    cur.execute(f"UPDATE {schema}.prices SET n = n * 1.5 WHERE k = 2")
    assert query(cur, f"SELECT n FROM {schema}.prices WHERE k = 2")["n"].to_pylist() == [3]
    # What a CREATE TABLE AS of a decimal literal makes, pyiceberg reads as a decimal.
    cur.execute(f"CREATE TABLE {schema}.rates AS SELECT k, 0.25 AS rate FROM {schema}.prices")
    written = catalog.load_table((schema, "rates")).scan().to_arrow()
    assert written.schema.field("rate").type == pa.decimal128(2, 2)
    assert written["rate"].to_pylist() == [Decimal("0.25")] * 3


def test_decimal_sums_differences_and_products_are_exact_past_64_bits(cur, schema):
    """Decimal `+`, `-` and `*` of values that fit in 64 bits are computed without a check
    per value (`floe_decimal_*`, src/cluster/decimal_arithmetic.rs); a batch holding a
    larger value goes through Arrow's checked kernels. Either way each answer is the exact
    one, of Arrow's result type, and an overflow of 128 bits fails instead of wrapping."""
    for table in ("d", "wide"):
        cur.execute(f"CREATE TABLE {schema}.{table} (k INT, a DECIMAL(10, 2), c DECIMAL(5, 3), "
                    f"w DECIMAL(38, 0), q DECIMAL(18, 4))")
        cur.execute(f"INSERT INTO {schema}.{table} VALUES (1, 1.25, 1.5, 5, 99999999999999.9999), "
                    f"(2, -3.10, NULL, -7, -0.0001), (3, NULL, 2.125, 3, 12.5), "
                    f"(4, 99999999.99, -99.999, 0, -99999999999999.9999)")
    cur.execute(f"INSERT INTO {schema}.wide VALUES (5, 0.01, 0.001, 100000000000000000000, 1)")
    exprs = {"a + c": Decimal.__add__, "a - c": Decimal.__sub__, "a * c": Decimal.__mul__,
             "a * q": Decimal.__mul__, "q - a": Decimal.__sub__,
             "w * a": Decimal.__mul__, "w + q": Decimal.__add__}
    types = {"a + c": pa.decimal128(12, 3), "a - c": pa.decimal128(12, 3), "a * c": pa.decimal128(16, 5),
             "a * q": pa.decimal128(29, 6), "q - a": pa.decimal128(19, 4),
             "w * a": pa.decimal128(38, 2), "w + q": pa.decimal128(38, 4)}
    select = ", ".join(f"{e} AS \"{e}\"" for e in exprs)
    for table in ("d", "wide"):
        rows = query(cur, f"SELECT k, a, c, w, q, {select}, 1 - a AS one_minus, "
                          f"a * (1 - c) * (1 + c) AS chained FROM {schema}.{table} ORDER BY k")
        assert rows.num_rows == (4 if table == "d" else 5)
        for e, t in types.items():
            assert rows.schema.field(e).type == t, e
        for row in rows.to_pylist():
            for e, op in exprs.items():
                x, y = (row[name] for name in e.split(" ")[::2])
                assert row[e] == (None if x is None or y is None else op(x, y)), (table, row["k"], e)
            a, c = row["a"], row["c"]
            assert row["one_minus"] == (None if a is None else 1 - a)
            assert row["chained"] == (None if a is None or c is None else a * (1 - c) * (1 + c))
    # A NULL decimal on one side, and no row at all, keep Arrow's result types.
    nothing = query(cur, f"SELECT a * CAST(NULL AS DECIMAL(5, 2)) AS n, a - c AS e FROM {schema}.d "
                         f"WHERE k > 100 OR k = 1 ORDER BY k")
    assert nothing.to_pylist() == [{"n": None, "e": Decimal("-0.250")}]
    assert nothing.schema.field("n").type == pa.decimal128(16, 4)
    empty = query(cur, f"SELECT a * c AS p FROM {schema}.d WHERE k > 100")
    assert empty.num_rows == 0 and empty.schema.field("p").type == pa.decimal128(16, 5)
    plan = "\n".join(query(cur, f"EXPLAIN SELECT a * c, a + c, a - c FROM {schema}.d")["plan"].to_pylist())
    assert all(f"floe_decimal_{op}" in plan for op in ("multiply", "add", "subtract")), plan
    with pytest.raises(adbc_driver_manager.Error, match="(?i)overflow"):
        query(cur, f"SELECT w * w * w FROM {schema}.wide")


def test_functions_refusing_their_arguments_are_the_statements_errors(cur, schema):
    """A function that refuses its argument (or a value of the data) fails the statement
    with INVALID_ARGUMENT, as PostgreSQL's data exceptions do: DataFusion raises those as
    execution errors, which Floe reported as INTERNAL (src/error.rs)."""
    cur.execute(f"CREATE TABLE {schema}.vals (k INT, s STRING, d DATE)")
    cur.execute(f"INSERT INTO {schema}.vals VALUES (1, 'abc', DATE '2024-01-31')")
    for call, says in [("lpad(s, 100000000000)", "too large"),
                       ("date_trunc('fortnight', d)", "fortnight"),
                       ("make_date(2024, 13, 1)", "13"),
                       ("chr(-1)", "-1"),
                       ("decode(s, 'hex')", "hex"),
                       ("regexp_like(s, '(')", "regex"),
                       ("to_date(s, '%Y')", "abc")]:
        fails(cur, f"SELECT {call} FROM {schema}.vals", "INVALID_ARGUMENT", says)
    fails(cur, f"SELECT generate_series(1, k + 9, 0) FROM {schema}.vals", "INVALID_ARGUMENT", "step")


def test_distinct_ordered_by_a_select_items_expression_answers(cur, schema):
    """`SELECT DISTINCT k * 2 … ORDER BY k * 2` orders by the select item the expression
    repeats, as PostgreSQL and DuckDB do; DataFusion 53 refused it ("ORDER BY expressions
    t.k must appear in select list", src/sql/distinct_order.rs)."""
    cur.execute(f"CREATE TABLE {schema}.dd (k INT, s STRING)")
    cur.execute(f"INSERT INTO {schema}.dd VALUES (1, 'b'), (-2, 'a'), (2, 'a'), (3, 'c'), (1, 'b')")
    cases = [
        (f"SELECT DISTINCT k * 2 FROM {schema}.dd ORDER BY k * 2 DESC", [[6, 4, 2, -4]]),
        (f"SELECT DISTINCT abs(k) AS a, s FROM {schema}.dd ORDER BY abs(k), s", [[1, 2, 3], ["b", "a", "c"]]),
        (f"SELECT DISTINCT k * 1.5 AS x FROM {schema}.dd ORDER BY k * 1.5",
         [[Decimal("-3.0"), Decimal("1.5"), Decimal("3.0"), Decimal("4.5")]]),
        (f"SELECT * FROM (SELECT DISTINCT upper(s) AS u FROM {schema}.dd ORDER BY upper(s) LIMIT 2) x",
         [["A", "B"]]),
        # Written with other spacing and quoting, a string literal with a quote in it.
        (f'SELECT DISTINCT "k"*2, s || \'it\'\'s\' FROM {schema}.dd ORDER BY k * 2, s||\'it\'\'s\'',
         [[-4, 2, 4, 6], ["ait's", "bit's", "ait's", "cit's"]]),
    ]
    for sql, columns in cases:
        got = query(cur, sql)
        assert [c.to_pylist() for c in got.columns] == columns, sql
    # An expression of select items only was taken before too (PostgreSQL refuses it).
    assert query(cur, f"SELECT DISTINCT k FROM {schema}.dd ORDER BY k * -1")["k"].to_pylist() == [3, 2, 1, -2]


def test_subscripts_of_array_agg_answer_as_those_of_other_arrays(cur, schema):
    """`array_agg(k)[i]`: DataFusion 53 plans it as `nth_value(k, i)`, which failed for
    `[0]` (INTERNAL: "Nth value indices are 1 based") and for an index that is not a
    literal (UNIMPLEMENTED); as for any array, an index past the ends is NULL."""
    cur.execute(f"CREATE TABLE {schema}.ag (k INT, g INT)")
    cur.execute(f"INSERT INTO {schema}.ag VALUES (1, 1), (2, 1), (3, 2)")
    cases = [
        (f"SELECT array_agg(k)[0] AS x FROM {schema}.ag", [None]),
        (f"SELECT (array_agg(k ORDER BY k))[0] AS x FROM {schema}.ag", [None]),
        (f"SELECT array_agg(k ORDER BY k)[2 - 1] AS x FROM {schema}.ag", [1]),
        (f"SELECT array_agg(k ORDER BY k)[g] AS x FROM {schema}.ag GROUP BY g ORDER BY g", [1, None]),
        (f"SELECT array_agg([k, g] ORDER BY k)[g][1] AS x FROM {schema}.ag GROUP BY g ORDER BY g", [1, None]),
        # What nth_value takes stays its (the same values).
        (f"SELECT array_agg(k ORDER BY k)[1] AS x FROM {schema}.ag", [1]),
        (f"SELECT array_agg(k ORDER BY k)[-1] AS x FROM {schema}.ag", [3]),
        (f"SELECT array_agg(k ORDER BY k)[5] AS x FROM {schema}.ag", [None]),
    ]
    for sql, values in cases:
        assert query(cur, sql)["x"].to_pylist() == values, sql


def test_timestamps_and_times_as_text_are_written_as_postgresql_writes_them(cur, schema):
    """A timestamp or a time made text (`CAST`, `||`, `concat`, an `INSERT` into a string
    column) is `2024-02-29 23:59:59.5`, its fraction without trailing zeros, a
    `TIMESTAMPTZ` with its offset, as PostgreSQL, DuckDB and Spark write them; Arrow's
    cast wrote `2024-02-29T23:59:59.500` (src/cluster/datetime_text.rs)."""
    cur.execute(f"CREATE TABLE {schema}.tt (k INT, ts TIMESTAMP, tz TIMESTAMPTZ, t TIME)")
    cur.execute(f"INSERT INTO {schema}.tt VALUES "
                "(1, TIMESTAMP '2024-02-29 23:59:59.5', TIMESTAMP '2024-01-01 08:00:00', TIME '10:00:00.25'), "
                "(2, TIMESTAMP '1999-12-31 00:00:00.123456', TIMESTAMP '2024-06-01 00:00:00.1', TIME '00:00:00'), "
                "(3, NULL, NULL, NULL)")
    got = query(cur, f"SELECT CAST(ts AS VARCHAR) AS a, CAST(tz AS STRING) AS b, CAST(t AS TEXT) AS c, "
                     f"'at ' || ts AS d, concat(ts, '!') AS e, TRY_CAST(ts AS VARCHAR) AS f "
                     f"FROM {schema}.tt ORDER BY k")
    assert got.to_pylist() == [
        {"a": "2024-02-29 23:59:59.5", "b": "2024-01-01 08:00:00+00", "c": "10:00:00.25",
         "d": "at 2024-02-29 23:59:59.5", "e": "2024-02-29 23:59:59.5!", "f": "2024-02-29 23:59:59.5"},
        {"a": "1999-12-31 00:00:00.123456", "b": "2024-06-01 00:00:00.1+00", "c": "00:00:00",
         "d": "at 1999-12-31 00:00:00.123456", "e": "1999-12-31 00:00:00.123456!",
         "f": "1999-12-31 00:00:00.123456"},
        {"a": None, "b": None, "c": None, "d": None, "e": "!", "f": None},
    ]
    literal = "SELECT CAST(TIMESTAMP '2024-01-01 10:00:00' AS VARCHAR) AS a, CAST(TIME '10:00:00.5' AS VARCHAR) AS b"
    assert query(cur, literal).to_pylist() == [{"a": "2024-01-01 10:00:00", "b": "10:00:00.5"}]
    cur.execute(f"CREATE TABLE {schema}.tt_text (s STRING)")
    cur.execute(f"INSERT INTO {schema}.tt_text SELECT ts FROM {schema}.tt WHERE k = 1")
    assert query(cur, f"SELECT s FROM {schema}.tt_text")["s"].to_pylist() == ["2024-02-29 23:59:59.5"]
    found = f"SELECT k FROM {schema}.tt WHERE CAST(ts AS VARCHAR) LIKE '2024-02-29 %'"
    assert query(cur, found)["k"].to_pylist() == [1]


def test_range_frames_over_a_decimal_order_answer_as_postgresql_does(cur, schema):
    """DataFusion 53 added a `RANGE` frame's offset to a decimal order's values in a type
    one digit wider and failed comparing them ("Uncomparable values", as INTERNAL); the
    order is widened to the widest decimal first (src/cluster/range_frames.rs). An order an
    offset cannot be added to, and `ntile(0)`, are the statement's errors."""
    cur.execute(f"CREATE TABLE {schema}.amounts (k INT, price DECIMAL(10, 2), v INT)")
    cur.execute(f"INSERT INTO {schema}.amounts VALUES (1, 1.00, 1), (2, 1.50, 2), (3, 2.75, 4), "
                f"(4, 10.00, 8), (5, -2.45, 16), (6, NULL, 32)")
    framed = query(cur, "SELECT k, "
                        "sum(v) OVER (ORDER BY price RANGE BETWEEN 1.5 PRECEDING AND CURRENT ROW) AS back, "
                        "sum(v) OVER (ORDER BY price DESC RANGE BETWEEN CURRENT ROW AND 2 FOLLOWING) AS down, "
                        "count(*) OVER (PARTITION BY k % 2 ORDER BY price RANGE BETWEEN 10 PRECEDING "
                        "AND 0.5 FOLLOWING) AS n "
                        f"FROM {schema}.amounts ORDER BY k")
    assert framed.to_pylist() == [
        {"k": 1, "back": 1, "down": 1, "n": 2},
        {"k": 2, "back": 3, "down": 3, "n": 1},
        {"k": 3, "back": 6, "down": 7, "n": 3},
        {"k": 4, "back": 8, "down": 8, "n": 2},
        {"k": 5, "back": 16, "down": 16, "n": 1},
        {"k": 6, "back": 32, "down": 32, "n": 1},
    ]
    # An offset cannot be added to a string: refused as PostgreSQL refuses it, not left
    # to fail as the job runs ("Invalid arithmetic operation: Utf8 - Utf8", INTERNAL).
    cur.execute(f"CREATE TABLE {schema}.named (k INT, s STRING)")
    cur.execute(f"INSERT INTO {schema}.named VALUES (1, 'a'), (2, 'b')")
    fails(cur, f"SELECT sum(k) OVER (ORDER BY s RANGE BETWEEN 1 PRECEDING AND CURRENT ROW) FROM {schema}.named",
          "INVALID_ARGUMENT", "RANGE with an offset")
    fails(cur, f"SELECT k FROM {schema}.named WHERE k IN "
               f"(SELECT count(*) OVER (ORDER BY s RANGE 2 PRECEDING) FROM {schema}.named)",
          "INVALID_ARGUMENT", "RANGE with an offset")
    unbounded = query(cur, "SELECT k, sum(k) OVER (ORDER BY s RANGE BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) "
                           f"AS running FROM {schema}.named ORDER BY k")
    assert unbounded["running"].to_pylist() == [1, 3]
    # So is a bucket count below one (PostgreSQL: "argument of ntile must be greater than zero").
    fails(cur, f"SELECT ntile(0) OVER (ORDER BY k) FROM {schema}.named", "INVALID_ARGUMENT", "NTILE")
