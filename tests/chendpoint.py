"""A test-only ClickHouse HTTP endpoint over one chdb store, so several dpch processes can share it.

chdb locks its data directory (one process per store, docs/design.md "Facts about the embedded
engine"), so dpch processes cannot share an embedded store directly. This process owns the store and
speaks enough of ClickHouse's HTTP protocol (https://clickhouse.com/docs/interfaces/http) for
clickhouse-connect: every dpch process then connects with an ``http://`` DSN, exactly as to a server,
and runs dpch's real server code path (``Engine`` on a server DSN, the Keeper admission store).

What it speaks: the SQL in the ``query`` URL parameter and/or the POST body (ClickHouse joins them
with a newline); ``param_*`` bindings; ``database`` (unknown database: ClickHouse's error 81, as a
server answers it); ``default_format`` and a trailing ``FORMAT``; ``Content-Length`` or chunked
bodies, gzip/deflate/lz4 request bodies; INSERTs whose data follows ``FORMAT X`` in the body (written
to a file and ingested with ``INSERT … FROM INFILE``, as clickhouse-connect's chdb backend does). Other
URL settings (``session_id``, ``wait_end_of_query``, …) are accepted and ignored: dpch puts the
settings it relies on into its SQL. Results are chdb's own bytes in the requested format (Native
passes straight through). Errors are ClickHouse's text with ``X-ClickHouse-Exception-Code``.

``--keeper`` gives the store ClickHouse's in-process test Keeper (``<zookeeper><implementation>
testkeeper``) and a ``keeper_map_path_prefix``, so KeeperMap tables work and
``keeper_map_strict_mode = 1`` refuses a duplicate key or a stale version as Keeper does; without it
the store has no Keeper at all (KeeperMap refused, as on a server without ``<zookeeper>``). A test
can make Keeper "unreachable" (``POST /test/keeper?down=1``): every statement on a KeeperMap table
of dpch's (``dpch_admission``, ``dpch_watch_state``) then gets the error a server answers when its
Keeper connection is lost. What it cannot show: Keeper's Raft durability, session expiry, network
partitions and replica lag (the compose cluster in docker/ is for those).

Run: ``python -m tests.chendpoint --store DIR [--keeper] [--port 0]``; it prints ``READY <port>``
once it answers, and stops on SIGTERM. :func:`start` does that from a test.
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import uuid
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

KEEPER_CONFIG = """<clickhouse>
  <zookeeper><implementation>testkeeper</implementation></zookeeper>
  <keeper_map_path_prefix>/keeper_map_tables</keeper_map_path_prefix>
</clickhouse>
"""
#: a server without Keeper: chdb's defaults give KeeperMap a test Keeper, so remove both explicitly
NO_KEEPER_CONFIG = """<clickhouse>
  <zookeeper remove="1"/>
  <keeper_map_path_prefix remove="1"/>
</clickhouse>
"""
#: ``--cluster``: ClickHouse's test clusters on this one process. ``tcp_port`` 9000 (nothing listens on it:
#: chdb serves no TCP) makes ``localhost:9000`` this server, so a Distributed table on them reads its
#: local table in-process (on ``test_two_shards_localhost`` twice: every row is on both shards, told
#: apart by ``_shard_num``)
CLUSTER_CONFIG = """  <tcp_port>9000</tcp_port>
  <remote_servers>
    <test_shard_localhost><shard><replica><host>localhost</host><port>9000</port></replica></shard></test_shard_localhost>
    <test_two_shards_localhost>
      <shard><replica><host>localhost</host><port>9000</port></replica></shard>
      <shard><replica><host>localhost</host><port>9000</port></replica></shard>
    </test_two_shards_localhost>
  </remote_servers>
