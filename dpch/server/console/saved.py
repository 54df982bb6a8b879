"""Saved queries: an analyst's named SQL texts, kept in dpch's own table ``dpch_console_queries``.

The table lives in the gateway's default database, beside the ledger; its rows are appended and
never changed (the latest row of an (analyst, name) wins, and a deletion is a row too), like the
budgets' table. Every endpoint is for the signed-in user's own analyst: no endpoint takes an
analyst name, so one analyst never sees, loads or deletes another's queries. A saved query is SQL
text only (and the database it was saved for); it holds no result.
"""

from __future__ import annotations

import threading
import time
import unicodedata
import weakref
from datetime import UTC, datetime
from typing import Any

from dpch.accounting.periods import as_utc
from dpch.server.console.requests import Call, ConsoleError, optional_text, text
from dpch.store.engine import Engine

#: dpch's own table of saved queries (in the gateway's default database)
SAVED_TABLE = "dpch_console_queries"
#: the longest name of a saved query (characters)
MAX_NAME = 100
#: the longest SQL text a saved query holds (characters; as long as a query the console runs)
MAX_SQL = 100_000
#: the most saved queries one analyst keeps
MAX_SAVED = 500

#: the engines whose table exists (created once per gateway's engine)
_created: weakref.WeakKeyDictionary[Engine, bool] = weakref.WeakKeyDictionary()
_version_lock = threading.Lock()
_last_version = 0


def list_saved(call: Call) -> dict[str, Any]:
    """The analyst's saved queries by name (with the SQL, so the page loads one without asking again)."""
    return {"analyst": call.session.user.analyst, "queries": call.run(lambda: _queries(call))}


def save(call: Call) -> dict[str, Any]:
    """Saves ``sql`` under ``name`` (replacing the analyst's query of that name); the list after."""
    name = query_name(call.data)
    sql = text(call.data, "sql", limit=MAX_SQL)
    if not sql.strip():
        raise ConsoleError(400, "there is no SQL to save: write a query first")
    database = optional_text(call.data, "database") or ""
    if database:
        call.gateway.engine(database)  # a database this gateway serves (its error names them)

    def work() -> list[dict[str, Any]]:
        queries = _queries(call)
        if len(queries) >= MAX_SAVED and name not in {q["name"] for q in queries}:
            raise ConsoleError(400, f"you have {MAX_SAVED} saved queries, the most kept; delete one first")
        _append(call, name, sql.strip(), database, deleted=False)
        return _queries(call)

    return {"analyst": call.session.user.analyst, "saved": name, "queries": call.run(work)}


def delete(call: Call) -> dict[str, Any]:
    """Deletes the analyst's saved query ``name``; the list after (404 if the analyst has none of that name)."""
    name = query_name(call.data)

    def work() -> list[dict[str, Any]]:
        if name not in {q["name"] for q in _queries(call)}:
            raise ConsoleError(404, f"you have no saved query named {name!r}")
        _append(call, name, "", "", deleted=True)
        return _queries(call)

    return {"analyst": call.session.user.analyst, "deleted": name, "queries": call.run(work)}


def query_name(data: dict[str, Any]) -> str:
    """The ``name`` field: 1 to :data:`MAX_NAME` characters, no control characters, spaces trimmed."""
    value = data.get("name")
    if value is None:
        raise ConsoleError(400, "a saved query needs a name")
    if not isinstance(value, str):
        raise ConsoleError(400, "the name of a saved query must be a string")
    name = value.strip()
    if not name:
        raise ConsoleError(400, "the name of a saved query must not be empty")
    if len(name) > MAX_NAME:
        raise ConsoleError(400, f"the name of a saved query must be at most {MAX_NAME} characters "
                                f"(this one has {len(name)})")
    if any(unicodedata.category(ch).startswith("C") for ch in name):
        raise ConsoleError(400, "the name of a saved query must not contain control characters")
    return name


def _engine(call: Call) -> Engine:
    engine = call.gateway.engine(None)
    if not _created.get(engine):
        engine.create_table(
            SAVED_TABLE,
            "analyst String, name String, sql String, database String, time DateTime64(6, 'UTC'),"
            " version UInt64, deleted UInt8",
            "ORDER BY (analyst, name, version)"
            " COMMENT 'dpch: the console''s saved queries per analyst (append-only; the latest row wins)'")
        _created[engine] = True
    return engine


def _queries(call: Call) -> list[dict[str, Any]]:
    engine = _engine(call)
    rows = engine.query_rows(
        f"SELECT name, argMax(sql, version), argMax(database, version), argMax(time, version),"
        f" argMax(deleted, version) AS gone FROM {engine.table(SAVED_TABLE)}"
        " WHERE analyst = {a:String} GROUP BY name HAVING gone = 0 ORDER BY name",
        {"a": call.session.user.analyst})
    return [{"name": r[0], "sql": r[1], "database": r[2] or None, "time": as_utc(r[3]).isoformat()} for r in rows]


def _append(call: Call, name: str, sql: str, database: str, *, deleted: bool) -> None:
    engine = _engine(call)
    engine.insert(SAVED_TABLE, [[call.session.user.analyst, name, sql, database, datetime.now(UTC),
                                 _next_version(), int(deleted)]],
                  ["analyst", "name", "sql", "database", "time", "version", "deleted"])


def _next_version() -> int:
    """Increasing in this process (nanoseconds since the epoch, or one more than the last): a save
    and a deletion of one name in the same instant are still ordered."""
    global _last_version
    with _version_lock:
        _last_version = max(_last_version + 1, time.time_ns())
        return _last_version
