"""`ALTER TABLE` through ADBC, each change visible to the next statement and to
pyiceberg; rows written before a change read on by field id."""

import adbc_driver_manager
import pytest

from conftest import query


@pytest.fixture()
def people(cur, schema):
    name = f"{schema}.people"
    cur.execute(f"CREATE TABLE {name} (id INT NOT NULL, name STRING, region STRING) PARTITIONED BY (region)")
    cur.execute(f"INSERT INTO {name} VALUES (1, 'ann', 'eu'), (2, 'bo', 'us')")
    return name


def fields(catalog, name):
    return [(f.field_id, f.name, str(f.field_type), f.required) for f in catalog.load_table(name).schema().fields]


def test_add_rename_and_drop_columns(cur, catalog, people):
    cur.execute(f"ALTER TABLE {people} ADD COLUMN note STRING, ADD COLUMN score DOUBLE")
    cur.execute(f"INSERT INTO {people} VALUES (3, 'cy', 'eu', 'new', 1.5)")
    got = query(cur, f"SELECT id, note, score FROM {people} ORDER BY id").to_pylist()
    assert got == [
        {"id": 1, "note": None, "score": None},
        {"id": 2, "note": None, "score": None},
        {"id": 3, "note": "new", "score": 1.5},
    ]
    assert [f[1] for f in fields(catalog, people)] == ["id", "name", "region", "note", "score"]

    cur.execute(f"ALTER TABLE {people} RENAME COLUMN name TO full_name")
    assert query(cur, f"SELECT full_name FROM {people} ORDER BY id")["full_name"].to_pylist() == ["ann", "bo", "cy"]
    table = catalog.load_table(people)
    assert sorted(table.scan(selected_fields=("full_name",)).to_arrow()["full_name"].to_pylist()) == ["ann", "bo", "cy"]

    # A dropped column is gone; the same name added again is a new, empty column.
    cur.execute(f"ALTER TABLE {people} DROP COLUMN note")
    assert "note" not in query(cur, f"SELECT * FROM {people}").column_names
    cur.execute(f"ALTER TABLE {people} ADD COLUMN note STRING")
    assert query(cur, f"SELECT note FROM {people}")["note"].to_pylist() == [None, None, None]
    ids = {f[1]: f[0] for f in fields(catalog, people)}
    assert ids["note"] > ids["score"], "a re-added column gets a new field id"


def test_type_promotions_and_nullability(cur, catalog, people):
    cur.execute(f"ALTER TABLE {people} ALTER COLUMN id TYPE BIGINT")
    assert ("long", True) == next((f[2], f[3]) for f in fields(catalog, people) if f[1] == "id")
    cur.execute(f"INSERT INTO {people} VALUES (5000000000, 'big', 'eu')")
    assert query(cur, f"SELECT max(id) AS m FROM {people}").to_pylist() == [{"m": 5000000000}]

    with pytest.raises(adbc_driver_manager.Error, match="INVALID_ARGUMENT.*cannot change from"):
        cur.execute(f"ALTER TABLE {people} ALTER COLUMN name TYPE INT")
    with pytest.raises(adbc_driver_manager.Error, match="INVALID_ARGUMENT.*NOT NULL"):
        cur.execute(f"ALTER TABLE {people} ALTER COLUMN name SET NOT NULL")

    cur.execute(f"ALTER TABLE {people} ALTER COLUMN id DROP NOT NULL")
    cur.execute(f"INSERT INTO {people} VALUES (NULL, 'nobody', 'us')")
    assert query(cur, f"SELECT count(*) AS n FROM {people} WHERE id IS NULL").to_pylist() == [{"n": 1}]
    assert not catalog.load_table(people).schema().find_field("id").required


