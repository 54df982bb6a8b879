"""What a broken, hostile or slow native client gets: an Exception packet with ClickHouse's code and then a closed
connection, or just the close; never a traceback, an internal error or a worker left waiting (issue 30)."""

from __future__ import annotations

import time

import pytest
from clickhouse_driver import Client

from dpch.server.native.wire import Truncated, string, uint8, uint64, varint
from tests.server.native import packets

pytestmark = pytest.mark.engine


def _ended(reader) -> bool:
    try:
        reader.read(1)
    except Truncated:
        return True
    return False


def _wait_until_no_connections(listener, deadline_s: float = 60.0) -> None:
    """Polls (generous deadline, no fixed wait) until the listener holds no connection."""
    end = time.monotonic() + deadline_s
    while listener._connections and time.monotonic() < end:
        time.sleep(0.01)
    assert not listener._connections


def _still_answers(http, listener) -> None:
    c = Client(host="127.0.0.1", port=listener.port, user="ana", password="ana-pw",
               database=http.gateway.config.database, connect_timeout=60)
    assert c.execute("SHOW TABLES") == [("visits",)]


@pytest.mark.parametrize(("stream", "code"), [
    (varint(7), 101),  # not a Hello
    (b"\xff" * 11, 101),  # a varint of more than 64 bits
    (varint(0) + varint(1 << 40), 307),  # a client name of a terabyte
    (packets.hello(revision=1000), 48),  # a revision older than any client dpch can speak to
], ids=["not-hello", "huge-varint", "huge-string", "ancient-revision"])
def test_a_malformed_handshake_gets_an_exception_packet_and_the_connection_closes(native, stream, code):
    http, listener = native()
    sock, reader = packets.connect(listener.port)
    with sock:
        sock.sendall(stream)
        assert reader.varint() == 2
        got, message = packets.read_exception(reader)
        assert got == code, message
        assert message.startswith("DB::Exception: dpch: ") and "Traceback" not in message
        assert _ended(reader)
    _still_answers(http, listener)


def test_malformed_packets_after_the_handshake(native):
    http, listener = native()
    db = http.gateway.config.database
    cases = [
        (varint(9), 101),  # an unknown packet
        (packets.data(), 101),  # Data outside a query
        (packets.query("SHOW TABLES") + packets.data([("x", "UInt8", b"\x01")], rows=1), 48),  # an external table
        (packets.query("SHOW TABLES") + varint(4), 101),  # a Ping where the external tables belong
        (packets.query("SHOW TABLES", compression=5), 36),  # an unknown compression flag
    ]
    for stream, code in cases:
        sock, reader = packets.connect(listener.port)
        with sock:
            sock.sendall(packets.hello(database=db) + packets.addendum())
            packets.read_server_hello(reader)
            sock.sendall(stream)
            packet = reader.varint()
            assert packet == 2, (stream, packet)
            got, message = packets.read_exception(reader)
            assert got == code, (stream, message)
            assert "Traceback" not in message and "internal error" not in message
    _wait_until_no_connections(listener)
    _still_answers(http, listener)


def test_a_client_that_leaves_mid_packet_frees_its_thread(native):
    http, listener = native()
    for cut in (3, 20, 40):
        sock, _reader = packets.connect(listener.port)
        sock.sendall((packets.hello() + packets.addendum() + packets.query("SHOW TABLES"))[:cut])
        sock.close()
    _wait_until_no_connections(listener)
    _still_answers(http, listener)


def test_a_slow_client_sending_one_byte_at_a_time_is_answered(native):
    http, listener = native()
    sock, reader = packets.connect(listener.port)
    with sock:
        stream = packets.hello(database=http.gateway.config.database) + packets.addendum()
        for i in range(len(stream)):
            sock.sendall(stream[i:i + 1])
        assert packets.read_server_hello(reader) == ("ClickHouse", 54468)
        stream = packets.query("SHOW TABLES") + packets.data()
        for i in range(len(stream)):
            sock.sendall(stream[i:i + 1])
        packets_seen = []
        while True:
            packet = reader.varint()
            packets_seen.append(packet)
            if packet == 5:
                sock.sendall(varint(4))  # and a Ping after the answer
            if packet in (2, 4):
                break
            if packet == 1:
                reader.string()
                _skip_block(reader)
            elif packet == 6:
                [reader.varint() for _ in range(3)], reader.uint8(), reader.varint(), reader.uint8()
            elif packet == 3:
                [reader.varint() for _ in range(7)]
        assert packets_seen == [1, 1, 6, 3, 5, 4]  # header, data, profile info, progress, end of stream, pong


