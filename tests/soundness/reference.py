"""An independent Python reference for the fuzzer's exact aggregates (check (c) of issue 12).

It computes, from the generated rows, what each aggregate of a :class:`~tests.soundness.grammar.Query`
should be — with the semantics stated in :mod:`tests.soundness.grammar` — per group, and reads the
same statistics back from dpch's exact measures, so the two can be compared. It never looks at
dpch's emitted SQL; it uses the plan only to know which measures make up a statistic and the
centre (mid) dpch subtracts from centred sums, which it adds back.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from tests.soundness.grammar import KEYS, NAMES, PUBLIC_W, Agg, Query


@dataclass(frozen=True)
class RefValue:
    """A reference statistic and the absolute tolerance its comparison allows."""

    value: float | None  # None: undefined (e.g. avg of no rows) — not compared
    tol: float
    bins: list[float] | None = None  # quantiles: the clamped values, to bin like dpch


def _rows(query: Query, table: list[tuple]) -> list[dict[str, Any]]:
    rows = []
    for values in table:
        r = dict(zip(NAMES, values, strict=True))
        if query.join:
            if r["g"] not in PUBLIC_W:
                continue  # inner join: a row without a public match is dropped
            r["w"] = PUBLIC_W[r["g"]]
        if query.where is not None and query.where.ev(r) is not True:
            continue
        if query.group == "g" and r["g"] not in KEYS:
            continue  # only declared key values are released
        rows.append(r)
    return rows


def _key(query: Query, r: dict[str, Any]) -> tuple:
    return (str(r[query.group]),) if query.group else ()


def _num(v: Any) -> float | int:
    """A measure as dpch reads it: NULL (an aggregate over no non-NULL value) is 0."""
    if v is None:
        return 0
    return float(v) if isinstance(v, Decimal) else v


def _stat(agg: Agg, rows: list[dict[str, Any]]) -> RefValue:
    if agg.kind == "count":
        return RefValue(float(sum(1 for r in rows if agg.cond is None or agg.cond.ev(r) is True)), 0.5)
    if agg.kind == "count_value":
        return RefValue(float(sum(1 for r in rows if agg.arg.ev(r) is not None)), 0.5)
    if agg.kind == "distinct_unit":
        return RefValue(float(len({r["uid"] for r in rows if r["uid"] is not None})), 0.5)
    kept = [r for r in rows if agg.cond is None or agg.cond.ev(r) is True]
    values = [_num(v) for v in (agg.arg.ev(r) for r in kept) if v is not None]
    if any(isinstance(v, float) and not math.isfinite(v) for v in values):
        return RefValue(None, 0.0)
    # float accumulation: ≤ n·2⁻⁵² relative to Σ|x| per sum; 1e-9 leaves a wide margin
    if agg.kind == "sum":
        exact = sum(values) if all(isinstance(v, int) for v in values) else math.fsum(values)
        return RefValue(float(exact), 1e-9 * (1.0 + math.fsum(abs(v) for v in values)))
    if not values:
        return RefValue(None, 0.0)
    if agg.kind == "avg":
        return RefValue(math.fsum(values) / len(values), 1e-9 * (1.0 + max(abs(v) for v in values)))
    if agg.kind == "var":
        mean = math.fsum(values) / len(values)
        var = math.fsum((v - mean) ** 2 for v in values) / len(values)
        return RefValue(var, 1e-7 * (1.0 + max((v - mean) ** 2 for v in values)))
    if agg.kind == "quantile":
        return RefValue(float(len(values)), 0.5, bins=[float(v) for v in values])
    raise AssertionError(agg.kind)


def reference(query: Query, table: list[tuple]) -> dict[tuple, list[RefValue]]:
    """Per group key (tuple of str): each aggregate's reference value, in SELECT order."""
    groups: dict[tuple, list[dict[str, Any]]] = defaultdict(list)
    for r in _rows(query, table):
        groups[_key(query, r)].append(r)
    if not query.group:
        groups.setdefault((), [])
    return {key: [_stat(a, rows) for a in query.aggs] for key, rows in groups.items()}


def exact_stats(plan, result_rows: list[tuple]) -> dict[tuple, list[Any]]:
    """Per group key: each output column's exact statistic from dpch's measures, in SELECT order.

    avg = Σ(x − mid)/n + mid; varPop = Σ(x − mid)²/n − (Σ(x − mid)/n)²; count and sum are the
    measure itself; a quantile gives its histogram {bin: count}.
    """
    nkeys = len(plan.keys)
    index = {m.name: nkeys + j for j, m in enumerate(plan.measures)}
    outputs = [o for o in plan.outputs if not o.is_key]
    result = {}
    for row in result_rows:
        key = tuple(str(v) for v in row[:nkeys])
        values = []
        for out in outputs:
            stat = plan.stats[out.stats[0]]
            m = [row[index[name]] for name in stat.measures]
            if stat.kind in ("count", "sum"):
                values.append(_num(m[0]))
            elif stat.kind == "avg":
                s, n = (_num(x) for x in m)
                values.append(None if not n else s / n + stat.interval.mid)
            elif stat.kind == "var":
                n, s1, s2 = (_num(x) for x in m)
                values.append(None if not n else s2 / n - (s1 / n) ** 2)
            else:  # quantile: (bins, counts)
                bins, counts = m[0]
                values.append(dict(zip(bins, counts, strict=True)))
        result[key] = values
    return result


def quantile_bins(stat, values: list[float]) -> dict[int, int]:
    """The histogram dpch should build: each value clamped to the grid, binned to the nearest point."""
    lo, step, points = stat.grid
    hi = lo + step * (points - 1)
    hist: dict[int, int] = defaultdict(int)
    for v in values:
        hist[int(round((min(max(v, lo), hi) - lo) / step))] += 1
    return dict(hist)
