"""The gateway's wire format for releases: JSON that carries everything a :class:`Release` holds.

Ordinary ClickHouse clients never see it: they get rows in their own format and a summary of
the release in ``X-Dpch-*`` response headers. dpch's own remote client (``dpch://``) asks for
this JSON and rebuilds the same :class:`Release` an in-process session returns.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from dpch.accounting.accountant import BudgetStatus
from dpch.accounting.budget import Budget
from dpch.accounting.ledger import LedgerEntry
from dpch.accounting.locks import AnalystLock
from dpch.pipeline.report import MeasureReport, Release
from dpch.privacy.cost import PrivacyCost


def cost_dict(cost: PrivacyCost) -> dict[str, Any]:
    return {"epsilon": cost.epsilon, "delta": cost.delta, "rho": cost.rho}


def release_to_wire(release: Release, types: list[str], *, cached: bool = False) -> dict[str, Any]:
    return {
        "columns": list(release.columns),
        "types": list(types),
        "rows": [list(r) for r in release.rows],
        "intervals": [[list(i) if i is not None else None for i in row] for row in release.intervals],
        "confidence": release.confidence,
        "cost": cost_dict(release.cost),
        "mechanism": release.mechanism,
        "measures": [m.as_dict() for m in release.measures],
        "budget": release.budget.as_dict(),
        "release_id": release.release_id,
        "elapsed_ms": release.elapsed_ms,
        "notes": list(release.notes),
        "cached": cached,
        **({"accuracy": release.accuracy.as_dict(), "accuracy_text": release.accuracy.describe()}
           if release.accuracy is not None else {}),
    }


class WireAccuracy:
    """An accuracy-first report as a remote client sees it: the report's fields and its text."""

    def __init__(self, data: dict[str, Any], text: str) -> None:
        self._data, self._text = data, text

    def __getattr__(self, name: str) -> Any:
        try:
            return self._data[name]
        except KeyError:
            raise AttributeError(name) from None

    def describe(self) -> str:
        return self._text

    def as_dict(self) -> dict[str, Any]:
        return dict(self._data)


def budget_from_wire(data: dict[str, Any]) -> BudgetStatus:
    """The inverse of :meth:`BudgetStatus.as_dict` (dataset budgets and recent releases included)."""

    def cost(c: dict[str, Any] | None, *, floor: bool = False) -> PrivacyCost:
        if not c:
            return PrivacyCost.zero()
        eps, delta = c["epsilon"], c["delta"]
        if floor:
            eps, delta = max(0.0, eps), max(0.0, delta)
        return PrivacyCost(eps, delta, c.get("rho"))

    return BudgetStatus(
        analyst=data["analyst"],
        filter=data["filter"],
        budget=Budget(data["budget"]["epsilon"], data["budget"]["delta"]),
        spent=cost(data["spent"]),
        remaining=cost(data["remaining"], floor=True),
        releases=data["releases"],
        reserved=cost(data.get("reserved")),
        guarantee=data.get("guarantee", ""),
        dataset=data.get("dataset", ""),
        datasets=tuple(budget_from_wire(d) for d in data.get("datasets", [])),
        recent=tuple(entry_from_wire(e, data["analyst"]) for e in data.get("recent", [])),
        locked=_lock_from_wire(data["locked"], data["analyst"]) if data.get("locked") else None,
    )


def _lock_from_wire(lock: dict[str, Any], analyst: str) -> AnalystLock:
    """A lock as :meth:`AnalystLock.as_dict` wrote it (the gateway never sends the reason)."""
    return AnalystLock(analyst, lock["release_id"], lock.get("reason", ""), datetime.fromisoformat(lock["time"]))


def entry_from_wire(e: dict[str, Any], analyst: str) -> LedgerEntry:
    """A recent release as :func:`dpch.accounting.accountant.entry_dict` wrote it."""
    cost = PrivacyCost(e["epsilon"], e["delta"], e.get("rho"), ex_post="worst_epsilon" in e)
    worst = PrivacyCost(e.get("worst_epsilon", e["epsilon"]), e["delta"])
    return LedgerEntry(release_id=e["release_id"], time=datetime.fromisoformat(e["time"]), analyst=analyst,
                       dataset=e["dataset"], query_hash="", mechanism=e["mechanism"], status=e["status"],
                       cost=cost, worst=worst, datasets=tuple(e.get("datasets", ())))


def release_from_wire(data: dict[str, Any]) -> tuple[Release, list[str]]:
    """The :class:`Release` and column types carried by ``data``."""
    cost = data["cost"]
    release = Release(
        columns=list(data["columns"]),
        rows=[tuple(r) for r in data["rows"]],
        intervals=[[tuple(i) if i is not None else None for i in row] for row in data["intervals"]],
        cost=PrivacyCost(cost["epsilon"], cost["delta"], cost.get("rho")),
        confidence=data["confidence"],
        mechanism=data["mechanism"],
        measures=[MeasureReport(**m) for m in data["measures"]],
        budget=budget_from_wire(data["budget"]),
        release_id=data["release_id"],
        elapsed_ms=data.get("elapsed_ms", 0.0),
        notes=list(data.get("notes", [])),
        accuracy=WireAccuracy(data["accuracy"], data.get("accuracy_text", "")) if data.get("accuracy") else None,
    )
    return release, list(data["types"])
