"""``dpch serve``: the HTTP front speaking the parts of ClickHouse's HTTP interface clients use.

- ``GET/POST /`` with the query in the ``query`` URL parameter and/or the body, ``database``,
  ``default_format``, a trailing ``FORMAT`` clause, ``query_id``, settings as URL parameters
  (``dp_*`` options, ``param_*`` bindings, harmless client settings; anything else refused);
- HTTP basic auth, ``X-ClickHouse-User``/``X-ClickHouse-Key`` headers, or ``user``/``password``;
- responses with ``X-ClickHouse-Query-Id/-Format/-Timezone/-Server-Display-Name/-Summary`` and
  ``X-Dpch-*`` (cost, budget left, cache), compressed (gzip, deflate, zstd, lz4, br) when the
  client asks; errors as ClickHouse writes them, with ``X-ClickHouse-Exception-Code``;
- ``/ping``, and ``/dpch/v1/{release,refine,explain,budget,tables}`` (JSON, :mod:`.wire`) for dpch's
  own clients: a release, an explanation with its cost and budget check as data, and errors as
  ``{"error": {"kind", "message", "hint", "code", "name", ...}}`` with the kind of
  :data:`dpch.errors.KINDS` (every error also carries ``X-Dpch-Error-Kind``).

Threaded, with bounded request size, execution time and concurrency; graceful shutdown; one
JSON access-log line per request.
"""

from __future__ import annotations

import base64
import concurrent.futures
import json
import logging
import select
import socket
import ssl
import threading
import time
import uuid
import zlib
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from sqlglot.errors import SqlglotError

from dpch.errors import AuthenticationFailed, ConfigError, DpchError, GatewayBusy, GatewayTimeout, ParseError
from dpch.server import block_compression
from dpch.server.config import ServerConfig, User
from dpch.server.console import Console, Request, is_console_path
from dpch.server.errors import GatewayError, from_dpch, syntax_error
from dpch.server.formats import content_type
from dpch.server.gateway import Gateway, Result, check_config, check_repeated_settings
from dpch.server.listener import Listener
from dpch.store.cancel import CancelToken, QueryCancelled, cancellable

access_log = logging.getLogger("dpch.access")


def _codecs() -> dict[str, Any]:
    codecs: dict[str, Any] = {
        "gzip": (lambda b: zlib.compress(b, 6, wbits=31), lambda b: zlib.decompress(b, wbits=47)),
        "deflate": (lambda b: zlib.compress(b, 6), zlib.decompress),
    }
    try:
        from backports import zstd  # type: ignore[import-not-found, unused-ignore]

        codecs["zstd"] = (zstd.compress, zstd.decompress)
    except ImportError:
        try:
            import zstandard  # type: ignore[import-not-found, unused-ignore]

            codecs["zstd"] = (zstandard.ZstdCompressor().compress, zstandard.ZstdDecompressor().decompress)
        except ImportError:
            pass
    try:
        import lz4.frame  # type: ignore[import-untyped, unused-ignore]

        codecs["lz4"] = (lz4.frame.compress, lz4.frame.decompress)
    except ImportError:
        pass
    try:
        import brotli  # type: ignore[import-not-found, unused-ignore]

        codecs["br"] = (brotli.compress, brotli.decompress)
    except ImportError:
        pass
    return codecs


CODECS = _codecs()


#: longest chunk-size or trailer line read from a chunked request body
_CHUNK_LINE_MAX = 4096
#: how often a waiting request looks whether its client is still connected (when the client asked)
_CLIENT_POLL_S = 0.1


