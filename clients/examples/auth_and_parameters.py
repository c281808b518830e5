"""Logging in, parameters and the session's schema, with ADBC (`pip install
adbc-driver-flightsql pyarrow`).

    python auth_and_parameters.py grpc://127.0.0.1:32010 alice   # password on stdin

The user needs write access to the `demo` schema (`write = ["demo"]` in `[auth]`).
"""

import getpass
import sys

import adbc_driver_flightsql.dbapi as flight_sql
import pyarrow as pa

uri, user = sys.argv[1], sys.argv[2]
password = getpass.getpass() if sys.stdin.isatty() else sys.stdin.readline().rstrip("\n")

# ADBC logs in with the Handshake and sends the bearer token it gets with every call.
with flight_sql.connect(uri, db_kwargs={"username": user, "password": password}) as conn:
    with conn.cursor() as cur:
        cur.execute("CREATE SCHEMA IF NOT EXISTS demo")
        cur.execute("CREATE TABLE IF NOT EXISTS demo.people (id BIGINT NOT NULL, name STRING)")

    # Unqualified names now mean demo.… for this connection (a Flight SQL session).
    conn.adbc_current_db_schema = "demo"
    with conn.cursor() as cur:
        # Parameters: `?` (or `$1`); executemany sends every row in one call, and an
        # INSERT … VALUES takes them all in one commit.
        cur.executemany("INSERT INTO people VALUES (?, ?)", [(1, "Ann"), (2, "O'Brien"), (3, None)])
        cur.execute("SELECT id, name FROM people WHERE id >= ? ORDER BY id", parameters=(2,))
        print(cur.fetch_arrow_table().to_pylist())
        # Bulk ingest of Arrow data, committed once.
        cur.adbc_ingest("people", pa.table({"id": [4, 5], "name": ["Dee", "Eve"]}), mode="append")
        cur.execute("SELECT count(*) AS n FROM people")
        print(cur.fetch_arrow_table().to_pylist())
