"""The native-protocol listener: a threaded TCP server beside the HTTP one, over the same gateway.

:func:`serve_native` starts it next to a running :class:`~dpch.server.http.GatewayServer` and shares its
gateway, its query slots and its worker pool, so the concurrency limit holds over both protocols. Each
connection has its own thread (one slow client never delays another); :meth:`NativeServer.stop`
stops accepting, ends idle connections and lets queries in flight finish.
"""

from __future__ import annotations

import concurrent.futures
import socketserver
import threading
from typing import Any

from dpch.server.gateway import Gateway
from dpch.server.listener import Listener
from dpch.server.native import protocol
from dpch.server.native.connection import Connection, Limits

#: seconds a client may stay silent between packets (ClickHouse's receive_timeout default)
IDLE_TIMEOUT = 300.0
#: seconds a client may take to send the rest of a packet it started
PACKET_TIMEOUT = 30.0
#: open connections at once; more are answered TOO_MANY_SIMULTANEOUS_QUERIES and closed
MAX_CONNECTIONS = 1024


class NativeServer(Listener):
    """ClickHouse's native TCP protocol in front of a :class:`~dpch.server.gateway.Gateway`."""

    max_connections = MAX_CONNECTIONS

    def __init__(self, gateway: Gateway, address: tuple[str, int], *,
                 slots: threading.BoundedSemaphore | None = None,
                 pool: concurrent.futures.ThreadPoolExecutor | None = None) -> None:
        config = gateway.config
        self.gateway = gateway
        self._own_pool = pool is None
        workers = max(1, config.max_concurrent)
        self.limits = Limits(
            slots=slots or threading.BoundedSemaphore(workers),
            pool=pool or concurrent.futures.ThreadPoolExecutor(max_workers=workers, thread_name_prefix="dpch-native"),
            query_timeout=config.query_timeout or None, idle_timeout=IDLE_TIMEOUT,
            packet_timeout=PACKET_TIMEOUT, max_string=max(config.max_request_bytes, 1 << 16))
        super().__init__(address, _Handler)

    def refuse(self, request: Any) -> None:
        try:
            request.sendall(protocol.exception(202, "Too many simultaneous connections; try again later"))
        except OSError:
            pass

    def start(self, name: str = "dpch-native") -> threading.Thread:
        """Serves in a background thread; returns it."""
        return super().start(name)

    def stop(self) -> None:
        """Stops accepting, ends idle connections (their readers see the end), waits for the rest.
        The gateway is not closed: it belongs to whoever started this server."""
        if self.stop_listening() and self._own_pool:
            self.limits.pool.shutdown(wait=True)


class _Handler(socketserver.BaseRequestHandler):
    server: NativeServer

    def handle(self) -> None:
        Connection(self.request, self.client_address, self.server.gateway, self.server.limits).run()


def serve_native(http_server: Any, *, host: str | None = None, port: int) -> NativeServer:
    """Starts a native listener on ``host:port`` (0: a free port) beside ``http_server`` (a running
    :class:`~dpch.server.http.GatewayServer`), sharing its gateway, query slots and pool. Stop it
    before the HTTP server (which closes the gateway)."""
    server = NativeServer(http_server.gateway, (host or http_server.host, port),
                          slots=getattr(http_server, "slots", None), pool=getattr(http_server, "pool", None))
    server.start()
    return server


__all__ = ["IDLE_TIMEOUT", "MAX_CONNECTIONS", "PACKET_TIMEOUT", "NativeServer", "serve_native"]
