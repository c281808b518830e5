"""The server process: start-up checks, handshake, SqlInfo, graceful shutdown,
catalogs made by older pyiceberg versions, and clients planning at the same time."""

import sqlite3
import threading
import time
import subprocess

import adbc_driver_flightsql.dbapi as flight_sql
import adbc_driver_manager
import pytest
import pyarrow.flight as flight

from conftest import FLOE_BIN, Server, query
from floe_flight import _command, _length_delimited


def test_handshake_accepts_any_credentials_while_auth_is_off(server):
    client = flight.FlightClient(server.uri)
    header = client.authenticate_basic_token("someone", "anything")
    assert header[0] == b"authorization"
    assert header[1].startswith(b"Bearer ")
    client.close()

    with flight_sql.connect(
        server.uri,
        db_kwargs={"username": "someone", "password": "anything"},
    ) as conn, conn.cursor() as cur:
        assert query(cur, "SELECT 41 + 1 AS answer").to_pylist() == [{"answer": 42}]


def test_sql_info_and_version_name_the_server(conn):
    info = conn.adbc_get_info()
    assert info["vendor_name"] == "Floe"
    assert info["vendor_version"]
    with conn.cursor() as cur:
        version = query(cur, "SELECT version() AS v").to_pylist()[0]["v"]
    assert version.startswith(f"Floe {info['vendor_version']} (Apache DataFusion ")


def test_use_sets_the_schema_of_the_connections_session(server, cur, schema):
    cur.execute(f"CREATE TABLE {schema}.t (v INT)")
    cur.execute(f"INSERT INTO {schema}.t VALUES (7)")
    with server.connect() as conn, conn.cursor() as c:
        # The connection has no session yet: USE opens one.
        c.execute(f"USE {schema}")
        assert query(c, "SELECT v, current_schema() AS s FROM t").to_pylist() == [{"v": 7, "s": schema}]
        assert conn.adbc_current_db_schema == schema
        c.execute("USE floe.default")
        assert query(c, "SELECT current_schema() AS s").to_pylist() == [{"s": "default"}]
        c.execute(f"USE SCHEMA {schema}")  # Spark's and Snowflake's forms
        assert query(c, "SELECT current_schema() AS s").to_pylist() == [{"s": schema}]
        c.execute("USE DATABASE default")
        assert query(c, "SELECT current_schema() AS s").to_pylist() == [{"s": "default"}]
        c.execute(f"USE {schema}")
        for refused, code in [("USE no_such_schema", "NotFound"), (f"USE elsewhere.{schema}", "NotFound"),
                              ("USE a.b.c", "InvalidArgument")]:
            with pytest.raises(adbc_driver_manager.Error) as err:
                c.execute(refused)
            assert f"({code};" in str(err.value), refused
        assert query(c, "SELECT v FROM t").to_pylist() == [{"v": 7}]
    # Other connections keep their own schema.
    assert query(cur, "SELECT current_schema() AS s").to_pylist() == [{"s": "default"}]
    with pytest.raises(adbc_driver_manager.Error):
        cur.execute("SELECT v FROM t")


def test_bad_configuration_is_refused_at_start_naming_the_key(tmp_path):
    config = tmp_path / "floe.toml"
    config.write_text('flight_addr = "127.0.0.1:1"\nexecutor_slot = 4\n')
    run = subprocess.run(
        [FLOE_BIN, "serve", "--config", str(config), "--data-dir", str(tmp_path / "d")],
        capture_output=True, text=True, timeout=60,
    )
    assert run.returncode != 0
    assert "executor_slot" in run.stderr

    run = subprocess.run(
        [FLOE_BIN, "serve", "--data-dir", str(tmp_path / "d"), "--scheduler-addr", "nowhere"],
        capture_output=True, text=True, timeout=60,
    )
    assert run.returncode != 0
    assert "scheduler_addr" in run.stderr


def test_sigterm_shuts_down_cleanly(tmp_path):
    srv = Server(tmp_path / "data")
    with srv.connect() as conn, conn.cursor() as cur:
        assert query(cur, "SELECT 1 AS one").to_pylist() == [{"one": 1}]
    assert srv.stop() == 0
    assert "shutting down" in srv.process.output()