def test_properties_and_rename_to(cur, catalog, schema, people):
    cur.execute(f"ALTER TABLE {people} SET TBLPROPERTIES ('owner' = 'crm', 'write.parquet.compression-codec' = 'snappy')")
    properties = catalog.load_table(people).properties
    assert properties["owner"] == "crm" and properties["write.parquet.compression-codec"] == "snappy"
    with pytest.raises(adbc_driver_manager.Error, match="INVALID_ARGUMENT"):
        cur.execute(f"ALTER TABLE {people} SET TBLPROPERTIES ('write.parquet.compression-codec' = 'zip')")

    cur.execute(f"ALTER TABLE {people} RENAME TO {schema}.customers")
    assert query(cur, f"SELECT count(*) AS n FROM {schema}.customers").to_pylist() == [{"n": 2}]
    with pytest.raises(adbc_driver_manager.ProgrammingError, match="NOT_FOUND"):
        cur.execute(f"SELECT * FROM {people}")
    assert catalog.table_exists(f"{schema}.customers")


def test_what_cannot_be_done_is_refused_and_changes_nothing(cur, catalog, people):
    before = fields(catalog, people)
    with pytest.raises(adbc_driver_manager.Error, match="partition source"):
        cur.execute(f"ALTER TABLE {people} DROP COLUMN region")
    with pytest.raises(adbc_driver_manager.Error, match="ALREADY_EXISTS"):
        cur.execute(f"ALTER TABLE {people} ADD COLUMN name STRING")
    with pytest.raises(adbc_driver_manager.Error, match="cannot be NOT NULL"):
        cur.execute(f"ALTER TABLE {people} ADD COLUMN strict INT NOT NULL")
    # One statement is one change: its first operation is not kept when a later one fails.
    with pytest.raises(adbc_driver_manager.Error, match="no column"):
        cur.execute(f"ALTER TABLE {people} ADD COLUMN extra INT, DROP COLUMN missing")
    assert fields(catalog, people) == before
    with pytest.raises(adbc_driver_manager.ProgrammingError, match="NOT_FOUND"):
        cur.execute(f"ALTER TABLE {people}_nope ADD COLUMN x INT")
    cur.execute(f"ALTER TABLE IF EXISTS {people}_nope ADD COLUMN x INT")


def test_unset_tblproperties(cur, catalog, people):
    cur.execute(f"ALTER TABLE {people} SET TBLPROPERTIES ('owner' = 'crm', 'team' = 'x')")
    cur.execute(f"ALTER TABLE {people} UNSET TBLPROPERTIES ('owner')")
    properties = catalog.load_table(people).properties
    assert "owner" not in properties and properties["team"] == "x"
    with pytest.raises(adbc_driver_manager.ProgrammingError, match="NOT_FOUND.*owner"):
        cur.execute(f"ALTER TABLE {people} UNSET TBLPROPERTIES ('owner')")
    cur.execute(f"ALTER TABLE {people} UNSET TBLPROPERTIES IF EXISTS ('owner', 'team')")
    assert "team" not in catalog.load_table(people).properties


