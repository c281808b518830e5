"""Operating Floe (issue 10): metrics, health and readiness, the query log, running
statements and KILL, admission control, executor loss, crash-safe writes, many
clients at once. Real processes on loopback; the answers checked with pyiceberg."""

import json
import signal
import struct
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import adbc_driver_manager
import grpc
import pyarrow as pa
import pyarrow.flight as flight
import pytest
from adbc_driver_manager import StatementOptions

from conftest import Process, Server, free_port, query
from floe_flight import _command, _length_delimited

# Minutes of work, batch by batch: the window to act while it runs.
SLOW_QUERY = "SELECT sum(value) AS s FROM generate_series(1, 20000000000)"
# Runs on the coordinator, not as a job (src/sql/recursive.rs), and never ends.
ENDLESS_RECURSION = "WITH RECURSIVE r AS (SELECT 1 AS n UNION ALL SELECT n + 1 FROM r) SELECT count(*) AS c FROM r"


def http_get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def samples(text: str) -> dict[str, float]:
    """Prometheus text → {'name{labels}': value}."""
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            out[name] = float(value)
    return out


def metrics_server(tmp_path, *args, env=None):
    port = free_port()
    server = Server(tmp_path / "data", ["--metrics-addr", f"127.0.0.1:{port}", *args], env=env)
    return server, f"http://127.0.0.1:{port}"


def run_in_thread(target):
    outcome = {}

    def run():
        try:
            outcome["result"] = target()
        except Exception as e:  # noqa: BLE001 - the test inspects it
            outcome["error"] = e

    thread = threading.Thread(target=run)
    thread.start()
    return thread, outcome


def slow_query(server, sql=SLOW_QUERY):
    with server.connect() as conn, conn.cursor() as cur:
        return query(cur, sql).to_pylist()


def running_ids(server, kind="query"):
    with server.connect() as conn, conn.cursor() as cur:
        rows = query(cur, "SHOW STATEMENTS").to_pylist()
    return [row["id"] for row in rows if row["kind"] == kind and row["state"] == "running"]


def cpu_ticks(server, seconds):
    """CPU time (1/100 s ticks) the server process used in the next `seconds`."""
    stat = Path(f"/proc/{server.process.proc.pid}/stat")

    def used():
        return sum(int(x) for x in stat.read_text().split()[13:15])

    before = used()
    time.sleep(seconds)
    return used() - before


def wait_for(condition, timeout=60, what="condition"):
    deadline = time.time() + timeout
    while time.time() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"{what} not reached in {timeout}s")


def test_metrics_health_and_readiness_after_a_known_workload(tmp_path):
    server, base = metrics_server(tmp_path)
    try:
        with server.connect() as conn, conn.cursor() as cur:
            cur.execute("CREATE TABLE m (id BIGINT)")
            cur.execute("INSERT INTO m VALUES (1), (2), (3)")
            assert query(cur, "SELECT * FROM m").num_rows == 3
            assert query(cur, "SELECT id FROM m WHERE id > 1").num_rows == 2
            with pytest.raises(adbc_driver_manager.Error, match="NOT_FOUND|not found"):
                cur.execute("SELECT * FROM missing")
        status, text = http_get(f"{base}/metrics")
        assert status == 200
        m = samples(text)
        assert m['floe_statements_total{kind="create",status="ok"}'] == 1
        assert m['floe_statements_total{kind="insert",status="ok"}'] == 1
        assert m['floe_statements_total{kind="query",status="ok"}'] == 2
        assert m['floe_statements_total{kind="query",status="not_found"}'] == 1
        assert m['floe_statement_duration_seconds_count{kind="query"}'] == 3
        assert m['floe_statement_duration_seconds_bucket{kind="query",le="+Inf"}'] == 3
        assert m["floe_rows_written_total"] == 3
        assert m["floe_files_written_total"] >= 1
        assert m["floe_bytes_written_total"] > 0
        assert m["floe_rows_returned_total"] == 5
        assert m["floe_bytes_returned_total"] > 0
        assert m["floe_commits_total"] >= 1
        assert m["floe_executors_alive"] == 1
        assert m["floe_statements_running"] == 0
        assert m["floe_jobs_running"] == 0
        assert http_get(f"{base}/health") == (200, "ok\n")
        assert http_get(f"{base}/ready") == (200, "ready\n")
    finally:
        server.stop()

    # A coordinator without executors is alive but not ready, and says why.
    lonely, base = metrics_server(tmp_path / "lonely", "--local-executors", "0")
    try:
        assert http_get(f"{base}/health")[0] == 200
        status, body = http_get(f"{base}/ready")
        assert status == 503 and "no executor" in body
    finally:
        lonely.stop()


