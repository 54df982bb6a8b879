"""An analyst's admission state: what the privacy filters decide from, kept in step with every ledger row.

:class:`AnalystState` is the state of one analyst on one store, as the in-process admission owner
keeps it (:class:`~dpch.accounting.admission.InProcessAdmission`): every release at its latest row,
loaded from the ledger once, and per scope (the analyst's and each dataset's), filter and window the
running totals admission and status read (:class:`ScopeTotals`, O(1) each, :mod:`.tally`).
:class:`~dpch.accounting.chain.ChainState` is the same state without the history, as every process
shares it through ClickHouse Keeper.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from datetime import datetime
from itertools import islice
from typing import Any

from dpch.accounting.budget import Budget, BudgetSetting
from dpch.accounting.filters import PrivacyFilter, make_filter
from dpch.accounting.ledger import LedgerEntry
from dpch.accounting.locks import AnalystLock
from dpch.accounting.periods import Clock, Period, as_utc
from dpch.accounting.tally import ExactSum
from dpch.privacy.cost import ZCDP, ApproxDP, PrivacyCost


class ScopeTotals:
    """One scope's running totals under one filter: what admission and status read, O(1) each."""

    def __init__(self, flt: PrivacyFilter) -> None:
        self.flt = flt
        #: every release at its counted cost (a reservation at its worst case): admission, remaining
        self.counted = flt.tally()
        #: releases no longer reserved (settled, voided, failed): the odometer ``spent``
        self.settled = flt.tally()
        #: Σ worst ε, δ, ρ of reservations still open, in the filter's units (the status' ``reserved``:
        #: :meth:`PrivacyFilter.reserved_terms`, what admission counts for them)
        self.reserved = (ExactSum(), ExactSum(), ExactSum())
        #: releases not voided
        self.releases = 0

    def add(self, entry: LedgerEntry, sign: int = 1) -> None:
        """Counts ``entry`` at its latest row (``sign`` = −1: uncounts it, before its next row)."""
        self.counted.add(entry.counted, sign)
        if entry.status == "reserved":
            for total, term in zip(self.reserved, self.flt.reserved_terms(entry.counted), strict=True):
                total.add(term, sign)
        else:
            self.settled.add(entry.counted, sign)
        if entry.status != "voided":
            self.releases += sign

    def extend(self, entries: list[LedgerEntry]) -> None:
        """Counts every entry of ``entries`` into these fresh totals (the rebuild; equal to adding them one by one)."""
        counted = [e.counted for e in entries]
        self.counted.extend(counted)
        if not any(e.status == "reserved" for e in entries):
            # the usual history (no reservation open): the settled tally is the counted one, built once
            self.settled = self.counted.copy()
        else:
            self.settled.extend([c for c, e in zip(counted, entries, strict=True) if e.status != "reserved"])
            for e in entries:
                if e.status == "reserved":
                    for total, term in zip(self.reserved, self.flt.reserved_terms(e.counted), strict=True):
                        total.add(term)
        self.releases += sum(1 for e in entries if e.status != "voided")

    def to_data(self) -> dict[str, Any]:
        """These totals as plain data, exactly (:meth:`~dpch.accounting.tally.Tally.to_data`)."""
        return {"counted": self.counted.to_data(), "settled": self.settled.to_data(),
                "reserved": [t.to_data() for t in self.reserved], "releases": self.releases}

    @classmethod
    def from_data(cls, flt: PrivacyFilter, data: dict[str, Any]) -> ScopeTotals:
        """The totals :meth:`to_data` wrote, under ``flt`` (any filter of the same name and options:
        the terms a release adds do not depend on the budget)."""
        totals = cls(flt)
        totals.counted = flt.tally().load(data["counted"])
        totals.settled = flt.tally().load(data["settled"])
        totals.reserved = (ExactSum.from_data(data["reserved"][0]), ExactSum.from_data(data["reserved"][1]),
                           ExactSum.from_data(data["reserved"][2]))
        totals.releases = int(data["releases"])
        return totals

    def reserved_cost(self) -> PrivacyCost:
        """The open reservations in the filter's units (ρ only where the filter has a ρ budget)."""
        eps, delta, rho = (t.value() for t in self.reserved)
        return PrivacyCost.of(ApproxDP(eps, delta), ZCDP(rho) if self.flt.counts_rho else None)


