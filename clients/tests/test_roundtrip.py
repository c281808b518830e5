"""Round trips through real Flight SQL clients (ADBC and pyarrow.flight), and rows
written by pyiceberg read by Floe."""

import datetime
import decimal

import adbc_driver_manager
import pyarrow as pa
import pytest

from conftest import query

PYICEBERG_ROWS = pa.table(
    {
        "id": pa.array([1, 2, 3], pa.int64()),
        "name": pa.array(["ann", None, "cy"], pa.string()),
        "price": pa.array([1.5, 2.25, None], pa.float64()),
        "qty": pa.array([10, None, 30], pa.int32()),
        "flag": pa.array([True, False, None], pa.bool_()),
        "day": pa.array([datetime.date(2024, 1, 1), None, datetime.date(2024, 12, 31)], pa.date32()),
        "at": pa.array(
            [datetime.datetime(2024, 1, 1, 10, 30), datetime.datetime(2024, 6, 1), None],
            pa.timestamp("us"),
        ),
        "amount": pa.array([decimal.Decimal("1.10"), None, decimal.Decimal("-3.25")], pa.decimal128(10, 2)),
    }
)


def test_adbc_creates_inserts_and_queries(cur, schema):
    cur.execute(f"CREATE TABLE {schema}.people (id BIGINT NOT NULL, name STRING, score DOUBLE)")
    cur.execute(f"INSERT INTO {schema}.people VALUES (1, 'ann', 9.5), (2, 'bob', NULL), (3, NULL, 7.0)")
    assert cur.fetch_arrow_table().to_pylist() == [{"count": 3}]
    table = query(cur, f"SELECT * FROM {schema}.people ORDER BY id")
    assert table.schema.types == [pa.int64(), pa.string(), pa.float64()]
    assert table.to_pylist() == [
        {"id": 1, "name": "ann", "score": 9.5},
        {"id": 2, "name": "bob", "score": None},
        {"id": 3, "name": None, "score": 7.0},
    ]


def test_pyarrow_flight_creates_inserts_and_queries(server, schema):
    client = server.flight_client()
    client.update(f"CREATE TABLE {schema}.kv (k STRING, v INT)")
    inserted = client.query(f"INSERT INTO {schema}.kv VALUES ('a', 1), ('b', 2)")
    assert inserted.to_pylist() == [{"count": 2}]
    table = client.query(f"SELECT k, v FROM {schema}.kv ORDER BY k")
    assert table.schema.types == [pa.string(), pa.int32()]
    assert table.to_pylist() == [{"k": "a", "v": 1}, {"k": "b", "v": 2}]
    client.close()


def _pyiceberg_table(catalog, schema, name):
    table = catalog.create_table(f"{schema}.{name}", schema=PYICEBERG_ROWS.schema)
    table.append(PYICEBERG_ROWS)
    return table


def test_adbc_reads_rows_pyiceberg_appended(server, cur, catalog, schema):
    _pyiceberg_table(catalog, schema, "from_py")
    table = query(cur, f"SELECT * FROM {schema}.from_py ORDER BY id")
    assert table.schema.names == PYICEBERG_ROWS.schema.names
    assert table.schema.types == PYICEBERG_ROWS.schema.types
    assert table.to_pylist() == PYICEBERG_ROWS.to_pylist()


def test_pyarrow_flight_reads_rows_pyiceberg_appended(server, catalog, schema):
    _pyiceberg_table(catalog, schema, "from_py2")
    client = server.flight_client()
    table = client.query(f"SELECT * FROM {schema}.from_py2 ORDER BY id")
    assert table.schema.types == PYICEBERG_ROWS.schema.types
    assert table.to_pylist() == PYICEBERG_ROWS.to_pylist()
    client.close()


def test_append_by_pyiceberg_is_visible_at_once(cur, catalog, schema):
    table = _pyiceberg_table(catalog, schema, "growing")
    assert query(cur, f"SELECT count(*) AS n FROM {schema}.growing").to_pylist() == [{"n": 3}]
    table.append(PYICEBERG_ROWS)
    assert query(cur, f"SELECT count(*) AS n FROM {schema}.growing").to_pylist() == [{"n": 6}]



def test_a_table_is_read_again_only_when_its_metadata_file_changes(cur, catalog, schema):
    """Metadata files never change once written: while the catalog names the same one,
    Floe does not read it again; a commit by anyone names a new one, read at once."""
    from pathlib import Path

    cur.execute(f"CREATE TABLE {schema}.kept (id INT)")
    cur.execute(f"INSERT INTO {schema}.kept VALUES (1)")
    assert query(cur, f"SELECT id FROM {schema}.kept")["id"].to_pylist() == [1]
    metadata = Path(catalog.load_table(f"{schema}.kept").metadata_location.removeprefix("file://"))
    original = metadata.read_bytes()
    metadata.write_bytes(b"not metadata")
    try:
        assert query(cur, f"SELECT id FROM {schema}.kept")["id"].to_pylist() == [1]
    finally:
        metadata.write_bytes(original)
    catalog.load_table(f"{schema}.kept").append(pa.table({"id": pa.array([2], pa.int32())}))
    assert sorted(query(cur, f"SELECT id FROM {schema}.kept")["id"].to_pylist()) == [1, 2]

