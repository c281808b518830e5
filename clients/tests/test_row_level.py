"""`DELETE`, `UPDATE` and `MERGE` through ADBC, copy-on-write: the affected rows change,
the files that may hold them are rewritten in one `overwrite` snapshot that pyiceberg
reads the same way, and a statement that fails or matches nothing changes nothing."""

import threading
from pathlib import Path

import adbc_driver_manager
import pyarrow.parquet as pq
import pytest
from pyiceberg.transforms import BucketTransform
from pyiceberg.types import LongType

from conftest import query


@pytest.fixture()
def events(cur, schema):
    return make_events(cur, schema)


def make_events(cur, schema, properties=""):
    """Three days, one file per day and INSERT: day 1 has ids 1-3 and 10, day 2 ids 4-5,
    day 3 id 6 (its name NULL)."""
    name = f"{schema}.events"
    cur.execute(f"CREATE TABLE {name} (id BIGINT, name STRING, day DATE) PARTITIONED BY (day) {properties}")
    cur.execute(f"INSERT INTO {name} VALUES (1, 'a', DATE '2024-01-01'), (2, 'b', DATE '2024-01-01'), "
                f"(3, 'c', DATE '2024-01-01'), (4, 'd', DATE '2024-01-02'), (5, 'e', DATE '2024-01-02'), "
                f"(6, NULL, DATE '2024-01-03')")
    cur.execute(f"INSERT INTO {name} VALUES (10, 'j', DATE '2024-01-01')")
    return name


def rows(cur, table):
    return query(cur, f"SELECT id, name, day FROM {table} ORDER BY id").to_pylist()


def pyiceberg_rows(catalog, table):
    return sorted(catalog.load_table(table).scan().to_arrow().to_pylist(), key=lambda r: r["id"])


def files(catalog, table):
    return set(catalog.load_table(table).inspect.files()["file_path"].to_pylist())


def history(catalog, table):
    snapshots = sorted(catalog.load_table(table).snapshots(), key=lambda s: s.sequence_number)
    return [s.summary.operation.value for s in snapshots]


def affected(cur, sql):
    """The statement's answer: the rows it deleted or updated."""
    cur.execute(sql)
    [(count,)] = cur.fetchall()
    return count


def test_delete_removes_the_matching_rows_rewriting_only_their_files(cur, catalog, events):
    before = files(catalog, events)
    untouched = {f for f in before if "day=2024-01-01" not in f}
    assert affected(cur, f"DELETE FROM {events} WHERE id % 2 = 0 AND day = DATE '2024-01-01'") == 2
    expected = [r for r in pyiceberg_rows(catalog, events) if not (r["id"] in (2, 10))]
    assert len(expected) == 5
    assert rows(cur, events) == expected
    after = files(catalog, events)
    # The two files of 2024-01-01 were replaced by one; the other days' files stayed.
    assert untouched <= after and len(after) == len(untouched) + 1
    assert history(catalog, events) == ["append", "append", "overwrite"]
    summary = catalog.load_table(events).current_snapshot().summary
    assert (summary["deleted-data-files"], summary["deleted-records"], summary["added-records"]) == ("2", "4", "2")


def test_rows_where_the_condition_is_null_are_kept(cur, catalog, events):
    assert affected(cur, f"DELETE FROM {events} WHERE name <> 'a'") == 5
    assert [r["id"] for r in rows(cur, events)] == [1, 6]
    assert [r["id"] for r in pyiceberg_rows(catalog, events)] == [1, 6]


@pytest.mark.parametrize("mode", ["copy-on-write", "merge-on-read"])
@pytest.mark.parametrize("condition", ["NOT (name IN (SELECT name FROM {} WHERE id < 3))",
                                       "name NOT IN (SELECT name FROM {} WHERE id < 3)"])
