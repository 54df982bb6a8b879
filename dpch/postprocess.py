"""Post-processing of noisy measures into result rows (free: it never touches the data).

Counts and sums are released as measured. An average is mid + S/C from the noisy centred
sum S and noisy count C, clipped to the column's bounds (the average of clamped values lies
in them). Its interval holds with the stated confidence by a union bound: S and C are each
within their (1 − β/2) half-widths, and the ratio is bounded over that box.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from dpch.sql.analyze import OutputColumn, QueryPlan

Interval = tuple[float, float]


def count_or_sum(noisy: np.ndarray, half_width: float) -> tuple[list[float], list[Interval]]:
    values = [float(v) for v in noisy]
    return values, [(v - half_width, v + half_width) for v in values]


def average(
    noisy_sum: np.ndarray,
    noisy_count: np.ndarray,
    sum_half_width: float,
    count_half_width: float,
    bounds: tuple[float, float],
) -> tuple[list[float], list[Interval]]:
    """Average from a noisy centred sum and count; half-widths are at confidence 1 − β/2."""
    lo, hi = bounds
    mid = (lo + hi) / 2.0
    values, intervals = [], []
    for s, c in zip(noisy_sum.tolist(), noisy_count.tolist(), strict=True):
        value = mid + s / c if c >= 1 else mid
        values.append(min(hi, max(lo, value)))
        if c - count_half_width <= 0:
            intervals.append((lo, hi))
            continue
        ratios = [
            (s + ds) / (c + dc)
            for ds in (-sum_half_width, sum_half_width)
            for dc in (-count_half_width, count_half_width)
        ]
        intervals.append((max(lo, mid + min(ratios)), min(hi, mid + max(ratios))))
    return values, intervals


def order_and_limit(
    plan: QueryPlan, rows: list[tuple[Any, ...]], intervals: list[list[Interval | None]]
) -> tuple[list[tuple[Any, ...]], list[list[Interval | None]]]:
    """Applies ORDER BY / LIMIT / OFFSET to the noisy rows."""
    pairs = list(zip(rows, intervals, strict=True))
    if plan.order:

        def compare(a: tuple, b: tuple) -> int:
            for item in plan.order:
                x, y = a[0][item.output_index], b[0][item.output_index]
                if x == y:
                    continue
                result = -1 if _less(x, y) else 1
                return -result if item.descending else result
            return 0

        pairs.sort(key=functools.cmp_to_key(compare))
    start = plan.offset
    stop = None if plan.limit is None else start + plan.limit
    pairs = pairs[start:stop]
    return [p[0] for p in pairs], [p[1] for p in pairs]


def _less(x: Any, y: Any) -> bool:
    try:
        return x < y
    except TypeError:
        return str(x) < str(y)


def is_statistic(output: OutputColumn) -> bool:
    return output.kind != "key"
