"""`dpch serve --tcp-port` answered to the real ``clickhouse-client`` binary (Debian's ``clickhouse-client``
package, 18.16.1: protocol revision 54412, older than every setting-as-string, parameter, addendum and
custom-serialization field), run as a user would: private queries, settings in SQL, refusals with dpch's
codes, several queries on one connection, and the bytes of the negotiation (recorded by a relay between the
client and the listener) decoded at the client's revision (issue 30).

Skipped, with the reason printed, only where the binary is absent (``apt-get install clickhouse-client``).

This client found a bug: dpch's ProfileInfo said ``calculated_rows_before_limit = 0``, which a ClickHouse
server never writes; 18.16 then computes the count from its own (absent) stream tree and dies of SIGSEGV
after printing the answer. :func:`test_profile_info_is_as_a_clickhouse_server_writes_it` pins the fix
without the binary.
"""

from __future__ import annotations

import json
import shutil
import socket
import struct
import subprocess
import sys
import threading

import lz4.block
import pytest
from clickhouse_cityhash.cityhash import CityHash128

from dpch.server.native import protocol
from dpch.server.native.wire import Reader, Truncated
from tests.server.http_post import post
from tests.server.native import packets

pytestmark = pytest.mark.engine

CLIENT = shutil.which("clickhouse-client")
#: the revision Debian's clickhouse-client 18.16.1 sends in its Hello
OLD_REVISION = 54412


def _skip_without_client() -> None:
    if CLIENT is None:
        reason = "clickhouse-client is not installed (apt-get install clickhouse-client)"
        print(f"SKIPPED (clickhouse-client tests): {reason}", file=sys.__stderr__)
        pytest.skip(reason)


def run(port: int, database: str, query: str, *args: str, password: str = "ana-pw") -> subprocess.CompletedProcess:
    """``clickhouse-client --host 127.0.0.1 --port … --query …`` as a user types it; its exit code, stdout, stderr."""
    _skip_without_client()
    assert CLIENT is not None
    return subprocess.run([CLIENT, "--host", "127.0.0.1", "--port", str(port), "--user", "ana", "--password",
                           password, "--database", database, *args, "--query", query],
                          capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)


def spent(http) -> float:
    response, body = post(http, "SELECT spent FROM dpch.budget WHERE dataset = '' FORMAT JSON")
    assert response.status == 200, body
    return float(json.loads(body)["data"][0]["spent"])


def test_a_private_query_through_clickhouse_client(native):
    http, listener = native()
    db = http.gateway.config.database
    done = run(listener.port, db, "SELECT region, count(*) AS n FROM visits GROUP BY region ORDER BY region "
                                  "SETTINGS dp_epsilon = 0.25", "--format", "TabSeparatedWithNamesAndTypes")
    assert done.returncode == 0, (done.returncode, done.stderr)  # was -11/-6: the ProfileInfo bug
    lines = [line.split("\t") for line in done.stdout.splitlines()]
    assert lines[:2] == [["region", "n"], ["LowCardinality(String)", "Int64"]]  # LowCardinality: revision ≥ 54405
    assert [row[0] for row in lines[2:]] == ["east", "north", "south", "west"]
    assert all(row[1].lstrip("-").isdigit() for row in lines[2:])
    assert spent(http) == pytest.approx(0.25)  # the SETTINGS clause's ε, charged to ana's ledger
    # the same release again, as the default TabSeparated: the cache answers it, nothing more is spent
    again = run(listener.port, db, "SELECT region, count(*) AS n FROM visits GROUP BY region ORDER BY region "
                                   "SETTINGS dp_epsilon = 0.25")
    assert again.returncode == 0, again.stderr
    assert [line.split("\t") for line in again.stdout.splitlines()] == lines[2:]
    assert spent(http) == pytest.approx(0.25)


def test_several_queries_on_one_connection_and_metadata(native):
    http, listener = native()
    db = http.gateway.config.database
    done = run(listener.port, db, "SHOW TABLES; SELECT currentUser(); SELECT spent FROM dpch.budget WHERE "
                                  "dataset = ''", "--multiquery")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["visits", "ana", "0"]  # unannotated tables are not listed


