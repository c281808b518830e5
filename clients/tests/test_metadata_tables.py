"""Metadata tables by Trino's names (`"t$snapshots"`, …) through ADBC, checked against
what pyiceberg reports of the same table."""

import adbc_driver_manager
import pyarrow as pa
import pytest
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.transforms import IdentityTransform
from pyiceberg.types import LongType, NestedField, StringType

from conftest import query


@pytest.fixture()
def sales(catalog, schema):
    """`schema.sales`, partitioned by region, written by pyiceberg in three appends."""
    table = catalog.create_table(
        f"{schema}.sales",
        schema=Schema(
            NestedField(1, "id", LongType(), required=False),
            NestedField(2, "region", StringType(), required=False),
        ),
        partition_spec=PartitionSpec(PartitionField(2, 1000, IdentityTransform(), "region")),
        properties={"owner": "finance"},
    )
    arrow_schema = pa.schema([pa.field("id", pa.int64()), pa.field("region", pa.string())])
    for ids, region in [([1, 2, 3], "eu"), ([4, 5], "us"), ([6], "eu")]:
        table.append(pa.table({"id": ids, "region": [region] * len(ids)}, schema=arrow_schema))
    return catalog.load_table(f"{schema}.sales")


def test_snapshots_history_and_refs_match_pyiceberg(cur, schema, sales):
    expected = sales.inspect.snapshots().sort_by("committed_at")
    got = query(cur, f'SELECT * FROM {schema}."sales$snapshots" ORDER BY committed_at')
    assert got["snapshot_id"].to_pylist() == expected["snapshot_id"].to_pylist()
    assert got["parent_id"].to_pylist() == expected["parent_id"].to_pylist()
    assert got["operation"].to_pylist() == ["append"] * 3
    assert got["manifest_list"].to_pylist() == expected["manifest_list"].to_pylist()
    summary = dict(got["summary"].to_pylist()[-1])
    assert summary["total-records"] == "6" and summary["total-data-files"] == "3"

    history = query(cur, f'SELECT snapshot_id, is_current_ancestor FROM {schema}."sales$history"')
    assert history["snapshot_id"].to_pylist() == expected["snapshot_id"].to_pylist()
    assert history["is_current_ancestor"].to_pylist() == [True] * 3

    refs = query(cur, f'SELECT name, type, snapshot_id FROM {schema}."sales$refs"').to_pylist()
    assert refs == [{"name": "main", "type": "BRANCH", "snapshot_id": sales.current_snapshot().snapshot_id}]


def test_projection_and_filters_apply(cur, schema, sales):
    first = sales.inspect.snapshots().sort_by("committed_at")["snapshot_id"][0].as_py()
    got = query(cur, f'SELECT operation FROM {schema}."sales$snapshots" WHERE snapshot_id = {first}')
    assert got.column_names == ["operation"]
    assert got.to_pylist() == [{"operation": "append"}]
    # Joined with the table itself, as with any table.
    joined = query(
        cur,
        f'SELECT count(*) AS n FROM {schema}.sales s JOIN {schema}."sales$files" f '
        f"ON s.region = f.partition.region",
    )
    assert joined.to_pylist() == [{"n": 3 * 2 + 2 * 1 + 1 * 2}]


def test_files_manifests_and_partitions_match_pyiceberg(cur, schema, sales):
    files = query(cur, f'SELECT * FROM {schema}."sales$files" ORDER BY file_path')
    expected = sales.inspect.files().sort_by("file_path")
    assert files["file_path"].to_pylist() == expected["file_path"].to_pylist()
    assert files["record_count"].to_pylist() == expected["record_count"].to_pylist()
    assert files["file_size_in_bytes"].to_pylist() == expected["file_size_in_bytes"].to_pylist()
    assert files["file_format"].to_pylist() == ["PARQUET"] * 3
    assert files["content"].to_pylist() == [0] * 3
    assert [p["region"] for p in files["partition"].to_pylist()] == [
        p["region"] for p in expected["partition"].to_pylist()
    ]

    manifests = query(cur, f'SELECT path, added_files_count FROM {schema}."sales$manifests" ORDER BY path')
    expected_manifests = sales.inspect.manifests().sort_by("path")
    assert manifests["path"].to_pylist() == expected_manifests["path"].to_pylist()
    assert sum(manifests["added_files_count"].to_pylist()) == 3

    partitions = query(
        cur,
        f'SELECT partition.region AS region, record_count, file_count '
        f'FROM {schema}."sales$partitions" ORDER BY region',
    ).to_pylist()
    assert partitions == [
        {"region": "eu", "record_count": 4, "file_count": 2},
        {"region": "us", "record_count": 2, "file_count": 1},
    ]
    expected_partitions = {p["partition"]["region"]: p["record_count"] for p in sales.inspect.partitions().to_pylist()}
    assert expected_partitions == {"eu": 4, "us": 2}


def test_properties_and_unpartitioned_tables(cur, schema, sales):
    properties = dict(
        (r["key"], r["value"]) for r in query(cur, f'SELECT * FROM {schema}."sales$properties"').to_pylist()
    )
    assert properties["owner"] == "finance"
    assert properties == dict(sales.properties)

    cur.execute(f"CREATE TABLE {schema}.plain (id BIGINT)")
    assert query(cur, f'SELECT * FROM {schema}."plain$partitions"').num_rows == 0
    assert query(cur, f'SELECT * FROM {schema}."plain$snapshots"').num_rows == 0
    cur.execute(f"INSERT INTO {schema}.plain VALUES (1), (2)")
    partitions = query(cur, f'SELECT * FROM {schema}."plain$partitions"')
    assert partitions.column_names == ["record_count", "file_count", "total_size"]
    assert partitions.to_pylist()[0]["record_count"] == 2


def test_metadata_tables_are_read_only_and_need_their_table(cur, schema, sales):
    with pytest.raises(adbc_driver_manager.Error, match="read-only"):
        cur.execute(f'INSERT INTO {schema}."sales$snapshots" VALUES (1)')
    with pytest.raises(adbc_driver_manager.ProgrammingError, match=f"NOT_FOUND.*{schema}.nope'"):
        cur.execute(f'SELECT * FROM {schema}."nope$snapshots"')
    # A suffix that names no metadata table is an ordinary (missing) table name.
    with pytest.raises(adbc_driver_manager.ProgrammingError, match=r"NOT_FOUND.*sales\$nothing"):
        cur.execute(f'SELECT * FROM {schema}."sales$nothing"')
