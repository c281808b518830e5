"""Table maintenance through ADBC: `CALL floe.system.rewrite_data_files` compacts small
files into one `replace` snapshot with the same rows, `expire_snapshots` drops old
snapshots and deletes the files only they used, `remove_orphan_files` deletes what
nothing references; pyiceberg reads the result."""

import json
import os
import time
from pathlib import Path

import adbc_driver_manager
import pytest

from conftest import query


def call(cur, sql):
    cur.execute(sql)
    return cur.fetch_arrow_table().to_pylist()


@pytest.fixture()
def small_files(cur, schema):
    """Four INSERTs into two days and an unpartitioned copy: many small files."""
    for name, partitioning in (("daily", "PARTITIONED BY (day)"), ("flat", "")):
        cur.execute(f"CREATE TABLE {schema}.{name} (id BIGINT, day DATE) {partitioning}")
        for i in range(4):
            cur.execute(f"INSERT INTO {schema}.{name} VALUES ({i}, DATE '2024-01-01'), "
                        f"({i + 10}, DATE '2024-01-02')")
    return schema


def rows(cur, table):
    return query(cur, f"SELECT id, day FROM {table} ORDER BY id").to_pylist()


def stored_files(catalog, table, suffix):
    location = catalog.load_table(table).location().removeprefix("file://")
    return sorted(str(p) for p in Path(location).rglob(f"*{suffix}"))


@pytest.mark.parametrize("name, files_after", [("daily", 2), ("flat", 1)])
def test_compaction_rewrites_small_files_keeping_the_rows(cur, catalog, small_files, name, files_after):
    table = f"{small_files}.{name}"
    before = rows(cur, table)
    files_before = len(catalog.load_table(table).inspect.files())
    [result] = call(cur, f"CALL floe.system.rewrite_data_files(table => '{table}')")
    assert result["rewritten_data_files_count"] == files_before
    assert result["added_data_files_count"] == files_after
    assert result["rewritten_bytes_count"] > 0
    loaded = catalog.load_table(table)
    assert len(loaded.inspect.files()) == files_after
    assert loaded.current_snapshot().summary.operation.value == "replace"
    assert rows(cur, table) == before
    assert sorted(loaded.scan().to_arrow().to_pylist(), key=lambda r: r["id"]) == before
    # Nothing left to compact.
    assert call(cur, f"CALL floe.system.rewrite_data_files('{table}')") == [
        {"rewritten_data_files_count": 0, "added_data_files_count": 0, "rewritten_bytes_count": 0}]


def test_expiring_snapshots_deletes_the_files_only_they_used(cur, catalog, small_files):
    table = f"{small_files}.daily"
    call(cur, f"CALL floe.system.rewrite_data_files('{table}')")
    old = sorted(catalog.load_table(table).snapshots(), key=lambda s: s.sequence_number)[0]
    live = set(f.removeprefix("file://") for f in catalog.load_table(table).inspect.files()["file_path"].to_pylist())
    assert len(stored_files(catalog, table, ".parquet")) == 8 + len(live)

    [result] = call(cur, f"CALL system.expire_snapshots(table => '{table}', "
                         f"older_than => TIMESTAMP '2200-01-01 00:00:00', retain_last => 1)")
    assert result["expired_snapshots_count"] == 4
    assert result["deleted_data_files_count"] == 8
    assert result["deleted_manifest_lists_count"] == 4
    assert set(stored_files(catalog, table, ".parquet")) == live
    loaded = catalog.load_table(table)
    assert len(loaded.snapshots()) == 1
    assert len(loaded.scan().to_arrow()) == 8
    with pytest.raises(adbc_driver_manager.Error, match="(?i)snapshot"):
        cur.execute(f"SELECT * FROM {table} VERSION AS OF {old.snapshot_id}")


