"""Admission: the filter's decision and the durable charge, under one lock per analyst.

The process that holds the store is the single admission owner for its ledger. Inside it,
every session of the same analyst shares one :class:`_AnalystState` (history loaded from the
ledger once, then kept in step with each charge), and admission is serialised by its lock,
so concurrent threads can never jointly overspend.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass

from dpch.accounting.budget import Budget, BudgetStore
from dpch.accounting.filters import BasicCompositionFilter, PrivacyFilter
from dpch.accounting.ledger import Ledger, LedgerEntry
from dpch.engine import Engine
from dpch.errors import BudgetExceeded
from dpch.mechanisms.cost import PrivacyCost


@dataclass(frozen=True)
class BudgetStatus:
    """An analyst's budget, what is spent, and what is left, in the filter's terms."""

    analyst: str
    filter: str
    budget: Budget
    spent: PrivacyCost
    remaining: PrivacyCost
    releases: int

    def as_dict(self) -> dict:
        return {
            "analyst": self.analyst,
            "filter": self.filter,
            "budget": {"epsilon": self.budget.epsilon, "delta": self.budget.delta},
            "spent": {"epsilon": self.spent.epsilon, "delta": self.spent.delta},
            "remaining": {"epsilon": self.remaining.epsilon, "delta": self.remaining.delta},
            "releases": self.releases,
        }


class _AnalystState:
    def __init__(self, entries: list[LedgerEntry], budget: Budget) -> None:
        self.lock = threading.Lock()
        self.entries = entries
        self.budget = budget

    @property
    def history(self) -> list[PrivacyCost]:
        return [e.counted for e in self.entries]


_states: dict[tuple[str, str, str], _AnalystState] = {}
_states_lock = threading.Lock()


def forget_cached_state(store: str | None = None) -> None:
    """Drops cached filter states (of one store, or all): the next use re-reads the ledger."""
    with _states_lock:
        for key in [k for k in _states if store is None or k[0] == store]:
            del _states[key]


class Accountant:
    """Budget checks and charges for one analyst on one engine."""

    def __init__(
        self,
        engine: Engine,
        analyst: str,
        *,
        default_budget: Budget | None = None,
        filter_factory: Callable[[Budget], PrivacyFilter] = BasicCompositionFilter,
    ) -> None:
        self.engine = engine
        self.analyst = analyst
        self.default_budget = default_budget or Budget()
        self.filter_factory = filter_factory
        self.budgets = BudgetStore(engine)
        self.ledger = Ledger(engine)
        self._key = (engine.token, engine.database, analyst)

    def _state(self) -> _AnalystState:
        with _states_lock:
            state = _states.get(self._key)
            if state is None:
                budget = self.budgets.get(self.analyst) or self.default_budget
                state = _AnalystState(self.ledger.entries(self.analyst), budget)
                _states[self._key] = state
            return state

    def _filter(self, state: _AnalystState) -> PrivacyFilter:
        return self.filter_factory(state.budget)

    def status(self) -> BudgetStatus:
        state = self._state()
        with state.lock:
            flt = self._filter(state)
            history = state.history
            return BudgetStatus(
                analyst=self.analyst,
                filter=flt.name,
                budget=state.budget,
                spent=flt.spent(history),
                remaining=flt.remaining(history),
                releases=len(state.entries),
            )

    def set_budget(self, budget: Budget) -> None:
        """Sets this analyst's budget (an admin action) and refreshes the cached state."""
        self.budgets.set(self.analyst, budget)
        state = self._state()
        with state.lock:
            state.budget = budget

    def recent(self, limit: int = 10) -> list[LedgerEntry]:
        state = self._state()
        with state.lock:
            return list(state.entries[-limit:])

    def check(self, cost: PrivacyCost) -> None:
        """Raises :class:`BudgetExceeded` if ``cost`` would not be admitted now (spends nothing)."""
        state = self._state()
        with state.lock:
            decision = self._filter(state).decide(state.history, cost)
        if not decision.admitted:
            raise BudgetExceeded(f"budget exhausted for analyst {self.analyst}: {decision.reason}",
                                 hint="ask for a smaller dp_epsilon, or ask the data owner for more budget")

    def charge(self, cost: PrivacyCost, *, dataset: str, query_hash: str, mechanism: str) -> LedgerEntry:
        """Admits and durably charges a fixed-cost release, or raises :class:`BudgetExceeded`.

        The decision and the ledger write happen under the analyst's lock, so two threads can
        never both be admitted against the same remaining budget.
        """
        state = self._state()
        with state.lock:
            flt = self._filter(state)
            decision = flt.decide(state.history, cost)
            if not decision.admitted:
                raise BudgetExceeded(
                    f"budget exhausted for analyst {self.analyst}: {decision.reason}",
                    hint="ask for a smaller dp_epsilon, or ask the data owner for more budget",
                )
            entry = self.ledger.charge(
                analyst=self.analyst, dataset=dataset, query_hash=query_hash,
                mechanism=mechanism, filter_name=flt.name, cost=cost,
            )
            state.entries.append(entry)
            return entry
