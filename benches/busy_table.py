"""Small statements on a table of many snapshots and manifests (one pyiceberg append
each), through ADBC: a point lookup and `count(*)`, medians of 30 after 10 warm-ups.

In one run on the same data, Floe as shipped beside Floe with error backtraces on
(`RUST_LIB_BACKTRACE=1`, what `RUST_BACKTRACE=1` meant before Floe turned them off:
iceberg captures one per manifest when it plans a scan), and beside `RUST_BACKTRACE=0`.

    pip install -r benches/requirements.txt
    FLOE_BIN=$CARGO_TARGET_DIR/release/floe python benches/busy_table.py   # FLOE_BENCH_APPENDS=500
"""

import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "clients" / "tests"))
import pyarrow as pa  # noqa: E402
from conftest import Server  # noqa: E402

APPENDS = int(os.environ.get("FLOE_BENCH_APPENDS", 500))
STATEMENTS = {"lookup": "SELECT v FROM busy WHERE id = 7", "count(*)": "SELECT count(*) FROM busy"}
ENVIRONMENTS = {
    "RUST_BACKTRACE=1 (as shipped)": {"RUST_BACKTRACE": "1"},
    "RUST_BACKTRACE=1 RUST_LIB_BACKTRACE=1": {"RUST_BACKTRACE": "1", "RUST_LIB_BACKTRACE": "1"},
    "RUST_BACKTRACE=0": {"RUST_BACKTRACE": "0"},
}


def median_ms(cur, sql):
    times = []
    for _ in range(40):
        started = time.perf_counter()
        cur.execute(sql)
        cur.fetchall()
        times.append(time.perf_counter() - started)
    return statistics.median(times[10:]) * 1000


def main():
    data = Path(tempfile.mkdtemp(prefix="floe-busy-"))
    print(f"{APPENDS} appends of one row; medians in ms")
    print("| environment | " + " | ".join(STATEMENTS) + " |")
    for i, (label, env) in enumerate(ENVIRONMENTS.items()):
        server = Server(data, env=env)
        try:
            with server.connect() as conn, conn.cursor() as cur:
                if i == 0:
                    cur.execute("CREATE TABLE busy (id INT, v STRING)")
                    table = server.pyiceberg().load_table("default.busy")
                    for n in range(APPENDS):
                        table.append(pa.table({"id": pa.array([n], pa.int32()), "v": [f"r{n}"]}))
                times = [median_ms(cur, sql) for sql in STATEMENTS.values()]
        finally:
            server.stop()
        print(f"| {label} | " + " | ".join(f"{t:.2f}" for t in times) + " |", flush=True)


if __name__ == "__main__":
    main()
