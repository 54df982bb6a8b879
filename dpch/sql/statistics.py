"""A statistic's released value and interval from its noisy measures (post-processing: no data).

- count, sum, count(DISTINCT …): the measure itself, ± its half-width; a count, and a sum of values
  bounded below by 0, clipped at 0 with its interval (:data:`Stat.nonnegative`: the projection onto
  the values the truth can take, docs/sql-reference.md "Non-negative by construction").
- avg: mid + S/C from the noisy centred sum S and count C, clipped to the value's bounds.
- varPop/varSamp/stddev*: from C, S1 = Σ(x − mid), S2 = Σ(x − mid)²: varPop = S2/C − (S1/C)²,
  clipped to [0, r²] (r = half the bounds' width); varSamp = varPop·C/(C − 1); stddev = √var.
- quantile: the exponential mechanism's pick (no interval; its accuracy is a rank error).

Intervals of derived statistics hold by a union bound: each of the m measures of a statistic is
within its (1 − β/m) half-width, and the statistic is bounded over that box. The fixed-cost release
and the accuracy-first stopping rules use these same functions, so a rule judges the interval the
release reports (for a non-negative count or sum, before its clipping at 0, which only narrows it:
``dpch.accuracy.rules.intervals``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from dpch.sql.aggregates import Stat
from dpch.sql.bounds import Interval as ValueInterval

Interval = tuple[float, float]
Vector = np.ndarray[Any, np.dtype[np.float64]]
#: (measure name, confidence level) → the half-width of that measure's noise at that level
HalfWidth = Callable[[str, float], float]


def value_bounds(stat: Stat) -> ValueInterval:
    """The value interval of an avg/var/quantile statistic (the analysis always sets it for them)."""
    assert stat.interval is not None, f"{stat.kind} statistic without value bounds"
    return stat.interval


def stat_values(stat: Stat, noisy: dict[str, Vector], quantiles: dict[str, Vector]) -> Vector:
    """The released value of ``stat`` in every group."""
    if stat.kind in ("count", "sum"):
        # the projection onto [0, ∞) of a value whose truth is there: post-processing (no privacy cost),
        # never farther from the truth, biased upwards near 0 (by at most E[max(−noise, 0)] at truth 0)
        return np.maximum(noisy[stat.measures[0]], 0.0) if stat.nonnegative else noisy[stat.measures[0]]
    if stat.kind == "avg":
        s, c = noisy[stat.measures[0]], noisy[stat.measures[1]]
        iv = value_bounds(stat)
        with np.errstate(divide="ignore", invalid="ignore"):
            value = np.where(c >= 1, iv.mid + s / np.maximum(c, 1), iv.mid)
        return np.clip(value, iv.lo, iv.hi)
    if stat.kind == "var":
        c, s1, s2 = (noisy[m] for m in stat.measures)
        r2 = (value_bounds(stat).width / 2.0) ** 2
        cc = np.maximum(c, 1.0)
        var = np.clip(s2 / cc - (s1 / cc) ** 2, 0.0, r2)
        if stat.variant in ("varSamp", "stddevSamp"):
            var = np.where(c > 1, np.clip(var * cc / np.maximum(cc - 1, 1e-9), 0.0, r2), var)
        return np.sqrt(var) if stat.variant.startswith("stddev") else var
    if stat.kind == "quantile":
        return quantiles[stat.name]
    raise ValueError(stat.kind)


def stat_intervals(stat: Stat, noisy: dict[str, Vector], half_width: HalfWidth,
                   confidence: float) -> list[Interval] | None:
    """Per-group intervals holding with ``confidence`` (None for quantiles)."""
    if stat.kind == "quantile":
        return None
    m = len(stat.measures)
    level = 1.0 - (1.0 - confidence) / m
    half = [half_width(name, level) for name in stat.measures]
    arrays = [noisy[name] for name in stat.measures]
    n = len(arrays[0])
    if stat.kind in ("count", "sum"):
        if stat.nonnegative:  # a truth ≥ 0 is in [lo, hi] exactly when it is in [max(lo, 0), max(hi, 0)]
            return [(max(float(v) - half[0], 0.0), max(float(v) + half[0], 0.0)) for v in arrays[0]]
        return [(float(v) - half[0], float(v) + half[0]) for v in arrays[0]]
    if stat.kind == "avg":
        iv = value_bounds(stat)
        result = []
        for s, c in zip(arrays[0].tolist(), arrays[1].tolist(), strict=True):
            if c - half[1] <= 0:
                result.append((iv.lo, iv.hi))
                continue
            ratios = [(s + ds) / (c + dc) for ds in (-half[0], half[0]) for dc in (-half[1], half[1])]
            result.append((max(iv.lo, iv.mid + min(ratios)), min(iv.hi, iv.mid + max(ratios))))
        return result
    # variance family
    r2 = (value_bounds(stat).width / 2.0) ** 2
    result = []
    for i in range(n):
        c, s1, s2 = (float(a[i]) for a in arrays)
        c_lo, c_hi = c - half[0], c + half[0]
        if c_lo <= 1:
            lo, hi = 0.0, r2
        else:
            s1_abs = [abs(s1 - half[1]), abs(s1 + half[1])]
            s1_min = 0.0 if s1 - half[1] <= 0 <= s1 + half[1] else min(s1_abs)
            s1_max = max(s1_abs)
            s2_lo, s2_hi = s2 - half[2], s2 + half[2]
            highs, lows = [], []
            for cv in _critical_counts(c_lo, c_hi, s1_min, s2_hi):
                highs.append(s2_hi / cv - (s1_min / cv) ** 2)
            for cv in _critical_counts(c_lo, c_hi, s1_max, s2_lo):
                lows.append(s2_lo / cv - (s1_max / cv) ** 2)
            lo, hi = min(lows), max(highs)
            if stat.variant in ("varSamp", "stddevSamp"):
                lo, hi = lo * c_hi / (c_hi - 1), hi * c_lo / (c_lo - 1)
        lo, hi = min(max(lo, 0.0), r2), min(max(hi, 0.0), r2)
        if stat.variant.startswith("stddev"):
            lo, hi = math.sqrt(lo), math.sqrt(hi)
        result.append((lo, hi))
    return result


def _critical_counts(c_lo: float, c_hi: float, s1: float, s2: float) -> list[float]:
    """Count values where S2/C − (S1/C)² may take its extremes on [c_lo, c_hi]."""
    points = [c_lo, c_hi]
    if s2 > 0:
        critical = 2 * s1 * s1 / s2
        if c_lo < critical < c_hi:
            points.append(critical)
    return points


