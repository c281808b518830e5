"""Time travel through ADBC: `t VERSION AS OF <snapshot id>` and `t TIMESTAMP AS OF
'<timestamp>'`, each read with that snapshot's schema, checked against pyiceberg reading
the same snapshot."""

import adbc_driver_manager
import pytest
from pyiceberg.types import StringType

from conftest import query


@pytest.fixture()
def evolved(cur, catalog, schema):
    """`schema.evolved`: snapshot 1 has ids 1, 2 and one column; a column `note` is
    added; snapshot 2 adds id 3 with a note. Returns the snapshots, oldest first."""
    cur.execute(f"CREATE TABLE {schema}.evolved (id BIGINT)")
    cur.execute(f"INSERT INTO {schema}.evolved VALUES (1), (2)")
    table = catalog.load_table(f"{schema}.evolved")
    with table.update_schema() as update:
        update.add_column("note", StringType())
    cur.execute(f"INSERT INTO {schema}.evolved VALUES (3, 'new')")
    snapshots = query(
        cur, f'SELECT snapshot_id, committed_at FROM {schema}."evolved$snapshots" ORDER BY committed_at'
    ).to_pylist()
    assert len(snapshots) == 2
    return snapshots


def test_version_as_of_reads_that_snapshot_with_its_schema(cur, catalog, schema, evolved):
    first = evolved[0]["snapshot_id"]
    old = query(cur, f"SELECT * FROM {schema}.evolved VERSION AS OF {first} ORDER BY id")
    assert old.column_names == ["id"]
    assert old.to_pylist() == [{"id": 1}, {"id": 2}]
    expected = catalog.load_table(f"{schema}.evolved").scan(snapshot_id=first).to_arrow()
    assert sorted(expected["id"].to_pylist()) == old["id"].to_pylist()

    now = query(cur, f"SELECT * FROM {schema}.evolved ORDER BY id")
    assert now.column_names == ["id", "note"]
    assert now.num_rows == 3
    # Both versions in one statement.
    both = query(
        cur,
        f"SELECT (SELECT count(*) FROM {schema}.evolved) AS now, "
        f"(SELECT count(*) FROM {schema}.evolved VERSION AS OF {first}) AS then",
    )
    assert both.to_pylist() == [{"now": 3, "then": 2}]


def test_timestamp_as_of_reads_the_snapshot_current_then(cur, schema, evolved):
    first, second = evolved
    at_first = first["committed_at"].strftime("%Y-%m-%d %H:%M:%S.%f+00:00")
    got = query(cur, f"SELECT count(*) AS n FROM {schema}.evolved TIMESTAMP AS OF '{at_first}'")
    assert got.to_pylist() == [{"n": 2}]
    at_second = second["committed_at"].strftime("%Y-%m-%dT%H:%M:%S.%f+00:00")
    got = query(cur, f"SELECT count(*) AS n FROM {schema}.evolved TIMESTAMP AS OF TIMESTAMP '{at_second}'")
    assert got.to_pylist() == [{"n": 3}]


def test_versions_that_do_not_exist_are_not_found(cur, schema, evolved):
    with pytest.raises(adbc_driver_manager.ProgrammingError, match="NOT_FOUND.*no snapshot 42"):
        cur.execute(f"SELECT * FROM {schema}.evolved VERSION AS OF 42")
    with pytest.raises(adbc_driver_manager.ProgrammingError, match="NOT_FOUND.*no snapshot at or before"):
        cur.execute(f"SELECT * FROM {schema}.evolved TIMESTAMP AS OF '2001-01-01 00:00:00'")
    with pytest.raises(adbc_driver_manager.ProgrammingError, match="INVALID_ARGUMENT.*TIMESTAMP AS OF"):
        cur.execute(f"SELECT * FROM {schema}.evolved TIMESTAMP AS OF 'yesterday-ish'")


def test_at_and_before_stay_table_aliases(cur, schema, evolved):
    # sqlparser's table versions also take `t AT(…)` and `t BEFORE(…)`; Floe keeps the
    # generic meaning of these words where the statement has one.
    for alias in ("at", "before", "version"):
        got = query(cur, f"SELECT {alias}.id FROM {schema}.evolved {alias} ORDER BY id")
        assert got["id"].to_pylist() == [1, 2, 3]


def test_tags_and_branches_are_made_read_and_dropped(cur, catalog, schema, evolved):
    first, second = (s["snapshot_id"] for s in evolved)
    table = f"{schema}.evolved"
    cur.execute(f"ALTER TABLE {table} CREATE TAG v1 AS OF VERSION {first} RETAIN 30 DAYS")
    cur.execute(f"ALTER TABLE {table} CREATE BRANCH audit")
    refs = catalog.load_table(table).refs()
    assert refs["v1"].snapshot_id == first and refs["v1"].snapshot_ref_type.value == "tag"
    assert refs["v1"].max_ref_age_ms == 30 * 24 * 3600 * 1000
    assert refs["audit"].snapshot_id == second and refs["audit"].snapshot_ref_type.value == "branch"

    cur.execute(f"INSERT INTO {table} VALUES (4, 'later')")
    # A tag reads its snapshot with that snapshot's schema; a branch its head.
    tagged = query(cur, f"SELECT * FROM {table} VERSION AS OF 'v1' ORDER BY id")
    assert tagged.column_names == ["id"] and tagged["id"].to_pylist() == [1, 2]
    assert query(cur, f"SELECT count(*) AS n FROM {table} VERSION AS OF 'audit'").to_pylist() == [{"n": 3}]
    # pyiceberg's tags read the same way.
    catalog.load_table(table).manage_snapshots().create_tag(second, "from_pyiceberg").commit()
    assert query(cur, f"SELECT count(*) AS n FROM {table} VERSION AS OF 'from_pyiceberg'").to_pylist() == [{"n": 3}]

    with pytest.raises(adbc_driver_manager.Error, match="ALREADY_EXISTS"):
        cur.execute(f"ALTER TABLE {table} CREATE TAG v1")
    cur.execute(f"ALTER TABLE {table} CREATE TAG IF NOT EXISTS v1")
    cur.execute(f"ALTER TABLE {table} CREATE OR REPLACE TAG v1 AS OF VERSION {second}")
    assert catalog.load_table(table).refs()["v1"].snapshot_id == second
    with pytest.raises(adbc_driver_manager.ProgrammingError, match="is a tag, not a branch"):
        cur.execute(f"ALTER TABLE {table} DROP BRANCH v1")
    cur.execute(f"ALTER TABLE {table} DROP TAG v1")
    cur.execute(f"ALTER TABLE {table} DROP BRANCH IF EXISTS nothing")
    assert set(catalog.load_table(table).refs()) == {"main", "audit", "from_pyiceberg"}
    with pytest.raises(adbc_driver_manager.Error, match="NOT_FOUND.*no branch or tag 'v1'"):
        cur.execute(f"SELECT * FROM {table} VERSION AS OF 'v1'")
    with pytest.raises(adbc_driver_manager.ProgrammingError, match="main"):
        cur.execute(f"ALTER TABLE {table} DROP BRANCH main")
