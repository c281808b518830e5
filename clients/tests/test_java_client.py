"""The JDBC driver's call order with Apache Arrow's Java Flight SQL client
(clients/java/FloeFlightSql.java; jars fetched by clients/java/fetch-jars.sh)."""

import os
import subprocess
from pathlib import Path

from test_auth import PASSWORDS, claims, hashes, jwt, secured  # noqa: F401  (fixtures)

JARS = Path(os.environ.get("FLOE_JAVA_JARS", Path.home() / ".cache/floe-java/jars"))
SOURCE = Path(__file__).resolve().parent.parent / "java" / "FloeFlightSql.java"


def run_java(tmp_path, uri, *statements, env=None, ok=True):
    classpath = f"{JARS}/*"
    subprocess.run(["javac", "-cp", classpath, "-d", str(tmp_path), str(SOURCE)], check=True)
    result = subprocess.run(
        ["java", "--add-opens=java.base/java.nio=ALL-UNNAMED", "-cp", f"{classpath}:{tmp_path}",
         "FloeFlightSql", uri, *statements],
        capture_output=True, text=True, timeout=120, env={**os.environ, **(env or {})},
    )
    if not ok:
        assert result.returncode != 0
        return result.stderr
    assert result.returncode == 0, result.stderr
    return [line.split("\t") for line in result.stdout.splitlines()]


def test_jdbc_call_order(server, schema, tmp_path):
    lines = run_java(
        tmp_path, server.uri,
        f"CREATE TABLE {schema}.jdbc (id BIGINT NOT NULL, name STRING)",
        f"INSERT INTO {schema}.jdbc VALUES (1, 'ann'), (2, 'bo')",
        f"SELECT id, name FROM {schema}.jdbc ORDER BY id",
    )
    by_label = {}
    for label, *row in lines:
        by_label.setdefault(label, []).append(row)
    # Every SqlInfo code the spec defines arrives.
    codes = {int(row[0]) for row in by_label["sql_info"][1:] if row and row[0].isdigit()}
    assert codes >= set(range(0, 6)) | set(range(8, 12)) | {100, 101} | set(range(500, 577))
    assert ["floe"] in by_label["catalogs"]
    assert ["floe", schema] in by_label["schemas"]
    assert ["TABLE"] in by_label["table_types"]
    assert by_label["update"] == [["0"], ["2"]]
    assert by_label["query"] == [["id", "name"], ["1", "ann"], ["2", "bo"]]


def test_jdbc_use_sets_the_schema_of_the_next_statements(server, schema, tmp_path):
    """USE answers with the session cookie, which the JDBC driver sends with its later calls."""
    lines = run_java(
        tmp_path, server.uri,
        f"CREATE TABLE {schema}.used (id INT)",
        f"INSERT INTO {schema}.used VALUES (5)",
        f"USE {schema}",
        "SELECT id, current_schema() AS s FROM used",
    )
    assert [row for row in lines if row[0] == "query"] == [["query", "id", "s"], ["query", "5", schema]]


def test_jdbc_call_order_with_auth(secured, tmp_path):
    """JDBC's `user=`/`password=` (Basic on Handshake) and `token=` (a bearer on
    Handshake, checked and handed back), then the same calls with the bearer."""
    statements = ["INSERT INTO sales.orders VALUES (10, 1.5)", "SELECT count(*) AS n FROM sales.orders"]
    lines = run_java(tmp_path, secured.uri, *statements,
                     env={"FLOE_USER": "alice", "FLOE_PASSWORD": PASSWORDS["alice"]})
    assert ["floe", "sales"] in [row[1:] for row in lines if row[0] == "schemas"]
    assert [row for row in lines if row[0] in ("update", "query")][0] == ["update", "1"]

    token = jwt(claims("reader"))
    lines = run_java(tmp_path, secured.uri, "SELECT id FROM sales.orders WHERE id = 10", env={"FLOE_TOKEN": token})
    # The read-only user's SqlInfo says so (code 3, FLIGHT_SQL_SERVER_READ_ONLY).
    read_only = [row for row in lines if row[0] == "sql_info" and row[1] == "3"]
    assert read_only and "true" in read_only[0][2], read_only
    assert ["query", "10"] in lines
    # The reader sees only `sales`.
    assert [row[1:] for row in lines if row[0] == "schemas"][1:] == [["floe", "sales"]]

    stderr = run_java(tmp_path, secured.uri, "SELECT 1", env={"FLOE_TOKEN": jwt(claims("reader"), key="x" * 40)}, ok=False)
    assert "UNAUTHENTICATED" in stderr, stderr
    stderr = run_java(tmp_path, secured.uri, "DROP TABLE sales.orders", env={"FLOE_TOKEN": token}, ok=False)
    # arrow-java names gRPC's PERMISSION_DENIED `UNAUTHORIZED`.
    assert "UNAUTHORIZED: user 'reader' may not change schema 'sales'" in stderr, stderr
