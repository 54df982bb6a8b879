"""The gateway's wire format: JSON for releases, explanations and errors.

Ordinary ClickHouse clients never see it: they get rows in their own format and a summary of
the release in ``X-Dpch-*`` response headers. dpch's own remote client (``dpch://``) asks for
this JSON and rebuilds the same :class:`Release` an in-process session returns, an explanation
with its cost and budget check as data (:class:`RemoteExplanation`), and errors as their kind
(:data:`dpch.errors.KINDS`), so a PolicyError raised on the gateway is a PolicyError in the client.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from dpch.accounting.accountant import BudgetStatus
from dpch.accounting.budget import Budget
from dpch.accounting.ledger import LedgerEntry
from dpch.accounting.locks import AnalystLock
from dpch.errors import AccuracyNotReached, DpchError, error_kind, kind_of
from dpch.pipeline.report import MeasureReport, Release
from dpch.privacy.cost import PrivacyCost


def cost_dict(cost: PrivacyCost) -> dict[str, Any]:
    return {"epsilon": cost.epsilon, "delta": cost.delta, "rho": cost.rho}


def cost_from_wire(data: dict[str, Any]) -> PrivacyCost:
    """The inverse of :func:`cost_dict`."""
    return PrivacyCost.from_dict({"epsilon": data["epsilon"], "delta": data["delta"], "rho": data.get("rho")})


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
        return PrivacyCost.from_dict({"epsilon": eps, "delta": delta, "rho": c.get("rho")})

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
        **_renewal_from_wire(data),
    )


def _renewal_from_wire(data: dict[str, Any]) -> dict[str, Any]:
    """A renewing budget's fields (:meth:`BudgetStatus.as_dict` ``renewal`` and ``lifetime``)."""
    renewal = data.get("renewal")
    if not renewal:
        return {}
    renews_at = renewal.get("renews_at")
    return {"renewal": renewal["schedule"], "period": renewal.get("period", ""),
            "renews_at": datetime.fromisoformat(renews_at) if renews_at else None,
            "horizon": renewal.get("guarantee", ""),
            "lifetime": budget_from_wire(data["lifetime"]) if data.get("lifetime") else None}


def _lock_from_wire(lock: dict[str, Any], analyst: str) -> AnalystLock:
    """A lock as :meth:`AnalystLock.as_dict` wrote it (the gateway never sends the reason)."""
    return AnalystLock(analyst, lock["release_id"], lock.get("reason", ""), datetime.fromisoformat(lock["time"]))


def entry_from_wire(e: dict[str, Any], analyst: str) -> LedgerEntry:
    """A recent release as :func:`dpch.accounting.accountant.entry_dict` wrote it."""
    # an entry states its worst ε only for an ex-post release or an open reservation: it is then read as ex-post
    cost = PrivacyCost.from_dict({"epsilon": e["epsilon"], "delta": e["delta"], "rho": e.get("rho"),
                                  "ex_post": "worst_epsilon" in e})
    worst = PrivacyCost.from_dict({"epsilon": e.get("worst_epsilon", e["epsilon"]), "delta": e["delta"]})
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
        cost=cost_from_wire(cost),
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


# -- explanations ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class RemoteExplanation:
    """An EXPLAIN as a gateway sends it (:meth:`dpch.pipeline.report.Explanation.as_dict`): the
    cost and the budget check as data, and the text the gateway rendered. It satisfies
    :class:`dpch.api.Explained` (the plan itself stays on the gateway)."""

    sql: str
    cost: PrivacyCost
    admissible: bool
    reason: str
    mechanism: str
    confidence: float
    measures: list[MeasureReport] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    text: str = ""

    def describe(self) -> str:
        return self.text

    def as_dict(self) -> dict[str, Any]:
        return {"sql": self.sql, "cost": cost_dict(self.cost), "admissible": self.admissible,
                "reason": self.reason, "mechanism": self.mechanism, "confidence": self.confidence,
                "measures": [m.as_dict() for m in self.measures], "notes": list(self.notes),
                "describe": self.text}


def explanation_from_wire(data: dict[str, Any]) -> RemoteExplanation:
    """The inverse of ``Explanation.as_dict``."""
    return RemoteExplanation(
        sql=data["sql"], cost=cost_from_wire(data["cost"]), admissible=bool(data["admissible"]),
        reason=data.get("reason", ""), mechanism=data["mechanism"], confidence=data["confidence"],
        measures=[MeasureReport(**m) for m in data.get("measures", [])], notes=list(data.get("notes", [])),
        text=data.get("describe", ""))


# -- errors --------------------------------------------------------------------------------------


def _accuracy_details(error: DpchError) -> dict[str, Any]:
    assert isinstance(error, AccuracyNotReached)
    report: Any = error.report  # an AccuracyReport (or a WireAccuracy): as_dict() and describe()
    charged: Any = error.charged  # a PrivacyCost (dpch.errors sits below dpch.privacy)
    return {"release_id": error.release_id, "charged": cost_dict(charged) if charged is not None else None,
            "report": report.as_dict() if report is not None else None,
            "report_text": report.describe() if report is not None else ""}


def _restore_accuracy(error: DpchError, data: dict[str, Any]) -> None:
    assert isinstance(error, AccuracyNotReached)
    error.release_id = data.get("release_id", "")
    error.charged = cost_from_wire(data["charged"]) if data.get("charged") else None
    error.report = WireAccuracy(data["report"], data.get("report_text", "")) if data.get("report") else None


#: errors that carry fields besides their message: class → (encode, restore onto the rebuilt error)
_DETAILS: dict[type[DpchError], tuple[Callable[[DpchError], dict[str, Any]],
                                      Callable[[DpchError, dict[str, Any]], None]]] = {
    AccuracyNotReached: (_accuracy_details, _restore_accuracy),
}


def error_to_wire(error: DpchError) -> dict[str, Any]:
    """``error`` as JSON: its kind (a row of :data:`dpch.errors.KINDS`), message, hint and the
    fields its class carries. The message is the one the analyst sees locally (free of data)."""
    row = kind_of(error)
    codec = _DETAILS.get(row.error)
    return {"kind": row.kind, "message": error.message, "hint": error.hint,
            **(codec[0](error) if codec is not None else {})}


def error_from_wire(data: dict[str, Any]) -> DpchError:
    """The inverse of :func:`error_to_wire`: the same dpch class, message and hint."""
    row = error_kind(str(data.get("kind", "")))
    error = row.error.restore(str(data.get("message", "")), data.get("hint"))
    codec = _DETAILS.get(row.error)
    if codec is not None:
        codec[1](error, data)
    return error
