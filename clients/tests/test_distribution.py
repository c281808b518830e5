"""Distribution, proven from the executors' side: a coordinator without local
executors plus two `floe executor` processes; both executors read files, and every
data file of the table is read exactly once."""

import os
import re
import time
from collections import Counter
from contextlib import contextmanager

import adbc_driver_manager

import pyarrow as pa
import pytest

from conftest import Process, Server, query

FILES = 8
ROWS_PER_FILE = 1000
READ = re.compile(r"reading data file .*file=(\S+)")


@pytest.fixture()
def cluster(tmp_path):
    server = Server(tmp_path / "data", ["--local-executors", "0", "--local-query-max-bytes", "0", "--target-partitions", "4"])
    work_dirs = [tmp_path / f"work{i}" for i in range(2)]
    executors = [
        server.start_executor(tmp_path / f"executor{i}.log", env={"RUST_LOG": "info,floe::scan=debug"},
                              work_dir=work_dirs[i])
        for i in range(2)
    ]
    yield server, executors
    for executor in executors:
        assert executor.stop() == 0
    server.stop()
    # Executors remove their jobs' shuffle and result files when they stop.
    assert [list(d.iterdir()) for d in work_dirs] == [[], []]


def events_table(server, namespace, tags):
    """`namespace.events`, written by pyiceberg as FILES files of ROWS_PER_FILE rows; file
    `f` has tag `t{f % tags}`."""
    catalog = server.pyiceberg()
    catalog.create_namespace(namespace)
    table = catalog.create_table(
        f"{namespace}.events",
        schema=pa.schema([pa.field("id", pa.int64()), pa.field("tag", pa.string())]),
    )
    for f in range(FILES):
        ids = range(f * ROWS_PER_FILE, (f + 1) * ROWS_PER_FILE)
        table.append(pa.table({"id": pa.array(ids, pa.int64()), "tag": [f"t{f % tags}"] * ROWS_PER_FILE}))
    return table


def files_read(executor: Process) -> list[str]:
    return READ.findall(executor.output())