def test_prepared_statements_describe_without_running(cur, catalog, schema):
    cur.execute(f"CREATE TABLE {schema}.p (a INT, b STRING)")
    result_schema = cur.adbc_execute_schema(f"SELECT b, a FROM {schema}.p")
    assert result_schema.names == ["b", "a"]
    assert result_schema.types == [pa.string(), pa.int32()]
    # Preparing DDL must not run it.
    cur.adbc_prepare(f"CREATE TABLE {schema}.later (a INT)")
    assert (schema, "later") not in catalog.list_tables(schema)
    cur.execute(f"CREATE TABLE {schema}.later (a INT)")
    assert (schema, "later") in catalog.list_tables(schema)


def test_empty_table_scans_to_zero_rows(cur, schema):
    # That it takes one partition is checked on the planner itself (tests/scan.rs).
    cur.execute(f"CREATE TABLE {schema}.empty (a INT, b STRING)")
    table = query(cur, f"SELECT * FROM {schema}.empty")
    assert table.num_rows == 0
    assert table.schema.names == ["a", "b"]
    assert query(cur, f"SELECT count(*) AS n FROM {schema}.empty").to_pylist() == [{"n": 0}]


def test_missing_table_is_not_found(server, cur, schema):
    with pytest.raises(adbc_driver_manager.ProgrammingError) as err:
        cur.execute(f"SELECT * FROM {schema}.nope")
    assert "NOT_FOUND" in str(err.value)
    assert f"{schema}.nope" in str(err.value)
    with pytest.raises(adbc_driver_manager.ProgrammingError) as err:
        cur.execute("SELECT * FROM no_such_schema.t")
    assert "NOT_FOUND" in str(err.value)

    client = server.flight_client()
    with pytest.raises(pa.ArrowKeyError) as err:  # pyarrow's mapping of NOT_FOUND
        client.query(f"SELECT * FROM {schema}.nope")
    assert "not found error" in str(err.value)
    client.close()


def test_malformed_sql_is_invalid_argument_and_the_server_keeps_serving(server, cur):
    with pytest.raises(adbc_driver_manager.ProgrammingError) as err:
        cur.execute("SELEC 1")
    assert "INVALID_ARGUMENT" in str(err.value)
    assert "Expected: an SQL statement, found: SELEC" in str(err.value)

    client = server.flight_client()
    with pytest.raises(pa.ArrowInvalid) as err:
        client.query("SELECT (1 +")
    client.close()

    assert query(cur, "SELECT 1 AS one").to_pylist() == [{"one": 1}]


def test_unsupported_statement_is_unimplemented(cur, schema):
    cur.execute(f"CREATE TABLE {schema}.u (a INT)")
    with pytest.raises(adbc_driver_manager.NotSupportedError) as err:
        cur.execute(f"CREATE VIEW {schema}.v AS SELECT a FROM {schema}.u")
    assert "(Unimplemented;" in str(err.value)  # ADBC names gRPC UNIMPLEMENTED so


def test_show_tables_and_information_schema(cur, schema):
    cur.execute(f"CREATE TABLE {schema}.listed (a INT)")
    tables = query(cur, "SHOW TABLES").to_pylist()
    assert {"table_catalog": "floe", "table_schema": schema, "table_name": "listed", "table_type": "BASE TABLE"} in tables
    columns = query(
        cur,
        f"SELECT column_name, data_type FROM information_schema.columns "
        f"WHERE table_schema = '{schema}' AND table_name = 'listed'",
    ).to_pylist()
    assert columns == [{"column_name": "a", "data_type": "Int32"}]


def test_show_tables_of_a_schema_and_show_schemas(cur, schema):
    for name in ("listed", "also_listed", "other"):
        cur.execute(f"CREATE TABLE {schema}.{name} (a INT)")

    def names(sql, column="table_name"):
        return [row[column] for row in query(cur, sql).to_pylist()]

    assert names(f"SHOW TABLES FROM {schema}") == ["also_listed", "listed", "other"]
    assert names(f"SHOW TABLES IN floe.{schema} LIKE '%listed'") == ["also_listed", "listed"]
    assert names(f"SHOW TABLES IN {schema} ILIKE 'OTH%'") == ["other"]
    assert names("SHOW TABLES FROM no_such_schema") == []
    assert schema in names("SHOW SCHEMAS", "schema_name")
    assert names(f"SHOW DATABASES LIKE '{schema}'", "schema_name") == [schema]
    assert names(f"SHOW SCHEMAS FROM floe LIKE '{schema}'", "schema_name") == [schema]
    for refused, code in [
        ("SHOW SCHEMAS FROM elsewhere", "NotFound"),
        (f"SHOW TABLES FROM elsewhere.{schema}", "NotFound"),
        (f"SHOW TABLES FROM {schema} WHERE true", "Unimplemented"),
    ]:
        with pytest.raises(adbc_driver_manager.Error) as err:
            cur.execute(refused)
        assert f"({code};" in str(err.value), refused


