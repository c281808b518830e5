"""Floe on an Iceberg REST catalog with S3 object storage: SeaweedFS (an independent
REST catalog and S3 store), reached through a token proxy whose OAuth2 tokens live 3 s,
with pyiceberg on the same catalog as the cross-check."""

import re
import time

import adbc_driver_manager
import pyarrow as pa
import pytest

from conftest import Server, query
from services import SeaweedFS, TokenProxy, loopback_certificate

TOKEN_TTL = 3
READ = re.compile(r"reading data file .*file=(\S+)")


@pytest.fixture(scope="module")
def lake(tmp_path_factory):
    """SeaweedFS, the token proxy, and a coordinator with two `floe executor`s on them.
    Secrets come from the environment, not the file."""
    root = tmp_path_factory.mktemp("lake")
    with SeaweedFS(root / "weed") as weed, \
            TokenProxy(weed.rest_uri, TOKEN_TTL, upstream_credential=weed.credential) as proxy:
        config = write_config(root / "floe.toml", weed, proxy)
        secrets = {
            "FLOE_CATALOG_PROPERTY_CREDENTIAL": proxy.credential,
            "FLOE_CATALOG_PROPERTY_S3__ACCESS_KEY_ID": weed.access_key,
            "FLOE_CATALOG_PROPERTY_S3__SECRET_ACCESS_KEY": weed.secret_key,
        }
        env = {"RUST_LOG": "debug", **secrets}
        server = Server(root / "data", ["--config", str(config), "--local-executors", "0", "--local-query-max-bytes", "0",
                                        "--target-partitions", "4"], env=env)
        executors = []
        try:
            for i in range(2):
                executors.append(server.start_executor(root / f"executor{i}.log", env={"RUST_LOG": "debug"}))
            yield {"server": server, "weed": weed, "proxy": proxy, "executors": executors,
                   "secrets": secrets, "pyiceberg": weed.pyiceberg_catalog()}
        finally:
            for executor in executors:
                executor.stop()
            server.stop()


def write_config(path, weed, proxy, extra_properties=""):
    """A config for Floe on the lake: REST through the proxy, S3 without keys (those come
    from the environment, or are vended)."""
    path.write_text(
        f"""
[catalog]
type = "rest"
name = "lake"
uri = "{proxy.rest_uri}"
warehouse = "{weed.warehouse}"
[catalog.properties]
"s3.endpoint" = "{weed.s3_endpoint}"
"s3.region" = "{weed.region}"
"s3.path-style-access" = "true"
{extra_properties}
"""
    )
    return path


def table_objects(weed, namespace, table, kind="data"):
    return sorted(weed.list_objects(weed.warehouse, f"{namespace}/{table}/{kind}/"))


def test_ddl_writes_and_reads_on_rest_and_s3(lake):
    weed, pyiceberg = lake["weed"], lake["pyiceberg"]
    with lake["server"].connect() as conn, conn.cursor() as cur:
        cur.execute("CREATE SCHEMA sales")
        cur.execute("CREATE TABLE sales.orders (id BIGINT NOT NULL, region STRING, amount DOUBLE) "
                    "PARTITIONED BY (region)")
        cur.execute("INSERT INTO sales.orders VALUES (1, 'eu', 1.5), (2, 'us', 2.5), (3, 'eu', 3.5)")
        got = query(cur, "SELECT region, count(*) AS n FROM sales.orders GROUP BY region ORDER BY region")
        assert got.to_pylist() == [{"region": "eu", "n": 2}, {"region": "us", "n": 1}]

        # The files are objects in the S3 store, and pyiceberg reads what Floe wrote.
        objects = table_objects(weed, "sales", "orders")
        assert any("region=eu" in key and key.endswith(".parquet") for key in objects), objects
        table = pyiceberg.load_table("sales.orders")
        assert table.location().startswith("s3://")
        assert sorted(table.scan().to_arrow()["id"].to_pylist()) == [1, 2, 3]

        # pyiceberg appends and changes the schema; Floe sees both at once.
        table.append(pa.table({"id": pa.array([4], pa.int64()), "region": ["asia"],
                               "amount": [4.5]}, schema=table.schema().as_arrow()))
        with table.update_schema() as update:
            update.add_column("note", pyiceberg_string())
        got = query(cur, "SELECT id, region, note FROM sales.orders ORDER BY id")
        assert got.column_names == ["id", "region", "note"]
        assert [row["id"] for row in got.to_pylist()] == [1, 2, 3, 4]


