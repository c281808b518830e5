"""Merge-on-read DELETE (`write.delete.mode` = `merge-on-read`): the data files stay, one
position delete file per affected data file is added in one `delete` snapshot, and Floe,
pyiceberg and DuckDB read the table without the deleted rows."""

import re

import adbc_driver_manager
import pyarrow.parquet as pq
import pytest

from conftest import Server, query
from test_row_level import affected, fails_changing_nothing, history, make_events, pyiceberg_rows, rows

WROTE_DELETES = re.compile(r"wrote position delete file .*file=(\S+)")
MERGE_ON_READ = "TBLPROPERTIES ('write.delete.mode' = 'merge-on-read')"


@pytest.fixture()
def events(cur, schema):
    """`test_row_level`'s table, its deletes merge-on-read."""
    return make_events(cur, schema, MERGE_ON_READ)


def delete_files(catalog, table):
    """(path, referenced data file's partition, record count) of each live delete file."""
    found = catalog.load_table(table).inspect.delete_files().to_pylist()
    return [(f["file_path"], f["partition"], f["record_count"]) for f in found]


def data_files(catalog, table):
    return set(catalog.load_table(table).inspect.data_files()["file_path"].to_pylist())


def duckdb_ids(catalog, table, extension_dir):
    """The ids DuckDB's `iceberg` extension reads from the table's current metadata."""
    import duckdb
    from duckdb_extensions import import_extension

    con = duckdb.connect(config={"autoinstall_known_extensions": False,
                                 "autoload_known_extensions": False,
                                 "extension_directory": str(extension_dir)})
    for extension in ["avro", "iceberg"]:
        import_extension(extension, con=con)
        con.sql(f"LOAD {extension}")
    location = catalog.load_table(table).metadata_location
    return sorted(r[0] for r in con.sql(f"SELECT id FROM iceberg_scan('{location}')").fetchall())


def deleted_positions(path):
    table = pq.read_table(path)
    return list(zip(table["file_path"].to_pylist(), table["pos"].to_pylist()))


def test_delete_adds_position_delete_files_and_keeps_the_data_files(cur, catalog, events, tmp_path):
    data_before = data_files(catalog, events)
    assert affected(cur, f"DELETE FROM {events} WHERE id IN (2, 3, 10)") == 3
    expected = [1, 4, 5, 6]
    assert [r["id"] for r in rows(cur, events)] == expected
    assert [r["id"] for r in pyiceberg_rows(catalog, events)] == expected
    assert duckdb_ids(catalog, events, tmp_path / "duckdb") == expected
    assert data_files(catalog, events) == data_before
    assert history(catalog, events) == ["append", "append", "delete"]
    summary = catalog.load_table(events).current_snapshot().summary
    assert (summary["added-delete-files"], summary["added-position-deletes"]) == ("2", "3")
    assert summary["total-records"] == "7" and summary["total-position-deletes"] == "3"
    # One delete file per data file, in that file's partition, naming it and the
    # positions of its deleted rows in order.
    deletes = delete_files(catalog, events)
    assert sorted(d[1]["day"].isoformat() for d in deletes) == ["2024-01-01", "2024-01-01"]
    positions = sorted(p for path, _, _ in deletes for p in deleted_positions(path))
    by_file = {}
    for data_file, pos in positions:
        by_file.setdefault(data_file, []).append(pos)
    assert sorted(by_file.values()) == [[0], [1, 2]]
    assert set(by_file) <= data_before


def test_deletes_accumulate_and_count_only_live_rows(cur, catalog, events):
    assert affected(cur, f"DELETE FROM {events} WHERE id = 1") == 1
    assert affected(cur, f"DELETE FROM {events} WHERE day = DATE '2024-01-01'") == 3
    assert affected(cur, f"DELETE FROM {events} WHERE id = 1") == 0
    assert [r["id"] for r in rows(cur, events)] == [4, 5, 6]
    assert [r["id"] for r in pyiceberg_rows(catalog, events)] == [4, 5, 6]
    assert query(cur, f"SELECT count(*) AS n FROM {events}").to_pylist() == [{"n": 3}]
    assert history(catalog, events)[-2:] == ["delete", "delete"]


