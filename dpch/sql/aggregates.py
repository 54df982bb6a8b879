"""Aggregates: each SQL aggregate becomes noisy *measures* plus a *statistic* computed from them.

Sensitivities, for one unit added or removed with at most k rows (ℓ1 over all groups, which
also bounds ℓ2 since ℓ2 ≤ ℓ1), where an argument expression lies in [lo, hi] (interval
arithmetic, :mod:`.bounds`), r = (hi − lo)/2 and mid = (lo + hi)/2:

| aggregate | measures | sensitivity |
|---|---|---|
| count(*), count(e), countIf(c) | row count | k |
| count(DISTINCT unit), uniqExact(unit) | distinct units per group | ℓ1 ≤ min(k, G, groups), ℓ2 ≤ √ that; 1 ungrouped |
| count(DISTINCT e), uniqExact(e) | distinct values | k |
| sum(e), sumIf(e, c) | Σ e | k·max(|lo|, |hi|) |
| avg(e), avgIf(e, c) | Σ (e − mid), count | k·r, k |
| varPop/varSamp/stddevPop/stddevSamp(e) | count, Σ (e − mid), Σ (e − mid)² | k, k·r, k·r² |
|   (and ClickHouse's other names for them: :data:`VARIANCE_NAMES`, :data:`VARIANCE_ALIASES`) | | |
| quantile(p)(e), median(e) | histogram of e on a public grid → exponential mechanism | rank utility: k |

``G`` is the table's ``max_groups_per_unit``. Identical measures are shared (``count(*)``
beside ``avg(x)`` of a non-NULL column costs one count, not two).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from sqlglot import exp

from dpch.errors import QueryRejected
from dpch.sql.bounds import (
    AGGREGATE_NAMES,
    MAX_EXACT_INTEGER,
    Interval,
    ValueExpr,
    ValueTranslator,
    condition,
    function_name,
)
from dpch.sql.contribution import ContributionBound
from dpch.sql.nodes import call, num, number, paren, render, show

MeasureKind = Literal["count", "sum", "distinct", "histogram"]
StatKind = Literal["count", "sum", "avg", "var", "quantile"]

#: candidates of a quantile's exponential mechanism (grid points on the bounded domain)
QUANTILE_GRID = 1000


@dataclass(frozen=True)
class Measure:
    """One noisy aggregate per group, computed by ClickHouse over the capped rows."""

    name: str
    kind: MeasureKind
    #: the aggregate over the capped rows, as the tree the emitted query holds
    node: exp.Expr
    sensitivity: float
    l2_sensitivity: float
    integer: bool
    derivation: str

    @property
    def sql(self) -> str:
        """The aggregate as EXPLAIN displays it (rendered from :attr:`node`)."""
        return show(self.node)


@dataclass(frozen=True)
class Stat:
    """A released statistic: how to compute it from its measures after noise."""

    name: str
    kind: StatKind
    label: str
    measures: tuple[str, ...]
    interval: Interval | None = None
    variant: str = ""
    quantile: float = 0.5
    grid: tuple[float, float, int] | None = None  # lo, step, points
    #: the true value is never negative (a count; a sum of values bounded below by 0): the released value
    #: and its interval are clipped at 0 (:mod:`.statistics`, issue 27 item 4)
    nonnegative: bool = False


class AggregateBuilder:
    """Turns aggregate calls into measures and statistics (sharing identical measures)."""

    def __init__(self, translator: ValueTranslator, condition: Callable[[exp.Expr], exp.Expr],
                 is_unit: Callable[[exp.Expr], bool], cap: int, unit: exp.Expr,
                 distinct_unit_groups: int | None, bound: ContributionBound | None = None) -> None:
        self.translator = translator
        self.condition = condition
        self.is_unit = is_unit
        #: the contribution bound (:mod:`.contribution`): the row cap of ``cap`` rows unless given
        self.bound = bound if bound is not None else ContributionBound.row_cap(cap, distinct_unit_groups or 1)
        #: rows one unit adds over all groups (ℓ1); ℓ2 is the same under the row cap, less per group
        self.cap = self.bound.l1_rows
        self.rows = self.bound.rows_text
        self.unit = unit
        self.distinct_unit_groups = distinct_unit_groups
        self.measures: dict[str, Measure] = {}
        self.stats: dict[str, Stat] = {}

    # -- measures and statistics (the aggregates of :mod:`.aggregate_kinds` build theirs with these) ----------

    def l2(self, per_row: float) -> float | None:
        """ℓ2 of a measure one row moves by at most ``per_row``: None (= its ℓ1) under the row cap."""
        return None if self.bound.kind == "rows" else self.bound.l2_rows * per_row

    def measure(self, kind: MeasureKind, node: exp.Expr, l1: float, integer: bool, derivation: str,
                l2: float | None = None) -> str:
        """Registers a noisy measure (sensitivity ``l1``, and ``l2``: None when it equals ``l1``); an identical
        aggregate registered before is shared. Returns the measure's name."""
        for m in self.measures.values():
            if render(m.node) == render(node):  # identical aggregates are computed once
                return m.name
        name = f"m{len(self.measures)}"
        self.measures[name] = Measure(name, kind, node, l1, l1 if l2 is None else l2, integer, derivation)
        return name

    def stat(self, kind: StatKind, label: str, measures: tuple[str, ...], **kw: Any) -> str:
        """Registers a statistic of ``measures`` (an identical one is shared); returns its name."""
        if kind == "count":
            kw.setdefault("nonnegative", True)
        for s in self.stats.values():
            if s.kind == kind and s.measures == measures and s.variant == kw.get("variant", "") \
                    and s.quantile == kw.get("quantile", 0.5):
                return s.name
        name = f"s{len(self.stats)}"
        self.stats[name] = Stat(name, kind, label, measures, **kw)
        return name

    def count(self, predicate: exp.Expr | None, label: str) -> str:
        """The measure ``count()`` (or ``countIf(predicate)``) of the capped rows."""
        node = call("countIf", predicate) if predicate is not None else call("count")
        return self.measure("count", node, float(self.cap), True, f"{label}: one unit adds at most {self.rows}",
                            l2=self.l2(1.0))

    def distinct(self, arg: exp.Expr, label: str) -> str:
        """The statistic counting the distinct values of ``arg`` (the privacy units when ``arg`` is the unit)."""
        if self.is_unit(arg):
            groups = self.distinct_unit_groups
            l1 = float(min(self.cap, groups) if groups else 1)
            measure = self.measure(
                "distinct", call("uniqExact", self.unit), l1, True,
                f"{label}: one unit is one distinct value in each of at most {int(l1)} group(s)",
                l2=math.sqrt(l1))
        else:
            measure = self.measure("distinct", call("uniqExact", self.condition(arg)), float(self.cap), True,
                                   f"{label}: one unit's {self.rows} add at most {self.cap} distinct values",
                                   l2=self.l2(1.0))
        return self.stat("count", label, (measure,))

    def args(self, node: exp.Expr, count: int, label: str) -> list[exp.Expr]:
        """The call's ``count`` arguments (refused, in words, when it has another number)."""
        if isinstance(node, exp.CountIf):
            args = [node.this]
        elif isinstance(node, exp.Anonymous | exp.AnonymousAggFunc | exp.CombinedAggFunc):
            args = list(node.expressions)
        else:
            args = [a for a in (node.this, node.args.get("expression")) if a is not None]
        if len(args) != count:
            raise QueryRejected(f"{label} takes {count} argument(s)")
        return args

    def arg_and_condition(
        self, node: exp.Expr, conditional: bool, label: str
    ) -> tuple[exp.Expr, exp.Expr | None]:
        """The argument of ``f(x)``, or of ``fIf(x, c)`` with its condition made total."""
        if not conditional:
            arg = node.this
            if isinstance(arg, exp.Distinct):
                raise QueryRejected(f"{label}: DISTINCT is only supported in count(DISTINCT ...)")
            return arg, None
        arg, cond = self.args(node, 2, label)
        return arg, self.condition(cond)

    def not_null(self, node: exp.Expr, cond: exp.Expr | None) -> exp.Expr:
        """``isNotNull(node)``, and ``cond`` when given."""
        test = call("isNotNull", node)
        return exp.And(this=paren(cond), expression=test) if cond is not None else test

    def sum(self, arg: exp.Expr, cond: exp.Expr | None, label: str, *,
            centred: bool) -> tuple[str, ValueExpr]:
        """The measure Σ arg (Σ(arg − mid) when ``centred``) over the rows where ``cond`` holds."""
        value = self.translator.translate(arg, label)
        iv = value.interval
        check_accumulable(value, label, floating=centred)  # a centred sum is accumulated in Float64
        expr = value.node
        if centred:
            expr = centred_value(value)
            l1 = self.cap * iv.width / 2.0
            why = f"{label}: Σ(value − {num(iv.mid)}) with value in [{num(iv.lo)}, {num(iv.hi)}]: " \
                  f"{self.rows} × {num(iv.width / 2.0)}"
            integer = False
            l2 = self.l2(iv.width / 2.0)
        else:
            l1 = self.cap * iv.magnitude
            why = f"{label}: value in [{num(iv.lo)}, {num(iv.hi)}]: {self.rows} × {num(iv.magnitude)}"
            integer = value.integer
            l2 = self.l2(iv.magnitude)
        node = call("sumIf", expr, cond) if cond is not None else call("sum", expr)
        return self.measure("sum", node, l1, integer, why, l2=l2), value


