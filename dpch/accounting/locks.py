"""Analyst locks (the tripwire, docs/design.md rule 5), stored beside the ledger (``dpch_locks``).

A release that fails *after* its charge may be an attack: an error raised only when some row
satisfies a condition the analyst chose is a noiseless one-bit oracle. So the first such failure
locks the analyst, durably and for every process reading the store, until the data owner has
looked at it (``dpch budget unlock``): an attacker learns at most one bit per owner intervention.

The table is append-only; an analyst's latest row wins (``locked`` true or false). ``reason`` is
internal (e.g. ClickHouse's error code name): the data owner sees it, the analyst never does.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from dpch.accounting.budget import whoami
from dpch.store.engine import Engine
from dpch.store.quoting import insert_values

LOCKS_TABLE = "dpch_locks"
_COLUMNS = (("analyst", "String"), ("locked", "Bool"), ("release_id", "String"), ("reason", "String"),
            ("time", "DateTime64(6, 'UTC')"), ("set_by", "String"))


@dataclass(frozen=True)
class AnalystLock:
    """Why and since when an analyst is locked."""

    analyst: str
    release_id: str
    reason: str
    time: datetime

    def as_dict(self, *, internal: bool) -> dict[str, Any]:
        """Plain data; ``reason`` only with ``internal`` (the data owner's view). No default: each caller
        says whose view it builds, so an analyst's view cannot gain the reason by omission."""
        data: dict[str, Any] = {"release_id": self.release_id, "time": self.time.isoformat()}
        if internal:
            data["reason"] = self.reason
        return data


class LockStore:
    """Reads and writes ``dpch_locks`` in the engine's database."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.table = engine.table(LOCKS_TABLE)
        engine.create_table(
            LOCKS_TABLE,
            "analyst String, locked Bool, release_id String, reason String, time DateTime64(6, 'UTC'), set_by String",
            "ORDER BY (analyst, time) COMMENT 'dpch: analysts locked by the tripwire (latest row wins)'")

    def get(self, analyst: str) -> AnalystLock | None:
        """The analyst's lock, or None if the analyst is not locked."""
        found = self._read("WHERE analyst = {a:String}", {"a": analyst})
        return found[0] if found else None

    def all(self) -> list[AnalystLock]:
        """Every locked analyst."""
        return self._read("", None)

    def _read(self, where: str, params: dict[str, Any] | None) -> list[AnalystLock]:
        rows = self.engine.query_rows(
            # ties in time: a lock wins over an unlock (fail closed)
            "SELECT analyst, argMax(locked, (time, locked)), argMax(release_id, (time, locked)),"
            f" argMax(reason, (time, locked)), max(time) FROM {self.table} {where}"
            " GROUP BY analyst ORDER BY analyst",
            params,
        )
        return [AnalystLock(r[0], r[2], r[3], r[4]) for r in rows if r[1]]

    def lock(self, analyst: str, *, release_id: str, reason: str) -> AnalystLock:
        """Durably locks ``analyst`` (one INSERT) and returns the lock."""
        return self._write(analyst, True, release_id, reason)

    def unlock(self, analyst: str) -> None:
        """Durably clears the analyst's lock (the data owner's action)."""
        self._write(analyst, False, "", "")

    def _write(self, analyst: str, locked: bool, release_id: str, reason: str) -> AnalystLock:
        now = datetime.now(UTC)
        # a literal VALUES row (dpch.store.quoting), like the ledger's; written at once, not grouped:
        # a lock is rare and must hold before anything else happens
        self.engine.command(insert_values(self.table, _COLUMNS, [(analyst, locked, release_id, reason, now, whoami())],
                                          self.engine.write_settings()))
        return AnalystLock(analyst, release_id, reason, now)
