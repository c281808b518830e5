"""Distribution, proven from the executors' side: a coordinator without local
executors plus two `floe executor` processes; both executors read files, and every
data file of the table is read exactly once."""

import re
from collections import Counter

import pyarrow as pa
import pytest

from conftest import Process, Server, query

FILES = 8
ROWS_PER_FILE = 1000
READ = re.compile(r"reading data file .*file=(\S+)")


@pytest.fixture()
def cluster(tmp_path):
    server = Server(tmp_path / "data", ["--local-executors", "0", "--target-partitions", "4"])
    executors = [
        server.start_executor(tmp_path / f"executor{i}.log", env={"RUST_LOG": "info,floe::scan=debug"})
        for i in range(2)
    ]
    yield server, executors
    for executor in executors:
        executor.stop()
    server.stop()


def files_read(executor: Process) -> list[str]:
    return READ.findall(executor.output())


def test_two_executors_share_the_files_and_read_each_once(cluster):
    server, executors = cluster
    catalog = server.pyiceberg()
    catalog.create_namespace("dist")
    table = catalog.create_table(
        "dist.events",
        schema=pa.schema([pa.field("id", pa.int64()), pa.field("tag", pa.string())]),
    )
    for f in range(FILES):
        ids = range(f * ROWS_PER_FILE, (f + 1) * ROWS_PER_FILE)
        table.append(pa.table({"id": pa.array(ids, pa.int64()), "tag": [f"t{f}"] * ROWS_PER_FILE}))
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
