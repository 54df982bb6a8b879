"""Row expressions: bounds by interval arithmetic, and the clamped SQL that enforces them.

An aggregate's argument may be any expression over bounded columns, literals, arithmetic,
comparisons, CASE/if and an allowlist of monotone or bounded functions. Every column read
as a *value* is clamped to its declared bounds in the emitted SQL, so the expression's
value provably lies in the interval computed here (interval arithmetic; a Lipschitz map of
bounded inputs has bounded output, the DPCH paper Remark 1).
The final value is clamped to that interval once more and non-finite results (0/0, sqrt of
a negative) are replaced by a fixed in-range value, so no row can push an aggregate outside
the bound or turn it into NaN.

Columns used inside *conditions* (WHERE, the test of an if/CASE, countIf) need no bounds:
a condition only selects rows and cannot raise a sum above k·max|bound|.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from sqlglot import exp

from dpch.errors import MissingBoundsError, QueryRejected
from dpch.policy.model import is_numeric_type
from dpch.sql.functions import check_total
from dpch.sql.nodes import call, float_number, num, number, paren, show
from dpch.sql.parse import DIALECT


@dataclass(frozen=True)
class Interval:
    """A closed interval [lo, hi] of reals (lo may equal hi)."""

    lo: float
    hi: float

    @property
    def magnitude(self) -> float:
        """max(|lo|, |hi|): the largest absolute value in the interval."""
        return max(abs(self.lo), abs(self.hi))

    @property
    def width(self) -> float:
        return self.hi - self.lo

    @property
    def mid(self) -> float:
        return (self.lo + self.hi) / 2.0

    def __add__(self, other: Interval) -> Interval:
        return Interval(self.lo + other.lo, self.hi + other.hi)

    def __sub__(self, other: Interval) -> Interval:
        return Interval(self.lo - other.hi, self.hi - other.lo)

    def __mul__(self, other: Interval) -> Interval:
        products = [a * b for a in (self.lo, self.hi) for b in (other.lo, other.hi)]
        return Interval(min(products), max(products))

    def union(self, other: Interval) -> Interval:
        return Interval(min(self.lo, other.lo), max(self.hi, other.hi))

    def contains_zero(self) -> bool:
        return self.lo <= 0.0 <= self.hi

    def check(self) -> Interval:
        if not (math.isfinite(self.lo) and math.isfinite(self.hi)):
            raise QueryRejected("an expression's bounds overflow", hint="use smaller constants or bounds")
        return self


BOOL = Interval(0.0, 1.0)

#: round/floor/ceil places beyond this are refused: 10^-places must stay a normal Float64
MAX_ROUND_PLACES = 15


@dataclass(frozen=True)
class ColumnRef:
    """A column as an expression reads it: its node in that context, its type and its bounds."""

    node: exp.Expr
    name: str
    type: str
    bounds: Interval | None
    integer: bool
    is_unit: bool = False

    @property
    def sql(self) -> str:
        return show(self.node)


@dataclass(frozen=True)
class ValueExpr:
    """A translated row expression: clamped SQL tree, its bounds, and whether it is integer-valued."""

    node: exp.Expr
    interval: Interval
    integer: bool
    #: whether the value can be NULL (a Nullable column or a NULL literal inside)
    nullable: bool = False

    @property
    def sql(self) -> str:
        """The expression as dpch displays it."""
        return show(self.node)


Mode = Literal["value", "condition"]
Resolver = Callable[[exp.Column], ColumnRef]

AGGREGATE_NAMES = frozenset({
    "count", "sum", "avg", "min", "max", "quantile", "median", "uniq", "any", "stddevpop",
    "stddevsamp", "varpop", "varsamp", "grouparray", "argmax", "argmin", "countif", "sumif",
    "avgif", "uniqexact", "anylast", "topk", "variance", "stddev", "var_pop", "var_samp",
    "stddev_pop", "stddev_samp", "groupuniqarray", "quantiles", "quantileexact", "std", "varpopstable",
    "varsampstable", "stddevpopstable", "stddevsampstable",
})


_NAMED = (exp.Anonymous, exp.AnonymousAggFunc, exp.CombinedAggFunc, exp.ParameterizedAgg)


def function_name(node: exp.Expr) -> str:
    """The lower-case SQL name of a function node ('' for anything else)."""
    if isinstance(node, _NAMED):
        return str(node.this).lower()
    if isinstance(node, exp.Func):
        return node.sql_name().lower()
    return ""


def clamp(node: exp.Expr, interval: Interval) -> exp.Expr:
    """``node`` clamped to ``interval`` in its own (integer or date) type: bounds as exact literals."""
    return call("least", call("greatest", node, number(interval.lo)), number(interval.hi))


def keep_null(value: exp.Expr, clamped: exp.Expr) -> exp.Expr:
    """``clamped``, but NULL where ``value`` is NULL: ClickHouse's least/greatest skip a NULL
    argument, so a bare clamp would turn every NULL into the lower bound (summed, and counted by avg)
    instead of leaving it out as sum and avg do."""
    return call("if", call("isNull", value), exp.Null(), clamped)


def clamp_float(node: exp.Expr, interval: Interval) -> exp.Expr:
    """Float64 ``node`` clamped to ``interval``; bounds as Float64 literals (least(Float64, UInt64) is a
    type error in ClickHouse for integers of 2^32 and more)."""
    return call("least", call("greatest", node, float_number(interval.lo)), float_number(interval.hi))


def check_condition(node: exp.Expr, resolve: Resolver) -> None:
    """Validates a condition: every node in the totality registry (:mod:`.functions`), constant
    arguments literal, known columns, no subqueries or aggregates."""
    for sub in node.walk():
        if isinstance(sub, exp.Select | exp.Subquery):
            raise QueryRejected("subqueries in conditions are not supported", hint="filter with literal values")
        if isinstance(sub, exp.Window):
            raise QueryRejected("window functions (OVER) are not supported")
        if isinstance(sub, exp.AggFunc) or function_name(sub) in AGGREGATE_NAMES:
            raise QueryRejected(
                "aggregate functions are not allowed in WHERE or inside another aggregate",
                hint="filter rows on columns; filter groups with HAVING",
            )
        if isinstance(sub, exp.Column):
            resolve(sub)
            continue
        check_total(sub)


def condition(node: exp.Expr, resolve: Resolver) -> exp.Expr:
    """A validated condition as a new tree, column references mapped to the capped rows.

    Decimal columns are read as Float64 (:func:`read_column`): Decimal division by zero and Decimal
    overflow raise inside ClickHouse, which a row could trigger on purpose (docs/design.md rule 5).
    """
    check_condition(node, resolve)
    holder = exp.Paren(this=node.copy())  # a parent, so that a bare column can be replaced too
    for col in list(holder.find_all(exp.Column)):
        ref = resolve(col)
        col.replace(read_column(ref.node, ref.type))
    return holder.this


def read_column(node: exp.Expr, type_: str) -> exp.Expr:
    """How emitted SQL reads a column of ClickHouse type ``type_``: Decimals as Float64, the rest as is."""
    return call("toFloat64", node) if _is_decimal(type_) else node.copy()


def _is_decimal(type_: str) -> bool:
    return "Decimal" in type_


#: integer values are carried exactly (in Int128) only below this magnitude: at most 2^64 rows of
#: |value| < 2^62 sum to < 2^126, and toInt128 of a larger Float64 (e.g. pow(x, 4) clamped at 1e48)
#: would wrap silently (docs/design.md rule 6); larger integer values are carried as Float64
MAX_EXACT_INTEGER = 2.0**62


class ValueTranslator:
    """Translates a value expression into clamped SQL with bounds (interval arithmetic)."""

    def __init__(self, resolve: Resolver) -> None:
        self.resolve = resolve

    def translate(self, node: exp.Expr, context: str) -> ValueExpr:
        """``context`` names the aggregate for error messages, e.g. ``sum(x * 2)``."""
        while isinstance(node, exp.Paren):
            node = node.this
        value = self._value(node, context)
        nullable = self.nullable(node)
        interval = value.interval.check()
        exact_integer = (value.integer and float(interval.lo).is_integer() and float(interval.hi).is_integer()
                         and interval.magnitude < MAX_EXACT_INTEGER)
        if isinstance(node, exp.Column) and exact_integer:
            # clamped in the column's own type (exact; an integer is never NaN), then widened so that
            # sums accumulate in Int128 and cannot wrap (docs/design.md rule 6)
            ref = self.resolve(node)
            tree: exp.Expr = call("toInt128", clamp(ref.node, interval))
            return ValueExpr(keep_null(ref.node, tree) if nullable else tree, interval, value.integer, nullable)
        fallback = float(min(max(0.0, interval.lo), interval.hi))
        inner = value.node
        if isinstance(node, exp.Column):  # clamp once: NaN/inf first, then the bounds
            inner = self.resolve(node).node
        tree = clamp_float(call("ifNotFinite", call("toFloat64", inner), float_number(fallback)), interval)
        if exact_integer:
            tree = call("toInt128", tree)
        return ValueExpr(keep_null(inner, tree) if nullable else tree, interval, value.integer, nullable)

    def nullable(self, node: exp.Expr) -> bool:
        """Whether ``node`` can evaluate to NULL on some row."""
        if any(isinstance(n, exp.Null) for n in node.walk()):
            return True
        return any("Nullable(" in self.resolve(c).type for c in node.find_all(exp.Column))

    # -- the recursion ---------------------------------------------------------------------------

    def _value(self, node: exp.Expr, context: str) -> ValueExpr:
        if isinstance(node, exp.Paren):
            return self._value(node.this, context)
        if isinstance(node, exp.Column):
            ref = self.resolve(node)
            if ref.bounds is None:
                if not is_numeric_type(ref.type):
                    raise QueryRejected(f"{context}: column {ref.name} is not numeric (type {ref.type})")
                if ref.is_unit:
                    raise QueryRejected(f"{context}: the privacy unit column cannot be aggregated as a value")
                raise MissingBoundsError(
                    f"{context} needs bounds on {ref.name}, and it has none",
                    hint=f"the data owner adds them: ALTER TABLE ... COMMENT COLUMN {ref.name} "
                    "'dp: bounds=[lo, hi]' (or in the policy TOML)",
                )
            # inside an expression every column is computed in Float64: integer arithmetic wraps
            # silently and Decimal arithmetic raises, both on values a row chooses (rules 5 and 6)
            tree = clamp_float(call("toFloat64", ref.node), ref.bounds)
            if self.nullable(node):
                tree = keep_null(ref.node, tree)
            return ValueExpr(tree, ref.bounds, ref.integer)
        if isinstance(node, exp.Literal):
            if node.is_string:
                raise QueryRejected(f"{context}: a string literal is not a number")
            value = float(node.this)
            return ValueExpr(number(value), Interval(value, value), value.is_integer())
        if isinstance(node, exp.Boolean):
            value = 1.0 if node.this else 0.0
            return ValueExpr(number(value), Interval(value, value), True)
        if isinstance(node, exp.Neg):
            inner = self._value(node.this, context)
            negated = Interval(-inner.interval.hi, -inner.interval.lo)
            return ValueExpr(paren(exp.Neg(this=inner.node)), negated, inner.integer)
        if isinstance(node, exp.Add | exp.Sub | exp.Mul):
            a, b = self._value(node.this, context), self._value(node.expression, context)
            interval = {exp.Add: a.interval + b.interval, exp.Sub: a.interval - b.interval,
                        exp.Mul: a.interval * b.interval}[type(node)]
            return ValueExpr(paren(type(node)(this=a.node, expression=b.node)), interval, a.integer and b.integer)
        if isinstance(node, exp.Div):
            a, b = self._value(node.this, context), self._value(node.expression, context)
            if b.interval.contains_zero():
                raise QueryRejected(
                    f"{context}: the divisor's bounds [{num(b.interval.lo)}, {num(b.interval.hi)}] "
                    "include 0, so the quotient is unbounded",
                    hint="divide by a constant or by a column whose bounds exclude 0",
                )
            inverse = Interval(1.0 / b.interval.hi, 1.0 / b.interval.lo)
            return ValueExpr(paren(exp.Div(this=a.node, expression=b.node)), a.interval * inverse, False)
        if isinstance(node, exp.If):
            return self._branches([(node.this, node.args.get("true")), (None, node.args.get("false"))], context)
        if isinstance(node, exp.Case):
            if node.this is not None:
                raise QueryRejected(f"{context}: write CASE WHEN condition THEN ... (simple CASE is not supported)")
            branches = [(w.this, w.args.get("true")) for w in node.args.get("ifs") or []]
            branches.append((None, node.args.get("default")))
            return self._branches(branches, context)
        if _is_condition(node):
            return ValueExpr(call("toUInt8", condition(node, self.resolve)), BOOL, True)
        if isinstance(node, exp.Func):
            return self._function(node, context)
        raise QueryRejected(f"{context}: {node.key.upper()} expressions are not supported inside aggregates")

    def _branches(self, branches: list[tuple[exp.Expr | None, exp.Expr | None]], context: str) -> ValueExpr:
        """if/CASE: the value lies in the union of the branches' intervals (a missing ELSE is 0)."""
        parts: list[exp.Expr] = []
        interval, integer = None, True
        for cond, value in branches:
            translated = self._value(value, context) if value is not None else ValueExpr(number(0), Interval(0, 0),
                                                                                            True)
            interval = translated.interval if interval is None else interval.union(translated.interval)
            integer = integer and translated.integer
            if cond is not None:
                parts.append(condition(cond, self.resolve))
            parts.append(translated.node)
        assert interval is not None
        return ValueExpr(call("multiIf", *parts), interval, integer)

    def _function(self, node: exp.Func, context: str) -> ValueExpr:
        name = function_name(node)
        args = list(node.expressions) if isinstance(node, _NAMED) else []
        if name == "abs":
            a = self._value(node.this, context)
            lo = 0.0 if a.interval.contains_zero() else min(abs(a.interval.lo), abs(a.interval.hi))
            return ValueExpr(call("abs", a.node), Interval(lo, a.interval.magnitude), a.integer)
        if name in ("least", "greatest"):
            nodes = args or [node.this, *node.expressions]
            values = [self._value(a, context) for a in nodes]
            sure = [v for v, a in zip(values, nodes, strict=True) if not self.nullable(a)]
            # ClickHouse's least/greatest skip NULL arguments: with some arguments NULL the result is
            # the pick among the others, so only never-NULL arguments can tighten the far end
            if name == "least":
                hi = min(v.interval.hi for v in sure) if sure else max(v.interval.hi for v in values)
                interval = Interval(min(v.interval.lo for v in values), hi)
            else:
                lo = max(v.interval.lo for v in sure) if sure else min(v.interval.lo for v in values)
                interval = Interval(lo, max(v.interval.hi for v in values))
            return ValueExpr(call(name, *(v.node for v in values)), interval, all(v.integer for v in values))
        if name in ("round", "floor", "ceil"):
            a = self._value(node.this, context)
            digits = node.args.get("decimals") or node.args.get("expression")
            places = int(_literal_number(digits, context)) if digits is not None else 0
            if abs(places) > MAX_ROUND_PLACES:
                raise QueryRejected(f"{context}: {name}() to {places} places is outside what dpch can bound",
                                    hint=f"use between -{MAX_ROUND_PLACES} and {MAX_ROUND_PLACES} places")
            step = 10.0 ** (-places)
            lo = math.floor(a.interval.lo / step) * step
            hi = math.ceil(a.interval.hi / step) * step
            rounded = call(name, a.node, number(places)) if digits is not None else call(name, a.node)
            return ValueExpr(rounded, Interval(lo, hi), a.integer or places <= 0)
        if name == "sqrt":
            a = self._value(node.this, context)
            return ValueExpr(call("sqrt", a.node), Interval(math.sqrt(max(0.0, a.interval.lo)),
                                                          math.sqrt(max(0.0, a.interval.hi))), False)
        if isinstance(node, exp.Log) and node.expression is not None:
            # sqlglot reads log2(x) / log10(x) as Log(base, x); any other two-argument log is refused
            base = node.this
            if not (isinstance(base, exp.Literal) and base.this in ("2", "10")):
                raise QueryRejected(f"{context}: write log(x), ln(x), log2(x) or log10(x)")
            name, node = f"log{base.this}", exp.Ln(this=node.expression)
        if name in ("ln", "log", "log2", "log10"):
            a = self._value(node.this, context)
            if a.interval.lo <= 0:
                raise QueryRejected(f"{context}: {name}() needs a positive argument; its bounds start at "
                                    f"{num(a.interval.lo)}", hint="add a positive constant, e.g. log(x + 1)")
            fn = {"ln": math.log, "log": math.log, "log2": math.log2, "log10": math.log10}[name]
            sql_name = "log" if name in ("ln", "log") else name
            return ValueExpr(call(sql_name, a.node), Interval(fn(a.interval.lo), fn(a.interval.hi)), False)
        if name == "exp":
            a = self._value(node.this, context)
            if a.interval.hi > 700:
                raise QueryRejected(f"{context}: exp() of values up to {num(a.interval.hi)} overflows")
            return ValueExpr(call("exp", a.node), Interval(math.exp(a.interval.lo), math.exp(a.interval.hi)), False)
        if name in ("pow", "power"):
            base = self._value(node.this, context)
            power = _literal_number(node.expression, context)
            if not (float(power).is_integer() and 0 <= power <= 4):
                raise QueryRejected(f"{context}: pow() takes a whole exponent from 0 to 4")
            corners = [base.interval.lo**power, base.interval.hi**power]
            if base.interval.contains_zero():
                corners.append(0.0)
            return ValueExpr(call("pow", base.node, number(power)), Interval(min(corners), max(corners)), base.integer)
        if name == "sign":
            a = self._value(node.this, context)
            return ValueExpr(call("sign", a.node), Interval(-1.0 if a.interval.lo < 0 else 0.0,
                                                          1.0 if a.interval.hi > 0 else 0.0), True)
        if name == "multiif":
            items = list(node.expressions)
            branches = [(items[i], items[i + 1]) for i in range(0, len(items) - 1, 2)]
            branches.append((None, items[-1]))
            return self._branches(branches, context)
        if name in ("coalesce", "ifnull"):
            values = [self._value(a, context) for a in ([node.this, *node.expressions])]
            interval = values[0].interval
            for v in values[1:]:
                interval = interval.union(v.interval)
            return ValueExpr(call("coalesce", *(v.node for v in values)), interval, all(v.integer for v in values))
        raise QueryRejected(
            f"{context}: function {name}() is not supported inside aggregates",
            hint="use arithmetic, if/CASE, abs, least/greatest, round/floor/ceil, sqrt, log, exp, pow",
        )


def _is_condition(node: exp.Expr) -> bool:
    return isinstance(node, exp.And | exp.Or | exp.Not | exp.EQ | exp.NEQ | exp.GT | exp.GTE | exp.LT
                      | exp.LTE | exp.In | exp.Between | exp.Like | exp.ILike | exp.Is)


def _literal_number(node: exp.Expr | None, context: str) -> float:
    if isinstance(node, exp.Neg) and isinstance(node.this, exp.Literal) and not node.this.is_string:
        value = -float(node.this.this)
    elif isinstance(node, exp.Literal) and not node.is_string:
        value = float(node.this)
    else:
        raise QueryRejected(f"{context}: expected a number literal")
    if not math.isfinite(value):
        raise QueryRejected(f"{context}: the number {node.sql(dialect=DIALECT)} is too large")
    return value
