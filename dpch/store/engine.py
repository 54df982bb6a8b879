"""Engine: dpch's one path to ClickHouse, a clickhouse-connect client on a DSN.

DSNs:

- ``chdb:///path/to/store`` — an embedded, in-process ClickHouse (chdb) persisted at that path.
  This is the default: ``$DPCH_DSN`` if set, else ``chdb://<cwd>/dpch-data``.
- ``http(s)://user:password@host:port/database`` — a ClickHouse server.

An embedded store can be opened by one process only (ClickHouse locks its data directory), and
one process can hold one store at a time. Engines on the same path inside a process share one
:class:`ClientPool` and one :class:`SharedState` (what every session of the store must see, such
as the analysts' admission states); opening a second path while the first is open is refused with
a clear error. Engines on the same server (scheme, host, port, user) share one :class:`SharedState`
too, whatever database they name, so every connection of a process to one server sees one
admission state per analyst.

Calls are not serialised: each call borrows a client of its own from the pool, so concurrent
calls run in parallel inside ClickHouse (chdb runs queries of different connection handles on
the same store concurrently; one handle runs one query at a time). Whatever must be serialised
(an analyst's admission) is locked by its owner, not here.
"""

from __future__ import annotations

import fcntl
import os
import re
import threading
import uuid
from collections.abc import Callable, Hashable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar, cast
from urllib.parse import urlsplit, urlunsplit

from dpch.errors import ConfigError, ExecutionError, QueryRejected, StoreLocked
from dpch.store.quoting import quote_identifier

DSN_ENV = "DPCH_DSN"
#: the ClickHouse cluster dpch creates its own tables on (``ON CLUSTER``, replicated engines)
CLUSTER_ENV = "DPCH_CLUSTER"
DEFAULT_STORE_DIR = "dpch-data"

_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_ERROR_CODE = re.compile(r"\(([A-Z][A-Z0-9_]+)\)")


def default_dsn() -> str:
    """``$DPCH_DSN``, else an embedded store in ``./dpch-data``."""
    env = os.environ.get(DSN_ENV)
    if env:
        return env
    return f"chdb://{Path.cwd() / DEFAULT_STORE_DIR}"


def check_identifier(name: str, what: str) -> str:
    """Returns ``name`` if it is a plain identifier; dpch only creates plainly named objects."""
    if not _IDENTIFIER.match(name):
        raise ConfigError(
            f"{what} {name!r} is not a plain identifier",
            hint="use letters, digits and underscores, starting with a letter",
        )
    return name


@dataclass(frozen=True)
class ColumnInfo:
    """One column as ClickHouse describes it."""

    name: str
    type: str
    comment: str


T = TypeVar("T")


class SharedState:
    """Objects shared by every :class:`Engine` on one opening of a store in this process.

    One instance per kind (its class is the key, built with no arguments on first use): e.g. the
    accountant's per-analyst filter states, which all sessions of a store must share so that
    concurrent sessions cannot jointly overspend (docs/design.md "One process per store"). The
    Engines on one embedded store share one, and so do the Engines on one ClickHouse server (same
    scheme, host, port and user, any database). It is dropped when the last of those Engines
    closes, so a reopened store starts from what is durable.
    """

    def __init__(self) -> None:
        self._items: dict[Any, Any] = {}
        self._lock = threading.Lock()

    def get(self, kind: type[T]) -> T:
        """The store's one ``kind`` object, created on first use."""
        with self._lock:
            item = self._items.get(kind)
            if item is None:
                item = self._items[kind] = kind()
            return cast(T, item)

    def setdefault(self, key: Hashable, make: Callable[[], T]) -> T:
        """The store's object under ``key``, made by ``make`` on first use (outside this state's lock: it
        may talk to ClickHouse; if two threads race, the first stored wins). A ``make`` that raises
        stores nothing, so the next use tries again."""
        with self._lock:
            item = self._items.get(key)
        if item is None:
            made = make()
            with self._lock:
                item = self._items.setdefault(key, made)
        return cast(T, item)


