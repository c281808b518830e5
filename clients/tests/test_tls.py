"""TLS and mutual TLS on the Flight SQL listener, with certificates made here."""

import datetime
import ipaddress
import time

import adbc_driver_flightsql
import adbc_driver_flightsql.dbapi as flight_sql
import adbc_driver_manager
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from conftest import Server

Options = adbc_driver_flightsql.DatabaseOptions


def make_cert(name, issuer=None, ca=False, server=False):
    """A key and certificate for `name`, signed by `issuer` (key, cert) or self-signed."""
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.datetime.now(datetime.timezone.utc)
    signing_key, issuer_name = (issuer[0], issuer[1].subject) if issuer else (key, subject)
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    if server:
        builder = builder.add_extension(
            x509.SubjectAlternativeName([x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
    return key, builder.sign(signing_key, hashes.SHA256())


def pem(key=None, cert=None):
    if cert is not None:
        return cert.public_bytes(serialization.Encoding.PEM).decode()
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    root = tmp_path_factory.mktemp("tls")
    ca = make_cert("Floe test CA", ca=True)
    server_key, server_cert = make_cert("localhost", issuer=ca, server=True)
    client = make_cert("alice", issuer=ca)
    other_ca = make_cert("Someone else's CA", ca=True)
    stranger = make_cert("mallory", issuer=other_ca)
    files = {
        "ca": pem(cert=ca[1]),
        "server.crt": pem(cert=server_cert),
        "server.key": pem(key=server_key),
    }
    for name, text in files.items():
        (root / name).write_text(text)
    return {
        "dir": root,
        "ca": files["ca"],
        "client": (pem(cert=client[1]), pem(key=client[0])),
        "stranger": (pem(cert=stranger[1]), pem(key=stranger[0])),
    }


def tls_server(root, certs, *extra):
    d = certs["dir"]
    srv = Server(root, ["--tls-cert", str(d / "server.crt"), "--tls-key", str(d / "server.key"), *extra])
    srv.uri = f"grpc+tls://127.0.0.1:{srv.flight_port}"
    return srv


def select_one(uri, **options):
    with flight_sql.connect(uri, db_kwargs=options) as conn, conn.cursor() as cur:
        cur.execute("SELECT 1 AS one")
        return cur.fetch_arrow_table().to_pylist()


def test_tls(tmp_path, certs):
    srv = tls_server(tmp_path / "data", certs)
    try:
        # The listening line may follow the open port by a moment.
        deadline = time.monotonic() + 10
        while "grpc+tls://" not in srv.process.output() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert "grpc+tls://" in srv.process.output()
        assert select_one(srv.uri, **{Options.TLS_ROOT_CERTS.value: certs["ca"]}) == [{"one": 1}]
        # A client that does not trust the certificate, and one that does not speak TLS.
        with pytest.raises(adbc_driver_manager.Error):
            select_one(srv.uri)
        with pytest.raises(adbc_driver_manager.Error):
            select_one(f"grpc://127.0.0.1:{srv.flight_port}")
    finally:
        srv.stop()


def test_mutual_tls(tmp_path, certs):
    srv = tls_server(tmp_path / "data", certs, "--tls-client-ca", str(certs["dir"] / "ca"))
    trust = {Options.TLS_ROOT_CERTS.value: certs["ca"]}
    try:
        cert, key = certs["client"]
        options = {**trust, Options.MTLS_CERT_CHAIN.value: cert, Options.MTLS_PRIVATE_KEY.value: key}
        assert select_one(srv.uri, **options) == [{"one": 1}]
        with pytest.raises(adbc_driver_manager.Error):
            select_one(srv.uri, **trust)  # no client certificate
        cert, key = certs["stranger"]
        with pytest.raises(adbc_driver_manager.Error):
            select_one(srv.uri, **trust, **{Options.MTLS_CERT_CHAIN.value: cert, Options.MTLS_PRIVATE_KEY.value: key})
    finally:
        srv.stop()
