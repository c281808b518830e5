"""Vended credentials that expire during a job: SeaweedFS's REST catalog vends table-scoped
STS credentials that live 20 s (the store refuses them afterwards; the S3 signer refuses
them 10 s before), and Floe, holding no S3 keys of its own, runs statements that outlast
them on a coordinator and two `floe executor` processes."""

import re
import time

import pyarrow as pa
import pytest

from conftest import Server, query
from services import SeaweedFS

TTL = 20


@pytest.fixture(scope="module")
def vending_lake(tmp_path_factory):
    root = tmp_path_factory.mktemp("vending")
    with SeaweedFS(root / "weed", vended_credentials_ttl=TTL) as weed:
        config = root / "floe.toml"
        config.write_text(f"""
[catalog]
type = "rest"
name = "lake"
uri = "{weed.rest_uri}"
warehouse = "{weed.warehouse}"
[catalog.properties]
"header.X-Iceberg-Access-Delegation" = "vended-credentials"
"s3.endpoint" = "{weed.s3_endpoint}"
"s3.region" = "{weed.region}"
"s3.path-style-access" = "true"
""")
        env = {"FLOE_CATALOG_PROPERTY_CREDENTIAL": weed.credential, "RUST_LOG": "debug"}
        server = Server(root / "data", ["--config", str(config), "--local-executors", "0", "--local-query-max-bytes", "0",
                                        "--target-partitions", "4"], env=env)
        executors = []
        try:
            for i in range(2):
                executors.append(server.start_executor(root / f"executor{i}.log", slots=1,
                                                       env={"RUST_LOG": "debug"}))
            # pyiceberg with the store's own key: no vended credentials for the cross-check.
            pyiceberg = weed.pyiceberg_catalog(**{"header.X-Iceberg-Access-Delegation": ""})
            yield {"server": server, "weed": weed, "executors": executors, "pyiceberg": pyiceberg}
        finally:
            for executor in executors:
                executor.stop()
            server.stop()


def slow_batches(batches: int, rows: int, pause: float):
    """An upload that takes `batches * pause` seconds."""
    schema = pa.schema([("id", pa.int64()), ("part", pa.int32())])

    def generate():
        for b in range(batches):
            ids = pa.array(range(b * rows, (b + 1) * rows), pa.int64())
            yield pa.record_batch([ids, pa.array([i % 4 for i in range(rows)], pa.int32())], schema=schema)
            time.sleep(pause)

    return pa.RecordBatchReader.from_batches(schema, generate())


def test_vended_credentials_are_renewed_during_a_long_write(vending_lake):
    server, executors = vending_lake["server"], vending_lake["executors"]
    with server.connect() as conn, conn.cursor() as cur:
        cur.execute("CREATE SCHEMA vend")
        cur.execute("CREATE TABLE vend.t (id BIGINT, part INT) PARTITIONED BY (part)")
        cur.execute("INSERT INTO vend.t VALUES (-1, 0)")
        logged = [len(e.output()) for e in executors]
        # The coordinator stages the upload for longer than the credentials live; the
        # executors then write the data with the credentials the plan carried, expired
        # by then.
        started = time.monotonic()
        cur.adbc_ingest("t", slow_batches(12, 1000, TTL / 10), mode="append", db_schema_name="vend")
        assert time.monotonic() - started > TTL
        got = query(cur, "SELECT count(*) AS n, sum(id) AS s FROM vend.t")
        assert got.to_pylist() == [{"n": 12001, "s": sum(range(12000)) - 1}]
    table = vending_lake["pyiceberg"].load_table("vend.t")
    assert table.scan().to_arrow().num_rows == 12001
    # Executors renewed their expired credentials at the coordinator, and got storage
    # properties only: never the catalog's credential, token or address.
    renewals = [line for e, start in zip(executors, logged) for line in e.output()[start:].splitlines()
                if "renewed vended storage credentials" in line]
    assert renewals
    for line in renewals:
        names = re.findall(r'"([^"]+)"', line.split("names=", 1)[1])
        assert names and all(n.startswith(("s3.", "floe.")) for n in names), line


def test_each_table_is_read_with_its_own_credentials(vending_lake):
    """Vended credentials reach only their table's objects: a join of two tables works
    only if each scan signs with its own table's credentials."""
    with vending_lake["server"].connect() as conn, conn.cursor() as cur:
        cur.execute("CREATE SCHEMA IF NOT EXISTS vend")
        cur.execute("CREATE TABLE vend.names (part INT, name STRING)")
        cur.execute("INSERT INTO vend.names VALUES (0, 'zero'), (1, 'one'), (2, 'two'), (3, 'three')")
        got = query(cur, "SELECT n.name, count(*) AS c FROM vend.t JOIN vend.names n ON t.part = n.part "
                         "GROUP BY n.name ORDER BY n.name")
    assert [row["name"] for row in got.to_pylist()] == ["one", "three", "two", "zero"]
    assert sum(row["c"] for row in got.to_pylist()) == 12001


def test_vended_secrets_never_reach_a_log(vending_lake):
    """The vended session tokens are JWTs (`eyJ…`), the catalog's secret is the store's
    key: neither is in any line the coordinator or the executors logged at debug."""
    weed = vending_lake["weed"]
    processes = [vending_lake["server"].process, *vending_lake["executors"]]
    for process in processes:
        output = process.output()
        assert "eyJ" not in output
        assert weed.secret_key not in output
