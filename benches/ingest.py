"""Bulk ingest throughput: Floe's `adbc_ingest` (Flight SQL DoPut, distributed write, one
commit) beside pyiceberg's `append` of the same Arrow table into the same catalog, in one
run, reported as a ratio, for each size in FLOE_BENCH_ROWS (comma-separated row counts).
Also reports the coordinator's peak memory (VmHWM; it includes its in-process executor).

    FLOE_BIN=target/release/floe python benches/ingest.py     # FLOE_BENCH_ROWS, FLOE_BENCH_RUNS
"""

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import adbc_driver_flightsql.dbapi as flight_sql
import pyarrow as pa
import pyarrow.compute as pc
from pyiceberg.catalog.sql import SqlCatalog

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "clients" / "tests"))
from conftest import Server  # noqa: E402

SIZES = [int(n) for n in os.environ.get("FLOE_BENCH_ROWS", "1000000,5000000").split(",")]
RUNS = int(os.environ.get("FLOE_BENCH_RUNS", 3))


def data(rows):
    ids = pa.array(range(rows), pa.int64())
    return pa.table({
        "id": ids,
        "v": pc.multiply(pc.cast(ids, pa.float64()), 0.5),
        "s": pc.binary_join_element_wise("s", pc.cast(pc.modulo(ids, 100), pa.string()), ""),
    })


def median_seconds(fn):
    times = []
    for run in range(RUNS):
        started = time.perf_counter()
        fn(run)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def vm_hwm(pid):
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    return 0


def measure(rows):
    table = data(rows)
    with tempfile.TemporaryDirectory() as tmp:
        server = Server(Path(tmp) / "data")
        try:
            with server.connect() as conn, conn.cursor() as cur:
                # ADBC sends each batch as one gRPC message (at most 16 MB by default).
                floe = median_seconds(
                    lambda run: cur.adbc_ingest(
                        f"floe_{run}", table.to_reader(max_chunksize=65_536), mode="create"
                    )
                )
            peak = vm_hwm(server.process.proc.pid)
            catalog = server.pyiceberg()

            def pyiceberg_append(run):
                target = catalog.create_table(f"default.pyiceberg_{run}", schema=table.schema)
                target.append(table)

            pyiceberg = median_seconds(pyiceberg_append)
        finally:
            server.stop()
    mb = table.nbytes / 1e6
    print(f"{rows} rows ({mb:.0f} MB of Arrow), median of {RUNS} runs")
    print(f"{'writer':<12} {'seconds':>8} {'MB/s':>8}")
    print(f"{'floe':<12} {floe:>8.2f} {mb / floe:>8.1f}")
    print(f"{'pyiceberg':<12} {pyiceberg:>8.2f} {mb / pyiceberg:>8.1f}")
    print(f"ratio floe/pyiceberg (time): {floe / pyiceberg:.2f}")
    print(f"floe coordinator peak memory: {peak / 1e6:.0f} MB")
    print()


def main():
    for rows in SIZES:
        measure(rows)


if __name__ == "__main__":
    main()
