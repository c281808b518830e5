"""Planning a table of many small files: Floe beside pyiceberg planning the same
snapshot, in one run on the same cores.

The table `many.files` has FLOE_BENCH_FILES (default 100,000) Parquet files of 10 rows,
added by pyiceberg in one snapshot; it is made once and kept in FLOE_BENCH_DIR. Reported:

* pyiceberg's `plan_files()` of the whole table (the baseline) and of a filter on `id`;
* through Floe (ADBC): `count(*)` (answered from manifests), `EXPLAIN` of a full scan,
  `sum(value)` over all files (a distributed job of every file), and the same `sum`
  filtered to one file; with the coordinator's peak memory. Then the full `sum` again
  with two 1-slot executor processes, whose tasks fetch their files from the
  coordinator (the plan does not list 100,000 files).

    pip install -r benches/requirements.txt
    FLOE_BIN=$CARGO_TARGET_DIR/release/floe python benches/many_files.py
"""

import os
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from common import on_two_executors
from conftest import Server

FILES = int(os.environ.get("FLOE_BENCH_FILES", 100_000))
ROWS_PER_FILE = 10


def write_files(directory: Path) -> list[str]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    directory.mkdir(parents=True, exist_ok=True)

    def write(i):
        path = directory / f"part-{i:06d}.parquet"
        if not path.exists():
            ids = pa.array(range(i * ROWS_PER_FILE, (i + 1) * ROWS_PER_FILE), pa.int64())
            table = pa.table({"id": ids, "value": pa.array([float(i)] * ROWS_PER_FILE)})
            pq.write_table(table, path)
        return f"file://{path}"

    with ThreadPoolExecutor(os.cpu_count()) as pool:
        return list(pool.map(write, range(FILES)))


def table_once(catalog, root: Path):
    from pyiceberg.exceptions import NoSuchTableError
    import pyarrow as pa

    name = f"many.files{FILES}"
    try:
        return catalog.load_table(name)
    except NoSuchTableError:
        pass
    paths = write_files(root / f"many-files-{FILES}")
    catalog.create_namespace_if_not_exists("many")
    schema = pa.schema([pa.field("id", pa.int64()), pa.field("value", pa.float64())])
    table = catalog.create_table(name, schema=schema)
    started = time.perf_counter()
    table.add_files(paths)
    print(f"added {FILES} files in {time.perf_counter() - started:.0f} s")
    return catalog.load_table(name)


def timed(f, runs=3):
    """(best seconds, result) of `runs` calls."""
    best, result = None, None
    for _ in range(runs):
        started = time.perf_counter()
        result = f()
        seconds = time.perf_counter() - started
        best = seconds if best is None else min(best, seconds)
    return best, result


def peak_mb(pid: int) -> float:
    status = Path(f"/proc/{pid}/status").read_text()
    line = next(line for line in status.splitlines() if line.startswith("VmHWM"))
    return int(line.split()[1]) / 1024


def main():
    root = Path(os.environ["FLOE_BENCH_DIR"])
    server = Server(root / "floe")
    try:
        table = table_once(server.pyiceberg(), root)
        from pyiceberg.expressions import EqualTo

        one = 4242 * ROWS_PER_FILE
        base_all, tasks = timed(lambda: list(table.scan().plan_files()))
        base_one, _ = timed(lambda: list(table.scan(row_filter=EqualTo("id", one)).plan_files()))
        name = f"many.files{FILES}"
        with server.connect() as conn, conn.cursor() as cur:
            def query(sql):
                cur.execute(sql)
                return cur.fetchall()

            rows = {
                "count(*)": (f"SELECT count(*) FROM {name}", None),
                "EXPLAIN full scan": (f"EXPLAIN SELECT sum(value) FROM {name}", None),
                "sum(value), all files": (f"SELECT sum(value) FROM {name}", base_all),
                "sum(value), one file": (f"SELECT sum(value) FROM {name} WHERE id = {one}", base_one),
            }
            print(f"{FILES} files ({len(tasks)} planned by pyiceberg), {os.cpu_count()} cores")
            print(f"  pyiceberg plan_files, all: {base_all:.2f} s; filtered to one file: {base_one:.2f} s")
            for label, (sql, baseline) in rows.items():
                seconds, result = timed(lambda: query(sql))
                ratio = f"  ({seconds / baseline:.2f}x pyiceberg planning)" if baseline else ""
                print(f"  floe {label:<24} {seconds:7.2f} s{ratio}")
                if label.startswith("count"):
                    assert result[0][0] == FILES * ROWS_PER_FILE, result
        print(f"  coordinator peak RSS {peak_mb(server.process.proc.pid):.0f} MB")
    finally:
        server.stop()

    def on_executors(server):
        with server.connect() as conn, conn.cursor() as cur:
            def run():
                cur.execute(f"SELECT sum(value) FROM {name}")
                return cur.fetchall()

            seconds, _ = timed(run)
        print(f"  floe 2 executor processes, sum(value), all files: {seconds:.2f} s"
              f"  ({seconds / base_all:.2f}x pyiceberg planning); coordinator peak RSS "
              f"{peak_mb(server.process.proc.pid):.0f} MB")

    on_two_executors(root, on_executors)


if __name__ == "__main__":
    main()