def test_the_query_log_has_one_json_line_per_statement(tmp_path):
    server = Server(tmp_path / "data", env={"FLOE_LOG_FORMAT": "json"})
    try:
        with server.connect() as conn, conn.cursor() as cur:
            cur.execute("CREATE TABLE q (id BIGINT)")
            cur.execute("INSERT INTO q VALUES (1), (2)")
            assert query(cur, "SELECT * FROM q").num_rows == 2
            with pytest.raises(adbc_driver_manager.Error):
                cur.execute("SELECT nope FROM q")
    finally:
        server.stop()
    lines = [json.loads(line) for line in server.process.output().splitlines() if line.startswith("{")]
    ended = [line["fields"] for line in lines if line.get("target") == "floe::query"]
    assert [e["kind"] for e in ended] == ["create", "insert", "query", "query"]
    assert len({e["statement"] for e in ended}) == 4, "each statement has its own id"
    assert all(e["user"] == "anonymous" for e in ended)
    insert, select, failed = ended[1], ended[2], ended[3]
    assert insert["tables"] == "default.q" and insert["rows"] == 2 and insert["status"] == "ok"
    assert select["tables"] == "default.q" and select["rows"] == 2 and select["bytes"] > 0
    assert failed["status"] == "invalid_argument" and "nope" in failed["error"]
    assert all(isinstance(e["duration_ms"], int) for e in ended)


@pytest.mark.parametrize("sql", [SLOW_QUERY, ENDLESS_RECURSION])
def test_show_statements_lists_a_running_query_and_kill_cancels_it(server, sql):
    thread, outcome = run_in_thread(lambda: slow_query(server, sql))
    ids = wait_for(lambda: running_ids(server), what="the slow query in SHOW STATEMENTS")
    with server.connect() as conn, conn.cursor() as cur:
        listed = {row["id"]: row for row in query(cur, "SHOW STATEMENTS").to_pylist()}
        assert listed[ids[0]]["sql"] == sql and listed[ids[0]]["user"] == "anonymous"
        assert listed[ids[0]]["state"] == "running"
        assert listed[ids[0]]["elapsed_ms"] >= 0
        started = time.time()
        cur.execute(f"KILL QUERY {ids[0]}")
        thread.join(60)
        assert not thread.is_alive() and time.time() - started < 10
        assert "CANCELLED" in str(outcome.get("error")), outcome
        assert ids[0] not in running_ids(server)
        # Its tasks stopped too: the server idles.
        assert cpu_ticks(server, seconds=2) < 100, "less than half a core"
        with pytest.raises(adbc_driver_manager.Error, match="NOT_FOUND|no running statement"):
            cur.execute(f"KILL {ids[0]}")
        # The server still answers.
        assert query(cur, "SELECT 1 AS one").to_pylist() == [{"one": 1}]


def test_a_client_gone_mid_recursion_stops_it(server):
    """A client killed while the coordinator recurses (before any row: a count) ends the
    statement and the recursion with it."""
    descriptor = flight.FlightDescriptor.for_command(_command("CommandStatementQuery", ENDLESS_RECURSION))
    reader_script = (
        "import sys, pyarrow.flight as f\n"
        "c = f.FlightClient(sys.argv[1])\n"
        "info = c.get_flight_info(f.FlightDescriptor.for_command(bytes.fromhex(sys.argv[2])))\n"
        "r = c.do_get(info.endpoints[0].ticket)\n"
        "print('reading', flush=True); r.read_all()\n")
    reader = subprocess.Popen([sys.executable, "-c", reader_script, server.uri, descriptor.command.hex()],
                              stdout=subprocess.PIPE)
    assert reader.stdout.readline() == b"reading\n"
    wait_for(lambda: running_ids(server), what="the recursion in SHOW STATEMENTS")
    reader.kill()
    reader.wait()
    wait_for(lambda: not running_ids(server), timeout=30, what="the recursion's end")
    assert cpu_ticks(server, seconds=2) < 100, "less than half a core"


