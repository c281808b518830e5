"""A SQL catalog on PostgreSQL shared by two coordinators (same catalog, same
warehouse): each sees the other's tables and commits, and concurrent INSERTs from both
all land."""

import threading

import pytest

from conftest import Server, query
from services import Postgres


@pytest.fixture(scope="module")
def coordinators(tmp_path_factory):
    root = tmp_path_factory.mktemp("shared")
    with Postgres(root / "pg") as pg:
        args = ["--catalog-uri", pg.uri, "--catalog-warehouse", f"file://{root / 'warehouse'}"]
        first = Server(root / "one", args)
        second = Server(root / "two", args)
        try:
            yield pg, first, second
        finally:
            first.stop()
            second.stop()


def test_two_coordinators_share_one_catalog(coordinators):
    pg, first, second = coordinators
    with first.connect() as conn, conn.cursor() as cur:
        cur.execute("CREATE SCHEMA shop")
        cur.execute("CREATE TABLE shop.orders (id BIGINT, who STRING)")
        cur.execute("INSERT INTO shop.orders VALUES (0, 'first')")
    with second.connect() as conn, conn.cursor() as cur:
        assert query(cur, "SELECT id, who FROM shop.orders").to_pylist() == [{"id": 0, "who": "first"}]

    def insert(server, name, start):
        with server.connect() as conn, conn.cursor() as cur:
            for i in range(start, start + 6):
                cur.execute(f"INSERT INTO shop.orders VALUES ({i}, '{name}')")

    threads = [threading.Thread(target=insert, args=(first, "first", 100)),
               threading.Thread(target=insert, args=(second, "second", 200))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for server in (first, second):
        with server.connect() as conn, conn.cursor() as cur:
            got = query(cur, "SELECT who, count(*) AS n FROM shop.orders GROUP BY who ORDER BY who")
            assert got.to_pylist() == [{"who": "first", "n": 7}, {"who": "second", "n": 6}]
    # One table in PostgreSQL, pointing at the last of 13 commits.
    row = pg.psql("SELECT table_namespace, table_name FROM iceberg_tables")
    assert row == "shop|orders"
