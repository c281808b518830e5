"""Querying Floe with nothing but ``pyarrow.flight``.

Flight SQL commands are small protobuf messages packed in ``google.protobuf.Any``;
this module encodes the two it needs by hand, so no protobuf package is required::

    from floe_flight import FloeFlightClient
    client = FloeFlightClient("grpc://127.0.0.1:32010")
    table = client.query("SELECT 1 AS one")
    client.update("CREATE SCHEMA IF NOT EXISTS demo")
"""

import pyarrow.flight as flight

_SQL_PREFIX = "type.googleapis.com/arrow.flight.protocol.sql."


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _length_delimited(field: int, data: bytes) -> bytes:
    return _varint(field << 3 | 2) + _varint(len(data)) + data


def _command(name: str, sql: str) -> bytes:
    message = _length_delimited(1, sql.encode())
    return _length_delimited(1, (_SQL_PREFIX + name).encode()) + _length_delimited(2, message)


class FloeFlightClient:
    def __init__(self, uri: str):
        self.client = flight.FlightClient(uri)

    def query(self, sql: str):
        """Runs a statement and returns its result as a ``pyarrow.Table``."""
        descriptor = flight.FlightDescriptor.for_command(_command("CommandStatementQuery", sql))
        info = self.client.get_flight_info(descriptor)
        tables = [self.client.do_get(endpoint.ticket).read_all() for endpoint in info.endpoints]
        if len(tables) == 1:
            return tables[0]
        import pyarrow as pa

        return pa.concat_tables(tables)

    def update(self, sql: str) -> None:
        """Runs DDL or DML (DDL returns no rows)."""
        self.query(sql)

    def close(self):
        self.client.close()
