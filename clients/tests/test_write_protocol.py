"""The write protocol: concurrent INSERTs all commit, a failed commit leaves no files,
and nothing is acknowledged that the catalog did not record (a busy SQLite catalog
loses commits silently underneath)."""

import sqlite3
import threading
import time
from contextlib import contextmanager
from pathlib import Path

import adbc_driver_manager
import pytest

from conftest import query


def data_files(server, schema, table):
    root = Path(server.data_dir) / "warehouse" / schema / table / "data"
    return sorted(str(p) for p in root.rglob("*.parquet")) if root.exists() else []


def metadata_files(server, schema, table):
    root = Path(server.data_dir) / "warehouse" / schema / table / "metadata"
    return sorted(str(p) for p in root.glob("*.metadata.json")) if root.exists() else []


@contextmanager
def catalog_transaction(server, kind="read"):
    """Another process's open transaction on catalog.db. A read transaction (a live
    Spark session with Iceberg's JDBC catalog or a sqlite3 shell holds one) keeps a
    SHARED lock: writers cannot commit. An immediate (write) transaction keeps a
    RESERVED lock: writers cannot even start. An exclusive one keeps readers out too."""
    path = Path(server.data_dir) / "catalog.db"
    con = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    try:
        if kind == "read":
            con.execute("BEGIN")
            con.execute("SELECT * FROM iceberg_tables").fetchall()
        else:
            con.execute(f"BEGIN {kind.upper()}")
        yield con
    finally:
        if con.in_transaction:
            con.execute("COMMIT")
        con.close()


def refused(server, *statements):
    """Runs the statements at once, each on its own connection (each waits out the
    catalog's lock); every one must fail with a status and a message that say nothing
    happened."""
    outcomes = {}

    def run(sql):
        with server.connect() as connection, connection.cursor() as own:
            try:
                own.execute(sql)
                outcomes[sql] = "acknowledged"
            except adbc_driver_manager.Error as e:
                outcomes[sql] = str(e)

    threads = [threading.Thread(target=run, args=(sql,)) for sql in statements]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for sql, message in outcomes.items():
        # ADBC shows the gRPC status as "(Unavailable; …)" / "(Aborted; …)".
        assert "(Unavailable;" in message or "(Aborted;" in message, (sql, message)
        # A change that failed says so; a statement that could not even read the catalog
        # (a commit waiting for the lock blocks new readers) says the catalog is busy.
        assert "nothing was committed" in message or "catalog database is busy" in message, (
            sql,
            message,
        )


def test_concurrent_inserts_into_one_table_all_commit(server, cur, catalog, schema):
    cur.execute(f"CREATE TABLE {schema}.shared (writer INT, n INT)")
    writers, rounds, rows = 4, 3, 10
    results = concurrent_inserts(server, f"{schema}.shared", writers, rounds, rows)
    assert results == {(w, r): rows for w in range(writers) for r in range(rounds)}
    counted = query(
        cur,
        f"SELECT writer, count(DISTINCT n) AS c FROM {schema}.shared GROUP BY writer ORDER BY writer",
    )
    assert counted.to_pylist() == [{"writer": w, "c": rounds * rows} for w in range(writers)]
    assert len(catalog.load_table(f"{schema}.shared").snapshots()) == writers * rounds


