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
    """Evaluates each output column per group; ``intervals_for(output)`` gives stat intervals.

    An output that is a bare key or statistic (``region``, ``count()``: most of them) is read off the keys
    and the statistic's array in one pass; only a computed one (``sum(x) / count()``) is evaluated per group
    on its tree, with the groups' environments built once for all such outputs (issue 29: a release with
    100 000 keys spent seconds building an environment per output per group)."""
    columns: list[list[Any]] = []
    column_ivs: list[list[Interval | None]] = []
    envs: list[dict[str, Any]] | None = None
    for out in outputs_:
        stat_ivs = None if out.is_key else intervals_for(out)
        fast = _bare(out, values, stat_ivs)
        if fast is not None:
            column, ivs = fast(keys)
        else:
            if envs is None:
                envs = [group_env(key, values, g) for g, key in enumerate(keys)]
            column = [outputs.evaluate(out.expr, env) for env in envs]
            ivs = [None if stat_ivs is None else _interval(out.expr, key, stat_ivs, g) for g, key in enumerate(keys)]
        columns.append(column)
        column_ivs.append(ivs)
    rows = [tuple(r) for r in zip(*columns, strict=True)] if columns else [() for _ in keys]
    intervals = [list(r) for r in zip(*column_ivs, strict=True)] if columns else [[] for _ in keys]
    return rows, intervals


def _interval(expr: Any, key: Key, stat_ivs: dict[str, Any], g: int) -> Interval:
    ienv: dict[str, Interval] = {f"k{i}": (v, v) for i, v in enumerate(key) if isinstance(v, int | float)}
    ienv.update({name: iv[g] for name, iv in stat_ivs.items()})
    lo, hi = outputs.interval(expr, ienv)
    return float(lo), float(hi)


def _bare(out: Any, values: dict[str, Vector], stat_ivs: dict[str, Any] | None) -> Any:
    """For an output that is only a key (a key column) or only a statistic (with its intervals), a function
    of the keys giving its column and intervals as :func:`outputs.evaluate` and :func:`outputs.interval`
    would; None for any other output."""
    name = outputs.reference(out.expr)
    if name is None:
        return None
    if out.is_key and name.startswith("k") and name[1:].isdigit():
        index = int(name[1:])
        return lambda keys: ([key[index] for key in keys], [None] * len(keys))
    if not out.is_key and name in values and (stat_ivs is None or name in stat_ivs):
        column = [float(v) for v in values[name].tolist()]
        if stat_ivs is None:
            return lambda keys: (column, [None] * len(keys))
        return lambda keys: (column, [(float(lo), float(hi)) for lo, hi in stat_ivs[name]])
    return None


def group_env(key: Key, values: dict[str, Vector], g: int) -> dict[str, Any]:
    """What a post-processing expression sees for group ``g``: its keys (k0…) and statistics (s0…)."""
    env: dict[str, Any] = {f"k{i}": v for i, v in enumerate(key)}
    env.update({name: float(arr[g]) for name, arr in values.items()})
    return env


def post_order(plan: Any, keys: list[Key], values: dict[str, Vector]) -> list[int]:
    """The groups HAVING keeps, in ORDER BY order, after LIMIT/OFFSET, computed on ``values``
    (released values: post-processing)."""
    if plan.having is None and not plan.order and plan.limit is None and not plan.offset:
        return list(range(len(keys)))  # every group, in order: no environment to build
    envs = [group_env(key, values, g) for g, key in enumerate(keys)]
    return outputs.arrange(plan.having, plan.order, plan.limit, plan.offset, envs)


def having_order_limit(plan: Any, keys: list[Key], values: dict[str, Vector], rows: list[Key],
                       intervals: list[list[Interval | None]]) -> tuple[list[Key], list[list[Interval | None]]]:
    """HAVING, ORDER BY and LIMIT/OFFSET applied to the rows of the noisy values (post-processing)."""
    order = post_order(plan, keys, values)
    return [rows[g] for g in order], [intervals[g] for g in order]
