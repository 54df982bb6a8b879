"""Admission: the filters' decision under one lock per analyst, and the durable ledger write.

The process that holds the store is the single admission owner for its ledger. Inside it,
every session of the same analyst shares one :class:`AnalystState` (history loaded from the
ledger once, then kept in step with each write), and admission is serialised by its lock, so
concurrent threads can never jointly overspend. The state keeps, per scope (the analyst's and each
dataset's), running totals in each filter's terms (:mod:`.tally`), built from the ledger on first
use after the store is opened and updated under the lock with every row, so admission and
:meth:`Accountant.status` cost the same at any number of past releases.

The lock covers the decision and the in-memory count only, never a query and (for a charge or a
reservation) not the ledger INSERT: a release is counted in memory under the lock, then its row is
written by the store's group commit (:mod:`.commit`), so many releases' rows share one INSERT. The
invariant that makes this safe: memory never counts less than the ledger holds. A new row only adds
to the count, so it is counted first and written after; a settle may lower a count (or raise it, ex
post), so its write and count stay together under the lock. An open reservation already counts at
its worst case, and a row whose INSERT failed stays counted until the store is reopened.

Two ways to spend:

- :meth:`Accountant.charge` — a fixed-cost release: admit and write ONE ``charged`` row.
  :meth:`Accountant.begin_charge` is the same with the write overlapped: it returns a
  :class:`PendingCharge` at once, the caller runs the aggregate while the row is written, and
  :meth:`PendingCharge.wait` (durable) comes before any noise is drawn or any failure acted on::

      pending = accountant.begin_charge(cost, datasets=..., query_hash=..., mechanism="laplace")
      with accountant.tripwire(pending):
          data = run_aggregate()            # overlaps the INSERT; nothing of it is acted on yet
          entry = pending.wait()            # durable (or LedgerWriteFailed: no noise, no trip)
          value = add_noise(data)
- :meth:`Accountant.reserve` — a release whose cost is known only afterwards (noise reduction,
  accuracy-first, Above Threshold): admit on the worst case and write a ``reserved`` row,
  then :meth:`Reservation.settle` with the realized cost (or :meth:`Reservation.void` if
  nothing was computed). Protocol: reserve (durable) → compute → settle (durable) → return::

      with accountant.reserve(mech.worst_cost, dataset=..., query_hash=..., mechanism="brownian") as r:
          value, realized = run(...)        # noise drawn only after the reservation is durable
          r.settle(realized)                # durable before the value is returned
      return value

  Leaving the ``with`` block on an exception without settling charges the worst case (the
  computation may have touched data); a crash leaves the reservation counted at its worst case.

A budget is per analyst, optionally also per dataset (``db.table``): all must admit. A release
counts in the scope of every private table it reads (``datasets``; a join names each table, a
self-join one), so a join cannot spend past any of its tables' budgets (docs/design.md rule 8).
An analyst with no budget set by the data owner is refused (:class:`~.budget.NoBudgetSet`), from the
budget table alone and before any charge, unless the accountant was given an explicit
``default_budget`` (``dpch demo``, the audit, tests).

Renewing budgets (``dpch budget set --renew daily|weekly|monthly [--lifetime-epsilon E]``): a scope's
filter then counts only the releases admitted in the current UTC calendar period (:mod:`.periods`),
and a lifetime cap, if set, is a second filter of the same kind over every release of every period.
A release must pass both. Why this is sound (docs/algorithms.md B1, B2; Rogers et al. 2016, Def 3.1
and Thm 3.4, and each filter's own theorem):

- a filter's guarantee holds against an adversary who chooses every round's parameters adaptively,
  from anything it has seen; a release the *other* filter refused is, to each filter, a round the
  adversary chose not to run (ε_i = δ_i = 0), and the refusal depends only on past costs and the
  public wall clock, never on data (docs/design.md rule 1). So the lifetime filter alone guarantees
  (E, Δ)-DP for everything ever released, whatever the period filters did;
- a period's filter sees exactly the releases admitted in that period, with everything released in
  earlier periods as the adversary's prior knowledge: those releases together are (ε, δ)-DP — the
  period's guarantee;
- without a lifetime cap, the periods compose sequentially: k periods of (ε, δ) each are (kε, kδ)-DP
  by basic composition over the periods (Thm 3.4 with δ; each period is one adaptive round with a
  budget fixed in advance). The guarantee over the lifetime is that sum — unbounded as periods
  pass — and ``dpch budget`` and the docs say so.

The period of a release is the one its *admission* time falls in (the wall clock read under the
analyst's lock, never data); a release admitted before a boundary and settled after it counts in
the period it was admitted in. The clock is injected (``clock=``, :data:`.periods.Clock`) and made
monotone per analyst (a clock stepping back admits at the last admission's time), so a release's
period never precedes an earlier release's and the rebuild from the ledger after a restart, which
counts the rows whose admission time falls in the current period, sees exactly what memory counted.
At a boundary the period's running totals restart empty, in O(1): no release can be in a period
that begins after the last admission.

The tripwire (docs/design.md rule 5): a release that fails after its charge may be an attack (an
error that fires only on some rows is a noiseless oracle). :meth:`Accountant.tripwire` wraps
everything that runs after the charge; on any failure it marks the release ``failed`` (still
counted), durably locks the analyst (:mod:`.locks`) and raises
:class:`~dpch.errors.QueryFailedAfterCharge`, one fixed sentence. While locked, every admission
raises :class:`~dpch.errors.AnalystLocked`, until the data owner runs ``dpch budget unlock``.
"""