#: Float64 measures: 2^64 rows of |value| ≤ 1e280 stay far below Float64's 1.8e308 (no ±inf)
MAX_FLOAT = 1e280


def check_accumulable(value: ValueExpr, label: str, *, floating: bool) -> None:
    """Refuses a value whose sum could leave the accumulator's range (docs/design.md rule 6).

    ClickHouse sums UInt64/Int64 modulo 2^64 without a warning, while the sensitivity assumes the
    true sum; so integer values are summed as Int128 (see :meth:`ValueTranslator.translate`), which
    holds 2^64 rows of any value below 2^62 exactly, and Float64 values are kept far from overflow.
    """
    exact = value.integer and not floating
    limit = MAX_EXACT_INTEGER if exact else MAX_FLOAT
    if value.interval.magnitude >= limit:
        kind = "an exact integer sum" if exact else "a floating-point sum"
        raise QueryRejected(
            f"{label}: values up to {num(value.interval.magnitude)} are too large for {kind}",
            hint="use smaller bounds or constants (integers below 2^62, reals below 1e280)")


def as_float(value: ValueExpr) -> exp.Expr:
    """``value`` in Float64 (integer values are Int128, whose difference with a float is exact enough
    and never wraps; real values already are Float64)."""
    return call("toFloat64", value.node) if value.integer else value.node.copy()