def test_admission_queues_refuses_when_full_and_recovers(tmp_path):
    server, base = metrics_server(tmp_path, "--max-concurrent-statements", "1",
                                  "--statement-queue-timeout-secs", "2")
    try:
        # A query whose client never fetches it holds no place.
        descriptor = flight.FlightDescriptor.for_command(_command("CommandStatementQuery", "SELECT 7"))
        flight.FlightClient(server.uri).get_flight_info(descriptor)
        assert query_one(server, "SELECT 8 AS x") == [{"x": 8}]
        with server.connect() as conn, conn.cursor() as cur:
            listed = query(cur, "SHOW STATEMENTS").to_pylist()
        assert [(r["sql"], r["state"]) for r in listed if r["kind"] == "query"] == [("SELECT 7", "waiting")]

        # A client that goes away after its first batch gives its place back.
        big = flight.FlightDescriptor.for_command(
            _command("CommandStatementQuery", "SELECT value FROM generate_series(1, 200000000)"))
        reader_script = (
            "import sys, pyarrow.flight as f\n"
            "c = f.FlightClient(sys.argv[1])\n"
            "info = c.get_flight_info(f.FlightDescriptor.for_command(bytes.fromhex(sys.argv[2])))\n"
            "r = c.do_get(info.endpoints[0].ticket)\n"
            "r.read_chunk(); print('read', flush=True); sys.stdin.read()\n")
        reader = subprocess.Popen([sys.executable, "-c", reader_script, server.uri, big.command.hex()],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        assert reader.stdout.readline() == b"read\n"
        reader.kill()
        reader.wait()
        assert query_one(server, "SELECT 9 AS x") == [{"x": 9}]

        thread, outcome = run_in_thread(lambda: slow_query(server))
        wait_for(lambda: running_ids(server), what="the slow query running")
        with server.connect() as conn, conn.cursor() as cur:
            started = time.time()
            with pytest.raises(adbc_driver_manager.Error, match="RESOURCE_EXHAUSTED|busy"):
                cur.execute("SELECT 1")
            assert 1.5 < time.time() - started < 10
            m = samples(http_get(f"{base}/metrics")[1])
            assert m["floe_admission_rejections_total"] == 1
            assert m["floe_statements_limit"] == 1
        # One waiting gets the place when the running one ends.
        waiting, waited = run_in_thread(lambda: query_one(server, "SELECT 42 AS x"))
        wait_for(lambda: samples(http_get(f"{base}/metrics")[1])["floe_statements_queued"] == 1,
                 what="a queued statement")
        with server.connect() as conn, conn.cursor() as cur:
            cur.execute(f"KILL {running_ids(server)[0]}")
        thread.join(60)
        waiting.join(60)
        assert waited == {"result": [{"x": 42}]}
    finally:
        server.stop()


def query_one(server, sql):
    with server.connect() as conn, conn.cursor() as cur:
        return query(cur, sql).to_pylist()


# --- executors lost, coordinators crashed -------------------------------------------

def join_table(server, namespace="ops", files=8, rows=5000):
    """A table whose self-join on `k` takes seconds: 100 keys, `files` files."""
    with server.connect() as conn, conn.cursor() as cur:
        cur.execute(f"CREATE SCHEMA IF NOT EXISTS {namespace}")
        cur.execute(f"CREATE TABLE {namespace}.j (k INT, v BIGINT)")
        for f in range(files):
            cur.execute(f"INSERT INTO {namespace}.j SELECT CAST(value % 100 AS INT), value "
                        f"FROM generate_series({f * rows}, {f * rows + rows - 1})")
    return f"{namespace}.j"


JOIN = "SELECT a.k, count(*) AS n FROM {t} a JOIN {t} b ON a.k = b.k GROUP BY a.k ORDER BY a.k"


def lossy_cluster(tmp_path, *coordinator_args):
    server = Server(tmp_path / "data", ["--local-executors", "0", "--local-query-max-bytes", "0", "--target-partitions", "4",
                                        "--executor-timeout-secs", "6", *coordinator_args])
    executors = [start_executor(server, tmp_path / f"executor{i}.log") for i in range(2)]
    return server, executors


def start_executor(server, log, port=None):
    port = port or free_port(pair=True)
    args = ["executor", "--scheduler", f"127.0.0.1:{server.scheduler_port}",
            "--bind", f"127.0.0.1:{port}", "--slots", "2", "--heartbeat-secs", "1",
            "--work-dir", str(log.with_name(f"{log.stem}-work-{port}"))]  # killed ones leave it
    return Process(args, log, wait_port=port)


def data_files_on_disk(server, table) -> set[str]:
    namespace, name = table.split(".")
    root = server.data_dir / "warehouse" / namespace / name / "data"
    return {str(p) for p in root.rglob("*") if p.is_file()} if root.exists() else set()


def data_files_of_table(server, table) -> set[str]:
    files = server.pyiceberg().load_table(table).inspect.files()["file_path"].to_pylist()
    return {f.removeprefix("file://") for f in files}


def test_an_executor_killed_during_a_query_fails_it_unavailable_and_the_cluster_recovers(tmp_path):
    server, executors = lossy_cluster(tmp_path)
    try:
        table = join_table(server)
        expected = [{"k": k, "n": 400 * 400} for k in range(100)]
        killer = threading.Timer(1.5, executors[1].proc.kill)
        killer.start()
        started = time.time()
        try:
            rows = query_one(server, JOIN.format(t=table))
            assert rows == expected, "a statement that survives the loss has the right answer"
        except adbc_driver_manager.Error as e:
            assert "unavailable" in str(e).lower() and "lost executor" in str(e), e
        assert time.time() - started < 40, "noticed within seconds (executor_timeout_secs = 6)"
        killer.join()
        # The survivor runs the next statements; a new executor joins.
        assert query_one(server, JOIN.format(t=table)) == expected
        executors.append(start_executor(server, tmp_path / "executor2.log"))
        assert query_one(server, JOIN.format(t=table)) == expected
    finally:
        for executor in executors:
            executor.stop()
        server.stop()


def test_an_executor_killed_during_an_insert_leaves_no_snapshot_and_no_files(tmp_path):
    server, executors = lossy_cluster(tmp_path)
    try:
        table = join_table(server)
        with server.connect() as conn, conn.cursor() as cur:
            cur.execute("CREATE TABLE ops.target (k INT, n BIGINT)")
        snapshots = len(server.pyiceberg().load_table("ops.target").snapshots())
        killer = threading.Timer(1.5, executors[1].proc.kill)
        killer.start()
        insert = f"INSERT INTO ops.target SELECT a.k, a.v * b.v FROM {table} a JOIN {table} b ON a.k = b.k"
        try:
            with server.connect() as conn, conn.cursor() as cur:
                cur.execute(insert)
            committed = True
        except adbc_driver_manager.Error as e:
            assert "unavailable" in str(e).lower(), e
            committed = False
        killer.join()
        target = server.pyiceberg().load_table("ops.target")
        if committed:
            assert target.scan().to_arrow().num_rows == 100 * 400 * 400
        else:
            assert len(target.snapshots()) == snapshots
            # The write's directory is deleted at once and swept again after 1, 5, 30 s.
            wait_for(lambda: data_files_on_disk(server, "ops.target") == set(), timeout=45,
                     what="the failed write's files deleted")
        assert data_files_on_disk(server, "ops.target") == data_files_of_table(server, "ops.target")
    finally:
        for executor in executors:
            executor.stop()
        server.stop()


def test_executors_may_start_first_and_outlive_a_coordinator_restart(tmp_path):
    scheduler_port = free_port()
    port = free_port(pair=True)
    executor = Process(["executor", "--scheduler", f"127.0.0.1:{scheduler_port}",
                        "--bind", f"127.0.0.1:{port}", "--slots", "2", "--heartbeat-secs", "1"],
                       tmp_path / "executor.log")
    time.sleep(3)  # it waits for a coordinator that is not there yet
    assert executor.proc.poll() is None, executor.output()
    args = ["--local-executors", "0", "--local-query-max-bytes", "0", "--executor-wait-secs", "60"]
    total = "SELECT sum(value) AS n FROM generate_series(1, 10)"
    try:
        for attempt in range(2):  # the second coordinator is a restart
            server = Server(tmp_path / f"data{attempt}", args, scheduler_port=scheduler_port)
            try:
                assert query_one(server, total) == [{"n": 55}]
            finally:
                server.stop()
        assert executor.proc.poll() is None, "the executor outlived the coordinator"
    finally:
        assert executor.stop() == 0


@pytest.mark.parametrize("crash", ["during-job", "before-commit", "after-commit"])
def test_a_coordinator_killed_during_an_insert_leaves_the_table_committed_or_unchanged(tmp_path, crash):
    data = tmp_path / "data"
    server = Server(data)
    with server.connect() as conn, conn.cursor() as cur:
        cur.execute("CREATE TABLE c (k BIGINT, v BIGINT)")
        cur.execute("INSERT INTO c VALUES (1, 1)")
    server.stop()
    env = {} if crash == "during-job" else {"FLOE_CRASH_POINT": crash}
    server = Server(data, env=env)
    insert = ("INSERT INTO c SELECT a.value, b.value FROM generate_series(1, 4000) a, "
              "generate_series(1, 1000) b")
    if crash == "during-job":
        threading.Timer(0.7, lambda: server.process.proc.send_signal(signal.SIGKILL)).start()
    with pytest.raises(adbc_driver_manager.Error):
        with server.connect() as conn, conn.cursor() as cur:
            cur.execute(insert)
    server.process.proc.wait(30)
    assert server.process.proc.returncode != 0
    journal = data / "journal"
    left = list(journal.iterdir())
    assert len(left) == 1, "the write was journaled and is still unsettled"

    restarted = Server(data)
    try:
        assert list(journal.iterdir()) == [], "the restart settled the write"
        rows = query_one(restarted, "SELECT count(*) AS n FROM c")[0]["n"]
        table = restarted.pyiceberg().load_table("default.c")
        if crash == "after-commit":
            assert rows == 1 + 4000 * 1000
            assert "committed" in restarted.process.output()
        else:
            assert rows == 1
            assert len(table.snapshots()) == 1
        assert table.scan().to_arrow().num_rows == rows, "pyiceberg agrees"
        assert data_files_on_disk(restarted, "default.c") == data_files_of_table(restarted, "default.c"), \
            "no file left that the table does not reference"
    finally:
        restarted.stop()


def referenced_files(table) -> set[str]:
    """The data and delete files any snapshot of `table` references."""
    return {f.removeprefix("file://") for f in table.inspect.all_files()["file_path"].to_pylist()}


ROW_LEVEL_WRITES = {
    "merge-on-read DELETE": ("'write.delete.mode' = 'merge-on-read'",
                             "DELETE FROM c WHERE k % 3 = 0",
                             [(k, k) for k in range(1, 201) if k % 3]),
    "copy-on-write UPDATE": ("'write.update.mode' = 'copy-on-write'",
                             "UPDATE c SET v = -v WHERE k <= 50",
                             [(k, -k if k <= 50 else k) for k in range(1, 201)]),
    "merge-on-read MERGE": ("'write.merge.mode' = 'merge-on-read'",
                            "MERGE INTO c USING (SELECT value AS k FROM generate_series(150, 250)) s "
                            "ON c.k = s.k WHEN MATCHED THEN DELETE WHEN NOT MATCHED THEN INSERT VALUES (s.k, 0)",
                            [(k, k) for k in range(1, 150)] + [(k, 0) for k in range(201, 251)]),
}


@pytest.mark.parametrize("statement, crash", [
    (statement, crash) for statement in ROW_LEVEL_WRITES for crash in ["before-commit", "after-commit"]
] + [("merge-on-read MERGE", "between-write-jobs")])
def test_a_coordinator_killed_in_a_row_level_write_leaves_it_committed_or_undone(tmp_path, statement, crash):
    """DELETE, UPDATE and MERGE (copy-on-write and merge-on-read alike) through the crash
    points of the commit, and a merge-on-read MERGE between the job that writes its
    delete files and the one that writes its rows: after a restart the table has all of
    the statement or none of it, and no data or delete file it does not reference."""
    properties, sql, after = ROW_LEVEL_WRITES[statement]
    data = tmp_path / "data"
    server = Server(data)
    try:
        with server.connect() as conn, conn.cursor() as cur:
            cur.execute(f"CREATE TABLE c (k BIGINT, v BIGINT) TBLPROPERTIES ({properties})")
            cur.execute("INSERT INTO c SELECT value AS k, value AS v FROM generate_series(1, 200)")
    finally:
        server.stop()
    server = Server(data, env={"FLOE_CRASH_POINT": crash})
    try:
        with pytest.raises(adbc_driver_manager.Error):
            with server.connect() as conn, conn.cursor() as cur:
                cur.execute(sql)
        server.process.proc.wait(30)
    finally:
        if server.process.proc.poll() is None:
            server.stop()
    assert server.process.proc.returncode != 0
    assert len(list((data / "journal").iterdir())) >= 1, "the write was journaled and is unsettled"
    unsettled = data_files_on_disk(server, "default.c")
    assert unsettled > referenced_files(server.pyiceberg().load_table("default.c")) or crash == "after-commit", \
        "the write's files are there for the restart to settle"

    restarted = Server(data)
    try:
        assert list((data / "journal").iterdir()) == [], "the restart settled the write"
        rows = sorted((r["k"], r["v"]) for r in query_one(restarted, "SELECT k, v FROM c"))
        table = restarted.pyiceberg().load_table("default.c")
        expected = after if crash == "after-commit" else [(k, k) for k in range(1, 201)]
        assert rows == expected
        assert len(table.snapshots()) == (2 if crash == "after-commit" else 1)
        assert sorted((r["k"], r["v"]) for r in table.scan().to_arrow().to_pylist()) == expected, \
            "pyiceberg agrees"
        # The file an UPDATE replaced stays: the first snapshot still has it.
        assert data_files_on_disk(restarted, "default.c") == referenced_files(table), \
            "no file left that no snapshot references"
    finally:
        restarted.stop()


def test_many_clients_mixing_reads_and_inserts(tmp_path):
    """32 clients, 10 statements each, 4 running at once: nothing lost, only clean
    rejections, the coordinator's memory bounded."""
    server, base = metrics_server(tmp_path, "--max-concurrent-statements", "4",
                                  "--statement-queue-timeout-secs", "120")
    try:
        with server.connect() as conn, conn.cursor() as cur:
            cur.execute("CREATE TABLE load (client INT, i INT)")
        errors, inserted = [], []

        def client(n):
            try:
                with server.connect() as conn, conn.cursor() as cur:
                    for i in range(10):
                        if i % 2 == 0:
                            cur.execute(f"INSERT INTO load VALUES ({n}, {i})")
                            inserted.append((n, i))
                        else:
                            query(cur, f"SELECT count(*) FROM load WHERE client = {n}")
            except Exception as e:  # noqa: BLE001
                errors.append(e)

        threads = [threading.Thread(target=client, args=(n,)) for n in range(32)]
        started = time.time()
        for t in threads:
            t.start()
        for t in threads:
            t.join(300)
        elapsed = time.time() - started
        rejected = [e for e in errors if "resourceexhausted" in str(e).lower() or "aborted" in str(e).lower()]
        assert errors == rejected, errors
        rows = query_one(server, "SELECT client, i FROM load")
        assert sorted((r["client"], r["i"]) for r in rows) == sorted(inserted), "nothing lost"
        assert server.pyiceberg().load_table("default.load").scan().to_arrow().num_rows == len(inserted)
        m = samples(http_get(f"{base}/metrics")[1])
        assert m["floe_statements_running"] == 0 and m["floe_statements_queued"] == 0
        status = Path(f"/proc/{server.process.proc.pid}/status").read_text()
        peak_kb = int(next(line for line in status.splitlines() if line.startswith("VmHWM")).split()[1])
        print(f"load: {len(inserted)} inserts, {32 * 10} statements in {elapsed:.1f}s, "
              f"{len(rejected)} rejected, coordinator peak RSS {peak_kb // 1024} MiB")
        assert peak_kb < 2 * 1024 * 1024
    finally:
        server.stop()


# --- PollFlightInfo ------------------------------------------------------------------

def proto_fields(data: bytes) -> dict[int, list]:
    """The top-level fields of a protobuf message: {number: [values]}."""
    fields, i = {}, 0

    def varint():
        nonlocal i
        shift = value = 0
        while True:
            byte = data[i]
            i += 1
            value |= (byte & 0x7F) << shift
            shift += 7
            if not byte & 0x80:
                return value

    while i < len(data):
        key = varint()
        number, wire = key >> 3, key & 7
        if wire == 0:
            value = varint()
        elif wire == 1:
            value = struct.unpack("<d", data[i:i + 8])[0]
            i += 8
        elif wire == 2:
            size = varint()
            value = data[i:i + size]
            i += size
        else:
            raise ValueError(f"wire type {wire}")
        fields.setdefault(number, []).append(value)
    return fields


def test_poll_flight_info_reports_progress_until_the_result_is_ready(tmp_path):
    # A job, not a query small enough for the coordinator to run at once.
    server = Server(tmp_path / "data", ["--target-partitions", "4", "--local-query-max-bytes", "0"])
    try:
        table = join_table(server, files=8, rows=10000)
        sql = JOIN.format(t=table)
        expected = [{"k": k, "n": 800 * 800} for k in range(100)]
        channel = grpc.insecure_channel(server.uri.removeprefix("grpc://"))
        poll = channel.unary_unary("/arrow.flight.protocol.FlightService/PollFlightInfo")
        # FlightDescriptor{type: CMD, cmd: Any(CommandStatementQuery)}
        descriptor = b"\x08\x02" + _length_delimited(2, _command("CommandStatementQuery", sql))
        answers = []
        while descriptor is not None:
            fields = proto_fields(poll(descriptor, timeout=60))
            assert 1 in fields, "every PollInfo carries a FlightInfo"
            answers.append((fields.get(3, [None])[0], fields))
            descriptor = fields.get(2, [None])[0]
        progress = [p for p, _ in answers]
        print(f"PollFlightInfo progress: {progress}")
        assert len(answers) >= 2, "the statement took several polls"
        assert all(0.0 <= p <= 1.0 for p in progress) and progress == sorted(progress), progress
        assert progress[-1] == 1.0 and progress[-2] < 1.0
        info = proto_fields(answers[-1][1][1][0])
        endpoint = proto_fields(info[3][0])
        ticket = proto_fields(endpoint[1][0])[1][0]
        rows = flight.FlightClient(server.uri).do_get(flight.Ticket(ticket)).read_all()
        assert rows.to_pylist() == expected
        channel.close()

        # ADBC's incremental execution drives PollFlightInfo the same way.
        with server.connect() as conn, conn.cursor() as cur:
            cur.adbc_statement.set_options(**{StatementOptions.INCREMENTAL.value: "true"})
            partitions, seen = [], []
            while True:
                new, _ = cur.adbc_execute_partitions(sql)
                if not new:
                    break
                partitions.extend(new)
                seen.append(cur.adbc_statement.get_option_float(StatementOptions.PROGRESS.value))
            assert len(partitions) == 1 and seen == [1.0]
            cur.adbc_read_partition(partitions[0])
            assert cur.fetch_arrow_table().to_pylist() == expected
    finally:
        server.stop()