"""
#: what a ClickHouse server answers when its Keeper is unreachable
KEEPER_DOWN = "Code: 999. Coordination::Exception: Connection loss, path /keeper_map_tables. (KEEPER_EXCEPTION)"

_INSERT_DATA = re.compile(r"^\s*(INSERT\b.*?)\bFORMAT\s+(\w+)\s*$", re.IGNORECASE | re.DOTALL)
_BODY_INSERT = re.compile(rb"^\s*(INSERT\b[^\n]*?)\bFORMAT\s+(\w+)[ \t]*\r?\n", re.IGNORECASE)
_TRAILING_FORMAT = re.compile(r"\bFORMAT\s+(\w+)\s*;?\s*$", re.IGNORECASE)
_CODE = re.compile(r"Code: (\d+)\.")
#: dpch's KeeperMap tables (what "Keeper down" fails)
KEEPER_TABLES = ("dpch_admission", "dpch_watch_state")


def _decompress(data: bytes, encoding: str) -> bytes:
    encoding = encoding.strip().lower()
    if not encoding or encoding == "identity":
        return data
    if encoding == "gzip":
        return zlib.decompress(data, wbits=47)
    if encoding == "deflate":
        return zlib.decompress(data)
    if encoding == "lz4":
        import lz4.frame  # type: ignore[import-untyped]

        return bytes(lz4.frame.decompress(data))
    raise ValueError(f"unsupported Content-Encoding {encoding!r}")


class Store:
    """The chdb store: a pool of connections, one lent per request (chdb runs queries of different
    connections on one store in parallel; one connection runs one query at a time). Each keeps its
    current database (``USE``), as a server session would for its request."""

    def __init__(self, path: str, config: str | None) -> None:
        self.url = f"file:{path}" + (f"?config-file={config}" if config else "")
        self._idle: list[tuple[Any, list[str]]] = []
        self._all: list[Any] = []
        self._lock = threading.Lock()
        self.temp = tempfile.mkdtemp(prefix="chendpoint-")

    @contextmanager
    def connection(self) -> Iterator[tuple[Any, list[str]]]:
        with self._lock:
            lent = self._idle.pop() if self._idle else None
        if lent is None:
            import chdb

            lent = (chdb.connect(self.url), ["default"])
            with self._lock:
                self._all.append(lent[0])
        try:
            yield lent
        finally:
            with self._lock:
                self._idle.append(lent)

    def run(self, sql: str, fmt: str, params: dict[str, str], database: str | None, data: bytes | None) -> bytes:
        with self.connection() as (conn, current):
            if database and database != current[0]:
                conn.query(f"USE `{database.replace('`', '')}`")  # ClickHouse's UNKNOWN_DATABASE if it is not there
                current[0] = database
            if data is None:
                return bytes(conn.query(sql, fmt, params=params).bytes())
            with tempfile.NamedTemporaryFile(dir=self.temp, delete=False) as file:
                file.write(data)
            try:
                quoted = file.name.replace("\\", "\\\\").replace("'", "\\'")
                conn.query(f"{sql} FROM INFILE '{quoted}' FORMAT {fmt}", "CSV", params=params)
            finally:
                os.unlink(file.name)
            return b""

    def close(self) -> None:
        with self._lock:
            conns, self._all = self._all, []
        for conn in conns:
            conn.close()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: Server

    def setup(self) -> None:
        super().setup()
        # small responses: without this, Nagle + the client's delayed ACK add ~40 ms per request
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        pass

    def do_GET(self) -> None:  # noqa: N802 - stdlib names
        self._handle()

    def do_POST(self) -> None:  # noqa: N802
        self._handle()

    def _body(self) -> bytes:
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            data = b""
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    break
                data += self.rfile.read(size)
                self.rfile.readline()
        else:
            data = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        return _decompress(data, self.headers.get("Content-Encoding") or "")

    def _handle(self) -> None:
        parts = urlsplit(self.path)
        params = dict(parse_qsl(parts.query, keep_blank_values=True))
        query_id = params.get("query_id") or str(uuid.uuid4())
        headers = {"X-ClickHouse-Query-Id": query_id, "X-ClickHouse-Timezone": "UTC",
                   "X-ClickHouse-Summary": '{"read_rows":"0","read_bytes":"0","written_rows":"0"}'}
        try:
            body = self._body()
            if parts.path in ("/ping", "/replicas_status"):
                self._send(200, b"Ok.\n", headers)
                return
            if parts.path == "/test/keeper":  # the test's switch: Keeper reachable or not
                self.server.keeper_down = params.get("down") == "1"
                self._send(200, b"Ok.\n", headers)
                return
            sql, data, fmt = self._statement(params.get("query", ""), body)
            fmt = fmt or params.get("default_format") or "TabSeparated"
            binds = {k[6:]: v for k, v in params.items() if k.startswith("param_")}
            if self.server.keeper_down and any(t in sql for t in KEEPER_TABLES):
                raise RuntimeError(KEEPER_DOWN)
            out = self.server.store.run(sql, fmt, binds, params.get("database"), data)
            headers["X-ClickHouse-Format"] = fmt
            headers["Content-Type"] = "application/octet-stream"
            self._send(200, out, headers)
        except Exception as exc:  # ClickHouse's text, as a server answers it
            message = str(exc)
            start = message.find("Code: ")
            message = message[start:] if start >= 0 else f"Code: 1002. DB::Exception: {message}"
            code = _CODE.search(message)
            headers["X-ClickHouse-Exception-Code"] = code.group(1) if code else "1002"
            headers["Content-Type"] = "text/plain; charset=UTF-8"
            self._send(500, (message.strip() + "\n").encode(), headers)

    @staticmethod
    def _statement(query: str, body: bytes) -> tuple[str, bytes | None, str | None]:
        """(SQL, INSERT data or None, format) of one request."""
        if query and body:
            insert = _INSERT_DATA.match(query)
            if insert is not None:  # INSERT … FORMAT X in the URL, its data in the body
                return insert.group(1), body, insert.group(2)
            query = query + "\n" + body.decode()
        elif body:
            insert = _BODY_INSERT.match(body)
            if insert is not None:  # INSERT … FORMAT X, a newline, then the data
                return insert.group(1).decode(), body[insert.end():], insert.group(2).decode()
            query = body.decode()
        trailing = _TRAILING_FORMAT.search(query)
        return query, None, trailing.group(1) if trailing else None

    def _send(self, status: int, body: bytes, headers: dict[str, str]) -> None:
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


class Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, store: Store, port: int) -> None:
        self.store = store
        #: the test switched Keeper off (``/test/keeper?down=1``)
        self.keeper_down = False
        super().__init__(("127.0.0.1", port), Handler)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", required=True)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--keeper", action="store_true", help="give the store ClickHouse's in-process test Keeper")
    parser.add_argument("--cluster", action="store_true", help="define the test cluster test_shard_localhost")
    args = parser.parse_args(argv)
    Path(args.store).mkdir(parents=True, exist_ok=True)
    config = str(Path(args.store).parent / (Path(args.store).name + "-config.xml"))
    text = KEEPER_CONFIG if args.keeper else NO_KEEPER_CONFIG
    if args.cluster:
        text = text.replace("</clickhouse>", CLUSTER_CONFIG + "</clickhouse>")
    Path(config).write_text(text)
    store = Store(args.store, config)
    with store.connection() as (conn, _):
        conn.query("SELECT 1")  # the engine is up before anyone is told so
    server = Server(store, args.port)
    signal.signal(signal.SIGTERM, lambda *_: threading.Thread(target=server.shutdown).start())
    print(f"READY {server.server_address[1]}", flush=True)
    try:
        server.serve_forever()
    finally:
        server.server_close()
        store.close()


@dataclass
class Endpoint:
    """A running endpoint process (:func:`start`)."""

    process: subprocess.Popen[str]
    port: int

    def dsn(self, database: str = "default", user: str = "default") -> str:
        return f"http://{user}@127.0.0.1:{self.port}/{database}"

    def keeper(self, *, up: bool) -> None:
        """Makes Keeper reachable or not (as its connection is lost) for every later statement."""
        import urllib.request

        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/test/keeper?down={0 if up else 1}",
                                    data=b"", timeout=60) as response:
            response.read()

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=60)


@contextmanager
def start(store: Path, *, keeper: bool = True, cluster: bool = False,
          env: dict[str, str] | None = None) -> Iterator[Endpoint]:
    """Runs an endpoint over ``store`` in a child process until the block ends (``cluster``: with the
    test cluster ``test_shard_localhost``, for Distributed tables)."""
    process = subprocess.Popen([sys.executable, "-m", "tests.chendpoint", "--store", str(store),
                                *(["--keeper"] if keeper else []), *(["--cluster"] if cluster else [])],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                               cwd=Path(__file__).resolve().parents[1])
    assert process.stdout is not None
    line = process.stdout.readline()  # blocks until the endpoint answers (or dies)
    if not line.startswith("READY"):
        process.kill()
        raise RuntimeError(f"the ClickHouse endpoint did not start: {line!r} {process.communicate()[1][-2000:]}")
    endpoint = Endpoint(process, int(line.split()[1]))
    try:
        yield endpoint
    finally:
        endpoint.stop()


if __name__ == "__main__":
    main()