class GatewayServer(Listener, HTTPServer):
    """A threaded HTTP server around a :class:`Gateway`; :meth:`stop` shuts down gracefully."""

    def __init__(self, gateway: Gateway, address: tuple[str, int]) -> None:
        self.gateway = gateway
        self.config: ServerConfig = gateway.config
        self.pool = concurrent.futures.ThreadPoolExecutor(max_workers=max(1, self.config.max_concurrent),
                                                          thread_name_prefix="dpch-query")
        self.slots = threading.BoundedSemaphore(max(1, self.config.max_concurrent))
        #: the web console (/play, /admin, /console/...): dpch/server/console
        self.console = Console(gateway)
        super().__init__(address, Handler)

    def stop(self) -> None:
        """Stops accepting, lets requests in flight finish, closes idle connections, then the store."""
        if self.stop_listening():
            self.pool.shutdown(wait=True)
            self.gateway.close()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "dpch"
    server: GatewayServer

    def setup(self) -> None:
        super().setup()
        self.connection.settimeout(self.server.config.keep_alive_timeout or None)
        # small responses: without this, Nagle + the client's delayed ACK add ~40 ms per request
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        pass  # the structured access log replaces http.server's

    def do_GET(self) -> None:  # noqa: N802 - stdlib names
        self._handle()

    def do_POST(self) -> None:  # noqa: N802
        self._handle()

    def do_HEAD(self) -> None:  # noqa: N802
        self._send(200, b"", {"Content-Type": "text/plain"})

    # -- request handling -----------------------------------------------------------------------

    def _handle(self) -> None:
        started = time.perf_counter()
        parts = urlsplit(self.path)
        pairs = parse_qsl(parts.query, keep_blank_values=True)
        params = dict(pairs)
        query_id = params.get("query_id") or str(uuid.uuid4())
        log: dict[str, Any] = {"client": self.client_address[0], "method": self.command, "path": parts.path,
                               "query_id": query_id}
        gateway = self.server.gateway
        headers = {
            "X-ClickHouse-Query-Id": query_id,
            "X-ClickHouse-Timezone": gateway.timezone,
            "X-ClickHouse-Server-Display-Name": self.server.config.display_name,
        }
        try:
            if parts.path in ("/ping", "/replicas_status"):
                status, body, extra = 200, b"Ok.\n", {"Content-Type": "text/html; charset=UTF-8"}
                log["kind"] = "ping"
            # -- the web console: its own sign-in (cookie + CSRF), headers and errors (dpch/server/console)
            elif is_console_path(parts.path):
                log["kind"] = "console"
                request = Request(self.command, parts.path, params, self.headers, self._read_body(),
                                  secure=isinstance(self.connection, ssl.SSLSocket))
                status, body, extra = self.server.console.respond(request, self._run, log)
            # -- end of the web console
            else:
                body_bytes = self._read_body(params)
                user = self._authenticate(params)
                log["user"], log["analyst"] = user.name, user.analyst
                if parts.path.startswith("/dpch/"):
                    status, body, extra = self._dpch(parts.path, user, params, body_bytes, log)
                elif parts.path in ("/", "/query", ""):
                    check_repeated_settings(name for name, _ in pairs)  # the dict kept only the last
                    status, body, extra = self._query(user, params, body_bytes, log)
                else:
                    raise GatewayError(36, ConfigError.kind, f"There is no handle {parts.path}")
        except Exception as exc:  # never a traceback or unvetted text to the client
            error = exc if isinstance(exc, GatewayError) else GatewayError(
                1002, DpchError.kind, f"dpch: internal error ({type(exc).__name__})")
            status = error.status
            # dpch's own clients read the error's kind from JSON; ClickHouse clients read ClickHouse's text
            if parts.path.startswith("/dpch/"):
                body, content = error.as_json(), "application/json; charset=UTF-8"
            else:
                body, content = error.body(gateway.version), "text/plain; charset=UTF-8"
            extra = {"Content-Type": content, "X-ClickHouse-Exception-Code": str(error.code),
                     "X-Dpch-Error-Kind": error.kind}
            log["error"] = error.code
            if error.code == 516:
                extra["WWW-Authenticate"] = 'Basic realm="dpch"'
            if error is not exc:
                log["exception"] = type(exc).__name__
        headers.update(extra)
        body = self._compress(body, status, params, headers)
        self._send(status, body, headers)
        log.update(status=status, bytes=len(body), ms=round((time.perf_counter() - started) * 1000, 2))
        access_log.info(json.dumps(log, default=str))

    def _read_body(self, params: dict[str, str] | None = None) -> bytes:
        """The request's body, decoded from its ``Content-Encoding`` and, with ``decompress=1`` in ``params``,
        from ClickHouse's compressed blocks (:mod:`.block_compression`), within ``max_request_bytes``."""
        if self.command != "POST":
            return b""
        limit = self.server.config.max_request_bytes
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            data = self._read_chunked(limit)  # the official Node client always sends chunked bodies
        else:
            length = self._content_length()
            if length > limit:
                self.close_connection = True
                raise GatewayError(
                    307, ConfigError.kind, f"Request body of {length} bytes is larger than the limit of {limit}")
            data = self.rfile.read(length) if length else b""
        encoding = (self.headers.get("Content-Encoding") or "").strip().lower()
        if encoding and encoding != "identity":
            codec = CODECS.get(encoding)
            if codec is None:
                raise GatewayError(36, ConfigError.kind, f"Unknown Content-Encoding {encoding}")
            try:
                data = codec[1](data)
            except Exception:
                raise GatewayError(36, ConfigError.kind, f"Cannot decompress the {encoding} request body") from None
            if len(data) > limit:
                raise GatewayError(
                    307, ConfigError.kind, f"Decompressed request body is larger than the limit of {limit}")
        if params is not None and params.get("decompress") == "1" and data:
            try:
                data = block_compression.decompress(data, limit)
            except block_compression.BlockFormatError as exc:
                raise GatewayError(exc.code, ConfigError.kind, str(exc)) from None
        return data

    def _content_length(self) -> int:
        """The body's length from ``Content-Length``: digits only (RFC 9110 §8.6), the same value if the
        header is repeated. Anything else is answered at once (400) and the connection closed, since
        the body's end is unknown: ``-1`` used to make ``rfile.read(-1)`` wait for the client to
        close, until the keep-alive timeout, and then answer 500."""
        values = {v.strip() for v in self.headers.get_all("Content-Length") or []}
        if not values:
            return 0
        if len(values) != 1:
            self.close_connection = True
            raise GatewayError(36, ConfigError.kind, "Content-Length is given twice with different values")
        text = values.pop()
        if not text:  # an empty header was read as 0 before; no client is known to send one
            return 0
        if not (text.isascii() and text.isdigit()):  # int() would take '-1', '+5' and '1_000'
            self.close_connection = True
            raise GatewayError(36, ConfigError.kind,
                               f"Content-Length must be a whole number of bytes, got {text[:40]!r}")
        return int(text)

    def _read_chunked(self, limit: int) -> bytes:
        """A ``Transfer-Encoding: chunked`` body (RFC 9112 §7.1), read to its end so that the next
        request on a keep-alive connection starts where it should; over ``limit`` bytes or malformed,
        the connection is closed after the error (the rest of the body is never read)."""
        data = bytearray()
        while True:
            line = self.rfile.readline(_CHUNK_LINE_MAX)
            try:
                size = int(line.split(b";", 1)[0].strip(), 16)
            except ValueError:
                size = -1
            if size < 0 or not line.endswith(b"\n"):
                self.close_connection = True
                raise GatewayError(36, ConfigError.kind, "Malformed chunked request body")
            if size == 0:
                break
            if len(data) + size > limit:
                self.close_connection = True
                raise GatewayError(307, ConfigError.kind, f"Request body is larger than the limit of {limit} bytes")
            chunk = self.rfile.read(size)
            if len(chunk) != size or self.rfile.readline(_CHUNK_LINE_MAX) not in (b"\r\n", b"\n"):
                self.close_connection = True
                raise GatewayError(36, ConfigError.kind, "Malformed chunked request body")
            data += chunk
        while True:  # trailer fields, up to the empty line that ends the message
            line = self.rfile.readline(_CHUNK_LINE_MAX)
            if line in (b"\r\n", b"\n", b""):
                return bytes(data)

    def _authenticate(self, params: dict[str, str]) -> User:
        user = self.headers.get("X-ClickHouse-User")
        password = self.headers.get("X-ClickHouse-Key")
        auth = self.headers.get("Authorization") or ""
        if user is None and auth.lower().startswith("basic "):
            try:
                user, _, password = base64.b64decode(auth[6:].strip()).decode().partition(":")
            except (ValueError, UnicodeDecodeError):
                raise GatewayError(
                    516, AuthenticationFailed.kind, "Authorization header is not valid basic auth") from None
        if user is None:
            user, password = params.get("user"), params.get("password", password)
        return self.server.gateway.authenticate(user, password)

    def _run(self, work: Any, *, watch_client: bool = False) -> Any:
        """Runs ``work`` with a bounded number of concurrent queries and a time limit.

        The work runs under a :class:`CancelToken`. When the time limit answers the client first, the
        token is cancelled: a query not yet charged stops at its next check (between planning steps,
        at the latest right before its ledger row, :mod:`dpch.store.cancel`), so no work for an
        answered request runs on to a charge. One already charged runs to completion (its charge is
        durable: budget may be lost, never privacy). With ``watch_client`` (the client's
        ``cancel_http_readonly_queries_on_client_close = 1``, as ClickHouse reads it) the same happens
        when the client closes its connection while it waits."""
        timeout = self.server.config.query_timeout or None
        if not self.server.slots.acquire(timeout=timeout or 30):
            raise GatewayError(202, GatewayBusy.kind, "Too many simultaneous queries; try again later")
        future = None
        token = CancelToken()

        def cancellable_work() -> Any:
            with cancellable(token):
                return work()

        try:
            future = self.server.pool.submit(cancellable_work)
            deadline = None if timeout is None else time.monotonic() + timeout
            while True:
                wait = _CLIENT_POLL_S if watch_client else None
                if deadline is not None:
                    left = max(0.0, deadline - time.monotonic())
                    wait = left if wait is None else min(wait, left)
                done, _ = concurrent.futures.wait([future], timeout=wait)
                if done:
                    return future.result()
                if deadline is not None and time.monotonic() >= deadline:
                    raise concurrent.futures.TimeoutError
                if watch_client and self._client_gone():
                    token.cancel()  # before its charge: stops there; after it: the charge stands
                    self.close_connection = True
                    raise GatewayError(394, QueryCancelled.kind,
                                       "The client closed the connection: the query was cancelled")
        except concurrent.futures.TimeoutError:
            what = ("it was stopped before its charge: nothing was spent" if token.cancel() else
                    "it had already been charged, and runs to completion")
            raise GatewayError(159, GatewayTimeout.kind,
                               f"Timeout exceeded: the query took longer than {timeout:g} s; {what}") from None
        finally:
            if future is not None and not future.done():
                future.add_done_callback(lambda _f: self.server.slots.release())
            else:
                self.server.slots.release()

    def _client_gone(self) -> bool:
        """Whether the client closed its connection (end of file pending on the socket). Only what the
        kernel already holds is looked at (no blocking read); bytes of a next request mean it is still
        there. TLS connections are not checked: their bytes cannot be peeked at."""
        conn = self.connection
        if isinstance(conn, ssl.SSLSocket):
            return False
        try:
            readable, _, _ = select.select([conn], [], [], 0)
            return bool(readable) and conn.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
        except (BlockingIOError, InterruptedError):
            return False
        except OSError:  # reset by the peer
            return True

    def _query(self, user: User, params: dict[str, str], body: bytes,
               log: dict[str, Any]) -> tuple[int, bytes, dict[str, str]]:
        parts = [p for p in (params.get("query", ""), body.decode("utf-8", errors="replace")) if p.strip()]
        sql = "\n".join(parts)
        if not sql.strip():
            raise GatewayError(62, ParseError.kind, "Empty query")
        log["sql"] = sql[:300]
        gateway = self.server.gateway
        result: Result = self._run(lambda: gateway.execute(
            user, sql, database=params.get("database") or self.headers.get("X-ClickHouse-Database"),
            params=params, default_format=params.get("default_format") or self.headers.get("X-ClickHouse-Format"),
        ), watch_client=params.get("cancel_http_readonly_queries_on_client_close") == "1")
        log["kind"] = result.kind
        if result.cost is not None:
            log["epsilon"], log["delta"] = result.cost.epsilon, result.cost.delta
        rows = max(result.rows, 0)
        summary = {"read_rows": "0", "read_bytes": "0", "written_rows": "0", "written_bytes": "0",
                   "total_rows_to_read": "0", "result_rows": str(rows), "result_bytes": str(len(result.body)),
                   "elapsed_ns": str(int(1e9 * 0))}
        headers = {"Content-Type": content_type(result.fmt), "X-ClickHouse-Format": result.fmt,
                   "X-ClickHouse-Summary": json.dumps(summary, separators=(",", ":")), **result.headers}
        return 200, result.body, headers

    def _dpch(self, path: str, user: User, params: dict[str, str], body: bytes,
              log: dict[str, Any]) -> tuple[int, bytes, dict[str, str]]:
        gateway = self.server.gateway
        request = dpch_request(path, body)
        database = request.get("database") or params.get("database")
        options = request.get("options") or {}
        log["kind"] = "dpch:" + path.rsplit("/", 1)[-1]

        def work() -> Any:
            try:
                if path == "/dpch/v1/release":
                    log["sql"] = str(request.get("sql", ""))[:300]
                    wire = gateway.release_wire(user, str(request.get("sql", "")), database=database,
                                                options=options)
                    log["epsilon"], log["delta"] = wire["cost"]["epsilon"], wire["cost"]["delta"]
                    return wire
                if path == "/dpch/v1/refine":
                    wire = gateway.refine_wire(user, request, database=database)
                    log["epsilon"], log["delta"] = wire["cost"]["epsilon"], wire["cost"]["delta"]
                    return wire
                session = gateway.session(user, database)
                if path == "/dpch/v1/explain":
                    try:
                        return session.explain(str(request.get("sql", "")), **options).as_dict()
                    except SqlglotError:
                        raise syntax_error(str(request.get("sql", ""))) from None
                if path == "/dpch/v1/budget":
                    status = session.accountant.status(recent=request.get("recent", 10))
                    data = status.as_dict()
                    return {"status": data, "recent": data.get("recent", [])}
                if path == "/dpch/v1/tables":
                    return {"database": session.engine.database, "tables": gateway.table_policies(user, database),
                            "server": gateway.config.display_name, "version": gateway.version}
                raise GatewayError(36, ConfigError.kind, f"There is no handle {path}")
            except DpchError as exc:
                raise from_dpch(exc) from None

        data = self._run(work)
        return 200, json.dumps(data, default=str).encode(), {"Content-Type": "application/json; charset=UTF-8"}

    # -- response ---------------------------------------------------------------------------------

    def _compress(self, body: bytes, status: int, params: dict[str, str], headers: dict[str, str]) -> bytes:
        """``body`` in ClickHouse's compressed blocks with ``compress=1`` (errors too, as ClickHouse writes them
        into the compressed stream; not a refused sign-in, which it answers before), then in the HTTP
        ``Content-Encoding`` the client accepts with ``enable_http_compression=1``."""
        if body and params.get("compress") == "1" and status not in (401, 403):
            method = block_compression.METHODS.get((params.get("network_compression_method") or "lz4").lower(),
                                                   block_compression.LZ4)
            body = block_compression.compress(body, method)
        if not body or params.get("enable_http_compression") != "1":
            return body
        accepted = [a.split(";")[0].strip().lower() for a in (self.headers.get("Accept-Encoding") or "").split(",")]
        for name in accepted:
            codec = CODECS.get(name)
            if codec is not None:
                headers["Content-Encoding"] = name
                return codec[0](body)
        return body

    def _send(self, status: int, body: bytes, headers: dict[str, str]) -> None:
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        if self.close_connection:
            self.send_header("Connection", "close")
        else:
            self.send_header("Keep-Alive", f"timeout={int(self.server.config.keep_alive_timeout or 10)}")
        try:
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):  # the client left before its answer: nothing to do
            self.close_connection = True