def test_partition_evolution_keeps_old_files_readable_and_prunable(cur, catalog, people):
    cur.execute(f"ALTER TABLE {people} ADD PARTITION FIELD bucket(4, id)")
    cur.execute(f"INSERT INTO {people} VALUES (3, 'cy', 'eu'), (4, 'di', 'us')")
    table = catalog.load_table(people)
    assert [(f.name, str(f.transform)) for f in table.spec().fields] == [("region", "identity"), ("id_bucket", "bucket[4]")]
    assert len(table.specs()) == 2
    cur.execute(f"ALTER TABLE {people} REPLACE PARTITION FIELD region WITH truncate(1, name) AS initial")
    cur.execute(f"ALTER TABLE {people} DROP PARTITION FIELD id_bucket")
    cur.execute(f"INSERT INTO {people} VALUES (5, 'ed', 'eu')")
    table = catalog.load_table(people)
    assert [(f.name, str(f.transform)) for f in table.spec().fields] == [("initial", "truncate[1]")]
    # Rows of all three specs, read by Floe and pyiceberg alike; filters on an old
    # partition column still prune and answer right.
    expected = [(1, "eu"), (2, "us"), (3, "eu"), (4, "us"), (5, "eu")]
    assert [tuple(r.values()) for r in query(cur, f"SELECT id, region FROM {people} ORDER BY id").to_pylist()] == expected
    assert sorted((r["id"], r["region"]) for r in table.scan().to_arrow().to_pylist()) == expected
    assert query(cur, f"SELECT id FROM {people} WHERE region = 'us' ORDER BY id").to_pylist() == [{"id": 2}, {"id": 4}]
    partitions = table.inspect.files().to_pylist()
    assert sorted(f["spec_id"] for f in partitions) == [0, 0, 1, 1, table.spec().spec_id]

    with pytest.raises(adbc_driver_manager.Error, match="ALREADY_EXISTS"):
        cur.execute(f"ALTER TABLE {people} ADD PARTITION FIELD truncate(1, name)")
    with pytest.raises(adbc_driver_manager.Error, match="NOT_FOUND"):
        cur.execute(f"ALTER TABLE {people} DROP PARTITION FIELD month(id)")
    with pytest.raises(adbc_driver_manager.Error, match="cannot be applied"):
        cur.execute(f"ALTER TABLE {people} ADD PARTITION FIELD day(name)")


@pytest.fixture()
def points(cur, schema):
    name = f"{schema}.points"
    cur.execute(f"CREATE TABLE {name} (id INT, p STRUCT<x INT, y STRING, inner STRUCT<a INT>>)")
    cur.execute(f"INSERT INTO {name} VALUES (1, named_struct('x', 10, 'y', 'one', 'inner', named_struct('a', 100)))")
    return name


def struct_fields(catalog, table, *path):
    field_type = catalog.load_table(table).schema().find_field(".".join(path)).field_type
    return [(f.name, str(f.field_type), f.required) for f in field_type.fields]


def test_nested_columns_are_added_renamed_retyped_and_dropped(cur, catalog, points):
    cur.execute(f"ALTER TABLE {points} ADD COLUMN p.z DOUBLE COMMENT 'it''s the height'")
    cur.execute(f"ALTER TABLE {points} ADD COLUMN p.inner.b STRING")
    cur.execute(f"INSERT INTO {points} VALUES (2, named_struct('x', 20, 'y', 'two', "
                f"'inner', named_struct('a', 200, 'b', 'bee'), 'z', 2.5))")
    got = query(cur, f"SELECT id, p FROM {points} ORDER BY id").to_pylist()
    assert got == [
        {"id": 1, "p": {"x": 10, "y": "one", "inner": {"a": 100, "b": None}, "z": None}},
        {"id": 2, "p": {"x": 20, "y": "two", "inner": {"a": 200, "b": "bee"}, "z": 2.5}},
    ]
    names = [f[0] for f in struct_fields(catalog, points, "p")]
    assert names == ["x", "y", "inner", "z"]
    assert catalog.load_table(points).schema().find_field("p.z").doc == "it's the height"
    # A quoted name keeps its case and may hold anything.
    cur.execute(f'ALTER TABLE {points} ADD COLUMN p."Odd. Name" INT')
    cur.execute(f'ALTER TABLE {points} RENAME COLUMN p."Odd. Name" TO "Odd"')
    assert "Odd" in [f[0] for f in struct_fields(catalog, points, "p")]
    cur.execute(f'ALTER TABLE {points} DROP COLUMN p."Odd"')

    cur.execute(f"ALTER TABLE {points} RENAME COLUMN p.x TO east")
    cur.execute(f"ALTER TABLE {points} ALTER COLUMN p.inner.a TYPE BIGINT")
    cur.execute(f"ALTER TABLE {points} DROP COLUMN p.y")
    got = query(cur, f"SELECT id, p.east AS east, p.inner AS inner FROM {points} ORDER BY id").to_pylist()
    assert got == [{"id": 1, "east": 10, "inner": {"a": 100, "b": None}},
                   {"id": 2, "east": 20, "inner": {"a": 200, "b": "bee"}}]
    assert [f[0] for f in struct_fields(catalog, points, "p")] == ["east", "inner", "z"]
    assert struct_fields(catalog, points, "p", "inner")[0] == ("a", "long", False)
    # pyiceberg reads the old and the new files by field id, as Floe does.
    scanned = sorted(catalog.load_table(points).scan().to_arrow().to_pylist(), key=lambda r: r["id"])
    assert [r["p"] for r in scanned] == [
        {"east": 10, "inner": {"a": 100, "b": None}, "z": None},
        {"east": 20, "inner": {"a": 200, "b": "bee"}, "z": 2.5},
    ]


