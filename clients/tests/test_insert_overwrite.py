"""`INSERT OVERWRITE` through ADBC: the whole table when it is unpartitioned, exactly
the partitions written when it is partitioned (dynamic overwrite), in one `overwrite`
snapshot that pyiceberg reads the same way; a failed overwrite changes nothing."""

import adbc_driver_manager
import pytest

from conftest import query


def rows(cur, table):
    return query(cur, f"SELECT id, region FROM {table} ORDER BY id").to_pylist()


def pyiceberg_rows(catalog, table):
    return sorted(catalog.load_table(table).scan().to_arrow().to_pylist(), key=lambda r: r["id"])


@pytest.fixture(params=["unpartitioned", "partitioned"])
def target(request, cur, schema):
    partitioning = "PARTITIONED BY (region)" if request.param == "partitioned" else ""
    name = f"{schema}.target"
    cur.execute(f"CREATE TABLE {name} (id BIGINT, region STRING) {partitioning}")
    cur.execute(f"INSERT INTO {name} VALUES (1, 'eu'), (2, 'eu'), (3, 'us')")
    return name, request.param


def test_overwrite_replaces_the_table_or_the_partitions_written(cur, catalog, target):
    name, kind = target
    cur.execute(f"INSERT OVERWRITE {name} VALUES (10, 'eu'), (11, 'asia')")
    if kind == "unpartitioned":
        expected = [{"id": 10, "region": "eu"}, {"id": 11, "region": "asia"}]
    else:  # us was not written to: it stays
        expected = [{"id": 3, "region": "us"}, {"id": 10, "region": "eu"}, {"id": 11, "region": "asia"}]
    assert rows(cur, name) == expected
    assert pyiceberg_rows(catalog, name) == expected
    table = catalog.load_table(name)
    history = sorted(table.snapshots(), key=lambda s: s.sequence_number)
    assert [s.summary.operation.value for s in history] == ["append", "overwrite"]
    assert table.current_snapshot().snapshot_id == history[-1].snapshot_id


def test_the_hive_form_and_a_query_source(cur, catalog, schema, target):
    name, kind = target
    cur.execute(f"CREATE TABLE {schema}.src (id BIGINT, region STRING)")
    cur.execute(f"INSERT INTO {schema}.src VALUES (7, 'us')")
    cur.execute(f"INSERT OVERWRITE TABLE {name} SELECT id, region FROM {schema}.src")
    expected = [{"id": 7, "region": "us"}]
    if kind == "partitioned":
        expected = [{"id": 1, "region": "eu"}, {"id": 2, "region": "eu"}] + expected
    assert rows(cur, name) == expected
    assert pyiceberg_rows(catalog, name) == expected


def test_an_empty_overwrite_empties_only_an_unpartitioned_table(cur, target):
    name, kind = target
    cur.execute(f"INSERT OVERWRITE {name} SELECT id, region FROM {name} WHERE id < 0")
    assert len(rows(cur, name)) == (0 if kind == "unpartitioned" else 3)


def test_a_failed_overwrite_changes_nothing(cur, catalog, target):
    name, _ = target
    before = [s.snapshot_id for s in catalog.load_table(name).snapshots()]
    with pytest.raises(adbc_driver_manager.Error, match="(?i)divide by zero"):
        cur.execute(f"INSERT OVERWRITE {name} SELECT id / (id - 2), region FROM {name}")
    assert [s.snapshot_id for s in catalog.load_table(name).snapshots()] == before
    assert len(rows(cur, name)) == 3