def _skip_block(reader) -> None:
    """A header or a one-column String block (what SHOW TABLES answers)."""
    assert reader.varint() == 1 and reader.uint8() == 0 and reader.varint() == 2
    reader.int32()
    assert reader.varint() == 0
    ncols, nrows = reader.varint(), reader.varint()
    for _ in range(ncols):
        reader.string(), reader.string(), reader.uint8()
        for _ in range(nrows):
            reader.string()


def test_the_old_revisions_clients_send_are_negotiated(native):
    """clickhouse-go 2.x speaks 54460; Debian's clickhouse-client 18.16 speaks 54413 (no settings as strings,
    no parameters, no custom-serialization byte, no addendum): both get their revision's Hello and blocks."""
    http, listener = native()
    for revision in (54460, 54413):
        sock, reader = packets.connect(listener.port)
        with sock:
            sock.sendall(packets.hello(database=http.gateway.config.database, revision=revision)
                         + packets.addendum(revision))
            assert reader.varint() == 0
            assert reader.string() == "ClickHouse"
            reader.varint(), reader.varint()
            assert reader.varint() == 54468
            reader.string(), reader.string(), reader.varint()  # time zone, display name, patch
            sock.sendall(_old_query("SHOW TABLES", revision) + packets.data()[:0] + varint(2) + string("")
                         + _old_empty_block())
            packet = reader.varint()
            assert packet == 1, packets.read_exception(reader)
            reader.string()
            assert reader.varint() == 1 and reader.uint8() == 0 and reader.varint() == 2
            reader.int32(), reader.varint()
            assert (reader.varint(), reader.varint()) == (1, 0)
            assert (reader.string(), reader.string()) == ("name", "String")
            if revision >= 54454:
                assert reader.uint8() == 0
    _still_answers(http, listener)


def _old_query(text: str, revision: int) -> bytes:
    out = [varint(1), string(""), uint8(1), string(""), string(""), string("127.0.0.1:0")]
    if revision >= 54449:
        out.append(uint64(0))
    out += [uint8(1), string("os"), string("host"), string("old"), varint(18), varint(16), varint(revision),
            string("")]
    if revision >= 54448:
        out.append(varint(0))
    out.append(varint(0))  # version patch
    if revision >= 54442:
        out.append(uint8(0))
    if revision >= 54453:
        out += [varint(0), varint(0), varint(0)]
    out.append(string(""))  # no settings
    if revision >= 54441:
        out.append(string(""))
    out += [varint(2), varint(0), string(text)]
    if revision >= 54459:
        out.append(string(""))
    return b"".join(out)


def _old_empty_block() -> bytes:
    return varint(1) + uint8(0) + varint(2) + b"\xff\xff\xff\xff" + varint(0) + varint(0) + varint(0)


def test_a_query_cancelled_as_it_is_sent_spends_nothing(native):
    """Query, its empty external-tables block and Cancel in one write (the client cancels before reading
    anything): the Cancel is in the connection when the query would start, so it never starts — code 394,
    nothing charged — and the connection takes the next query."""
    http, listener = native()
    before = _spent(http)
    sock, reader = packets.connect(listener.port)
    with sock:
        sock.sendall(packets.hello(database=http.gateway.config.database) + packets.addendum())
        packets.read_server_hello(reader)
        sock.sendall(packets.query("SELECT count(*) FROM visits SETTINGS dp_epsilon = 0.5") + packets.data()
                     + varint(3))
        assert reader.varint() == 2
        code, message = packets.read_exception(reader)
        assert code == 394 and "cancelled" in message
    assert _spent(http) == before
    _still_answers(http, listener)


def _spent(http) -> float:
    from tests.server.http_post import post

    response, data = post(http, "SELECT spent_epsilon FROM dpch.budget FORMAT TSV", user="ana", password="ana-pw")
    assert response.status == 200, data
    return float(data.split()[0])
