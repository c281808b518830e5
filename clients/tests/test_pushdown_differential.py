"""Randomized differential test: a filter pushed into Iceberg (file pruning and the
reader's row filter, which the tables ask for on every filter) never changes a result.

Each generated predicate runs as a filter on the table (Floe pushes what it can
translate into Iceberg) and, as the reference, as a computed column of one unfiltered
scan (nothing is pushed; DataFusion alone evaluates it). The table has many files
written across schema changes: int→long and float→double promotion, a rename, a
column dropped and re-added under the same name, an identity partition, NULLs and NaN,
and a decimal column (compared with decimal literals; those prune files but never reach
the reader: given `p <= 1.50`, Iceberg 0.10.1's row filter kept no row of the files Floe
writes, while it read those pyiceberg wrote right).
"""

import datetime
import random
from decimal import Decimal

import pyarrow as pa
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.transforms import IdentityTransform
from pyiceberg.types import (
    BooleanType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    NestedField,
    StringType,
)

from conftest import query

SEED = 20261203
PREDICATES = 250
PER_QUERY = 5
ROWS = 180

STRINGS = ["a", "ab", "abc", "b", "ba", "", "a%b", "A", "zz"]
DATES = [datetime.date(2024, 1, 1), datetime.date(2024, 6, 30), datetime.date(1999, 12, 31)]
AMOUNTS = ["0.10", "1.50", "-2.25", "100.10", "0.00", "-0.01", "99999999.99", "-99999999.99"]


def _maybe(rng, value, null_rate=0.15):
    return None if rng.random() < null_rate else value


def _floats(rng):
    return rng.choice([0.1, 1.5, -2.25, 3.0, 100.1, float("nan"), 0.0, -0.0, 1e10])


def _build(catalog, name, rng):
    schema = Schema(
        NestedField(1, "rid", LongType(), required=True),
        NestedField(2, "i", IntegerType(), required=False),
        NestedField(3, "f", FloatType(), required=False),
        NestedField(4, "d", DoubleType(), required=False),
        NestedField(5, "s", StringType(), required=False),
        NestedField(6, "x", StringType(), required=False),
        NestedField(7, "b", BooleanType(), required=False),
        NestedField(8, "dt", DateType(), required=False),
        NestedField(9, "g", IntegerType(), required=False),
        NestedField(10, "p", DecimalType(10, 2), required=False),
    )
    spec = PartitionSpec(PartitionField(9, 1000, IdentityTransform(), "g"))
    table = catalog.create_table(name, schema, partition_spec=spec)
    next_rid = 0

    def rows(n, big):
        nonlocal next_rid
        out = []
        for _ in range(n):
            i = rng.choice([-3, -1, 0, 1, 2, 5, 7, 2**31 - 1, -(2**31)])
            if big and rng.random() < 0.3:
                i = rng.choice([5_000_000_000, -5_000_000_000, 2**31])
            out.append(
                {
                    "rid": next_rid,
                    "i": _maybe(rng, i),
                    "f": _maybe(rng, _floats(rng)),
                    "d": _maybe(rng, _floats(rng)),
                    "s": _maybe(rng, rng.choice(STRINGS)),
                    "x": _maybe(rng, rng.choice(STRINGS)),
                    "b": _maybe(rng, rng.random() < 0.5),
                    "dt": _maybe(rng, rng.choice(DATES)),
                    "g": _maybe(rng, rng.choice([1, 2]), 0.05),
                    "p": _maybe(rng, Decimal(rng.choice(AMOUNTS))),
                }
            )
            next_rid += 1
        return out

    def append(arrow_schema, n, big=False, drop=(), rename=None):
        data = rows(n, big)
        for r in data:
            for k in drop:
                r.pop(k)
            if rename:
                r[rename[1]] = r.pop(rename[0])
        table.append(pa.Table.from_pylist(data, schema=arrow_schema))

    def arrow(fields):
        return pa.schema([pa.field(n, t, nullable=(n != "rid")) for n, t in fields])

    v1 = [
        ("rid", pa.int64()), ("i", pa.int32()), ("f", pa.float32()), ("d", pa.float64()),
        ("s", pa.string()), ("x", pa.string()), ("b", pa.bool_()), ("dt", pa.date32()),
        ("g", pa.int32()), ("p", pa.decimal128(10, 2)),
    ]
    for _ in range(2):
        append(arrow(v1), 30)

    with table.update_schema() as update:
        update.update_column("i", LongType())
        update.update_column("f", DoubleType())
        update.rename_column("s", "name")
    table = catalog.load_table(name)
    v2 = [(n if n != "s" else "name", t) for n, t in v1]
    v2 = [(n, pa.int64() if n == "i" else pa.float64() if n == "f" else t) for n, t in v2]
    for _ in range(2):
        append(arrow(v2), 30, big=True, rename=("s", "name"))

    with table.update_schema() as update:
        update.delete_column("x")
    table = catalog.load_table(name)
    with table.update_schema() as update:
        update.add_column("x", LongType())
    table = catalog.load_table(name)
    v3 = [(n, t) for n, t in v2 if n != "x"] + [("x", pa.int64())]
    for _ in range(2):
        data_schema = arrow(v3)
        data = rows(30, True)
        for r in data:
            r["name"] = r.pop("s")
            r["x"] = None if r["x"] is None else len(r["x"])
        table.append(pa.Table.from_pylist(data, schema=data_schema))
    return table


