"""Write throughput: `CREATE TABLE … AS SELECT` of TPC-H lineitem through Floe (all-in-one,
and a coordinator with two 1-slot `floe executor` processes) beside pyiceberg's `append`
of the same rows as one Arrow table, in one run on the same cores; unpartitioned and
partitioned by `day(l_shipdate)` (Floe's default: shuffled and sorted by partition, one
open file per task; and with `write.spark.fanout.enabled`: unsorted, a file open per
partition value). Reports seconds, rows/s, files and bytes written, and
each Floe row as a ratio of pyiceberg's rows/s. Floe's CTAS reads its source (the table
pyiceberg wrote) as part of the statement; pyiceberg starts from Arrow in memory.

    pip install -r benches/requirements.txt
    FLOE_BIN=$CARGO_TARGET_DIR/release/floe python benches/ctas.py   # FLOE_BENCH_SCALE=1
"""

import shutil
import tempfile
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from pyiceberg.transforms import DayTransform

from common import SCALE, bench_data, on_two_executors
from conftest import Server
import tpch


def lineitem(data: Path) -> pa.Table:
    parts = sorted((data / "lineitem").glob("*.parquet"))
    return pa.concat_tables(tpch._plain_strings(pq.read_table(p)) for p in parts)


def written(catalog, name: str) -> tuple[int, int]:
    files = catalog.load_table(name).inspect.files()
    return len(files), sum(files["file_size_in_bytes"].to_pylist())


def timed(fn) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def pyiceberg_append(catalog, arrow: pa.Table, name: str, partitioned: bool) -> float:
    table = catalog.create_table(name, schema=arrow.schema)
    if partitioned:
        with table.update_spec() as spec:
            spec.add_field("l_shipdate", DayTransform(), "l_shipdate_day")
    return timed(lambda: table.append(arrow))


def floe_ctas(server: Server, suffix: str) -> dict[str, float]:
    seconds = {}
    with server.connect() as conn, conn.cursor() as cur:
        for kind, clause in (
            ("flat", ""),
            ("daily", "PARTITIONED BY (day(l_shipdate))"),
            ("daily_fanout", "PARTITIONED BY (day(l_shipdate)) "
                             "TBLPROPERTIES ('write.spark.fanout.enabled' = 'true')"),
        ):
            sql = f"CREATE TABLE bench.{kind}_{suffix} {clause} AS SELECT * FROM bench.flat_pyiceberg"
            seconds[kind] = timed(lambda: (cur.execute(sql), cur.fetchall()))
    return seconds


def main():
    root, data = bench_data()
    arrow = lineitem(data)
    rows = arrow.num_rows
    days = len(arrow["l_shipdate"].unique())
    work = Path(tempfile.mkdtemp(prefix="ctas-", dir=root))
    try:
        server = Server(work / "floe")
        catalog = server.pyiceberg()
        catalog.create_namespace("bench")
        seconds = {
            ("pyiceberg append", "flat"): pyiceberg_append(catalog, arrow, "bench.flat_pyiceberg", False),
            ("pyiceberg append", "daily"): pyiceberg_append(catalog, arrow, "bench.daily_pyiceberg", True),
        }
        del arrow
        try:
            for kind, s in floe_ctas(server, "floe").items():
                seconds[("floe CTAS", kind)] = s
        finally:
            server.stop()
        for kind, s in on_two_executors(work, lambda srv: floe_ctas(srv, "floe2")).items():
            seconds[("floe CTAS 2x1", kind)] = s
        report(catalog, rows, days, seconds)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def report(catalog, rows, days, seconds):
    tables = {"pyiceberg append": "pyiceberg", "floe CTAS": "floe", "floe CTAS 2x1": "floe2"}
    print(f"\nlineitem SF{SCALE:g}: {rows:,} rows; day(l_shipdate) has {days} values\n")
    print("| writer | table | seconds | rows/s | vs pyiceberg | files | MB written |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for (writer, kind), s in seconds.items():
        files, size = written(catalog, f"bench.{kind}_{tables[writer]}")
        base = seconds[("pyiceberg append", kind.removesuffix("_fanout"))]
        print(f"| {writer} | {kind} | {s:.2f} | {rows / s:,.0f} | {base / s:.2f}x | {files} | "
              f"{size / 1e6:.0f} |")


if __name__ == "__main__":
    main()
