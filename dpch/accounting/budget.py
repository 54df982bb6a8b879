"""Per-analyst privacy budgets, stored in the database beside the ledger (``dpch_budgets``).

Budgets are set by the data owner (``dpch budget set``); the latest row for an analyst (and
dataset) wins. An analyst with no row is refused (:class:`NoBudgetSet`) unless the session was
opened with an explicit ``default_budget`` (``dpch demo``, the audit, tests): no analyst silently
gets a budget the data owner never chose. A row with a ``dataset`` (``db.table``) adds a second
budget for that analyst's releases on that dataset: both must admit. A row's ``filter`` (and JSON
``filter_options``) chooses the analyst's privacy filter, overriding the connection's choice.

A row's ``renew`` (``daily``/``weekly``/``monthly``, :mod:`.periods`) makes its budget restart each
period; ``lifetime_epsilon``/``lifetime_delta`` (> 0) then cap the total over all periods
(:class:`Renewal`). Both follow the latest row, like the budget itself.
"""

from __future__ import annotations

import getpass
import json
import math
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from dpch.accounting.periods import SCHEDULES, as_utc, check_schedule
from dpch.errors import BudgetExceeded, ConfigError
from dpch.store.engine import Engine

BUDGETS_TABLE = "dpch_budgets"
DEFAULT_EPSILON = 3.0
DEFAULT_DELTA = 1e-6


@dataclass(frozen=True)
class Budget:
    """A total (ε, δ) an analyst may spend."""

    epsilon: float = DEFAULT_EPSILON
    delta: float = DEFAULT_DELTA

    def __post_init__(self) -> None:
        if not (self.epsilon > 0 and math.isfinite(self.epsilon)):
            raise ConfigError(f"budget epsilon must be a positive number, got {self.epsilon!r}")
        if not 0 <= self.delta < 1:
            raise ConfigError(f"budget delta must be in [0, 1), got {self.delta!r}")


class NoBudgetSet(BudgetExceeded):
    """The analyst has no budget: the data owner never set one. Nothing was run or charged.

    Decided from the budget table alone (never from data), before any charge or noise."""

    @classmethod
    def of(cls, analyst: str) -> NoBudgetSet:
        return cls(f"analyst {analyst!r} has no budget",
                   hint=f"the data owner sets one with `dpch budget set --analyst {analyst} --epsilon …`")


@dataclass(frozen=True)
class Renewal:
    """How a budget renews: ``schedule`` ("" = never: the budget is the lifetime budget) and an
    optional ``lifetime`` cap over all periods (only with a schedule)."""

    schedule: str = ""
    lifetime: Budget | None = None

    def __post_init__(self) -> None:
        check_schedule(self.schedule)
        if self.lifetime is not None and not self.schedule:
            raise ConfigError("a lifetime cap needs a renewing budget",
                              hint="add --renew daily|weekly|monthly (a budget that never renews is already "
                                   "a lifetime budget)")

    def describe(self, budget: Budget) -> str:
        """The guarantee in words: per period, and over the lifetime (capped or unbounded)."""
        if not self.schedule:
            return f"ε {budget.epsilon:g}, δ {budget.delta:g} over the lifetime (no renewal)"
        unit = SCHEDULES[self.schedule].unit
        life = ("unbounded" if self.lifetime is None
                else f"capped at ε {self.lifetime.epsilon:g}, δ {self.lifetime.delta:g}")
        return f"ε {budget.epsilon:g}, δ {budget.delta:g} per {unit} (UTC), renewed {self.schedule}; " \
               f"over the lifetime: {life}"


NO_RENEWAL = Renewal()


@dataclass(frozen=True)
class BudgetSetting:
    """One budget row: the budget, its scope (``dataset`` or "" for analyst-wide), filter and renewal."""

    budget: Budget
    dataset: str = ""
    filter: str = ""
    options: dict[str, Any] | None = None
    renewal: Renewal = NO_RENEWAL


