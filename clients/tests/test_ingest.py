"""Bulk ingest (ADBC `adbc_ingest`): create, append, create_append, replace; written by
the distributed write and committed once."""

import datetime
import sqlite3
import threading
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
    assert query(cur, f"SELECT count(*) AS n FROM {schema}.loaded").to_pylist() == [{"n": 1001}]


@pytest.mark.parametrize("mode", ["create", "replace"])
def test_nanosecond_uploads_make_tables_other_readers_read(cur, catalog, schema, mode):
    """pandas' timestamps are nanoseconds, which only Iceberg v3 holds: a table created
    from them was a v2 table with `timestamp_ns` columns that pyiceberg could not read
    (and `time`, `date64`, `float16` uploads were refused). They are stored in
    microseconds, as Iceberg's `timestamp`, `timestamptz`, `time`, `date` and `float`."""
    uploaded = pa.table({
        "ts": pa.array([datetime.datetime(2024, 1, 1, 10, 0, 0, 123456), None], pa.timestamp("ns")),
        "tz": pa.array([datetime.datetime(2024, 1, 1, 10), None], pa.timestamp("ns", tz="UTC")),
        "tm": pa.array([datetime.time(10, 0, 0, 5), None], pa.time64("ns")),
        "d": pa.array([datetime.date(2024, 1, 1), None], pa.date64()),
        "f": pa.array([1.5, None], pa.float16()),
        "l": pa.array([[datetime.datetime(2024, 1, 2)], None], pa.list_(pa.timestamp("ms"))),
    })
    cur.adbc_ingest("nanos", uploaded, mode=mode, db_schema_name=schema)
    table = catalog.load_table(f"{schema}.nanos")
    types = {f.name: str(f.field_type) for f in table.schema().fields}
    assert types == {"ts": "timestamp", "tz": "timestamptz", "tm": "time", "d": "date", "f": "float",
                     "l": "list<timestamp>"}
    expected = [
        {"ts": datetime.datetime(2024, 1, 1, 10, 0, 0, 123456),
         "tz": datetime.datetime(2024, 1, 1, 10, tzinfo=datetime.timezone.utc),
         "tm": datetime.time(10, 0, 0, 5), "d": datetime.date(2024, 1, 1), "f": 1.5,
         "l": [datetime.datetime(2024, 1, 2)]},
        dict.fromkeys(["ts", "tz", "tm", "d", "f", "l"]),
    ]
    by_pyiceberg = table.scan().to_arrow().to_pylist()
    assert sorted(by_pyiceberg, key=lambda r: r["ts"] is None) == expected
    assert query(cur, f"SELECT * FROM {schema}.nanos ORDER BY ts NULLS LAST").to_pylist() == expected
    cur.execute(f"CREATE TABLE {schema}.nanos_now AS SELECT now() AS n, CAST('10:00:00' AS TIME) AS t")
    made = catalog.load_table(f"{schema}.nanos_now")
    assert [str(f.field_type) for f in made.schema().fields] == ["timestamp", "time"]
    assert made.scan().to_arrow().column("t").to_pylist() == [datetime.time(10)]


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


NEW = pa.table(
    {
        "id": pa.array(range(5000, 5010), pa.int64()),
        "name": pa.array([f"new{i}" for i in range(10)], pa.string()),
        "score": pa.array([float(i) for i in range(10)], pa.float64()),
    }
)


def metadata_files(server, schema, table):
    """Metadata files, manifests and manifest lists."""
    root = Path(server.data_dir) / "warehouse" / schema / table / "metadata"
    return sorted(str(p) for p in root.iterdir()) if root.exists() else []


def test_replace_with_the_same_schema(cur, catalog, schema):
    cur.adbc_ingest("swapped", ROWS, mode="create", db_schema_name=schema)
    before = catalog.load_table(f"{schema}.swapped")
    old_snapshot = before.current_snapshot().snapshot_id

    assert cur.adbc_ingest("swapped", NEW, mode="replace", db_schema_name=schema) == 10

    got = query(cur, f"SELECT id, name, score FROM {schema}.swapped ORDER BY id")
    assert got.to_pylist() == NEW.to_pylist()
    table = catalog.load_table(f"{schema}.swapped")
    assert table.scan().to_arrow().sort_by("id").to_pylist() == NEW.to_pylist()
    # Same table (identity, location, schema), one new snapshot on top of the old one.
    assert table.metadata.table_uuid == before.metadata.table_uuid
    assert table.location() == before.location()
    assert table.schema() == before.schema()
    snapshot = table.current_snapshot()
    assert {s.snapshot_id for s in table.snapshots()} == {old_snapshot, snapshot.snapshot_id}
    assert snapshot.parent_snapshot_id == old_snapshot
    summary = snapshot.summary
    assert summary.operation.value == "overwrite"
    assert summary["total-records"] == "10"
    assert summary["added-records"] == "10"
    assert summary["deleted-records"] == "1000"
    assert summary["total-data-files"] == str(len(table.inspect.files()))
    assert "floe.write-id" in summary.additional_properties
    # The old rows are still there for time travel.
    old = table.scan(snapshot_id=old_snapshot).to_arrow()
    assert old.num_rows == 1000 and sorted(old["id"].to_pylist()) == list(range(1000))

    # Replace again, then append: the table goes on normally.
    assert cur.adbc_ingest("swapped", ROWS, mode="replace", db_schema_name=schema) == 1000
    assert cur.adbc_ingest("swapped", NEW, mode="append", db_schema_name=schema) == 10
    assert query(cur, f"SELECT count(*) AS n FROM {schema}.swapped").to_pylist() == [{"n": 1010}]
    assert catalog.load_table(f"{schema}.swapped").scan().to_arrow().num_rows == 1010