def test_catalog_from_old_pyiceberg_without_iceberg_type_is_upgraded(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    db = sqlite3.connect(data / "catalog.db")
    # The schema pyiceberg <= 0.11 created: no iceberg_type column.
    db.execute(
        "CREATE TABLE iceberg_tables (catalog_name VARCHAR(255) NOT NULL, "
        "table_namespace VARCHAR(255) NOT NULL, table_name VARCHAR(255) NOT NULL, "
        "metadata_location VARCHAR(1000), previous_metadata_location VARCHAR(1000), "
        "PRIMARY KEY (catalog_name, table_namespace, table_name))"
    )
    db.execute(
        "CREATE TABLE iceberg_namespace_properties (catalog_name VARCHAR(255) NOT NULL, "
        "namespace VARCHAR(255) NOT NULL, property_key VARCHAR(255) NOT NULL, "
        "property_value VARCHAR(1000) NOT NULL, PRIMARY KEY (catalog_name, namespace, property_key))"
    )
    db.commit()
    db.close()
    srv = Server(data)
    try:
        with srv.connect() as conn, conn.cursor() as cur:
            cur.execute("CREATE TABLE default.t (a INT)")
            cur.execute("INSERT INTO default.t VALUES (7)")
            assert query(cur, "SELECT a FROM default.t").to_pylist() == [{"a": 7}]
        columns = [r[1] for r in sqlite3.connect(data / "catalog.db").execute("PRAGMA table_info(iceberg_tables)")]
        assert "iceberg_type" in columns
        assert srv.pyiceberg().load_table("default.t").scan().to_arrow()["a"].to_pylist() == [7]
    finally:
        srv.stop()


def test_memory_catalog_serves_tables_for_the_process_lifetime(tmp_path):
    srv = Server(tmp_path / "data", ["--catalog-type", "memory"])
    try:
        with srv.connect() as conn, conn.cursor() as cur:
            cur.execute("CREATE TABLE default.m (a INT) PARTITIONED BY (a)")
            cur.execute("INSERT INTO default.m VALUES (1), (2)")
            assert query(cur, "SELECT a FROM default.m ORDER BY a").to_pylist() == [{"a": 1}, {"a": 2}]
        assert not (tmp_path / "data" / "catalog.db").exists()
    finally:
        srv.stop()


# The client's statement handle outlives the server it belongs to.
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_sigterm_during_an_insert_fails_it_cleanly(tmp_path):
    srv = Server(tmp_path / "data")
    outcome = {}

    def long_insert():
        with srv.connect() as conn:
            cur = conn.cursor()
            try:
                cur.execute("INSERT INTO default.big SELECT value FROM generate_series(1, 200000000)")
                outcome["rows"] = cur.fetch_arrow_table().to_pylist()
            except Exception as e:  # noqa: BLE001 - the error is what the test checks
                outcome["error"] = str(e)

    with srv.connect() as conn, conn.cursor() as cur:
        cur.execute("CREATE TABLE default.big (id BIGINT)")
    worker = threading.Thread(target=long_insert)
    worker.start()
    # Signal once the write is under way (its first data file exists).
    table_dir = tmp_path / "data" / "warehouse" / "default" / "big"
    deadline = time.time() + 60
    while not list(table_dir.rglob("*.parquet")) and time.time() < deadline:
        time.sleep(0.05)
    assert list(table_dir.rglob("*.parquet")), "the INSERT never started writing"
    assert srv.stop() == 0
    worker.join(60)
    assert "shutting down" in outcome.get("error", ""), outcome
    assert not list((tmp_path / "data" / "warehouse").rglob("*.parquet"))
    assert srv.pyiceberg().load_table("default.big").snapshots() == []


class _HeaderRecorder(flight.ClientMiddlewareFactory):
    """Keeps the response headers of each call, in order."""

    def __init__(self):
        self.responses = []

    def start_call(self, info):
        recorder = self

        class Middleware(flight.ClientMiddleware):
            def received_headers(self, headers):
                recorder.responses.append(headers)

        return Middleware()


def _set_session_option(client, name: str, value: str, options):
    """SetSessionOptions with one string option, its response headers not looked at."""
    value_message = _length_delimited(1, value.encode())
    entry = _length_delimited(1, name.encode()) + _length_delimited(2, value_message)
    action = flight.Action("SetSessionOptions", _length_delimited(1, entry))
    list(client.do_action(action, options))


def test_the_first_response_to_a_client_hands_it_a_session(server, cur, schema):
    """A client's first call, whatever it is, comes back with a session (cookie and bearer
    token), before any option is set: the Go client inside the ADBC driver can lose the
    headers of the streamed call that sets an option (SetSessionOptions is a DoAction),
    never those of the unary GetFlightInfo it makes when it connects."""
    cur.execute(f"CREATE TABLE {schema}.t (v INT)")
    cur.execute(f"INSERT INTO {schema}.t VALUES (5)")
    recorder = _HeaderRecorder()
    client = flight.FlightClient(server.uri, middleware=[recorder])
    select_one = flight.FlightDescriptor.for_command(_command("CommandStatementQuery", "SELECT 1"))
    client.get_flight_info(select_one)
    first = recorder.responses[0]
    (bearer,) = first["authorization"]
    (cookie,) = first["set-cookie"]
    assert bearer.startswith("Bearer ") and cookie.startswith("arrow_flight_session_id=")

    by_token = flight.FlightCallOptions(headers=[(b"authorization", bearer.encode())])
    _set_session_option(client, "schema", schema, by_token)
    by_cookie = flight.FlightCallOptions(headers=[(b"cookie", cookie.split(";")[0].encode())])
    read_t = flight.FlightDescriptor.for_command(_command("CommandStatementQuery", "SELECT v FROM t"))
    for options in (by_token, by_cookie):
        info = client.get_flight_info(read_t, options)
        assert client.do_get(info.endpoints[0].ticket, options).read_all().to_pylist() == [{"v": 5}]
    client.close()


def test_clients_at_the_same_time_each_read_their_own_schema(server, cur, schema):
    """Each statement plans on its own copy of the session: two clients whose default
    schemas differ, running statements at the same time, each read their own `t`."""
    other = f"{schema}_other"
    cur.execute(f"CREATE SCHEMA {other}")
    for name, value in ((schema, 1), (other, 2)):
        cur.execute(f"CREATE TABLE {name}.t (v INT)")
        cur.execute(f"INSERT INTO {name}.t VALUES ({value})")
    start = threading.Barrier(2)
    answers, errors = {}, []

    def read(name):
        try:
            with server.connect() as conn, conn.cursor() as c:
                conn.adbc_current_db_schema = name
                start.wait()
                answers[name] = {
                    tuple(row.values())
                    for _ in range(40)
                    for row in query(c, "SELECT v, 'it''s' AS q FROM t").to_pylist()
                }
        except Exception as e:  # reported below, with the other thread's answer
            errors.append(e)

    threads = [threading.Thread(target=read, args=(name,)) for name in (schema, other)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    try:
        assert not errors, errors
        assert answers == {schema: {(1, "it's")}, other: {(2, "it's")}}
    finally:
        cur.execute(f"DROP TABLE {other}.t")
        cur.execute(f"DROP SCHEMA {other}")
