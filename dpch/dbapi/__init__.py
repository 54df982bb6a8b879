"""PEP 249 (DB-API 2.0) over dpch, for pandas, SQLAlchemy and BI tools.

    from dpch import dbapi
    conn = dbapi.connect("chdb:///var/lib/dpch", analyst="ana")      # or "dpch://host:port"
    cur = conn.cursor()
    cur.execute("SELECT region, count(*) FROM visits WHERE age > %(age)s GROUP BY region", {"age": 40})
    cur.fetchall()          # noisy rows
    cur.description         # (name, type_code, ...) with ClickHouse type names as type codes
    cur.intervals           # per row: the interval of each value (None for group keys)
    cur.cost, cur.release   # what the query was charged; the full Release

Every ``execute`` is one private release (or one re-served from a gateway's release cache), and
so is every parameter set of ``executemany``: N parameter sets are N releases, each charged
separately (it warns with :class:`SeparateReleasesWarning`; see :meth:`Cursor.executemany`).
Parameters are bound client-side as SQL literals (``paramstyle = "pyformat"``: ``%(name)s`` or
``%s``). dpch errors are raised as the standard exception classes below, chosen by the error's
kind (:data:`dpch.errors.KINDS`); the original dpch error is the exception's ``__cause__`` and
its ``dpch_error`` attribute.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import math
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from dpch.accounting.accountant import BudgetStatus
from dpch.api import PrivateSession
from dpch.connection import connect_gateway, connect_local, is_gateway_dsn
from dpch.errors import DpchError, kind_of
from dpch.pipeline.kinds import release_kind
from dpch.pipeline.report import Release
from dpch.privacy.cost import PrivacyCost
from dpch.session import Session
from dpch.sql.result_types import typed_rows


class SeparateReleasesWarning(UserWarning):
    """``executemany`` with several parameter sets: each is a release charged on its own."""


apilevel = "2.0"
threadsafety = 1  # threads may share the module, not connections
paramstyle = "pyformat"


class Warning(Exception):  # noqa: A001, N818 - PEP 249 names
    pass


class Error(Exception):
    """Base of the DB-API errors; ``dpch_error`` is the dpch error behind it, if any."""

    dpch_error: DpchError | None = None


class InterfaceError(Error):
    pass


class DatabaseError(Error):
    pass


class DataError(DatabaseError):
    pass


class OperationalError(DatabaseError):
    pass


class IntegrityError(DatabaseError):
    pass


class InternalError(DatabaseError):
    pass


class ProgrammingError(DatabaseError):
    pass


class NotSupportedError(DatabaseError):
    pass


#: the PEP 249 classes by the names :data:`dpch.errors.KINDS` gives them
_PEP249: dict[str, type[Error]] = {cls.__name__: cls for cls in (
    Error, InterfaceError, DatabaseError, DataError, OperationalError, IntegrityError, InternalError,
    ProgrammingError, NotSupportedError)}


def _translate(exc: DpchError) -> Error:
    """The PEP 249 exception for a dpch error: its kind's class in :data:`dpch.errors.KINDS` (the
    query's fault → ProgrammingError; budget, locks → OperationalError; configuration →
    InterfaceError; ClickHouse or dpch failing → InternalError)."""
    err = _PEP249[kind_of(exc).pep249](str(exc))
    err.dpch_error = exc
    return err


# -- type objects (PEP 249 "Type Objects and Constructors") -----------------------------------------


class _TypeObject:
    """Compares equal to the ClickHouse type names of one DB-API type group."""

    def __init__(self, name: str, *prefixes: str) -> None:
        self.name = name
        self.prefixes = prefixes

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, str):
            return NotImplemented
        base = other
        for wrapper in ("Nullable(", "LowCardinality("):
            while base.startswith(wrapper):
                base = base[len(wrapper):-1]
        return base.startswith(self.prefixes)

    def __hash__(self) -> int:
        return hash(self.name)

    def __repr__(self) -> str:
        return f"dpch.dbapi.{self.name}"


STRING = _TypeObject("STRING", "String", "FixedString", "Enum", "UUID")
BINARY = _TypeObject("BINARY", "FixedString")
NUMBER = _TypeObject("NUMBER", "Int", "UInt", "Float", "Decimal", "Bool")
DATETIME = _TypeObject("DATETIME", "Date", "DateTime")
ROWID = _TypeObject("ROWID", "\0never")

Date = _dt.date
Time = _dt.time
Timestamp = _dt.datetime
Binary = bytes


def DateFromTicks(ticks: float) -> _dt.date:  # noqa: N802 - PEP 249 names
    return _dt.date.fromtimestamp(ticks)


def TimeFromTicks(ticks: float) -> _dt.time:  # noqa: N802
    return _dt.datetime.fromtimestamp(ticks).time()


def TimestampFromTicks(ticks: float) -> _dt.datetime:  # noqa: N802
    return _dt.datetime.fromtimestamp(ticks)


# -- parameters ----------------------------------------------------------------------------------


def literal(value: Any) -> str:
    """A ClickHouse SQL literal for a Python value (client-side parameter binding)."""
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ProgrammingError(f"cannot bind the non-finite number {value!r}")
        return repr(value)
    if isinstance(value, _dt.datetime):
        return "'" + value.strftime("%Y-%m-%d %H:%M:%S") + "'"
    if isinstance(value, _dt.date):
        return "'" + value.isoformat() + "'"
    if isinstance(value, str):
        return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
    if isinstance(value, list | tuple | set | frozenset):
        return "(" + ", ".join(literal(v) for v in value) + ")"
    raise ProgrammingError(f"cannot bind a parameter of type {type(value).__name__}")


def bind(operation: str, parameters: Mapping[str, Any] | Sequence[Any] | None) -> str:
    """``operation`` with ``%(name)s``/``%s`` replaced by literals (``%%`` is a literal %)."""
    if parameters is None:
        return operation
    try:
        if isinstance(parameters, Mapping):
            return operation % {k: _Literal(v) for k, v in parameters.items()}
        return operation % tuple(_Literal(v) for v in parameters)
    except (KeyError, TypeError, ValueError) as exc:
        raise ProgrammingError(f"parameters do not match the placeholders: {exc}") from None


class _Literal:
    def __init__(self, value: Any) -> None:
        self.value = value

    def __str__(self) -> str:
        return literal(self.value)


# -- connection and cursor ---------------------------------------------------------------------


#: runs one query and gives its release and its columns' ClickHouse types
TypedQuery = Callable[[str], tuple[Release, list[str]]]


def connect(dsn: str | None = None, *, analyst: str = "default", password: str | None = None,
            database: str | None = None, **kwargs: Any) -> Connection:
    """Opens a DB-API connection: ``dsn`` as for :func:`dpch.connect` (``chdb:///path``,
    ``http://...``, or ``dpch://host:port`` for a gateway); other keywords (``policy``,
    ``epsilon``, ``delta``, ``confidence``, ``seed``) are passed on (through a gateway only
    ``epsilon``, ``delta`` and ``confidence`` apply)."""
    try:
        if is_gateway_dsn(dsn):
            remote = connect_gateway(dsn, analyst=analyst, password=password, database=database,
                                     **{k: kwargs[k] for k in ("epsilon", "delta", "confidence") if k in kwargs})
            return Connection(remote, remote.query_with_types)  # the gateway planned the types
        local = connect_local(dsn, analyst=analyst, database=database, **kwargs)
        return Connection(local, planned_query(local))
    except DpchError as exc:
        raise _translate(exc) from exc


def planned_query(session: Session) -> TypedQuery:
    """A local session's queries with their column types, from the query's plan."""

    def run(sql: str) -> tuple[Release, list[str]]:
        plan, opts = session.plan(sql)
        return session.query(sql), release_kind(plan, opts).column_types(plan, opts)

    return run


class Connection:
    """A DB-API connection around one dpch session (read-only: commit/rollback do nothing)."""

    Warning = Warning
    Error = Error
    InterfaceError = InterfaceError
    DatabaseError = DatabaseError
    DataError = DataError
    OperationalError = OperationalError
    IntegrityError = IntegrityError
    InternalError = InternalError
    ProgrammingError = ProgrammingError
    NotSupportedError = NotSupportedError

    def __init__(self, session: PrivateSession, query: TypedQuery) -> None:
        self.session = session
        self.query = query
        self.closed = False

    def _check(self) -> None:
        if self.closed:
            raise InterfaceError("the connection is closed")

    def cursor(self) -> Cursor:
        self._check()
        return Cursor(self)

    def commit(self) -> None:
        self._check()

    def rollback(self) -> None:
        self._check()

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.session.close()

    def budget(self) -> BudgetStatus:
        """The analyst's budget status (a dpch extension)."""
        self._check()
        return self.session.budget()

    def __enter__(self) -> Connection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Cursor:
    """A DB-API cursor: each ``execute`` is one private query; rows come from its Release.

    Extensions: ``release`` (the :class:`~dpch.pipeline.report.Release`), ``intervals`` (per row, the
    interval of each value or None), ``cost``, ``budget`` and :meth:`row_intervals`.
    """

    arraysize = 1

    def __init__(self, connection: Connection) -> None:
        self.connection = connection
        self.release: Release | None = None
        #: the releases of the last executemany, in order (one per parameter set)
        self.releases: list[Release] = []
        self.types: list[str] = []
        self._pos = 0
        self.closed = False
        self.rowcount = -1

    @property
    def description(self) -> list[tuple[Any, ...]] | None:
        if self.release is None:
            return None
        return [(name, ch_type, None, None, None, None, ch_type.startswith("Nullable"))
                for name, ch_type in zip(self.release.columns, self.types, strict=True)]

    @property
    def rownumber(self) -> int | None:
        return self._pos if self.release is not None else None

    @property
    def intervals(self) -> list[list[tuple[float, float] | None]] | None:
        return self.release.intervals if self.release is not None else None

    @property
    def cost(self) -> PrivacyCost | None:
        return self.release.cost if self.release is not None else None

    @property
    def budget(self) -> BudgetStatus | None:
        return self.release.budget if self.release is not None else None

    def row_intervals(self, index: int) -> list[tuple[float, float] | None]:
        """The intervals of row ``index`` of the last result."""
        return self._result().intervals[index]

    def _result(self) -> Release:
        if self.closed:
            raise InterfaceError("the cursor is closed")
        if self.release is None:
            raise ProgrammingError("no result: call execute() first")
        return self.release

    def execute(self, operation: str, parameters: Mapping[str, Any] | Sequence[Any] | None = None) -> Cursor:
        if self.closed:
            raise InterfaceError("the cursor is closed")
        self.connection._check()
        sql = bind(operation, parameters)
        try:
            release, types = self.connection.query(sql)
        except DpchError as exc:
            raise _translate(exc) from exc
        self.release = dataclasses.replace(release, rows=typed_rows(release.rows, types))
        self.types = types
        self._pos = 0
        self.rowcount = len(release.rows)  # the declared group domain (and LIMIT): data-independent
        return self

    def executemany(self, operation: str, seq_of_parameters: Sequence[Any]) -> None:
        """Runs ``operation`` once per parameter set: **each one is a separate private release,
        charged separately** (N parameter sets cost N times one query's ε and δ; nothing is
        batched or shared). They run in order and stop at the first error; the ones before it
        stay charged and released (:attr:`releases` lists them). The cursor's result is the
        last release's. Warns with :class:`SeparateReleasesWarning` when there is more than one.
        """
        params = list(seq_of_parameters)
        if len(params) > 1:
            warnings.warn(f"executemany runs {len(params)} separate private releases, each charged to the "
                          "budget on its own", SeparateReleasesWarning, stacklevel=2)
        self.releases = []
        for p in params:
            self.execute(operation, p)
            assert self.release is not None
            self.releases.append(self.release)

    def fetchone(self) -> tuple[Any, ...] | None:
        release = self._result()
        if self._pos >= len(release.rows):
            return None
        row = release.rows[self._pos]
        self._pos += 1
        return row

    def fetchmany(self, size: int | None = None) -> list[tuple[Any, ...]]:
        release = self._result()
        size = self.arraysize if size is None else size
        rows = release.rows[self._pos:self._pos + size]
        self._pos += len(rows)
        return list(rows)

    def fetchall(self) -> list[tuple[Any, ...]]:
        release = self._result()
        rows = release.rows[self._pos:]
        self._pos = len(release.rows)
        return list(rows)

    def __iter__(self) -> Cursor:
        return self

    def __next__(self) -> tuple[Any, ...]:
        row = self.fetchone()
        if row is None:
            raise StopIteration
        return row

    def setinputsizes(self, sizes: Any) -> None:
        pass

    def setoutputsize(self, size: Any, column: Any = None) -> None:
        pass

    def close(self) -> None:
        self.closed = True

    def __enter__(self) -> Cursor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


__all__ = [
    "BINARY", "DATETIME", "NUMBER", "ROWID", "STRING", "Binary", "Connection", "Cursor", "DataError",
    "DatabaseError", "Date", "DateFromTicks", "Error", "IntegrityError", "InterfaceError", "InternalError",
    "NotSupportedError", "OperationalError", "ProgrammingError", "SeparateReleasesWarning", "Time",
    "TimeFromTicks", "Timestamp", "TimestampFromTicks", "Warning", "apilevel", "connect", "paramstyle", "threadsafety",
]
