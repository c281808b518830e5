"""Reading tables whose schema evolved under their data files: type promotion, nested
fields added/renamed/dropped, and identity-partition values that live only in metadata."""

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyiceberg.schema import Schema
from pyiceberg.types import (
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    NestedField,
    StringType,
    StructType,
)

from conftest import query


def test_pruning_keeps_files_written_before_int_to_long_promotion(cur, catalog, schema):
    iceberg_schema = Schema(
        NestedField(1, "i", IntegerType(), required=False),
        NestedField(2, "f", FloatType(), required=False),
    )
    table = catalog.create_table(f"{schema}.widened", iceberg_schema)
    for start in (1, 100, 1000):
        table.append(
            pa.table(
                {
                    "i": pa.array([start, start + 1, None], pa.int32()),
                    "f": pa.array([start + 0.1, float("nan"), None], pa.float32()),
                }
            )
        )
    with table.update_schema() as update:
        update.update_column("i", LongType())
        update.update_column("f", DoubleType())
    table = catalog.load_table(f"{schema}.widened")
    for start in (6_000_000_000, 7_000_000_000):
        table.append(
            pa.table(
                {
                    "i": pa.array([start, None], pa.int64()),
                    "f": pa.array([start / 2, None], pa.float64()),
                }
            )
        )
    all_i = [1, 2, 100, 101, 1000, 1001, 6_000_000_000, 7_000_000_000]

    def ids(where):
        rows = query(cur, f"SELECT i FROM {schema}.widened WHERE {where} ORDER BY i").to_pylist()
        return [r["i"] for r in rows]

    assert ids("i < 5000000000") == all_i[:6]
    assert ids("i < 100") == [1, 2]
    assert ids("i BETWEEN 2 AND 1000") == [2, 100, 101, 1000]
    assert ids("i <> 100") == [i for i in all_i if i != 100]
    assert ids("i > 1000") == [1001, 6_000_000_000, 7_000_000_000]
    assert ids("i = 1") == [1]
    assert ids("i IN (2, 7000000000)") == [2, 7_000_000_000]
    assert ids("NOT (i >= 101)") == [1, 2, 100]
    # A float widened to double compares as the double of the stored float (100.1f is
    # below 100.1); NaN sorts above every number.
    assert ids("f > 100.1") == [2, 101, 1000, 1001, 6_000_000_000, 7_000_000_000]
    assert ids("f = CAST(CAST(100.1 AS FLOAT) AS DOUBLE)") == [100]


def _struct_table(catalog, name):
    iceberg_schema = Schema(
        NestedField(1, "id", LongType(), required=False),
        NestedField(
            2,
            "s",
            StructType(
                NestedField(3, "a", IntegerType(), required=False),
                NestedField(4, "b", StringType(), required=False),
            ),
            required=False,
        ),
    )
    table = catalog.create_table(name, iceberg_schema)
    struct = pa.struct([pa.field("a", pa.int32()), pa.field("b", pa.string())])
    table.append(
        pa.table(
            {
                "id": pa.array([1, 2], pa.int64()),
                "s": pa.array([{"a": 10, "b": "x"}, None], struct),
            }
        )
    )
    return table


def test_field_added_to_a_struct_reads_as_null_from_old_files(cur, catalog, schema):
    name = f"{schema}.nested_add"
    table = _struct_table(catalog, name)
    with table.update_schema() as update:
        update.add_column(("s", "c"), StringType())
    rows = query(cur, f"SELECT id, s FROM {name} ORDER BY id").to_pylist()
    assert rows == [
        {"id": 1, "s": {"a": 10, "b": "x", "c": None}},
        {"id": 2, "s": None},
    ]

    table = catalog.load_table(name)
    struct = pa.struct(
        [pa.field("a", pa.int32()), pa.field("b", pa.string()), pa.field("c", pa.string())]
    )
    table.append(
        pa.table(
            {"id": pa.array([3], pa.int64()), "s": pa.array([{"a": 30, "b": "z", "c": "new"}], struct)}
        )
    )
    rows = query(cur, f"SELECT id, s['c'] AS c, s['a'] AS a FROM {name} ORDER BY id").to_pylist()
    assert rows == [{"id": 1, "c": None, "a": 10}, {"id": 2, "c": None, "a": None}, {"id": 3, "c": "new", "a": 30}]
    assert query(cur, f"SELECT id FROM {name} WHERE s['c'] IS NULL ORDER BY id").to_pylist() == [
        {"id": 1},
        {"id": 2},
    ]


