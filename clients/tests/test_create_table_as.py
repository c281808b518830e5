"""`CREATE TABLE … AS SELECT` through ADBC: the table is created with the query's
columns and filled in one statement, read back by pyiceberg; if the fill fails, the
table does not exist afterwards and leaves no files."""

from pathlib import Path

import adbc_driver_manager
import pytest

from conftest import query


@pytest.fixture()
def source(cur, schema):
    cur.execute(f"CREATE TABLE {schema}.orders (id BIGINT NOT NULL, region STRING, amount DOUBLE)")
    cur.execute(
        f"INSERT INTO {schema}.orders VALUES (1, 'eu', 10.5), (2, 'us', 3.0), (3, 'eu', NULL), (4, NULL, 1.0)"
    )
    return f"{schema}.orders"


def test_create_table_as_select_creates_and_fills_in_one_statement(cur, catalog, schema, source):
    cur.execute(
        f"CREATE TABLE {schema}.eu PARTITIONED BY (region) TBLPROPERTIES ('owner' = 'sales') "
        f"AS SELECT id, region, amount * 2 AS doubled FROM {source} WHERE region IS NOT NULL"
    )
    got = query(cur, f"SELECT * FROM {schema}.eu ORDER BY id")
    assert got.column_names == ["id", "region", "doubled"]
    assert got.to_pylist() == [
        {"id": 1, "region": "eu", "doubled": 21.0},
        {"id": 2, "region": "us", "doubled": 6.0},
        {"id": 3, "region": "eu", "doubled": None},
    ]

    table = catalog.load_table(f"{schema}.eu")
    assert [f.name for f in table.schema().fields] == ["id", "region", "doubled"]
    assert table.schema().find_field("id").required, "NOT NULL carries over from the query"
    assert [f.name for f in table.spec().fields] == ["region"]
    assert table.properties["owner"] == "sales"
    rows = sorted(table.scan().to_arrow().to_pylist(), key=lambda r: r["id"])
    assert rows == got.to_pylist()
    assert [s.summary.operation.value for s in table.snapshots()] == ["append"]


def test_an_existing_table_is_refused_or_kept(cur, schema, source):
    with pytest.raises(adbc_driver_manager.ProgrammingError, match="ALREADY_EXISTS"):
        cur.execute(f"CREATE TABLE {source} AS SELECT 1 AS id")
    cur.execute(f"CREATE TABLE IF NOT EXISTS {source} AS SELECT 1 AS id")
    assert query(cur, f"SELECT count(*) AS n FROM {source}").to_pylist() == [{"n": 4}]


def test_a_failed_fill_leaves_no_table_and_no_files(server, cur, catalog, schema, source):
    # Division by zero fails in the job, after the table was created.
    with pytest.raises(adbc_driver_manager.Error, match="(?i)divide by zero"):
        cur.execute(f"CREATE TABLE {schema}.broken AS SELECT id / (id - 2) AS x FROM {source}")
    assert not catalog.table_exists(f"{schema}.broken")
    location = Path(server.data_dir) / "warehouse" / schema / "broken"
    assert not list(location.rglob("*.parquet")) if location.exists() else True
    # The name is free again.
    cur.execute(f"CREATE TABLE {schema}.broken AS SELECT id FROM {source}")
    assert query(cur, f"SELECT count(*) AS n FROM {schema}.broken").to_pylist() == [{"n": 4}]


def test_a_column_list_is_refused(cur, schema, source):
    with pytest.raises(adbc_driver_manager.Error, match="NOT_IMPLEMENTED.*column list"):
        cur.execute(f"CREATE TABLE {schema}.listed (id BIGINT) AS SELECT id FROM {source}")
    with pytest.raises(adbc_driver_manager.ProgrammingError, match="NOT_FOUND"):
        cur.execute(f"SELECT * FROM {schema}.listed")
