"""Stopping rules on released values only (docs/algorithms.md A0 stopping function, A7 pitfall 2).

A rule sees the noisy measures of the current iterate and the (public) half-width of each
measure — nothing else. It computes every aggregate's interval exactly as the release will
report it (:meth:`dpch.sql.aggregate_kinds.Aggregate.interval_arrays`) and checks:

- absolute: (hi − lo)/2 ≤ h for every aggregate and group;
- relative (Rogers et al. 2023, §7): 0 ∉ [lo, hi] and 1 − α < |hi/lo| ≤ 1 + α for every aggregate and group.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dpch.sql.accuracy_target import AccuracyTarget
from dpch.sql.aggregate_kinds import HalfWidth, statistic
from dpch.sql.aggregates import Stat
from dpch.sql.analyze import QueryPlan


def checked_stats(plan: QueryPlan, confidence: float) -> dict[str, float]:
    """Each aggregate shown in a result column, with the level its interval is reported at."""
    levels: dict[str, float] = {}
    for out in plan.outputs:
        if out.is_key or not out.stats:
            continue
        level = 1.0 - (1.0 - confidence) / max(1, len(set(out.stats)))
        for name in set(out.stats):
            levels[name] = max(levels.get(name, 0.0), level)
    return levels


def intervals(stat: Stat, noisy: dict[str, np.ndarray], half_width: HalfWidth,
              level: float) -> tuple[np.ndarray, np.ndarray]:
    """(lo, hi) per group, what the release reports for ``stat`` at ``level`` — before a count's (or a
    non-negative sum's) clipping at 0 (:data:`dpch.sql.aggregates.Stat.nonnegative`): the released
    interval is this one intersected with [0, ∞), so a target this one meets, the released one meets
    too, and an absolute target's stop stays a function of the grid alone (:func:`data_dependent`)."""
    return statistic(stat).interval_arrays(stat, noisy, half_width, level)


@dataclass(frozen=True)
class Check:
    """The verdict on one iterate: met or not, the widest half-width and relative bound seen."""

    met: bool
    half_width: float
    relative: float


def relative_bound(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """max(|hi/lo| − 1, 1 − |hi/lo|) where 0 ∉ [lo, hi]; +inf where the interval holds 0."""
    excludes = (lo > 0) | (hi < 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.abs(hi / lo)
    return np.where(excludes, np.abs(ratio - 1.0), np.inf)


def relative_ok(lo: np.ndarray, hi: np.ndarray, alpha: float) -> np.ndarray:
    """Rogers et al. 2023, §7: 1 − α < |hi/lo| ≤ 1 + α and 0 ∉ [lo, hi]."""
    excludes = (lo > 0) | (hi < 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.abs(hi / lo)
    ok: np.ndarray = excludes & (ratio > 1.0 - alpha) & (ratio <= 1.0 + alpha)
    return ok


def check(plan: QueryPlan, target: AccuracyTarget, noisy: dict[str, np.ndarray],
          half_width: HalfWidth) -> Check:
    """Whether the iterate ``noisy`` meets ``target`` (released values and public widths only)."""
    met, widest, rel = True, 0.0, 0.0
    for name, level in checked_stats(plan, target.confidence).items():
        lo, hi = intervals(plan.stats[name], noisy, half_width, level)
        if lo.size == 0:
            continue
        hw = float(np.max((hi - lo) / 2.0))
        widest = max(widest, hw)
        if target.accuracy is not None and not hw <= target.accuracy:
            met = False
        if target.relative_error is not None:
            rel = max(rel, float(np.max(relative_bound(lo, hi))))
            if not bool(np.all(relative_ok(lo, hi, target.relative_error))):
                met = False
    return Check(met, widest, rel)


def data_dependent(plan: QueryPlan, target: AccuracyTarget) -> bool:
    """Whether the stopping time can depend on noisy values (then intervals must hold uniformly).

    An absolute target on counts and sums only has half-widths fixed by the grid: its stop is
    the first grid point that is narrow enough, whatever the data.
    """
    if target.relative_error is not None:
        return True
    return any(not statistic(plan.stats[name]).additive for name in checked_stats(plan, target.confidence))
