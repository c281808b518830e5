"""CancelFlightInfo: a result waiting for its DoGet is dropped, and one being computed
stops (its Ballista job is cancelled); both DoGets answer CANCELLED."""

import threading
import time

import pyarrow.flight as flight
import pytest

from floe_flight import _command, _length_delimited


def _info(client, sql):
    return client.get_flight_info(flight.FlightDescriptor.for_command(_command("CommandStatementQuery", sql)))


def _cancel(client, info):
    body = _length_delimited(1, info.serialize())
    [result] = list(client.do_action(flight.Action("CancelFlightInfo", body)))
    return result.body.to_pybytes()


CANCELLED, NOT_CANCELLABLE = b"\x08\x01", b"\x08\x03"


def test_cancel_a_waiting_result(server):
    client = flight.FlightClient(server.uri)
    info = _info(client, "SELECT 1 AS one")
    assert _cancel(client, info) == CANCELLED
    with pytest.raises(flight.FlightCancelledError):
        client.do_get(info.endpoints[0].ticket).read_all()
    assert _cancel(client, info) == NOT_CANCELLABLE
    client.close()


def test_cancel_a_running_query_stops_its_job(server):
    client = flight.FlightClient(server.uri)
    info = _info(client, "SELECT sum(value) AS s FROM range(100000000000)")
    outcome = {}

    def fetch():
        try:
            outcome["rows"] = client.do_get(info.endpoints[0].ticket).read_all()
        except flight.FlightError as e:
            outcome["error"] = e

    reader = threading.Thread(target=fetch)
    started = time.time()
    reader.start()
    time.sleep(1.5)
    assert _cancel(client, info) == CANCELLED
    reader.join(timeout=30)
    assert not reader.is_alive()
    assert isinstance(outcome.get("error"), flight.FlightCancelledError), outcome
    assert time.time() - started < 20
    deadline = time.time() + 10
    while "cancelled job" not in server.process.output() and time.time() < deadline:
        time.sleep(0.2)
    assert "cancelled job" in server.process.output()
    # The server goes on serving.
    assert client.do_get(_info(client, "SELECT 2 AS two").endpoints[0].ticket).read_all().num_rows == 1
    client.close()


def test_statement_timeout_cancels_the_job(tmp_path):
    from conftest import Server

    server = Server(tmp_path / "data", ["--statement-timeout-secs", "1"])
    try:
        client = flight.FlightClient(server.uri)
        started = time.time()
        info = _info(client, "SELECT sum(value) AS s FROM range(100000000000)")
        with pytest.raises(flight.FlightTimedOutError, match="statement_timeout_secs = 1"):
            client.do_get(info.endpoints[0].ticket).read_all()
        assert time.time() - started < 20
        deadline = time.time() + 10
        while "cancelled job" not in server.process.output() and time.time() < deadline:
            time.sleep(0.2)
        assert "cancelled job" in server.process.output()
        # A recursive query runs on the coordinator (src/sql/recursive.rs), under the same limit.
        started = time.time()
        info = _info(client, "WITH RECURSIVE r AS (SELECT 1 AS n UNION ALL SELECT n + 1 FROM r) "
                             "SELECT count(*) AS c FROM r")
        with pytest.raises(flight.FlightTimedOutError, match="statement_timeout_secs = 1"):
            client.do_get(info.endpoints[0].ticket).read_all()
        assert time.time() - started < 20
        # Quick statements are unaffected.
        assert client.do_get(_info(client, "SELECT 1 AS one").endpoints[0].ticket).read_all().num_rows == 1
        client.close()
    finally:
        server.stop()


def _kill_a_client_mid_query(server, sql):
    """Starts a client process running `sql`, kills it 2 s later, and waits (15 s at
    most) for the server to cancel a job; returns whether it did."""
    import subprocess
    import sys
    from pathlib import Path

    reader = (
        "import sys; sys.path.insert(0, sys.argv[2]); from floe_flight import FloeFlightClient; "
        f"FloeFlightClient(sys.argv[1]).query({sql!r})"
    )
    clients_dir = str(Path(__file__).resolve().parent.parent)
    before = server.process.output().count("cancelled job")
    proc = subprocess.Popen([sys.executable, "-c", reader, server.uri, clients_dir])
    time.sleep(2)
    proc.kill()
    proc.wait()
    deadline = time.time() + 15
    while server.process.output().count("cancelled job") == before and time.time() < deadline:
        time.sleep(0.2)
    return server.process.output().count("cancelled job") > before


def test_a_client_killed_mid_query_cancels_its_job(server):
    assert _kill_a_client_mid_query(server, "SELECT sum(value) AS s FROM range(100000000000)")
    client = flight.FlightClient(server.uri)
    assert client.do_get(_info(client, "SELECT 3 AS three").endpoints[0].ticket).read_all().num_rows == 1
    client.close()


def test_a_client_killed_while_a_having_subquery_runs_first_cancels_its_job(server):
    # A HAVING subquery joined to a large side runs first, as a job of its own
    # (src/sql/having_joins.rs): a client that goes away meanwhile cancels that job.
    shape = ("SELECT count(*) AS n FROM range({outer}) r WHERE r.value IN "
             "(SELECT value % 7 FROM range({inner}) GROUP BY value % 7 HAVING count(*) > 1)")
    # The shape is one Floe computes in two steps: on small ranges the semi join is gone.
    client = flight.FlightClient(server.uri)
    small = _info(client, "EXPLAIN ANALYZE " + shape.format(outer=1_000_000, inner=1000))
    plan = "\n".join(client.do_get(small.endpoints[0].ticket).read_all()["plan"].to_pylist())
    assert "Semi" not in plan, plan
    assert _kill_a_client_mid_query(server, shape.format(outer=100_000_000_000, inner=100_000_000_000))
    assert client.do_get(_info(client, "SELECT 4 AS four").endpoints[0].ticket).read_all().num_rows == 1
    client.close()