def test_rows_where_a_not_in_subquery_is_null_are_kept(cur, catalog, schema, mode, condition):
    """Row 6's name is NULL, so `NOT IN` is unknown for it: it is neither deleted nor
    updated. A rewrite keeps the rows where the condition is not true, and there
    DataFusion's mark join took unknown for false: the row was lost by both statements
    (src/sql/row_in.rs)."""
    modes = f"TBLPROPERTIES ('write.delete.mode' = '{mode}', 'write.update.mode' = '{mode}')"
    table = make_events(cur, schema, modes)
    where = condition.format(table)
    assert affected(cur, f"UPDATE {table} SET name = 'u' WHERE {where}") == 4
    assert [(r["id"], r["name"]) for r in rows(cur, table)] == [
        (1, "a"), (2, "b"), (3, "u"), (4, "u"), (5, "u"), (6, None), (10, "u")]
    assert affected(cur, f"DELETE FROM {table} WHERE name = 'u'") == 4
    assert affected(cur, f"DELETE FROM {table} WHERE {where}") == 0
    assert [r["id"] for r in pyiceberg_rows(catalog, table)] == [1, 2, 6]


@pytest.mark.parametrize("statement", ["DELETE FROM {}", "TRUNCATE TABLE {}", "TRUNCATE {}"])
def test_delete_without_where_and_truncate_empty_the_table(cur, catalog, events, statement):
    before = catalog.load_table(events).current_snapshot().snapshot_id
    assert affected(cur, statement.format(events)) == 7
    assert rows(cur, events) == []
    assert files(catalog, events) == set() and pyiceberg_rows(catalog, events) == []
    # Only files removed: a `delete` snapshot, as Iceberg's OverwriteFiles names it.
    assert history(catalog, events)[-1] == "delete"
    # The rows are still there to travel back to.
    assert len(query(cur, f"SELECT * FROM {events} VERSION AS OF {before}")) == 7


def test_truncate_of_a_table_whose_name_needs_quotes(cur, catalog, schema):
    name = f'{schema}."it""s a table"'
    cur.execute(f"CREATE TABLE {name} (v STRING)")
    cur.execute(f"INSERT INTO {name} VALUES ('it''s'), ('x')")
    assert affected(cur, f"TRUNCATE TABLE {name}") == 2
    assert query(cur, f"SELECT count(*) AS n FROM {name}").to_pylist() == [{"n": 0}]
    assert catalog.load_table((schema, 'it"s a table')).scan().to_arrow().num_rows == 0


def test_truncate_takes_only_a_whole_table(cur, events):
    for sql in [f"TRUNCATE TABLE {events} PARTITION (day = '2024-01-01')", f"TRUNCATE TABLE {events}, {events}"]:
        with pytest.raises(adbc_driver_manager.NotSupportedError, match="TRUNCATE"):
            cur.execute(sql)
    assert len(rows(cur, events)) == 7


def test_a_statement_that_matches_nothing_commits_nothing(cur, catalog, events):
    before = history(catalog, events)
    assert affected(cur, f"DELETE FROM {events} WHERE id > 100") == 0
    assert affected(cur, f"UPDATE {events} SET name = 'x' WHERE name = 'nobody'") == 0
    assert history(catalog, events) == before


def test_update_changes_the_matching_rows(cur, catalog, events):
    assert affected(cur, f"UPDATE {events} SET name = upper(name) WHERE day = DATE '2024-01-02'") == 2
    got = rows(cur, events)
    assert [r["name"] for r in got] == ["a", "b", "c", "D", "E", None, "j"]
    assert pyiceberg_rows(catalog, events) == got
    assert history(catalog, events) == ["append", "append", "overwrite"]


def test_update_may_move_rows_to_another_partition(cur, catalog, events):
    assert affected(cur, f"UPDATE {events} AS e SET day = DATE '2025-06-01', id = e.id * 100 "
                         f"WHERE e.name IS NULL OR e.id = 1") == 2
    got = {r["id"]: str(r["day"]) for r in pyiceberg_rows(catalog, events)}
    assert got[100] == got[600] == "2025-06-01" and 1 not in got and 6 not in got
    partitions = catalog.load_table(events).inspect.partitions().to_pylist()
    counts = {str(p["partition"]["day"]): p["record_count"] for p in partitions}
    assert counts == {"2024-01-01": 3, "2024-01-02": 2, "2025-06-01": 2}