def test_two_executors_share_the_files_and_read_each_once(cluster):
    server, executors = cluster
    table = events_table(server, "dist", tags=FILES)
    table_files = sorted(table.inspect.files()["file_path"].to_pylist())
    assert len(table_files) == FILES

    with server.connect() as conn, conn.cursor() as cur:
        result = query(cur, "SELECT count(*) AS n, sum(id) AS s FROM dist.events").to_pylist()
    total = FILES * ROWS_PER_FILE
    assert result == [{"n": total, "s": total * (total - 1) // 2}]

    per_executor = [files_read(e) for e in executors]
    assert all(per_executor), f"each executor reads files: {[len(r) for r in per_executor]}"
    reads = Counter(f for files in per_executor for f in files)
    assert sorted(reads) == table_files
    assert set(reads.values()) == {1}, "every file read exactly once"

    # A filter is pushed into Iceberg planning: files whose id range cannot match are
    # never read (ids below 1000 are all in the first file).
    with server.connect() as conn, conn.cursor() as cur:
        result = query(cur, "SELECT count(*) AS n FROM dist.events WHERE id < 1000 AND tag <> 'x'")
    assert result.to_pylist() == [{"n": ROWS_PER_FILE}]
    after = Counter(f for e in executors for f in files_read(e))
    assert sum(after.values()) - sum(reads.values()) == 1


def test_a_grouped_subquery_used_twice_is_computed_once(cluster):
    """TPC-H q15's shape: a WITH query joined and compared to its own maximum. Its rows
    are computed by one job, so each file is read once, not once per use."""
    server, executors = cluster
    events_table(server, "twice", tags=3)
    sql = (
        "WITH per_tag AS (SELECT tag, count(*) AS n, sum(id) AS s FROM twice.events GROUP BY tag) "
        "SELECT a.tag, a.s FROM per_tag a JOIN per_tag b ON a.tag = b.tag "
        "WHERE a.n = (SELECT max(n) FROM per_tag) ORDER BY a.tag"
    )
    with server.connect() as conn, conn.cursor() as cur:
        result = query(cur, sql).to_pylist()
    # Files 0, 3, 6 have tag t0; 1, 4, 7 t1 (3 files each, the most); 2, 5 t2.
    per_file = [sum(range(f * ROWS_PER_FILE, (f + 1) * ROWS_PER_FILE)) for f in range(FILES)]
    assert result == [{"tag": "t0", "s": per_file[0] + per_file[3] + per_file[6]},
                      {"tag": "t1", "s": per_file[1] + per_file[4] + per_file[7]}]
    reads = Counter(f for e in executors for f in files_read(e))
    assert len(reads) == FILES
    assert set(reads.values()) == {1}, "every file read exactly once"

    # A volatile subquery is computed where it is used, as written.
    with server.connect() as conn, conn.cursor() as cur:
        volatile = ("WITH r AS (SELECT tag, max(id) + 0 * random() AS m FROM twice.events GROUP BY tag) "
                    "SELECT count(*) AS n FROM r a JOIN r b ON a.tag = b.tag")
        assert query(cur, volatile).to_pylist() == [{"n": 3}]
    again = Counter(f for e in executors for f in files_read(e))
    assert set((again - reads).values()) == {2}


def test_a_scan_of_many_files_reaches_executors_group_by_group(cluster, tmp_path):
    """Past 1,000 files a plan no longer lists them: each task fetches its own group
    from the coordinator. Every file is still read exactly once, by both executors."""
    import pyarrow.parquet as pq

    files = 1200
    paths = []
    for f in range(files):
        path = tmp_path / "loose" / f"part-{f:05d}.parquet"
        path.parent.mkdir(exist_ok=True)
        pq.write_table(pa.table({"id": pa.array([f * 2, f * 2 + 1], pa.int64())}), path)
        paths.append(f"file://{path}")
    catalog = cluster[0].pyiceberg()
    catalog.create_namespace("many")
    table = catalog.create_table("many.files", schema=pa.schema([pa.field("id", pa.int64())]))
    table.add_files(paths)

    server, executors = cluster
    with server.connect() as conn, conn.cursor() as cur:
        result = query(cur, "SELECT count(*) AS n, sum(id) AS s FROM many.files").to_pylist()
    assert result == [{"n": 2 * files, "s": (2 * files) * (2 * files - 1) // 2}]
    per_executor = [files_read(e) for e in executors]
    assert all(per_executor), f"each executor reads files: {[len(r) for r in per_executor]}"
    reads = Counter(f for files in per_executor for f in files)
    assert sorted(reads) == sorted(paths)
    assert set(reads.values()) == {1}, "every file read exactly once"


@pytest.mark.parametrize("mode, fanout", [("hash", "false"), ("hash", "true"), ("range", "false"),
                                          ("none", "false")])
def test_a_partitioned_insert_writes_one_file_per_partition_value(cluster, mode, fanout):
    """Rows are hash-distributed on their partition values before the write (`hash`, the
    default, and `range`) and sorted by them in each task, which keeps one file open at a
    time (unless fanout is asked for); so each value is written by one task, whatever the
    number of tasks and source files. `none` writes rows where they are."""
    server, _ = cluster
    events_table(server, "source", tags=FILES)  # 8 files, ids 0..7999
    with server.connect() as conn, conn.cursor() as cur:
        cur.execute("CREATE TABLE source.daily (id BIGINT, day DATE, bucketed BIGINT) "
                    "PARTITIONED BY (day(day), bucket(4, bucketed)) "
                    f"TBLPROPERTIES ('write.distribution-mode' = '{mode}', "
                    f"'write.spark.fanout.enabled' = '{fanout}')")
        cur.execute("INSERT INTO source.daily SELECT id, DATE '2024-01-01' + CAST(id % 10 AS INT), "
                    "id % 3 FROM source.events")
        got = query(cur, "SELECT count(*) AS n, count(DISTINCT day) AS days FROM source.daily").to_pylist()
        plan = "\n".join(query(cur, "EXPLAIN INSERT INTO source.daily SELECT id, DATE '2024-01-01', id + 1 "
                                    "FROM source.events")["plan"].to_pylist())
    assert got == [{"n": 8000, "days": 10}]
    table = server.pyiceberg().load_table("source.daily")
    files = table.inspect.files().to_pylist()
    partitions = {(f["partition"]["day_day"], f["partition"]["bucketed_bucket"]) for f in files}
    assert len(partitions) >= 10
    assert sum(r["record_count"] for r in files) == 8000
    if mode == "none":
        assert len(files) > len(partitions)
    else:
        assert len(files) == len(partitions), f"{len(files)} files for {len(partitions)} partition values"
    assert ("SortExec" in plan) == (mode != "none" and fanout == "false"), plan


def test_a_delete_reads_and_rewrites_only_the_files_that_hold_its_rows(cluster):
    server, executors = cluster
    table = events_table(server, "del", tags=FILES)
    before = set(table.inspect.files()["file_path"].to_pylist())
    [task] = table.scan(row_filter="id >= 3000 and id < 4000").plan_files()
    target = task.file.file_path
    reads_before = Counter(path for e in executors for path in files_read(e))
    with server.connect() as conn, conn.cursor() as cur:
        cur.execute("DELETE FROM del.events WHERE id >= 3000 AND id < 3500")
        assert cur.fetchall() == [(500,)]
        # Counted, then rewritten: the one file whose bounds overlap, by the executors.
        reads = Counter(path for e in executors for path in files_read(e)) - reads_before
        assert set(reads) == {target}
        got = query(cur, "SELECT count(*) AS n, min(id) AS lo FROM del.events WHERE id >= 3000").to_pylist()
    assert got == [{"n": 4500, "lo": 3500}]
    after = set(server.pyiceberg().load_table("del.events").inspect.files()["file_path"].to_pylist())
    assert before - after == {target} and len(after - before) == 1


@pytest.mark.parametrize("mode", ["copy-on-write", "merge-on-read"])
def test_a_merge_runs_on_the_executors(cluster, mode):
    server, executors = cluster
    table = events_table(server, "merge", tags=FILES)
    data_before = set(table.inspect.files()["file_path"].to_pylist())
    reads_before = Counter(path for e in executors for path in files_read(e))
    with server.connect() as conn, conn.cursor() as cur:
        cur.execute(f"ALTER TABLE merge.events SET TBLPROPERTIES ('write.merge.mode' = '{mode}')")
        cur.execute("CREATE TABLE merge.changes AS SELECT id * 2 AS id, 'changed' AS tag "
                    "FROM generate_series(3990, 4009) AS g(id)")
        cur.execute("MERGE INTO merge.events t USING merge.changes c ON t.id = c.id "
                    "WHEN MATCHED THEN UPDATE SET tag = c.tag "
                    "WHEN NOT MATCHED THEN INSERT VALUES (c.id, c.tag)")
        assert cur.fetchall() == [(20,)]  # ids 7980..8018: 10 in the table, 10 new
        got = query(cur, "SELECT count(*) AS n, count(*) FILTER (WHERE tag = 'changed') AS changed "
                         "FROM merge.events").to_pylist()
    assert got == [{"n": 8010, "changed": 20}]
    reads = Counter(path for e in executors for path in files_read(e)) - reads_before
    assert all(files_read(e) for e in executors) and len(reads) >= FILES
    after = server.pyiceberg().load_table("merge.events")
    data_after = set(after.inspect.data_files()["file_path"].to_pylist())
    deletes = after.inspect.delete_files().to_pylist()
    if mode == "merge-on-read":
        # The 10 matched rows are all in the file of ids 7000..7999: one delete file.
        assert data_before < data_after and [d["record_count"] for d in deletes] == [10]
    else:
        assert deletes == [] and data_before - data_after
    assert len(after.scan().to_arrow()) == 8010


def test_compaction_runs_on_the_executors(cluster):
    server, executors = cluster
    table = events_table(server, "compact", tags=FILES)
    files = set(table.inspect.files()["file_path"].to_pylist())
    reads_before = Counter(path for e in executors for path in files_read(e))
    with server.connect() as conn, conn.cursor() as cur:
        cur.execute("CALL floe.system.rewrite_data_files('compact.events')")
        assert cur.fetchall() == [(FILES, 1, sum(table.inspect.files()["file_size_in_bytes"].to_pylist()))]
        got = query(cur, "SELECT count(*) AS n, sum(id) AS s FROM compact.events").to_pylist()
    total = FILES * ROWS_PER_FILE
    assert got == [{"n": total, "s": total * (total - 1) // 2}]
    reads = Counter(path for e in executors for path in files_read(e)) - reads_before
    assert files <= set(reads)


def test_a_shuffle_that_no_row_reaches_gives_empty_answers(cluster):
    """Every task of the stage writes no shuffle file: the next stage reads nothing. (The
    filter cannot prune a file by its bounds, so every file is read.)"""
    server, _ = cluster
    events_table(server, "empty_shuffle", tags=3)
    with server.connect() as conn, conn.cursor() as cur:
        none = "length(tag) > 100"
        assert query(cur, f"SELECT tag, count(*) AS n FROM empty_shuffle.events WHERE {none} "
                          "GROUP BY tag").num_rows == 0
        assert query(cur, f"SELECT count(DISTINCT tag) AS n FROM empty_shuffle.events "
                          f"WHERE {none}").to_pylist() == [{"n": 0}]
        explained = query(cur, f"EXPLAIN ANALYZE SELECT tag, count(*) AS n FROM empty_shuffle.events "
                               f"WHERE {none} GROUP BY tag")
        assert any(re.search(r"\bfiles=8\b", plan) for plan in explained["plan"].to_pylist()), \
            "the scan read every file"
        # Only some output partitions get rows: the others are simply absent.
        assert query(cur, "SELECT tag, count(*) AS n FROM empty_shuffle.events WHERE id < 10 "
                          "GROUP BY tag").to_pylist() == [{"tag": "t0", "n": 10}]


def test_results_stream_from_remote_executors(cluster):
    server, _ = cluster
    with server.connect() as conn, conn.cursor() as cur:
        cur.execute("CREATE TABLE default.wide (id BIGINT, payload STRING)")
        for chunk in range(4):
            values = ", ".join(f"({chunk * 500 + i}, 'row {chunk * 500 + i}')" for i in range(500))
            cur.execute(f"INSERT INTO default.wide VALUES {values}")
        cur.execute("SELECT * FROM default.wide")
        batches = list(cur.fetch_record_batch())
    rows = sum(b.num_rows for b in batches)
    assert rows == 2000
    ids = sorted(i for b in batches for i in b.column(0).to_pylist())
    assert ids == list(range(2000))


def test_explain_analyze_shows_each_stage_where_it_ran_and_what_it_read(cluster):
    server, executors = cluster
    events_table(server, "explained", tags=3)

    with server.connect() as conn, conn.cursor() as cur:
        answer = query(cur, "EXPLAIN ANALYZE SELECT tag, count(*) AS n FROM explained.events GROUP BY tag")
    rows = dict(zip(answer["plan_type"].to_pylist(), answer["plan"].to_pylist()))
    titles = list(rows)
    assert titles[0] == "Job" and titles[1:] == [f"Stage {i}" for i in range(1, len(titles))], titles
    assert len(titles) >= 3, "a grouped count needs a shuffle: at least two stages"

    [scan_stage] = [text for text in rows.values() if "IcebergScanExec" in text]
    scan_line = next(line for line in scan_stage.splitlines() if "IcebergScanExec" in line)
    # The metrics are the tasks' own, summed over the stage: every file and row read once.
    assert re.search(r"\bfiles=8\b", scan_line), scan_line
    assert re.search(r"\boutput_rows=8\.00 K\b", scan_line), scan_line
    assert "bytes_planned=" in scan_line and "time_elapsed_scanning=" in scan_line, scan_line
    # Both executor processes ran tasks of the scan stage, and the stage says so.
    header = scan_stage.splitlines()[0]
    executor_ids = re.findall(r"on executor (\w+)", header)
    assert len(set(executor_ids)) == 2, header
    # The final stage reads the scan stage's output and counts one row per tag.
    final = rows[titles[-1]]
    assert "reads stage" in final.splitlines()[0]
    # Each stage says when it was scheduled and when its last task was done, in ms since
    # the job started: the final one only once the scan stage was done.
    spans = {title: tuple(map(int, re.search(r"from \+(\d+) to \+(\d+) ms", text.splitlines()[0]).groups()))
             for title, text in rows.items() if title != "Job"}
    assert all(start <= end for start, end in spans.values()), spans
    scan_title = next(title for title, text in rows.items() if text == scan_stage)
    assert spans[titles[-1]][0] >= spans[scan_title][1], spans
    assert re.search(r"output_rows=3\b", final), final


def test_without_executors_a_statement_fails_unavailable_then_recovers(tmp_path):
    """Ballista keeps a job waiting for executors forever; Floe fails it after
    `executor_wait_secs` and runs the next statement once an executor is back."""
    server = Server(tmp_path / "data", ["--local-executors", "0", "--local-query-max-bytes", "0", "--executor-wait-secs", "2"])
    try:
        with server.connect() as conn, conn.cursor() as cur:
            cur.execute("CREATE TABLE waiting (a INT)")
            started = time.monotonic()
            with pytest.raises(adbc_driver_manager.Error, match=r"no executor.*\(Unavailable;"):
                cur.execute("INSERT INTO waiting VALUES (1)")
            assert time.monotonic() - started < 15
            executor = server.start_executor(tmp_path / "executor.log")
            try:
                cur.execute("INSERT INTO waiting VALUES (2)")
                assert query(cur, "SELECT a FROM waiting").to_pylist() == [{"a": 2}]
            finally:
                executor.stop()
    finally:
        server.stop()


def test_small_queries_answer_on_the_coordinator_even_without_executors(tmp_path):
    """A query that reads little and joins nothing (a point lookup, an empty result,
    `count(*)` from the manifests) runs on the coordinator without a job; a join of the
    same small table is a job and waits for an executor."""
    server = Server(tmp_path / "data", ["--local-executors", "0", "--executor-wait-secs", "2"])
    try:
        catalog = server.pyiceberg()
        catalog.create_namespace("few")
        table = catalog.create_table("few.people", schema=pa.schema(
            [pa.field("id", pa.int64()), pa.field("name", pa.string())]))
        table.append(pa.table({"id": [1, 2, 3], "name": ["ann", "o'hara", "cy"]}))
        with server.connect() as conn, conn.cursor() as cur:
            assert query(cur, "SELECT id FROM few.people WHERE name = 'o''hara'").to_pylist() == [{"id": 2}]
            empty = query(cur, "SELECT name FROM few.people WHERE id = -1")
            assert empty.num_rows == 0 and empty.column_names == ["name"]
            assert query(cur, "SELECT count(*) AS n FROM few.people").to_pylist() == [{"n": 3}]
            started = time.monotonic()
            with pytest.raises(adbc_driver_manager.Error, match=r"no executor.*\(Unavailable;"):
                query(cur, "SELECT count(*) FROM few.people a JOIN few.people b ON a.id = b.id")
            assert time.monotonic() - started < 15
    finally:
        server.stop()


def test_what_counts_as_small_is_the_bytes_of_the_columns_read(tmp_path):
    """`local_query_max_bytes` weighs the stored bytes of the columns a query reads (from
    the manifests), not its files': a narrow query of a table with one wide column runs
    on the coordinator; reading the wide column needs a job."""
    server = Server(tmp_path / "data", ["--local-executors", "0", "--executor-wait-secs", "2",
                                        "--local-query-max-bytes", "1000000"])
    try:
        table = server.pyiceberg().create_table("default.wide", schema=pa.schema(
            [pa.field("id", pa.int64()), pa.field("blob", pa.string())]))
        rows = 100_000
        table.append(pa.table({"id": list(range(rows)), "blob": [os.urandom(32).hex() for _ in range(rows)]}))
        [stored] = table.inspect.files().to_pylist()
        assert stored["file_size_in_bytes"] > 2_000_000 and stored["column_sizes"]
        with server.connect() as conn, conn.cursor() as cur:
            assert query(cur, "SELECT count(*) AS n FROM wide WHERE id % 2 = 0").to_pylist() == [{"n": rows // 2}]
            with pytest.raises(adbc_driver_manager.Error, match=r"no executor.*\(Unavailable;"):
                query(cur, "SELECT max(blob) FROM wide")
    finally:
        server.stop()


def shuffle_files(work_dir):
    """The hash-partitioned stage outputs under an executor's work directory, as
    (file, rows per batch)."""
    import pyarrow.ipc as ipc

    files = []
    for path in sorted(work_dir.rglob("data-*.arrow")):
        with ipc.open_stream(path) as reader:
            files.append((path, [batch.num_rows for batch in reader]))
    return files


def test_shuffle_files_are_full_batches_compressed_as_each_executor_is_told(tmp_path):
    """A shuffle into 8 partitions: each task's file per partition holds batches of the
    session's batch size (8192 rows) but its last; the executor left at its default
    (lz4) writes files much smaller per row than the one started with
    `--shuffle-compression none`; the join's answer is the same whoever wrote what."""
    server = Server(tmp_path / "data", ["--local-executors", "0", "--local-query-max-bytes", "0",
                                        "--target-partitions", "8"])
    work_dirs = {"none": tmp_path / "plain", "lz4": tmp_path / "lz4"}
    executors = [
        server.start_executor(tmp_path / "plain.log", work_dir=work_dirs["none"],
                              env={"FLOE_SHUFFLE_COMPRESSION": "none"}),
        server.start_executor(tmp_path / "lz4.log", work_dir=work_dirs["lz4"]),
    ]
    try:
        with server.connect() as conn, conn.cursor() as cur:
            cur.execute("CREATE TABLE t (id BIGINT, payload STRING)")
            for start in range(0, 600000, 150000):  # four files: four scan tasks a side
                cur.execute(f"INSERT INTO t SELECT value, 'a payload that repeats ' || (value % 7) "
                            f"FROM generate_series({start + 1}, {start + 150000})")
            # Too big to broadcast: both sides are hash-shuffled on id.
            answer = query(cur, "SELECT count(*) AS n, sum(length(a.payload) + length(b.payload)) AS l "
                                "FROM t a JOIN t b ON a.id = b.id").to_pylist()
        assert answer == [{"n": 600000, "l": 2 * 600000 * len("a payload that repeats 0")}]
        written = {kind: shuffle_files(d) for kind, d in work_dirs.items()}
        assert all(written.values()), "both executors wrote shuffle files"
        for files in written.values():
            for path, batches in files:
                assert all(rows == 8192 for rows in batches[:-1]), (path, batches)
                assert 0 < batches[-1] <= 8192, (path, batches)
        full = [rows for files in written.values() for _, batches in files for rows in batches if rows == 8192]
        assert len(full) >= 20, "the shuffle has full batches to check"

        def bytes_per_row(files):
            return sum(p.stat().st_size for p, _ in files) / sum(sum(b) for _, b in files)

        # 36 and 11.5 bytes a row when measured.
        assert bytes_per_row(written["none"]) > 2 * bytes_per_row(written["lz4"]), \
            (bytes_per_row(written["none"]), bytes_per_row(written["lz4"]))
    finally:
        for executor in executors:
            executor.stop()
        server.stop()


def test_a_task_gathers_a_bounded_amount_of_wide_rows_before_writing_them(tmp_path):
    """Rows of 4 KB shuffled into 4 partitions: a task gathering full batches (8192 rows,
    32 MB a partition) would hold 128 MB; it holds at most 32 MB in all (plus the batch
    it is routing), writing the partition with the most rows whenever it is over, so no
    batch it writes is a full one (3,800 to 6,200 rows when measured; all 8192 but each
    file's last without the bound)."""
    with one_executor(tmp_path, partitions=4) as server, server.connect() as conn, conn.cursor() as cur:
        cur.execute("CREATE TABLE wide (id BIGINT, s STRING)")
        cur.execute("INSERT INTO wide SELECT value, repeat(CAST(value % 10 AS VARCHAR), 4000) "
                    "FROM generate_series(1, 40000)")
        # Every (s, id) is its own group: the partial aggregate passes all rows on.
        answer = query(cur, "SELECT count(*) AS n FROM (SELECT s, id, count(*) AS c FROM wide "
                            "GROUP BY s, id) WHERE c = 1").to_pylist()
        files = shuffle_files(tmp_path / "work")  # while the executor keeps them
    assert answer == [{"n": 40000}]
    batches = [rows for _, file in files for rows in file]
    assert sum(batches) == 40000, "every row was shuffled once"
    assert max(batches) < 8192, batches


def test_an_aggregates_sliced_output_is_shuffled_in_full_batches(tmp_path):
    """A partial aggregate of 500,000 groups emits its rows as slices of one batch, and
    each slice reports the memory of that whole batch. Measured by what they span (16
    bytes a row), the 8 partitions' rows fit the task's bound many times over and go out
    in full batches; measured by what they report, the task thought itself over the
    bound and wrote the fullest partition early (batches of 7,205 and 8,118 rows among
    the full ones when measured)."""
    with one_executor(tmp_path, partitions=8) as server, server.connect() as conn, conn.cursor() as cur:
        cur.execute("CREATE TABLE keyed (k BIGINT)")
        # Each key four times in a row: the partial aggregate keeps aggregating.
        cur.execute("INSERT INTO keyed SELECT value / 4 FROM generate_series(0, 1999999)")
        answer = query(cur, "SELECT count(*) AS n FROM (SELECT k, count(*) AS c FROM keyed "
                            "GROUP BY k) WHERE c = 4").to_pylist()
        files = shuffle_files(tmp_path / "work")  # while the executor keeps them
    assert answer == [{"n": 500000}]
    assert sum(sum(batches) for _, batches in files) == 500000, "each group shuffled once"
    for path, batches in files:
        assert all(rows == 8192 for rows in batches[:-1]), (path, batches)


@contextmanager
def one_executor(tmp_path, partitions):
    """A coordinator without in-process executors and one 1-slot `floe executor` whose
    work directory (stage outputs) is `tmp_path / "work"`."""
    server = Server(tmp_path / "data", ["--local-executors", "0", "--local-query-max-bytes", "0",
                                        "--target-partitions", str(partitions)])
    executor = server.start_executor(tmp_path / "executor.log", work_dir=tmp_path / "work", slots=1)
    try:
        yield server
    finally:
        executor.stop()
        server.stop()
