"""Superset's path: flightsql-dbapi's SQLAlchemy dialect inspects and queries Floe
(clients/superset_probe.py, in its own virtualenv because it pins SQLAlchemy < 2)."""

import os
import subprocess
from pathlib import Path

VENV = Path(os.environ.get("FLOE_SUPERSET_VENV", Path.home() / ".cache/floe-venv-superset"))
PROBE = Path(__file__).resolve().parent.parent / "superset_probe.py"


def test_superset_inspects_and_queries(server, cur, schema):
    cur.execute(f"CREATE TABLE {schema}.visits (id BIGINT NOT NULL, page STRING, n INT)")
    cur.execute(f"INSERT INTO {schema}.visits VALUES (1, 'home', 3), (2, 'about', 1)")
    address = server.uri.removeprefix("grpc://")
    result = subprocess.run(
        [str(VENV / "bin" / "python"), str(PROBE), address, schema, "visits"],
        capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 0, result.stderr
    out = dict(line.split(" ", 1) for line in result.stdout.splitlines())
    assert f"'{schema}'" in out["schemas"]
    assert out["tables"] == "['visits']"
    assert out["columns"] == "[('id', 'BIGINT'), ('page', 'TEXT'), ('n', 'INTEGER')]"
    assert out["rows"] == "[(1, 'home', 3), (2, 'about', 1)]"
