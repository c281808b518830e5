"""INSERT through Floe: read back exactly by Floe and pyiceberg, one snapshot per
INSERT, and a failed INSERT leaves the table and its files as they were."""

import datetime
import time
import decimal
from pathlib import Path

import adbc_driver_manager
import pyarrow as pa
import pytest

from conftest import query


def seconds_since(path, then):
    """When `path` was last written, in seconds after `then`."""
    try:
        return round(Path(path).stat().st_mtime - then, 2)
    except FileNotFoundError:
        return "deleted since"


def data_files(server, schema, table):
    root = Path(server.data_dir) / "warehouse" / schema / table / "data"
    return sorted(str(p) for p in root.rglob("*.parquet")) if root.exists() else []


def snapshot_ids(catalog, schema, table):
    return [s.snapshot_id for s in catalog.load_table(f"{schema}.{table}").snapshots()]


ROWS = [
    (1, "eu", datetime.datetime(2024, 1, 1, 10, 0), decimal.Decimal("10.50"), datetime.date(2024, 1, 1)),
    (2, "us", datetime.datetime(2024, 1, 2, 11, 30), decimal.Decimal("-1.25"), datetime.date(2024, 2, 29)),
    (3, "eu", datetime.datetime(2024, 3, 3, 0, 0), None, None),
    (4, None, None, decimal.Decimal("0.01"), datetime.date(1999, 12, 31)),
]


def _values(rows):
    def lit(v):
        if v is None:
            return "NULL"
        if isinstance(v, datetime.datetime):
            return f"TIMESTAMP '{v.isoformat(sep=' ')}'"
        if isinstance(v, datetime.date):
            return f"DATE '{v.isoformat()}'"
        if isinstance(v, str):
            return f"'{v}'"
        return str(v)

    return ", ".join("(" + ", ".join(lit(v) for v in row) + ")" for row in rows)


EXPECTED = [
    {"id": r[0], "region": r[1], "ts": r[2], "amount": r[3], "day": r[4]} for r in ROWS
]

PARTITIONINGS = {
    "unpartitioned": "",
    "identity": "PARTITIONED BY (region)",
    "transforms": "PARTITIONED BY (bucket(4, id), day(ts), truncate(2, region))",
    "temporal": "PARTITIONED BY (year(day), hour(ts))",
}


@pytest.mark.parametrize("partitioning", PARTITIONINGS)
def test_inserted_rows_read_back_exactly_by_floe_and_pyiceberg(
    server, cur, catalog, schema, partitioning
):
    cur.execute(
        f"CREATE TABLE {schema}.sales (id BIGINT NOT NULL, region STRING, ts TIMESTAMP, "
        f"amount DECIMAL(10, 2), day DATE) {PARTITIONINGS[partitioning]}"
    )
    assert snapshot_ids(catalog, schema, "sales") == []

    cur.execute(f"INSERT INTO {schema}.sales VALUES {_values(ROWS[:2])}")
    assert cur.fetch_arrow_table().to_pylist() == [{"count": 2}]
    assert len(snapshot_ids(catalog, schema, "sales")) == 1
    cur.execute(f"INSERT INTO {schema}.sales VALUES {_values(ROWS[2:])}")
    assert len(snapshot_ids(catalog, schema, "sales")) == 2

    by_floe = query(cur, f"SELECT * FROM {schema}.sales ORDER BY id")
    assert by_floe.schema.types == [pa.int64(), pa.string(), pa.timestamp("us"), pa.decimal128(10, 2), pa.date32()]
    assert by_floe.to_pylist() == EXPECTED

    table = catalog.load_table(f"{schema}.sales")
    by_pyiceberg = table.scan().to_arrow().sort_by("id")
    assert by_pyiceberg.to_pylist() == EXPECTED
    assert all(f.startswith(str(server.data_dir)) for f in data_files(server, schema, "sales"))
    if partitioning != "unpartitioned":
        assert len(table.spec().fields) > 0
        # Partition pruning by pyiceberg uses the partition values Floe wrote.
        eu = table.scan(row_filter="region == 'eu'").to_arrow()
        assert sorted(eu["id"].to_pylist()) == [1, 3]