@pytest.mark.parametrize(("query", "args", "code", "text"), [
    ("SELECT * FROM visits", (), 497, "DB::Exception: dpch: SELECT * releases rows"),
    ("INSERT INTO visits (age) VALUES (1)", (), 164, "dpch is read-only"),
    ("SELECT count(*) FROM nowhere", (), 60, "nowhere"),
    # revision 54412 writes settings in each one's binary type, which dpch cannot read without knowing
    # every ClickHouse setting: refused, with the way round (SETTINGS in the query)
    ("SELECT count(*) FROM visits", ("--max_threads", "2"), 115, "send it in the query's SETTINGS clause"),
], ids=["select-star", "insert", "unknown-table", "protocol-setting"])
def test_refusals_reach_clickhouse_client_with_dpchs_codes(native, query, args, code, text):
    http, listener = native()
    done = run(listener.port, http.gateway.config.database, query, *args)
    assert done.returncode == code % 256, (done.returncode, done.stderr)  # the client exits with the code
    assert f"Code: {code}. DB::Exception: Received from 127.0.0.1:{listener.port}" in done.stderr, done.stderr
    assert text in done.stderr
    assert done.stdout == ""
    assert spent(http) == 0.0


def test_a_wrong_password_is_refused_at_hello(native):
    http, listener = native()
    done = run(listener.port, http.gateway.config.database, "SELECT 1", password="wrong")
    assert done.returncode == 516 % 256 and "Code: 516." in done.stderr, done.stderr


class Relay:
    """A TCP relay between one client and the listener that records both directions (real sockets: the
    client and dpch talk through it unchanged)."""

    def __init__(self, upstream_port: int) -> None:
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.upstream_port = upstream_port
        self.sent = bytearray()  # client → dpch
        self.received = bytearray()  # dpch → client
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        client, _ = self.server.accept()
        upstream = socket.create_connection(("127.0.0.1", self.upstream_port), timeout=120)
        pumps = [threading.Thread(target=self._pump, args=(client, upstream, self.sent)),
                 threading.Thread(target=self._pump, args=(upstream, client, self.received))]
        for pump in pumps:
            pump.start()
        for pump in pumps:
            pump.join()
        client.close()
        upstream.close()

    @staticmethod
    def _pump(source: socket.socket, sink: socket.socket, record: bytearray) -> None:
        try:
            while chunk := source.recv(65536):
                record += chunk
                sink.sendall(chunk)
        except OSError:
            pass
        for sock in (sink, source):
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def close(self) -> None:
        self.thread.join(timeout=120)
        self.server.close()
        assert not self.thread.is_alive()



def _frame(reader: Reader) -> Reader:
    """One compressed frame (the client asked for compression, as clickhouse-client does by default): its
    CityHash128 checked and its LZ4 body decompressed with the ``lz4`` and ``clickhouse-cityhash`` packages."""
    checksum, header = reader.read(16), reader.read(9)
    method, stored, plain = struct.unpack("<BII", header)
    body = reader.read(stored - 9)
    value = CityHash128(header + body)
    assert checksum == struct.pack("<QQ", value >> 64, value & (2**64 - 1))
    assert method == 0x82  # LZ4, clickhouse-client's default network_compression_method
    return packets.bytes_reader(lz4.block.decompress(body, uncompressed_size=plain))


def _block(reader: Reader) -> list[tuple[str, ...]]:
    """A block at revision 54412 (BlockInfo; no custom-serialization byte), its columns of UInt8 or String."""
    reader = _frame(reader)
    assert (reader.varint(), reader.uint8(), reader.varint(), reader.int32(), reader.varint()) == (1, 0, 2, -1, 0)
    ncols, nrows = reader.varint(), reader.varint()
    columns = []
    for _ in range(ncols):
        name, type_ = reader.string(), reader.string()
        values = [str(reader.uint8()) if type_ == "UInt8" else reader.string() for _ in range(nrows)]
        columns.append((name, type_, *values))
    return columns


SQL = "SELECT 1 AS one, 'x' AS s"