def test_nested_changes_that_cannot_be_made_are_refused(cur, catalog, points):
    before = catalog.load_table(points).schema()
    refused = {
        f"ALTER TABLE {points} ADD COLUMN p.x INT": "ALREADY_EXISTS",
        f"ALTER TABLE {points} ADD COLUMN q.x INT": "NOT_FOUND.*no column q",
        f"ALTER TABLE {points} ADD COLUMN id.x INT": "INVALID_ARGUMENT.*id is not a struct",
        f"ALTER TABLE {points} ADD COLUMN p.w INT NOT NULL": "INVALID_ARGUMENT.*NOT NULL",
        f"ALTER TABLE {points} DROP COLUMN p.nope": "NOT_FOUND.*no column p.nope",
        f"ALTER TABLE {points} DROP COLUMN p.inner.a": "INVALID_ARGUMENT.*only field of p.inner",
        f"ALTER TABLE {points} RENAME COLUMN p.x TO y": "ALREADY_EXISTS.*p.y",
        f"ALTER TABLE {points} ALTER COLUMN p.y TYPE INT": "INVALID_ARGUMENT.*cannot change from",
        f"ALTER TABLE {points} ALTER COLUMN p.x SET NOT NULL": "INVALID_ARGUMENT.*NOT NULL",
    }
    for sql, error in refused.items():
        with pytest.raises(adbc_driver_manager.Error, match=error):
            cur.execute(sql)
    cur.execute(f"ALTER TABLE {points} DROP COLUMN IF EXISTS p.nope")
    cur.execute(f"ALTER TABLE {points} ADD COLUMN IF NOT EXISTS p.x INT")
    assert catalog.load_table(points).schema() == before


@pytest.fixture()
def shapes(cur, schema):
    name = f"{schema}.shapes"
    cur.execute(f"CREATE TABLE {name} (id INT, pts ARRAY<STRUCT<x INT>>, "
                f"tags MAP(STRING, STRUCT<n INT>), nums ARRAY<INT>)")
    cur.execute(f"INSERT INTO {name} VALUES (1, [named_struct('x', 1)], "
                f"MAP(['a'], [named_struct('n', 10)]), [7])")
    return name


