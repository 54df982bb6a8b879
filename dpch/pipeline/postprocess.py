"""Post-processing: noisy measures → statistics → result rows (free: no data is read).

- count, sum, count(DISTINCT …): released as measured, ± the mechanism's half-width.
- avg: mid + S/C from the noisy centred sum S and count C, clipped to the value's bounds.
- varPop/varSamp/stddev*: from C, S1 = Σ(x − mid), S2 = Σ(x − mid)²: varPop = S2/C − (S1/C)²,
  clipped to [0, r²] (r = half the bounds' width); varSamp = varPop·C/(C − 1); stddev = √var.
- quantile: the exponential mechanism's pick on the public grid (its accuracy is a rank
  error, reported in the notes; the value has no interval).

Intervals of derived statistics hold by a union bound: each of the m measures of a statistic
is within its (1 − β/m) half-width, and the statistic is bounded over that box.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from dpch.mechanisms.sampling import NoiseSource
from dpch.pipeline.calibrate import NoisePlan
from dpch.sql import outputs
from dpch.sql.aggregates import Stat
from dpch.sql.bounds import Interval as ValueInterval

Interval = tuple[float, float]
Vector = np.ndarray[Any, np.dtype[np.float64]]
Key = tuple[Any, ...]


def _value_bounds(stat: Stat) -> ValueInterval:
    """The value interval of an avg/var/quantile statistic (the analysis always sets it for them)."""
    assert stat.interval is not None, f"{stat.kind} statistic without value bounds"
    return stat.interval


def grid_of(stat: Stat) -> tuple[float, float, int]:
    """A quantile's public grid (lo, step, points)."""
    assert stat.grid is not None, "quantile without a grid"
    return stat.grid


def stat_values(stat: Stat, noisy: dict[str, Vector], quantiles: dict[str, Vector]) -> Vector:
    """The released value of ``stat`` in every group."""
    if stat.kind in ("count", "sum"):
        return noisy[stat.measures[0]]
    if stat.kind == "avg":
        s, c = noisy[stat.measures[0]], noisy[stat.measures[1]]
        iv = _value_bounds(stat)
        with np.errstate(divide="ignore", invalid="ignore"):
            value = np.where(c >= 1, iv.mid + s / np.maximum(c, 1), iv.mid)
        return np.clip(value, iv.lo, iv.hi)
    if stat.kind == "var":
        c, s1, s2 = (noisy[m] for m in stat.measures)
        r2 = (_value_bounds(stat).width / 2.0) ** 2
        cc = np.maximum(c, 1.0)
        var = np.clip(s2 / cc - (s1 / cc) ** 2, 0.0, r2)
        if stat.variant in ("varSamp", "stddevSamp"):
            var = np.where(c > 1, np.clip(var * cc / np.maximum(cc - 1, 1e-9), 0.0, r2), var)
        return np.sqrt(var) if stat.variant.startswith("stddev") else var
    if stat.kind == "quantile":
        return quantiles[stat.name]
    raise ValueError(stat.kind)


def stat_intervals(stat: Stat, noisy: dict[str, Vector], noise: NoisePlan,
                   confidence: float) -> list[Interval] | None:
    """Per-group intervals holding with ``confidence`` (None for quantiles)."""
    if stat.kind == "quantile":
        return None
    m = len(stat.measures)
    level = 1.0 - (1.0 - confidence) / m
    half = [noise.additive[name].half_width(level) for name in stat.measures]
    arrays = [noisy[name] for name in stat.measures]
    n = len(arrays[0])
    if stat.kind in ("count", "sum"):
        return [(float(v) - half[0], float(v) + half[0]) for v in arrays[0]]
    if stat.kind == "avg":
        iv = _value_bounds(stat)
        result = []
        for s, c in zip(arrays[0].tolist(), arrays[1].tolist(), strict=True):
            if c - half[1] <= 0:
                result.append((iv.lo, iv.hi))
                continue
            ratios = [(s + ds) / (c + dc) for ds in (-half[0], half[0]) for dc in (-half[1], half[1])]
            result.append((max(iv.lo, iv.mid + min(ratios)), min(iv.hi, iv.mid + max(ratios))))
        return result
    # variance family
    r2 = (_value_bounds(stat).width / 2.0) ** 2
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


