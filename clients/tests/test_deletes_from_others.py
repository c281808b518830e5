"""Row-level deletes written by another engine: a position delete file committed with
pyiceberg's lower-level API (its own writers of Parquet, manifests and manifest lists).
Floe reads the table without the deleted rows, as pyiceberg does; Floe's DELETE and
compaction apply them when they rewrite the file."""

import time

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyiceberg.manifest import (
    DataFile,
    DataFileContent,
    FileFormat,
    ManifestContent,
    ManifestEntry,
    ManifestEntryStatus,
    ManifestWriterV2,
    write_manifest_list,
)
from pyiceberg.table.refs import SnapshotRef, SnapshotRefType
from pyiceberg.table.snapshots import Operation, Snapshot, Summary
from pyiceberg.table.update import AddSnapshotUpdate, AssertRefSnapshotId, SetSnapshotRefUpdate
from pyiceberg.typedef import Record

from conftest import query


class DeleteManifestWriter(ManifestWriterV2):
    """pyiceberg's v2 manifest writer, for a manifest of delete files."""

    def content(self) -> ManifestContent:
        return ManifestContent.DELETES

    @property
    def _meta(self) -> dict[str, str]:
        return {**super()._meta, "content": "deletes"}


def commit_position_deletes(table, data_file: str, positions: list[int]):
    """Commits, as pyiceberg's writers make them, a position delete file removing
    `positions` of `data_file`."""
    location = table.location().removeprefix("file://")
    delete_path = f"{location}/data/deletes-{time.time_ns()}.parquet"
    id_field = lambda name, type_, fid: pa.field(name, type_, False, {b"PARQUET:field_id": str(fid).encode()})
    schema = pa.schema([id_field("file_path", pa.string(), 2147483546), id_field("pos", pa.int64(), 2147483545)])
    pq.write_table(pa.table({"file_path": [data_file] * len(positions), "pos": positions}, schema=schema),
                   delete_path)

    metadata = table.metadata
    parent = table.current_snapshot()
    snapshot_id = time.time_ns() % (1 << 62)
    sequence_number = metadata.next_sequence_number()
    delete_file = DataFile.from_args(
        content=DataFileContent.POSITION_DELETES,
        file_path=f"file://{delete_path}",
        file_format=FileFormat.PARQUET,
        partition=Record(),
        record_count=len(positions),
        file_size_in_bytes=len(open(delete_path, "rb").read()),
    )
    delete_file.spec_id = table.spec().spec_id
    manifest_path = f"{location}/metadata/deletes-{snapshot_id}-m0.avro"
    with DeleteManifestWriter(table.spec(), table.schema(), table.io.new_output(f"file://{manifest_path}"),
                              snapshot_id, "deflate") as writer:
        writer.add(ManifestEntry.from_args(status=ManifestEntryStatus.ADDED, snapshot_id=snapshot_id,
                                           sequence_number=None, file_sequence_number=None,
                                           data_file=delete_file))
    manifests = parent.manifests(table.io) + [writer.to_manifest_file()]
    list_path = f"file://{location}/metadata/snap-{snapshot_id}.avro"
    with write_manifest_list(2, table.io.new_output(list_path), snapshot_id, parent.snapshot_id,
                             sequence_number, "deflate") as list_writer:
        list_writer.add_manifests(manifests)
    snapshot = Snapshot(
        snapshot_id=snapshot_id,
        parent_snapshot_id=parent.snapshot_id,
        sequence_number=sequence_number,
        timestamp_ms=int(time.time() * 1000),
        manifest_list=list_path,
        summary=Summary(Operation.DELETE, **{"added-delete-files": "1",
                                             "added-position-deletes": str(len(positions))}),
        schema_id=table.schema().schema_id,
    )
    with table.transaction() as tx:
        tx._apply(
            (AddSnapshotUpdate(snapshot=snapshot),
             SetSnapshotRefUpdate(ref_name="main", type=SnapshotRefType.BRANCH, snapshot_id=snapshot_id)),
            (AssertRefSnapshotId(ref="main", snapshot_id=parent.snapshot_id),),
        )


@pytest.fixture()
def with_deletes(cur, catalog, schema):
    """`schema.t`: ids 0..9 in one file, of which pyiceberg's position deletes remove
    ids 1, 3 and 8."""
    name = f"{schema}.t"
    cur.execute(f"CREATE TABLE {name} (id BIGINT, name STRING)")
    cur.execute(f"INSERT INTO {name} SELECT value, 'n' || CAST(value AS STRING) FROM generate_series(0, 9)")
    table = catalog.load_table(name)
    [data_file] = table.inspect.files()["file_path"].to_pylist()
    commit_position_deletes(table, data_file, [1, 3, 8])
    return name


def delete_files(catalog, table):
    return len(catalog.load_table(table).inspect.delete_files())


def ids(cur, table):
    return [r["id"] for r in query(cur, f"SELECT id FROM {table} ORDER BY id").to_pylist()]


def test_position_deletes_of_others_are_applied(cur, catalog, with_deletes):
    expected = [0, 2, 4, 5, 6, 7, 9]
    assert sorted(catalog.load_table(with_deletes).scan().to_arrow()["id"].to_pylist()) == expected
    assert ids(cur, with_deletes) == expected
    assert query(cur, f"SELECT count(*) AS n FROM {with_deletes}").to_pylist() == [{"n": 7}]
    assert query(cur, f"SELECT count(*) AS n FROM {with_deletes} WHERE id > 2").to_pylist() == [{"n": 5}]


def test_rewrites_apply_the_deletes_of_others(cur, catalog, with_deletes):
    assert delete_files(catalog, with_deletes) == 1
    cur.execute(f"DELETE FROM {with_deletes} WHERE id = 0")
    assert cur.fetchall() == [(1,)]
    assert ids(cur, with_deletes) == [2, 4, 5, 6, 7, 9]
    assert sorted(catalog.load_table(with_deletes).scan().to_arrow()["id"].to_pylist()) == [2, 4, 5, 6, 7, 9]
    # The delete file applied to the rewritten file only: it went with it.
    assert delete_files(catalog, with_deletes) == 0

    cur.execute(f"INSERT INTO {with_deletes} VALUES (20, 'x')")
    table = catalog.load_table(with_deletes)
    first = sorted(table.inspect.files()["file_path"].to_pylist())[0]
    commit_position_deletes(table, first, [0])
    before = ids(cur, with_deletes)
    assert len(before) == 6
    cur.execute(f"CALL floe.system.rewrite_data_files('{with_deletes}')")
    [(rewritten, added, _)] = cur.fetchall()
    assert (rewritten, added) == (2, 1)
    assert ids(cur, with_deletes) == before
    assert sorted(catalog.load_table(with_deletes).scan().to_arrow()["id"].to_pylist()) == before
    assert delete_files(catalog, with_deletes) == 0
    summary = catalog.load_table(with_deletes).current_snapshot().summary
    assert summary["removed-delete-files"] == "1"