def _literal(rng, column):
    if column in ("i", "x", "g", "rid"):
        return str(rng.choice([-5_000_000_000, -3, -1, 0, 1, 2, 3, 5, 7, 2**31 - 1, 2**31, 5_000_000_000]))
    if column in ("f", "d"):
        v = rng.choice([0.1, 1.5, -2.25, 3.0, 100.1, 0.0, 1e10, "nan", "100.1f"])
        if v == "nan":
            return "CAST('NaN' AS DOUBLE)"
        if v == "100.1f":
            return "CAST(CAST(100.1 AS FLOAT) AS DOUBLE)"
        return repr(v)
    if column == "name":
        return "'" + rng.choice(STRINGS).replace("'", "''") + "'"
    if column == "dt":
        return f"DATE '{rng.choice(DATES).isoformat()}'"
    if column == "b":
        return rng.choice(["true", "false"])
    if column == "p":
        # A literal of another scale or an integer makes DataFusion cast the column.
        return rng.choice(AMOUNTS + ["1.5", "100.1", "1.505", "0", "-3", "CAST(1.5 AS DECIMAL(10, 2))"])
    raise AssertionError(column)


COLUMNS = ["i", "f", "d", "name", "x", "b", "dt", "g", "rid", "p"]


def _atom(rng):
    column = rng.choice(COLUMNS)
    kind = rng.random()
    if kind < 0.12:
        return f"{column} IS {rng.choice(['', 'NOT '])}NULL"
    if kind < 0.25:
        # Long lists stay IN lists; DataFusion turns short ones into ORs of equalities.
        count = rng.randint(20, 40) if rng.random() < 0.3 else rng.randint(1, 4)
        values = ", ".join(_literal(rng, column) for _ in range(count))
        if rng.random() < 0.2:
            values += ", NULL"
        return f"{column} {rng.choice(['', 'NOT '])}IN ({values})"
    if kind < 0.32:
        lo, hi = sorted([_literal(rng, column), _literal(rng, column)]) if column == "name" else (
            _literal(rng, column),
            _literal(rng, column),
        )
        return f"{column} {rng.choice(['', 'NOT '])}BETWEEN {lo} AND {hi}"
    if kind < 0.40 and column == "name":
        pattern = rng.choice(["a%", "%b", "%b%", "a_", "", "%", "a\\%b"])
        return f"name {rng.choice(['', 'NOT '])}{rng.choice(['LIKE', 'ILIKE'])} '{pattern}'"
    if kind < 0.50:
        cast = {
            "i": "CAST(i AS DOUBLE)", "x": "CAST(x AS DOUBLE)", "g": "CAST(g AS BIGINT)",
            "f": "CAST(f AS DOUBLE)", "d": "CAST(d AS FLOAT)", "rid": "CAST(rid AS INT)",
            "name": "CAST(name AS VARCHAR)", "dt": "CAST(dt AS DATE)", "b": "CAST(b AS BOOLEAN)",
            "p": "CAST(p AS DOUBLE)",
        }[column]
        op = rng.choice(["=", "<>", "<", "<=", ">", ">="])
        literal = _literal(rng, column)
        if column in ("i", "x", "d", "p"):
            literal = f"CAST({literal} AS DOUBLE)" if column != "d" else f"CAST({literal} AS FLOAT)"
        return f"{cast} {op} {literal}"
    if column == "b" and rng.random() < 0.5:
        return rng.choice(["b", "NOT b"])
    op = rng.choice(["=", "<>", "<", "<=", ">", ">="])
    literal = _literal(rng, column)
    if rng.random() < 0.2:
        flipped = {"<": ">", "<=": ">=", ">": "<", ">=": "<="}.get(op, op)
        return f"{literal} {flipped} {column}"
    return f"{column} {op} {literal}"