def test_fields_in_list_elements_and_map_values_change(cur, catalog, shapes):
    # Spark's names: a list's element is `element`, a map's key and value `key` and `value`.
    cur.execute(f"ALTER TABLE {shapes} ADD COLUMN pts.element.y STRING")
    cur.execute(f"ALTER TABLE {shapes} ADD COLUMN tags.value.label STRING")
    cur.execute(f"ALTER TABLE {shapes} ALTER COLUMN nums.element TYPE BIGINT")
    cur.execute(f"ALTER TABLE {shapes} RENAME COLUMN pts.element.x TO east")
    cur.execute(f"INSERT INTO {shapes} VALUES (2, [named_struct('east', 2, 'y', 'two')], "
                f"MAP(['b'], [named_struct('n', 20, 'label', 'bee')]), [8000000000])")
    expected = [
        {"id": 1, "pts": [{"east": 1, "y": None}], "tags": [("a", {"n": 10, "label": None})], "nums": [7]},
        {"id": 2, "pts": [{"east": 2, "y": "two"}], "tags": [("b", {"n": 20, "label": "bee"})],
         "nums": [8000000000]},
    ]
    assert query(cur, f"SELECT * FROM {shapes} ORDER BY id").to_pylist() == expected
    schema = catalog.load_table(shapes).schema()
    assert [f.name for f in schema.find_field("pts").field_type.element_field.field_type.fields] == ["east", "y"]
    assert str(schema.find_field("nums").field_type.element_type) == "long"
    # pyiceberg reads the old and the new files by field id, as Floe does.
    scanned = sorted(catalog.load_table(shapes).scan().to_arrow().to_pylist(), key=lambda r: r["id"])
    assert scanned == expected

    # The first file holds none of the value's fields now: its entries are still there.
    cur.execute(f"ALTER TABLE {shapes} DROP COLUMN tags.value.n")
    expected = [{"tags": [("a", {"label": None})]}, {"tags": [("b", {"label": "bee"})]}]
    assert query(cur, f"SELECT tags FROM {shapes} ORDER BY id").to_pylist() == expected
    scanned = catalog.load_table(shapes).scan(selected_fields=("id", "tags")).to_arrow()
    assert sorted(scanned.to_pylist(), key=lambda r: r["id"]) == [
        {"id": i + 1, **row} for i, row in enumerate(expected)]


def test_list_elements_and_map_keys_keep_their_shape(cur, catalog, schema, shapes):
    keyed = f"{schema}.keyed"
    cur.execute(f"CREATE TABLE {keyed} (m MAP(STRUCT<k INT>, INT))")
    before = catalog.load_table(shapes).schema()
    refused = {
        f"ALTER TABLE {shapes} ADD COLUMN pts.z INT": "INVALID_ARGUMENT.*pts is a list",
        f"ALTER TABLE {shapes} ADD COLUMN tags.z INT": "INVALID_ARGUMENT.*tags is a map",
        f"ALTER TABLE {shapes} DROP COLUMN pts.element": "INVALID_ARGUMENT.*pts is a list",
        f"ALTER TABLE {shapes} RENAME COLUMN nums.element TO item": "INVALID_ARGUMENT.*nums is a list",
                f"ALTER TABLE {shapes} ADD COLUMN pts.item.y INT": "NOT_FOUND.*no column pts.item",
        f"ALTER TABLE {shapes} ALTER COLUMN pts.element.x TYPE STRING": "INVALID_ARGUMENT.*cannot change from",
    }
    for sql, error in refused.items():
        with pytest.raises(adbc_driver_manager.Error, match=error):
            cur.execute(sql)
    assert catalog.load_table(shapes).schema() == before
    for change in ["ADD COLUMN m.key.j INT", "ALTER COLUMN m.key.k TYPE BIGINT", "RENAME COLUMN m.key.k TO j"]:
        with pytest.raises(adbc_driver_manager.Error, match="INVALID_ARGUMENT.*m.key is a map's key"):
            cur.execute(f"ALTER TABLE {keyed} {change}")


def test_a_nested_partition_source_cannot_be_dropped(cur, catalog, schema):
    name = f"{schema}.located"
    cur.execute(f"CREATE TABLE {name} (id INT, loc STRUCT<region STRING, city STRING>)")
    # Floe's PARTITIONED BY takes top-level columns; pyiceberg partitions by a nested one.
    with catalog.load_table(name).update_spec() as spec:
        spec.add_identity("loc.region")
    with pytest.raises(adbc_driver_manager.Error, match="INVALID_ARGUMENT.*partition source"):
        cur.execute(f"ALTER TABLE {name} DROP COLUMN loc.region")
    with pytest.raises(adbc_driver_manager.Error, match="INVALID_ARGUMENT.*holds partition source"):
        cur.execute(f"ALTER TABLE {name} DROP COLUMN loc")
    cur.execute(f"ALTER TABLE {name} DROP COLUMN loc.city")
    assert [f.name for f in catalog.load_table(name).schema().find_field("loc").field_type.fields] == ["region"]
