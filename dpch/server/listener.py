"""What the HTTP and the native-protocol listeners share: the address they bound, their open connections,
a background thread, and a graceful stop that ends idle connections (:mod:`.http`, :mod:`.native.server`)."""

from __future__ import annotations

import socket
import socketserver
import threading
from typing import Any


class Listener(socketserver.ThreadingMixIn, socketserver.TCPServer):
    """A threaded TCP server that knows its open connections (one thread each; a stop waits for them)."""

    daemon_threads = False
    block_on_close = True
    allow_reuse_address = True
    request_queue_size = 128  # BI tools open pools of connections at once
    #: open connections at once (None: no limit); :meth:`refuse` answers the one past it
    max_connections: int | None = None

    def __init__(self, address: tuple[str, int], handler: type[socketserver.BaseRequestHandler]) -> None:
        self._connections: set[socket.socket] = set()
        self._conn_lock = threading.Lock()
        self._stopped = False
        super().__init__(address, handler)

    @property
    def host(self) -> str:
        """The address bound."""
        host = self.server_address[0]
        return host.decode() if isinstance(host, bytes) else str(host)

    @property
    def port(self) -> int:
        """The port bound (the one the OS chose, for port 0)."""
        return int(self.server_address[1])

    def refuse(self, request: Any) -> None:
        """Tells a connection past :attr:`max_connections` why it is closed (the protocol's own words)."""

    def process_request(self, request: Any, client_address: Any) -> None:
        with self._conn_lock:
            full = self.max_connections is not None and len(self._connections) >= self.max_connections
            if not full:
                self._connections.add(request)
        if full:
            self.refuse(request)
            super().shutdown_request(request)
            return
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        with self._conn_lock:
            self._connections.discard(request)
        super().shutdown_request(request)

    def start(self, name: str = "dpch-serve") -> threading.Thread:
        """Serves in a background thread (tests, embedding); returns the thread."""
        thread = threading.Thread(target=self.serve_forever, kwargs={"poll_interval": 0.05}, name=name,
                                  daemon=True)
        thread.start()
        return thread

    def stop_listening(self) -> bool:
        """Stops accepting, ends idle connections (their readers see the end; writes still work) and joins
        the handler threads, so requests in flight finish. False if it was stopped before."""
        if self._stopped:
            return False
        self._stopped = True
        self.shutdown()
        with self._conn_lock:
            for conn in list(self._connections):
                try:
                    conn.shutdown(socket.SHUT_RD)
                except OSError:
                    pass
        self.server_close()  # joins the handler threads
        return True


__all__ = ["Listener"]
