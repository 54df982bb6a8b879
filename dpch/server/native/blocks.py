"""Data blocks of the native protocol, made from ClickHouse's own ``FORMAT Native`` output.

A block on the wire is ``BlockInfo``, the column and row counts, then per column its name, type, (from
revision 54454) a custom-serialization byte, and its data. ClickHouse's ``FORMAT Native`` (what the
gateway already produces for the HTTP ``Native`` format, written by ClickHouse itself) is the same
without ``BlockInfo`` and without that byte. So dpch never encodes a value: it cuts ClickHouse's
bytes at each column's end and writes them unchanged, with the two additions. Where a column ends is
found by clickhouse-connect's own Native reader (the reader dpch reads every ClickHouse answer with),
reading the column from a buffer whose position is then the column's end.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import clickhouse_connect.datatypes.registry
from clickhouse_connect.datatypes.registry import get_from_name
from clickhouse_connect.driver import dataconv as python_dataconv
from clickhouse_connect.driver.buffer import ResponseBuffer
from clickhouse_connect.driver.query import QueryContext

from dpch.server.native.protocol import REVISION_WITH_CUSTOM_SERIALIZATION
from dpch.server.native.wire import ProtocolError, Reader, int32, string, uint8, varint

#: BlockInfo as ClickHouse writes it for an ordinary block: is_overflows = 0, bucket_num = -1, end
BLOCK_INFO = varint(1) + uint8(0) + varint(2) + int32(-1) + varint(0)
#: the most columns a client's block may name
MAX_COLUMNS = 10_000


@dataclass(frozen=True)
class Column:
    """A column of a block: its name, ClickHouse type and (for a data block) its data as ClickHouse wrote it."""

    name: str
    type: str
    data: bytes = b""


@dataclass(frozen=True)
class Block:
    """One block: its columns and row count."""

    columns: tuple[Column, ...]
    rows: int

    def encode(self, revision: int) -> bytes:
        """The block as the protocol carries it at ``revision`` (a header when ``rows`` is 0)."""
        out = [BLOCK_INFO, varint(len(self.columns)), varint(self.rows)]
        custom = revision >= REVISION_WITH_CUSTOM_SERIALIZATION
        for column in self.columns:
            out += [string(column.name), string(column.type)]
            if custom:
                out.append(uint8(0))  # default serialization, as ClickHouse's Native format writes it
            if self.rows:
                out.append(column.data)
        return b"".join(out)

    def header(self) -> Block:
        """The same columns without rows: the header block sent before the data."""
        return Block(tuple(Column(c.name, c.type) for c in self.columns), 0)


EMPTY = Block((), 0)


class _DataConv:
    """clickhouse-connect's column readers call ``data_conv.read_datetime_col(buffer, …)`` (also Date, Date32,
    UUID, IPv4 and every Nullable number) on its compiled module, which accepts only its compiled
    ResponseBuffer; that one keeps its position to itself, and the cut needs it. So the readers of
    :func:`split_native` use the library's pure-Python ResponseBuffer, and a call whose first argument is
    one goes to the library's pure-Python ``dataconv`` (same functions, same results); every other call,
    the library's own reads included, goes to the compiled module as before."""

    def __init__(self, compiled: Any) -> None:
        self._compiled = compiled

    def __getattr__(self, name: str) -> Any:
        compiled, python = getattr(self._compiled, name), getattr(python_dataconv, name, None)
        if python is None:
            return compiled

        def call(*args: Any, **kwargs: Any) -> Any:
            return (python if args and isinstance(args[0], ResponseBuffer) else compiled)(*args, **kwargs)

        return call


def _route_python_buffers() -> None:
    """Installs :class:`_DataConv` in the reader modules that hold the compiled ``data_conv`` (once)."""
    for module in list(vars(clickhouse_connect.datatypes).values()):
        conv = getattr(module, "data_conv", None)
        if conv is not None and conv is not python_dataconv and not isinstance(conv, _DataConv):
            module.data_conv = _DataConv(conv)