#: the fields a ``/dpch/v1/*`` request body may carry, and the JSON types each accepts
_REQUEST_FIELDS: dict[str, tuple[tuple[type, ...], str]] = {
    "sql": ((str,), "a string"),
    "database": ((str,), "a string"),
    "options": ((dict,), "an object of dp options"),
    "recent": ((int,), "an integer"),
    "release_id": ((str,), "a string"),
    "accuracy": ((int, float), "a number"),
    "relative_error": ((int, float), "a number"),
    "max_epsilon": ((int, float), "a number"),
}
#: the most ledger rows one budget request lists
MAX_RECENT = 1000
#: the types a dp option's value may have (the names are checked by the session, which knows them)
_OPTION_TYPES = (str, int, float, bool)


def dpch_request(path: str, body: bytes) -> dict[str, Any]:
    """The JSON body of a ``/dpch/v1/*`` request, checked: a malformed body or a field of the
    wrong type is the client's error (400 BAD_ARGUMENTS naming the field), never a 500."""
    try:
        request = json.loads(body or b"{}")
    except ValueError:  # includes bodies that are not UTF-8
        raise GatewayError(36, ConfigError.kind,
                           f"dpch: the body of {path} must be a JSON object, e.g. {{\"sql\": \"SELECT ...\"}}; "
                           "it is not valid JSON") from None
    if not isinstance(request, dict):
        raise GatewayError(
            36, ConfigError.kind, f"dpch: the body of {path} must be a JSON object, not a JSON {_json_kind(request)}")
    for name, value in request.items():
        spec = _REQUEST_FIELDS.get(name)
        if spec is None:
            raise GatewayError(36, ConfigError.kind, f"dpch: unknown field {name!r} in the body of {path} "
                                                     f"(known: {', '.join(sorted(_REQUEST_FIELDS))})")
        kinds, wanted = spec
        if value is not None and (not isinstance(value, kinds) or isinstance(value, bool)):
            raise GatewayError(
                36, ConfigError.kind, f"dpch: field {name!r} must be {wanted}, not a JSON {_json_kind(value)}")
    recent = request.get("recent")
    if recent is not None and not 0 <= recent <= MAX_RECENT:
        raise GatewayError(36, ConfigError.kind, f"dpch: field 'recent' must be between 0 and {MAX_RECENT}")
    for name, value in (request.get("options") or {}).items():
        if value is not None and not isinstance(value, _OPTION_TYPES):
            raise GatewayError(36, ConfigError.kind, f"dpch: option {name!r} must be a string, number or boolean, "
                                                     f"not a JSON {_json_kind(value)}")
    return request


def _json_kind(value: Any) -> str:
    kinds = ((bool, "boolean"), (int, "number"), (float, "number"), (str, "string"), (list, "array"),
             (dict, "object"))
    return next((name for kind, name in kinds if isinstance(value, kind)), "null")


def make_server(config: ServerConfig, *, host: str | None = None, port: int | None = None) -> GatewayServer:
    """Opens the store and binds ``host:port`` (port 0 picks a free port). Call ``serve_forever()``
    or ``start()``, and ``stop()`` to shut down gracefully."""
    check_config(config)
    gateway = Gateway(config)
    try:
        return GatewayServer(gateway, (host or config.host, config.port if port is None else port))
    except BaseException:
        gateway.close()
        raise