class BudgetStore:
    """Reads and writes ``dpch_budgets`` in the engine's database."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.table = engine.table(BUDGETS_TABLE)
        engine.create_table(
            BUDGETS_TABLE,
            "analyst String, epsilon Float64, delta Float64,"
            " set_at DateTime64(6, 'UTC'), set_by String,"
            " dataset String DEFAULT '', filter String DEFAULT '', filter_options String DEFAULT '',"
            " renew String DEFAULT '', lifetime_epsilon Float64 DEFAULT 0, lifetime_delta Float64 DEFAULT 0",
            "ORDER BY (analyst, set_at) COMMENT 'dpch: per-analyst privacy budgets (latest row wins)'")
        # stores created before per-dataset budgets, filter choice and renewal (old rows: never renew)
        engine.add_missing_columns(BUDGETS_TABLE, [
            ("dataset", "String DEFAULT ''"), ("filter", "String DEFAULT ''"), ("filter_options", "String DEFAULT ''"),
            ("renew", "String DEFAULT ''"), ("lifetime_epsilon", "Float64 DEFAULT 0"),
            ("lifetime_delta", "Float64 DEFAULT 0")])

    def get(self, analyst: str) -> Budget | None:
        rows = self.engine.query_rows(
            f"SELECT argMax(epsilon, set_at), argMax(delta, set_at), count() FROM {self.table}"
            " WHERE analyst = {a:String} AND dataset = ''",
            {"a": analyst},
        )
        if not rows or rows[0][2] == 0:
            return None
        return Budget(rows[0][0], rows[0][1])  # Float64 columns: Python floats

    def settings(self, analyst: str) -> dict[str, BudgetSetting]:
        """Every scope's latest setting for ``analyst``: "" (analyst-wide) and each dataset."""
        rows = self.engine.query_rows(
            # a row that names no filter keeps the latest filter set before it
            f"SELECT dataset, argMax(epsilon, set_at), argMax(delta, set_at), argMaxIf(filter, set_at, filter != ''),"
            f" argMaxIf(filter_options, set_at, filter != ''), {_RENEWAL}"
            f" FROM {self.table} WHERE analyst = {{a:String}} GROUP BY dataset ORDER BY dataset",
            {"a": analyst},
        )
        return {
            r[0]: BudgetSetting(Budget(r[1], r[2]), r[0], r[3], json.loads(r[4]) if r[4] else None,
                                _renewal(r[5], r[6], r[7]))
            for r in rows
        }

    def set(self, analyst: str, budget: Budget, *, dataset: str = "", filter: str = "",
            options: dict[str, Any] | None = None, renewal: Renewal = NO_RENEWAL) -> None:
        life = renewal.lifetime
        self.engine.insert(
            BUDGETS_TABLE,
            [[analyst, budget.epsilon, budget.delta, datetime.now(UTC), whoami(), dataset, filter,
              json.dumps(options) if options else "", renewal.schedule, life.epsilon if life else 0.0,
              life.delta if life else 0.0]],
            ["analyst", "epsilon", "delta", "set_at", "set_by", "dataset", "filter", "filter_options",
             "renew", "lifetime_epsilon", "lifetime_delta"],
        )

    def latest(self, analyst: str) -> str:
        """When ``analyst``'s budget was last set (ISO text of the latest row's ``set_at``; "" if never)."""
        rows = self.engine.query_rows(
            f"SELECT max(set_at), count() FROM {self.table} WHERE analyst = {{a:String}}", {"a": analyst})
        if not rows or not rows[0][1]:
            return ""
        return as_utc(rows[0][0]).isoformat()

    def all(self) -> dict[str, Budget]:
        return {analyst: s.budget for analyst, s in self.all_settings().items()}

    def all_settings(self) -> dict[str, BudgetSetting]:
        """Every analyst's latest analyst-wide setting (budget and renewal; ``dpch budget list``)."""
        rows = self.engine.query_rows(
            f"SELECT analyst, argMax(epsilon, set_at), argMax(delta, set_at), {_RENEWAL} FROM {self.table}"
            " WHERE dataset = '' GROUP BY analyst ORDER BY analyst"
        )
        return {r[0]: BudgetSetting(Budget(r[1], r[2]), renewal=_renewal(r[3], r[4], r[5]))
                for r in rows}


#: the latest row's renewal columns (like the budget itself, the latest row wins)
_RENEWAL = "argMax(renew, set_at), argMax(lifetime_epsilon, set_at), argMax(lifetime_delta, set_at)"


def _renewal(schedule: str, lifetime_epsilon: float, lifetime_delta: float) -> Renewal:
    """A row's renewal; a lifetime ε of 0 means no cap (rows written before renewal existed too)."""
    lifetime = Budget(lifetime_epsilon, lifetime_delta) if schedule and lifetime_epsilon > 0 else None
    return Renewal(schedule, lifetime)


def whoami() -> str:
    """The OS user running an admin action (recorded beside budgets and locks)."""
    try:
        return getpass.getuser()
    except Exception:  # no user database entry in some containers
        return "unknown"
