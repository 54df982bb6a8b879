"""The ``dpch://host:port`` remote session: an analyst's Session served by a ``dpch serve`` gateway.

``dpch.connect("dpch://host:port/db", analyst="ana", password="...")`` returns a
:class:`RemoteSession` with the same methods as an in-process :class:`~dpch.session.Session`
(``query``, ``explain``, ``budget``, ``tables``, ``table_policy``) and the same
:class:`~dpch.pipeline.report.Release` results (values, intervals, cost, budget left). It speaks the
gateway's JSON endpoints under ``/dpch/v1/``; ordinary ClickHouse clients use ``/``.
"""

from __future__ import annotations

import base64
import json
import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from urllib.parse import unquote, urlsplit

import urllib3

from dpch.accounting.accountant import BudgetStatus
from dpch.errors import (
    AnalystLocked,
    BudgetExceeded,
    ConfigError,
    DpchError,
    ExecutionError,
    ParseError,
    PolicyError,
    QueryFailedAfterCharge,
    QueryRejected,
    StoreLocked,
)
from dpch.pipeline.report import Release
from dpch.privacy.cost import PrivacyCost
from dpch.server.wire import budget_from_wire, release_from_wire

DEFAULT_PORT = 8123
_BODY = re.compile(r"^Code: (\d+)\. DB::Exception: (?:dpch: )?(.*?)\. \([A-Z_]+\) \(version [^)]*\)\s*$", re.DOTALL)
_HINT = re.compile(r"^(.*) \(hint: (.*)\)$", re.DOTALL)
_CODE_ERRORS: dict[int, type[DpchError]] = {
    62: ParseError, 201: BudgetExceeded, 497: QueryRejected, 60: PolicyError, 36: ConfigError,
    202: StoreLocked, 1002: ExecutionError, 516: ConfigError, 81: ConfigError, 115: QueryRejected,
    291: AnalystLocked, 1001: QueryFailedAfterCharge,
}


@dataclass(frozen=True)
class RemoteTable:
    """A table's policy as the gateway describes it (what ``\\tables``/``\\policy`` show)."""

    table: str
    public: bool
    privacy_unit: str | None
    columns: dict[str, dict[str, Any]]
    text: str

    def describe(self) -> str:
        return self.text

    def as_dict(self) -> dict[str, Any]:
        return {"table": self.table, "public": self.public, "privacy_unit": self.privacy_unit,
                "columns": self.columns}


@dataclass(frozen=True)
class RemoteEntry:
    """One recent release as the gateway's ledger records it."""

    release_id: str
    time: datetime
    dataset: str
    mechanism: str
    status: str
    cost: PrivacyCost


@dataclass(frozen=True)
class _Explanation:
    text: str

    def describe(self) -> str:
        return self.text


class _RemoteEngine:
    def __init__(self, url: str, database: str | None) -> None:
        self.url = url
        self.database = database or "default"
        self.embedded = False

    def describe(self) -> str:
        return f"dpch gateway at {self.url}"


class _RemoteAccountant:
    """The budget view of a remote session (what ``dpch budget`` and ``\\budget`` read)."""

    def __init__(self, session: RemoteSession) -> None:
        self._session = session
        self.analyst = session.analyst

    def recent(self, limit: int = 10) -> list[RemoteEntry]:
        return self._session._budget(limit)[1]

    def status(self, recent: int = 0) -> BudgetStatus:
        return self._session._budget(recent)[0]


class RemoteSession:
    """A private session through a ``dpch serve`` gateway (see :func:`connect_remote`)."""

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
        self.engine = _RemoteEngine(self.url, database)
        self.accountant = _RemoteAccountant(self)
        self._types: list[str] = []
        tables = self._call("tables", {})
        self.engine.database = tables["database"]

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
            raise _error(response.status, response.headers.get("X-ClickHouse-Exception-Code"),
                         response.data.decode("utf-8", errors="replace"))
        return json.loads(response.data)

    # -- the Session interface -------------------------------------------------------------------

    def query(self, sql: str, **options: Any) -> Release:
        """Answers ``sql`` privately through the gateway (same options as Session.query)."""
        data = self._call("release", {"sql": sql, "options": {**self.options, **options}})
        release, self._types = release_from_wire(data)
        return release

    def refine(self, release_id: str | None = None, *, accuracy: float | None = None,
               relative_error: float | None = None, max_epsilon: float | None = None) -> Release:
        """A less noisy version of an accuracy-first answer, continued on the gateway (see
        :meth:`dpch.session.Session.refine`); charged only the increment."""
        data = self._call("refine", {"release_id": release_id, "accuracy": accuracy,
                                     "relative_error": relative_error, "max_epsilon": max_epsilon})
        release, self._types = release_from_wire(data)
        return release

    def query_with_types(self, sql: str, **options: Any) -> tuple[Release, list[str]]:
        release = self.query(sql, **options)
        return release, list(self._types)

    def explain(self, sql: str, **options: Any) -> _Explanation:
        data = self._call("explain", {"sql": sql, "options": {**self.options, **options}})
        return _Explanation(data["describe"])

    def budget(self) -> BudgetStatus:
        return self._budget(0)[0]

    def _budget(self, recent: int) -> tuple[BudgetStatus, list[RemoteEntry]]:
        data = self._call("budget", {"recent": recent})
        entries = [RemoteEntry(e["release_id"], datetime.fromisoformat(e["time"]), e["dataset"], e["mechanism"],
                               e["status"], PrivacyCost(e["epsilon"], e["delta"])) for e in data["recent"]]
        return budget_from_wire(data["status"]), entries

    def tables(self) -> list[RemoteTable]:
        data = self._call("tables", {})
        return [RemoteTable(t["table"], t["public"], t["privacy_unit"], t["columns"], t["describe"])
                for t in data["tables"]]

    def table_policy(self, table: str) -> RemoteTable:
        for t in self.tables():
            if t.table == table:
                return t
        raise PolicyError(f"table {table!r} does not exist in database {self.engine.database!r} "
                          "or has no privacy policy",
                          hint="list tables with `dpch policy show` or `\\tables` in the shell")

    def close(self) -> None:
        self._pool.clear()

    def __enter__(self) -> RemoteSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _error(status: int, code: str | None, body: str) -> DpchError:
    """The dpch error a gateway's ClickHouse-style error body stands for."""
    match = _BODY.match(body.strip())
    text = match.group(2) if match else body.strip()[:500]
    hint = None
    if (h := _HINT.match(text)) is not None:
        text, hint = h.group(1), h.group(2).rstrip(".")
    kind = _CODE_ERRORS.get(int(code), DpchError) if code and code.isdigit() else DpchError
    if code == "516":
        return ConfigError(f"the gateway refused the credentials: {text}",
                           hint="check the analyst name and password (the gateway's [users] config)")
    return kind(text, hint=hint)


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
    import os

    url, dsn_user, dsn_password, dsn_database = parse_remote_dsn(dsn)
    user = analyst if analyst not in (None, "default") else (dsn_user or analyst or "default")
    secret = password if password is not None else (dsn_password or os.environ.get("DPCH_PASSWORD", ""))
    return RemoteSession(url, user=user, password=secret, database=database or dsn_database, options=options)