def test_updated_rows_get_the_partition_values_pyiceberg_computes(cur, catalog, schema):
    name = f"{schema}.bucketed"
    cur.execute(f"CREATE TABLE {name} (id BIGINT, v BIGINT) PARTITIONED BY (bucket(4, v))")
    cur.execute(f"INSERT INTO {name} SELECT value AS id, value AS v FROM generate_series(1, 50)")
    assert affected(cur, f"UPDATE {name} SET v = v * 7919 WHERE id % 3 = 0") == 16
    bucket = BucketTransform(4).transform(LongType())
    for file in catalog.load_table(name).inspect.files().to_pylist():
        values = pq.read_table(file["file_path"].removeprefix("file://"))["v"].to_pylist()
        assert {bucket(v) for v in values} == {file["partition"]["v_bucket"]}
    assert sorted(r["v"] for r in pyiceberg_rows(catalog, name)) == sorted(
        v * 7919 if v % 3 == 0 else v for v in range(1, 51))


def fails_changing_nothing(cur, catalog, table, error, sql):
    """Runs `sql`, which must fail with `error`, leaving the table's snapshots, rows and
    stored files as they were."""
    before = (history(catalog, table), rows(cur, table))
    data_dir = Path(catalog.load_table(table).location().removeprefix("file://")) / "data"
    stored = sorted(p for p in data_dir.rglob("*") if p.is_file())
    with pytest.raises(adbc_driver_manager.Error, match=error):
        cur.execute(sql)
    assert (history(catalog, table), rows(cur, table)) == before
    assert sorted(p for p in data_dir.rglob("*") if p.is_file()) == stored


def test_a_failed_update_or_delete_leaves_table_and_storage_as_they_were(cur, catalog, events):
    fails_changing_nothing(cur, catalog, events, "(?i)divide by zero",
                           sql=f"UPDATE {events} SET id = id / (id - 5) WHERE day = DATE '2024-01-02'")
    fails_changing_nothing(cur, catalog, events, "(?i)divide by zero",
                           sql=f"DELETE FROM {events} WHERE 10 / (id - 5) > 1")


def test_unsupported_forms_are_refused(cur, events, schema):
    cur.execute(f"CREATE TABLE {schema}.other (id BIGINT)")
    with pytest.raises(adbc_driver_manager.NotSupportedError, match="one table or subquery"):
        cur.execute(f"UPDATE {events} SET name = 'x' FROM {schema}.other o, {schema}.other p "
                    f"WHERE o.id = {events}.id AND p.id = o.id")
    with pytest.raises(adbc_driver_manager.ProgrammingError, match="read-only"):
        cur.execute(f'DELETE FROM {schema}."events$snapshots"')


@pytest.fixture()
def upserts(cur, schema):
    """Source rows: 1 updates, 2 deletes (its name NULL), 4 and 5 are new."""
    name = f"{schema}.upserts"
    cur.execute(f"CREATE TABLE {name} (id BIGINT, name STRING, op STRING)")
    cur.execute(f"INSERT INTO {name} VALUES (1, 'A', 'u'), (2, NULL, 'd'), (40, 'x', 'i'), (50, 'y', 'i')")
    return name


def test_merge_updates_deletes_and_inserts_in_one_snapshot(cur, catalog, events, upserts):
    count = affected(cur, f"""
        MERGE INTO {events} AS t USING {upserts} AS s ON t.id = s.id
        WHEN MATCHED AND s.op = 'd' THEN DELETE
        WHEN MATCHED THEN UPDATE SET name = s.name || '!'
        WHEN NOT MATCHED THEN INSERT (id, day, name) VALUES (s.id, DATE '2024-02-01', s.name)""")
    assert count == 4
    got = rows(cur, events)
    assert [(r["id"], r["name"]) for r in got] == [
        (1, "A!"), (3, "c"), (4, "d"), (5, "e"), (6, None), (10, "j"), (40, "x"), (50, "y")]
    assert pyiceberg_rows(catalog, events) == got
    assert history(catalog, events) == ["append", "append", "overwrite"]