def test_insert_select_copies_between_tables(cur, catalog, schema):
    cur.execute(f"CREATE TABLE {schema}.src (id INT, v STRING)")
    cur.execute(f"INSERT INTO {schema}.src VALUES (1, 'a'), (2, 'b'), (3, 'c')")
    cur.execute(f"CREATE TABLE {schema}.dst (v STRING, id BIGINT) PARTITIONED BY (v)")
    cur.execute(f"INSERT INTO {schema}.dst SELECT upper(v), id * 10 FROM {schema}.src WHERE id > 1")
    assert cur.fetch_arrow_table().to_pylist() == [{"count": 2}]
    assert query(cur, f"SELECT * FROM {schema}.dst ORDER BY id").to_pylist() == [
        {"v": "B", "id": 20},
        {"v": "C", "id": 30},
    ]
    # Files land in the partition of the value they hold.
    files = catalog.load_table(f"{schema}.dst").inspect.files().to_pylist()
    assert sorted(f["partition"]["v"] for f in files) == ["B", "C"]


def test_nested_types_round_trip_through_pyiceberg(cur, catalog, schema):
    cur.execute(
        f"CREATE TABLE {schema}.nested (id INT NOT NULL, s STRUCT<x INT, y STRING>, "
        f"l ARRAY<BIGINT>, m MAP(STRING, DOUBLE))"
    )
    cur.execute(
        f"INSERT INTO {schema}.nested VALUES "
        f"(1, named_struct('x', 1, 'y', 'one'), [1, 2, 3], MAP(['a', 'b'], [1.5, 2.5])), "
        f"(2, NULL, NULL, NULL)"
    )
    expected = [
        {"id": 1, "s": {"x": 1, "y": "one"}, "l": [1, 2, 3], "m": [("a", 1.5), ("b", 2.5)]},
        {"id": 2, "s": None, "l": None, "m": None},
    ]
    assert query(cur, f"SELECT * FROM {schema}.nested ORDER BY id").to_pylist() == expected
    by_pyiceberg = catalog.load_table(f"{schema}.nested").scan().to_arrow().sort_by("id")
    assert by_pyiceberg.to_pylist() == expected


def test_default_in_values_is_null_as_iceberg_has_no_other_default(cur, catalog, schema):
    """`VALUES (DEFAULT, …)`, which DataFusion 53 read as a column named `default`."""
    cur.execute(f"CREATE TABLE {schema}.defaults (i INT, s STRING NOT NULL)")
    cur.execute(f"INSERT INTO {schema}.defaults VALUES (DEFAULT, 'a'), (2, 'b')")
    cur.execute(f"INSERT INTO {schema}.defaults (s, i) VALUES ('c', default)")
    with pytest.raises(adbc_driver_manager.Error, match="INVALID_ARGUMENT.*NOT NULL column 's'"):
        cur.execute(f"INSERT INTO {schema}.defaults VALUES (1, DEFAULT)")
    rows = catalog.load_table(f"{schema}.defaults").scan().to_arrow().sort_by("s").to_pylist()
    assert rows == [{"i": None, "s": "a"}, {"i": 2, "s": "b"}, {"i": None, "s": "c"}]


@pytest.mark.parametrize("partitioned", [False, True])
def test_null_into_not_null_fails_and_leaves_the_table_unchanged(server, cur, catalog, schema, partitioned):
    clause = "PARTITIONED BY (bucket(3, id))" if partitioned else ""
    cur.execute(f"CREATE TABLE {schema}.strict (id INT NOT NULL, v STRING) {clause}")
    cur.execute(f"INSERT INTO {schema}.strict VALUES (1, 'kept')")
    snapshots = snapshot_ids(catalog, schema, "strict")
    files = data_files(server, schema, "strict")

    with pytest.raises(adbc_driver_manager.ProgrammingError) as err:
        cur.execute(f"INSERT INTO {schema}.strict VALUES (2, 'x'), (NULL, 'y')")
    assert "INVALID_ARGUMENT" in str(err.value)
    assert "NOT NULL column 'id'" in str(err.value)

    # A NULL produced by a query, after other rows (and other tasks) were written.
    cur.execute(f"CREATE TABLE {schema}.source (n INT)")
    for chunk in range(4):
        values = ", ".join(f"({chunk * 100 + i})" for i in range(100))
        cur.execute(f"INSERT INTO {schema}.source VALUES {values}")
    # The error comes back once the write's tasks (in the server's process) have
    # stopped and the write's directory is deleted: the directory is as it was at once.
    # Tasks racing the failure made files after it in 6 of 75 tries before they did.
    for _ in range(5):
        with pytest.raises(adbc_driver_manager.ProgrammingError) as err:
            cur.execute(
                f"INSERT INTO {schema}.strict SELECT CASE WHEN n = 399 THEN NULL ELSE n END, "
                f"'v' FROM {schema}.source"
            )
        failed_at = time.time()
        assert "NOT NULL column 'id'" in str(err.value)
        left = sorted(set(data_files(server, schema, "strict")) - set(files))
        # When a file stays, when it was written tells a late task from a missed
        # deletion, and the server's warnings (a deletion that failed) may tell more.
        warnings = [line for line in server.process.output().splitlines() if "WARN" in line]
        assert not left, ([(f, seconds_since(f, failed_at)) for f in left], warnings[-20:])

    assert snapshot_ids(catalog, schema, "strict") == snapshots
    assert data_files(server, schema, "strict") == files
    assert query(cur, f"SELECT * FROM {schema}.strict").to_pylist() == [{"id": 1, "v": "kept"}]


