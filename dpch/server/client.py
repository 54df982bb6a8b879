"""The ``dpch://host:port`` remote session: an analyst's Session served by a ``dpch serve`` gateway.

``dpch.connect("dpch://host:port/db", analyst="ana", password="...")`` returns a
:class:`RemoteSession`, a :class:`dpch.api.PrivateSession` like an in-process
:class:`~dpch.session.Session`, with the same :class:`~dpch.pipeline.report.Release` results
(values, intervals, cost, budget left), explanations with their cost as data, and the same dpch
errors (each crosses the wire as its kind, :mod:`dpch.server.wire`). It speaks the gateway's JSON
endpoints under ``/dpch/v1/``; ordinary ClickHouse clients use ``/``.
"""

from __future__ import annotations

import base64
import json
import os
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urlsplit

import urllib3

from dpch.accounting.accountant import BudgetStatus
from dpch.accounting.ledger import LedgerEntry
from dpch.errors import ConfigError, DpchError, PolicyError
from dpch.pipeline.report import Release
from dpch.server.wire import (
    RemoteExplanation,
    budget_from_wire,
    error_from_wire,
    explanation_from_wire,
    release_from_wire,
)

DEFAULT_PORT = 8123


@dataclass(frozen=True)
class RemoteColumn:
    """A column of a table's policy as the gateway describes it."""

    name: str
    type: str
    text: str

    def describe(self) -> str:
        return self.text


@dataclass(frozen=True)
class RemoteTable:
    """A table's policy as the gateway describes it (what ``\\tables``/``\\policy`` show); a
    :class:`dpch.api.TableInfo`."""

    table: str
    public: bool
    privacy_unit: str | None
    columns: dict[str, RemoteColumn]
    text: str
    data: dict[str, Any]

    @classmethod
    def from_wire(cls, data: dict[str, Any]) -> RemoteTable:
        """The table as :meth:`dpch.server.gateway.Gateway.table_policies` sends it."""
        columns = {name: RemoteColumn(name, c["type"], c.get("describe", "")) for name, c in data["columns"].items()}
        policy = {k: v for k, v in data.items() if k != "describe"}
        policy["columns"] = {name: {k: v for k, v in c.items() if k != "describe"}
                             for name, c in data["columns"].items()}
        return cls(data["table"], data["public"], data["privacy_unit"], columns, data.get("describe", ""), policy)

    def describe(self) -> str:
        return self.text

    def as_dict(self) -> dict[str, Any]:
        return dict(self.data)


class RemoteStore:
    """Where a remote session's data lives: a gateway and one of its databases (a :class:`dpch.api.Store`)."""

    def __init__(self, url: str, database: str) -> None:
        self.url = url
        self.database = database

    def describe(self) -> str:
        return f"dpch gateway at {self.url}"


class RemoteLedger:
    """The budget view of a remote session (what ``dpch budget`` and ``\\budget`` read; a
    :class:`dpch.api.Ledger`)."""

    def __init__(self, session: RemoteSession) -> None:
        self._session = session
        self.analyst = session.analyst

    def status(self, *, recent: int = 5) -> BudgetStatus:
        return self._session.budget_status(recent)

    def recent(self, limit: int = 10) -> list[LedgerEntry]:
        return list(self._session.budget_status(limit).recent)


