"""Filters applied by the Parquet reader (Iceberg's row filter) or after reading, on TPC-H
lineitem and orders: each filter under the table property `read.parquet.row-filter` =
`always` (the reader filters every filter: Floe before `auto`), `never`, and `auto` (the
default: the reader filters when the manifests' bounds say at most 2% of rows pass), in
turn on one server, two rounds. Reports per filter the share of rows it keeps, and the
median time and the server's CPU time per statement under each setting.

    pip install -r benches/requirements.txt
    FLOE_BIN=$CARGO_TARGET_DIR/release/floe python benches/row_filter.py   # FLOE_BENCH_DIR

The tables' setting is removed again at the end, and at the start (a run killed halfway
leaves it set).
"""

import statistics
import time

from common import bench_data, cpu_seconds, tpch
from conftest import Server, query

SETTINGS = ("always", "never", "auto")
ROUNDS = 2
RUNS = 7
LINEITEM = "SELECT count(*) AS n, sum(l_extendedprice * (1 - l_discount)) AS revenue FROM lineitem WHERE "
FILTERS = {
    "l_shipdate <= 1998-09-02": LINEITEM + "l_shipdate <= DATE '1998-09-02'",
    "l_returnflag = 'R'": LINEITEM + "l_returnflag = 'R'",
    "l_shipdate in 1994": LINEITEM
    + "l_shipdate >= DATE '1994-01-01' AND l_shipdate < DATE '1995-01-01'",
    "o_orderdate in 1993 Q4": "SELECT count(*) AS n, sum(o_custkey) AS revenue FROM orders "
    "WHERE o_orderdate >= DATE '1993-10-01' AND o_orderdate < DATE '1994-01-01'",
    "l_quantity < 2": LINEITEM + "l_quantity < 2",
    "l_shipdate in 1995-09": LINEITEM
    + "l_shipdate >= DATE '1995-09-01' AND l_shipdate < DATE '1995-10-01'",
    "l_orderkey < 6000": LINEITEM + "l_orderkey < 6000",
}
TABLES = ("lineitem", "orders")


def measure(cur, pid, sql):
    """(median seconds, server CPU seconds per run) of `sql`, after two warm-up runs."""
    for _ in range(2):
        query(cur, sql)
    cpu, times = cpu_seconds(pid), []
    for _ in range(RUNS):
        started = time.perf_counter()
        query(cur, sql)
        times.append(time.perf_counter() - started)
    return statistics.median(times), (cpu_seconds(pid) - cpu) / RUNS


def unset(cur):
    for table in TABLES:
        cur.execute(f"ALTER TABLE {table} UNSET TBLPROPERTIES IF EXISTS ('read.parquet.row-filter')")


def main():
    root, data = bench_data()
    server = Server(root / "floe")
    try:
        tpch.load_once(server.pyiceberg(), data)
        pid = server.process.proc.pid
        best = {}
        with server.connect() as conn, conn.cursor() as cur:
            unset(cur)
            rows = {t: query(cur, f"SELECT count(*) AS n FROM {t}").to_pylist()[0]["n"] for t in TABLES}
            kept = {}
            for name, sql in FILTERS.items():
                table = "orders" if "orders" in sql else "lineitem"
                kept[name] = query(cur, sql).to_pylist()[0]["n"] / rows[table]
            try:
                for _ in range(ROUNDS):
                    for setting in SETTINGS:
                        for table in TABLES:
                            cur.execute(f"ALTER TABLE {table} SET TBLPROPERTIES "
                                        f"('read.parquet.row-filter' = '{setting}')")
                        for name, sql in FILTERS.items():
                            seconds, cpu = measure(cur, pid, sql)
                            old = best.get((name, setting), (seconds, cpu))
                            best[(name, setting)] = (min(old[0], seconds), min(old[1], cpu))
            finally:
                unset(cur)
    finally:
        server.stop()
    print(f"best of {ROUNDS} rounds; ms per statement (median of {RUNS}) / server CPU ms per statement")
    print(f"{'filter':28} {'kept':>7} " + " ".join(f"{s:>13}" for s in SETTINGS) + "  auto/always")
    for name in FILTERS:
        cells = [best[(name, s)] for s in SETTINGS]
        ratio = cells[2][1] / cells[0][1] if cells[0][1] else float("nan")
        print(f"{name:28} {kept[name]:7.2%} "
              + " ".join(f"{t * 1000:6.0f}/{c * 1000:6.0f}" for t, c in cells)
              + f"  {ratio:10.2f}")


if __name__ == "__main__":
    main()