from __future__ import annotations

import copy
import os
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from dpch.accounting.admission import AdmissionStore, KeeperAdmission, admission_for
from dpch.accounting.budget import NO_RENEWAL, Budget, BudgetStore, NoBudgetSet, Renewal
from dpch.accounting.commit import PendingWrite
from dpch.accounting.filters import DEFAULT_FILTER, PrivacyFilter, make_filter
from dpch.accounting.ledger import FAILED_SEQ, Ledger, LedgerEntry
from dpch.accounting.locks import AnalystLock, LockStore
from dpch.accounting.periods import Clock, Period, as_utc, period_of, utc_now
from dpch.accounting.state import AnalystState, AnalystStates
from dpch.accounting.watches import WatchStore
from dpch.errors import (
    AnalystLocked,
    BudgetExceeded,
    ConfigError,
    ExecutionError,
    LedgerWriteFailed,
    QueryFailedAfterCharge,
    ReservationClosed,
)
from dpch.privacy.cost import ZCDP, ApproxDP, PrivacyCost
from dpch.store.cancel import checkpoint
from dpch.store.engine import Engine, open_embedded_states

FILTER_ENV = "DPCH_FILTER"
_HINT = "ask for a smaller dp_epsilon, or ask the data owner for more budget"


def qualified_datasets(database: str, tables: Iterable[str]) -> tuple[str, ...]:
    """The dataset scopes (``db.table``) of a query's private tables, each once, in order."""
    return tuple(dict.fromkeys(f"{database}.{t}" for t in tables))


@dataclass(frozen=True)
class BudgetStatus:
    """A budget (the analyst's, or one dataset's): spent (odometer), reserved, remaining.

    ``spent`` is the filter's odometer over settled releases; ``reserved`` the worst cases of
    releases still running (or never settled) — open watches among them — in the filter's units: their
    worst ε and δ, and under a filter with a ρ budget the ρ admission counts for them (a watch's
    (ε, δ) converted to ε²/2); ``remaining`` what the filter would still admit
    (``epsilon``: the largest pure-ε release) with the reservations counted at worst.

    A renewing budget (``renewal`` "daily", "weekly" or "monthly") reports the current ``period``
    (its label; it ends at ``renews_at``): ``budget``, ``spent`` and ``releases`` are the period's, and
    ``lifetime`` the cap over all periods (None: the lifetime guarantee is unbounded; ``horizon``
    says which in words). ``remaining`` is then the smaller of the period's and the cap's.
    """

    analyst: str
    filter: str
    budget: Budget
    spent: PrivacyCost
    remaining: PrivacyCost
    releases: int
    reserved: PrivacyCost = field(default_factory=PrivacyCost.zero)
    guarantee: str = ""
    dataset: str = ""
    datasets: tuple[BudgetStatus, ...] = ()
    recent: tuple[LedgerEntry, ...] = ()
    locked: AnalystLock | None = None
    renewal: str = ""
    period: str = ""
    renews_at: datetime | None = None
    lifetime: BudgetStatus | None = None
    horizon: str = ""

    def as_dict(self, *, internal: bool = False) -> dict[str, Any]:
        """Plain data (``--json``, the HTTP front). ``internal`` adds why the analyst is locked:
        the data owner's view only, never sent to the analyst."""
        def cost(c: PrivacyCost) -> dict[str, Any]:
            d: dict[str, Any] = {"epsilon": c.epsilon, "delta": c.delta}
            if c.rho is not None:
                d["rho"] = c.rho
            return d

        data: dict[str, Any] = {
            "analyst": self.analyst,
            "filter": self.filter,
            "guarantee": self.guarantee,
            "budget": {"epsilon": self.budget.epsilon, "delta": self.budget.delta},
            "spent": cost(self.spent),
            "reserved": cost(self.reserved),
            "remaining": cost(self.remaining),
            "releases": self.releases,
        }
        if self.dataset:
            data["dataset"] = self.dataset
        if self.renewal:
            data["renewal"] = {"schedule": self.renewal, "period": self.period,
                               "renews_at": self.renews_at.isoformat() if self.renews_at else None,
                               "lifetime": "capped" if self.lifetime is not None else "unbounded",
                               "guarantee": self.horizon}
        if self.lifetime is not None:
            data["lifetime"] = self.lifetime.as_dict()
        if self.datasets:
            data["datasets"] = [d.as_dict() for d in self.datasets]
        if self.recent:
            data["recent"] = [entry_dict(e) for e in self.recent]
        if self.locked is not None:
            data["locked"] = self.locked.as_dict(internal=internal)
        return data


