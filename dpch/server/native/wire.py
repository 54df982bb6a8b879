"""The native protocol's primitive encodings: LEB128 varints, length-prefixed strings, fixed-width integers.

:class:`Reader` pulls exact byte counts from any source (a socket's ``recv``, or bytes in tests and the
fuzzer) and refuses what no client sends: a varint longer than 64 bits, a string longer than the limit,
input that ends inside a value. Every such refusal is a :class:`ProtocolError`, which the connection
answers with an Exception packet or by closing; nothing here raises anything else on bad input.
"""

from __future__ import annotations

import struct
from collections.abc import Callable

#: the longest varint ClickHouse writes (a UInt64 takes at most 10 groups of 7 bits)
MAX_VARINT_BYTES = 10
_U64 = (1 << 64) - 1


class ProtocolError(Exception):
    """Input that is not the native protocol; ``code`` is ClickHouse's error code for it."""

    def __init__(self, message: str, code: int = 101) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class Truncated(ProtocolError):
    """The input ended inside a packet (the client closed the connection, or sent too little)."""

    def __init__(self, message: str = "the connection ended inside a packet") -> None:
        super().__init__(message, 33)  # CANNOT_READ_ALL_DATA


class Reader:
    """Reads the protocol's values from ``recv`` (a function returning up to ``n`` bytes, ``b''`` at the end).

    ``max_string`` bounds every length-prefixed string (a query text, a setting's value): a longer
    length is refused before anything is allocated for it."""

    def __init__(self, recv: Callable[[int], bytes], *, max_string: int = 1 << 20) -> None:
        self._recv = recv
        self._buffer = bytearray()
        self._at = 0
        self.max_string = max_string

    def read(self, n: int) -> bytes:
        """Exactly ``n`` bytes; :class:`Truncated` if the input ends first."""
        if n < 0:
            raise ProtocolError(f"negative length {n}")
        while len(self._buffer) - self._at < n:
            if self._at:
                del self._buffer[:self._at]
                self._at = 0
            chunk = self._recv(max(n - len(self._buffer), 65536))
            if not chunk:
                raise Truncated()
            self._buffer += chunk
        data = bytes(self._buffer[self._at:self._at + n])
        self._at += n
        return data

    def pending(self) -> bool:
        """Whether bytes already read from the source wait in the buffer."""
        return len(self._buffer) > self._at

    def varint(self) -> int:
        """An unsigned LEB128 value of at most 64 bits."""
        value = shift = 0
        for _ in range(MAX_VARINT_BYTES):
            byte = self.read(1)[0]
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                if value > _U64:
                    raise ProtocolError("a varint is larger than 64 bits")
                return value
            shift += 7
        raise ProtocolError("a varint is longer than 10 bytes")

    def uint8(self) -> int:
        return self.read(1)[0]

    def int32(self) -> int:
        return int(struct.unpack("<i", self.read(4))[0])

    def uint64(self) -> int:
        return int(struct.unpack("<Q", self.read(8))[0])

    def bytes_(self) -> bytes:
        """A varint length and that many bytes (at most ``max_string``)."""
        n = self.varint()
        if n > self.max_string:
            raise ProtocolError(f"a string of {n} bytes is longer than the limit of {self.max_string}", 307)
        return self.read(n)

    def string(self) -> str:
        """:meth:`bytes_` as UTF-8 (invalid sequences replaced: names and SQL text are compared as text)."""
        return self.bytes_().decode("utf-8", errors="replace")


def varint(value: int) -> bytes:
    """``value`` (0 ≤ value < 2⁶⁴) as unsigned LEB128."""
    if not 0 <= value <= _U64:
        raise ValueError(f"varint out of range: {value}")
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def string(value: str | bytes) -> bytes:
    """A length-prefixed string (UTF-8 for ``str``)."""
    data = value.encode() if isinstance(value, str) else value
    return varint(len(data)) + data


def uint8(value: int) -> bytes:
    return struct.pack("<B", value)


def int32(value: int) -> bytes:
    return struct.pack("<i", value)


def uint64(value: int) -> bytes:
    return struct.pack("<Q", value)


__all__ = ["MAX_VARINT_BYTES", "ProtocolError", "Reader", "Truncated", "int32", "string", "uint8", "uint64",
           "varint"]
