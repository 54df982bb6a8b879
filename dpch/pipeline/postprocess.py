"""Stage 7, postprocess: noisy statistics → result rows, HAVING, ORDER BY, LIMIT (free: no data
is read). Statistics' values and intervals come from :mod:`dpch.sql.aggregate_kinds`; quantiles are
the exponential mechanism's pick on their public grid (a rank error, reported in the notes)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from dpch.mechanisms.sampling import NoiseSource
from dpch.pipeline.calibrate import NoisePlan
from dpch.sql import outputs
from dpch.sql.aggregates import Stat

Interval = tuple[float, float]
Vector = np.ndarray[Any, np.dtype[np.float64]]
Key = tuple[Any, ...]


def grid_of(stat: Stat) -> tuple[float, float, int]:
    """A quantile's public grid (lo, step, points)."""
    assert stat.grid is not None, "quantile without a grid"
    return stat.grid


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