def test_nested_field_renamed_and_dropped(cur, catalog, schema):
    name = f"{schema}.nested_rename"
    table = _struct_table(catalog, name)
    with table.update_schema() as update:
        update.rename_column("s.b", "bee")
    rows = query(cur, f"SELECT id, s FROM {name} ORDER BY id").to_pylist()
    assert rows == [{"id": 1, "s": {"a": 10, "bee": "x"}}, {"id": 2, "s": None}]

    table = catalog.load_table(name)
    with table.update_schema() as update:
        update.delete_column("s.a")
    rows = query(cur, f"SELECT id, s FROM {name} ORDER BY id").to_pylist()
    assert rows == [{"id": 1, "s": {"bee": "x"}}, {"id": 2, "s": None}]

    # The dropped name re-added is a new field: old files have no value for it.
    table = catalog.load_table(name)
    with table.update_schema() as update:
        update.add_column(("s", "a"), IntegerType())
    rows = query(cur, f"SELECT id, s FROM {name} ORDER BY id").to_pylist()
    assert rows == [{"id": 1, "s": {"bee": "x", "a": None}}, {"id": 2, "s": None}]


def test_nested_fields_match_by_id_in_lists_after_swapped_names_and_promotion(cur, catalog, schema):
    name = f"{schema}.nested_list"
    element = StructType(
        NestedField(3, "a", IntegerType(), required=False),
        NestedField(4, "b", IntegerType(), required=False),
    )
    from pyiceberg.types import ListType

    table = catalog.create_table(
        name,
        Schema(
            NestedField(1, "id", LongType(), required=False),
            NestedField(2, "l", ListType(5, element, element_required=False), required=False),
        ),
    )
    arrow_element = pa.struct([pa.field("a", pa.int32()), pa.field("b", pa.int32())])
    table.append(
        pa.table(
            {
                "id": pa.array([1], pa.int64()),
                "l": pa.array([[{"a": 1, "b": 2}, None]], pa.list_(arrow_element)),
            }
        )
    )
    # Swap the names (a cast by name would swap the values), widen one, add one.
    with table.update_schema() as update:
        update.rename_column("l.element.a", "tmp")
    table = catalog.load_table(name)
    with table.update_schema() as update:
        update.rename_column("l.element.b", "a")
    table = catalog.load_table(name)
    with table.update_schema() as update:
        update.rename_column("l.element.tmp", "b")
        update.update_column("l.element.a", LongType())
        update.add_column(("l", "element", "c"), StringType())
    rows = query(cur, f"SELECT id, l FROM {name}").to_pylist()
    assert rows == [{"id": 1, "l": [{"b": 1, "a": 2, "c": None}, None]}]


def _add_data_file(table, path, partition, record_count):
    """Registers a Parquet file with the given partition tuple, as migrations do."""
    from pyiceberg.manifest import DataFile, DataFileContent, FileFormat
    from pyiceberg.typedef import Record

    data_file = DataFile.from_args(
        content=DataFileContent.DATA,
        file_path=path,
        file_format=FileFormat.PARQUET,
        partition=Record(*partition),
        record_count=record_count,
        file_size_in_bytes=len(table.io.new_input(path)),
        spec_id=table.metadata.default_spec_id,
    )
    with table.transaction() as tx:
        with tx.update_snapshot().fast_append() as append:
            append.append_data_file(data_file)