def centred_value(value: ValueExpr) -> exp.Expr:
    """``(value − mid)`` in Float64, mid the centre of the value's interval."""
    return paren(exp.Sub(this=as_float(value), expression=number(value.interval.mid)))


SUPPORTED_HINT = ("supported: count, count(DISTINCT x), uniqExact(x), countIf, sum, sumIf, avg, avgIf, varPop, "
                  "varSamp, stddevPop, stddevSamp (and their aliases STD, STDDEV, VAR_POP, VAR_SAMP, STDDEV_POP, "
                  "STDDEV_SAMP), quantile(p), median")

#: The variance family by ClickHouse's name (system.functions, ClickHouse 26): each name → the
#: statistic dpch computes. These names are case-sensitive in ClickHouse (``varpop`` does not exist).
#: The -Stable forms differ only in ClickHouse's floating-point algorithm: the same statistic.
VARIANCE_NAMES: dict[str, str] = {
    "varPop": "varPop", "varSamp": "varSamp", "stddevPop": "stddevPop", "stddevSamp": "stddevSamp",
    "varPopStable": "varPop", "varSampStable": "varSamp", "stddevPopStable": "stddevPop",
    "stddevSampStable": "stddevSamp",
}
#: ClickHouse's case-insensitive aliases (lower case): note STD is stddevPop but STDDEV is stddevSamp.
VARIANCE_ALIASES: dict[str, str] = {
    "std": "stddevPop", "stddev": "stddevSamp", "var_pop": "varPop", "var_samp": "varSamp",
    "stddev_pop": "stddevPop", "stddev_samp": "stddevSamp",
}
#: the parser reads some aliases into typed nodes (it also reads VARIANCE and VARIANCE_POP, which
#: ClickHouse lacks, into the same nodes as VAR_SAMP and VAR_POP: :data:`_NOT_CLICKHOUSE` refuses them)
_VARIANCE_NODES: dict[type[exp.Expr], str] = {
    exp.VariancePop: "varPop", exp.Variance: "varSamp", exp.StddevPop: "stddevPop",
    exp.StddevSamp: "stddevSamp", exp.Stddev: "stddevSamp",
}
#: names the parser accepts for the variance family that ClickHouse does not (code 46), with what to write
_NOT_CLICKHOUSE: dict[str, str] = {"variance": "varSamp", "variance_pop": "varPop"}
_NAMED_CALLS = (exp.Anonymous, exp.AnonymousAggFunc, exp.CombinedAggFunc)
_BY_NAME = (*_NAMED_CALLS, exp.ParameterizedAgg)

