"""Prepared statements with parameters, the way ADBC binds them: `execute(sql, params)`
(DoPut of the parameter row, then the returned handle) and `executemany`."""

import time

import adbc_driver_manager
import pytest

from conftest import query


def test_bound_parameters_in_queries_and_inserts(cur, schema):
    cur.execute(f"CREATE TABLE {schema}.people (id BIGINT NOT NULL, name STRING)")
    cur.execute(f"INSERT INTO {schema}.people VALUES ($1, $2)", (1, "O'Brien"))
    cur.executemany(f"INSERT INTO {schema}.people VALUES ($1, $2)", [(2, "bo"), (3, None), (4, "dee")])

    cur.execute(f"SELECT name FROM {schema}.people WHERE id = $1", (1,))
    assert cur.fetch_arrow_table().to_pylist() == [{"name": "O'Brien"}]
    cur.execute(f"SELECT id FROM {schema}.people WHERE id > ? AND name IS NOT NULL ORDER BY id", (1,))
    assert [r["id"] for r in cur.fetch_arrow_table().to_pylist()] == [2, 4]
    cur.execute("SELECT $1 + 1 AS answer", (41,))
    assert cur.fetch_arrow_table().to_pylist() == [{"answer": 42}]
    # The same prepared statement, executed again with other values.
    for wanted in (2, 4):
        cur.execute(f"SELECT name FROM {schema}.people WHERE id = $1", (wanted,))
        assert cur.fetch_arrow_table().num_rows == 1
    assert query(cur, f"SELECT count(*) AS n FROM {schema}.people").to_pylist() == [{"n": 4}]


def test_parameter_errors_are_the_users(cur, schema):
    cur.execute(f"CREATE TABLE {schema}.strict (id BIGINT NOT NULL)")
    with pytest.raises(adbc_driver_manager.Error, match="NOT NULL column 'id'"):
        cur.execute(f"INSERT INTO {schema}.strict VALUES ($1)", (None,))
    assert query(cur, f"SELECT count(*) AS n FROM {schema}.strict").to_pylist() == [{"n": 0}]


def test_prepare_reports_the_parameter_types(cur, schema):
    cur.execute(f"CREATE TABLE {schema}.typed (id BIGINT NOT NULL, name STRING)")
    parameters = cur.adbc_prepare(f"SELECT name FROM {schema}.typed WHERE id = $1 AND name = $2")
    assert parameters.names == ["$1", "$2"]
    assert [str(t) for t in parameters.types] == ["int64", "string"]


def test_executemany_insert_commits_once(cur, catalog, schema):
    cur.execute(f"CREATE TABLE {schema}.many (id BIGINT NOT NULL, label STRING)")
    rows = [(i, f"row {i}") for i in range(200)]
    cur.executemany(f"INSERT INTO {schema}.many (label, id) VALUES (?, ?)", [(label, i) for i, label in rows])
    assert len(catalog.load_table(f"{schema}.many").snapshots()) == 1
    got = query(cur, f"SELECT id, label FROM {schema}.many ORDER BY id").to_pylist()
    assert got == [{"id": i, "label": label} for i, label in rows]


def test_a_prepared_query_sees_the_table_as_it_is_when_it_runs(conn, cur, schema):
    """A query without parameters runs the plan made when preparing only on its first
    execution within a second; later executions plan again and see later commits."""
    cur.execute(f"CREATE TABLE {schema}.growing (id BIGINT)")
    cur.execute(f"INSERT INTO {schema}.growing VALUES (1)")
    sql = f"SELECT count(*) AS n FROM {schema}.growing"

    def insert(value):
        with conn.cursor() as other:
            other.execute(f"INSERT INTO {schema}.growing VALUES ({value})")

    cur.adbc_prepare(sql)
    insert(2)
    cur.execute(sql)  # the first execution, at once: the snapshot pinned when preparing
    assert cur.fetch_arrow_table().to_pylist() == [{"n": 1}]
    cur.execute(sql)  # executed again: planned again
    assert cur.fetch_arrow_table().to_pylist() == [{"n": 2}]

    cur.adbc_prepare(sql)
    insert(3)
    time.sleep(1.2)
    cur.execute(sql)  # too late for the prepared plan
    assert cur.fetch_arrow_table().to_pylist() == [{"n": 3}]