def test_delete_with_a_subquery_and_null_conditions(cur, catalog, events, schema):
    cur.execute(f"CREATE TABLE {schema}.gone AS SELECT * FROM (VALUES (4), (6)) AS t(id)")
    assert affected(cur, f"DELETE FROM {events} WHERE id IN (SELECT id FROM {schema}.gone)") == 2
    # name IS NULL for id 6, already gone; NULL conditions keep the row.
    assert affected(cur, f"DELETE FROM {events} AS e WHERE e.name <> 'a'") == 4
    assert [r["id"] for r in rows(cur, events)] == [1]
    assert [r["id"] for r in pyiceberg_rows(catalog, events)] == [1]


def test_filtered_reads_skip_pages_and_deleted_rows_together(cur, catalog, schema):
    """A file of many pages with position deletes: a filter's pages and the deleted rows
    are both left out, by Floe as by pyiceberg."""
    table = f"{schema}.pages"
    cur.execute(f"CREATE TABLE {table} TBLPROPERTIES ('write.delete.mode' = 'merge-on-read', "
                f"'write.parquet.page-row-limit' = '10') AS SELECT value AS id FROM generate_series(1, 300)")
    live = [i for i in range(1, 301) if i % 7 and not 95 <= i <= 125]
    assert affected(cur, f"DELETE FROM {table} WHERE id % 7 = 0 OR id BETWEEN 95 AND 125") == 300 - len(live)
    for low, high in [(1, 9), (90, 130), (200, 260), (295, 400)]:
        got = query(cur, f"SELECT id FROM {table} WHERE id BETWEEN {low} AND {high} ORDER BY id")
        expected = [i for i in live if low <= i <= high]
        assert got["id"].to_pylist() == expected, (low, high)
        assert sorted(r["id"] for r in pyiceberg_rows(catalog, table) if low <= r["id"] <= high) == expected


def test_update_and_compaction_after_merge_on_read_deletes(cur, catalog, events):
    assert affected(cur, f"DELETE FROM {events} WHERE id IN (2, 5)") == 2
    # UPDATE and MERGE rewrite the files (reading through the deletes).
    assert affected(cur, f"UPDATE {events} SET name = 'x' WHERE id = 1") == 1
    cur.execute(f"CALL floe.system.rewrite_data_files('{events}')")
    cur.fetchall()
    expected = [(1, "x"), (3, "c"), (4, "d"), (6, None), (10, "j")]
    assert [(r["id"], r["name"]) for r in rows(cur, events)] == expected
    assert [(r["id"], r["name"]) for r in pyiceberg_rows(catalog, events)] == expected
    # Compaction applied the deletes: no delete file is live any more.
    assert delete_files(catalog, events) == []


def test_unpartitioned_table_on_two_executors(tmp_path):
    server = Server(tmp_path / "data", ["--local-executors", "0", "--target-partitions", "4"])
    executors = [server.start_executor(tmp_path / f"executor{i}.log",
                                       env={"RUST_LOG": "info,floe::write=debug"}) for i in range(2)]
    try:
        with server.connect() as conn, conn.cursor() as cur:
            cur.execute("CREATE SCHEMA mor")
            cur.execute(f"CREATE TABLE mor.flat {MERGE_ON_READ} AS "
                        "SELECT value AS id, value % 7 AS k FROM generate_series(1, 20000)")
            cur.execute("INSERT INTO mor.flat SELECT value AS id, value % 7 AS k "
                        "FROM generate_series(20001, 40000)")
            written = data_files(server.pyiceberg(), "mor.flat")
            deleted = [i for i in range(1, 40001) if i % 7 == 3 or i > 39990]
            assert affected(cur, "DELETE FROM mor.flat WHERE k = 3 OR id > 39990") == len(deleted)
            remaining = sorted(set(range(1, 40001)) - set(deleted))
            got = query(cur, "SELECT count(*) AS n, sum(id) AS s FROM mor.flat").to_pylist()
            assert got == [{"n": len(remaining), "s": sum(remaining)}]
        scanned = server.pyiceberg().load_table("mor.flat").scan().to_arrow()
        assert sorted(scanned["id"].to_pylist()) == remaining
        # One delete file per data file, written by the executor processes.
        deletes = delete_files(server.pyiceberg(), "mor.flat")
        assert len(deletes) == len(written) > 1
        by_executor = [WROTE_DELETES.findall(e.output()) for e in executors]
        assert sorted(p for w in by_executor for p in w) == sorted(d[0] for d in deletes)
    finally:
        for executor in executors:
            executor.stop()
        server.stop()


