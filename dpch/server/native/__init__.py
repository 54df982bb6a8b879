"""ClickHouse's native TCP protocol for ``dpch serve --tcp-port`` (issue 30).

:mod:`.wire` reads and writes varints and strings, :mod:`.protocol` the packets by revision, :mod:`.blocks`
re-frames ClickHouse's own Native output as Data blocks, :mod:`.compressed` carries them in ClickHouse's
compressed frames, :mod:`.connection` serves one client through the gateway, and :mod:`.server` is the
listener beside the HTTP one.
"""

from dpch.server.native.server import NativeServer, serve_native

__all__ = ["NativeServer", "serve_native"]
