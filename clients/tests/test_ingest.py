"""Bulk ingest (ADBC `adbc_ingest`): create, append, create_append; written by the
distributed write and committed once."""

import adbc_driver_manager
import pyarrow as pa
import pytest

from conftest import query

ROWS = pa.table(
    {
        "id": pa.array(range(1000), pa.int64()),
        "name": pa.array([f"n{i}" if i % 7 else None for i in range(1000)], pa.string()),
        "score": pa.array([i / 4 for i in range(1000)], pa.float64()),
    }
)


def test_ingest_modes(conn, cur, catalog, schema):
    assert cur.adbc_ingest("loaded", ROWS, mode="create", db_schema_name=schema) == 1000
    assert query(cur, f"SELECT count(*) AS n, sum(id) AS s FROM {schema}.loaded").to_pylist() == [
        {"n": 1000, "s": sum(range(1000))}
    ]
    with pytest.raises(adbc_driver_manager.Error, match="already exists"):
        cur.adbc_ingest("loaded", ROWS, mode="create", db_schema_name=schema)

    # Append takes the table's column order from names, and fills missing columns with NULL.
    more = pa.table({"score": pa.array([1.5], pa.float64()), "id": pa.array([5000], pa.int64())})
    assert cur.adbc_ingest("loaded", more, mode="append", db_schema_name=schema) == 1
    got = query(cur, f"SELECT id, name, score FROM {schema}.loaded WHERE id = 5000").to_pylist()
    assert got == [{"id": 5000, "name": None, "score": 1.5}]

    assert cur.adbc_ingest("fresh", ROWS, mode="create_append", db_schema_name=schema) == 1000
    assert cur.adbc_ingest("fresh", ROWS, mode="create_append", db_schema_name=schema) == 1000
    table = catalog.load_table(f"{schema}.fresh")
    assert len(table.snapshots()) == 2  # one commit per ingest
    assert table.scan().to_arrow().num_rows == 2000

    with pytest.raises(adbc_driver_manager.Error, match="not found"):
        cur.adbc_ingest("missing", ROWS, mode="append", db_schema_name=schema)
    with pytest.raises(adbc_driver_manager.Error, match="no column 'extra'"):
        cur.adbc_ingest("loaded", pa.table({"extra": [1]}), mode="append", db_schema_name=schema)
    with pytest.raises(adbc_driver_manager.Error, match="replace"):
        cur.adbc_ingest("loaded", ROWS, mode="replace", db_schema_name=schema)
    assert query(cur, f"SELECT count(*) AS n FROM {schema}.loaded").to_pylist() == [{"n": 1001}]


def test_an_ingest_too_large_for_one_job_is_refused_clearly(cur, catalog, schema):
    rows = 2_500_000
    big = pa.table({"id": pa.array(range(rows), pa.int64()), "v": pa.array(range(rows), pa.float64())})
    with pytest.raises(adbc_driver_manager.Error, match="at most 33 MB"):
        cur.adbc_ingest("big", big.to_reader(max_chunksize=100_000), mode="create", db_schema_name=schema)
    assert catalog.list_tables(schema) == []