def test_replace_with_no_rows_empties_the_table(cur, catalog, schema):
    cur.adbc_ingest("emptied", ROWS, mode="create", db_schema_name=schema)
    # One empty batch (a stream of no batches at all does not reach the server).
    empty = pa.RecordBatchReader.from_batches(
        NEW.schema, [pa.RecordBatch.from_pylist([], schema=NEW.schema)]
    )
    assert cur.adbc_ingest("emptied", empty, mode="replace", db_schema_name=schema) == 0
    assert query(cur, f"SELECT count(*) AS n FROM {schema}.emptied").to_pylist() == [{"n": 0}]
    table = catalog.load_table(f"{schema}.emptied")
    assert table.scan().to_arrow().num_rows == 0
    assert table.current_snapshot().summary["total-records"] == "0"
    assert len(table.snapshots()) == 2


def test_replace_of_a_missing_table_creates_it(cur, catalog, schema):
    assert cur.adbc_ingest("made", NEW, mode="replace", db_schema_name=schema) == 10
    assert catalog.load_table(f"{schema}.made").scan().to_arrow().num_rows == 10


def test_replace_with_a_different_schema(cur, catalog, schema):
    cur.adbc_ingest("reshaped", ROWS, mode="create", db_schema_name=schema)
    before = catalog.load_table(f"{schema}.reshaped")
    old_snapshot = before.current_snapshot().snapshot_id
    old_ids = {f.name: f.field_id for f in before.schema().fields}

    other = pa.table(
        {
            "tag": pa.array(["a", "b", None], pa.string()),
            "id": pa.array([1, 2, 3], pa.int64()),
            "score": pa.array([1, 2, 3], pa.int32()),  # was double: a new column
            "items": pa.array([[1], [], None], pa.list_(pa.int64())),
        }
    )
    assert cur.adbc_ingest("reshaped", other, mode="replace", db_schema_name=schema) == 3

    got = query(cur, f"SELECT * FROM {schema}.reshaped ORDER BY id")
    assert got.column_names == ["tag", "id", "score", "items"]
    assert got.to_pylist() == other.to_pylist()
    table = catalog.load_table(f"{schema}.reshaped")
    assert table.scan().to_arrow().sort_by("id").to_pylist() == other.to_pylist()
    fields = {f.name: f.field_id for f in table.schema().fields}
    assert list(fields) == ["tag", "id", "score", "items"]
    assert fields["id"] == old_ids["id"]  # same name and type: same column
    assert fields["score"] != old_ids["score"]  # another type: another column
    assert table.metadata.table_uuid == before.metadata.table_uuid
    assert table.current_snapshot().summary.operation.value == "overwrite"
    assert len(table.snapshots()) == 2  # the schema change and the rows: one commit
    old = table.scan(snapshot_id=old_snapshot).to_arrow()
    assert old.num_rows == 1000 and "name" in old.column_names


def test_replace_of_a_partitioned_table(server, cur, catalog, schema):
    cur.execute(f"CREATE TABLE {schema}.parts (id BIGINT, region STRING) PARTITIONED BY (region)")
    cur.execute(f"INSERT INTO {schema}.parts VALUES (1, 'eu'), (2, 'us'), (3, 'eu')")
    rows = pa.table(
        {"id": pa.array([10, 11, 12], pa.int64()), "region": pa.array(["asia", "us", "asia"])}
    )
    assert cur.adbc_ingest("parts", rows, mode="replace", db_schema_name=schema) == 3
    table = catalog.load_table(f"{schema}.parts")
    assert [f.name for f in table.spec().fields] == ["region"]
    files = table.inspect.files().to_pylist()
    assert sorted(f["partition"]["region"] for f in files) == ["asia", "us"]
    got = query(cur, f"SELECT id FROM {schema}.parts WHERE region = 'asia' ORDER BY id")
    assert got.to_pylist() == [{"id": 10}, {"id": 12}]
    assert table.scan().to_arrow().num_rows == 3

    # Without the partition column the table becomes unpartitioned; old snapshots keep
    # their partitioning.
    flat = pa.table({"id": pa.array([7], pa.int64())})
    assert cur.adbc_ingest("parts", flat, mode="replace", db_schema_name=schema) == 1
    table = catalog.load_table(f"{schema}.parts")
    assert table.spec().fields == ()
    assert query(cur, f"SELECT * FROM {schema}.parts").to_pylist() == [{"id": 7}]
    assert table.scan().to_arrow().to_pylist() == [{"id": 7}]
    previous = table.current_snapshot().parent_snapshot_id
    assert table.scan(snapshot_id=previous).to_arrow().num_rows == 3


