"""Results stream while their job runs: the first rows arrive before the job ends, and a
client slower than the job gets every row (what it had no room for in memory was spilled
to the result file and read back from there)."""

import threading
import time

import pyarrow.compute as pc
import pyarrow.flight as flight

from floe_flight import _command


def _do_get(client, sql):
    descriptor = flight.FlightDescriptor.for_command(_command("CommandStatementQuery", sql))
    info = client.get_flight_info(descriptor)
    return client.do_get(info.endpoints[0].ticket)


def test_first_rows_arrive_while_the_job_runs_and_closing_the_stream_cancels_it(server):
    client = flight.FlightClient(server.uri)
    # One stage that would run for many minutes, producing rows from its first second.
    reader = _do_get(client, "SELECT value FROM range(0, 40000000000) WHERE value % 1000 = 0")
    first = {}

    def read_first():
        first["batch"] = reader.read_chunk().data

    thread = threading.Thread(target=read_first, daemon=True)
    thread.start()
    thread.join(timeout=60)
    assert "batch" in first, "no row arrived while the job ran"
    assert first["batch"].column(0)[:3].to_pylist() == [0, 1000, 2000]
    reader.cancel()
    deadline = time.time() + 20
    while "cancelled job" not in server.process.output() and time.time() < deadline:
        time.sleep(0.2)
    assert "cancelled job" in server.process.output()
    client.close()


def test_a_client_slower_than_the_job_gets_every_row(server):
    client = flight.FlightClient(server.uri)
    rows = 3_000_000  # about 370 batches: far more than wait in memory for the client
    reader = _do_get(client, f"SELECT value FROM range(0, {rows})")
    count, total = 0, 0
    for i, chunk in enumerate(reader):
        if i == 1:
            time.sleep(2)  # a stall: the job goes on, spilling what has no room in memory
        count += chunk.data.num_rows
        total += pc.sum(chunk.data.column(0)).as_py() or 0
    assert (count, total) == (rows, rows * (rows - 1) // 2)
    client.close()


def test_an_empty_result_has_its_columns(cur, schema):
    cur.execute(f"CREATE TABLE {schema}.few (id BIGINT, name STRING)")
    for i in range(3):
        cur.execute(f"INSERT INTO {schema}.few VALUES ({i}, 'n{i}')")
    cur.execute(f"SELECT id, name FROM {schema}.few WHERE id < 0")
    table = cur.fetch_arrow_table()
    assert table.num_rows == 0
    assert table.schema.names == ["id", "name"]
    assert [str(t) for t in table.schema.types] == ["int64", "string"]


def test_two_clients_streaming_at_once_each_get_their_own_rows(server):
    sizes = {"a": 2_000_000, "b": 1_500_000}
    got = {}

    def read(name, stall):
        client = flight.FlightClient(server.uri)
        count, total = 0, 0
        for i, chunk in enumerate(_do_get(client, f"SELECT value + 1 AS v FROM range(0, {sizes[name]})")):
            if stall and i == 1:
                time.sleep(1)
            count += chunk.data.num_rows
            total += pc.sum(chunk.data.column(0)).as_py() or 0
        got[name] = (count, total)
        client.close()

    threads = [threading.Thread(target=read, args=("a", True)), threading.Thread(target=read, args=("b", False))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert got == {name: (n, n * (n + 1) // 2) for name, n in sizes.items()}