class ClientPool:
    """Clients of one store (or server), lent one per call: a call borrows an idle client, or opens
    a new one when all are busy, and gives it back when done. So at most as many clients exist as
    calls ever ran at once, each used by one thread at a time (a clickhouse-connect client is not
    meant to run two queries at once), and concurrent calls never wait for each other here.
    The most recently returned client is lent first (warm caches, idle ones stay idle)."""

    def __init__(self, open_client: Callable[[], Any], first: Any) -> None:
        self._open = open_client
        self._idle: list[Any] = [first]
        self._opened = 1
        self._lock = threading.Lock()
        self._closed = False

    @contextmanager
    def client(self) -> Iterator[Any]:
        """A client for this thread's call, returned to the pool afterwards."""
        with self._lock:
            client = self._idle.pop() if self._idle else None
        if client is None:
            client = self._open()
            with self._lock:
                self._opened += 1
        try:
            yield client
        finally:
            with self._lock:
                if self._closed:
                    client.close()
                else:
                    self._idle.append(client)

    @property
    def size(self) -> int:
        """How many clients the pool has opened (the most calls that ever ran at once)."""
        with self._lock:
            return self._opened

    def close(self) -> None:
        """Closes the idle clients now and each busy one when its call returns."""
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for client in idle:
            client.close()


class _SharedClient:
    """A process-wide pool of chdb clients on one store, with a reference count and the state
    its Engines share."""

    def __init__(self, path: str, pool: ClientPool) -> None:
        self.path = path
        self.pool = pool
        self.refs = 0
        self.token = uuid.uuid4().hex
        self.shared = SharedState()


_embedded: dict[str, _SharedClient] = {}
_embedded_lock = threading.Lock()


_LOCKED_HINT = (
    "only one process can open an embedded store; connect through that process's gateway "
    "instead (`dpch serve` there, then --dsn dpch://HOST:PORT), or stop the other process"
)