_route_python_buffers()


class _OneChunk:
    """A source of one chunk for clickhouse-connect's ResponseBuffer (its position is then an offset)."""

    def __init__(self, data: bytes) -> None:
        self.gen: Iterator[bytes] = iter([data])

    def close(self) -> None:
        pass


def split_native(body: bytes) -> list[Block]:
    """ClickHouse's ``FORMAT Native`` output as its blocks, each column's data cut where
    clickhouse-connect's reader for its type stops. Anything it cannot read raises ``ValueError``."""
    buffer: Any = ResponseBuffer(_OneChunk(body))
    context = QueryContext()
    blocks = []
    try:
        while buffer.buf_loc < len(body):
            ncols, nrows = buffer.read_leb128(), buffer.read_leb128()
            columns = []
            for _ in range(ncols):
                name = bytes(buffer.read_bytes(buffer.read_leb128())).decode()
                type_name = bytes(buffer.read_bytes(buffer.read_leb128())).decode()
                start = buffer.buf_loc
                if nrows:
                    get_from_name(type_name).read_column(buffer, nrows, context)
                columns.append(Column(name, type_name, body[start:buffer.buf_loc]))
            blocks.append(Block(tuple(columns), nrows))
    except Exception as exc:  # the library's errors for input it cannot read: ours is from ClickHouse
        raise ValueError(f"cannot split ClickHouse's Native output ({type(exc).__name__})") from None
    return blocks


def row_binary_header(body: bytes) -> Block:
    """The header (names and types) of ``RowBinaryWithNamesAndTypes`` output, which ClickHouse writes
    even for no rows (its Native output is then empty)."""
    reader = Reader(_bytes_source(body))
    n = reader.varint()
    names = [reader.string() for _ in range(n)]
    types = [reader.string() for _ in range(n)]
    return Block(tuple(Column(name, type_) for name, type_ in zip(names, types, strict=True)), 0)


def _bytes_source(data: bytes) -> Any:
    view = memoryview(data)
    at = 0

    def recv(n: int) -> bytes:
        nonlocal at
        chunk = bytes(view[at:at + n])
        at += len(chunk)
        return chunk

    return recv


def read_block(reader: Reader, revision: int) -> Block:
    """A block a client sent (its Data packet's body, after the table name). dpch takes no data from
    clients, so a block with rows is refused (``NOT_IMPLEMENTED``); the empty block that ends a query's
    external tables, and header-only blocks, are read whole."""
    _block_info(reader)
    ncols, nrows = reader.varint(), reader.varint()
    if ncols > MAX_COLUMNS:
        raise ProtocolError(f"A block of {ncols} columns is more than the limit of {MAX_COLUMNS}", 36)
    columns = []
    for _ in range(ncols):
        name, type_name = reader.string(), reader.string()
        if revision >= REVISION_WITH_CUSTOM_SERIALIZATION and reader.uint8():
            raise ProtocolError("dpch takes no data from clients (a block with custom serialization)", 48)
        if nrows:
            raise ProtocolError("dpch takes no data from clients: external tables and INSERT data are not "
                                "accepted (dpch is read-only)", 48)
        columns.append(Column(name, type_name))
    if nrows and not ncols:
        raise ProtocolError(f"A block of {nrows} rows has no columns", 36)
    return Block(tuple(columns), nrows)


def _block_info(reader: Reader) -> None:
    """BlockInfo: numbered fields (1: is_overflows, 2: bucket_num) up to field 0."""
    for _ in range(16):
        field_num = reader.varint()
        if field_num == 0:
            return
        if field_num == 1:
            reader.uint8()
        elif field_num == 2:
            reader.int32()
        else:
            raise ProtocolError(f"Unknown BlockInfo field {field_num}", 36)
    raise ProtocolError("BlockInfo has too many fields", 36)


__all__ = ["BLOCK_INFO", "EMPTY", "Block", "Column", "read_block", "row_binary_header", "split_native"]