_ROWS = "it releases values of single rows, which differential privacy cannot bound; dpch releases noisy aggregates"
_DISTINCT = "write count(DISTINCT x) or uniqExact(x) (count(DISTINCT unit) counts the privacy units)"
_COVARIANCE = "write it as post-processing of averages: avg(x * y) - avg(x) * avg(y)"
_MOMENTS = "compose it from averages of powers, e.g. avg(pow(x, 3)), avg(pow(x, 2)) and avg(x)"
_QUANTILE = "write quantile(p)(x) (or median(x)), once per level"
#: Aggregates dpch does not compute privately, with what to write instead: by parser node …
_UNSUPPORTED_NODES: dict[type[exp.Expr], str] = {
    exp.Min: "the smallest value is one row's value; write quantile(p)(x) with p near 0",
    exp.Max: "the largest value is one row's value; write quantile(p)(x) with p near 1",
    exp.AnyValue: _ROWS, exp.ArgMax: _ROWS, exp.ArgMin: _ROWS, exp.ApproxDistinct: _DISTINCT,
    exp.Corr: _COVARIANCE,
}
#: … and by ClickHouse's name (lower case)
_UNSUPPORTED_NAMES: dict[str, str] = {
    "var": "ClickHouse has no VAR(); write varSamp(x) for the sample variance or varPop(x) for the population's",
    "anylast": _ROWS, "anyheavy": _ROWS, "grouparray": _ROWS, "groupuniqarray": _ROWS, "topk": _ROWS,
    "argmax": _ROWS, "argmin": _ROWS,
    "uniqcombined": _DISTINCT, "uniqcombined64": _DISTINCT, "uniqhll12": _DISTINCT,
    "uniqtheta": _DISTINCT, "uniq": _DISTINCT,
    "covarpop": _COVARIANCE, "covarsamp": _COVARIANCE, "covarpopstable": _COVARIANCE,
    "covarsampstable": _COVARIANCE, "corr": _COVARIANCE, "corrstable": _COVARIANCE,
    "skewpop": _MOMENTS, "skewsamp": _MOMENTS, "kurtpop": _MOMENTS, "kurtsamp": _MOMENTS,
    "sumkahan": "write sum(x) (dpch sums exactly or in Float64 far from overflow)",
    "sumwithoverflow": "write sum(x) (dpch sums without overflow)",
    "avgweighted": "write sum(x * w) / sum(w)",
    "quantiles": _QUANTILE, "quantileexact": _QUANTILE, "quantiletdigest": _QUANTILE,
    "quantiletiming": _QUANTILE, "quantiledeterministic": _QUANTILE, "quantileexactlow": _QUANTILE,
    "quantileexacthigh": _QUANTILE, "quantilebfloat16": _QUANTILE, "quantiledd": _QUANTILE,
    "mediandeterministic": _QUANTILE, "medianexact": _QUANTILE, "mediantdigest": _QUANTILE,
    "entropy": "no private form of it is available",
}
_CASE_SENSITIVE = {name.lower(): name for name in VARIANCE_NAMES}


