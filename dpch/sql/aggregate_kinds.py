"""One class per aggregate (issue 25, in the spirit of PipelineDP's combiners): which SQL calls it
answers, the noisy measures and sensitivities it registers, how its released value and interval are
computed from those measures after noise, and what the rest of dpch may assume about it.

    SQL call ──recognizes/build──▶ measures + a Stat ──values/intervals──▶ released value ± interval

Two tables find them: :data:`AGGREGATES` (in the order a call is matched against them, by the
analysis) and :data:`STATISTICS` (by a :class:`~dpch.sql.aggregates.Stat`'s ``kind``, by everything
after the analysis: calibration, release, report, top-k, watches, the audit). Nothing outside this
module tells the kinds apart by name: it asks a kind's flags (``additive``, ``selected``, ``derived``).

Sensitivities are in :mod:`dpch.sql.aggregates`' table (one unit with at most k rows). Intervals of
derived statistics hold by a union bound: each of the m measures of a statistic is within its
(1 − β/m) half-width, and the statistic is bounded over that box. The fixed-cost release and the
accuracy-first stopping rules use these same methods, so a rule judges the interval the release
reports (for a non-negative count or sum, before its clipping at 0, which only narrows it).

Adding an aggregate: one class here and one entry in :data:`AGGREGATES` (docs/development.md, "Adding
an aggregate", walks through :class:`UniqExact`).
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
from sqlglot import exp

from dpch.errors import QueryRejected
from dpch.sql.aggregates import (
    QUANTILE_GRID,
    SUPPORTED_HINT,
    Stat,
    StatKind,
    as_float,
    centred_value,
    check_accumulable,
    literal_number,
    unsupported_hint,
    variance_variant,
)
from dpch.sql.bounds import Interval as ValueInterval
from dpch.sql.bounds import function_name
from dpch.sql.functions import display_name
from dpch.sql.nodes import call, float_number, num, number, paren
from dpch.sql.parse import DIALECT

if TYPE_CHECKING:
    from dpch.sql.aggregates import AggregateBuilder

Interval = tuple[float, float]
Vector = np.ndarray[Any, np.dtype[np.float64]]
#: (measure name, confidence level) → the half-width of that measure's noise at that level
HalfWidth = Callable[[str, float], float]


def value_bounds(stat: Stat) -> ValueInterval:
    """The value interval of an avg/var/quantile statistic (the analysis always sets it for them)."""
    assert stat.interval is not None, f"{stat.kind} statistic without value bounds"
    return stat.interval


def _level(stat: Stat, confidence: float) -> float:
    """Each measure's level, so that all of the statistic's m measures hold at once (union bound)."""
    return 1.0 - (1.0 - confidence) / len(stat.measures)


class Aggregate(ABC):
    """An aggregate dpch computes privately: its SQL, its measures, and its statistic after noise."""

    #: the statistic kind its :class:`Stat` carries (the key of :data:`STATISTICS`)
    kind: ClassVar[StatKind]
    #: the released value is its one measure, as it is (count, sum): a top-k score, a watched value,
    #: an integer result type, an exact stopping rule, a stopping time fixed by the grid
    additive: ClassVar[bool] = False
    #: picked by the exponential mechanism from a histogram (a quantile): a rank error, no interval
    selected: ClassVar[bool] = False
    #: computed from noisy sums and counts, clipped to the value's bounds (avg, var): its interval is a
    #: conservative union bound
    derived: ClassVar[bool] = False

    @abstractmethod
    def recognizes(self, node: exp.Expr) -> bool:
        """Whether the SQL call ``node`` is this aggregate."""

    @abstractmethod
    def build(self, builder: AggregateBuilder, node: exp.Expr, label: str) -> str:
        """Registers the call's measures and statistic with ``builder``; returns the statistic's name."""

    @abstractmethod
    def values(self, stat: Stat, noisy: dict[str, Vector], quantiles: dict[str, Vector]) -> Vector:
        """The released value of ``stat`` in every group, from its noisy measures (post-processing)."""

    @abstractmethod
    def intervals(self, stat: Stat, noisy: dict[str, Vector], half_width: HalfWidth,
                  confidence: float) -> list[Interval] | None:
        """Per-group intervals holding with ``confidence`` (None: the statistic has none)."""

    def interval_arrays(self, stat: Stat, noisy: dict[str, Vector], half_width: HalfWidth,
                        level: float) -> tuple[Vector, Vector]:
        """(lo, hi) per group at ``level``, as arrays, before any clipping at 0 (the stopping rules')."""
        ivs = self.intervals(stat, noisy, half_width, level)
        assert ivs is not None
        arr = np.asarray(ivs, dtype=float).reshape(-1, 2)
        return arr[:, 0], arr[:, 1]


class _Additive(Aggregate):
    """A statistic that is its one measure: a count or a sum."""

    additive = True

    def values(self, stat: Stat, noisy: dict[str, Vector], quantiles: dict[str, Vector]) -> Vector:
        # the projection onto [0, ∞) of a value whose truth is there: post-processing (no privacy cost),
        # never farther from the truth, biased upwards near 0 (by at most E[max(−noise, 0)] at truth 0)
        value = noisy[stat.measures[0]]
        return np.maximum(value, 0.0) if stat.nonnegative else value

    def intervals(self, stat: Stat, noisy: dict[str, Vector], half_width: HalfWidth,
                  confidence: float) -> list[Interval] | None:
        half = half_width(stat.measures[0], _level(stat, confidence))
        values = noisy[stat.measures[0]].tolist()
        if stat.nonnegative:  # a truth ≥ 0 is in [lo, hi] exactly when it is in [max(lo, 0), max(hi, 0)]
            return [(max(v - half, 0.0), max(v + half, 0.0)) for v in values]
        return [(v - half, v + half) for v in values]

    def interval_arrays(self, stat: Stat, noisy: dict[str, Vector], half_width: HalfWidth,
                        level: float) -> tuple[Vector, Vector]:
        v, h = noisy[stat.measures[0]], half_width(stat.measures[0], _level(stat, level))
        return v - h, v + h


class Count(_Additive):
    """count(*), count(e), countIf(c), count(DISTINCT e): a row count or a count of distinct values."""

    kind = "count"

    def recognizes(self, node: exp.Expr) -> bool:
        return isinstance(node, exp.Count | exp.CountIf) or function_name(node) == "countif"

    def build(self, builder: AggregateBuilder, node: exp.Expr, label: str) -> str:
        if not isinstance(node, exp.Count):  # countIf(c)
            predicate = builder.args(node, 1, label)[0]
            return builder.stat("count", label, (builder.count(builder.condition(predicate), label),))
        arg = node.this
        if arg is None or isinstance(arg, exp.Star):
            return builder.stat("count", label, (builder.count(None, label),))
        if isinstance(arg, exp.Distinct):
            items = arg.expressions
            if len(items) != 1:
                raise QueryRejected(f"{label}: count(DISTINCT ...) takes one expression")
            return builder.distinct(items[0], label)
        nullable = builder.translator.nullable(arg)
        counted = builder.not_null(builder.condition(arg), None) if nullable else None
        return builder.stat("count", label, (builder.count(counted, label),))


class UniqExact(Count):
    """``uniqExact(e)``: ClickHouse's exact count of distinct values, the same statistic as
    ``count(DISTINCT e)`` (NULLs are not counted by either); ``uniqExact(unit)`` counts privacy units.
    The worked example of docs/development.md, "Adding an aggregate"."""

    def recognizes(self, node: exp.Expr) -> bool:
        # ClickHouse's name is case-sensitive (``uniqexact`` does not exist, code 46)
        return isinstance(node, exp.Anonymous | exp.AnonymousAggFunc) and str(node.this) == "uniqExact"

    def build(self, builder: AggregateBuilder, node: exp.Expr, label: str) -> str:
        if len(node.expressions) != 1:
            raise QueryRejected(f"{label}: uniqExact takes one expression here",
                                hint="count distinct combinations as uniqExact(tuple(a, b))")
        return builder.distinct(node.expressions[0], label)


class Sum(_Additive):
    """sum(e), sumIf(e, c): Σ e over the capped rows."""

    kind = "sum"

    def recognizes(self, node: exp.Expr) -> bool:
        return isinstance(node, exp.Sum) or function_name(node) == "sumif"

    def build(self, builder: AggregateBuilder, node: exp.Expr, label: str) -> str:
        arg, cond = builder.arg_and_condition(node, function_name(node) == "sumif", label)
        sum_name, value = builder.sum(arg, cond, label, centred=False)
        return builder.stat("sum", label, (sum_name,), nonnegative=value.interval.lo >= 0)


class Avg(Aggregate):
    """avg(e), avgIf(e, c): mid + S/C from the noisy centred sum S = Σ(e − mid) and count C, clipped to
    the value's bounds."""

    kind = "avg"
    derived = True

    def recognizes(self, node: exp.Expr) -> bool:
        return isinstance(node, exp.Avg) or function_name(node) == "avgif"

    def build(self, builder: AggregateBuilder, node: exp.Expr, label: str) -> str:
        arg, cond = builder.arg_and_condition(node, function_name(node) == "avgif", label)
        sum_name, value = builder.sum(arg, cond, label, centred=True)
        count_name = builder.count(builder.not_null(value.node, cond) if value.nullable else cond, label)
        return builder.stat("avg", label, (sum_name, count_name), interval=value.interval)

    def values(self, stat: Stat, noisy: dict[str, Vector], quantiles: dict[str, Vector]) -> Vector:
        s, c = noisy[stat.measures[0]], noisy[stat.measures[1]]
        iv = value_bounds(stat)
        with np.errstate(divide="ignore", invalid="ignore"):
            value = np.where(c >= 1, iv.mid + s / np.maximum(c, 1), iv.mid)
        return np.clip(value, iv.lo, iv.hi)

    def intervals(self, stat: Stat, noisy: dict[str, Vector], half_width: HalfWidth,
                  confidence: float) -> list[Interval] | None:
        lo, hi = self.interval_arrays(stat, noisy, half_width, confidence)
        return list(zip(lo.tolist(), hi.tolist(), strict=True))

    def interval_arrays(self, stat: Stat, noisy: dict[str, Vector], half_width: HalfWidth,
                        level: float) -> tuple[Vector, Vector]:
        inner = _level(stat, level)
        s, c = noisy[stat.measures[0]], noisy[stat.measures[1]]
        hs, hc = half_width(stat.measures[0], inner), half_width(stat.measures[1], inner)
        iv = value_bounds(stat)
        # S/C over the box [S ± hs] × [C ± hc] takes its extremes at the corners while C − hc > 0
        with np.errstate(divide="ignore", invalid="ignore"):
            ratios = np.stack([(s + ds) / (c + dc) for ds in (-hs, hs) for dc in (-hc, hc)])
        lo = np.maximum(iv.lo, iv.mid + ratios.min(axis=0))
        hi = np.minimum(iv.hi, iv.mid + ratios.max(axis=0))
        wide = c - hc <= 0
        return np.where(wide, iv.lo, lo), np.where(wide, iv.hi, hi)


class Variance(Aggregate):
    """varPop/varSamp/stddevPop/stddevSamp(e) and ClickHouse's other names for them: from C, S1 = Σ(e − mid),
    S2 = Σ(e − mid)², varPop = S2/C − (S1/C)² clipped to [0, r²] (r = half the bounds' width);
    varSamp = varPop·C/(C − 1); stddev = √var."""

    kind = "var"
    derived = True

    def recognizes(self, node: exp.Expr) -> bool:
        return variance_variant(node) is not None

    def build(self, builder: AggregateBuilder, node: exp.Expr, label: str) -> str:
        variant = variance_variant(node)
        arg = builder.args(node, 1, label)[0]
        value = builder.translator.translate(arg, label)
        iv = value.interval
        check_accumulable(value, label, floating=True)
        shifted = centred_value(value)
        r = iv.width / 2.0
        count = builder.count(builder.not_null(value.node, None) if value.nullable else None, label)
        s1 = builder.measure("sum", call("sum", shifted), builder.cap * r, False,
                             f"{label}: Σ(value − mid): {builder.rows} × {num(r)}", l2=builder.l2(r))
        s2 = builder.measure("sum", call("sum", call("pow", shifted, number(2))), builder.cap * r * r, False,
                             f"{label}: Σ(value − mid)²: {builder.rows} × {num(r * r)}", l2=builder.l2(r * r))
        return builder.stat("var", label, (count, s1, s2), interval=iv, variant=variant or "")

    def values(self, stat: Stat, noisy: dict[str, Vector], quantiles: dict[str, Vector]) -> Vector:
        c, s1, s2 = (noisy[m] for m in stat.measures)
        r2 = (value_bounds(stat).width / 2.0) ** 2
        cc = np.maximum(c, 1.0)
        var = np.clip(s2 / cc - (s1 / cc) ** 2, 0.0, r2)
        if stat.variant in ("varSamp", "stddevSamp"):
            var = np.where(c > 1, np.clip(var * cc / np.maximum(cc - 1, 1e-9), 0.0, r2), var)
        return np.sqrt(var) if stat.variant.startswith("stddev") else var

    def intervals(self, stat: Stat, noisy: dict[str, Vector], half_width: HalfWidth,
                  confidence: float) -> list[Interval] | None:
        level = _level(stat, confidence)
        half = [half_width(name, level) for name in stat.measures]
        arrays = [noisy[name] for name in stat.measures]
        r2 = (value_bounds(stat).width / 2.0) ** 2
        result = []
        for i in range(len(arrays[0])):
            c, s1, s2 = (float(a[i]) for a in arrays)
            c_lo, c_hi = c - half[0], c + half[0]
            if c_lo <= 1:
                lo, hi = 0.0, r2
            else:
                s1_abs = [abs(s1 - half[1]), abs(s1 + half[1])]
                s1_min = 0.0 if s1 - half[1] <= 0 <= s1 + half[1] else min(s1_abs)
                s1_max = max(s1_abs)
                s2_lo, s2_hi = s2 - half[2], s2 + half[2]
                highs = [s2_hi / cv - (s1_min / cv) ** 2 for cv in _critical_counts(c_lo, c_hi, s1_min, s2_hi)]
                lows = [s2_lo / cv - (s1_max / cv) ** 2 for cv in _critical_counts(c_lo, c_hi, s1_max, s2_lo)]
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


class Quantile(Aggregate):
    """quantile(p)(e), median(e): a histogram of e on a public grid, then the exponential mechanism's pick
    (no interval; its accuracy is a rank error)."""

    kind = "quantile"
    selected = True

    def recognizes(self, node: exp.Expr) -> bool:
        # the parser reads quantile(p)(x), quantile(x) and median(x), in any case, into this node
        return isinstance(node, exp.Quantile)

    def build(self, builder: AggregateBuilder, node: exp.Expr, label: str) -> str:
        level = 0.5  # ClickHouse's quantile(x) is the median
        if node.args.get("quantile") is not None:
            level = literal_number(node.args["quantile"], label)
        if not 0.0 <= level <= 1.0:
            raise QueryRejected(f"{label}: the quantile level must be between 0 and 1")
        value = builder.translator.translate(node.this, label)
        iv = value.interval
        if iv.width == 0:
            raise QueryRejected(f"{label}: the value's bounds are a single point")
        points = QUANTILE_GRID
        if value.integer and iv.width < QUANTILE_GRID:
            points = int(iv.width) + 1
        step = iv.width / (points - 1)
        offset = paren(exp.Sub(this=as_float(value), expression=number(iv.lo)))
        bin_ = call("toUInt32", call("round", exp.Div(this=offset, expression=float_number(step))))
        histogram = call("sumMapIf", exp.Array(expressions=[bin_]),
                         exp.Array(expressions=[call("toUInt64", number(1))]), call("isNotNull", value.node))
        if builder.bound.kind != "rows":  # one exponential mechanism per group, calibrated to the row cap's k
            raise QueryRejected(f"{label}: a quantile needs the row cap, not the per-group bound",
                                hint="drop dp_bound = 'groups' (and dp_max_groups, dp_max_rows_per_group)")
        measure = builder.measure("histogram", histogram, float(builder.cap), True,
                                  f"{label}: rank utility; one unit moves a rank by at most {builder.cap}")
        return builder.stat("quantile", label, (measure,), interval=iv, quantile=level,
                            grid=(iv.lo, step, points))

    def values(self, stat: Stat, noisy: dict[str, Vector], quantiles: dict[str, Vector]) -> Vector:
        return quantiles[stat.name]

    def intervals(self, stat: Stat, noisy: dict[str, Vector], half_width: HalfWidth,
                  confidence: float) -> list[Interval] | None:
        return None


#: every aggregate, in the order a call is matched against them (the first that recognizes it builds it)
AGGREGATES: tuple[Aggregate, ...] = (Count(), UniqExact(), Sum(), Avg(), Variance(), Quantile())

#: a statistic's kind → the aggregate that computes its value and interval
STATISTICS: dict[str, Aggregate] = {a.kind: a for a in reversed(AGGREGATES)}


def aggregate_of(node: exp.Expr) -> Aggregate | None:
    """The aggregate the SQL call ``node`` is (None: not one dpch computes)."""
    return next((a for a in AGGREGATES if a.recognizes(node)), None)


def register(builder: AggregateBuilder, node: exp.Expr) -> str:
    """Registers the aggregate call ``node`` with ``builder`` (its measures and statistic); returns the
    statistic's name. An aggregate dpch does not compute privately is refused with what to write instead."""
    aggregate = aggregate_of(node)
    if aggregate is None:
        raise QueryRejected(f"aggregate {display_name(node)} is not supported",
                            hint=unsupported_hint(node) or SUPPORTED_HINT)
    return aggregate.build(builder, node, node.sql(DIALECT))


def statistic(stat: Stat) -> Aggregate:
    """The aggregate that computes ``stat``'s released value and interval."""
    return STATISTICS[stat.kind]


def stat_values(stat: Stat, noisy: dict[str, Vector], quantiles: dict[str, Vector]) -> Vector:
    """The released value of ``stat`` in every group (:meth:`Aggregate.values`)."""
    return statistic(stat).values(stat, noisy, quantiles)


def stat_intervals(stat: Stat, noisy: dict[str, Vector], half_width: HalfWidth,
                   confidence: float) -> list[Interval] | None:
    """Per-group intervals of ``stat`` holding with ``confidence`` (:meth:`Aggregate.intervals`)."""
    return statistic(stat).intervals(stat, noisy, half_width, confidence)


__all__ = ["AGGREGATES", "STATISTICS", "Aggregate", "Avg", "Count", "HalfWidth", "Quantile", "Sum", "UniqExact",
           "Variance", "aggregate_of", "register", "stat_intervals", "stat_values", "statistic",
           "value_bounds"]
