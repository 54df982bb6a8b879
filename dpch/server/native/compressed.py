"""Compressed Data packets: ClickHouse's compressed blocks (:mod:`dpch.server.block_compression`) on a connection.

When a Query packet asks for compression, the block of every Data packet after it (both ways) is
written as ClickHouse's compressed frames: a CityHash128 checksum, a method byte (LZ4, ZSTD, none)
and the sizes, then the data. The codec and checksum are those of the HTTP side's ``compress=1``.
"""

from __future__ import annotations

import struct

from dpch.server import block_compression
from dpch.server.native.wire import ProtocolError, Reader

_HEADER = struct.Struct("<BII")


class CompressedSource:
    """Decompressed bytes from the compressed frames ``reader`` yields, one frame at a time, each checked;
    a frame larger than ``limit`` (compressed or not) is refused before it is read."""

    def __init__(self, reader: Reader, limit: int) -> None:
        self._reader = reader
        self._limit = limit
        self._data = b""

    def recv(self, n: int) -> bytes:
        """Up to ``n`` decompressed bytes (a :class:`~dpch.server.native.wire.Reader`'s source)."""
        if not self._data:
            self._data = self._frame()
        chunk, self._data = self._data[:n], self._data[n:]
        return chunk

    def _frame(self) -> bytes:
        checksum = self._reader.read(16)
        header = self._reader.read(_HEADER.size)
        _method, stored, plain = _HEADER.unpack(header)
        if stored < _HEADER.size or stored - _HEADER.size > self._limit or plain > self._limit:
            raise ProtocolError("Cannot decompress a block: its size is wrong or over the limit", 271)
        body = self._reader.read(stored - _HEADER.size)
        try:
            data = block_compression.decompress(checksum + header + body, self._limit)
        except block_compression.BlockFormatError as exc:
            raise ProtocolError(str(exc).replace("the request body", "a block"), exc.code) from None
        if not data:
            raise ProtocolError("Cannot decompress a block: it is empty", 271)
        return data


def compress(data: bytes, method_name: str | None) -> bytes:
    """``data`` as compressed frames with the method a client named (``network_compression_method``:
    lz4, the default, zstd or none)."""
    method = block_compression.METHODS.get((method_name or "lz4").lower())
    if method is None:
        raise ProtocolError(f"Unknown compression method {method_name}", 89)
    return block_compression.compress(data, method)


__all__ = ["CompressedSource", "compress"]
