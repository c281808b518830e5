"""What Superset does with a Flight SQL database, through flightsql-dbapi's SQLAlchemy
dialect (`datafusion+flightsql://`): inspect schemas, tables and columns, then query.
Runs in its own virtualenv (flightsql-dbapi pins SQLAlchemy < 2):

    python superset_probe.py HOST:PORT SCHEMA TABLE
"""

import sys

import flightsql.sqlalchemy  # noqa: F401  (registers the dialect)
from sqlalchemy import create_engine, inspect, text

address, schema, table = sys.argv[1:4]
engine = create_engine(f"datafusion+flightsql://{address}?insecure=true")
inspector = inspect(engine)
print("schemas", inspector.get_schema_names())
print("tables", inspector.get_table_names(schema=schema))
print("columns", [(c["name"], str(c["type"])) for c in inspector.get_columns(table, schema=schema)])
with engine.connect() as connection:
    print("rows", connection.execute(text(f"SELECT * FROM {schema}.{table} ORDER BY 1")).fetchall())