def entry_dict(entry: LedgerEntry) -> dict[str, Any]:
    """A ledger entry as plain data (for ``--json`` and the HTTP front)."""
    data: dict[str, Any] = {
        "release_id": entry.release_id, "time": entry.time.isoformat(), "dataset": entry.dataset,
        "datasets": list(entry.scopes), "mechanism": entry.mechanism, "status": entry.status,
        "epsilon": entry.cost.epsilon, "delta": entry.cost.delta,
    }
    if entry.cost.rho is not None:
        data["rho"] = entry.cost.rho
    if entry.cost.ex_post or entry.status == "reserved":
        data["worst_epsilon"] = entry.worst.epsilon
    return data


@dataclass(frozen=True)
class _Check:
    """One filter a release must pass: a scope's budget over the releases of ``window`` (the current
    period of a renewing budget; None: all releases), or its lifetime cap (``lifetime``)."""

    scope: str
    flt: PrivacyFilter
    window: Period | None
    renewal: Renewal
    lifetime: bool = False


def forget_cached_state(engine: Engine | None = None) -> None:
    """Drops cached filter states (of ``engine``'s store, or of every embedded store open in this
    process): the next use re-reads the ledger, as after a restart. Call it with no release in
    flight (as tests do): a row still being written is counted by the old state only. (The shared
    state in Keeper is durable: this only drops this process's copy of it.)"""
    for shared in [engine.shared] if engine is not None else open_embedded_states():
        shared.get(AnalystStates).clear()
    if engine is not None and not engine.embedded:
        admission_for(engine).forget(engine.database)


class PendingCharge:
    """A fixed-cost release admitted and counted, its ledger row being written
    (:meth:`Accountant.begin_charge`). Nothing that depends on the data may be acted on, and no
    noise drawn, before :meth:`wait` returns."""

    def __init__(self, entry: LedgerEntry, write: PendingWrite) -> None:
        self.entry = entry
        self._write = write

    @property
    def release_id(self) -> str:
        return self.entry.release_id

    @property
    def durable(self) -> bool:
        """Whether the row's INSERT has returned (check :meth:`wait` for its outcome)."""
        return self._write.done

    def wait(self) -> LedgerEntry:
        """Blocks until the row is durable and returns the entry; raises
        :class:`~dpch.accounting.commit.LedgerWriteFailed` if its INSERT failed."""
        self._write.wait()
        return self.entry


class Reservation:
    """A release admitted on its worst case and durable as a ``reserved`` ledger row.

    Settle it exactly once: :meth:`settle` with the realized cost, or :meth:`void` if nothing
    was computed (no data read, no noise drawn). Realized costs above the reservation are
    charged as they are (004's ε_post may exceed its ε_max, docs/algorithms.md B9).
    """

    def __init__(self, accountant: Accountant, entry: LedgerEntry) -> None:
        self._accountant = accountant
        self.entry = entry
        self.closed = False

    @property
    def release_id(self) -> str:
        return self.entry.release_id

    @property
    def worst(self) -> PrivacyCost:
        return self.entry.worst

    def settle(self, realized: PrivacyCost) -> LedgerEntry:
        """Durably charges the realized cost (second ledger row) and returns the final entry."""
        return self._close(realized)

    def void(self) -> LedgerEntry:
        """Durably cancels the reservation: only if no data was read and no noise drawn."""
        return self._close(None)

    def _close(self, realized: PrivacyCost | None) -> LedgerEntry:
        if self.closed:
            raise ReservationClosed(f"release {self.release_id} is already settled",
                                    hint="settle or void a reservation exactly once")
        self.entry = self._accountant._settle(self.entry, realized)
        self.closed = True
        return self.entry

    def __enter__(self) -> Reservation:
        return self

    def trip(self, reason: str) -> LedgerEntry:
        """Marks the release failed (counted at its worst case) and locks the analyst
        (:meth:`Accountant.trip`); closes the reservation."""
        self.entry = self._accountant.trip(self.entry, reason)
        self.closed = True
        return self.entry

    def __exit__(self, exc_type: object, *rest: object) -> None:
        if not self.closed:
            # failed or forgotten: the computation may have touched data, so charge the worst case
            self._close(self.entry.counted)


