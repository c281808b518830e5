"""TPC-H through Floe beside the engines a user would pick instead, in one run on the same
data and cores: the 22 queries, 1 warm-up + median of FLOE_BENCH_RUNS, per query and in
total, as ratios to DataFusion reading the same Parquet data files in-process.

* Floe through ADBC, all-in-one (`floe serve`), and a coordinator with two 1-slot
  `floe executor` processes;
* DataFusion (datafusion-python, the DataFusion version Floe is built on) on the Iceberg
  tables' Parquet data files;
* DuckDB on the Iceberg tables (its `iceberg` extension, from PyPI, offline);
* Polars on the Iceberg tables (`scan_iceberg` through pyiceberg, queries through its SQL
  context; the queries its SQL cannot run, correlated subqueries, show as n/a).

Every answer is checked against DuckDB's on the same files. Data: `tpchgen-cli`, 8 files
per table, loaded as Iceberg tables by pyiceberg (kept in FLOE_BENCH_DIR between runs).

    pip install -r benches/requirements.txt
    FLOE_BIN=$CARGO_TARGET_DIR/release/floe python benches/tpch.py   # FLOE_BENCH_SCALE=1
"""

import os
import statistics
import sys
import time
from pathlib import Path

from common import SCALE, bench_data, on_two_executors, tpch
from conftest import Server, query  # noqa: E402

RUNS = int(os.environ.get("FLOE_BENCH_RUNS", 3))
ONLY = [int(q) for q in os.environ.get("FLOE_BENCH_QUERIES", "").split(",") if q]


def median_seconds(run):
    """1 warm-up, then the median of RUNS; returns (seconds, last answer)."""
    answer = run()
    times = []
    for _ in range(RUNS):
        started = time.perf_counter()
        answer = run()
        times.append(time.perf_counter() - started)
    return statistics.median(times), answer


def floe_times(server, sqls):
    out = {}
    with server.connect() as conn, conn.cursor() as cur:
        for n, sql in sqls.items():
            out[n] = median_seconds(lambda: tpch.rows(query(cur, sql)))
    return out


def datafusion_times(files, sqls):
    import datafusion

    ctx = datafusion.SessionContext(datafusion.SessionConfig().with_target_partitions(os.cpu_count()))
    for name, paths in files.items():
        # A table's data files are the only files in its data directory.
        ctx.register_parquet(name, str(Path(paths[0].removeprefix("file://")).parent))
    return {n: median_seconds(lambda: tpch.rows(ctx.sql(sql).to_arrow_table())) for n, sql in sqls.items()}


def duckdb_iceberg_times(con, catalog, sqls):
    from duckdb_extensions import import_extension

    for ext in ["avro", "iceberg"]:
        import_extension(ext, con=con)
        con.sql(f"LOAD {ext}")
    for name in tpch.TABLES:
        location = catalog.load_table(f"default.{name}").metadata_location
        con.sql(f"CREATE OR REPLACE VIEW {name} AS SELECT * FROM iceberg_scan('{location}')")
    return {n: median_seconds(lambda: tpch.rows(con.sql(sql).to_arrow_table())) for n, sql in sqls.items()}


def polars_iceberg_times(catalog, sqls):
    import polars as pl

    ctx = pl.SQLContext({name: pl.scan_iceberg(catalog.load_table(f"default.{name}")) for name in tpch.TABLES})
    out = {}
    for n, sql in sqls.items():
        try:
            out[n] = median_seconds(lambda: tpch.rows(ctx.execute(sql).collect().to_arrow()))
        except Exception as e:  # noqa: BLE001 — a query Polars' SQL does not support
            print(f"polars q{n}: {type(e).__name__}: {str(e).splitlines()[0][:100]}", file=sys.stderr)
            out[n] = None
    return out


def main():
    root, data = bench_data()
    server = Server(root / "floe")
    try:
        catalog = server.pyiceberg()
        files = tpch.load_once(catalog, data)
        reference = tpch.duckdb_connection(root / "duckdb-extensions")
        tpch.attach_files(reference, files)
        sqls = {n: q for n, q in tpch.queries(reference).items() if not ONLY or n in ONLY}
        expected = {n: tpch.rows(reference.sql(q).to_arrow_table()) for n, q in sqls.items()}
        results = {"floe": floe_times(server, sqls)}
    finally:
        server.stop()

    results["floe 2x1"] = on_two_executors(root, lambda s: floe_times(s, sqls))
    results["datafusion"] = datafusion_times(files, sqls)
    duck = tpch.duckdb_connection(root / "duckdb-extensions")
    results["duckdb iceberg"] = duckdb_iceberg_times(duck, catalog, sqls)
    results["polars iceberg"] = polars_iceberg_times(catalog, sqls)

    report(results, expected)


def report(results, expected):
    """Per query and in total, each engine's seconds and its ratio to DataFusion's. An
    engine that could not run every query gets no total (n/a)."""
    engines = list(results)
    print(f"TPC-H SF{SCALE:g}, {os.cpu_count()} cores, median of {RUNS} after 1 warm-up; "
          f"ratio = engine / datafusion")
    print(f"{'query':<6}" + "".join(f"{e:>16}" for e in engines) + "".join(
        f"{e + ' x':>16}" for e in engines if e != "datafusion"))
    totals = {e: 0.0 for e in engines}
    wrong = []
    for n in expected:
        times = {e: results[e][n][0] if results[e][n] else None for e in engines}
        for e in engines:
            if results[e][n] is None:
                totals[e] = None
                continue
            if totals[e] is not None:
                totals[e] += times[e]
            if not tpch.same_rows(results[e][n][1], expected[n], ordered=False):
                wrong.append(f"q{n} {e}")
        base = times["datafusion"]
        print(f"q{n:02d}   " + "".join(cell(times[e]) for e in engines) + "".join(
            cell(times[e] and times[e] / base, ".2f") for e in engines if e != "datafusion"))
    base = totals["datafusion"]
    print(f"{'total':<6}" + "".join(cell(totals[e]) for e in engines) + "".join(
        cell(totals[e] and totals[e] / base, ".2f") for e in engines if e != "datafusion"))
    print("answers:", "all equal to DuckDB's" if not wrong else f"WRONG: {', '.join(wrong)}")


def cell(value, spec=".3f"):
    return f"{'n/a':>16}" if value is None else f"{value:>16{spec}}"


if __name__ == "__main__":
    main()
