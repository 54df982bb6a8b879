"""Per-analyst privacy budgets, stored in the database beside the ledger (``dpch_budgets``).

Budgets are set by the data owner (``dpch budget set``); the latest row for an analyst (and
dataset) wins. An analyst with no row gets the deployment's default budget. A row with a
``dataset`` (``db.table``) adds a second budget for that analyst's releases on that dataset:
both must admit. A row's ``filter`` (and JSON ``filter_options``) chooses the analyst's privacy
filter, overriding the connection's choice.
"""

from __future__ import annotations

import getpass
import json
import math
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from dpch.errors import ConfigError
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


@dataclass(frozen=True)
class BudgetSetting:
    """One budget row: the budget, its scope (``dataset`` or "" for analyst-wide) and filter."""

    budget: Budget
    dataset: str = ""
    filter: str = ""
    options: dict[str, Any] | None = None


class BudgetStore:
    """Reads and writes ``dpch_budgets`` in the engine's database."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.table = engine.table(BUDGETS_TABLE)
        engine.command(
            f"CREATE TABLE IF NOT EXISTS {self.table} ("
            " analyst String, epsilon Float64, delta Float64,"
            " set_at DateTime64(6, 'UTC'), set_by String,"
            " dataset String DEFAULT '', filter String DEFAULT '', filter_options String DEFAULT ''"
            ") ENGINE = MergeTree ORDER BY (analyst, set_at)"
            " COMMENT 'dpch: per-analyst privacy budgets (latest row wins)'"
        )
        # stores created before per-dataset budgets and filter choice
        engine.add_missing_columns(BUDGETS_TABLE, [
            ("dataset", "String DEFAULT ''"), ("filter", "String DEFAULT ''"), ("filter_options", "String DEFAULT ''")])

    def get(self, analyst: str) -> Budget | None:
        rows = self.engine.query_rows(
            f"SELECT argMax(epsilon, set_at), argMax(delta, set_at), count() FROM {self.table}"
            " WHERE analyst = {a:String} AND dataset = ''",
            {"a": analyst},
        )
        if not rows or rows[0][2] == 0:
            return None
        return Budget(float(rows[0][0]), float(rows[0][1]))

    def settings(self, analyst: str) -> dict[str, BudgetSetting]:
        """Every scope's latest setting for ``analyst``: "" (analyst-wide) and each dataset."""
        rows = self.engine.query_rows(
            # a row that names no filter keeps the latest filter set before it
            f"SELECT dataset, argMax(epsilon, set_at), argMax(delta, set_at), argMaxIf(filter, set_at, filter != ''),"
            f" argMaxIf(filter_options, set_at, filter != '') FROM {self.table} WHERE analyst = {{a:String}}"
            " GROUP BY dataset ORDER BY dataset",
            {"a": analyst},
        )
        return {
            r[0]: BudgetSetting(Budget(float(r[1]), float(r[2])), r[0], r[3], json.loads(r[4]) if r[4] else None)
            for r in rows
        }

    def set(self, analyst: str, budget: Budget, *, dataset: str = "", filter: str = "",
            options: dict[str, Any] | None = None) -> None:
        self.engine.insert(
            BUDGETS_TABLE,
            [[analyst, budget.epsilon, budget.delta, datetime.now(UTC), whoami(), dataset, filter,
              json.dumps(options) if options else ""]],
            ["analyst", "epsilon", "delta", "set_at", "set_by", "dataset", "filter", "filter_options"],
        )

    def all(self) -> dict[str, Budget]:
        rows = self.engine.query_rows(
            f"SELECT analyst, argMax(epsilon, set_at), argMax(delta, set_at) FROM {self.table}"
            " WHERE dataset = '' GROUP BY analyst ORDER BY analyst"
        )
        return {r[0]: Budget(float(r[1]), float(r[2])) for r in rows}


def whoami() -> str:
    """The OS user running an admin action (recorded beside budgets and locks)."""
    try:
        return getpass.getuser()
    except Exception:  # no user database entry in some containers
        return "unknown"
