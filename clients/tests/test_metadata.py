"""Browsing the catalog the way ADBC and BI tools do: GetCatalogs, GetDbSchemas,
GetTables (with column schemas and their Flight SQL metadata) and GetTableTypes."""

import pyarrow as pa
import pyarrow.flight as flight

from floe_flight import _SQL_PREFIX, _length_delimited


def objects(conn, **filters):
    return conn.adbc_get_objects(**filters).read_all().to_pylist()


def test_adbc_lists_catalogs_schemas_tables_and_columns(server, conn, cur, schema):
    cur.execute(f"CREATE TABLE {schema}.orders (id BIGINT NOT NULL COMMENT 'the key', amount DECIMAL(10, 2), note STRING)")
    cur.execute(f"CREATE TABLE {schema}.order_lines (n INT)")
    cur.execute(f"CREATE TABLE {schema}.other (n INT)")

    catalogs = objects(conn, depth="catalogs")
    assert [c["catalog_name"] for c in catalogs] == ["floe"]

    [catalog] = objects(conn, depth="db_schemas", catalog_filter="floe", db_schema_filter=schema)
    assert [s["db_schema_name"] for s in catalog["catalog_db_schemas"]] == [schema]
    assert objects(conn, depth="db_schemas", catalog_filter="nope") == []

    [catalog] = objects(conn, depth="all", db_schema_filter=schema, table_name_filter="order%")
    [db_schema] = catalog["catalog_db_schemas"]
    tables = {t["table_name"]: t for t in db_schema["db_schema_tables"]}
    assert sorted(tables) == ["order_lines", "orders"]
    assert tables["orders"]["table_type"] == "TABLE"
    columns = [(c["column_name"], c["ordinal_position"]) for c in tables["orders"]["table_columns"]]
    assert columns == [("id", 1), ("amount", 2), ("note", 3)]
    # `_` is a one-character wildcard unless escaped.
    [catalog] = objects(conn, depth="tables", db_schema_filter=schema, table_name_filter="order\\_lines")
    assert [t["table_name"] for t in catalog["catalog_db_schemas"][0]["db_schema_tables"]] == ["order_lines"]

    assert conn.adbc_get_table_schema("orders", db_schema_filter=schema) == pa.schema(
        [("id", pa.int64(), False), ("amount", pa.decimal128(10, 2)), ("note", pa.string())]
    )
    assert "TABLE" in conn.adbc_get_table_types()


def test_get_tables_carries_jdbc_column_metadata(server, cur, schema):
    cur.execute(f"CREATE TABLE {schema}.described (id BIGINT NOT NULL COMMENT 'the key', amount DECIMAL(10, 2), note STRING)")
    # CommandGetTables{db_schema_filter_pattern=2, table_name_filter_pattern=3, include_schema=5}
    command = (
        _length_delimited(2, schema.encode())
        + _length_delimited(3, b"described")
        + b"\x28\x01"
    )
    descriptor = flight.FlightDescriptor.for_command(
        _length_delimited(1, (_SQL_PREFIX + "CommandGetTables").encode()) + _length_delimited(2, command)
    )
    client = flight.FlightClient(server.uri)
    info = client.get_flight_info(descriptor)
    rows = client.do_get(info.endpoints[0].ticket).read_all().to_pylist()
    client.close()
    assert [(r["catalog_name"], r["db_schema_name"], r["table_name"]) for r in rows] == [
        ("floe", schema, "described")
    ]
    table_schema = pa.ipc.read_schema(pa.py_buffer(rows[0]["table_schema"]))
    meta = {f.name: {k.decode(): v.decode() for k, v in f.metadata.items()} for f in table_schema}
    assert meta["id"]["ARROW:FLIGHT:SQL:TYPE_NAME"] == "BIGINT"
    assert meta["id"]["ARROW:FLIGHT:SQL:REMARKS"] == "the key"
    assert meta["id"]["ARROW:FLIGHT:SQL:TABLE_NAME"] == "described"
    assert (meta["amount"]["ARROW:FLIGHT:SQL:PRECISION"], meta["amount"]["ARROW:FLIGHT:SQL:SCALE"]) == ("10", "2")
    assert meta["note"]["ARROW:FLIGHT:SQL:IS_CASE_SENSITIVE"] == "1"


def test_sql_info_answers_every_code_of_the_spec(server, conn):
    descriptor = flight.FlightDescriptor.for_command(
        _length_delimited(1, (_SQL_PREFIX + "CommandGetSqlInfo").encode()) + _length_delimited(2, b"")
    )
    client = flight.FlightClient(server.uri)
    info = client.get_flight_info(descriptor)
    rows = client.do_get(info.endpoints[0].ticket).read_all().to_pylist()
    client.close()
    values = {row["info_name"]: row["value"] for row in rows}
    expected = set(range(0, 6)) | set(range(8, 12)) | {100, 101} | set(range(500, 577))
    assert expected - set(values) == set()
    assert values[0] == "Floe"
    assert values[504] == '"'
    assert values[563] is False  # transactions: the JDBC driver fails on a missing code
    assert "SELECT" in values[508]
    assert "ABS" in values[509] and "UPPER" in values[510] and "NOW" in values[512]
    assert {"CURRENT_USER", "CURRENT_SCHEMA", "CURRENT_CATALOG", "VERSION"} <= set(values[511])
    assert dict(values[517])[19]  # VARCHAR converts to something

    adbc_info = conn.adbc_get_info()
    assert adbc_info["vendor_name"] == "Floe"


def _listing(server, command_name, body=b""):
    descriptor = flight.FlightDescriptor.for_command(
        _length_delimited(1, (_SQL_PREFIX + command_name).encode()) + _length_delimited(2, body)
    )
    client = flight.FlightClient(server.uri)
    info = client.get_flight_info(descriptor)
    table = client.do_get(info.endpoints[0].ticket).read_all()
    client.close()
    assert table.schema == info.schema
    return table


def test_keys_are_empty_and_type_info_lists_floes_types(server):
    table_field = _length_delimited(3, b"t")
    assert _listing(server, "CommandGetPrimaryKeys", table_field).num_rows == 0
    assert _listing(server, "CommandGetPrimaryKeys", table_field).schema.names[-1] == "key_sequence"
    assert _listing(server, "CommandGetImportedKeys", table_field).num_rows == 0
    assert _listing(server, "CommandGetExportedKeys", table_field).num_rows == 0
    cross = _length_delimited(3, b"a") + _length_delimited(6, b"b")
    assert _listing(server, "CommandGetCrossReference", cross).schema.names[-1] == "delete_rule"
    types = _listing(server, "CommandGetXdbcTypeInfo").to_pylist()
    assert {"BIGINT", "VARCHAR", "TIMESTAMP", "DECIMAL"} <= {t["type_name"] for t in types}
    # Filtered by data type (BIGINT is -5).
    only = _listing(server, "CommandGetXdbcTypeInfo", b"\x08\xfb\xff\xff\xff\xff\xff\xff\xff\xff\x01").to_pylist()
    assert [t["type_name"] for t in only] == ["BIGINT"]
