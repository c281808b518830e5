"""Authentication and grants ([auth]), with the clients' own login paths: ADBC's
username/password and pre-issued bearer token, pyarrow's Basic handshake."""

import base64
import hashlib
import hmac
import json
import secrets
import subprocess
import sys
import time
from pathlib import Path

import adbc_driver_flightsql
import adbc_driver_flightsql.dbapi as flight_sql
import adbc_driver_manager
import pyarrow as pa
import pyarrow.flight as flight
import pytest

from conftest import FLOE_BIN, Server, free_port, query

# A password with the characters that break naive parsing: a colon, quotes, a space, non-ASCII.
PASSWORDS = {"alice": "al:ice 'pw' é-" + secrets.token_hex(8), "reader": "reader-" + secrets.token_hex(8)}
JWT_SECRET = secrets.token_hex(32)


def hash_password(password):
    out = subprocess.run([FLOE_BIN, "hash-password"], input=password + "\n", capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


@pytest.fixture(scope="module")
def hashes():
    return {user: hash_password(password) for user, password in PASSWORDS.items()}


@pytest.fixture(scope="module")
def secured(tmp_path_factory, hashes):
    """A server with two users: alice may read everything and change `sales`; reader
    may only read `sales`."""
    root = tmp_path_factory.mktemp("auth")
    (root / "jwt.secret").write_text(JWT_SECRET + "\n")
    (root / "floe.toml").write_text(
        f"""
[auth]
jwt_secret_file = "{root / 'jwt.secret'}"
token_ttl_secs = 600
[[auth.users]]
name = "alice"
password_hash = "{hashes['alice']}"
read = ["*"]
write = ["sales"]
[[auth.users]]
name = "reader"
password_hash = "{hashes['reader']}"
read = ["sales"]
"""
    )
    srv = Server(root / "data", ["--config", str(root / "floe.toml")])
    with login(srv, "alice") as conn, conn.cursor() as cur:
        cur.execute("CREATE SCHEMA sales")
        cur.execute("CREATE TABLE sales.orders (id BIGINT, amount DOUBLE)")
        cur.execute("INSERT INTO sales.orders VALUES (1, 9.5), (2, 20.0)")
    # `secret` is made by an unrestricted path: alice may not create schemas outside sales.
    srv.pyiceberg().create_namespace("secret")
    yield srv
    srv.stop()


def login(server, user, password=None):
    return flight_sql.connect(
        server.uri,
        db_kwargs={"username": user, "password": PASSWORDS[user] if password is None else password},
    )


def with_token(server, token):
    return flight_sql.connect(
        server.uri,
        db_kwargs={adbc_driver_flightsql.DatabaseOptions.AUTHORIZATION_HEADER.value: f"Bearer {token}"},
    )


def jwt(claims, key=JWT_SECRET):
    def b64(data):
        return base64.urlsafe_b64encode(data).rstrip(b"=")

    header = b64(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
    body = b64(json.dumps(claims).encode())
    signature = hmac.new(key.encode(), header + b"." + body, hashlib.sha256).digest()
    return (header + b"." + body + b"." + b64(signature)).decode()


def claims(user, **overrides):
    now = int(time.time())
    return {"iss": "floe", "sub": user, "iat": now, "exp": now + 300, "sid": "s1", **overrides}


def fails_with(code, call):
    with pytest.raises(adbc_driver_manager.Error) as err:
        call()
    assert f"({code};" in str(err.value), str(err.value)
    return str(err.value)


def run(connect, sql="SELECT 1"):
    """Connects and runs `sql` (a login may fail at either step, depending on the client)."""
    with connect() as conn, conn.cursor() as cur:
        cur.execute(sql)
        return cur.fetch_arrow_table()


def count_orders(server):
    return server.pyiceberg().load_table("sales.orders").scan().to_arrow().num_rows


def test_users_log_in_with_a_password_and_query(secured):
    with login(secured, "alice") as conn, conn.cursor() as cur:
        got = query(cur, "SELECT id, amount FROM sales.orders ORDER BY id").to_pylist()
    assert got == [{"id": 1, "amount": 9.5}, {"id": 2, "amount": 20.0}]


def test_the_handshake_returns_a_signed_bearer_token(secured):
    client = flight.FlightClient(secured.uri)
    name, value = client.authenticate_basic_token("alice", PASSWORDS["alice"])  # padded Basic
    assert name == b"authorization" and value.startswith(b"Bearer ")
    token = value.decode().removeprefix("Bearer ")
    header, body, _ = token.split(".")
    payload = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
    assert json.loads(base64.urlsafe_b64decode(header + "=" * (-len(header) % 4)))["alg"] == "HS256"
    assert payload["sub"] == "alice" and payload["iss"] == "floe"
    assert 590 <= payload["exp"] - time.time() <= 601
    # The token works for later calls, from another client too (ADBC, no handshake).
    with with_token(secured, token) as conn, conn.cursor() as cur:
        assert query(cur, "SELECT count(*) AS n FROM sales.orders").to_pylist() == [{"n": 2}]
    # A bearer on Handshake (JDBC's `token=`) is checked and handed back.
    options = flight.FlightCallOptions(headers=[(b"authorization", value)])
    echoed = client.authenticate_basic_token("", "", options)
    assert echoed == (b"authorization", value)


def test_wrong_or_missing_credentials_are_unauthenticated(secured):
    for user, password in [("alice", "wrong"), ("nobody", "x")]:
        fails_with("Unauthenticated", lambda: run(lambda: login(secured, user, password)))
    fails_with("Unauthenticated", lambda: run(lambda: flight_sql.connect(secured.uri)))
    with pytest.raises(flight.FlightUnauthenticatedError):
        flight.FlightClient(secured.uri).authenticate_basic_token("alice", "wrong")


def test_forged_and_expired_tokens_are_unauthenticated(secured):
    # Properly signed and current: accepted (HS256, iss, sub, exp).
    with with_token(secured, jwt(claims("alice"))) as conn, conn.cursor() as cur:
        assert query(cur, "SELECT 1 AS one").to_pylist() == [{"one": 1}]
    forged = [
        jwt(claims("alice"), key="not-the-server-secret-" + "x" * 20),  # wrong key
        jwt(claims("alice", iss="someone-else")),
        jwt(claims("ghost")),  # no such user
        "not.a.token",
    ]
    for token in forged:
        fails_with("Unauthenticated", lambda: run(lambda: with_token(secured, token)))
    expired = jwt(claims("alice", iat=int(time.time()) - 100, exp=int(time.time()) - 1))
    message = fails_with("Unauthenticated", lambda: run(lambda: with_token(secured, expired)))
    assert "expired" in message


def test_a_read_only_user_cannot_change_anything(secured):
    before = secured.pyiceberg().load_table("sales.orders")
    snapshots = len(before.snapshots())
    with login(secured, "reader") as conn, conn.cursor() as cur:
        assert query(cur, "SELECT count(*) AS n FROM sales.orders").to_pylist() == [{"n": 2}]
        for statement in [
            "INSERT INTO sales.orders VALUES (3, 1.0)",
            "DROP TABLE sales.orders",
            "CREATE TABLE sales.more (id BIGINT)",
            "DROP SCHEMA sales CASCADE",
        ]:
            fails_with("PermissionDenied", lambda: cur.execute(statement))
        fails_with(
            "PermissionDenied",
            lambda: cur.adbc_ingest("orders", pa.table({"id": [3], "amount": [1.0]}), mode="append",
                                    db_schema_name="sales"),
        )
        # Reading outside its grants, whether the table exists or not.
        fails_with("PermissionDenied", lambda: cur.execute("SELECT * FROM secret.anything"))
    after = secured.pyiceberg().load_table("sales.orders")
    assert len(after.snapshots()) == snapshots and count_orders(secured) == 2
    assert [t[1] for t in secured.pyiceberg().list_tables("sales")] == ["orders"]


def test_writes_are_limited_to_the_users_namespaces(secured):
    with login(secured, "alice") as conn, conn.cursor() as cur:
        fails_with("PermissionDenied", lambda: cur.execute("CREATE TABLE secret.t (id BIGINT)"))
        fails_with("PermissionDenied", lambda: cur.execute("CREATE SCHEMA elsewhere"))
        # One forbidden name refuses the whole statement before anything is dropped.
        cur.execute("CREATE TABLE sales.scratch (id BIGINT)")
        fails_with("PermissionDenied", lambda: cur.execute("DROP TABLE sales.scratch, secret.t"))
        assert "scratch" in [t[1] for t in secured.pyiceberg().list_tables("sales")]
        cur.execute("DROP TABLE sales.scratch")
    assert secured.pyiceberg().list_tables("secret") == []


def test_metadata_lists_only_what_the_user_may_read(secured):
    with login(secured, "reader") as conn:
        objects = conn.adbc_get_objects(depth="tables").read_all().to_pylist()
        schemas = {s["db_schema_name"] for c in objects for s in c["catalog_db_schemas"]}
        assert schemas == {"sales"}
        with conn.cursor() as cur:
            listed = query(cur, "SELECT table_schema FROM information_schema.tables "
                                "WHERE table_schema NOT IN ('information_schema')").to_pylist()
            shown = query(cur, "SHOW SCHEMAS").to_pylist()
        assert {row["table_schema"] for row in listed} == {"sales"}
        assert [row["schema_name"] for row in shown] == ["sales"]
    with login(secured, "alice") as conn:
        objects = conn.adbc_get_objects(depth="db_schemas").read_all().to_pylist()
        schemas = {s["db_schema_name"] for c in objects for s in c["catalog_db_schemas"]}
        assert {"sales", "secret", "default"} <= schemas


def test_sessions_carry_the_current_schema(secured):
    with login(secured, "alice") as conn:
        assert conn.adbc_current_catalog == "floe"
        conn.adbc_current_catalog = "floe"  # JDBC's `catalog=` sends this at connect
        conn.adbc_current_db_schema = "sales"
        assert conn.adbc_current_db_schema == "sales"
        with conn.cursor() as cur:
            assert query(cur, "SELECT count(*) AS n FROM orders").to_pylist() == [{"n": 2}]
            # Answered from the session, also beside a scan that executors run.
            session = "SELECT current_user AS u, session_user AS su, current_catalog AS c, " \
                      "current_schema() AS s, current_database() AS d, count(*) AS n FROM orders"
            assert query(cur, session).to_pylist() == [
                {"u": "alice", "su": "alice", "c": "floe", "s": "sales", "d": "floe", "n": 2}]
            cur.execute("INSERT INTO orders VALUES (3, 1.0)")
            cur.adbc_ingest("orders", pa.table({"id": [4], "amount": [2.0]}), mode="append")
            assert query(cur, "SELECT count(*) AS n FROM orders").to_pylist() == [{"n": 4}]
        with pytest.raises(adbc_driver_manager.Error):
            conn.adbc_current_db_schema = "no_such_schema"
        with pytest.raises(adbc_driver_manager.Error):
            conn.adbc_current_catalog = "other_catalog"
        assert conn.adbc_current_db_schema == "sales"
    # Another connection has its own session.
    with login(secured, "alice") as conn, conn.cursor() as cur:
        assert conn.adbc_current_db_schema == "default"
        assert query(cur, "SELECT current_schema() AS s").to_pylist() == [{"s": "default"}]
        fails_with("NotFound", lambda: cur.execute("SELECT * FROM orders"))
    with login(secured, "reader") as conn, conn.cursor() as cur:
        with pytest.raises(adbc_driver_manager.Error):
            conn.adbc_current_db_schema = "secret"  # not readable: as if it did not exist
        fails_with("NotFound", lambda: cur.execute("USE secret"))
        cur.execute("USE sales")
        assert query(cur, "SELECT current_user AS u, count(*) AS n FROM orders").to_pylist() == [
            {"u": "reader", "n": 4}]


def test_show_create_table_only_of_a_table_the_user_may_read(secured):
    hidden = secured.pyiceberg().create_table("secret.hidden", schema=pa.schema([("x", pa.int64())]))
    try:
        with login(secured, "reader") as conn, conn.cursor() as cur:
            message = fails_with("NotFound", lambda: cur.execute("SHOW CREATE TABLE secret.hidden"))
            assert "x BIGINT" not in message
        with login(secured, "alice") as conn, conn.cursor() as cur:
            shown = query(cur, "SHOW CREATE TABLE secret.hidden").to_pylist()
            assert "x BIGINT" in shown[0]["create_statement"]
    finally:
        secured.pyiceberg().drop_table(hidden.name())


def test_no_secret_reaches_the_logs(secured, hashes):
    # Failed and successful logins have happened above; make one more of each.
    fails_with("Unauthenticated", lambda: run(lambda: login(secured, "alice", "wrong-" + PASSWORDS["alice"])))
    log = secured.process.output()
    for secret in [*PASSWORDS.values(), *hashes.values(), JWT_SECRET]:
        assert secret not in log
    assert "$argon2" not in log


def test_a_server_reachable_from_other_machines_needs_auth(tmp_path):
    out = subprocess.run(
        [FLOE_BIN, "serve", "--data-dir", str(tmp_path), "--flight-addr", f"0.0.0.0:{free_port()}"],
        capture_output=True, text=True, timeout=60,
    )
    assert out.returncode != 0
    assert "[auth]" in out.stderr + out.stdout


def test_the_python_example_logs_in_and_binds_parameters(tmp_path, hashes):
    """clients/examples/auth_and_parameters.py against a server where alice may write
    `demo`."""
    root = tmp_path
    (root / "floe.toml").write_text(
        f"""
[auth]
[[auth.users]]
name = "alice"
password_hash = "{hashes['alice']}"
read = ["*"]
write = ["demo"]
"""
    )
    srv = Server(root / "data", ["--config", str(root / "floe.toml")])
    try:
        example = Path(__file__).resolve().parent.parent / "examples" / "auth_and_parameters.py"
        run = subprocess.run(
            [sys.executable, str(example), srv.uri, "alice"],
            input=PASSWORDS["alice"] + "\n", capture_output=True, text=True, timeout=120,
        )
        assert run.returncode == 0, run.stderr
        assert run.stdout.splitlines() == [
            str([{"id": 2, "name": "O'Brien"}, {"id": 3, "name": None}]),
            str([{"n": 5}]),
        ]
        # No [auth] secret file: tokens are signed with a key made at start, and it says so.
        assert "stop working when the server restarts" in srv.process.output()
    finally:
        srv.stop()