def test_a_bad_delete_mode_is_refused(cur, schema):
    with pytest.raises(adbc_driver_manager.Error, match="write.delete.mode"):
        cur.execute(f"CREATE TABLE {schema}.bad (id INT) "
                    "TBLPROPERTIES ('write.delete.mode' = 'sometimes')")


def test_merge_on_read_update_deletes_the_old_rows_and_adds_the_new(cur, catalog, schema, tmp_path):
    import datetime

    events = make_events(cur, schema, "TBLPROPERTIES ('write.update.mode' = 'merge-on-read')")
    data_before = data_files(catalog, events)
    # The updated rows move to another partition; the rest stays where it is.
    assert affected(cur, f"UPDATE {events} SET name = upper(name), day = DATE '2024-01-05' "
                         f"WHERE id IN (2, 4)") == 2
    day = datetime.date.fromisoformat
    expected = [
        {"id": 1, "name": "a", "day": day("2024-01-01")},
        {"id": 2, "name": "B", "day": day("2024-01-05")},
        {"id": 3, "name": "c", "day": day("2024-01-01")},
        {"id": 4, "name": "D", "day": day("2024-01-05")},
        {"id": 5, "name": "e", "day": day("2024-01-02")},
        {"id": 6, "name": None, "day": day("2024-01-03")},
        {"id": 10, "name": "j", "day": day("2024-01-01")},
    ]
    assert rows(cur, events) == expected
    assert pyiceberg_rows(catalog, events) == expected
    assert duckdb_ids(catalog, events, tmp_path / "duckdb") == [1, 2, 3, 4, 5, 6, 10]
    # The old data files stay; one new file holds the updated rows; the old rows are
    # deleted by position, one delete file per data file they were in.
    data_after = data_files(catalog, events)
    assert data_before < data_after and len(data_after - data_before) == 1
    assert len(delete_files(catalog, events)) == 2
    assert history(catalog, events)[-1] == "overwrite"
    summary = catalog.load_table(events).current_snapshot().summary
    assert (summary["added-records"], summary["added-position-deletes"]) == ("2", "2")
    # A DELETE on the same table still rewrites its files (write.delete.mode unset).
    assert affected(cur, f"DELETE FROM {events} WHERE id = 1") == 1
    assert delete_files(catalog, events) != [] and history(catalog, events)[-1] == "overwrite"
    assert [r["id"] for r in pyiceberg_rows(catalog, events)] == [2, 3, 4, 5, 6, 10]


def test_a_delete_matching_nothing_commits_nothing(cur, catalog, events):
    snapshots = len(catalog.load_table(events).snapshots())
    assert affected(cur, f"DELETE FROM {events} WHERE id = 999 OR name = 'it''s'") == 0
    assert len(catalog.load_table(events).snapshots()) == snapshots
    assert delete_files(catalog, events) == []


