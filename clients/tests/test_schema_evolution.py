"""Schema changes made by another engine are seen by Floe's next statement, without a
restart: no table schema outlives a statement."""

import pyarrow as pa
from pyiceberg.types import StringType

from conftest import query


def test_column_added_by_pyiceberg_appears_in_the_next_select(cur, catalog, schema):
    cur.execute(f"CREATE TABLE {schema}.evolving (id BIGINT, name STRING)")
    cur.execute(f"INSERT INTO {schema}.evolving VALUES (1, 'old')")
    assert query(cur, f"SELECT * FROM {schema}.evolving").schema.names == ["id", "name"]

    table = catalog.load_table(f"{schema}.evolving")
    with table.update_schema() as update:
        update.add_column("email", StringType())
    # Before any new snapshot: the column is there, NULL everywhere.
    rows = query(cur, f"SELECT * FROM {schema}.evolving").to_pylist()
    assert rows == [{"id": 1, "name": "old", "email": None}]

    table = catalog.load_table(f"{schema}.evolving")
    table.append(
        pa.table(
            {
                "id": pa.array([2], pa.int64()),
                "name": pa.array(["new"], pa.string()),
                "email": pa.array(["new@example.com"], pa.string()),
            }
        )
    )
    result = query(cur, f"SELECT * FROM {schema}.evolving ORDER BY id")
    assert result.schema.names == ["id", "name", "email"]
    assert result.to_pylist() == [
        {"id": 1, "name": "old", "email": None},
        {"id": 2, "name": "new", "email": "new@example.com"},
    ]
    # Filters on the new column, and Floe writing to the evolved table.
    assert query(cur, f"SELECT id FROM {schema}.evolving WHERE email IS NULL").to_pylist() == [{"id": 1}]
    cur.execute(f"INSERT INTO {schema}.evolving VALUES (3, 'floe', 'f@example.com')")
    by_pyiceberg = catalog.load_table(f"{schema}.evolving").scan().to_arrow().sort_by("id")
    assert by_pyiceberg["email"].to_pylist() == [None, "new@example.com", "f@example.com"]


def test_dropped_column_disappears_from_the_next_select(cur, catalog, schema):
    cur.execute(f"CREATE TABLE {schema}.shrinking (id BIGINT, gone STRING, kept INT)")
    cur.execute(f"INSERT INTO {schema}.shrinking VALUES (1, 'x', 10)")
    table = catalog.load_table(f"{schema}.shrinking")
    with table.update_schema() as update:
        update.delete_column("gone")
    assert query(cur, f"SELECT * FROM {schema}.shrinking").to_pylist() == [{"id": 1, "kept": 10}]
