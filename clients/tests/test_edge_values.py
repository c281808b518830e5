"""Values at the edges: partition values that look like paths, timestamps outside the
nanosecond range, UUIDs written as strings, data files Floe cannot read."""

import datetime
import uuid

import adbc_driver_manager
import pytest

from conftest import query


def data_dirs(catalog, schema, name):
    table = catalog.load_table(f"{schema}.{name}")
    return sorted(
        task.file.file_path.rsplit("/", 2)[-2] for task in table.scan().plan_files()
    )


def test_partition_values_are_escaped_in_paths(cur, catalog, schema):
    cur.execute(f"CREATE TABLE {schema}.regions (id INT, region STRING) PARTITIONED BY (region)")
    values = ["a/b=c", "x y%", "ünï", "plain"]
    rows = ", ".join(f"({i}, '{v}')" for i, v in enumerate(values)) + ", (9, NULL)"
    cur.execute(f"INSERT INTO {schema}.regions VALUES {rows}")
    assert data_dirs(catalog, schema, "regions") == sorted(
        ["region=a%2Fb%3Dc", "region=x+y%25", "region=%C3%BCn%C3%AF", "region=plain", "region=null"]
    )
    got = query(cur, f"SELECT id FROM {schema}.regions WHERE region = 'a/b=c'").to_pylist()
    assert got == [{"id": 0}]
    by_pyiceberg = catalog.load_table(f"{schema}.regions").scan().to_arrow()
    assert sorted(by_pyiceberg.column("region").to_pylist(), key=str) == sorted(values + [None], key=str)


def test_timestamps_outside_the_nanosecond_range(cur, catalog, schema):
    cur.execute(f"CREATE TABLE {schema}.ages (ts TIMESTAMP, tz TIMESTAMP WITH TIME ZONE, d DATE)")
    cur.execute(
        f"INSERT INTO {schema}.ages VALUES "
        f"(TIMESTAMP '0001-01-01 00:00:00', TIMESTAMP '9999-12-31 23:59:59.999999', DATE '0001-01-01'), "
        f"(CAST('1500-06-15 12:00:00' AS TIMESTAMP), '2262-04-12 00:00:00'::timestamp, DATE '9999-12-31')"
    )
    old = query(cur, f"SELECT ts FROM {schema}.ages WHERE ts < TIMESTAMP '1000-01-01 00:00:00'")
    assert old.to_pylist() == [{"ts": datetime.datetime(1, 1, 1)}]
    assert query(cur, "SELECT TIMESTAMP '9999-12-31 23:59:59' AS t").to_pylist() == [
        {"t": datetime.datetime(9999, 12, 31, 23, 59, 59)}
    ]
    by_pyiceberg = catalog.load_table(f"{schema}.ages").scan().to_arrow().sort_by("ts")
    assert by_pyiceberg.column("ts").to_pylist() == [datetime.datetime(1, 1, 1), datetime.datetime(1500, 6, 15, 12)]
    assert by_pyiceberg.column("tz").to_pylist()[0] == datetime.datetime(
        9999, 12, 31, 23, 59, 59, 999999, tzinfo=datetime.timezone.utc
    )


def test_uuids_written_as_strings(cur, catalog, schema):
    a, b = uuid.UUID("f47ac10b-58cc-4372-a567-0e02b2c3d479"), uuid.UUID(int=2)
    cur.execute(f"CREATE TABLE {schema}.ids (id UUID, n INT) PARTITIONED BY (bucket(4, id))")
    cur.execute(f"INSERT INTO {schema}.ids VALUES ('{a}', 1), (NULL, 2)")
    cur.execute(f"INSERT INTO {schema}.ids (n, id) VALUES (3, CAST('{{{b}}}' AS UUID))")

    def ns(where):
        return [r["n"] for r in query(cur, f"SELECT n FROM {schema}.ids WHERE {where} ORDER BY n").to_pylist()]

    assert ns(f"id = '{a}'") == [1]
    assert ns(f"'{a}' = id") == [1]
    assert ns(f"id IN ('{a}', '{b.hex}')") == [1, 3]
    assert ns(f"id <> UUID '{a}'") == [3]
    with pytest.raises(adbc_driver_manager.Error, match="'nope' is not a UUID"):
        cur.execute(f"INSERT INTO {schema}.ids VALUES ('nope', 4)")
    by_pyiceberg = catalog.load_table(f"{schema}.ids").scan().to_arrow().sort_by("n")
    got = [None if v is None else uuid.UUID(bytes=v) if isinstance(v, bytes) else uuid.UUID(str(v))
           for v in by_pyiceberg.column("id").to_pylist()]
    assert got == [a, None, b]


def test_orc_data_files_are_refused_by_name(cur, catalog, schema, tmp_path):
    import pyarrow as pa
    import pyarrow.orc as orc
    from pyiceberg.manifest import DataFile, DataFileContent, FileFormat
    from pyiceberg.typedef import Record

    cur.execute(f"CREATE TABLE {schema}.mixed (id BIGINT)")
    cur.execute(f"INSERT INTO {schema}.mixed VALUES (1)")
    path = tmp_path / "part.orc"
    orc.write_table(pa.table({"id": pa.array([2], pa.int64())}), str(path))
    table = catalog.load_table(f"{schema}.mixed")
    data_file = DataFile.from_args(
        content=DataFileContent.DATA,
        file_path=f"file://{path}",
        file_format=FileFormat.ORC,
        partition=Record(),
        record_count=1,
        file_size_in_bytes=path.stat().st_size,
    )
    data_file.spec_id = table.spec().spec_id
    with table.transaction() as tx:
        with tx.update_snapshot().fast_append() as append:
            append.append_data_file(data_file)
    with pytest.raises(adbc_driver_manager.Error) as err:
        query(cur, f"SELECT * FROM {schema}.mixed")
    assert "Unimplemented" in str(err.value) and "Parquet data files only" in str(err.value)
    assert "part.orc" in str(err.value)