def pyiceberg_string():
    from pyiceberg.types import StringType

    return StringType()


def test_both_executors_read_and_write_objects(lake):
    with lake["server"].connect() as conn, conn.cursor() as cur:
        cur.execute("CREATE SCHEMA IF NOT EXISTS wide")
        cur.execute("CREATE TABLE wide.t (id BIGINT, part INT) PARTITIONED BY (part)")
        for batch in range(4):
            rows = ", ".join(f"({batch * 1000 + i}, {i % 8})" for i in range(1000))
            cur.execute(f"INSERT INTO wide.t VALUES {rows}")
        assert query(cur, "SELECT count(*) AS n FROM wide.t").to_pylist() == [{"n": 4000}]
        # 32 objects in 4 partitions: tasks on both executors read them (each once) and
        # write their own files.
        executors = lake["executors"]
        logged = [len(executor.output()) for executor in executors]
        cur.execute("CREATE TABLE wide.copy (id BIGINT, part INT)")
        cur.execute("INSERT INTO wide.copy SELECT id, part FROM wide.t")
        new_lines = [executor.output()[start:] for executor, start in zip(executors, logged)]
        assert query(cur, "SELECT count(*) AS n, sum(id) AS s FROM wide.copy").to_pylist() == [
            {"n": 4000, "s": sum(range(4000))}
        ]
    read = [READ.findall(lines) for lines in new_lines]
    objects = {f"s3://{lake['weed'].warehouse}/{key}" for key in table_objects(lake["weed"], "wide", "t")}
    assert all(read), read
    assert sorted(read[0] + read[1]) == sorted(objects)  # every object, each read once
    assert all("wrote data file" in lines for lines in new_lines)


def test_a_failed_insert_leaves_no_objects(lake):
    weed = lake["weed"]
    with lake["server"].connect() as conn, conn.cursor() as cur:
        cur.execute("CREATE SCHEMA IF NOT EXISTS strict")
        cur.execute("CREATE TABLE strict.t (id BIGINT NOT NULL)")
        cur.execute("INSERT INTO strict.t VALUES (1)")
        before = table_objects(weed, "strict", "t")
        with pytest.raises(adbc_driver_manager.Error, match="NOT NULL"):
            rows = ", ".join("(NULL)" if i == 5000 else f"({i})" for i in range(10000))
            cur.execute(f"INSERT INTO strict.t VALUES {rows}")
        deadline = time.time() + 20
        while table_objects(weed, "strict", "t") != before and time.time() < deadline:
            time.sleep(0.5)
        assert table_objects(weed, "strict", "t") == before
        assert query(cur, "SELECT count(*) AS n FROM strict.t").to_pylist() == [{"n": 1}]


def test_queries_keep_working_across_token_expiries(lake):
    proxy = lake["proxy"]
    issued = proxy.tokens_issued
    with lake["server"].connect() as conn, conn.cursor() as cur:
        cur.execute("CREATE SCHEMA IF NOT EXISTS ticking")
        cur.execute("CREATE TABLE IF NOT EXISTS ticking.t (id BIGINT)")
        for i in range(3):
            time.sleep(TOKEN_TTL + 0.5)
            cur.execute(f"INSERT INTO ticking.t VALUES ({i})")
            assert query(cur, "SELECT count(*) AS n FROM ticking.t").to_pylist() == [{"n": i + 1}]
    # Renewed before each expiry (none of Floe's requests was refused for an old token).
    assert proxy.tokens_issued >= issued + 3
    assert proxy.expired_rejections == 0


def test_no_secret_reaches_logs_or_errors(lake):
    with lake["server"].connect() as conn, conn.cursor() as cur:
        cur.execute("EXPLAIN SELECT * FROM sales.orders WHERE id > 1")
        plan = str(cur.fetch_arrow_table().to_pylist())
        with pytest.raises(adbc_driver_manager.Error) as err:
            cur.execute("SELECT * FROM sales.missing")
    logs = [lake["server"].process.output(), plan, str(err.value)]
    logs += [executor.output() for executor in lake["executors"]]
    secrets = [lake["weed"].secret_key, lake["proxy"].client_secret]
    for text in logs:
        for secret in secrets:
            assert secret not in text


