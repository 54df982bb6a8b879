"""Release: what a private query returns — noisy values, their intervals, and their cost."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from dpch.accounting.accountant import BudgetStatus
from dpch.privacy.cost import PrivacyCost


@dataclass(frozen=True)
class MeasureReport:
    """How one noisy measure was produced: its sensitivity, mechanism, share of the budget."""

    name: str
    expression: str
    sensitivity: float
    derivation: str
    mechanism: str
    epsilon: float
    delta: float
    noise_scale: float
    half_width: float

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class Release:
    """The answer to one private query.

    ``rows`` hold noisy values (group keys are public and exact). ``intervals[i][j]`` is the
    ``confidence`` interval for ``rows[i][j]`` around the true (clamped, contribution-capped)
    value, or ``None`` for key columns. ``cost`` is what the query was charged and
    ``budget`` the analyst's state after the charge.
    """

    columns: list[str]
    rows: list[tuple[Any, ...]]
    intervals: list[list[tuple[float, float] | None]]
    cost: PrivacyCost
    confidence: float
    mechanism: str
    measures: list[MeasureReport]
    budget: BudgetStatus
    release_id: str
    elapsed_ms: float = 0.0
    notes: list[str] = field(default_factory=list)
    #: accuracy-first answers: target, achieved half-width, ex-post ε, ρ (dpch.accuracy.run.AccuracyReport)
    accuracy: Any = None

    def to_pandas(self) -> Any:
        """The rows as a pandas DataFrame (pandas is optional: ``pip install dpch[pandas]``)."""
        try:
            import pandas as pd
        except ImportError:  # pragma: no cover - depends on the environment
            raise ImportError("to_pandas() needs pandas: pip install 'dpch[pandas]'") from None
        return pd.DataFrame(self.rows, columns=self.columns)

    def as_dict(self) -> dict[str, Any]:
        """The JSON shape of ``dpch query --format json``."""
        return {
            "columns": self.columns,
            "rows": [[_json_value(v) for v in row] for row in self.rows],
            "intervals": [[list(i) if i is not None else None for i in row] for row in self.intervals],
            "confidence": self.confidence,
            "cost": {"epsilon": self.cost.epsilon, "delta": self.cost.delta},
            "mechanism": self.mechanism,
            "measures": [m.as_dict() for m in self.measures],
            "budget": {
                "spent": {"epsilon": self.budget.spent.epsilon, "delta": self.budget.spent.delta},
                "remaining": {
                    "epsilon": self.budget.remaining.epsilon,
                    "delta": self.budget.remaining.delta,
                },
            },
            "release_id": self.release_id,
            "notes": self.notes,
            **({"accuracy": self.accuracy.as_dict()} if self.accuracy is not None else {}),
        }


def _json_value(v: Any) -> Any:
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if isinstance(v, int | float | str | bool) or v is None:
        return v
    return str(v)
