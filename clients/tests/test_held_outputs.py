"""Hash-partitioned stage outputs of `floe serve`'s in-process executors stay in memory
(`shuffle_memory_mb`) for the tasks of the same process to read: the answers are those
read from files, a budget too small for them sends the rest to files, and the shuffles
are not written to disk."""

import subprocess
import sys
import threading
import time
from pathlib import Path

import pyarrow as pa
import pytest

from conftest import Server, query

ROWS = 400_000
FILES = 4
# Each hash-shuffles its rows or broadcasts one side of its join (the join), and answers
# in a few rows: the job's result is a file either way.
QUERIES = [
    "SELECT count(*) AS groups, sum(n) AS n, max(m) AS m FROM "
    "(SELECT k % 50000 AS g, count(*) AS n, max(s) AS m FROM t GROUP BY 1)",
    "SELECT s, count(DISTINCT v) AS d FROM t GROUP BY s ORDER BY d DESC, s LIMIT 20",
    "SELECT count(*) AS n, sum(a.v * b.v) AS p FROM t a JOIN t b ON a.k = b.k + 1",
]


def load(server: Server):
    t = server.pyiceberg().create_table("default.t", schema=pa.schema([
        pa.field("k", pa.int64()), pa.field("v", pa.int64()), pa.field("s", pa.string())]))
    per_file = ROWS // FILES
    for f in range(FILES):
        k = pa.array(range(f * per_file, (f + 1) * per_file), pa.int64())
        t.append(pa.table({
            "k": k,
            "v": pa.array([(x * 7919) % 1001 for x in k.to_pylist()], pa.int64()),
            "s": [f"s{x % 3000}" for x in k.to_pylist()],
        }))


def bytes_written(server: Server) -> int:
    io = open(f"/proc/{server.process.proc.pid}/io").read()
    return int(next(line for line in io.splitlines() if line.startswith("wchar:")).split()[1])


@pytest.fixture(scope="module")
def servers(tmp_path_factory):
    started = {}
    try:
        for name, args in [("held", []), ("files", ["--shuffle-memory-mb", "0"]),
                           ("tiny", ["--shuffle-memory-mb", "1"])]:
            server = Server(tmp_path_factory.mktemp(name) / "data",
                            ["--local-query-max-bytes", "0", "--target-partitions", "4", *args])
            started[name] = server
            load(server)
        yield started
    finally:
        for server in started.values():
            server.stop()


def run_all(server: Server):
    """The answers, and the bytes the server wrote while it computed them."""
    with server.connect() as conn, conn.cursor() as cur:
        query(cur, QUERIES[0])  # the table's metadata read and cached
        before = bytes_written(server)
        answers = [query(cur, sql) for sql in QUERIES]
        return answers, bytes_written(server) - before


def test_held_shuffles_give_the_answers_of_files_and_skip_the_disk(servers):
    held, held_written = run_all(servers["held"])
    files, files_written = run_all(servers["files"])
    tiny, _ = run_all(servers["tiny"])
    for sql, a, b, c in zip(QUERIES, held, files, tiny):
        assert a.num_rows > 0, sql
        assert a == b, sql
        assert c == b, sql
    assert files_written > 10_000_000, files_written
    assert held_written < files_written / 20, (held_written, files_written)


def test_two_clients_at_once_and_an_empty_shuffle(servers):
    files, _ = run_all(servers["files"])
    results, errors = {}, []

    def client(name):
        try:
            with servers["held"].connect() as conn, conn.cursor() as cur:
                results[name] = [[query(cur, sql) for sql in QUERIES] for _ in range(3)]
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=client, args=(name,)) for name in "ab"]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors
    for rounds in results.values():
        for answers in rounds:
            assert answers == files
    # Groups of no rows: no task has an output to hold, and none is read.
    empty = "SELECT k % 50000 AS g, count(*) AS n FROM t WHERE v < 0 GROUP BY 1"
    with servers["held"].connect() as conn, conn.cursor() as cur:
        assert query(cur, empty).num_rows == 0


def test_a_budget_too_small_for_a_shuffle_writes_it_to_files(servers):
    _, tiny_written = run_all(servers["tiny"])
    assert tiny_written > 5_000_000, tiny_written


def test_held_outputs_are_let_go_when_a_job_ends_or_its_client_goes(tmp_path):
    from test_cancel import _kill_a_client_mid_query  # noqa: PLC0415
    from test_operations import http_get, metrics_server, samples  # noqa: PLC0415

    server, base = metrics_server(tmp_path, "--local-query-max-bytes", "0", "--target-partitions", "4")

    def held_bytes():
        return samples(http_get(f"{base}/metrics")[1])["floe_shuffle_memory_bytes"]

    try:
        load(server)
        with server.connect() as conn, conn.cursor() as cur:
            for sql in QUERIES:
                query(cur, sql)
        assert held_bytes() == 0
        # A grouping of many keys over rows without end shuffles its rows as they come.
        endless = "SELECT count(*) AS n FROM (SELECT value % 1000003 AS g FROM range(100000000000) GROUP BY 1)"
        seen = []
        watcher = threading.Thread(target=lambda: [seen.append(held_bytes()) or time.sleep(0.1) for _ in range(15)])
        watcher.start()
        assert _kill_a_client_mid_query(server, endless)
        watcher.join()
        assert max(seen) > 0, seen
        assert held_bytes() == 0
    finally:
        server.stop()


def test_an_executor_of_another_process_joining_sends_held_outputs_to_files(tmp_path, servers):
    from test_operations import http_get, metrics_server, samples  # noqa: PLC0415

    server, base = metrics_server(tmp_path, "--local-query-max-bytes", "0", "--target-partitions", "4")
    executor = client = None

    def held_bytes():
        return samples(http_get(f"{base}/metrics")[1])["floe_shuffle_memory_bytes"]

    def wait_for(condition):
        deadline = time.time() + 30
        while not condition() and time.time() < deadline:
            time.sleep(0.1)
        return condition()

    try:
        load(server)
        # A job that holds shuffled rows while it runs, until its client goes.
        endless = "SELECT count(*) AS n FROM (SELECT value % 1000003 AS g FROM range(100000000000) GROUP BY 1)"
        reader = ("import sys; sys.path.insert(0, sys.argv[2]); from floe_flight import FloeFlightClient; "
                  f"FloeFlightClient(sys.argv[1]).query({endless!r})")
        client = subprocess.Popen([sys.executable, "-c", reader, server.uri, str(Path(__file__).parent.parent)])
        assert wait_for(lambda: held_bytes() > 0)
        executor = server.start_executor(tmp_path / "executor.log", slots=2)
        assert wait_for(lambda: "stage outputs go to files" in server.process.output())
        assert held_bytes() == 0
        client.kill()
        assert wait_for(lambda: "cancelled job" in server.process.output())
        # Both executors share the work now, through files; the answers stay right.
        files, _ = run_all(servers["files"])
        with server.connect() as conn, conn.cursor() as cur:
            for sql, expected in zip(QUERIES, files):
                assert query(cur, sql) == expected, sql
        assert held_bytes() == 0
    finally:
        if client is not None:
            client.kill()
        server.stop()
        if executor is not None:
            executor.stop()
