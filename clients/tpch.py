"""TPC-H for Floe's tests and benchmark: data from `tpchgen-cli`, loaded as Iceberg tables by
pyiceberg; the 22 queries and the reference answers from DuckDB (its `tpch` extension, on
the same Parquet data files the Iceberg tables hold)."""

import decimal
import math
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

TABLES = ["region", "nation", "supplier", "customer", "part", "partsupp", "orders", "lineitem"]


def generate(scale: float, out_dir: Path, parts: int = 8) -> Path:
    """TPC-H at `scale` as Parquet, `parts` files per table (the small tables get one)."""
    if not (out_dir / "lineitem").exists():
        tpchgen = Path(sys.executable).parent / "tpchgen-cli"
        subprocess.run([str(tpchgen), "parquet", "-s", str(scale), "--parts", str(parts),
                        "--output-dir", str(out_dir)], check=True, capture_output=True)
    return out_dir


def _plain_strings(table: pa.Table) -> pa.Table:
    """tpchgen writes string_view; Iceberg's string is Arrow's string."""
    return table.cast(pa.schema([
        pa.field(f.name, pa.string() if f.type == pa.string_view() else f.type, f.nullable)
        for f in table.schema
    ]))


def load(catalog, data_dir: Path, namespace: str = "default") -> dict[str, list[str]]:
    """Creates the eight tables in `catalog` (a pyiceberg catalog), one append per generated
    file, so each table has as many data files; returns each table's data file paths."""
    from pyiceberg.exceptions import NamespaceAlreadyExistsError

    try:
        catalog.create_namespace(namespace)
    except NamespaceAlreadyExistsError:  # Floe creates `default`
        pass
    files = {}
    for name in TABLES:
        parts = sorted((data_dir / name).glob("*.parquet"))
        first = _plain_strings(pq.read_table(parts[0]))
        table = catalog.create_table(f"{namespace}.{name}", schema=first.schema)
        for part in parts:
            table.append(_plain_strings(pq.read_table(part)))
        files[name] = [task.file.file_path for task in table.scan().plan_files()]
    return files


def load_once(catalog, data_dir: Path) -> dict[str, list[str]]:
    """`load`, unless the tables exist already (a benchmark's data kept between runs);
    returns each table's data file paths."""
    from pyiceberg.exceptions import NoSuchTableError

    try:
        return {name: [t.file.file_path for t in catalog.load_table(f"default.{name}").scan().plan_files()]
                for name in TABLES}
    except NoSuchTableError:
        return load(catalog, data_dir)


def duckdb_connection(extension_dir: Path):
    """DuckDB with its `tpch` extension, loaded from the PyPI package (offline)."""
    import duckdb
    from duckdb_extensions import import_extension

    con = duckdb.connect(config={"autoinstall_known_extensions": False,
                                 "autoload_known_extensions": False,
                                 "extension_directory": str(extension_dir)})
    import_extension("tpch", con=con)
    con.sql("LOAD tpch")
    return con


def queries(con) -> dict[int, str]:
    """The 22 queries, as DuckDB's `tpch` extension spells them."""
    return {n: q.strip().rstrip(";") for n, q in con.sql("SELECT query_nr, query FROM tpch_queries()").fetchall()}


def attach_files(con, files: dict[str, list[str]]):
    """Each table as a DuckDB view over its Parquet data files."""
    for name, paths in files.items():
        listed = ", ".join(f"'{p.removeprefix('file://')}'" for p in paths)
        con.sql(f"CREATE OR REPLACE VIEW {name} AS SELECT * FROM read_parquet([{listed}])")


def rows(table: pa.Table) -> list[tuple]:
    """Rows for comparison: numbers as floats, everything else as text."""
    def value(v):
        if isinstance(v, (decimal.Decimal, int, float)) and not isinstance(v, bool):
            return float(v)
        return None if v is None else str(v)

    return [tuple(value(v) for v in row.values()) for row in table.to_pylist()]


def same_rows(got: list[tuple], expected: list[tuple], ordered: bool) -> bool:
    """Equal row for row (sorted first unless `ordered`), numbers to 1e-6 relative."""
    if len(got) != len(expected):
        return False
    if not ordered:
        got, expected = sorted(got, key=repr), sorted(expected, key=repr)
    for a, b in zip(got, expected):
        if len(a) != len(b):
            return False
        for x, y in zip(a, b):
            if isinstance(x, float) and isinstance(y, float):
                if not math.isclose(x, y, rel_tol=1e-6, abs_tol=1e-6):
                    return False
            elif x != y:
                return False
    return True
