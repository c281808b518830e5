"""Bulk ingest (ADBC `adbc_ingest`): create, append, create_append; written by the
distributed write and committed once."""

import time
from pathlib import Path

import adbc_driver_manager
import pyarrow as pa
import pyarrow.compute as pc
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


def data_files(server, schema, table):
    """Everything under the table's data directory (data files, staging files, write
    directories)."""
    root = Path(server.data_dir) / "warehouse" / schema / table / "data"
    return sorted(str(p) for p in root.rglob("*")) if root.exists() else []


def wait_for(condition, timeout=20.0):
    deadline = time.time() + timeout
    while not condition():
        if time.time() > deadline:
            return False
        time.sleep(0.2)
    return True


@pytest.mark.parametrize("batches_sent", [10, 40], ids=["one-staging-file", "several-staging-files"])
def test_an_upload_the_client_abandons_half_way_commits_nothing_and_leaves_no_files(
    server, conn, catalog, schema, batches_sent
):
    with conn.cursor() as cur:
        assert cur.adbc_ingest("kept", ROWS, mode="create", db_schema_name=schema) == 1000
    before = data_files(server, schema, "kept")
    snapshots = len(catalog.load_table(f"{schema}.kept").snapshots())
    cancelled = "ingest failed: ingest: the client cancelled the upload"
    failures = server.process.output().count(cancelled)

    batch_rows = 125_000  # 2 MB
    sent = pa.schema([("id", pa.int64()), ("name", pa.string()), ("score", pa.float64())])

    def batches():
        for i in range(batches_sent):
            ids = pa.array(range(i * batch_rows, (i + 1) * batch_rows), pa.int64())
            yield pa.record_batch([ids, pa.nulls(batch_rows, pa.string()), pc.cast(ids, pa.float64())], schema=sent)
        raise ValueError("the client's data source failed")

    # ADBC gives up on the upload and, when the statement closes, cancels the call;
    # the server sees the upload end and the call dropped.
    with conn.cursor() as cur:
        with pytest.raises(adbc_driver_manager.Error, match="data source failed"):
            cur.adbc_ingest(
                "kept", pa.RecordBatchReader.from_batches(sent, batches()), mode="append", db_schema_name=schema
            )
    committed = lambda: len(catalog.load_table(f"{schema}.kept").snapshots()) != snapshots  # noqa: E731
    assert wait_for(lambda: server.process.output().count(cancelled) > failures or committed())
    assert not committed(), "the truncated upload was committed"
    assert data_files(server, schema, "kept") == before
    with conn.cursor() as cur:
        assert query(cur, f"SELECT count(*) AS n FROM {schema}.kept").to_pylist() == [{"n": 1000}]


def test_bad_data_half_way_through_a_large_ingest_commits_nothing_and_leaves_no_files(
    server, cur, catalog, schema
):
    cur.execute(f"CREATE TABLE {schema}.typed (id BIGINT, note STRING)")
    # Ids arrive as text; one in the last batch is not a number. Larger than one
    # cluster message, so it is staged in several files and written by several tasks.
    rows, batch_rows = 6_000_000, 250_000
    ids = pc.cast(pa.array(range(rows), pa.int64()), pa.string())
    ids = pa.concat_arrays([ids.slice(0, rows - 1), pa.array(["x"])])
    upload = pa.table({"id": ids, "note": pa.nulls(rows, pa.string())})
    assert upload.nbytes > 64 * 1024 * 1024
    with pytest.raises(adbc_driver_manager.Error, match="Cannot cast string 'x'"):
        cur.adbc_ingest("typed", upload.to_reader(max_chunksize=batch_rows), mode="append", db_schema_name=schema)
    table = catalog.load_table(f"{schema}.typed")
    assert table.snapshots() == []
    # Tasks of the failed job that were still writing are swept after it.
    assert wait_for(lambda: data_files(server, schema, "typed") == [])
    assert query(cur, f"SELECT count(*) AS n FROM {schema}.typed").to_pylist() == [{"n": 0}]


def test_an_upload_whose_columns_cannot_go_into_the_table_is_refused_before_staging(
    server, cur, catalog, schema
):
    cur.execute(f"CREATE TABLE {schema}.narrow (id BIGINT)")
    nested = pa.table({"id": pa.array([[1], [2]], pa.list_(pa.int64()))})
    with pytest.raises(adbc_driver_manager.Error, match="column 'id' is List"):
        cur.adbc_ingest("narrow", nested, mode="append", db_schema_name=schema)
    assert data_files(server, schema, "narrow") == []
