"""The JDBC driver's call order with Apache Arrow's Java Flight SQL client
(clients/java/FloeFlightSql.java; jars fetched by clients/java/fetch-jars.sh)."""

import os
import subprocess
from pathlib import Path

JARS = Path(os.environ.get("FLOE_JAVA_JARS", Path.home() / ".cache/floe-java/jars"))
SOURCE = Path(__file__).resolve().parent.parent / "java" / "FloeFlightSql.java"


def run_java(tmp_path, uri, *statements):
    classpath = f"{JARS}/*"
    subprocess.run(["javac", "-cp", classpath, "-d", str(tmp_path), str(SOURCE)], check=True)
    result = subprocess.run(
        ["java", "--add-opens=java.base/java.nio=ALL-UNNAMED", "-cp", f"{classpath}:{tmp_path}",
         "FloeFlightSql", uri, *statements],
        capture_output=True, text=True, timeout=120,
    )
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