def test_identity_partition_values_fill_columns_missing_from_files(cur, catalog, schema, tmp_path):
    from pyiceberg.partitioning import PartitionField, PartitionSpec
    from pyiceberg.table.name_mapping import create_mapping_from_schema
    from pyiceberg.transforms import IdentityTransform

    iceberg_schema = Schema(
        NestedField(1, "id", LongType(), required=False),
        NestedField(2, "region", StringType(), required=False),
        NestedField(3, "year", IntegerType(), required=False),
    )
    spec = PartitionSpec(
        PartitionField(2, 1000, IdentityTransform(), "region"),
        PartitionField(3, 1001, IdentityTransform(), "year"),
    )
    name = f"{schema}.migrated"
    table = catalog.create_table(name, iceberg_schema, partition_spec=spec)
    with table.transaction() as tx:
        tx.set_properties(
            **{"schema.name-mapping.default": create_mapping_from_schema(iceberg_schema).model_dump_json()}
        )
    table = catalog.load_table(name)

    # With field ids, without the partition columns.
    with_ids = tmp_path / "eu-2024.parquet"
    ids_schema = pa.schema([pa.field("id", pa.int64(), metadata={"PARQUET:field_id": "1"})])
    pq.write_table(pa.table({"id": pa.array([1, 2], pa.int64())}, schema=ids_schema), with_ids)
    _add_data_file(table, f"file://{with_ids}", ("eu", 2024), 2)
    # Without field ids (read through the name mapping), one partition column present.
    table = catalog.load_table(name)
    no_ids = tmp_path / "us-2023.parquet"
    pq.write_table(pa.table({"id": pa.array([3], pa.int64()), "year": pa.array([2023], pa.int32())}), no_ids)
    _add_data_file(table, f"file://{no_ids}", ("us", 2023), 1)

    rows = query(cur, f"SELECT id, region, year FROM {name} ORDER BY id").to_pylist()
    assert rows == [
        {"id": 1, "region": "eu", "year": 2024},
        {"id": 2, "region": "eu", "year": 2024},
        {"id": 3, "region": "us", "year": 2023},
    ]
    assert query(cur, f"SELECT id FROM {name} WHERE region = 'eu' AND year > 2000 ORDER BY id").to_pylist() == [
        {"id": 1},
        {"id": 2},
    ]
    assert query(cur, f"SELECT region, count(*) AS n FROM {name} GROUP BY region ORDER BY region").to_pylist() == [
        {"region": "eu", "n": 2},
        {"region": "us", "n": 1},
    ]


def test_list_and_map_columns_added_later_read_as_null_from_old_files(cur, catalog, schema):
    from pyiceberg.types import ListType, MapType

    name = f"{schema}.nested_columns_added"
    table = catalog.create_table(name, Schema(NestedField(1, "id", LongType(), required=False)))
    table.append(pa.table({"id": pa.array([1], pa.int64())}))
    with table.update_schema() as update:
        update.add_column("l", ListType(3, IntegerType(), element_required=False))
        update.add_column("m", MapType(4, StringType(), 5, IntegerType(), value_required=False))
        update.add_column("st", StructType(NestedField(6, "a", ListType(7, IntegerType()), required=False)))
    table = catalog.load_table(name)
    table.append(
        pa.table(
            {
                "id": pa.array([2], pa.int64()),
                "l": pa.array([[1, None]], pa.list_(pa.int32())),
                "m": pa.array([[("k", 1)]], pa.map_(pa.string(), pa.int32())),
                "st": pa.array([{"a": [5]}], pa.struct([pa.field("a", pa.list_(pa.field("element", pa.int32(), nullable=False)))])),
            }
        )
    )
    rows = query(cur, f"SELECT * FROM {name} ORDER BY id").to_pylist()
    assert rows == [
        {"id": 1, "l": None, "m": None, "st": None},
        {"id": 2, "l": [1, None], "m": [("k", 1)], "st": {"a": [5]}},
    ]


def test_identity_partition_value_from_before_promotion_is_widened(cur, catalog, schema, tmp_path):
    from pyiceberg.partitioning import PartitionField, PartitionSpec
    from pyiceberg.transforms import IdentityTransform

    name = f"{schema}.migrated_promoted"
    table = catalog.create_table(
        name,
        Schema(NestedField(1, "id", LongType(), required=False), NestedField(2, "year", IntegerType(), required=False)),
        partition_spec=PartitionSpec(PartitionField(2, 1000, IdentityTransform(), "year")),
    )
    path = tmp_path / "old.parquet"
    ids_schema = pa.schema([pa.field("id", pa.int64(), metadata={"PARQUET:field_id": "1"})])
    pq.write_table(pa.table({"id": pa.array([1], pa.int64())}, schema=ids_schema), path)
    _add_data_file(table, f"file://{path}", (2024,), 1)
    with catalog.load_table(name).update_schema() as update:
        update.update_column("year", LongType())
    catalog.load_table(name).append(
        pa.table({"id": pa.array([2], pa.int64()), "year": pa.array([5_000_000_000], pa.int64())})
    )
    assert query(cur, f"SELECT * FROM {name} ORDER BY id").to_pylist() == [
        {"id": 1, "year": 2024},
        {"id": 2, "year": 5_000_000_000},
    ]
    assert query(cur, f"SELECT id FROM {name} WHERE year > 2000 ORDER BY id").to_pylist() == [{"id": 1}, {"id": 2}]