def variance_variant(node: exp.Expr) -> str | None:
    """Which variance statistic (varPop, varSamp, stddevPop, stddevSamp) ``node`` computes, by its
    ClickHouse name; None if it is not of the variance family. A variance name in another case
    than ClickHouse's (``VARPOP``) is refused, as ClickHouse refuses it."""
    by_node = _VARIANCE_NODES.get(type(node))
    written_as = str(node.meta.get("clickhouse_name", "")) if by_node is not None else ""
    if written_as.lower() in _NOT_CLICKHOUSE:
        raise QueryRejected(f"aggregate {written_as}() does not exist in ClickHouse",
                            hint=f"write {_NOT_CLICKHOUSE[written_as.lower()]}(...)")
    if by_node is not None or not isinstance(node, _NAMED_CALLS):
        return by_node
    written = str(node.this)
    if written in VARIANCE_NAMES:
        return VARIANCE_NAMES[written]
    if written.lower() in VARIANCE_ALIASES:
        return VARIANCE_ALIASES[written.lower()]
    if written.lower() in _CASE_SENSITIVE:
        right = _CASE_SENSITIVE[written.lower()]
        raise QueryRejected(f"aggregate {written}() does not exist in ClickHouse", hint=f"write {right}(...)")
    return None


def unsupported_hint(node: exp.Expr) -> str | None:
    """What to write instead of an aggregate dpch cannot compute privately (None: no advice)."""
    hint = _UNSUPPORTED_NODES.get(type(node))
    if hint is None and isinstance(node, _BY_NAME):
        hint = _UNSUPPORTED_NAMES.get(str(node.this).lower())
    return hint


def is_aggregate(node: exp.Expr) -> bool:
    """Whether ``node`` is an aggregate call (including ClickHouse's aliases the parser reads as
    plain functions, such as STD(x), and aggregates dpch refuses by name, such as VAR(x): so the
    refusal names the aggregate instead of calling its argument "not aggregated")."""
    if isinstance(node, exp.AggFunc) or function_name(node) in AGGREGATE_NAMES:
        return True
    if not isinstance(node, _BY_NAME):
        return False
    name = str(node.this).lower()
    return name in _CASE_SENSITIVE or name in VARIANCE_ALIASES or name in _UNSUPPORTED_NAMES


def literal_number(node: exp.Expr, label: str) -> float:
    """The number a literal ``node`` holds (refused, in words, when it is not a number)."""
    if isinstance(node, exp.Literal) and not node.is_string:
        return float(node.this)
    raise QueryRejected(f"{label}: expected a number")


__all__ = ["QUANTILE_GRID", "SUPPORTED_HINT", "VARIANCE_ALIASES", "VARIANCE_NAMES", "AggregateBuilder", "Measure",
           "MeasureKind", "Stat", "StatKind", "as_float", "centred_value", "check_accumulable", "condition",
           "is_aggregate", "literal_number", "unsupported_hint", "variance_variant"]