def test_two_clients_deleting_at_the_same_time_both_commit(server, catalog, events):
    """Merge-on-read deletes of different rows by two clients at once: the one that loses
    the commit race commits again on top of the other (nothing it deleted is gone)."""
    import threading

    def delete(ids, outcome):
        try:
            with server.connect() as conn, conn.cursor() as cur:
                outcome.append(affected(cur, f"DELETE FROM {events} WHERE id IN {ids}"))
        except Exception as e:  # noqa: BLE001 - the test inspects it
            outcome.append(e)

    outcomes = [[], []]
    threads = [threading.Thread(target=delete, args=(ids, out))
               for ids, out in zip(["(1, 2)", "(3, 4, 10)"], outcomes)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert outcomes == [[2], [3]]
    assert [r["id"] for r in pyiceberg_rows(catalog, events)] == [5, 6]
    assert history(catalog, events)[-2:] == ["delete", "delete"]


def test_merge_on_read_merge_updates_deletes_and_inserts(cur, catalog, schema, tmp_path):
    """`write.merge.mode` = `merge-on-read`: the target rows a clause updates or deletes
    are deleted by position, updated and inserted rows go to new files; the source
    reading the target itself sees all of it."""
    import datetime

    events = make_events(cur, schema, "TBLPROPERTIES ('write.merge.mode' = 'merge-on-read')")
    data_before = data_files(catalog, events)
    changes = f"{schema}.changes"
    cur.execute(f"CREATE TABLE {changes} AS SELECT * FROM (VALUES (2, 'up'), (3, 'del'), (4, 'up'), "
                f"(7, 'new'), (8, 'new')) AS c(id, op)")
    merge = (f"MERGE INTO {events} t USING (SELECT c.id, c.op, e.day AS old_day FROM {changes} c "
             f"LEFT JOIN {events} e ON e.id = c.id) s ON t.id = s.id "
             f"WHEN MATCHED AND s.op = 'del' THEN DELETE "
             f"WHEN MATCHED THEN UPDATE SET name = concat(t.name, '!') "
             f"WHEN NOT MATCHED THEN INSERT (id, name, day) VALUES (s.id, s.op, DATE '2024-01-09')")
    assert affected(cur, merge) == 5
    day = datetime.date.fromisoformat
    expected = [
        {"id": 1, "name": "a", "day": day("2024-01-01")},
        {"id": 2, "name": "b!", "day": day("2024-01-01")},
        {"id": 4, "name": "d!", "day": day("2024-01-02")},
        {"id": 5, "name": "e", "day": day("2024-01-02")},
        {"id": 6, "name": None, "day": day("2024-01-03")},
        {"id": 7, "name": "new", "day": day("2024-01-09")},
        {"id": 8, "name": "new", "day": day("2024-01-09")},
        {"id": 10, "name": "j", "day": day("2024-01-01")},
    ]
    assert rows(cur, events) == expected
    assert pyiceberg_rows(catalog, events) == expected
    assert duckdb_ids(catalog, events, tmp_path / "duckdb") == [1, 2, 4, 5, 6, 7, 8, 10]
    # The old data files stay; delete files name the rows of 2 and 3 (one file) and 4.
    data_after = data_files(catalog, events)
    assert data_before < data_after
    deletes = delete_files(catalog, events)
    assert sorted(count for _, _, count in deletes) == [1, 2]
    assert history(catalog, events)[-1] == "overwrite"
    summary = catalog.load_table(events).current_snapshot().summary
    assert (summary["added-records"], summary["added-position-deletes"]) == ("4", "3")

    # Only deletes: a `delete` snapshot; only inserts: an `append` one, no delete file.
    assert affected(cur, f"MERGE INTO {events} t USING (SELECT 1 AS id) s ON t.id = s.id "
                         f"WHEN MATCHED THEN DELETE") == 1
    assert history(catalog, events)[-1] == "delete"
    deletes = len(delete_files(catalog, events))
    assert affected(cur, f"MERGE INTO {events} t USING (SELECT 99 AS id) s ON t.id = s.id "
                         f"WHEN MATCHED THEN DELETE WHEN NOT MATCHED THEN INSERT (id) VALUES (s.id)") == 1
    assert history(catalog, events)[-1] == "append" and len(delete_files(catalog, events)) == deletes
    assert [r["id"] for r in pyiceberg_rows(catalog, events)] == [2, 4, 5, 6, 7, 8, 10, 99]
    assert [r["id"] for r in rows(cur, events)] == [2, 4, 5, 6, 7, 8, 10, 99]


def test_merge_on_read_merge_refuses_a_row_matched_twice(cur, catalog, events, schema):
    cur.execute(f"ALTER TABLE {events} SET TBLPROPERTIES ('write.merge.mode' = 'merge-on-read')")
    snapshots = len(catalog.load_table(events).snapshots())
    with pytest.raises(adbc_driver_manager.Error, match="more than one source row"):
        cur.execute(f"MERGE INTO {events} t USING (SELECT 1 AS id UNION ALL SELECT 1) s ON t.id = s.id "
                    f"WHEN MATCHED THEN UPDATE SET name = 'x'")
    assert len(catalog.load_table(events).snapshots()) == snapshots and delete_files(catalog, events) == []


def test_a_merge_on_read_merge_failing_after_its_deletes_leaves_nothing(cur, catalog, events):
    """The delete files' job succeeds, the new rows' job fails: the write's files go,
    delete files too, and nothing is committed."""
    cur.execute(f"ALTER TABLE {events} SET TBLPROPERTIES ('write.merge.mode' = 'merge-on-read')")
    fails_changing_nothing(cur, catalog, events, "(?i)divide by zero",
                           sql=f"MERGE INTO {events} t USING (SELECT 1 AS id UNION ALL SELECT 2) s "
                               f"ON t.id = s.id WHEN MATCHED THEN UPDATE SET id = t.id / (t.id - 1)")
    assert delete_files(catalog, events) == []


def test_a_merge_on_read_merge_with_quoted_aliases_and_quotes_in_values(cur, catalog, events):
    cur.execute(f"ALTER TABLE {events} SET TBLPROPERTIES ('write.merge.mode' = 'merge-on-read')")
    assert affected(cur, f"""MERGE INTO {events} AS "T" USING (SELECT 2 AS id, 'it''s' AS "New Name") AS "S"
        ON "T".id = "S".id
        WHEN MATCHED THEN UPDATE SET name = "S"."New Name"
        WHEN NOT MATCHED THEN INSERT (id, name) VALUES ("S".id, 'x')""") == 1
    got = {r["id"]: r["name"] for r in rows(cur, events)}
    assert got[2] == "it's" and len(got) == 7
    assert {r["id"]: r["name"] for r in pyiceberg_rows(catalog, events)} == got
    assert [d[2] for d in delete_files(catalog, events)] == [1]


# A commit retried past its attempts against other commits: no conflict, only a race
# (`table::overwrite::OVERWRITE_ATTEMPTS`), possible on a slow machine.
LOST_RACES = "lost to concurrent commits"


def run_at_once(server, statements_of_each):
    """Runs each client's statements, the clients at the same time; returns how many of
    each statement succeeded and the failures' messages."""
    import collections
    import threading

    done, failures = collections.Counter(), []

    def client(statements):
        with server.connect() as conn, conn.cursor() as cur:
            for sql in statements:
                try:
                    cur.execute(sql)
                    cur.fetchall()
                    done[sql] += 1
                except adbc_driver_manager.Error as e:
                    failures.append(str(e))

    threads = [threading.Thread(target=client, args=(s,)) for s in statements_of_each]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    return done, failures


def test_concurrent_updates_of_one_row_never_duplicate_it(server, cur, schema):
    """Merge-on-read UPDATEs of the same row from four clients at once: each deletes the
    row's old version and adds a new one, so two that both committed left two versions
    (and lost an increment). One that finds its row deleted by a commit since it read
    the table fails `ABORTED` instead; updates of different rows of one file combine."""
    table = f"{schema}.counters"
    cur.execute(f"CREATE TABLE {table} (k BIGINT, v BIGINT) TBLPROPERTIES "
                "('write.update.mode' = 'merge-on-read')")
    cur.execute(f"INSERT INTO {table} VALUES (1, 0), (2, 0), (3, 0)")
    same_row = f"UPDATE {table} SET v = v + 1 WHERE k = 1"
    done, failures = run_at_once(server, [[same_row] * 6 for _ in range(4)])
    assert all("nothing was committed" in f and "(Aborted;" in f for f in failures), failures
    assert query(cur, f"SELECT k, v FROM {table} WHERE k = 1").to_pylist() == [{"k": 1, "v": done[same_row]}]
    # Different rows of the one data file do not conflict.
    own_rows = [[f"UPDATE {table} SET v = v + 1 WHERE k = {k}"] * 3 for k in (2, 3)]
    done, failures = run_at_once(server, own_rows)
    assert all(LOST_RACES in f for f in failures), failures
    assert query(cur, f"SELECT k, v FROM {table} WHERE k > 1 ORDER BY k").to_pylist() == [
        {"k": k, "v": done[statements[0]]} for k, statements in zip((2, 3), own_rows)]


def test_a_rewrite_never_brings_back_rows_deleted_concurrently(server, cur, schema):
    """Merge-on-read DELETEs of single rows while copy-on-write UPDATEs rewrite the same
    files: an UPDATE that read a file before a delete of its rows was committed would
    write those rows back (the delete file goes with the file it applied to); it fails
    `ABORTED` instead."""
    table = f"{schema}.mixed"
    cur.execute(f"CREATE TABLE {table} (k BIGINT, v BIGINT) TBLPROPERTIES "
                "('write.delete.mode' = 'merge-on-read', 'write.update.mode' = 'copy-on-write')")
    cur.execute(f"INSERT INTO {table} SELECT k, 0 FROM unnest(range(0, 40)) AS u(k)")
    deletes = [[f"DELETE FROM {table} WHERE k = {k}" for k in range(start, 40, 4)] for start in range(3)]
    rewrites = [f"UPDATE {table} SET v = v + 1 WHERE k >= 0"] * 8
    done, failures = run_at_once(server, deletes + [rewrites])
    assert all("nothing was committed" in f and "(Aborted;" in f for f in failures), failures
    deleted = {int(sql.rsplit(" ", 1)[1]) for sql in done if sql.startswith("DELETE")}
    rows = query(cur, f"SELECT k, v FROM {table} ORDER BY k").to_pylist()
    assert [r["k"] for r in rows] == [k for k in range(40) if k not in deleted]
    assert {r["v"] for r in rows} <= {done[rewrites[0]]}


@pytest.mark.parametrize("mode", ["copy-on-write", "merge-on-read"])
def test_concurrent_upserts_of_a_new_key_insert_it_once(server, cur, schema, mode):
    """MERGE upserts of the same new key from four clients at once: each finds no row and
    inserts one, so two that both committed left the key twice. Under serializable
    isolation (Iceberg's default `write.merge.isolation-level`) a MERGE fails `ABORTED`
    where a data file committed since it read the table may hold rows it would have
    matched."""
    table = f"{schema}.upserts"
    cur.execute(f"CREATE TABLE {table} (k BIGINT, v BIGINT) TBLPROPERTIES ('write.merge.mode' = '{mode}')")
    cur.execute(f"INSERT INTO {table} VALUES (0, 0)")
    upsert = (f"MERGE INTO {table} t USING (SELECT 7 AS k) s ON t.k = s.k "
              "WHEN MATCHED THEN UPDATE SET v = t.v + 1 WHEN NOT MATCHED THEN INSERT VALUES (s.k, 1)")
    done, failures = run_at_once(server, [[upsert] * 5 for _ in range(4)])
    assert all("nothing was committed" in f and "(Aborted;" in f for f in failures), failures
    assert query(cur, f"SELECT k, v FROM {table} WHERE k = 7").to_pylist() == [{"k": 7, "v": done[upsert]}]


def test_serializable_deletes_commit_beside_appends_they_cannot_match(server, cur, schema):
    """Serializable isolation checks concurrent appends against the statement's condition
    by the new files' column bounds: DELETEs of small keys all commit while rows of
    large keys are inserted. `snapshot` is accepted, anything else refused."""
    table = f"{schema}.stream"
    cur.execute(f"CREATE TABLE {table} (k BIGINT, v BIGINT)")
    cur.execute(f"INSERT INTO {table} SELECT k, 0 FROM unnest(range(0, 10)) AS u(k)")
    deletes = [f"DELETE FROM {table} WHERE k = {k}" for k in range(0, 10, 2)]
    inserts = [[f"INSERT INTO {table} VALUES ({1000 + 10 * client + i}, 1)" for i in range(6)]
               for client in range(2)]
    done, failures = run_at_once(server, [deletes] + inserts)
    assert all(LOST_RACES in f for f in failures), failures
    deleted = sum(done[sql] for sql in deletes)
    assert query(cur, f"SELECT count(*) AS n FROM {table} WHERE k < 10")["n"].to_pylist() == [10 - deleted]
    cur.execute(f"ALTER TABLE {table} SET TBLPROPERTIES ('write.delete.isolation-level' = 'snapshot')")
    with pytest.raises(adbc_driver_manager.ProgrammingError, match="serializable or snapshot"):
        cur.execute(f"ALTER TABLE {table} SET TBLPROPERTIES ('write.update.isolation-level' = 'strict')")
