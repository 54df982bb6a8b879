"""An analyst's admission state as every dpch process shares it: O(1) to load, one value in Keeper.

The in-process owner (:class:`~dpch.accounting.state.AnalystState`) keeps every release of an analyst
and can rebuild any total from them. Shared through ClickHouse Keeper
(:class:`~dpch.accounting.admission.KeeperAdmission`), the state must be small enough to be read and
written whole at every admission, so :class:`ChainState` keeps only what the filters decide from and
what a later row needs:

- the running totals per scope, filter (name and options: a release's terms do not depend on the
  budget) and period, exactly (:mod:`.tally`);
- the open reservations (a settle uncounts the reservation's worst case: only once, so a settle of a
  release that is no longer open changes nothing), watches' reservations among them;
- the lock (the tripwire), the budget settings and the time of the latest budget row they reflect;
- the monotone admission clock (the latest admission time: every process admits at or after it, so a
  process whose clock is behind cannot admit into a period that has already ended elsewhere);
- the filter the ledger was written under (how many non-voided releases each filter admitted);
- the latest :data:`KEEP` releases (a status reads them without scanning the ledger);
- the ledger rows this state counts that are not yet known to be durable in ``dpch_ledger``
  (``rows``): a process admits (the state is written), then writes the rows; if it dies in between,
  the reconciler writes them from here (a crash loses budget, never privacy, and the ledger — the
  audit log — never misses a counted release). Rows leave the state once durable.

The history itself is the ledger: a total the state does not have (the analyst's first use, a new
filter option or renewal schedule) is built once from the ledger's rows and the unconfirmed ones
(:meth:`ChainState.history_entries`), then kept here.

Serialisation is JSON (:meth:`ChainState.to_data`). Floats survive it exactly (Python writes the
shortest repr that reads back as the same double), so the totals after a round trip are bit for bit
the totals before it (tests/accounting/test_chain_state.py).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import asdict, replace
from datetime import datetime
from typing import Any

from dpch.accounting.budget import Budget, BudgetSetting, Renewal
from dpch.accounting.filters import PrivacyFilter, make_filter
from dpch.accounting.ledger import FAILED_SEQ, LedgerEntry
from dpch.accounting.locks import AnalystLock
from dpch.accounting.periods import Period, as_utc
from dpch.accounting.state import AnalystState, ScopeTotals
from dpch.privacy.cost import PrivacyCost

#: the layout of the serialised state (bumped if it changes incompatibly)
VERSION = 1
#: the latest releases kept in the state, so a status (``dpch budget``, a release's budget) reads no ledger
KEEP = 16
#: a budget any filter accepts, for the template a stored tally is read into (terms do not depend on it)
_TEMPLATE_BUDGET = Budget(1.0, 1e-6)

#: loads every release of the analyst as the ledger holds it (O(history); rebuilds only)
History = Callable[[], list[LedgerEntry]]
#: loads the analyst's latest ``limit`` releases from the ledger, oldest first
Recent = Callable[[int], list[LedgerEntry]]


class ChainState(AnalystState):
    """One analyst's shared admission state (module docstring). ``history`` and ``recent`` read the
    ledger; :meth:`put` records each counted row in ``rows`` until it is known to be durable."""

    def __init__(self, settings: dict[str, BudgetSetting], locked: AnalystLock | None = None, *,
                 history: History, recent: Recent) -> None:
        super().__init__([], settings, locked)
        #: open reservations (status ``reserved``) by release id
        self.open: dict[str, LedgerEntry] = {}
        #: (release id, seq) → (the entry as counted, the row's time if it differs, wall time recorded)
        self.rows: dict[tuple[str, int], tuple[LedgerEntry, datetime | None, float]] = {}
        #: the filter of the latest non-voided release (what :meth:`ledger_filter` answers)
        self.last_filter: str | None = None
        #: the latest :data:`KEEP` releases at their latest rows, oldest first; ``complete``: they are all of them
        self.latest: list[LedgerEntry] = []
        self.complete = True
        self._history = history
        self._recent = recent
        #: filter object → its configuration (name, options as JSON): what totals are keyed by
        self._configs: dict[int, tuple[str, str]] = {}

    # -- counting ------------------------------------------------------------------------------------

    def put(self, entry: LedgerEntry, seq: int = 1, row: LedgerEntry | None = None) -> None:
        """Counts ``entry`` as its release's row ``seq`` (1 first, 2 settled, 3 failed), once: a first
        row of a release already counted, or a later row of a release that is no longer open (another
        process settled it, or this change is being applied again), changes nothing."""
        rid = entry.release_id
        if seq == 1:
            if rid in self.open or (rid, 1) in self.rows:
                return
            old: LedgerEntry | None = None
        else:
            old = self.open.get(rid)
            if old is None:
                if seq != FAILED_SEQ:
                    return
                # a fixed-cost release failing after its charge counts what it counted (its cost)
                old = replace(entry, status="charged")
        if old is not None:
            self._count(old, -1)
        self._count(entry, 1)
        if entry.status == "reserved":
            self.open[rid] = entry
        else:
            self.open.pop(rid, None)
        if entry.status != "voided" and entry.filter:
            self.last_filter = entry.filter
        if self.last_time is None or entry.time > self.last_time:
            self.last_time = entry.time
        self._remember(entry)
        self.rows[(rid, seq)] = (entry, row.time if row is not None and row.time != entry.time else None, time.time())

    def _remember(self, entry: LedgerEntry) -> None:
        for i, known in enumerate(self.latest):
            if known.release_id == entry.release_id:
                self.latest[i] = entry
                return
        self.latest.append(entry)
        self.latest.sort(key=lambda e: (e.time, e.release_id))
        if len(self.latest) > KEEP:
            del self.latest[:-KEEP]
            self.complete = False

    def confirm(self, durable: set[tuple[str, int]]) -> None:
        """Forgets the rows in ``durable`` (known to be in the ledger)."""
        for key in durable:
            self.rows.pop(key, None)

    def unconfirmed(self, before: float) -> list[tuple[tuple[str, int], LedgerEntry]]:
        """The rows recorded before wall time ``before`` and not known to be durable, as written."""
        return [(key, self.row(key)) for key, (_, _, at) in self.rows.items() if at <= before]

    def row(self, key: tuple[str, int]) -> LedgerEntry:
        """Row ``key`` as it is written to the ledger."""
        entry, row_time, _ = self.rows[key]
        return replace(entry, time=row_time) if row_time is not None else entry

    # -- totals ------------------------------------------------------------------------------------

    def filter(self, name: str, options: dict[str, Any] | None, budget: Budget) -> PrivacyFilter:
        flt = super().filter(name, options, budget)
        self._configs[id(flt)] = (name, _options_key(options))
        return flt

    def scope_totals(self, scope: str, flt: PrivacyFilter, window: Period | None = None) -> ScopeTotals:
        """As :meth:`AnalystState.scope_totals`, keyed by the filter's configuration (not its budget);
        a missing total is built from the ledger and the unconfirmed rows (:meth:`history_entries`)."""
        config = self._configs.get(id(flt)) or (flt.name, _options_key(None))
        by_window = self.totals.setdefault(scope, {})
        totals = by_window.get((config, window))
        if totals is not None:
            totals.flt = flt
            return totals
        totals = ScopeTotals(flt)
        if window is not None:
            for key in [k for k in by_window if k[0] == config and k[1] is not None]:
                del by_window[key]  # an earlier period of this scope: no admission reads it again
        if window is None or self.last_time is None or self.last_time >= window.start:
            totals.extend([e for e in self.history_entries()
                           if (not scope or scope in e.scopes) and (window is None or window.contains(e.time))])
        by_window[(config, window)] = totals
        return totals

    def drop_totals(self) -> None:
        """Nothing to drop: totals are keyed by filter configuration and period, which a budget change
        keeps (a new option or schedule builds its own totals when first used)."""
        self._filters.clear()
        self._configs.clear()

    def history_entries(self) -> list[LedgerEntry]:
        """Every release at its latest row: the ledger's, with the unconfirmed rows over them (a
        ``failed`` row in the ledger is final), oldest first."""
        merged = {e.release_id: e for e in self._history()}
        for (rid, seq), (entry, _, _) in sorted(self.rows.items(), key=lambda item: item[0][1]):
            known = merged.get(rid)
            if known is None or known.status != "failed" or seq == FAILED_SEQ:
                merged[rid] = entry
        return sorted(merged.values(), key=lambda e: (e.time, e.release_id))

    def ledger_filter(self) -> str | None:
        return self.last_filter if self.filter_counts else None

    def recent(self, limit: int) -> list[LedgerEntry]:
        """The latest ``limit`` releases, oldest first: the ledger's, with the unconfirmed rows over them."""
        if limit <= 0:
            return []
        if limit <= len(self.latest) or self.complete:
            return self.latest[-limit:]
        merged = {e.release_id: e for e in self._recent(limit)}
        for (rid, _), (entry, _, _) in sorted(self.rows.items(), key=lambda item: item[0][1]):
            merged[rid] = entry
        return sorted(merged.values(), key=lambda e: (e.time, e.release_id))[-limit:]

    # -- serialisation -----------------------------------------------------------------------------------

    def to_data(self) -> dict[str, Any]:
        """The state as plain data (JSON-safe), exact."""
        totals = []
        for scope, by_window in self.totals.items():
            for (config, window), t in by_window.items():
                totals.append([scope, config[0], config[1], _period_data(window), t.to_data()])
        return {
            "v": VERSION,
            "last_time": self.last_time.isoformat() if self.last_time else None,
            "locked": _lock_data(self.locked),
            "settings": {scope: _setting_data(s) for scope, s in self.settings.items()},
            "settings_at": self.settings_at,
            "filters": self.filter_counts,
            "last_filter": self.last_filter,
            "totals": totals,
            "open": [entry_data(e) for e in self.open.values()],
            "latest": [entry_data(e) for e in self.latest],
            "complete": self.complete,
            "rows": [[entry_data(e), seq, t.isoformat() if t else None, at]
                     for (_, seq), (e, t, at) in self.rows.items()],
        }

    def dumps(self) -> str:
        """:meth:`to_data` as compact JSON text (what Keeper holds)."""
        return json.dumps(self.to_data(), separators=(",", ":"), sort_keys=True)

    @classmethod
    def loads(cls, text: str, *, history: History, recent: Recent) -> ChainState:
        """The state :meth:`dumps` wrote."""
        data = json.loads(text)
        if data.get("v") != VERSION:
            raise ValueError(f"an admission state of layout {data.get('v')!r} (this dpch reads {VERSION})")
        state = cls({scope: _setting(d) for scope, d in data["settings"].items()}, _lock(data["locked"]),
                    history=history, recent=recent)
        state.settings_at = data["settings_at"]
        state.last_time = as_utc(datetime.fromisoformat(data["last_time"])) if data["last_time"] else None
        state.filter_counts = {k: int(v) for k, v in data["filters"].items()}
        state.last_filter = data["last_filter"]
        templates: dict[tuple[str, str], PrivacyFilter] = {}
        for scope, name, options, window, tdata in data["totals"]:
            config = (name, options)
            template = templates.get(config)
            if template is None:
                template = templates[config] = make_filter(name, _TEMPLATE_BUDGET, json.loads(options))
            state.totals.setdefault(scope, {})[(config, _period(window))] = ScopeTotals.from_data(template, tdata)
        for d in data["open"]:
            e = _entry(d)
            state.open[e.release_id] = e
        state.latest = [_entry(d) for d in data["latest"]]
        state.complete = bool(data["complete"])
        for d, seq, row_time, at in data["rows"]:
            e = _entry(d)
            state.rows[(e.release_id, int(seq))] = (e, as_utc(datetime.fromisoformat(row_time)) if row_time else None,
                                                    float(at))
        return state

    @classmethod
    def bootstrap(cls, entries: list[LedgerEntry], settings: dict[str, BudgetSetting], locked: AnalystLock | None,
                  settings_at: str, *, history: History, recent: Recent) -> ChainState:
        """The first shared state of an analyst, from the ledger (``entries``), budgets and locks: its
        clock, filter counts and open reservations (totals are built when first used)."""
        state = cls(settings, locked, history=history, recent=recent)
        state.settings_at = settings_at
        for e in entries:
            if e.status != "voided" and e.filter:
                state.filter_counts[e.filter] = state.filter_counts.get(e.filter, 0) + 1
                state.last_filter = e.filter
            if e.status == "reserved":
                state.open[e.release_id] = e
            if state.last_time is None or e.time > state.last_time:
                state.last_time = e.time
        state.latest = list(entries[-KEEP:])
        state.complete = len(entries) <= KEEP
        return state