def test_a_merge_rewrites_only_files_its_target_conditions_allow(cur, catalog, events, upserts):
    before = files(catalog, events)
    other_days = {f for f in before if "day=2024-01-01" not in f}
    assert affected(cur, f"MERGE INTO {events} t USING {upserts} s "
                         f"ON t.id = s.id AND t.day = DATE '2024-01-01' "
                         f"WHEN MATCHED THEN UPDATE SET name = 'merged'") == 2
    after = files(catalog, events)
    assert other_days <= after and not (before - other_days) & after
    assert [(r["id"], r["name"]) for r in rows(cur, events) if r["name"] == "merged"] == [(1, "merged"), (2, "merged")]
    assert pyiceberg_rows(catalog, events) == rows(cur, events)



def test_a_merge_whose_source_reads_the_target_sees_all_of_it(cur, catalog, events):
    """The target is read from the files its conditions allow; a source that reads the
    same table is not restricted with it."""
    merge = (f"MERGE INTO {events} t USING (SELECT id + 100 AS id, name FROM {events} "
             f"WHERE day = DATE '2024-01-02') s ON t.id = s.id AND t.day = DATE '2024-01-01' "
             f"WHEN MATCHED THEN UPDATE SET name = 'merged' "
             f"WHEN NOT MATCHED THEN INSERT (id, name, day) VALUES (s.id, s.name, DATE '2024-01-07')")
    assert affected(cur, merge) == 2
    got = rows(cur, events)
    assert [(r["id"], r["name"]) for r in got if r["id"] > 100] == [(104, "d"), (105, "e")]
    assert pyiceberg_rows(catalog, events) == got

def test_a_merge_that_only_inserts_appends(cur, catalog, events, upserts):
    before = files(catalog, events)
    assert affected(cur, f"MERGE INTO {events} t USING {upserts} s ON t.id = s.id "
                         f"WHEN NOT MATCHED AND s.op = 'i' THEN INSERT VALUES (s.id, s.name, DATE '2024-02-01')") == 2
    assert history(catalog, events)[-1] == "append"
    assert before < files(catalog, events)
    assert [r["id"] for r in pyiceberg_rows(catalog, events)] == [1, 2, 3, 4, 5, 6, 10, 40, 50]


def test_merge_acts_on_target_rows_the_source_does_not_match(cur, catalog, events, upserts):
    assert affected(cur, f"MERGE INTO {events} t USING {upserts} s ON t.id = s.id "
                         f"WHEN NOT MATCHED BY SOURCE AND t.day = DATE '2024-01-01' THEN DELETE") == 2
    assert [r["id"] for r in pyiceberg_rows(catalog, events)] == [1, 2, 4, 5, 6]


def test_a_merge_that_changes_nothing_commits_nothing(cur, catalog, events, upserts):
    before = history(catalog, events)
    assert affected(cur, f"MERGE INTO {events} t USING {upserts} s ON t.id = s.id "
                         f"WHEN MATCHED AND s.op = 'nothing' THEN DELETE") == 0
    assert history(catalog, events) == before


def test_a_target_row_matched_twice_is_refused(cur, catalog, events):
    before = (history(catalog, events), rows(cur, events))
    with pytest.raises(adbc_driver_manager.ProgrammingError, match="more than one source row"):
        cur.execute(f"MERGE INTO {events} t USING (SELECT 1 AS id UNION ALL SELECT 1) s ON t.id = s.id "
                    f"WHEN MATCHED THEN UPDATE SET name = 'twice'")
    assert (history(catalog, events), rows(cur, events)) == before