def test_the_negotiation_with_the_old_revision_on_the_wire(native):
    """The bytes between clickhouse-client 18.16 and dpch: the client's Hello at 54412, dpch's Hello with the
    fields of 54412 only (no password rules, no nonce), no addendum from the client; the Query's ClientInfo
    read at 54412; its Ping answered; the answer's blocks without the custom-serialization byte, ProfileInfo,
    Progress of three counts (54412 < 54420: no written rows) and EndOfStream, which the client reads to
    exit 0."""
    http, listener = native()
    relay = Relay(listener.port)
    done = run(relay.port, http.gateway.config.database, SQL)
    relay.close()
    assert done.returncode == 0, done.stderr
    assert done.stdout == "1\tx\n"

    sent = packets.bytes_reader(relay.sent)
    assert sent.varint() == 0
    name, major, minor, revision = sent.string(), sent.varint(), sent.varint(), sent.varint()
    assert (name, major, minor, revision) == ("ClickHouse client", 18, 16, OLD_REVISION)
    assert (sent.string(), sent.string(), sent.string()) == (http.gateway.config.database, "ana", "ana-pw")
    assert sent.varint() == 4  # a Ping (the client checks the connection), no addendum below 54458
    assert sent.varint() == 1  # then the Query, its ClientInfo as 54412 has it, compression asked
    query = protocol.read_query(sent, OLD_REVISION)
    assert (query.text, query.compression, query.settings, query.parameters) == (SQL, True, {}, {})

    got = packets.bytes_reader(relay.received)
    assert got.varint() == 0
    assert got.string() == "ClickHouse"
    got.varint(), got.varint()
    assert got.varint() == 54468  # dpch's own revision; both then use the client's
    got.string(), got.string(), got.varint()  # time zone (54058), display name (54372), patch (54401)
    assert got.varint() == 4  # the Pong comes next: no password rules or nonce were sent
    assert got.varint() == 1  # then the answer's Data
    assert got.string() == "" and _block(got) == [("one", "UInt8"), ("s", "String")]
    assert got.varint() == 1
    assert got.string() == "" and _block(got) == [("one", "UInt8", "1"), ("s", "String", "x")]
    assert got.varint() == 6  # ProfileInfo: rows, blocks, bytes, applied_limit, rows_before_limit, calculated
    assert (got.varint(), got.varint()) == (1, 1)
    got.varint()
    assert (got.uint8(), got.varint(), got.uint8()) == (0, 0, 1)
    assert got.varint() == 3  # Progress at 54412: read rows, read bytes, total rows
    assert (got.varint(), got.varint(), got.varint()) == (0, 0, 0)
    assert got.varint() == 5  # EndOfStream
    with pytest.raises(Truncated):
        got.read(1)  # nothing else was sent


def test_profile_info_is_as_a_clickhouse_server_writes_it(native):
    """ClickHouse's ``ProfileInfo::write`` calls ``getRowsBeforeLimit()`` (which sets
    ``calculated_rows_before_limit``) before writing that flag, so a server always sends it as 1. A 0 made
    clickhouse-client 18.16 crash after the answer. Checked on raw packets, with or without the binary."""
    http, listener = native()
    sock, reader = packets.connect(listener.port)
    with sock:
        sock.sendall(packets.hello(database=http.gateway.config.database) + packets.addendum())
        packets.read_server_hello(reader)
        sock.sendall(packets.query("SELECT 1 AS one") + packets.data())
        seen = []
        while (packet := reader.varint()) != 6:
            seen.append(packet)
            assert packet == 1, packets.read_exception(reader) if packet == 2 else packet
            reader.string()
            for column in _block_with_custom_byte(reader):
                assert column[:2] == ("one", "UInt8")
        assert seen == [1, 1]
        assert (reader.varint(), reader.varint()) == (1, 1)
        reader.varint()
        assert (reader.uint8(), reader.varint(), reader.uint8()) == (0, 0, 1)
        assert reader.varint() == 3  # then Progress and EndOfStream, as before


def _block_with_custom_byte(reader: Reader) -> list[tuple[str, ...]]:
    reader.varint(), reader.uint8(), reader.varint(), reader.int32(), reader.varint()
    ncols, nrows = reader.varint(), reader.varint()
    columns = []
    for _ in range(ncols):
        name, type_ = reader.string(), reader.string()
        assert reader.uint8() == 0
        columns.append((name, type_, *[str(reader.uint8()) for _ in range(nrows)]))
    return columns