def _options_key(options: dict[str, Any] | None) -> str:
    return json.dumps(options or {}, sort_keys=True, default=repr)


def _cost_data(c: PrivacyCost) -> dict[str, Any]:
    return asdict(c)


def entry_data(e: LedgerEntry) -> dict[str, Any]:
    """A ledger entry as plain data (the shared state's open reservations and unconfirmed rows)."""
    return {"id": e.release_id, "time": e.time.isoformat(), "analyst": e.analyst, "dataset": e.dataset,
            "query_hash": e.query_hash, "mechanism": e.mechanism, "status": e.status, "cost": _cost_data(e.cost),
            "worst": _cost_data(e.worst), "filter": e.filter, "datasets": list(e.datasets), "period": e.period}


def _entry(d: dict[str, Any]) -> LedgerEntry:
    return LedgerEntry(release_id=d["id"], time=as_utc(datetime.fromisoformat(d["time"])), analyst=d["analyst"],
                       dataset=d["dataset"], query_hash=d["query_hash"], mechanism=d["mechanism"], status=d["status"],
                       cost=PrivacyCost.from_dict(d["cost"]), worst=PrivacyCost.from_dict(d["worst"]),
                       filter=d["filter"], datasets=tuple(d["datasets"]), period=d["period"])


def _period_data(p: Period | None) -> list[str] | None:
    return None if p is None else [p.schedule, p.start.isoformat(), p.end.isoformat(), p.label]