def test_concurrent_commits_from_floe_and_pyiceberg_all_land(lake):
    """The REST catalog answers 409 to a commit on stale metadata; Floe retries on fresh
    metadata (appends commute), as pyiceberg does."""
    import threading

    with lake["server"].connect() as conn, conn.cursor() as cur:
        cur.execute("CREATE SCHEMA IF NOT EXISTS racing")
        cur.execute("CREATE TABLE racing.t (id BIGINT, who STRING)")
    table = lake["pyiceberg"].load_table("racing.t")
    errors = []

    def floe_inserts():
        with lake["server"].connect() as conn, conn.cursor() as cur:
            for i in range(8):
                try:
                    cur.execute(f"INSERT INTO racing.t VALUES ({i}, 'floe')")
                except adbc_driver_manager.Error as e:
                    errors.append(str(e))

    def pyiceberg_appends():
        from pyiceberg.exceptions import CommitFailedException

        for i in range(8):
            rows = pa.table({"id": pa.array([100 + i], pa.int64()), "who": ["pyiceberg"]})
            for _ in range(20):  # pyiceberg does not retry a 409 itself
                try:
                    table.refresh().append(rows)
                    break
                except CommitFailedException:
                    continue

    threads = [threading.Thread(target=floe_inserts), threading.Thread(target=pyiceberg_appends)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    with lake["server"].connect() as conn, conn.cursor() as cur:
        got = query(cur, "SELECT who, count(*) AS n FROM racing.t GROUP BY who ORDER BY who")
    assert got.to_pylist() == [{"who": "floe", "n": 8}, {"who": "pyiceberg", "n": 8}]
    assert table.refresh().scan().to_arrow().num_rows == 16


VENDING = '"header.X-Iceberg-Access-Delegation" = "vended-credentials"'


def insert_one_row_through(tmp_path, weed, proxy, row_id, extra_properties="", env=None):
    """A one-off coordinator on `proxy` inserts row `row_id` into sales.orders; returns how
    many rows then have that id, and the coordinator's log."""
    config = write_config(tmp_path / "floe.toml", weed, proxy, extra_properties)
    env = {**(env or {}), "FLOE_CATALOG_PROPERTY_CREDENTIAL": proxy.credential}
    server = Server(tmp_path / "data", ["--config", str(config)], env=env)
    try:
        with server.connect() as conn, conn.cursor() as cur:
            cur.execute(f"INSERT INTO sales.orders (id, region, amount) VALUES ({row_id}, 'eu', 1.0)")
            got = query(cur, f"SELECT count(*) AS n FROM sales.orders WHERE id = {row_id}")
        return got.to_pylist()[0]["n"], server.process.output()
    finally:
        server.stop()


def test_vended_credentials_are_used_for_reads_and_writes(lake, tmp_path):
    """A coordinator with no S3 keys of its own asks for vended credentials; the catalog
    (the proxy) hands them out with each table it loads."""
    weed, proxy = lake["weed"], lake["proxy"]
    proxy.vended = {"s3.access-key-id": weed.access_key, "s3.secret-access-key": weed.secret_key}
    try:
        loads = proxy.vended_loads
        count, log = insert_one_row_through(tmp_path, weed, proxy, 50, VENDING)
        assert count == 1
        assert proxy.vended_loads > loads
        assert weed.secret_key not in log
    finally:
        proxy.vended = None


def test_the_most_specific_storage_credential_wins(lake, tmp_path):
    """The catalog's `config` and a bucket-wide credential hold a wrong key; the credential
    for the table's own location holds the right one, and is the one used."""
    weed, proxy = lake["weed"], lake["proxy"]
    location = lake["pyiceberg"].load_table("sales.orders").location()
    wrong = {"s3.access-key-id": "not-a-key", "s3.secret-access-key": "not-a-secret"}
    right = {"s3.access-key-id": weed.access_key, "s3.secret-access-key": weed.secret_key}
    proxy.vended = wrong
    proxy.vended_storage_credentials = [{"prefix": "s3://", "config": wrong},
                                        {"prefix": location, "config": right}]
    try:
        assert insert_one_row_through(tmp_path, weed, proxy, 51, VENDING)[0] == 1
    finally:
        proxy.vended = proxy.vended_storage_credentials = None


def test_replace_commits_through_the_rest_catalog(lake):
    """A bulk ingest in mode `replace` is Floe's own commit (an `overwrite` snapshot),
    sent to the REST catalog as a CommitTableRequest."""
    pyiceberg = lake["pyiceberg"]
    with lake["server"].connect() as conn, conn.cursor() as cur:
        cur.execute("CREATE TABLE sales.snap (id BIGINT, v STRING)")
        cur.execute("INSERT INTO sales.snap VALUES (1, 'x'), (2, 'y'), (3, 'z')")
        before = pyiceberg.load_table("sales.snap")
        rows = pa.table({"id": pa.array([10, 11], pa.int64()), "v": ["a", "b"]})
        assert cur.adbc_ingest("snap", rows, mode="replace", db_schema_name="sales") == 2
        got = query(cur, "SELECT id FROM sales.snap ORDER BY id")
    assert got["id"].to_pylist() == [10, 11]
    after = pyiceberg.load_table("sales.snap")
    assert after.metadata.table_uuid == before.metadata.table_uuid
    assert sorted(after.scan().to_arrow()["id"].to_pylist()) == [10, 11]
    assert after.current_snapshot().summary.operation.value == "overwrite"
    assert len(after.snapshots()) == len(before.snapshots()) + 1


def test_remove_orphan_files_lists_the_bucket(lake):
    """Orphans on object storage: objects under the table's location that nothing
    references are found by listing the bucket; the table's own objects stay."""
    weed, pyiceberg = lake["weed"], lake["pyiceberg"]
    with lake["server"].connect() as conn, conn.cursor() as cur:
        cur.execute("CREATE TABLE sales.tidy (id BIGINT, v STRING)")
        cur.execute("INSERT INTO sales.tidy VALUES (1, 'x'), (2, 'y')")
        cur.execute("INSERT INTO sales.tidy VALUES (3, 'z')")
        location = pyiceberg.load_table("sales.tidy").location().rstrip("/")
        bucket, prefix = location.removeprefix("s3://").split("/", 1)
        own = weed.list_objects(bucket, prefix + "/")
        planted = [f"{prefix}/data/0190-dead-write/left.parquet", f"{prefix}/metadata/left-m0.avro"]
        kept = f"{prefix}/metadata/version-hint.text"
        s3 = weed.s3_client()
        for key in planted + [kept]:
            s3.put_object(Bucket=bucket, Key=key, Body=b"not referenced")

        def orphans(extra=""):
            cur.execute(f"CALL lake.system.remove_orphan_files(table => 'sales.tidy'{extra})")
            return sorted(r["orphan_file_location"] for r in cur.fetch_arrow_table().to_pylist())

        assert orphans() == [], "the planted objects are younger than the default 3 days"
        future = ", older_than => TIMESTAMP '2200-01-01 00:00:00'"
        expected = sorted(f"s3://{bucket}/{key}" for key in planted)
        assert orphans(future + ", dry_run => true") == expected
        assert set(planted) <= set(weed.list_objects(bucket, prefix + "/")), "a dry run deletes nothing"
        assert orphans(future) == expected
        left = weed.list_objects(bucket, prefix + "/")
        assert sorted(left) == sorted(own + [kept])
        assert query(cur, "SELECT count(*) AS n FROM sales.tidy")["n"].to_pylist() == [3]
    assert len(pyiceberg.load_table("sales.tidy").scan().to_arrow()) == 3


def test_a_catalog_served_over_https(lake, tmp_path):
    """The REST catalog behind TLS, its CA trusted through SSL_CERT_FILE (the system's
    roots otherwise)."""
    weed = lake["weed"]
    ca, cert, key = loopback_certificate(tmp_path)
    with TokenProxy(weed.rest_uri, 60, upstream_credential=weed.credential, tls=(cert, key)) as proxy:
        assert proxy.rest_uri.startswith("https://")
        env = {**lake["secrets"], "SSL_CERT_FILE": str(ca)}
        assert insert_one_row_through(tmp_path, weed, proxy, 52, env=env)[0] == 1
        assert proxy.requests_forwarded > 0


def test_a_revoked_credential_is_a_clear_error(lake):
    """Last in this module: the proxy stays revoked."""
    lake["proxy"].revoke()
    with lake["server"].connect() as conn, conn.cursor() as cur:
        started = time.time()
        with pytest.raises(adbc_driver_manager.Error) as err:
            cur.execute("SELECT count(*) FROM sales.orders")
    assert "(Unauthenticated;" in str(err.value), str(err.value)
    assert "REST catalog 'lake' refused" in str(err.value)
    assert time.time() - started < 30
