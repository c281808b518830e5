"""Fixtures: real `floe serve` / `floe executor` processes on loopback, real clients.

FLOE_BIN names the floe binary (tests/run.sh builds it and sets it).
"""

import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import adbc_driver_flightsql.dbapi as flight_sql
import pytest
from pyiceberg.catalog.sql import SqlCatalog

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from floe_flight import FloeFlightClient  # noqa: E402
from services import random_listen_port  # noqa: E402

FLOE_BIN = os.environ.get("FLOE_BIN", "floe")


def _port_free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False


_GIVEN_PORTS: set[int] = set()


def free_port(pair: bool = False) -> int:
    """A free loopback port (and the next one too, if `pair`), never one given before: a
    port is only taken when its process starts, so two picks could return the same one."""
    for _ in range(200):
        port = random_listen_port(also_plus=1)
        ports = {port, port + 1} if pair else {port}
        if not ports & _GIVEN_PORTS and all(_port_free(p) for p in ports):
            _GIVEN_PORTS.update(ports)
            return port
    raise RuntimeError("no free port")


def _wait_for_port(port: int, proc: subprocess.Popen, log: Path, timeout: float = 120):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"process exited with {proc.returncode}:\n{log.read_text()}")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise RuntimeError(f"port {port} not open after {timeout}s:\n{log.read_text()}")


class Process:
    """A floe process with its stderr captured to a file."""

    def __init__(self, args, log: Path, wait_port: int | None = None, env=None):
        self.log = log
        self._log_file = open(log, "wb")
        self.proc = subprocess.Popen(
            [FLOE_BIN, *args],
            stdout=self._log_file,
            stderr=subprocess.STDOUT,
            env={**os.environ, **(env or {})},
        )
        if wait_port is not None:
            _wait_for_port(wait_port, self.proc, log)

    def output(self) -> str:
        if not self._log_file.closed:
            self._log_file.flush()
        return self.log.read_text()

    def stop(self, timeout: float = 30) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log_file.close()
        return self.proc.returncode


class Server:
    """`floe serve` on free loopback ports with its own data directory."""

    def __init__(self, data_dir: Path, extra_args=(), env=None, scheduler_port: int | None = None):
        self.data_dir = data_dir
        self.flight_port = free_port()
        self.scheduler_port = scheduler_port or free_port()
        self.uri = f"grpc://127.0.0.1:{self.flight_port}"
        if "--metrics-addr" not in extra_args:
            # Servers of one test run must not all want the default metrics port.
            extra_args = [*extra_args, "--metrics-addr", "off"]
        args = [
            "serve",
            "--data-dir", str(data_dir),
            "--flight-addr", f"127.0.0.1:{self.flight_port}",
            "--scheduler-addr", f"127.0.0.1:{self.scheduler_port}",
            *extra_args,
        ]
        data_dir.mkdir(parents=True, exist_ok=True)
        self.process = Process(args, data_dir / "serve.log", wait_port=self.flight_port, env=env)

    def connect(self):
        return flight_sql.connect(self.uri)

    def flight_client(self) -> FloeFlightClient:
        return FloeFlightClient(self.uri)

    def pyiceberg(self) -> SqlCatalog:
        return SqlCatalog(
            "floe",
            uri=f"sqlite:///{self.data_dir / 'catalog.db'}",
            warehouse=f"file://{self.data_dir / 'warehouse'}",
        )

    def stop(self) -> int:
        return self.process.stop()

    def start_executor(self, log: Path, env=None, slots: int = 2, work_dir: Path | None = None) -> Process:
        """A `floe executor` process registered with this server's scheduler. Its work
        directory is beside its log unless given, so one killed in a test leaves nothing
        in the system's temporary directory."""
        port = free_port(pair=True)
        work_dir = work_dir or log.with_name(f"{log.stem}-work-{port}")
        args = ["executor", "--scheduler", f"127.0.0.1:{self.scheduler_port}",
                "--bind", f"127.0.0.1:{port}", "--slots", str(slots),
                "--work-dir", str(work_dir)]
        return Process(args, log, wait_port=port, env=env)


@pytest.fixture(scope="session")
def server(tmp_path_factory):
    srv = Server(tmp_path_factory.mktemp("floe") / "data", ["--target-partitions", "4"])
    yield srv
    srv.stop()


@pytest.fixture()
def conn(server):
    with server.connect() as connection:
        yield connection


@pytest.fixture()
def cur(conn):
    with conn.cursor() as cursor:
        yield cursor


@pytest.fixture()
def catalog(server):
    return server.pyiceberg()


_counter = 0


@pytest.fixture()
def schema(cur):
    """A fresh SQL schema (Iceberg namespace) per test."""
    global _counter
    _counter += 1
    name = f"t{os.getpid()}_{_counter}"
    cur.execute(f"CREATE SCHEMA {name}")
    return name


def query(cur, sql):
    cur.execute(sql)
    return cur.fetch_arrow_table()


def metric(line, name):
    """A count EXPLAIN ANALYZE shows on a plan line as `name=1.23 K` (or a plain number)."""
    value, unit = re.search(rf"\b{name}=([\d.]+)\s?([KMGT]?)\b", line).groups()
    return float(value) * 1000 ** " KMGT".index(unit or " ")
