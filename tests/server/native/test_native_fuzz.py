"""Fuzzing the native packet parser with hypothesis: random and mutated byte streams (derandomized, bounded).

The parser may refuse anything, but only as a :class:`ProtocolError` (answered with an Exception packet, then
the connection closed): never another exception, which would be an internal error. The live test sends
mutated streams to a real listener: each gets an answer or a close, never ``internal error``, and the
listener still answers a real client afterwards."""

from __future__ import annotations

import io

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dpch.server import block_compression
from dpch.server.native import protocol
from dpch.server.native.blocks import read_block, row_binary_header, split_native
from dpch.server.native.compressed import CompressedSource
from dpch.server.native.wire import ProtocolError, Reader, Truncated
from tests.server.native import packets

FUZZ = settings(max_examples=400, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow])
VALID = (packets.hello() + packets.addendum() + packets.query("SELECT count(*) FROM visits", {"dp_epsilon": "0.5"})
         + packets.data() + packets.query("SHOW TABLES", compression=1))


def parse_stream(data: bytes, *, max_string: int = 4096) -> None:
    """Reads ``data`` as a client's side of a connection, as :class:`~dpch.server.native.connection.Connection`
    does (without a gateway): the Hello, then Query packets with their external tables, Pings and Cancels."""
    reader = Reader(io.BytesIO(data).read, max_string=max_string)
    hello = protocol.read_hello(reader)
    revision = protocol.negotiated(hello)
    protocol.read_addendum(reader, revision)
    while True:
        packet = reader.varint()
        if packet == protocol.Client.QUERY:
            query = protocol.read_query(reader, revision)
            while True:
                if reader.varint() != protocol.Client.DATA:
                    raise ProtocolError("expected Data")
                reader.bytes_()
                source = Reader(CompressedSource(reader, max_string).recv) if query.compression else reader
                block = read_block(source, revision)
                if not block.columns and not block.rows:
                    break
        elif packet not in (protocol.Client.PING, protocol.Client.CANCEL):
            raise ProtocolError("unknown packet")


def _only_protocol_errors(data: bytes) -> None:
    try:
        parse_stream(data)
    except ProtocolError:
        pass


def test_the_valid_stream_parses_to_its_end():
    with pytest.raises(Truncated):  # the second query's compressed external tables are not there
        parse_stream(VALID)


@st.composite
def mutated(draw: st.DrawFn) -> bytes:
    data = bytearray(VALID)
    for _ in range(draw(st.integers(1, 6))):
        at = draw(st.integers(0, len(data) - 1))
        action = draw(st.sampled_from(["flip", "insert", "delete", "big"]))
        if action == "flip":
            data[at] = draw(st.integers(0, 255))
        elif action == "insert":
            data[at:at] = draw(st.binary(min_size=1, max_size=12))
        elif action == "delete":
            del data[at:at + draw(st.integers(1, 8))]
        else:  # a huge length or varint where a small one was
            data[at:at + 1] = b"\xff" * draw(st.integers(1, 11)) + b"\x01"
    return bytes(data)


@FUZZ
@given(mutated())
def test_mutated_streams_raise_only_protocol_errors(data):
    _only_protocol_errors(data)


@FUZZ
@given(st.binary(max_size=300))
def test_random_bytes_raise_only_protocol_errors(data):
    _only_protocol_errors(data)
    _only_protocol_errors(packets.hello() + packets.addendum() + data)


@FUZZ
@given(st.binary(max_size=200), st.sampled_from([block_compression.LZ4, block_compression.ZSTD]))
def test_compressed_frames_damaged_anywhere_raise_only_protocol_errors(noise, method):
    frame = bytearray(block_compression.compress(packets.data()[2:], method))
    frame[len(noise) % len(frame)] ^= 0x5A if noise else 0
    stream = packets.hello() + packets.addendum() + packets.query("SHOW TABLES", compression=1) + b"\x02\x00"
    _only_protocol_errors(stream + bytes(frame) + noise)


@FUZZ
@given(st.binary(max_size=300))
def test_the_result_splitter_and_header_reader_refuse_garbage_cleanly(data):
    try:
        split_native(data)
    except ValueError:
        pass
    try:
        row_binary_header(data)
    except ProtocolError:
        pass


@pytest.mark.engine
def test_mutated_streams_against_a_live_listener(native):
    """30 mutated connections (fixed seed): each is answered or closed, never with an internal error; the
    listener then has no connection left and still answers clickhouse-driver."""
    from tests.server.native.test_native_robustness import _still_answers, _wait_until_no_connections

    http, listener = native()
    seen: list[int] = []

    @settings(max_examples=30, deadline=None, derandomize=True, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
    @given(mutated())
    def one(data: bytes) -> None:
        sock, reader = packets.connect(listener.port)
        with sock:
            sock.sendall(data)
            sock.shutdown(1)  # the client sends nothing more: the server must answer or close, not wait
            try:
                while True:
                    packet = reader.varint()
                    if packet == 2:
                        code, message = packets.read_exception(reader)
                        assert "internal error" not in message and "Traceback" not in message, message
                        seen.append(code)
                        return
                    if packet in (0, 1, 3, 4, 5, 6):
                        return  # a Hello or an answer: the stream was still valid up to here
            except (Truncated, ProtocolError):
                return  # closed

    one()
    _wait_until_no_connections(listener)
    _still_answers(http, listener)