def test_a_failing_replace_leaves_the_table_unchanged(server, cur, catalog, schema):
    cur.adbc_ingest("kept", ROWS, mode="create", db_schema_name=schema)
    before = catalog.load_table(f"{schema}.kept")
    files_before = data_files(server, schema, "kept")
    metadata_before = metadata_files(server, schema, "kept")

    # Another process holds a write lock on the catalog: the replace's job writes its
    # files, then its commit cannot be recorded.
    path = Path(server.data_dir) / "catalog.db"
    lock = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    try:
        lock.execute("BEGIN IMMEDIATE")
        other = NEW.append_column("extra", pa.array(range(10), pa.int32()))
        with pytest.raises(adbc_driver_manager.Error) as err:
            cur.adbc_ingest("kept", other, mode="replace", db_schema_name=schema)
    finally:
        lock.execute("COMMIT")
        lock.close()
    assert "(Unavailable;" in str(err.value), str(err.value)
    assert "nothing was committed" in str(err.value), str(err.value)

    after = catalog.load_table(f"{schema}.kept")
    assert after.metadata_location == before.metadata_location
    assert {s.snapshot_id for s in after.snapshots()} == {s.snapshot_id for s in before.snapshots()}
    assert after.schema() == before.schema()
    deadline = time.time() + 10
    while data_files(server, schema, "kept") != files_before and time.time() < deadline:
        time.sleep(0.2)
    assert data_files(server, schema, "kept") == files_before
    assert metadata_files(server, schema, "kept") == metadata_before
    assert query(cur, f"SELECT count(*) AS n FROM {schema}.kept").to_pylist() == [{"n": 1000}]
    # Without the lock the same replace works.
    assert cur.adbc_ingest("kept", other, mode="replace", db_schema_name=schema) == 10


@pytest.mark.parametrize("reshape", [False, True])
def test_replace_racing_inserts(server, cur, catalog, schema, reshape):
    """With `reshape`, every replace changes the type of `score` (a new column each
    time): an INSERT planned before a replace must not land after it."""
    cur.adbc_ingest("raced", NEW, mode="create", db_schema_name=schema)
    int_scores = ROWS.set_column(2, "score", pa.array(range(1000), pa.int32()))
    uploads = [int_scores, ROWS, int_scores] if reshape else [ROWS, ROWS, ROWS]
    inserted, replaced, errors = [], [], []
    start = threading.Barrier(3)

    def insert(writer):
        with server.connect() as connection, connection.cursor() as own:
            start.wait()
            for i in range(6):
                value = writer * 100 + i
                try:
                    own.execute(
                        f"INSERT INTO {schema}.raced (id, name, score) VALUES ({value}, 'ins', 7)"
                    )
                    own.fetch_arrow_table()
                    inserted.append(value)
                except adbc_driver_manager.Error as e:
                    errors.append(str(e))

    def replace():
        with server.connect() as connection, connection.cursor() as own:
            start.wait()
            for upload in uploads:
                try:
                    own.adbc_ingest("raced", upload, mode="replace", db_schema_name=schema)
                    replaced.append(True)
                except adbc_driver_manager.Error as e:
                    errors.append(str(e))

    threads = [threading.Thread(target=insert, args=(w,)) for w in (1, 2)]
    threads.append(threading.Thread(target=replace))
    for t in threads:
        t.start()
    for t in threads:
        t.join()

    for message in errors:
        assert "(Aborted;" in message and "nothing was committed" in message, message
    assert replaced, errors
    # Serial order: the last replace, then the INSERTs committed after it.
    table = catalog.load_table(f"{schema}.raced")
    lineage = []
    snapshot = table.current_snapshot()
    while snapshot is not None:
        lineage.append(snapshot)
        snapshot = table.snapshot_by_id(snapshot.parent_snapshot_id) if snapshot.parent_snapshot_id else None
    lineage.reverse()
    last_replace = max(i for i, s in enumerate(lineage) if s.summary.operation.value == "overwrite")
    later = lineage[last_replace + 1 :]
    assert all(s.summary.operation.value == "append" for s in later)
    assert len(lineage) == 1 + len(inserted) + len(replaced)  # every acknowledged commit
    got = query(cur, f"SELECT id, score FROM {schema}.raced WHERE name = 'ins'").to_pylist()
    assert len(got) == len(later) and {r["id"] for r in got} <= set(inserted)
    assert all(r["score"] == 7 for r in got), got
    assert query(cur, f"SELECT count(*) AS n FROM {schema}.raced").to_pylist() == [
        {"n": 1000 + len(later)}
    ]
    assert table.scan().to_arrow().num_rows == 1000 + len(later)
    referenced = {f["file_path"].removeprefix("file://") for f in table.inspect.files().to_pylist()}
    assert referenced <= set(data_files(server, schema, "raced"))
