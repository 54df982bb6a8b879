"""One native-protocol connection: the handshake, then queries answered by the gateway until the client leaves.

Every query goes through :meth:`dpch.server.gateway.Gateway.execute`, as over HTTP: the same users,
analysts, settings (``dp_*`` and the harmless client settings; others refused), parameters, release
cache, metadata answers, ``dpch.budget``/``dpch.releases`` and errors (the same ClickHouse codes and
messages). The released rows come back in ClickHouse's Native format and are re-framed as Data
packets (:mod:`.blocks`): the header block first, then the data, then EndOfStream.

Errors never carry a traceback: a :class:`~dpch.server.errors.GatewayError` is sent with its code and
message, anything else as ``dpch: internal error (TypeName)``. A packet dpch cannot read is answered
with an Exception packet and the connection is closed (the stream cannot be resynchronised); a client
that goes silent inside a packet, or leaves, is disconnected.
"""

from __future__ import annotations

import concurrent.futures
import json
import logging
import select
import socket
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from dpch.errors import AuthenticationFailed, ConfigError, DpchError, GatewayBusy, GatewayTimeout, ParseError
from dpch.server import block_compression
from dpch.server.config import User
from dpch.server.errors import GatewayError
from dpch.server.formats import split_format
from dpch.server.gateway import Gateway, Result
from dpch.server.native import protocol
from dpch.server.native.blocks import EMPTY, Block, Column, read_block, row_binary_header, split_native
from dpch.server.native.compressed import CompressedSource, compress
from dpch.server.native.protocol import AUTH_MARKERS, Client, Query
from dpch.server.native.wire import ProtocolError, Reader, Truncated, string, varint
from dpch.store.cancel import CancelToken, QueryCancelled, cancellable

access_log = logging.getLogger("dpch.access")

#: how often a running query looks at its connection (a Cancel packet, or the client gone)
_POLL_S = 0.05
#: the result kinds that are releases: their header cannot be asked for a second time for free
_RELEASE_KINDS = ("release", "cache")


@dataclass
class Limits:
    """What bounds a connection: shared query slots and worker pool (the HTTP front's, when both run),
    the time a query may take, and how long a client may stay silent between and inside packets."""

    slots: threading.BoundedSemaphore
    pool: concurrent.futures.ThreadPoolExecutor
    query_timeout: float | None
    idle_timeout: float
    packet_timeout: float
    max_string: int


class Disconnect(Exception):
    """The connection ends here (after whatever was already sent)."""