def test_a_failed_merge_leaves_table_and_storage_as_they_were(cur, catalog, events, upserts):
    fails_changing_nothing(cur, catalog, events, "(?i)divide by zero",
                           sql=f"MERGE INTO {events} t USING {upserts} s ON t.id = s.id "
                               f"WHEN MATCHED THEN UPDATE SET id = t.id / (t.id - 1)")


def test_merge_names_what_it_cannot_do(cur, events, upserts):
    with pytest.raises(adbc_driver_manager.ProgrammingError, match="no column 'nope'"):
        cur.execute(f"MERGE INTO {events} t USING {upserts} s ON t.id = s.id "
                    f"WHEN MATCHED THEN UPDATE SET nope = 1")
    with pytest.raises(adbc_driver_manager.ProgrammingError, match="not allowed in a NOT MATCHED"):
        cur.execute(f"MERGE INTO {events} t USING {upserts} s ON t.id = s.id WHEN NOT MATCHED THEN DELETE")


@pytest.mark.parametrize("clauses", [
    "WHEN MATCHED THEN DELETE WHEN MATCHED AND s.name = 'x' THEN UPDATE SET name = 'y'",
    "WHEN NOT MATCHED THEN INSERT VALUES (s.id, s.name, NULL) WHEN NOT MATCHED BY TARGET THEN INSERT VALUES (1, 'a', NULL)",
    "WHEN NOT MATCHED BY SOURCE THEN DELETE WHEN MATCHED THEN DELETE WHEN NOT MATCHED BY SOURCE AND t.id > 2 "
    "THEN UPDATE SET name = 'z'",
])
def test_a_clause_that_could_never_act_is_refused(cur, catalog, events, upserts, clauses):
    """A clause after one of its kind without a condition is refused, as PostgreSQL and
    Spark refuse it (DuckDB would run the unconditional one last)."""
    before = (history(catalog, events), rows(cur, events))
    with pytest.raises(adbc_driver_manager.ProgrammingError, match="would never act"):
        cur.execute(f"MERGE INTO {events} t USING {upserts} s ON t.id = s.id {clauses}")
    assert (history(catalog, events), rows(cur, events)) == before