def _locked_by_another_process(path: str) -> bool:
    """Whether another process holds ClickHouse's flock on ``<store>/status``.

    Checked before opening, because chdb reports a held lock only on its own stderr.
    """
    status = Path(path) / "status"
    if not status.exists():
        return False
    with open(status, "a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(handle, fcntl.LOCK_UN)
    return False


def _open_embedded(path: str) -> _SharedClient:
    # start-up: clickhouse_connect loads ~0.1 s of HTTP client code; only an opened store needs it
    import clickhouse_connect
    from clickhouse_connect.driver.exceptions import ClickHouseError

    with _embedded_lock:
        shared = _embedded.get(path)
        if shared is None:
            other = next(iter(_embedded), None)
            if other is not None:
                raise ConfigError(
                    f"this process already has the embedded store {other!r} open; "
                    f"chdb holds one store per process",
                    hint="close the other connection first",
                )
            Path(path).mkdir(parents=True, exist_ok=True)
            if _locked_by_another_process(path):
                raise StoreLocked(
                    f"the embedded store at {path} is in use by another process "
                    f"(ClickHouse holds the lock on {Path(path) / 'status'})",
                    hint=_LOCKED_HINT,
                )
            def open_client() -> Any:
                return clickhouse_connect.get_client(dsn=f"chdb://{path}")

            try:
                first = open_client()
            except ClickHouseError as exc:
                if "Cannot lock file" in str(exc):
                    raise StoreLocked(
                        f"the embedded store at {path} is in use by another process",
                        hint=_LOCKED_HINT,
                    ) from None
                raise ConfigError(f"cannot open the embedded store at {path}: {exc}") from None
            shared = _SharedClient(path, ClientPool(open_client, first))
            _embedded[path] = shared
        shared.refs += 1
        return shared


def open_embedded_states() -> list[SharedState]:
    """The shared state of every embedded store open in this process (chdb holds at most one)."""
    with _embedded_lock:
        return [shared.shared for shared in _embedded.values()]


def _release_embedded(shared: _SharedClient) -> None:
    with _embedded_lock:
        shared.refs -= 1
        if shared.refs <= 0:
            _embedded.pop(shared.path, None)
            shared.pool.close()


class _SharedServer:
    """What every Engine on one ClickHouse server shares in this process: its :class:`SharedState`
    (the analysts' admission states, the ledger's group commit), with a reference count. Without it
    two connections to one server in one process would each keep an analyst's state, and jointly
    overspend (issue 26, "the one-process hole")."""

    def __init__(self, key: tuple[str, str, int, str]) -> None:
        self.key = key
        self.refs = 0
        self.token = uuid.uuid4().hex
        self.shared = SharedState()


_servers: dict[tuple[str, str, int, str], _SharedServer] = {}


def _server_key(parts: Any) -> tuple[str, str, int, str]:
    """One server as the process sees it: scheme, host, port and user (the database is not part of
    it: states are keyed by database inside, and one gateway serves several databases)."""
    default = 8443 if parts.scheme == "https" else 8123
    return (parts.scheme, (parts.hostname or "localhost").lower(), parts.port or default, parts.username or "default")


def _open_server(key: tuple[str, str, int, str]) -> _SharedServer:
    with _embedded_lock:
        shared = _servers.get(key)
        if shared is None:
            shared = _servers[key] = _SharedServer(key)
        shared.refs += 1
        return shared


def _release_server(shared: _SharedServer) -> None:
    with _embedded_lock:
        shared.refs -= 1
        if shared.refs <= 0 and _servers.get(shared.key) is shared:
            del _servers[shared.key]


@contextmanager
def _closing(client: Any) -> Iterator[Any]:
    try:
        yield client
    finally:
        client.close()


#: what a failed probe (synthetic rows only, so the failure says nothing about the data) means
_PROBE_HINT = "check the columns' types (DESCRIBE TABLE t) and the functions' arguments"
_PROBE_HINTS = {
    "CANNOT_COMPILE_REGEXP": "the regular expression pattern is invalid (RE2 syntax)",
    "CANNOT_PARSE_ESCAPE_SEQUENCE": "the LIKE pattern is invalid: a backslash must escape a character",
    "ILLEGAL_TYPE_OF_ARGUMENT": "a function or operator got an argument of the wrong type; compare each "
                                "column's type (DESCRIBE TABLE t) with what the function takes",
    "NO_COMMON_TYPE": "the values compared or combined have no common type (e.g. a String and a number)",
    "TYPE_MISMATCH": "a value cannot be compared with that column's type (e.g. text with a number column)",
    "CANNOT_PARSE_TEXT": "a literal does not parse as the column's type (e.g. a malformed date)",
    "CANNOT_PARSE_DATE": "a date literal is malformed; write 'YYYY-MM-DD'",
    "CANNOT_PARSE_DATETIME": "a date-time literal is malformed; write 'YYYY-MM-DD hh:mm:ss'",
    "NUMBER_OF_ARGUMENTS_DOESNT_MATCH": "a function got the wrong number of arguments",
    "ARGUMENT_OUT_OF_BOUND": "a constant argument is out of range",
}


class Engine:
    """A connection to ClickHouse (embedded or server) and the one database dpch works in."""

    def __init__(self, dsn: str | None = None, *, database: str | None = None, cluster: str | None = None) -> None:
        # start-up: clickhouse_connect loads ~0.1 s of HTTP client code; only an opened store needs it
        import clickhouse_connect
        from clickhouse_connect.driver.exceptions import ClickHouseError

        self.dsn = dsn or default_dsn()
        parts = urlsplit(self.dsn)
        #: the cluster dpch's own tables are created on (``--cluster``, ``$DPCH_CLUSTER``), or None
        self.cluster = cluster or os.environ.get(CLUSTER_ENV) or None
        if self.cluster is not None:
            check_identifier(self.cluster, "cluster")
            if parts.scheme == "chdb":
                raise ConfigError("an embedded store is one process on one machine: it has no cluster",
                                  hint=f"name a cluster only with a ClickHouse server DSN (unset ${CLUSTER_ENV})")
        self._shared: _SharedClient | None = None
        self._server: _SharedServer | None = None
        self.store_path: str | None
        if parts.scheme == "chdb":
            path = (parts.netloc + parts.path) or str(Path.cwd() / DEFAULT_STORE_DIR)
            self.store_path = str(Path(path).resolve())
            self._shared = _open_embedded(self.store_path)
            self.pool = self._shared.pool
            self.token = self._shared.token
            self.shared = self._shared.shared
            self.database = database or "default"
        elif parts.scheme in ("http", "https"):
            self.store_path = None
            url_db = parts.path.strip("/") or None
            self.database = database or url_db or "default"
            check_identifier(self.database, "database")
            dsn, database = self.dsn, self.database

            def open_client() -> Any:
                return clickhouse_connect.get_client(dsn=dsn, database=database)

            try:
                # a server refuses every request naming a database it does not have (UNKNOWN_DATABASE,
                # clickhouse-connect's own start-up queries included), so the database is created by a
                # client that names none (a DSN without its path: the user's default database)
                no_database = urlunsplit(parts._replace(path=""))
                with _closing(clickhouse_connect.get_client(dsn=no_database)) as boot:
                    boot.command(f"CREATE DATABASE IF NOT EXISTS {quote_identifier(self.database)}{self.on_cluster()}")
                first = open_client()
            except ClickHouseError as exc:
                raise ConfigError(f"cannot connect to ClickHouse at {parts.hostname}: {exc}") from None
            self.pool = ClientPool(open_client, first)
            self._server = _open_server(_server_key(parts))
            self.token = self._server.token
            self.shared = self._server.shared
        else:
            raise ConfigError(
                f"unsupported DSN scheme {parts.scheme!r}",
                hint="use chdb:///path/to/store (embedded) or http://user:pass@host:8123/db",
            )
        self._closed = False
        if self._server is not None:
            return  # the database was created before the pool's clients named it
        try:
            check_identifier(self.database, "database")
            self.command(f"CREATE DATABASE IF NOT EXISTS {quote_identifier(self.database)}")
        except BaseException:
            # a failed open must not keep the client: an embedded store left referenced would
            # refuse every other store this process opens until it restarts
            self.close()
            raise

    #: identifies this opening of the store: caches keyed by it are dropped when the store is
    #: closed and reopened, so a reconnect always re-reads the ledger
    token: str
    #: state shared by the Engines on this opening of the store (:class:`SharedState`)
    shared: SharedState
    #: the clients calls borrow (:class:`ClientPool`; shared by the Engines on one embedded store)
    pool: ClientPool

    @property
    def embedded(self) -> bool:
        return self.store_path is not None

    def describe(self) -> str:
        """A human description of where the data lives (no password)."""
        if self.embedded:
            return f"embedded ClickHouse at {self.store_path}"
        parts = urlsplit(self.dsn)
        return f"ClickHouse server at {parts.hostname}:{parts.port or 8123}"

    def table(self, name: str) -> str:
        """The fully qualified, quoted name of a table in this engine's database."""
        return f"{quote_identifier(self.database)}.{quote_identifier(name)}"

    def on_cluster(self) -> str:
        """`` ON CLUSTER `name` `` for dpch's own DDL when a cluster is named, else ""."""
        return f" ON CLUSTER {quote_identifier(self.cluster)}" if self.cluster else ""

    def table_engine(self, name: str) -> str:
        """The engine of dpch's own table ``name``: ``MergeTree``, or on a named cluster
        ``ReplicatedMergeTree`` with one Keeper path per shard (the standard ``{shard}`` and
        ``{replica}`` macros), so every replica holds the same ledger, budgets, locks and watches and
        the table is created once for the whole cluster (``ON CLUSTER``)."""
        if not self.cluster:
            return "MergeTree"
        path = f"/clickhouse/tables/{{shard}}/dpch/{self.database}/{name}"
        return f"ReplicatedMergeTree('{path}', '{{replica}}')"

    #: on a cluster, every write of dpch's own rows returns only once a majority of the shard's replicas
    #: has it (``insert_quorum``), one quorum write at a time (``insert_quorum_parallel = 0``: what lets a
    #: rebuild read them with ``select_sequential_consistency`` on any replica)
    QUORUM = {"insert_quorum": "auto", "insert_quorum_parallel": "0"}

    def write_settings(self) -> str:
        """The SETTINGS of an INSERT of dpch's own rows (ledger, locks, watches, budgets): a quorum on a
        named cluster, else none."""
        return "insert_quorum = 'auto', insert_quorum_parallel = 0" if self.cluster else ""

    def create_table(self, name: str, columns: str, tail: str) -> None:
        """``CREATE TABLE IF NOT EXISTS`` dpch's own table ``name`` with ``columns`` (the text inside
        the parentheses) and ``tail`` (what follows the engine: ``ORDER BY …``, ``COMMENT …``), on the
        cluster with a replicated engine if one is named (:meth:`table_engine`)."""
        self.command(f"CREATE TABLE IF NOT EXISTS {self.table(name)}{self.on_cluster()} ({columns})"
                     f" ENGINE = {self.table_engine(name)} {tail}")

    # -- raw access: metadata, DDL, ledger (never for analyst SQL) --------------------------

    def command(self, sql: str, parameters: dict[str, Any] | None = None) -> None:
        with self.pool.client() as client:
            client.command(sql, parameters=parameters)

    def add_missing_columns(self, table: str, columns: Sequence[tuple[str, str]]) -> None:
        """Adds each ``(name, "Type [DEFAULT …]")`` column that ``table`` lacks (a store written by an
        older dpch). Read first, altered only if something is missing: an ``ALTER … ADD COLUMN IF
        NOT EXISTS`` rewrites the table's metadata even when it adds nothing (~20 ms at every open)."""
        present = {c.name for c in self.columns(table)}
        missing = [(name, spec) for name, spec in columns if name not in present]
        if missing:
            self.command(f"ALTER TABLE {self.table(table)}{self.on_cluster()} "
                         + ", ".join(f"ADD COLUMN IF NOT EXISTS {quote_identifier(n)} {spec}" for n, spec in missing))

    def query_rows(self, sql: str, parameters: dict[str, Any] | None = None) -> list[tuple[Any, ...]]:
        with self.pool.client() as client:
            return list(client.query(sql, parameters=parameters).result_rows)

    def raw_query(self, sql: str, fmt: str) -> bytes:
        """Runs dpch-built SQL and returns ClickHouse's bytes in format ``fmt`` (the gateway uses
        this to serialise released rows and public metadata; never for analyst SQL)."""
        with self.pool.client() as client:
            return bytes(client.raw_query(sql, fmt=fmt))

    def insert(
        self,
        table: str,
        data: Sequence[Sequence[Any]],
        column_names: Sequence[str],
        *,
        column_oriented: bool = False,
    ) -> None:
        """Inserts rows (or, with ``column_oriented``, one sequence per column)."""
        with self.pool.client() as client:
            client.insert(
                table,
                list(data),
                column_names=list(column_names),
                database=self.database,
                column_oriented=column_oriented,
                settings=dict(self.QUORUM) if self.cluster else None,
            )

    def insert_df(self, table: str, frame: Any) -> None:
        with self.pool.client() as client:
            client.insert_df(table, frame, database=self.database)

    # -- emitted private SQL -----------------------------------------------------------------

    def run_private(self, sql: str, parameters: dict[str, Any] | None = None) -> list[tuple[Any, ...]]:
        """Runs SQL that dpch emitted from an analyzed plan, with the query ``parameters`` it names
        (the release's cap key, :func:`dpch.sql.cap.keyed`: bound by ClickHouse, in no SQL text).

        ClickHouse's own error text can quote row values, so it never reaches the caller:
        the error says only that execution failed (docs/design.md rule 4).
        """
        # start-up: loaded with the client that raises it (this Engine's client is open)
        from clickhouse_connect.driver.exceptions import ClickHouseError

        try:
            with self.pool.client() as client:
                return list(client.query(sql, parameters=parameters or None).result_rows)
        except ClickHouseError as exc:
            error = ExecutionError(
                "ClickHouse failed while computing the private aggregate",
                hint="the message is withheld because it could reveal data; check the table "
                "and its columns with DESCRIBE TABLE t",
            )
            match = _ERROR_CODE.search(str(exc))
            error.reason = f"ClickHouse {match.group(1) if match else 'error'}"  # the owner's lock record only
            raise error from None

    def probe(self, sql: str) -> None:
        """Runs a probe query (emitted SQL over synthetic rows, reading no table data), so a
        query that cannot run is rejected before any charge. Only the error's code name is
        reported, never ClickHouse's text."""
        self._before_charge(sql)

    def describe_types(self, sql: str) -> list[tuple[str, str]]:
        """Runs a ``DESCRIBE (SELECT …)`` dpch built over placeholder values (it resolves the query's
        types and reads no table): (name, type) per column. A query ClickHouse cannot type is refused
        before any charge, with the error's code name only."""
        return [(str(r[0]), str(r[1])) for r in self._before_charge(sql)]

    def _before_charge(self, sql: str) -> list[tuple[Any, ...]]:
        # start-up: loaded with the client that raises it (this Engine's client is open)
        from clickhouse_connect.driver.exceptions import ClickHouseError

        try:
            with self.pool.client() as client:
                return list(client.query(sql).result_rows)
        except ClickHouseError as exc:
            match = _ERROR_CODE.search(str(exc))
            code = match.group(1) if match else "UNKNOWN"
            raise QueryRejected(f"ClickHouse cannot run this query ({code})",
                                hint=_PROBE_HINTS.get(code, _PROBE_HINT)) from None

    # -- schema -------------------------------------------------------------------------------

    def table_exists(self, table: str) -> bool:
        rows = self.query_rows(
            "SELECT count() FROM system.tables WHERE database = {db:String} AND name = {t:String}",
            {"db": self.database, "t": table},
        )
        return bool(rows[0][0] > 0)

    def list_tables(self) -> list[str]:
        rows = self.query_rows(
            "SELECT name FROM system.tables WHERE database = {db:String} ORDER BY name",
            {"db": self.database},
        )
        return [r[0] for r in rows]

    def table_comment(self, table: str) -> str:
        rows = self.query_rows(
            "SELECT comment FROM system.tables WHERE database = {db:String} AND name = {t:String}",
            {"db": self.database, "t": table},
        )
        return rows[0][0] if rows else ""

    def sorting_key(self, table: str) -> list[str]:
        """The table's ORDER BY key as a list of expressions (empty if none)."""
        rows = self.query_rows(
            "SELECT sorting_key FROM system.tables WHERE database = {db:String} AND name = {t:String}",
            {"db": self.database, "t": table},
        )
        key = rows[0][0] if rows else ""
        return [part.strip() for part in key.split(",") if part.strip()]

    def columns(self, table: str) -> list[ColumnInfo]:
        rows = self.query_rows(
            "SELECT name, type, comment FROM system.columns "
            "WHERE database = {db:String} AND table = {t:String} ORDER BY position",
            {"db": self.database, "t": table},
        )
        return [ColumnInfo(*r) for r in rows]

    def close(self) -> None:
        if getattr(self, "_closed", True):
            return
        self._closed = True
        if self._shared is not None:
            _release_embedded(self._shared)
        else:
            self.pool.close()
            if self._server is not None:
                _release_server(self._server)

    def __enter__(self) -> Engine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
