"""ClickHouse's compressed HTTP format (``compress=1``/``decompress=1``, dpch/server/block_compression.py),
checked against an implementation used against real ClickHouse servers: clickhouse-driver 0.2's native
protocol compression (the same blocks: ``clickhouse_driver/compression/base.py`` and
``streams/compressed.py``), byte for byte where its codec is installed (LZ4), and read back by its reader.
The JDBC v2 driver reads the checksum as CityHash128's two 64-bit words, little-endian, the hash's first
word first (clickhouse-java ``client-v2/.../internal/ClickHouseLZ4InputStream.java``, commit 0ce58b01:
``real[0] == getInt64(header, 0)``), the order clickhouse-driver writes and is checked against here.
"""

from __future__ import annotations

import io
import os
import struct

import pytest
from clickhouse_cityhash.cityhash import CityHash128
from clickhouse_driver.compression.lz4 import Compressor
from clickhouse_driver.writer import write_binary_uint128

from dpch.server import block_compression as bc
from tests.server.driver_blocks import read_blocks

DATA = b"region\tn\na\t10\nb\t20\n" * 1000 + os.urandom(3000)


def _driver_block(data: bytes) -> bytes:
    """One block as clickhouse-driver writes it (CompressedBlockOutputStream.finalize, LZ4)."""
    compressor = Compressor()
    compressor.write(data)
    block = io.BytesIO()
    block.write(bytes([compressor.method_byte]))
    block.write(compressor.get_compressed_data(1))
    out = io.BytesIO()
    write_binary_uint128(CityHash128(block.getvalue()), out)
    return out.getvalue() + block.getvalue()


def test_an_lz4_block_is_byte_for_byte_clickhouse_drivers():
    assert bc.compress(DATA, bc.LZ4) == _driver_block(DATA)


def test_clickhouse_driver_reads_our_blocks():
    many = DATA * 60  # over 1 MiB: several blocks (the driver reads LZ4 and ZSTD blocks, not stored ones)
    packed = bc.compress(many, bc.LZ4)
    assert packed[16] == bc.LZ4 and len(packed) < len(many)
    assert read_blocks(packed) == many


@pytest.mark.parametrize("method", [bc.LZ4, bc.ZSTD, bc.NONE])
def test_round_trip_and_block_sizes(method):
    many = DATA * 60
    packed = bc.compress(many, method, block_size=1 << 20)
    assert bc.decompress(packed, limit=len(many)) == many
    # the first block's header: its method, and its sizes as ClickHouse writes them
    kind, stored, plain = struct.unpack_from("<BII", packed, 16)
    assert (kind, plain) == (method, 1 << 20) and stored == len(packed[25:25 + stored - 9]) + 9
    assert bc.compress(b"", method) == b"" and bc.decompress(b"", limit=0) == b""


def test_checksum_words_in_the_order_servers_write_them():
    """The hash's first word first: clickhouse-driver's order (``write_binary_uint128``), which real servers
    check; the swapped order (what this module first wrote) is a different 16 bytes (negative control)."""
    block = b"\x82" + struct.pack("<II", 9, 0)
    value = CityHash128(block)
    driver = io.BytesIO()
    write_binary_uint128(value, driver)
    assert bc.checksum(block) == driver.getvalue()
    swapped = (value & (2**64 - 1)).to_bytes(8, "little") + (value >> 64).to_bytes(8, "little")
    assert bc.checksum(block) != swapped


def test_bad_bodies_are_refused_with_clickhouses_codes():
    packed = bytearray(bc.compress(DATA, bc.LZ4))
    corrupted = bytes(packed[:40]) + bytes([packed[40] ^ 0xFF]) + bytes(packed[41:])
    with pytest.raises(bc.BlockFormatError) as info:
        bc.decompress(corrupted, limit=10**9)
    assert info.value.code == 40
    with pytest.raises(bc.BlockFormatError) as info:
        bc.decompress(bytes(packed[:-5]), limit=10**9)
    assert info.value.code == 271
    with pytest.raises(bc.BlockFormatError) as info:
        bc.decompress(bytes(packed), limit=len(DATA) - 1)
    assert info.value.code == 307
    unknown = b"\x42" + struct.pack("<II", 9 + 3, 3) + b"abc"
    with pytest.raises(bc.BlockFormatError) as info:
        bc.decompress(bc.checksum(unknown) + unknown, limit=100)
    assert info.value.code == 89
    # a block whose checksum is right but whose LZ4 data is not: refused in words, not a codec's traceback
    garbage = b"\x82" + struct.pack("<II", 9 + 4, 50) + b"\xff\xff\xff\xff"
    with pytest.raises(bc.BlockFormatError) as info:
        bc.decompress(bc.checksum(garbage) + garbage, limit=100)
    assert info.value.code == 271 and "corrupted" in str(info.value)
