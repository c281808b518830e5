"""Two or more Floe builds on TPC-H, run alternately in one invocation, so that a change
is measured against the build before it on the same data, cores and (busy) host.

Each round starts every build in turn (all-in-one) on the same catalog, runs the 22
queries once to warm up, then each query 3 times, and reports per build the sum of
the queries' medians and the server's CPU time over the round (steadier than time when
other tenants take the CPU; their `nice` time is printed beside it). At the end: each
query's best median per build.

    FLOE_AB_BINS=/path/to/floe-before,/path/to/floe-after python benches/tpch_ab.py
    # FLOE_AB_ROUNDS (2), FLOE_BENCH_QUERIES, FLOE_BENCH_SCALE, FLOE_BENCH_DIR

The data is benches/tpch.py's (FLOE_BENCH_DIR), generated and loaded by whichever of the
two runs first.
"""

import os
import statistics
import time
from pathlib import Path

from common import bench_data, cpu_seconds, tpch

import conftest  # noqa: E402
from conftest import Server, query  # noqa: E402

BINS = [b for b in os.environ.get("FLOE_AB_BINS", "").split(",") if b]
ROUNDS = int(os.environ.get("FLOE_AB_ROUNDS", 2))
ONLY = [int(q) for q in os.environ.get("FLOE_BENCH_QUERIES", "").split(",") if q]


def nice_ticks():
    """Host-wide CPU ticks spent in `nice` processes (other tenants here) so far."""
    return int(Path("/proc/stat").read_text().split()[2])


def one_round(floe_bin, root, sqls):
    """({query: median seconds of 3}, server CPU seconds, nice ticks) of one build."""
    conftest.FLOE_BIN = floe_bin
    server = Server(root / "floe")
    try:
        pid = server.process.proc.pid
        with server.connect() as conn, conn.cursor() as cur:
            for sql in sqls.values():
                query(cur, sql)
            cpu, nice = cpu_seconds(pid), nice_ticks()
            medians = {}
            for n, sql in sqls.items():
                times = []
                for _ in range(3):
                    started = time.perf_counter()
                    query(cur, sql)
                    times.append(time.perf_counter() - started)
                medians[n] = statistics.median(times)
            return medians, cpu_seconds(pid) - cpu, nice_ticks() - nice
    finally:
        server.stop()


def main():
    if len(BINS) < 2:
        raise SystemExit("FLOE_AB_BINS: two or more floe binaries, comma-separated")
    root, data = bench_data()
    conftest.FLOE_BIN = BINS[0]
    loader = Server(root / "floe")
    try:
        tpch.load_once(loader.pyiceberg(), data)
    finally:
        loader.stop()
    reference = tpch.duckdb_connection(root / "duckdb-extensions")
    sqls = {n: q for n, q in tpch.queries(reference).items() if not ONLY or n in ONLY}
    best = {b: {} for b in BINS}
    for round_ in range(ROUNDS):
        for b in BINS:
            medians, cpu, nice = one_round(b, root, sqls)
            for n, seconds in medians.items():
                best[b][n] = min(seconds, best[b].get(n, seconds))
            print(f"round {round_} {b}: total {sum(medians.values()):.3f} s, "
                  f"server CPU {cpu:.1f} s, others' nice ticks {nice}", flush=True)
    for n in sqls:
        print(f"q{n:02d} " + "  ".join(f"{best[b][n]:.3f}" for b in BINS))


if __name__ == "__main__":
    main()