def _predicate(rng, depth=0):
    roll = rng.random()
    if depth >= 3 or roll < 0.4:
        return _atom(rng)
    if roll < 0.7:
        return f"({_predicate(rng, depth + 1)} AND {_predicate(rng, depth + 1)})"
    if roll < 0.9:
        return f"({_predicate(rng, depth + 1)} OR {_predicate(rng, depth + 1)})"
    return f"NOT ({_predicate(rng, depth + 1)})"


def _filtered(cur, table, predicates):
    """The rows each predicate selects as a filter (pushed down where Floe can)."""
    union = " UNION ALL ".join(
        f"SELECT {k} AS k, rid FROM {table} WHERE {p}" for k, p in enumerate(predicates)
    )
    got = {k: [] for k in range(len(predicates))}
    for row in query(cur, union).to_pylist():
        got[row["k"]].append(row["rid"])
    return [sorted(got[k]) for k in range(len(predicates))]


def _evaluated(cur, table, predicates):
    """The rows for which each predicate is TRUE, evaluated by DataFusion alone."""
    columns = ", ".join(f"({p}) AS c{k}" for k, p in enumerate(predicates))
    rows = query(cur, f"SELECT rid, {columns} FROM {table}").to_pylist()
    return [sorted(r["rid"] for r in rows if r[f"c{k}"] is True) for k in range(len(predicates))]


def _mismatches(cur, table, predicates, reference):
    """What each predicate, pushed down on `table`, selects other than `reference`."""
    pushed = []
    for start in range(0, len(predicates), PER_QUERY):
        pushed += _filtered(cur, table, predicates[start : start + PER_QUERY])
    mismatches = []
    for p, got, want in zip(predicates, pushed, reference):
        if got != want:
            missing = sorted(set(want) - set(got))[:10]
            extra = sorted(set(got) - set(want))[:10]
            mismatches.append(f"{table}: {p}: missing rids {missing}, extra rids {extra}")
    return mismatches


def test_pushed_filters_never_change_results(cur, catalog, schema):
    rng = random.Random(SEED)
    name = f"{schema}.evolved"
    _build(catalog, name, rng)
    # The reader filters rows itself whatever the filter's estimated selectivity.
    cur.execute(f"ALTER TABLE {name} SET TBLPROPERTIES ('read.parquet.row-filter' = 'always')")
    plan = "\n".join(r["plan"] for r in query(cur, f"EXPLAIN SELECT rid FROM {name} WHERE rid < 10").to_pylist())
    assert "predicate=rid < 10" in plan, plan
    assert query(cur, f"SELECT count(*) AS n FROM {name}").to_pylist()[0]["n"] == ROWS
    # The same rows as Floe writes them: files with page indexes, 8 rows to a page, so
    # the reader also skips pages by their bounds.
    paged = f"{schema}.paged"
    cur.execute(f"CREATE TABLE {paged} TBLPROPERTIES ('write.parquet.page-row-limit' = '8', "
                f"'read.parquet.row-filter' = 'always') AS SELECT * FROM {name}")

    predicates = [_predicate(rng) for _ in range(PREDICATES)]
    reference = _evaluated(cur, name, predicates)
    mismatches = _mismatches(cur, name, predicates, reference)
    mismatches += _mismatches(cur, paged, predicates, reference)
    assert not mismatches, f"{len(mismatches)} of {2 * len(predicates)} predicates differ:\n" + "\n".join(
        mismatches[:20]
    )
    # The predicates are selective enough to mean something.
    assert sum(bool(r) for r in reference) > PREDICATES // 4
    assert sum(0 < len(r) < ROWS for r in reference) > PREDICATES // 4