def concurrent_inserts(server, table, writers, rounds, rows):
    """Runs `writers` threads, each with its own connection, each inserting `rounds`
    times; returns (writer, round) -> row count acknowledged or the error's text."""
    start = threading.Barrier(writers)
    results = {}

    def write(writer):
        with server.connect() as connection, connection.cursor() as own:
            start.wait()
            for r in range(rounds):
                values = ", ".join(f"({writer}, {r * rows + i})" for i in range(rows))
                try:
                    own.execute(f"INSERT INTO {table} VALUES {values}")
                    results[writer, r] = own.fetch_arrow_table().to_pylist()[0]["count"]
                except adbc_driver_manager.Error as e:
                    results[writer, r] = str(e)

    threads = [threading.Thread(target=write, args=(w,)) for w in range(writers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


def test_each_write_has_its_own_directory(server, cur, catalog, schema):
    cur.execute(f"CREATE TABLE {schema}.dirs (id INT, region STRING) PARTITIONED BY (region)")
    cur.execute(f"INSERT INTO {schema}.dirs VALUES (1, 'eu'), (2, 'us')")
    cur.execute(f"INSERT INTO {schema}.dirs VALUES (3, 'eu')")
    table = catalog.load_table(f"{schema}.dirs")
    write_ids = {s.snapshot_id: s.summary["floe.write-id"] for s in table.snapshots()}
    assert len(set(write_ids.values())) == 2
    entries = table.inspect.entries().to_pylist()
    assert len(entries) == 3
    data = f"{table.location()}/data/"
    for entry in entries:
        path = entry["data_file"]["file_path"]
        write_id = write_ids[entry["snapshot_id"]]
        # <data>/<write id>/<partition>/<write id>-….parquet
        assert path.startswith(f"{data}{write_id}/region="), path
        assert path.rsplit("/", 1)[1].startswith(write_id), path

    # A failed write's directory goes away entirely.
    with pytest.raises(adbc_driver_manager.Error):
        cur.execute(f"INSERT INTO {schema}.dirs SELECT CAST(v AS INT), 'x' FROM (VALUES ('1'), ('y')) t(v)")
    directories = Path(server.data_dir) / "warehouse" / schema / "dirs" / "data"
    deadline = time.time() + 10
    while {d.name for d in directories.iterdir()} != set(write_ids.values()):
        assert time.time() < deadline, sorted(d.name for d in directories.iterdir())
        time.sleep(0.2)


def test_a_commit_that_loses_every_retry_is_aborted_and_leaves_no_files(
    server, cur, catalog, schema
):
    cur.execute(f"CREATE TABLE {schema}.contended (writer INT, n INT)")
    with catalog.load_table(f"{schema}.contended").transaction() as tx:
        tx.set_properties({"commit.retry.num-retries": "0"})
    results = concurrent_inserts(server, f"{schema}.contended", writers=6, rounds=3, rows=5)

    acknowledged = [k for k, v in results.items() if v == 5]
    # Six writers without retries collide (5 to 9 of 18 INSERTs in trials).
    assert len(acknowledged) < len(results), "no commit conflicted; the test proves nothing"
    for key, outcome in results.items():
        if key not in acknowledged:
            assert "(Aborted;" in outcome, outcome
            assert "nothing was committed, retrying is safe" in outcome, outcome
    # What was acknowledged is there, what was refused is not, and no file is orphaned.
    by_writer = query(cur, f"SELECT writer, n / 5 AS r FROM {schema}.contended GROUP BY writer, n / 5")
    assert sorted((row["writer"], row["r"]) for row in by_writer.to_pylist()) == sorted(acknowledged)
    table = catalog.load_table(f"{schema}.contended")
    assert len(table.snapshots()) == len(acknowledged)
    referenced = {f["file_path"].removeprefix("file://") for f in table.inspect.files().to_pylist()}
    assert set(data_files(server, schema, "contended")) == referenced


def test_nothing_is_acknowledged_while_another_process_reads_the_catalog(
    server, cur, catalog, schema
):
    cur.execute(f"CREATE TABLE {schema}.kept (a INT)")
    cur.execute(f"INSERT INTO {schema}.kept VALUES (1)")
    cur.execute(f"CREATE SCHEMA {schema}_empty")
    files = data_files(server, schema, "kept")

    with catalog_transaction(server, "read"):
        refused(
            server,
            f"INSERT INTO {schema}.kept VALUES (2), (3)",
            f"DROP TABLE {schema}.kept",
            f"CREATE SCHEMA {schema}_new",
            f"DROP SCHEMA {schema}_empty",
        )
        # Alone, so that its commit is the one that waits for the lock and is lost.
        refused(server, f"CREATE TABLE {schema}.created (a INT)")

    # Nothing happened, for Floe and for another client, and nothing was left behind:
    # not the refused INSERT's data files, not the lost table's metadata file. (Run at
    # once, a statement may fail before its commit, on a lock held by another's commit:
    # then iceberg-catalog-sql leaves the metadata file it staged, unreferenced.)
    assert_unchanged(server, cur, catalog, schema, files)
    assert metadata_files(server, schema, "created") == []
    names = {ns[0] for ns in catalog.list_namespaces()}
    assert f"{schema}_new" not in names
    assert f"{schema}_empty" in names
    assert_works_again(cur, schema)


def test_nothing_is_acknowledged_while_another_process_writes_the_catalog(
    server, cur, catalog, schema
):
    cur.execute(f"CREATE TABLE {schema}.kept (a INT)")
    cur.execute(f"INSERT INTO {schema}.kept VALUES (1)")
    files = data_files(server, schema, "kept")

    with catalog_transaction(server, "immediate"):
        refused(
            server,
            f"INSERT INTO {schema}.kept VALUES (2), (3)",
            f"CREATE TABLE {schema}.created (a INT)",
        )

    # iceberg-catalog-sql leaves the metadata file it staged before its failed UPDATE
    # (unreferenced); the data files of the refused INSERT are gone.
    assert_unchanged(server, cur, catalog, schema, files)
    assert_works_again(cur, schema)


def test_a_catalog_locked_for_reading_is_unavailable(server, cur, schema):
    cur.execute(f"CREATE TABLE {schema}.unreadable (a INT)")
    with catalog_transaction(server, "exclusive"):
        with pytest.raises(adbc_driver_manager.Error) as err:
            cur.execute(f"SELECT * FROM {schema}.unreadable")
    assert "(Unavailable;" in str(err.value), str(err.value)
    assert "catalog database is busy" in str(err.value), str(err.value)


def assert_unchanged(server, cur, catalog, schema, files):
    assert query(cur, f"SELECT a FROM {schema}.kept").to_pylist() == [{"a": 1}]
    assert len(catalog.load_table(f"{schema}.kept").snapshots()) == 1
    assert data_files(server, schema, "kept") == files
    assert not catalog.table_exists(f"{schema}.created")


def assert_works_again(cur, schema):
    """Once the lock is gone, the same statements work."""
    cur.execute(f"INSERT INTO {schema}.kept VALUES (2), (3)")
    assert cur.fetch_arrow_table().to_pylist() == [{"count": 2}]
    assert query(cur, f"SELECT count(*) AS n FROM {schema}.kept").to_pylist() == [{"n": 3}]


def test_a_lock_released_during_the_statement_lets_it_commit(server, cur, catalog, schema):
    cur.execute(f"CREATE TABLE {schema}.waits (a INT)")
    with catalog_transaction(server) as lock:
        release = threading.Timer(1.0, lambda: lock.execute("COMMIT"))
        release.start()
        try:
            cur.execute(f"INSERT INTO {schema}.waits VALUES (1), (2)")
            assert cur.fetch_arrow_table().to_pylist() == [{"count": 2}]
        finally:
            release.join()
    assert query(cur, f"SELECT count(*) AS n FROM {schema}.waits").to_pylist() == [{"n": 2}]
    assert len(catalog.load_table(f"{schema}.waits").snapshots()) == 1
