"""Small statements and big results through Floe, beside DataFusion on the same Parquet
files in-process, in one run on the same data and cores:

* latency (median of 50 after 10 warm-ups) of `SELECT 1`, `count(*)` of lineitem,
  point lookups on customer (one column, all columns), and on a copy of orders that Floe
  wrote (its files have page indexes, which pyiceberg's lack), through ADBC, and the CPU
  the coordinator spent per statement;
* `SELECT *` of lineitem through ADBC: time to the first batch, total time, MB/s of
  Arrow, and the coordinator's peak memory; all-in-one, and from two executor processes.

Data: TPC-H from `tpchgen-cli` loaded by pyiceberg, shared with benches/tpch.py
(FLOE_BENCH_DIR).

    pip install -r benches/requirements.txt
    FLOE_BIN=$CARGO_TARGET_DIR/release/floe python benches/statements.py   # FLOE_BENCH_SCALE=1
"""

import os
import statistics
import time
from pathlib import Path

from common import SCALE, bench_data, cpu_seconds, on_two_executors, tpch
from conftest import Server  # noqa: E402

STATEMENTS = {
    "SELECT 1": "SELECT 1",
    "count(*) lineitem": "SELECT count(*) FROM lineitem",
    "lookup, 1 column": "SELECT c_name FROM customer WHERE c_custkey = {k}",
    "lookup, all columns": "SELECT * FROM customer WHERE c_custkey = {k}",
    "lookup, Floe's files": "SELECT o_totalprice FROM orders_floe WHERE o_orderkey = {k}",
}


def latency(run, sql, pid=None):
    """Median seconds of 50 runs after 10 warm-ups, and the CPU seconds process `pid` spent
    per run (None without `pid`); lookups vary their key."""
    times = []
    for i in range(60):
        if i == 10 and pid:
            cpu_before = cpu_seconds(pid)
        started = time.perf_counter()
        run(sql.format(k=1000 + i * 997))
        times.append(time.perf_counter() - started)
    cpu = (cpu_seconds(pid) - cpu_before) / 50 if pid else None
    return statistics.median(times[10:]), cpu


def select_all(cur, pid=None):
    """(seconds to the first batch, seconds, MB of Arrow, peak RSS MB of `pid`): best of 3."""
    runs = []
    for _ in range(3):
        started = time.perf_counter()
        cur.execute("SELECT * FROM lineitem")
        first, size = None, 0
        for batch in cur.fetch_record_batch():
            first = first or time.perf_counter() - started
            size += batch.nbytes
        runs.append((first, time.perf_counter() - started, size / 1e6))
    peak = None
    if pid:
        status = Path(f"/proc/{pid}/status").read_text()
        peak = int(next(line for line in status.splitlines() if line.startswith("VmHWM")).split()[1]) / 1024
    return (*min(runs, key=lambda r: r[1]), peak)


def copied_by_floe(server, catalog, table):
    """The data files of `<table>_floe`, a copy of `table` made once by Floe's CTAS."""
    copy = f"{table}_floe"
    if not catalog.table_exists(f"default.{copy}"):
        with server.connect() as conn, conn.cursor() as cur:
            cur.execute(f"CREATE TABLE {copy} AS SELECT * FROM {table}")
    return [t.file.file_path for t in catalog.load_table(f"default.{copy}").scan().plan_files()]


def datafusion_baseline(files):
    import datafusion

    ctx = datafusion.SessionContext(datafusion.SessionConfig().with_target_partitions(os.cpu_count()))
    for name, paths in files.items():
        ctx.register_parquet(name, str(Path(paths[0].removeprefix("file://")).parent))
    lat = {n: latency(lambda sql: ctx.sql(sql).to_arrow_table(), sql)[0] for n, sql in STATEMENTS.items()}
    runs = []
    for _ in range(3):
        started = time.perf_counter()
        size = sum(b.nbytes for b in ctx.sql("SELECT * FROM lineitem").collect())
        runs.append(time.perf_counter() - started)
    return lat, (None, min(runs), size / 1e6, None), None


def floe_run(server, pid):
    with server.connect() as conn, conn.cursor() as cur:
        def run(sql):
            cur.execute(sql)
            cur.fetchall()
        measured = {n: latency(run, sql, pid) for n, sql in STATEMENTS.items()}
        lat = {n: seconds for n, (seconds, _) in measured.items()}
        cpu = {n: cpu for n, (_, cpu) in measured.items()}
        return lat, select_all(cur, pid), cpu


def main():
    root, data = bench_data()
    server = Server(root / "floe")
    try:
        catalog = server.pyiceberg()
        files = tpch.load_once(catalog, data)
        files["orders_floe"] = copied_by_floe(server, catalog, "orders")
        results = {"floe": floe_run(server, server.process.proc.pid)}
    finally:
        server.stop()
    results["floe 2x1"] = on_two_executors(root, lambda s: floe_run(s, s.process.proc.pid))
    results["datafusion"] = datafusion_baseline(files)

    print(f"TPC-H SF{SCALE:g}, {os.cpu_count()} cores; latency = median of 50, ratio to DataFusion")
    print(f"{'statement':<22}" + "".join(f"{e:>14}" for e in results) + "".join(
        f"{e + ' x':>14}" for e in results if e != "datafusion"))
    for name in STATEMENTS:
        ms = {e: r[0][name] * 1000 for e, r in results.items()}
        print(f"{name:<22}" + "".join(f"{ms[e]:>11.2f} ms" for e in results) + "".join(
            f"{ms[e] / ms['datafusion']:>14.2f}" for e in results if e != "datafusion"))
    floes = {e: cpu for e, (_, _, cpu) in results.items() if cpu}
    print("coordinator CPU per statement (user + system, over the same 50 runs):")
    print(f"{'statement':<22}" + "".join(f"{e:>14}" for e in floes))
    for name in STATEMENTS:
        print(f"{name:<22}" + "".join(f"{cpu[name] * 1000:>11.2f} ms" for cpu in floes.values()))
    print("SELECT * FROM lineitem (best of 3):")
    for e, (_, (first, seconds, mb, peak), _) in results.items():
        first_text = f"first batch {first * 1000:.0f} ms, " if first else ""
        peak_text = f", coordinator peak {peak:.0f} MB" if peak else ""
        print(f"  {e:<12} {first_text}{seconds:.2f} s, {mb / seconds:.0f} MB/s of {mb:.0f} MB{peak_text}")


if __name__ == "__main__":
    main()