class AnalystState:
    """One analyst's admission state on one store, as the in-process owner keeps it: every release at
    its latest row (loaded from the ledger once), the budget settings, the lock, and the running
    totals built from the releases on first use. Callers hold :attr:`lock` (or the admission store
    serialises them: :mod:`dpch.accounting.admission`)."""

    def __init__(self, entries: list[LedgerEntry], settings: dict[str, BudgetSetting],
                 locked: AnalystLock | None = None) -> None:
        self.lock = threading.Lock()
        self.entries: dict[str, LedgerEntry] = {}
        #: how many non-voided releases each filter name admitted (the ledger's filter, in O(1))
        self.filter_counts: dict[str, int] = {}
        #: scope → (filter, window) → running totals over the releases admitted in ``window`` (None: all
        #: of them); built on first use, then kept in step by :meth:`put`
        self.totals: dict[str, dict[tuple[Any, Period | None], ScopeTotals]] = {}
        self._filters: dict[tuple[str, str, Budget], PrivacyFilter] = {}
        #: the latest admission time of any release (the clock is monotone from it: :meth:`now`)
        self.last_time: datetime | None = None
        for e in entries:
            self.put(e)
        self.settings = settings
        #: when the budget rows ``settings`` reflect were written (ISO text of the latest ``set_at``; "" unknown)
        self.settings_at = ""
        #: the analyst's lock, read from ``dpch_locks`` with the ledger and kept in step with this
        #: process's trips and unlocks (this process is the single admission owner of the ledger,
        #: docs/design.md "One process per store"); a trip holds here even if its row could not be written
        self.locked = locked

    def put(self, entry: LedgerEntry, seq: int = 1, row: LedgerEntry | None = None) -> None:
        """Records ``entry`` as its release's latest row: its old row is uncounted from every running
        total of the scopes it reads, the new one counted (callers hold :attr:`lock`). ``seq`` is the
        row's ledger seq and ``row`` the row as written when it differs from ``entry`` (a settle's time);
        the shared state records them (:meth:`ChainState.put`), this one keeps no rows."""
        old = self.entries.get(entry.release_id)
        if old is not None:
            self._count(old, -1)
        self.entries[entry.release_id] = entry
        self._count(entry, 1)
        if self.last_time is None or entry.time > self.last_time:
            self.last_time = entry.time

    def confirm(self, durable: set[tuple[str, int]]) -> None:
        """Rows known to be durable (the in-process state keeps no rows: nothing to forget)."""

    def unconfirmed(self, before: float) -> list[tuple[tuple[str, int], LedgerEntry]]:
        """Rows counted here but not known to be durable, recorded before wall time ``before`` (none:
        the in-process owner writes every row itself, and its state dies with it)."""
        return []

    def now(self, clock: Clock) -> datetime:
        """The admission time: ``clock()``, but never before the last admission (callers hold
        :attr:`lock`), so periods only move forward (a clock stepped back admits at the last time)."""
        t = as_utc(clock())
        return t if self.last_time is None or t > self.last_time else self.last_time

    def _count(self, entry: LedgerEntry, sign: int) -> None:
        if entry.status != "voided" and entry.filter:
            n = self.filter_counts.get(entry.filter, 0) + sign
            if n:
                self.filter_counts[entry.filter] = n
            else:
                self.filter_counts.pop(entry.filter, None)
        for scope in ("", *entry.scopes):
            for (_, window), totals in self.totals.get(scope, {}).items():
                # a release counts in the period of its admission time, whenever it is settled
                if window is None or window.contains(entry.time):
                    totals.add(entry, sign)

    def filter(self, name: str, options: dict[str, Any] | None, budget: Budget) -> PrivacyFilter:
        """The filter ``name`` on ``budget`` (one object per configuration: its totals are keyed by it)."""
        key = (name, json.dumps(options or {}, sort_keys=True, default=repr), budget)
        flt = self._filters.get(key)
        if flt is None:
            flt = self._filters[key] = make_filter(name, budget, options)
        return flt

    def scope_totals(self, scope: str, flt: PrivacyFilter, window: Period | None = None) -> ScopeTotals:
        """``scope``'s running totals under ``flt`` ("" is the analyst's) over the releases admitted
        in ``window`` (None: every release), built from the history once (the one O(history) step,
        on first use after the store is opened or the budget changed). A period that begins after
        the last admission starts empty, in O(1): that is the switch at a period boundary, and it
        forgets the previous period's totals (callers hold :attr:`lock`)."""
        by_window = self.totals.setdefault(scope, {})
        totals = by_window.get((flt, window))
        if totals is not None:
            return totals
        totals = ScopeTotals(flt)
        if window is not None:
            for key in [k for k in by_window if k[0] is flt and k[1] is not None]:
                del by_window[key]  # an earlier period of this scope: no admission reads it again
        if window is None or self.last_time is None or self.last_time >= window.start:
            totals.extend([e for e in self.entries.values()
                           if (not scope or scope in e.scopes) and (window is None or window.contains(e.time))])
        by_window[(flt, window)] = totals
        return totals

    def drop_totals(self) -> None:
        """Forgets every running total (after a budget change): the next use rebuilds what it needs."""
        self.totals.clear()
        self._filters.clear()

    def ledger_filter(self) -> str | None:
        """The filter the latest non-voided release was admitted under."""
        if not self.filter_counts:
            return None
        if len(self.filter_counts) == 1:  # the usual case: admission refuses a second filter
            return next(iter(self.filter_counts))
        for e in reversed(self.entries.values()):
            if e.status != "voided" and e.filter:
                return e.filter
        return None

    def recent(self, limit: int) -> list[LedgerEntry]:
        """The last ``limit`` releases, oldest first."""
        return list(islice(reversed(self.entries.values()), limit))[::-1]


class AnalystStates:
    """The analysts' filter states on one opening of a store, shared by all its sessions in this
    process: each loaded from the ledger once, then kept in step with every write. The store owns
    it (``engine.shared``), so it lives exactly as long as the store stays open."""

    def __init__(self) -> None:
        self._states: dict[tuple[str, str], AnalystState] = {}
        #: one lock per analyst for loading (kept, so that loads of one analyst never run twice at
        #: once, even across clear()): a load reads the ledger (O(history)), and must hold up only
        #: that analyst's first queries, never another analyst's
        self._loading: dict[tuple[str, str], threading.Lock] = {}
        self._lock = threading.Lock()

    def get(self, database: str, analyst: str, load: Callable[[], AnalystState]) -> AnalystState:
        """The analyst's state, loaded once (under that analyst's loading lock) on first use."""
        key = (database, analyst)
        with self._lock:
            state = self._states.get(key)
            if state is not None:
                return state
            loading = self._loading.setdefault(key, threading.Lock())
        with loading:
            with self._lock:
                state = self._states.get(key)
            if state is None:  # the first of this analyst's callers: the others wait here, then find it
                state = load()
                with self._lock:
                    self._states[key] = state
            return state

    def clear(self) -> None:
        """Drops every state: the next use re-reads the ledger."""
        with self._lock:
            self._states.clear()