def test_ddl_errors_are_clear(cur, schema):
    def fails(sql, *fragments):
        with pytest.raises(adbc_driver_manager.ProgrammingError) as err:
            cur.execute(sql)
        for fragment in fragments:
            assert fragment in str(err.value)

    cur.execute(f"CREATE TABLE {schema}.once (a INT)")
    fails(f"CREATE TABLE {schema}.once (a INT)", "ALREADY_EXISTS")
    cur.execute(f"CREATE TABLE IF NOT EXISTS {schema}.once (a INT)")
    fails(f"DROP TABLE {schema}.never", "NOT_FOUND")
    cur.execute(f"DROP TABLE IF EXISTS {schema}.never")

    bad = f"CREATE TABLE {schema}.bad"
    fails(f"{bad} (a INT) PARTITIONED BY (bucket(4, missing))", "INVALID_ARGUMENT", "missing")
    fails(f"{bad} (a INT) PARTITIONED BY (sqrt(a))", "INVALID_ARGUMENT", "sqrt(a)")
    fails(f"{bad} (s STRING) PARTITIONED BY (day(s))", "INVALID_ARGUMENT", "day")
    fails(f"CREATE SCHEMA {schema}", "ALREADY_EXISTS")
    fails(f"DROP SCHEMA {schema}", "not empty")

    cur.execute(f"DROP TABLE {schema}.once")
    cur.execute(f"DROP SCHEMA {schema}")
    fails(f"SELECT * FROM {schema}.once", "NOT_FOUND")


def test_every_primitive_type_is_created_as_iceberg_expects(cur, catalog, schema):
    cur.execute(
        f"CREATE TABLE {schema}.types (b BOOLEAN, i INT, l BIGINT, f REAL, d DOUBLE, "
        f"dec DECIMAL(38, 9), dt DATE, t TIME, ts TIMESTAMP, tstz TIMESTAMP WITH TIME ZONE, "
        f"s STRING, u UUID, bin BYTEA, fx BINARY(4))"
    )
    types = {f.name: str(f.field_type) for f in catalog.load_table(f"{schema}.types").schema().fields}
    assert types == {
        "b": "boolean", "i": "int", "l": "long", "f": "float", "d": "double",
        "dec": "decimal(38, 9)", "dt": "date", "t": "time", "ts": "timestamp",
        "tstz": "timestamptz", "s": "string", "u": "uuid", "bin": "binary", "fx": "fixed[4]",
    }


