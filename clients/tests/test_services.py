"""The real services of services.py, checked with independent clients (pyiceberg, boto3, plain
HTTP, psql) before Floe is tested against them. No floe binary is needed."""

import json
import time
import urllib.error
import urllib.parse
import urllib.request

import pyarrow as pa
import pytest
from pyiceberg.exceptions import RESTError

from services import Postgres, SeaweedFS, TokenProxy

ROWS = pa.table({"id": pa.array([1, 2, 3], pa.int64()), "name": pa.array(["a", "b", "c"])})


@pytest.fixture(scope="module")
def seaweed(tmp_path_factory):
    with SeaweedFS(tmp_path_factory.mktemp("seaweed")) as sw:
        yield sw


def roundtrip(catalog, namespace: str, pause: float = 0.0) -> pa.Table:
    """Create a namespace and a table, append ROWS and read them back, pausing between steps."""
    catalog.create_namespace(namespace)
    time.sleep(pause)
    table = catalog.create_table((namespace, "t"), schema=ROWS.schema)
    time.sleep(pause)
    table.append(ROWS)
    time.sleep(pause)
    return catalog.load_table((namespace, "t")).scan().to_arrow().sort_by("id")


def http(url: str, token: str | None = None, form: dict | None = None) -> tuple[int, dict]:
    """GET (or POST a form) and return the status and the JSON body, errors included."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    data = urllib.parse.urlencode(form).encode() if form else None
    try:
        with urllib.request.urlopen(urllib.request.Request(url, data, headers), timeout=30) as resp:
            return resp.status, json.load(resp)
    except urllib.error.HTTPError as err:
        return err.code, json.load(err)


def get_token(proxy: TokenProxy, secret: str | None = None) -> tuple[int, dict]:
    return http(proxy.token_url, form={"grant_type": "client_credentials", "client_id": proxy.client_id,
                                       "client_secret": secret or proxy.client_secret})


def test_seaweed_rest_catalog_and_s3(seaweed):
    catalog = seaweed.pyiceberg_catalog()
    assert roundtrip(catalog, "direct").equals(ROWS)

    table = catalog.load_table(("direct", "t"))
    assert table.location() == "s3://warehouse/direct/t"
    keys = seaweed.list_objects("warehouse", "direct/t/")
    assert table.metadata_location.removeprefix("s3://warehouse/") in keys
    assert any(k.startswith("direct/t/data/") and k.endswith(".parquet") for k in keys), keys


@pytest.mark.parametrize("auth", ["credential", "oauth2"])
def test_pyiceberg_gets_new_tokens_through_proxy(seaweed, auth):
    """pyiceberg's `credential` flow ignores expires_in and fetches a new token after a 401
    (one retry); its `oauth2` auth manager renews ahead of expiry. Both survive 3 expiries."""
    with TokenProxy(seaweed.rest_uri, 2, seaweed.credential) as proxy:
        if auth == "credential":
            props = {"credential": proxy.credential}
        else:
            props = {"auth": {"type": "oauth2", "oauth2": {
                "client_id": proxy.client_id, "client_secret": proxy.client_secret,
                "token_url": proxy.token_url, "refresh_margin": 1}}}
        catalog = seaweed.pyiceberg_catalog(uri=proxy.rest_uri, **props)
        assert roundtrip(catalog, f"proxied_{auth}", pause=2.5).equals(ROWS)

    assert proxy.tokens_issued >= 4
    if auth == "credential":
        assert proxy.expired_rejections >= 3
    else:
        assert proxy.expired_rejections == 0
    assert proxy.requests_forwarded > 0


def test_proxy_rejects_expired_and_unknown_tokens(seaweed):
    with TokenProxy(seaweed.rest_uri, 1, seaweed.credential) as proxy:
        config_url = f"{proxy.rest_uri}/v1/config?warehouse={seaweed.warehouse}"
        status, answer = get_token(proxy)
        assert status == 200 and answer["token_type"] == "bearer" and answer["expires_in"] == 1
        token = answer["access_token"]
        assert http(config_url, token) == (200, http(f"{seaweed.rest_uri}/v1/config?warehouse=warehouse")[1])

        time.sleep(1.2)
        status, answer = http(config_url, token)
        assert status == 401
        assert answer["error"]["type"] == "NotAuthorizedException" and answer["error"]["code"] == 401
        assert proxy.expired_rejections == 1

        assert http(config_url, get_token(proxy)[1]["access_token"])[0] == 200
        assert http(config_url)[0] == 401
        assert http(config_url, "made-up")[0] == 401
        assert get_token(proxy, secret="wrong") == (401, {"error": "invalid_client"})


def test_proxy_revoke(seaweed):
    with TokenProxy(seaweed.rest_uri, 60, seaweed.credential) as proxy:
        catalog = seaweed.pyiceberg_catalog(uri=proxy.rest_uri, credential=proxy.credential)
        catalog.list_namespaces()
        token = get_token(proxy)[1]["access_token"]

        proxy.revoke()
        assert http(f"{proxy.rest_uri}/v1/config", token)[0] == 401
        assert get_token(proxy) == (401, {"error": "invalid_client"})
        with pytest.raises(RESTError):  # a 401, then the token renewal fails too
            catalog.list_namespaces()


def test_postgres(tmp_path):
    try:
        Postgres.install()
    except Exception as err:  # noqa: BLE001 - e.g. not root, or no package mirror
        pytest.skip(f"PostgreSQL is not installed and could not be: {err}")
    with Postgres(tmp_path) as pg:
        assert pg.uri == f"postgres://floe@127.0.0.1:{pg.port}/floe"
        assert pg.psql("select 1") == "1"
        pg.psql("create table t (id int); insert into t values (1), (2)")
        assert pg.psql("select sum(id) from t") == "3"