def pick_quantiles(stat: Stat, histograms: list[dict[int, int]], noise: NoisePlan,
                   source: NoiseSource) -> Vector:
    """The exponential mechanism over the grid: utility −|#{bins < j} − q·n| per candidate j."""
    lo, step, _ = grid_of(stat)
    mech = noise.selectors[stat.name]
    values = np.empty(len(histograms))
    for g, hist in enumerate(histograms):
        values[g] = lo + step * mech.select(grid_utilities(stat, hist), source)
    return values


def grid_utilities(stat: Stat, hist: dict[int, int]) -> Vector:
    """The quantile's utility −|#{bins < j} − q·n| for every grid point j, from one group's histogram."""
    points = grid_of(stat)[2]
    counts = np.zeros(points)
    for index, count in hist.items():
        counts[min(int(index), points - 1)] += count
    below = np.concatenate([[0.0], np.cumsum(counts)[:-1]])
    utilities: Vector = -np.abs(below - stat.quantile * counts.sum())
    return utilities


def rank_error(stat: Stat, noise: NoisePlan, confidence: float) -> float:
    """With ``confidence``, the released quantile's rank is within this many rows of q·n."""
    return noise.selectors[stat.name].utility_gap(grid_of(stat)[2], confidence)


def build_rows(outputs_: Sequence[Any], keys: list[Key], values: dict[str, Vector],
               intervals_for: Any) -> tuple[list[Key], list[list[Interval | None]]]:
    """Evaluates each output column per group; ``intervals_for(output)`` gives stat intervals."""
    rows: list[list[Any]] = [[] for _ in keys]
    ivs: list[list[Interval | None]] = [[] for _ in keys]
    for out in outputs_:
        stat_ivs = None if out.is_key else intervals_for(out)
        for g, key in enumerate(keys):
            value = outputs.evaluate(out.expr, group_env(key, values, g))
            rows[g].append(value)
            if out.is_key or stat_ivs is None:
                ivs[g].append(None)
                continue
            ienv: dict[str, Interval] = {f"k{i}": (v, v) for i, v in enumerate(key) if isinstance(v, int | float)}
            ienv.update({name: iv[g] for name, iv in stat_ivs.items()})
            lo, hi = outputs.interval(out.expr, ienv)
            ivs[g].append((float(lo), float(hi)))
    return [tuple(r) for r in rows], ivs


def group_env(key: Key, values: dict[str, Vector], g: int) -> dict[str, Any]:
    """What a post-processing expression sees for group ``g``: its keys (k0…) and statistics (s0…)."""
    env: dict[str, Any] = {f"k{i}": v for i, v in enumerate(key)}
    env.update({name: float(arr[g]) for name, arr in values.items()})
    return env


def post_order(plan: Any, keys: list[Key], values: dict[str, Vector]) -> list[int]:
    """The groups HAVING keeps, in ORDER BY order, after LIMIT/OFFSET, computed on ``values``
    (released values: post-processing)."""
    envs = [group_env(key, values, g) for g, key in enumerate(keys)]
    return outputs.arrange(plan.having, plan.order, plan.limit, plan.offset, envs)


def having_order_limit(plan: Any, keys: list[Key], values: dict[str, Vector], rows: list[Key],
                       intervals: list[list[Interval | None]]) -> tuple[list[Key], list[list[Interval | None]]]:
    """HAVING, ORDER BY and LIMIT/OFFSET applied to the rows of the noisy values (post-processing)."""
    order = post_order(plan, keys, values)
    return [rows[g] for g in order], [intervals[g] for g in order]