def test_insert_from_a_table_function(cur, schema):
    cur.execute(f"CREATE TABLE {schema}.series (n BIGINT, half DOUBLE)")
    cur.execute(f"INSERT INTO {schema}.series SELECT value, value / 2.0 FROM generate_series(1, 5000)")
    assert cur.fetch_arrow_table().to_pylist() == [{"count": 5000}]
    assert query(cur, f"SELECT count(*) AS c, sum(n) AS s FROM {schema}.series").to_pylist() == [
        {"c": 5000, "s": 5000 * 5001 // 2}
    ]



def test_an_insert_query_may_repeat_a_column_name(cur, catalog, schema):
    # An INSERT fills columns by position: a query whose output names repeat is fine.
    cur.execute(f"CREATE TABLE {schema}.pairs (a BIGINT, b BIGINT)")
    cur.execute(f"INSERT INTO {schema}.pairs SELECT 1, 1")
    cur.execute(f"INSERT INTO {schema}.pairs SELECT value, value FROM generate_series(2, 3)")
    cur.execute(f"INSERT INTO {schema}.pairs SELECT a, a * 10 AS a FROM {schema}.pairs WHERE a = 1 UNION ALL SELECT 4, 4")
    cur.execute(f"INSERT INTO {schema}.pairs (b, a) SELECT p.a, a + 100 FROM {schema}.pairs p WHERE a = 4")
    cur.execute(f"INSERT INTO {schema}.pairs SELECT length('it''s'), length('it''s')")
    expected = [(1, 1), (1, 10), (2, 2), (3, 3), (4, 4), (4, 4), (104, 4)]
    assert [tuple(r.values()) for r in query(cur, f"SELECT * FROM {schema}.pairs ORDER BY a, b").to_pylist()] == expected
    assert sorted(catalog.load_table(f"{schema}.pairs").scan().to_arrow().to_pylist(), key=lambda r: (r["a"], r["b"])) == [
        {"a": a, "b": b} for a, b in expected
    ]
    # A plain query's names reach the client: a repeat is answered under a name of its
    # own (src/sql/output_names.rs).
    assert query(cur, f"SELECT a, a FROM {schema}.pairs WHERE b = 10").to_pylist() == [{"a": 1, "a_1": 1}]

@pytest.mark.parametrize("prepared", [False, True])
def test_updates_sent_as_updates_report_their_row_count(conn, cur, schema, prepared):
    """The JDBC-style path: DoPut with CommandStatementUpdate / CommandPreparedStatementUpdate."""
    cur.execute(f"CREATE TABLE {schema}.counted (a INT)")
    statement = adbc_driver_manager.AdbcStatement(conn.adbc_connection)
    try:
        statement.set_sql_query(f"INSERT INTO {schema}.counted VALUES (1), (2), (3)")
        if prepared:
            statement.prepare()
        assert statement.execute_update() == 3
    finally:
        statement.close()
    assert query(cur, f"SELECT count(*) AS n FROM {schema}.counted").to_pylist() == [{"n": 3}]


def test_explain_of_an_insert_writes_nothing(server, cur, catalog, schema):
    cur.execute(f"CREATE TABLE {schema}.explained (a INT)")
    assert query(cur, f"EXPLAIN INSERT INTO {schema}.explained VALUES (1)").num_rows > 0
    with pytest.raises(adbc_driver_manager.NotSupportedError):
        cur.execute(f"EXPLAIN ANALYZE INSERT INTO {schema}.explained VALUES (1)")
    assert snapshot_ids(catalog, schema, "explained") == []
    assert data_files(server, schema, "explained") == []


def test_values_inside_an_insert_query_keep_their_own_types(cur, catalog, schema):
    """DataFusion typed every VALUES inside an INSERT's query as the table's columns:
    `SELECT v.k FROM (VALUES (7, 'a')) v(k, s)` failed casting 'a' to BIGINT, `(VALUES
    (8)) v(k)` wanted 2 values, and a MERGE from such a source failed alike
    (src/sql/positional.rs)."""
    t = f"{schema}.typed_values"
    cur.execute(f"CREATE TABLE {t} (k BIGINT, n BIGINT, s STRING)")
    cur.execute(f"INSERT INTO {t} SELECT v.k, 1, 'x' FROM (VALUES (7, 'a')) v(k, s)")
    cur.execute(f"INSERT INTO {t} SELECT k, 2, 'y' FROM (VALUES (8)) v(k)")
    cur.execute(f"INSERT INTO {t} SELECT column1, column2, 'z' FROM (VALUES (9, 3), (10, NULL))")
    cur.execute(f"INSERT INTO {t} WITH w(a) AS (VALUES (11), (12)) SELECT a, a, 'w' FROM w")
    cur.execute(f"MERGE INTO {t} USING (VALUES (7, 'seven'), (13, 'new')) v(k, s) ON {t}.k = v.k "
                f"WHEN MATCHED THEN UPDATE SET s = v.s WHEN NOT MATCHED THEN INSERT (k, s) VALUES (v.k, v.s)")
    expected = [(7, 1, "seven"), (8, 2, "y"), (9, 3, "z"), (10, None, "z"), (11, 11, "w"), (12, 12, "w"),
                (13, None, "new")]
    assert [tuple(r.values()) for r in query(cur, f"SELECT * FROM {t} ORDER BY k").to_pylist()] == expected
    by_pyiceberg = sorted(catalog.load_table(t).scan().to_arrow().to_pylist(), key=lambda r: r["k"])
    assert [tuple(r.values()) for r in by_pyiceberg] == expected