class RemoteSession:
    """A private session through a ``dpch serve`` gateway (see :func:`connect_remote`)."""

    #: queries are charged by the gateway, not in this process (:class:`dpch.api.PrivateSession`)
    in_process = False

    def __init__(self, url: str, *, user: str, password: str, database: str | None = None,
                 options: dict[str, Any] | None = None, timeout: float = 60.0) -> None:
        self.url = url.rstrip("/")
        self.analyst = user
        self.database = database
        self.options = dict(options or {})
        auth = base64.b64encode(f"{user}:{password}".encode()).decode()
        self._headers = {"Authorization": f"Basic {auth}", "Content-Type": "application/json"}
        self._pool = urllib3.PoolManager(maxsize=4, timeout=urllib3.Timeout(connect=5.0, read=timeout),
                                         retries=False)
        tables = self._call("tables", {})
        self.engine = RemoteStore(self.url, tables["database"])
        self.accountant = RemoteLedger(self)

    def _call(self, endpoint: str, payload: dict[str, Any]) -> Any:
        if self.database:
            payload = {"database": self.database, **payload}
        try:
            response = self._pool.request("POST", f"{self.url}/dpch/v1/{endpoint}",
                                          body=json.dumps(payload).encode(), headers=self._headers)
        except urllib3.exceptions.HTTPError as exc:
            raise ConfigError(f"cannot reach the dpch gateway at {self.url} ({type(exc).__name__})",
                              hint="check the address, and that `dpch serve` runs there") from None
        if response.status != 200:
            raise _error(response.status, response.data)
        return json.loads(response.data)

    # -- the PrivateSession interface ------------------------------------------------------------

    def query(self, sql: str, **options: Any) -> Release:
        """Answers ``sql`` privately through the gateway (same options as Session.query)."""
        return self.query_with_types(sql, **options)[0]

    def query_with_types(self, sql: str, **options: Any) -> tuple[Release, list[str]]:
        """:meth:`query` and the ClickHouse types of the release's columns (as the gateway planned them)."""
        return release_from_wire(self._call("release", {"sql": sql, "options": {**self.options, **options}}))

    def refine(self, release_id: str | None = None, *, accuracy: float | None = None,
               relative_error: float | None = None, max_epsilon: float | None = None) -> Release:
        """A less noisy version of an accuracy-first answer, continued on the gateway (see
        :meth:`dpch.session.Session.refine`); charged only the increment."""
        data = self._call("refine", {"release_id": release_id, "accuracy": accuracy,
                                     "relative_error": relative_error, "max_epsilon": max_epsilon})
        return release_from_wire(data)[0]

    def explain(self, sql: str, **options: Any) -> RemoteExplanation:
        """What ``query(sql)`` would do and cost, as the gateway plans it; spends nothing."""
        return explanation_from_wire(self._call("explain", {"sql": sql, "options": {**self.options, **options}}))

    def budget(self) -> BudgetStatus:
        return self.budget_status(0)

    def budget_status(self, recent: int) -> BudgetStatus:
        """The analyst's budget with the last ``recent`` releases."""
        return budget_from_wire(self._call("budget", {"recent": recent})["status"])

    def tables(self) -> list[RemoteTable]:
        return [RemoteTable.from_wire(t) for t in self._call("tables", {})["tables"]]

    def table_policy(self, table: str) -> RemoteTable:
        for t in self.tables():
            if t.table == table:
                return t
        raise PolicyError(f"table {table!r} does not exist in database {self.engine.database!r} "
                          "or has no privacy policy",
                          hint="SHOW TABLES lists them (or `\\tables` in the shell)")

    def close(self) -> None:
        self._pool.clear()

    def __enter__(self) -> RemoteSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _error(status: int, body: bytes) -> DpchError:
    """The dpch error a gateway's JSON error body carries (its kind, message, hint and fields)."""
    try:
        data = json.loads(body)["error"]
    except (ValueError, KeyError, TypeError):  # not the gateway's JSON: a proxy in between, or not dpch
        return DpchError(f"the gateway answered HTTP {status} without a dpch error",
                         hint="check that the address is a `dpch serve` gateway")
    return error_from_wire(data)


def parse_remote_dsn(dsn: str) -> tuple[str, str | None, str | None, str | None]:
    """``dpch://[user[:password]@]host[:port][/database]`` → (http URL, user, password, database)."""
    parts = urlsplit(dsn)
    if parts.scheme not in ("dpch", "dpchs") or not parts.hostname:
        raise ConfigError(f"not a gateway DSN: {dsn!r}", hint="use dpch://host:port[/database]")
    scheme = "https" if parts.scheme == "dpchs" else "http"
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    url = f"{scheme}://{host}:{parts.port or DEFAULT_PORT}"
    user = unquote(parts.username) if parts.username else None
    password = unquote(parts.password) if parts.password else None
    database = parts.path.strip("/") or None
    return url, user, password, database


def connect_remote(dsn: str, *, analyst: str | None = None, password: str | None = None,
                   database: str | None = None, options: dict[str, Any] | None = None) -> RemoteSession:
    """Opens a :class:`RemoteSession` on the gateway at ``dsn``. ``analyst`` is the gateway user
    name (default: the DSN's user, else ``default``); ``password`` its password (default: the
    DSN's, else ``$DPCH_PASSWORD``)."""
    url, dsn_user, dsn_password, dsn_database = parse_remote_dsn(dsn)
    user = analyst if analyst not in (None, "default") else (dsn_user or analyst or "default")
    secret = password if password is not None else (dsn_password or os.environ.get("DPCH_PASSWORD", ""))
    return RemoteSession(url, user=user, password=secret, database=database or dsn_database, options=options)