class Accountant:
    """Budget checks and charges for one analyst on one engine.

    ``filter`` names the privacy filter (:data:`dpch.accounting.filters.FILTERS`); an
    admin-set filter in ``dpch_budgets`` wins, then this argument (or ``$DPCH_FILTER``), then
    the filter the analyst's ledger was written under, then ``basic``. ``filter_options`` are
    the filter's keyword options. A connection whose filter differs from the one the ledger
    was written under is refused: a filter's guarantee covers only the releases it admitted.

    ``ledger_fsync`` (default ``$DPCH_LEDGER_FSYNC``): True makes every ledger INSERT fsync, so a
    charge survives power loss and not only a crash of the process; False turns that off; None
    leaves the ledger table as it is (:class:`~dpch.accounting.ledger.Ledger`).

    ``default_budget``: the (non-renewing) budget of an analyst the data owner set none for. None
    (the default) refuses such an analyst (:class:`~.budget.NoBudgetSet`); only ``dpch demo``, the
    audit and tests opt in. ``clock``: the wall clock choosing a renewing budget's period (tests
    inject one; default :func:`~.periods.utc_now`).
    """

    def __init__(
        self,
        engine: Engine,
        analyst: str,
        *,
        default_budget: Budget | None = None,
        filter: str | None = None,
        filter_options: dict[str, Any] | None = None,
        ledger_fsync: bool | None = None,
        clock: Clock | None = None,
        admission: AdmissionStore | None = None,
    ) -> None:
        self.engine = engine
        self.analyst = analyst
        self.default_budget = default_budget
        self.clock: Clock = clock or utc_now
        self.filter_name: str | None = filter or os.environ.get(FILTER_ENV) or None
        self.filter_options = dict(filter_options or {})
        if self.filter_name:  # fail fast on a bad configuration
            make_filter(self.filter_name, Budget(1.0, 1e-6), self.filter_options)
        self.budgets = BudgetStore(engine)
        self.ledger = Ledger(engine, fsync=ledger_fsync)
        self.locks = LockStore(engine)
        #: where admission is decided (:mod:`.admission`): this process (embedded store), Keeper, or one owner
        self.admission = admission if admission is not None else admission_for(engine)

    def for_analyst(self, analyst: str) -> Accountant:
        """An accountant for ``analyst`` on the same engine, stores and options (no table is touched)."""
        other = copy.copy(self)
        other.analyst = analyst
        return other

    # -- state and filters --------------------------------------------------------------------

    def _setting(self, state: AnalystState, dataset: str = "") -> tuple[Budget, Renewal]:
        """A scope's budget and renewal; the analyst's is refused if the data owner set none (and
        no ``default_budget`` was given) — from the budget table alone, before anything is charged."""
        setting = state.settings.get(dataset)
        if setting is not None:
            return setting.budget, setting.renewal
        if dataset or self.default_budget is None:
            raise NoBudgetSet.of(self.analyst)
        return self.default_budget, NO_RENEWAL

    def _checks(self, state: AnalystState, datasets: tuple[str, ...], now: datetime) -> list[_Check]:
        """Every filter a release reading ``datasets`` must pass at time ``now``: per scope (the
        analyst's first, then each dataset with a budget), its budget's filter over the releases of
        the current period (a renewing budget) or of all time, and a lifetime cap's filter over all."""
        top = state.settings.get("")
        name, options = self.filter_name or state.ledger_filter() or DEFAULT_FILTER, self.filter_options
        if top is not None and top.filter:
            name, options = top.filter, top.options or {}
        checks = []
        for scope in ("", *(d for d in datasets if d in state.settings)):
            budget, renewal = self._setting(state, scope)
            window = period_of(renewal.schedule, now) if renewal.schedule else None
            checks.append(_Check(scope, state.filter(name, options, budget), window, renewal))
            if renewal.lifetime is not None:
                checks.append(_Check(scope, state.filter(name, options, renewal.lifetime), None, renewal,
                                     lifetime=True))
        return checks

    def _current_lock(self, state: AnalystState) -> AnalystLock | None:
        # cached with the filter state: admission costs no extra read (an unlock written by another
        # process is seen after forget_cached_state or a restart — the safe direction)
        return state.locked

    def _admit(self, state: AnalystState, request: PrivacyCost, datasets: tuple[str, ...],
               now: datetime) -> tuple[PrivacyFilter, str]:
        """Raises BudgetExceeded (AnalystLocked while locked, NoBudgetSet without a budget) unless
        every scope's filters admit ``request`` at time ``now`` (the current period's and the
        lifetime's, for a renewing budget); returns the analyst's filter and period label."""
        if self._current_lock(state) is not None:
            raise AnalystLocked.of(self.analyst)
        checks = self._checks(state, datasets, now)
        main = checks[0].flt
        used = set(state.filter_counts)
        if used - {main.name}:
            raise BudgetExceeded(
                f"the ledger of analyst {self.analyst} was written under the {', '.join(sorted(used))} filter, "
                f"but this connection uses {main.name}; a filter's guarantee covers only releases it admitted",
                hint=f"connect with filter={sorted(used)[0]!r}, or give the analyst a fresh budget under a new name",
            )
        for check in checks:
            decision = check.flt.decide_from(state.scope_totals(check.scope, check.flt, check.window).counted,
                                             request)
            if not decision.admitted:
                where = f" on dataset {check.scope}" if check.scope else ""
                if check.window is not None:
                    w = check.window
                    raise BudgetExceeded(
                        f"budget for this {w.unit} ({w.label} UTC) exhausted for analyst {self.analyst}{where}: "
                        f"{decision.reason}", hint=f"the budget renews at {w.end:%Y-%m-%d %H:%M} UTC; or {_HINT}")
                what = "lifetime budget (the cap over all periods)" if check.lifetime else "budget"
                raise BudgetExceeded(f"{what} exhausted for analyst {self.analyst}{where}: {decision.reason}",
                                     hint=_HINT)
        return main, checks[0].window.label if checks[0].window is not None else ""

    # -- spending -------------------------------------------------------------------------------

    def check(self, cost: PrivacyCost, *, dataset: str = "", datasets: Iterable[str] = ()) -> None:
        """Raises :class:`BudgetExceeded` if ``cost`` would not be admitted now (spends nothing).

        ``datasets`` (and/or one ``dataset``): every private table the release reads, ``db.table``."""
        names = _names(dataset, datasets)
        self.admission.read(self, lambda state: self._admit(state, cost, names, state.now(self.clock)))

    def charge(self, cost: PrivacyCost, *, dataset: str = "", datasets: Iterable[str] = (), query_hash: str,
               mechanism: str) -> LedgerEntry:
        """Admits and durably charges a fixed-cost release (ONE ledger row), or raises
        :class:`BudgetExceeded`; returns once the row is durable. The release counts in the
        analyst's scope and in each of ``datasets`` (and ``dataset``)."""
        return self.begin_charge(cost, dataset=dataset, datasets=datasets, query_hash=query_hash,
                                 mechanism=mechanism, background=False).wait()

    def begin_charge(self, cost: PrivacyCost, *, dataset: str = "", datasets: Iterable[str] = (), query_hash: str,
                     mechanism: str, background: bool = True) -> PendingCharge:
        """Admits a fixed-cost release and starts writing its ledger row; raises
        :class:`BudgetExceeded` (nothing written) if refused.

        The release is counted in memory at once, so no later admission can overspend, and its row
        is written by the store's group commit while the caller runs the aggregate. Call
        :meth:`PendingCharge.wait` — it returns once the row is durable — before drawing noise or
        acting on anything the aggregate did (docs/design.md rule 2), and wrap everything after this
        call in :meth:`tripwire` (``background=False``: this thread writes, when no one else is)."""
        if cost.ex_post:
            raise ConfigError("an ex-post cost is known only after the release",
                              hint="use Accountant.reserve(worst_cost) and settle the realized cost")
        names = _names(dataset, datasets)

        def admit(state: AnalystState) -> LedgerEntry:  # decision and count only: the write comes after
            now = state.now(self.clock)  # the period is chosen where the release is admitted and counted
            flt, period = self._admit(state, cost, names, now)
            checkpoint()  # the last moment a query can be cancelled for free (dpch.store.cancel)
            entry = self.ledger.new_entry("charged", analyst=self.analyst, datasets=names, query_hash=query_hash,
                                          mechanism=mechanism, filter_name=flt.name, cost=cost, time=now,
                                          period=period)
            # counted before it is durable: the state never counts less than the ledger (the safe direction)
            state.put(entry)
            return entry

        entry = self.admission.run(self, admit)
        return PendingCharge(entry, self._write(entry, 1, background=background))

    def _write(self, entry: LedgerEntry, seq: int, *, background: bool = False) -> PendingWrite:
        """Queues ``entry``'s ledger row ``seq`` (the admission store follows it until it is durable)."""
        write = self.ledger.write(entry, seq, background=background)
        self.admission.track(self, (entry.release_id, seq), write)
        return write

    def reserve(self, worst: PrivacyCost, *, dataset: str = "", datasets: Iterable[str] = (), query_hash: str,
                mechanism: str) -> Reservation:
        """Admits a release on its worst case and durably writes a ``reserved`` row.

        ``worst`` is the mechanism's worst-case cost: an ex-post :class:`PrivacyCost` with
        ``worst_epsilon``/``worst_rho`` (e.g. ``BrownianMechanism.worst_cost``), or a fixed cost.
        Returns a :class:`Reservation` to settle with the realized cost, once its row is durable.
        """
        names = _names(dataset, datasets)

        def admit(state: AnalystState) -> LedgerEntry:
            now = state.now(self.clock)
            flt, period = self._admit(state, worst, names, now)
            checkpoint()
            entry = self.ledger.new_entry("reserved", analyst=self.analyst, datasets=names, query_hash=query_hash,
                                          mechanism=mechanism, filter_name=flt.name, cost=worst, time=now,
                                          period=period)
            state.put(entry)  # counted at its worst case before it is durable, as a charge
            return entry

        entry = self.admission.run(self, admit)
        self._write(entry, 1).wait()
        return Reservation(self, entry)

    def _settle(self, entry: LedgerEntry, realized: PrivacyCost | None) -> LedgerEntry:
        if self.admission.write_before_count:
            # In-process: under the lock with its write: a settled cost may count less than the
            # reservation (or, ex post, more), so neither order of count and write keeps memory >= ledger
            # throughout. Reservations are the rare, slow path (accuracy-first); a charge never waits here.
            def settle(state: AnalystState) -> LedgerEntry:
                final = self.ledger.settle(entry, realized, state.now(self.clock))  # keeps the admission time
                state.put(final, 2)
                return final

            return self.admission.run(self, settle)

        # Shared: the state counts the settled cost first and records the row until it is durable (a crash
        # before the row leaves it to the reconciler): the state is what every admission decides from
        def count(state: AnalystState) -> tuple[LedgerEntry, LedgerEntry]:
            row = Ledger.settled(entry, realized, state.now(self.clock))
            final = replace(row, time=entry.time)  # counted in the period it was admitted in
            state.put(final, 2, row)
            return final, row

        final, row = self.admission.run(self, count)
        self._write(row, 2).wait()
        return final

    # -- the tripwire (docs/design.md rule 5) --------------------------------------------------------

    @contextmanager
    def tripwire(self, release: LedgerEntry | Reservation | PendingCharge) -> Iterator[None]:
        """Wraps everything that runs after ``release`` was charged (emitted SQL, noise).

        For a :class:`PendingCharge`, a failure is acted on only once its ledger row is durable; if
        the row could not be written, :class:`LedgerWriteFailed` is raised instead, whatever failed.

        Any exception trips: the release is marked failed, the analyst locked, and
        :class:`QueryFailedAfterCharge` raised in its place, with no detail and no chained
        cause (ClickHouse's text can quote data)."""
        try:
            yield
        except Exception as exc:
            if isinstance(release, PendingCharge):
                # nothing is acted on before the charge is durable; if it cannot be written, the
                # release fails with the ledger's fixed error (no trip: the lock would tell the
                # analyst whether the aggregate failed)
                try:
                    release = release.wait()
                except LedgerWriteFailed as failed:
                    raise failed from None  # never chained to the first error (its text can quote data)
            reason = _failure_reason(exc)
            try:
                if isinstance(release, Reservation):
                    release.trip(reason)
                else:
                    self.trip(release, reason)
            except Exception:  # noqa: S110 — the store failed too: the in-process lock still holds
                pass
            raise QueryFailedAfterCharge() from None

    def trip(self, entry: LedgerEntry, reason: str) -> LedgerEntry:
        """Durably locks the analyst and marks ``entry`` failed (still counted); returns it.

        ``reason`` is internal (e.g. ClickHouse's error code name): the data owner sees it in
        ``dpch budget``, the analyst never does. The lock is written first: it is what stops
        the next query, and it holds in this process even if the store cannot be written."""
        failed = self.ledger.failed(entry, as_utc(self.clock()))
        counted = replace(failed, time=entry.time)
        pending = AnalystLock(self.analyst, entry.release_id, reason, datetime.now(UTC))
        # held by this process at once, even if the admission store cannot be written (Keeper down)
        self.admission.note_trip(self, pending)

        def lock_and_fail(state: AnalystState) -> None:
            # from here on every admission of this analyst refuses (in every process sharing the state)
            state.locked = pending
            # counts what the release already counted, in the period it was admitted in: no total moves
            state.put(counted, FAILED_SEQ, failed)

        self.admission.run(self, lock_and_fail)
        lock = self.locks.lock(self.analyst, release_id=entry.release_id, reason=reason)  # the owner's history
        self._write(failed, FAILED_SEQ).wait()

        def durable_lock(state: AnalystState) -> None:
            if state.locked is not None and state.locked.release_id == entry.release_id:
                state.locked = lock

        if not self.admission.shared:  # the shared state already holds the lock as it was written there
            self.admission.run(self, durable_lock)
        return counted

    def lock_info(self) -> AnalystLock | None:
        """Why and since when this analyst is locked, or None."""
        return self.admission.read(self, self._current_lock)

    def unlock(self) -> bool:
        """(Data owner) Clears this analyst's lock, durably and for every process sharing the state;
        False if the analyst was not locked."""
        if self.admission.shared:
            def clear(state: AnalystState) -> bool:
                was = state.locked is not None
                state.locked = None
                return was

            was = self.admission.run(self, clear, decides=False) or self.locks.get(self.analyst) is not None
            if was:
                self.locks.unlock(self.analyst)  # the owner's history (``dpch budget list``)
            return was

        def clear_here(state: AnalystState) -> bool:
            was = self._current_lock(state) is not None or self.locks.get(self.analyst) is not None
            if was:
                self.locks.unlock(self.analyst)
            state.locked = None
            return was

        return self.admission.run(self, clear_here, decides=False)

    # -- visibility and administration ----------------------------------------------------------

    def status(self, *, recent: int = 5, fresh: bool = True) -> BudgetStatus:
        """The analyst's budgets: spent, reserved, remaining (per dataset too), the latest ``recent``
        releases and the lock, from the current admission state (``fresh=False``: as this process last
        saw it, e.g. right after its own admission — a release's budget; never for a decision)."""
        return self.admission.read(self, lambda state: self._status(state, recent), fresh=fresh)

    def _status(self, state: AnalystState, recent: int) -> BudgetStatus:
        checks = self._checks(state, tuple(d for d in state.settings if d), state.now(self.clock))
        statuses: list[BudgetStatus] = []
        for check in checks:
            status = self._scope_status(state, check)
            if check.lifetime:  # the cap of the scope just before it: what is left is the smaller of the two
                period = statuses[-1]
                rho = period.remaining.rho
                left = PrivacyCost.of(ApproxDP(min(period.remaining.epsilon, status.remaining.epsilon),
                                               min(period.remaining.delta, status.remaining.delta)),
                                      None if rho is None else ZCDP(rho))
                statuses[-1] = replace(period, lifetime=status, remaining=left)
            else:
                statuses.append(status)
        top = statuses[0]
        tail = tuple(state.recent(recent)) if recent else ()
        return replace(top, datasets=tuple(statuses[1:]), recent=tail, locked=self._current_lock(state))

    def _scope_status(self, state: AnalystState, check: _Check) -> BudgetStatus:
        flt, window = check.flt, check.window
        totals = state.scope_totals(check.scope, flt, window)
        guarantee = flt.describe()
        if window is not None:
            eps, delta = flt.guarantee()
            guarantee = f"{flt.name} ({flt.theorem}): ({eps:g}, {delta:g})-DP per {window.unit} (UTC)"
        return BudgetStatus(
            analyst=self.analyst, filter=flt.name, budget=flt.budget, spent=flt.spent_from(totals.settled),
            remaining=flt.remaining_from(totals.counted), releases=totals.releases,
            reserved=totals.reserved_cost(), guarantee=guarantee, dataset=check.scope,
            renewal=check.renewal.schedule if not check.lifetime else "",
            period=window.label if window is not None else "", renews_at=window.end if window is not None else None,
            horizon=check.renewal.describe(flt.budget) if window is not None else "",
        )

    def set_budget(self, budget: Budget, *, dataset: str = "", filter: str = "",
                   filter_options: dict[str, Any] | None = None, renewal: Renewal = NO_RENEWAL) -> None:
        """Sets this analyst's budget (an admin action; per ``dataset`` if given) and refreshes
        the cached state. ``filter`` (analyst-wide rows only) overrides the connection's choice.
        ``renewal``: the budget restarts each period (``Renewal("daily")``), optionally under a
        lifetime cap (``Renewal("daily", Budget(10, 1e-6))``); the default never renews."""
        if filter:
            if dataset:
                raise ConfigError("a filter is chosen per analyst, not per dataset",
                                  hint="set --filter on the analyst's budget (without --dataset)")
            make_filter(filter, budget, filter_options)
        if renewal.lifetime is not None:
            if renewal.lifetime.epsilon < budget.epsilon or renewal.lifetime.delta < budget.delta:
                raise ConfigError(
                    "the lifetime cap is smaller than one period's budget",
                    hint="raise --lifetime-epsilon/--lifetime-delta, or set a budget that does not renew")
            if filter:
                make_filter(filter, renewal.lifetime, filter_options)
        self.budgets.set(self.analyst, budget, dataset=dataset, filter=filter, options=filter_options,
                         renewal=renewal)
        self.sync_budget()

    def sync_budget(self) -> bool:
        """Makes the admission state hold the analyst's latest budget rows (every process sharing the state
        admits under them at its next admission); True if they changed it."""
        settings, latest = self.budgets.settings(self.analyst), self.budgets.latest(self.analyst)

        def apply(state: AnalystState) -> bool:
            if state.settings == settings:
                state.settings_at = max(state.settings_at, latest)  # the same budget set again
                return False
            state.settings, state.settings_at = settings, latest
            state.drop_totals()  # totals under the old budget would only cost upkeep
            return True

        return self.admission.run(self, apply, decides=False)

    def reconcile(self, grace: float = 60.0) -> int:
        """Brings the ledger and the shared admission state into step for this analyst; returns how
        many ledger rows it wrote. A process that died (kill -9) between its admission and its ledger
        INSERT left the row only in the shared state: the row is written from there (a crash loses
        budget, never privacy, and the ledger — the audit log — never misses a counted release). Rows
        younger than ``grace`` seconds are left to the process that is writing them. A budget row newer
        than the state (an owner action whose state write failed) is applied too."""
        if not self.admission.shared:
            return 0
        if self.budgets.latest(self.analyst) > self.admission.read(self, lambda state: state.settings_at):
            self.sync_budget()
        watches = WatchStore(self.engine, shared=True).reconcile(self.analyst, grace)
        cutoff = time.time() - grace
        rows = self.admission.read(self, lambda state: state.unconfirmed(cutoff))
        if not rows:
            return watches
        present = self.ledger.present([key for key, _ in rows])
        missing = [(key, row) for key, row in rows if key not in present]
        for (_, seq), row in missing:
            self.ledger.write(row, seq).wait()
        done = {key for key, _ in rows}
        self.admission.run(self, lambda state: state.confirm(done), decides=False)
        return len(missing) + watches

    def recent(self, limit: int = 10) -> list[LedgerEntry]:
        """The analyst's latest ``limit`` releases, oldest first."""
        return self.admission.read(self, lambda state: state.recent(limit))


def reconcile_all(engine: Engine, grace: float = 60.0) -> int:
    """:meth:`Accountant.reconcile` for every analyst with a shared admission state in ``engine``'s
    database (none without Keeper); returns the ledger rows written."""
    admission = admission_for(engine)
    if not isinstance(admission, KeeperAdmission):
        return 0
    analysts = admission.analysts(engine)
    if not analysts:
        return 0
    first = Accountant(engine, analysts[0], admission=admission)
    return sum(first.for_analyst(analyst).reconcile(grace) for analyst in analysts)


def _names(dataset: str, datasets: Iterable[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(([dataset] if dataset else []) + [d for d in datasets if d]))


def _failure_reason(exc: Exception) -> str:
    """What the data owner's lock record says: an engine error's code name, else the error class
    (never a message, which could quote data)."""
    if isinstance(exc, ExecutionError) and exc.reason:
        return exc.reason
    return type(exc).__name__
