"""The 22 TPC-H queries at scale 0.1 through ADBC, on a coordinator with two `floe executor`
processes, each answer equal to DuckDB's on the same Parquet data files."""

import sys
from pathlib import Path

import pytest

from conftest import Server, query

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import tpch  # noqa: E402


@pytest.fixture(scope="module")
def tpch_server(tmp_path_factory):
    root = tmp_path_factory.mktemp("tpch")
    data = tpch.generate(0.1, root / "sf0.1")
    server = Server(root / "floe", ["--local-executors", "0", "--local-query-max-bytes", "0", "--target-partitions", "4"])
    executors = [server.start_executor(root / f"executor{i}.log", slots=2) for i in range(2)]
    try:
        files = tpch.load(server.pyiceberg(), data)
        duck = tpch.duckdb_connection(root / "duckdb-extensions")
        tpch.attach_files(duck, files)
        yield server, duck
    finally:
        for executor in executors:
            executor.stop()
        server.stop()


@pytest.mark.parametrize("number", range(1, 23))
def test_tpch_query_answers_as_duckdb_does(tpch_server, number):
    server, duck = tpch_server
    sql = tpch.queries(duck)[number]
    expected = tpch.rows(duck.sql(sql).to_arrow_table())
    with server.connect() as conn, conn.cursor() as cur:
        got = tpch.rows(query(cur, sql))
    assert tpch.same_rows(got, expected, ordered=False), f"q{number}: {got[:5]} != {expected[:5]}"
