"""Text and JSON views of a :class:`BudgetStatus` for ``dpch budget``."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # types only: importing dpch.accounting loads the whole privacy stack (start-up speed)
    from dpch.accounting.accountant import BudgetStatus
    from dpch.accounting.ledger import LedgerEntry
    from dpch.accounting.locks import AnalystLock
    from dpch.accounting.watches import WatchState


def budget_json(status: BudgetStatus, watches: Sequence[WatchState] = ()) -> str:
    # the lock's internal reason is there only if the status came from the store (the data owner)
    data = status.as_dict(internal=True)
    if watches:  # threshold watches (docs/watches.md); never their noisy thresholds
        data["watches"] = [w.as_dict() for w in watches]
    return json.dumps(data, indent=2, default=str)


def watches_text(watches: Sequence[WatchState]) -> str:
    """One line per threshold watch: threshold, ε spent of its ε (B9's count), δ used, the open
    instance's question count, state. Never the noisy threshold."""
    if not watches:
        return ""
    lines = ["watches (each reserved its ε, δ from the budget above when created):"]
    for w in watches:
        p = w.params
        where = f"instance {w.instances} at question {w.position}" if w.open else f"{w.instances} instances, none open"
        lines.append(f"  {p.name:<16} threshold {p.threshold:g} on [{p.lower:g}, {p.upper:g}]  "
                     f"ε {w.charged_epsilon:.4g} of {p.epsilon:g}  δ {w.delta_used:.3g} of {p.delta:.3g}  "
                     f"{where}  {w.state}")
    return "\n".join(lines)


def lock_text(lock: AnalystLock) -> str:
    """One line: who is locked, since when, after which release, and why (if known here)."""
    why = f" ({lock.reason})" if lock.reason else ""
    return (f"{lock.analyst} since {lock.time:%Y-%m-%d %H:%M:%S}: release {lock.release_id} failed after its "
            f"charge{why}; clear with `dpch budget unlock --analyst {lock.analyst}`")


def _num(value: float | None) -> str:
    return "—" if value is None else f"{value:.4g}"


def _table(status: BudgetStatus) -> list[str]:
    b, s, r, res = status.budget, status.spent, status.remaining, status.reserved
    lines = [f"  {'':<3}{'budget':>10}  {'spent':>10}  {'reserved':>10}  {'remaining':>10}"]
    lines.append(f"  {'ε':<3}{b.epsilon:>10.4g}  {s.epsilon:>10.4g}  {res.epsilon:>10.4g}  {r.epsilon:>10.4g}")
    lines.append(f"  {'δ':<3}{b.delta:>10.3g}  {s.delta:>10.3g}  {res.delta:>10.3g}  {r.delta:>10.3g}")
    if s.rho is not None or r.rho is not None:
        lines.append(f"  {'ρ':<3}{'':>10}  {_num(s.rho):>10}  {_num(res.rho):>10}  {_num(r.rho):>10}")
    return lines


def _entry(e: LedgerEntry) -> str:
    delta = f", δ {e.cost.delta:.3g}" if e.cost.delta else ""
    rho = f", ρ {e.cost.rho:.4g}" if e.cost.rho else ""
    worst = f" (worst ε {e.worst.epsilon:.4g})" if e.cost.ex_post or e.status == "reserved" else ""
    return (f"  {e.time:%Y-%m-%d %H:%M:%S}  {e.dataset:<24} {e.mechanism:<9} "
            f"ε {e.cost.epsilon:.4g}{delta}{rho}{worst}  {e.status}")


def _period(status: BudgetStatus) -> str:
    """" in period 2026-11-24 (UTC; renews 2026-11-25 00:00 UTC)" for a renewing budget, else ""."""
    if not status.renewal:
        return ""
    renews = f"; renews {status.renews_at:%Y-%m-%d %H:%M} UTC" if status.renews_at else ""
    return f" in period {status.period} (UTC{renews})"


def _scope(status: BudgetStatus, title: str) -> list[str]:
    """One budget's lines: its table, and for a renewing budget what holds over the lifetime
    (the cap's table, or that the lifetime total is unbounded)."""
    lines = [f"{title} — {status.releases} releases{_period(status)}"] if title else []
    if status.horizon:
        lines.append(f"guarantee: {status.horizon}")
    lines += _table(status)
    if status.lifetime is not None:
        lines.append(f"lifetime cap (all periods) — {status.lifetime.releases} releases")
        lines += _table(status.lifetime)
    return lines


def budget_text(status: BudgetStatus, watches: Sequence[WatchState] = ()) -> str:
    """Per budget (analyst-wide, then each dataset): budget, spent (the filter's odometer),
    reserved (releases running or never settled, at their worst case), remaining (the largest
    pure-ε release still admitted), then the last releases. A renewing budget shows the current
    period, the guarantee per period and over the lifetime (capped, or unbounded), and the cap's
    own table."""
    lines = [f"analyst {status.analyst} — {status.releases} releases{_period(status)}",
             f"filter {status.guarantee or status.filter}"]
    if status.locked is not None:
        lines.insert(1, f"LOCKED: {lock_text(status.locked)}")
    lines += _scope(status, "")
    for ds in status.datasets:
        lines += _scope(ds, f"dataset {ds.dataset}")
    if status.recent:
        lines.append("last releases:")
        lines += [_entry(e) for e in status.recent]
    if watches:
        lines.append(watches_text(watches))
    return "\n".join(lines)
