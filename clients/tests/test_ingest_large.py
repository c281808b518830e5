"""A bulk ingest larger than any one cluster message (64 MB): the coordinator spools the
upload into staging files as it arrives, two `floe executor` processes read them and
write the data files, the coordinator commits once and deletes the staging files; its
memory stays far below the upload's size."""

import re
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from conftest import Server, query

ROWS = 9_000_000  # two 8-byte columns: 144 MB of Arrow data
WROTE = re.compile(r"wrote data file .*file=(\S+)")


def vm_hwm(pid: int) -> int:
    """Peak resident memory of a process so far, in bytes."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmHWM")


def table_files(server: Server, schema: str, table: str) -> list[Path]:
    root = Path(server.data_dir) / "warehouse" / schema / table
    return sorted(p for p in root.rglob("*") if p.is_file())


@pytest.fixture(scope="module")
def ingested(tmp_path_factory):
    """One large ingest on a coordinator without local executors and two executors."""
    tmp = tmp_path_factory.mktemp("large")
    server = Server(tmp / "data", ["--local-executors", "0", "--local-query-max-bytes", "0", "--target-partitions", "4"])
    executors = []
    try:
        for i in range(2):
            executors.append(
                server.start_executor(tmp / f"executor{i}.log", env={"RUST_LOG": "info,floe::write=debug"})
            )
        ids = pa.array(range(ROWS), pa.int64())
        data = pa.table({"id": ids, "v": pc.multiply(pc.cast(ids, pa.float64()), 0.5)})
        with server.connect() as conn, conn.cursor() as cur:
            cur.execute("CREATE SCHEMA big")
            # Warm up: the coordinator's baseline includes one (small) ingest.
            cur.adbc_ingest("warmup", data.slice(0, 1000), mode="create", db_schema_name="big")
            before = vm_hwm(server.process.proc.pid)
            count = cur.adbc_ingest(
                "events", data.to_reader(max_chunksize=65_536), mode="create", db_schema_name="big"
            )
            after = vm_hwm(server.process.proc.pid)
        yield {
            "server": server,
            "executors": executors,
            "count": count,
            "upload_bytes": data.nbytes,
            "hwm": (before, after),
        }
    finally:
        for executor in executors:
            executor.stop()
        server.stop()


def test_a_large_ingest_arrives_complete(ingested):
    server = ingested["server"]
    assert ingested["upload_bytes"] > 128 * 1024 * 1024
    assert ingested["count"] == ROWS
    total = ROWS * (ROWS - 1) // 2
    with server.connect() as conn, conn.cursor() as cur:
        got = query(cur, "SELECT count(*) AS n, sum(id) AS s, sum(v) AS sv FROM big.events")
    assert got.to_pylist() == [{"n": ROWS, "s": total, "sv": total * 0.5}]
    table = server.pyiceberg().load_table("big.events")
    assert len(table.snapshots()) == 1, "one commit"
    ids = table.scan(selected_fields=("id",)).to_arrow().column("id")
    assert len(ids) == ROWS
    assert pc.sum(ids).as_py() == total


def test_both_executors_write_files_of_one_ingest(ingested):
    server = ingested["server"]
    table = server.pyiceberg().load_table("big.events")
    committed = sorted(table.inspect.files()["file_path"].to_pylist())
    written = [WROTE.findall(e.output()) for e in ingested["executors"]]
    events = [[f for f in files if "/big/events/" in f] for files in written]
    assert all(events), f"each executor wrote data files: {[len(f) for f in events]}"
    assert sorted(events[0] + events[1]) == committed
    # All of them belong to the one write (one directory, named by its write id).
    assert len({Path(f).parent for f in committed}) == 1


def test_the_coordinator_holds_far_less_than_the_upload(ingested):
    before, after = ingested["hwm"]
    grew = after - before
    assert grew < ingested["upload_bytes"] / 4, (
        f"coordinator peak grew by {grew / 1e6:.0f} MB for a "
        f"{ingested['upload_bytes'] / 1e6:.0f} MB upload"
    )


def test_staging_files_are_gone_after_the_commit(ingested):
    server = ingested["server"]
    files = table_files(server, "big", "events")
    assert not [f for f in files if "_staging" in str(f)]
    data = [f for f in files if f.suffix == ".parquet"]
    table = server.pyiceberg().load_table("big.events")
    assert sorted(str(f) for f in data) == sorted(
        p.removeprefix("file://") for p in table.inspect.files()["file_path"].to_pylist()
    )


def vm_rss(pid: int) -> int:
    """Resident memory of a process now, in bytes."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS")


def test_a_client_that_stops_reading_does_not_make_the_coordinator_buffer(ingested):
    """The result streams from the executors as the client reads it: while the client
    pauses after one batch, the coordinator holds a few batches, not the result."""
    server = ingested["server"]
    pid = server.process.proc.pid
    with server.connect() as conn, conn.cursor() as cur:
        before = vm_rss(pid)
        cur.execute("SELECT id, v FROM big.events")
        reader = cur.fetch_record_batch()
        first = reader.read_next_batch()
        time.sleep(3)  # the client stalls; a buffering server would fetch all now
        stalled = vm_rss(pid)
        rows = first.num_rows + sum(batch.num_rows for batch in reader)
    assert rows == ingested["count"]
    assert ingested["upload_bytes"] > 128 * 1024 * 1024
    assert stalled - before < 32 * 1024 * 1024, (before, stalled)