def test_concurrent_deletes_never_bring_rows_back(server, catalog, events):
    """Three clients delete from the same file at once, each planning on the same
    snapshot. A rewrite committed after another must not write back rows the other
    removed: it answers ABORTED instead (retrying is safe)."""
    results = {}

    def delete(i):
        with server.connect() as conn, conn.cursor() as cur:
            try:
                cur.execute(f"DELETE FROM {events} WHERE id = {i}")
                results[i] = cur.fetchall()
            except adbc_driver_manager.Error as e:
                results[i] = e

    threads = [threading.Thread(target=delete, args=(i,)) for i in (1, 2, 3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    remaining = [r["id"] for r in pyiceberg_rows(catalog, events)]
    for i, result in results.items():
        if isinstance(result, Exception):
            assert "(Aborted;" in str(result), result
            assert i in remaining
        else:
            assert result == [(1,)] and i not in remaining
    assert any(not isinstance(r, Exception) for r in results.values())
    assert sorted(set(remaining) | {1, 2, 3}) == [1, 2, 3, 4, 5, 6, 10]


def test_quotes_in_names_and_values(cur, catalog, schema):
    name = f'{schema}."Odd ""Name"""'
    cur.execute(f'CREATE TABLE {name} ("Key ""A""" BIGINT, note STRING)')
    cur.execute(f"INSERT INTO {name} VALUES (1, 'it''s'), (2, 'plain')")
    assert affected(cur, f"UPDATE {name} SET note = note || ' O''Brien' WHERE note = 'it''s'") == 1
    assert affected(cur, f"MERGE INTO {name} AS t USING (SELECT 3 AS k, 'q''x; --' AS n) AS s "
                         f"ON t.\"Key \"\"A\"\"\" = s.k WHEN NOT MATCHED THEN INSERT VALUES (s.k, s.n)") == 1
    assert affected(cur, f"DELETE FROM {name} WHERE note = 'plain'") == 1
    expected = [{'Key "A"': 1, "note": "it's O'Brien"}, {'Key "A"': 3, "note": "q'x; --"}]
    assert query(cur, f'SELECT * FROM {name} ORDER BY 1').to_pylist() == expected
    table = catalog.load_table(f'{schema}.Odd "Name"')
    assert sorted(table.scan().to_arrow().to_pylist(), key=lambda r: r['Key "A"']) == expected


def test_an_empty_target(cur, catalog, schema, upserts):
    name = f"{schema}.empty"
    cur.execute(f"CREATE TABLE {name} (id BIGINT, name STRING, op STRING)")
    assert affected(cur, f"DELETE FROM {name} WHERE id = 1") == 0
    assert affected(cur, f"UPDATE {name} SET name = 'x'") == 0
    assert catalog.load_table(name).current_snapshot() is None
    assert affected(cur, f"MERGE INTO {name} t USING {upserts} s ON t.id = s.id "
                         f"WHEN MATCHED THEN UPDATE SET name = s.name "
                         f"WHEN NOT MATCHED THEN INSERT VALUES (s.id, s.name, s.op)") == 4
    assert sorted(r["id"] for r in pyiceberg_rows(catalog, name)) == [1, 2, 40, 50]


def test_delete_and_update_with_subqueries_and_using(cur, catalog, schema):
    t, s = f"{schema}.sub_t", f"{schema}.sub_s"
    cur.execute(f"CREATE TABLE {t} (id INT, v INT)")
    cur.execute(f"INSERT INTO {t} VALUES (1, 1), (2, 2), (3, 3), (4, NULL), (5, 5)")
    cur.execute(f"CREATE TABLE {s} (id INT)")
    cur.execute(f"INSERT INTO {s} VALUES (2), (3), (NULL)")

    def both():
        ours = query(cur, f"SELECT id, v FROM {t} ORDER BY id").to_pylist()
        theirs = sorted(catalog.load_table(t).scan().to_arrow().to_pylist(), key=lambda r: r["id"])
        assert ours == theirs
        return [(r["id"], r["v"]) for r in ours]

    cur.execute(f"UPDATE {t} SET v = v * 10 WHERE id IN (SELECT id FROM {s})")
    assert cur.fetchall() == [(2,)]
    assert both() == [(1, 1), (2, 20), (3, 30), (4, None), (5, 5)]
    cur.execute(f"UPDATE {t} SET v = 7 WHERE EXISTS (SELECT 1 FROM {s} WHERE {s}.id + 2 = {t}.id)")
    assert both() == [(1, 1), (2, 20), (3, 30), (4, 7), (5, 7)]
    cur.execute(f"DELETE FROM {t} WHERE id IN (SELECT id FROM {s} WHERE id > 2)")
    assert cur.fetchall() == [(1,)]
    assert both() == [(1, 1), (2, 20), (4, 7), (5, 7)]
    # NOT IN over a set holding NULL is never true: nothing goes.
    cur.execute(f"DELETE FROM {t} WHERE id NOT IN (SELECT id FROM {s})")
    assert cur.fetchall() == [(0,)]
    # PostgreSQL's DELETE … USING.
    cur.execute(f"DELETE FROM {t} USING {s} WHERE {t}.id = {s}.id + 3")
    assert cur.fetchall() == [(1,)]
    assert both() == [(1, 1), (2, 20), (4, 7)]
    # An IN subquery whose value is an expression: DataFusion 53 failed the kept rows'
    # `IS NOT TRUE` form ("Projections require unique expression names").
    cur.execute(f"UPDATE {t} SET v = 0 WHERE id IN (SELECT max(id) FROM {t} GROUP BY v > 5)")
    assert cur.fetchall() == [(2,)]
    assert both() == [(1, 0), (2, 20), (4, 0)]
    cur.execute(f"DELETE FROM {t} WHERE id IN (SELECT min(id) + 1 FROM {t})")
    assert cur.fetchall() == [(1,)]
    assert both() == [(1, 0), (4, 0)]


def test_update_from_runs_as_merge(cur, catalog, schema):
    t, s = f"{schema}.upd_t", f"{schema}.upd_s"
    cur.execute(f"CREATE TABLE {t} (id INT, v INT)")
    cur.execute(f"INSERT INTO {t} VALUES (1, 1), (2, 2), (3, 3)")
    cur.execute(f"CREATE TABLE {s} (id INT, x INT)")
    cur.execute(f"INSERT INTO {s} VALUES (2, 20), (3, 30), (3, 31)")
    cur.execute(f"UPDATE {t} SET v = {s}.x FROM {s} WHERE {t}.id = {s}.id AND {s}.x < 25")
    assert cur.fetchall() == [(1,)]
    # A target row that two source rows match is refused, and nothing changes.
    with pytest.raises(adbc_driver_manager.ProgrammingError, match="more than one source row"):
        cur.execute(f"UPDATE {t} SET v = {s}.x FROM {s} WHERE {t}.id = {s}.id")
    cur.execute(f"UPDATE {t} AS a SET v = b.x + 1 FROM (SELECT id, max(x) AS x FROM {s} GROUP BY id) AS b "
                f"WHERE a.id = b.id AND a.v < 25")
    assert cur.fetchall() == [(2,)]
    expected = [{"id": 1, "v": 1}, {"id": 2, "v": 21}, {"id": 3, "v": 32}]
    assert query(cur, f"SELECT id, v FROM {t} ORDER BY id").to_pylist() == expected
    assert sorted(catalog.load_table(t).scan().to_arrow().to_pylist(), key=lambda r: r["id"]) == expected


def test_using_and_from_keep_quotes_and_escapes(cur, catalog, schema):
    t, s = f'{schema}."q t"', f'{schema}."q s"'
    cur.execute(f'CREATE TABLE {t} (id INT, "Name" STRING)')
    cur.execute(f"INSERT INTO {t} VALUES (1, 'it''s'), (2, 'a\\b'), (3, 'x')")
    cur.execute(f'CREATE TABLE {s} (id INT, "New" STRING)')
    cur.execute(f"INSERT INTO {s} VALUES (1, 'o''brien'), (2, 'it''s')")
    cur.execute(f'UPDATE {t} SET "Name" = {s}."New" FROM {s} WHERE {t}.id = {s}.id AND {s}."New" = \'o\'\'brien\'')
    assert cur.fetchall() == [(1,)]
    cur.execute(f"DELETE FROM {t} USING {s} WHERE {t}.\"Name\" = {s}.\"New\" AND {s}.\"New\" <> 'a''b'")
    assert cur.fetchall() == [(1,)]
    expected = [{"id": 2, "Name": "a\\b"}, {"id": 3, "Name": "x"}]
    assert query(cur, f'SELECT id, "Name" FROM {t} ORDER BY id').to_pylist() == expected


def test_delete_names_its_table_by_an_alias(cur, catalog, events, schema):
    cur.execute(f"CREATE TABLE {schema}.keep AS SELECT * FROM (VALUES (1), (4)) AS t(id)")
    assert affected(cur, f"DELETE FROM {events} e WHERE e.day = DATE '2024-01-01' AND NOT EXISTS "
                         f"(SELECT 1 FROM {schema}.keep k WHERE k.id = e.id)") == 3
    assert affected(cur, f'DELETE FROM {events} AS "E" WHERE "E".id = 6 AND "E".name IS NULL') == 1
    assert [r["id"] for r in rows(cur, events)] == [1, 4, 5]
    assert [r["id"] for r in pyiceberg_rows(catalog, events)] == [1, 4, 5]