def _period(d: list[str] | None) -> Period | None:
    if d is None:
        return None
    return Period(d[0], as_utc(datetime.fromisoformat(d[1])), as_utc(datetime.fromisoformat(d[2])), d[3])


def _lock_data(lock: AnalystLock | None) -> dict[str, Any] | None:
    if lock is None:
        return None
    return {"analyst": lock.analyst, "release_id": lock.release_id, "reason": lock.reason,
            "time": as_utc(lock.time).isoformat()}


def _lock(d: dict[str, Any] | None) -> AnalystLock | None:
    if d is None:
        return None
    return AnalystLock(d["analyst"], d["release_id"], d["reason"], as_utc(datetime.fromisoformat(d["time"])))


def _setting_data(s: BudgetSetting) -> dict[str, Any]:
    life = s.renewal.lifetime
    return {"epsilon": s.budget.epsilon, "delta": s.budget.delta, "dataset": s.dataset, "filter": s.filter,
            "options": s.options, "renew": s.renewal.schedule,
            "lifetime": None if life is None else [life.epsilon, life.delta]}


def _setting(d: dict[str, Any]) -> BudgetSetting:
    life = d["lifetime"]
    return BudgetSetting(Budget(d["epsilon"], d["delta"]), d["dataset"], d["filter"], d["options"],
                         Renewal(d["renew"], None if life is None else Budget(life[0], life[1])))