def test_expiring_keeps_recent_and_tagged_snapshots(cur, catalog, small_files):
    table = f"{small_files}.flat"
    loaded = catalog.load_table(table)
    first = sorted(loaded.snapshots(), key=lambda s: s.sequence_number)[0]
    loaded.manage_snapshots().create_tag(first.snapshot_id, "v1").commit()
    # The default keeps snapshots younger than 5 days: nothing goes.
    assert call(cur, f"CALL floe.system.expire_snapshots('{table}')")[0]["expired_snapshots_count"] == 0
    [result] = call(cur, f"CALL floe.system.expire_snapshots('{table}', TIMESTAMP '2200-01-01 00:00:00', 2)")
    assert result["expired_snapshots_count"] == 1  # of 4: the newest 2 and the tagged one stay
    ids = {s.snapshot_id for s in catalog.load_table(table).snapshots()}
    assert first.snapshot_id in ids and len(ids) == 3
    assert query(cur, f"SELECT count(*) AS n FROM {table} VERSION AS OF {first.snapshot_id}").to_pylist() == [{"n": 2}]


def test_procedures_name_their_mistakes(cur, small_files):
    with pytest.raises(adbc_driver_manager.Error, match="NOT_FOUND.*procedure"):
        cur.execute("CALL floe.system.compact('x.y')")
    with pytest.raises(adbc_driver_manager.ProgrammingError, match="no argument 'tabel'"):
        cur.execute(f"CALL floe.system.expire_snapshots(tabel => '{small_files}.flat')")
    with pytest.raises(adbc_driver_manager.Error, match="NOT_FOUND"):
        cur.execute(f"CALL floe.system.rewrite_data_files('{small_files}.missing')")


def test_remove_orphan_files_deletes_only_old_unreferenced_files(server, cur, catalog, small_files):
    table = f"{small_files}.daily"
    call(cur, f"CALL floe.system.expire_snapshots('{table}', TIMESTAMP '2200-01-01 00:00:00', 1)")
    location = Path(catalog.load_table(table).location().removeprefix("file://"))
    every_file = sorted(p for p in location.rglob("*") if p.is_file())
    week_ago = time.time() - 7 * 24 * 3600
    planted = {
        "old_data": location / "data" / "0190-dead-write" / "day=2024-01-01" / "left.parquet",
        "old_manifest": location / "metadata" / "left-m0.avro",
        "young_data": location / "data" / "0190-young" / "left.parquet",
        "hint": location / "metadata" / "version-hint.text",
        "in_flight": location / "data" / "0190-in-flight" / "part.parquet",
    }
    for name, path in planted.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"not referenced")
        if name != "young_data":
            os.utime(path, (week_ago, week_ago))
    for path in every_file:  # the table's own files are old too: age alone deletes nothing
        os.utime(path, (week_ago, week_ago))
    # A write this coordinator has in flight (its journal entry) keeps its directory.
    entry = server.data_dir / "journal" / "0190-in-flight.json"
    entry.write_text(json.dumps({
        "namespace": [small_files], "table": "daily", "write_id": "0190-in-flight",
        "location": f"file://{planted['in_flight'].parent}", "started_ms": 0}))
    try:
        dry = call(cur, f"CALL floe.system.remove_orphan_files(table => '{table}', dry_run => true)")
        assert sorted(r["orphan_file_location"] for r in dry) == sorted(
            str(planted[n]) for n in ("old_data", "old_manifest"))
        assert all(p.exists() for p in planted.values()), "a dry run deletes nothing"

        removed = call(cur, f"CALL floe.system.remove_orphan_files('{table}')")
        assert len(removed) == 2
        assert not planted["old_data"].exists() and not planted["old_manifest"].exists()
        assert planted["young_data"].exists() and planted["hint"].exists() and planted["in_flight"].exists()
        assert all(p.exists() for p in every_file), "nothing the table references is deleted"
        assert len(rows(cur, table)) == 8
        assert len(catalog.load_table(table).scan().to_arrow()) == 8
        # An explicit cut-off in the future takes young files too, never in-flight ones.
        later = call(cur, f"CALL floe.system.remove_orphan_files('{table}', TIMESTAMP '2200-01-01 00:00:00')")
        assert [r["orphan_file_location"] for r in later] == [str(planted["young_data"])]
        assert planted["in_flight"].exists()
        assert len(catalog.load_table(table).scan().to_arrow()) == 8
    finally:
        entry.unlink()