def test_view_types_reach_clients_as_plain_strings_and_binaries(cur):
    table = query(
        cur,
        "SELECT arrow_cast('abc', 'Utf8View') AS s, arrow_cast(arrow_cast('xy', 'Binary'), 'BinaryView') AS b",
    )
    assert table.schema.types == [pa.string(), pa.binary()]
    assert table.to_pylist() == [{"s": "abc", "b": b"xy"}]


def test_show_create_table_makes_the_same_table_again(cur, catalog, schema):
    cur.execute(
        f'CREATE TABLE {schema}."Odd ""name""" ('
        "  id BIGINT NOT NULL COMMENT 'the row''s id', \"Mixed\" STRING, ts TIMESTAMP, tz TIMESTAMPTZ,"
        "  amount DECIMAL(10, 2), tags ARRAY<STRING>, attrs MAP(STRING, INT), p STRUCT<a INT, b STRING>,"
        "  b BINARY(4), vb VARBINARY, u UUID, f REAL, d DOUBLE, dt DATE, tm TIME, flag BOOLEAN)"
        ' PARTITIONED BY (day(ts), bucket(8, id), truncate(3, "Mixed"), flag)'
        " COMMENT 'a ''quoted'' table'"
        " TBLPROPERTIES ('write.parquet.compression-codec' = 'snappy', 'my.key' = 'it''s')"
    )
    shown = query(cur, f'SHOW CREATE TABLE {schema}."Odd ""name"""').to_pylist()
    statement = shown[0]["create_statement"]
    name = f'floe.{schema}."Odd ""name"""'
    assert statement.startswith(f"CREATE TABLE {name} (")
    assert "LOCATION" not in statement
    cur.execute(statement.replace(name, f"{schema}.again", 1))

    original, again = (catalog.load_table((schema, n)) for n in ('Odd "name"', "again"))
    assert again.schema() == original.schema()  # names, types, ids, NOT NULL, comments
    assert again.spec() == original.spec()
    assert again.properties == original.properties
    assert again.properties["comment"] == "a 'quoted' table"
    assert again.properties["my.key"] == "it's"


def test_show_create_table_of_a_table_pyiceberg_made(cur, catalog, schema):
    _pyiceberg_table(catalog, schema, "made_by_py")
    statement = query(cur, f"SHOW CREATE TABLE {schema}.made_by_py").to_pylist()[0]["create_statement"]
    cur.execute(statement.replace(f"floe.{schema}.made_by_py", f"{schema}.made_again", 1))
    original, again = (catalog.load_table((schema, n)) for n in ("made_by_py", "made_again"))
    assert again.schema() == original.schema()
    with pytest.raises(adbc_driver_manager.Error) as err:
        cur.execute(f"SHOW CREATE TABLE {schema}.no_such_table")
    assert "(NotFound;" in str(err.value) and "no_such_table' not found" in str(err.value)


def test_show_tblproperties_and_partitions_read_the_metadata_tables(cur, catalog, schema):
    cur.execute(f"CREATE TABLE {schema}.\"Parted t\" (v INT, d DATE) PARTITIONED BY (d) "
                "TBLPROPERTIES ('my.key' = 'it''s')")
    cur.execute(f"INSERT INTO {schema}.\"Parted t\" VALUES (1, DATE '2024-01-01'), (2, DATE '2024-01-02'), "
                "(3, DATE '2024-01-02')")
    properties = query(cur, f'SHOW TBLPROPERTIES {schema}."Parted t"').to_pylist()
    assert {row["key"]: row["value"] for row in properties} == catalog.load_table((schema, "Parted t")).properties
    assert {"key": "my.key", "value": "it's"} in properties
    partitions = query(cur, f'SHOW PARTITIONS {schema}."Parted t"').to_pylist()
    assert sorted((row["partition"]["d"].isoformat(), row["record_count"]) for row in partitions) == [
        ("2024-01-01", 1), ("2024-01-02", 2)]
    with pytest.raises(adbc_driver_manager.Error) as err:
        cur.execute(f"SHOW PARTITIONS {schema}.no_such_table")
    assert "(NotFound;" in str(err.value)
