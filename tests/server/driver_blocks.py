"""ClickHouse's compressed blocks read back as clickhouse-driver reads them, a reader used against real
servers (``clickhouse_driver/streams/compressed.py``, ``CompressedBlockInputStream.read_block``)."""

from __future__ import annotations

import io

from clickhouse_driver.compression import get_decompressor_cls
from clickhouse_driver.reader import read_binary_uint128


def read_blocks(data: bytes) -> bytes:
    """Every block of ``data``, its checksum checked and its data decompressed, concatenated."""
    stream, out = io.BytesIO(data), []
    while stream.tell() < len(data):
        checksum = read_binary_uint128(stream)
        method = stream.read(1)[0]
        out.append(get_decompressor_cls(method)(stream).get_decompressed_data(method, checksum, 1))
    return b"".join(out)