class Connection:
    """Serves one accepted socket; :meth:`run` returns when the connection is over."""

    def __init__(self, sock: socket.socket, address: Any, gateway: Gateway, limits: Limits) -> None:
        self.sock = sock
        self.client = str(address[0]) if isinstance(address, tuple) and address else str(address)
        self.gateway = gateway
        self.limits = limits
        self.reader = Reader(self._recv, max_string=limits.max_string)
        self.revision = 0
        self.user: User | None = None
        self.database: str | None = None

    def _recv(self, n: int) -> bytes:
        try:
            return self.sock.recv(n)
        except (TimeoutError, ConnectionError, OSError):
            return b""  # a silent or vanished client: the read ends as a truncated packet

    def _send(self, *parts: bytes) -> None:
        try:
            self.sock.sendall(b"".join(parts))
        except OSError:
            raise Disconnect from None

    # -- the connection ----------------------------------------------------------------------------

    def run(self) -> None:
        """Handshake, then packets until the client leaves or sends what dpch cannot read."""
        try:
            self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self._handshake()
            while True:
                self.sock.settimeout(self.limits.idle_timeout)
                packet = self.reader.varint()
                self.sock.settimeout(self.limits.packet_timeout)
                self._packet(packet)
        except Truncated:
            pass  # the client left (or went silent): nothing to answer
        except ProtocolError as exc:
            self._try_send(protocol.exception(exc.code, f"dpch: {exc.message}"))
        except Disconnect:
            pass
        except Exception as exc:  # never a traceback to the client
            self._try_send(protocol.exception(1002, f"dpch: internal error ({type(exc).__name__})"))

    def _try_send(self, data: bytes) -> None:
        try:
            self._send(data)
        except Disconnect:
            pass

    def _handshake(self) -> None:
        self.sock.settimeout(self.limits.packet_timeout)
        hello = protocol.read_hello(self.reader)
        self.revision = protocol.negotiated(hello)
        try:
            if hello.user in AUTH_MARKERS:
                raise GatewayError(516, AuthenticationFailed.kind, "dpch: this sign-in method is not supported")
            self.user = self.gateway.authenticate(hello.user, hello.password)
            self.database = hello.database or None
            self.gateway.engine(self.database)  # an unknown database is refused now, as ClickHouse does
        except GatewayError as exc:
            self._log({"kind": "hello", "user": hello.user, "error": exc.code})
            self._send(protocol.exception(exc.code, exc.message))
            raise Disconnect from None
        self._send(protocol.server_hello(self.revision, version=self.gateway.version, timezone=self.gateway.timezone,
                                         display_name=self.gateway.config.display_name))
        protocol.read_addendum(self.reader, self.revision)

    def _packet(self, packet: int) -> None:
        if packet == Client.PING:
            self._send(protocol.pong())
        elif packet == Client.QUERY:
            self._query(protocol.read_query(self.reader, self.revision))
        elif packet == Client.CANCEL:
            pass  # nothing is running: a late Cancel of a query already answered
        elif packet == Client.DATA:
            raise ProtocolError("Unexpected packet from client: Data outside a query")
        elif packet == Client.HELLO:
            raise ProtocolError("Unexpected packet from client: a second Hello")
        else:
            raise ProtocolError(f"Unknown packet {packet} from client")

    # -- a query -------------------------------------------------------------------------------------

    def _query(self, query: Query) -> None:
        started = time.perf_counter()
        log: dict[str, Any] = {"kind": "query", "query_id": query.query_id or str(uuid.uuid4()),
                               "sql": query.text[:300]}
        self._external_tables(query)
        assert self.user is not None
        user = self.user
        log["user"], log["analyst"] = user.name, user.analyst
        try:
            method = query.settings.get("network_compression_method")
            if query.compression and (method or "lz4").lower() not in block_compression.METHODS:
                # refused before the query runs (and is charged)
                raise GatewayError(89, ConfigError.kind, f"dpch: unknown compression method {method}")
            result = self._execute(user, query)
            blocks = self._blocks(user, query, result)
            log["kind"] = result.kind
            if result.cost is not None:
                log["epsilon"], log["delta"] = result.cost.epsilon, result.cost.delta
        except GatewayError as exc:
            log["error"] = exc.code
            self._send(protocol.exception(exc.code, exc.message))
            self._log(log, started)
            return
        except Disconnect:
            raise
        except Exception as exc:  # never a traceback or unvetted text to the client
            log["error"], log["exception"] = 1002, type(exc).__name__
            self._send(protocol.exception(1002, f"dpch: internal error ({type(exc).__name__})"))
            self._log(log, started)
            return
        header = blocks[0].header() if blocks else EMPTY
        packets = [self._data(header, query, method)]
        size = 0
        for block in blocks:
            if block.rows:
                packet = self._data(block, query, method)
                size += len(packet)
                packets.append(packet)
        rows = sum(b.rows for b in blocks)
        packets += [protocol.profile_info(rows, len(packets) - 1, size), protocol.progress(self.revision),
                    protocol.end_of_stream()]
        self._send(*packets)
        log["rows"] = rows
        self._log(log, started)

    def _external_tables(self, query: Query) -> None:
        """The client's external tables after its Query: Data packets up to an empty block. dpch takes
        none (a table with rows is refused, and the connection closed: its bytes cannot be skipped)."""
        while True:
            self.sock.settimeout(self.limits.packet_timeout)
            packet = self.reader.varint()
            if packet != Client.DATA:
                raise ProtocolError(f"Unexpected packet from client: expected Data (external tables), got {packet}")
            if self.revision >= protocol.REVISION_WITH_TEMPORARY_TABLES:
                self.reader.bytes_()  # the table's name
            if query.compression:
                block = read_block(Reader(CompressedSource(self.reader, self.limits.max_string).recv,
                                          max_string=self.limits.max_string), self.revision)
            else:
                block = read_block(self.reader, self.revision)
            if not block.columns and not block.rows:
                return

    def _execute(self, user: User, query: Query) -> Result:
        text, _format = split_format(query.text)  # the client formats the blocks itself
        if not text.strip():
            raise GatewayError(62, ParseError.kind, "Empty query")
        params = {**query.settings, **{f"param_{k}": v for k, v in query.parameters.items()}}
        database = self.database
        return self._run(lambda: self.gateway.execute(user, text, database=database, params=params,
                                                      default_format="Native"))

    def _blocks(self, user: User, query: Query, result: Result) -> list[Block]:
        try:
            blocks = split_native(result.body)
        except ValueError:
            raise GatewayError(1002, DpchError.kind, "dpch: internal error (the result cannot be framed)") from None
        if blocks:
            return blocks
        if result.kind in _RELEASE_KINDS:  # no rows: the header from the release's columns (never asked again)
            return [Block(tuple(Column(name, type_) for name, type_ in result.header), 0)]
        # metadata and ledger views are free: ask again for their columns, which Native omits for no rows
        text, _format = split_format(query.text)
        params = {**query.settings, **{f"param_{k}": v for k, v in query.parameters.items()}}
        again = self._run(lambda: self.gateway.execute(user, text, database=self.database, params=params,
                                                       default_format="RowBinaryWithNamesAndTypes"))
        try:
            return [row_binary_header(again.body)]
        except ProtocolError:
            return []

    def _data(self, block: Block, query: Query, method: str | None) -> bytes:
        body = block.encode(self.revision)
        if query.compression:
            body = compress(body, method)
        table = string("") if self.revision >= protocol.REVISION_WITH_TEMPORARY_TABLES else b""
        return varint(protocol.Server.DATA) + table + body

    # -- running a query: bounded, cancellable, watched ------------------------------------------------

    def _run(self, work: Callable[[], Result]) -> Result:
        """``work`` in the shared pool under a :class:`CancelToken`, within the query time limit. While it
        runs, the connection is watched: a Cancel packet, or the client leaving, cancels it (a query
        not yet charged stops before its charge; one already charged runs to completion)."""
        limits = self.limits
        timeout = limits.query_timeout
        if not limits.slots.acquire(timeout=timeout or 30):
            raise GatewayError(202, GatewayBusy.kind, "Too many simultaneous queries; try again later")
        token = CancelToken()
        future: concurrent.futures.Future[Result] | None = None

        def cancellable_work() -> Result:
            with cancellable(token):
                return work()

        try:
            # a Cancel that came with the query (sent before the client read anything) stops it before it starts
            self._watch(token)
            future = limits.pool.submit(cancellable_work)
            deadline = None if timeout is None else time.monotonic() + timeout
            while True:
                wait = _POLL_S if deadline is None else min(_POLL_S, max(0.0, deadline - time.monotonic()))
                done, _ = concurrent.futures.wait([future], timeout=wait)
                if done:
                    return future.result()
                if deadline is not None and time.monotonic() >= deadline:
                    what = ("it was stopped before its charge: nothing was spent" if token.cancel() else
                            "it had already been charged, and runs to completion")
                    raise GatewayError(159, GatewayTimeout.kind,
                                       f"Timeout exceeded: the query took longer than {timeout:g} s; {what}")
                self._watch(token)
        finally:
            if future is not None and not future.done():
                future.add_done_callback(lambda _f: limits.slots.release())
            else:
                limits.slots.release()

    def _watch(self, token: CancelToken) -> None:
        """Looks at the connection while a query runs: a Ping is answered; a Cancel packet or the client gone
        cancels the query; any other packet ends the connection."""
        if not self.reader.pending():
            try:
                readable, _, _ = select.select([self.sock], [], [], 0)
            except (OSError, ValueError):
                readable = [self.sock]
            if not readable:
                return
        try:
            self.sock.settimeout(self.limits.packet_timeout)
            packet = self.reader.varint()
        except ProtocolError:
            token.cancel()  # the client left: nobody reads the answer
            raise Disconnect from None
        if packet == Client.PING:  # answered while the query runs, as ClickHouse does
            self._send(protocol.pong())
            return
        token.cancel()
        if packet != Client.CANCEL:
            raise ProtocolError(f"Unexpected packet {packet} from client while a query runs")
        raise GatewayError(394, QueryCancelled.kind, "dpch: the query was cancelled by the client")

    def _log(self, log: dict[str, Any], started: float | None = None) -> None:
        log.update(client=self.client, protocol="native")
        if started is not None:
            log["ms"] = round((time.perf_counter() - started) * 1000, 2)
        access_log.info(json.dumps(log, default=str))


__all__ = ["Connection", "Disconnect", "Limits"]
