"""A native-protocol client's packets, written as clickhouse-driver writes them (``connection.py``
``send_hello``/``send_query``, ``clientinfo.py``, ``streams/native.py``), for tests that send raw bytes."""

from __future__ import annotations

import socket

from dpch.server.native.blocks import BLOCK_INFO
from dpch.server.native.wire import Reader, int32, string, uint8, uint64, varint

REVISION = 54468


def hello(user: str = "ana", password: str = "ana-pw", database: str = "", revision: int = REVISION) -> bytes:
    return varint(0) + string("raw-test") + varint(20) + varint(10) + varint(revision) + string(database) + \
        string(user) + string(password)


def addendum(revision: int = REVISION) -> bytes:
    return string("") if revision >= 54458 else b""


def query(text: str, settings: dict[str, str] | None = None, revision: int = REVISION, compression: int = 0) -> bytes:
    out = [varint(1), string("")]
    out += [uint8(1), string(""), string(""), string("[::ffff:127.0.0.1]:0"), uint64(0), uint8(1), string("os"),
            string("host"), string("raw-test"), varint(20), varint(10), varint(revision), string(""), varint(0),
            varint(2), uint8(0), varint(0), varint(0), varint(0)]
    for name, value in (settings or {}).items():
        out += [string(name), uint8(0), string(value)]
    out += [string(""), string(""), varint(2), varint(compression), string(text), string("")]
    return b"".join(out)


def data(columns: list[tuple[str, str, bytes]] | None = None, rows: int = 0) -> bytes:
    """A client Data packet: a block of ``columns`` (name, type, data) with ``rows`` rows (none: the empty
    block that ends the external tables)."""
    out = [varint(2), string(""), BLOCK_INFO, varint(len(columns or [])), varint(rows)]
    for name, type_, payload in columns or []:
        out += [string(name), string(type_), uint8(0), payload if rows else b""]
    return b"".join(out)


def read_server_hello(reader: Reader) -> tuple[str, int]:
    assert reader.varint() == 0
    name, _major, _minor, revision = reader.string(), reader.varint(), reader.varint(), reader.varint()
    reader.string(), reader.string(), reader.varint()  # timezone, display name, patch
    assert reader.varint() == 0  # password rules
    reader.uint64()  # nonce
    return name, revision


def read_exception(reader: Reader) -> tuple[int, str]:
    """The body of an Exception packet (its type already read): code and display text."""
    code = reader.int32()
    reader.string()
    message = reader.string()
    reader.string()
    assert reader.uint8() == 0
    return code, message


def connect(port: int) -> tuple[socket.socket, Reader]:
    sock = socket.create_connection(("127.0.0.1", port), timeout=60)
    return sock, Reader(sock.recv)


__all__ = ["addendum", "connect", "data", "hello", "int32", "query", "read_exception", "read_server_hello"]


def bytes_reader(data: bytes) -> Reader:
    """A :class:`Reader` over bytes already received (a recorded stream, one frame's body)."""
    view, at = memoryview(bytes(data)), 0

    def recv(n: int) -> bytes:
        nonlocal at
        chunk = bytes(view[at:at + n])
        at += len(chunk)
        return chunk

    return Reader(recv)
