"""Interval rules of the functions and operators an aggregate's argument may use.

Each rule translates one node inside an aggregate (``sum(least(x, 5) * 2)``) into clamped SQL with
an interval that holds its value on every row, given the translations of its arguments (interval
arithmetic; the DPCH paper, Remark 1). The registry (:mod:`.functions`) names each function's rule
beside its totality rules and its post-processing use; :class:`dpch.sql.bounds.ValueTranslator` does
the recursion and the final clamp.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Protocol

from sqlglot import exp

from dpch.errors import QueryRejected
from dpch.sql.intervals import Interval, ValueExpr
from dpch.sql.nodes import call, num, number, paren
from dpch.sql.parse import DIALECT

#: round/floor/ceil places beyond this are refused: 10^-places must stay a normal Float64
MAX_ROUND_PLACES = 15
#: exp() of more than this overflows Float64
MAX_EXP = 700.0
#: pow() takes whole exponents up to this (a polynomial of bounded inputs stays bounded)
MAX_POWER = 4

Branch = tuple[exp.Expr | None, exp.Expr | None]


class Translate(Protocol):
    """What a rule needs from the translator: its arguments' translations."""

    def value(self, node: exp.Expr, context: str) -> ValueExpr: ...

    def nullable(self, node: exp.Expr) -> bool: ...

    def branches(self, branches: list[Branch], context: str) -> ValueExpr: ...


ValueRule = Callable[[exp.Expr, Translate, str], ValueExpr]


def arithmetic(node: exp.Expr, t: Translate, context: str) -> ValueExpr:
    """``a + b``, ``a - b``, ``a * b``: the interval sum, difference or product."""
    a, b = t.value(node.this, context), t.value(node.expression, context)
    combined: dict[type[exp.Expr], Interval] = {exp.Add: a.interval + b.interval, exp.Sub: a.interval - b.interval,
                                               exp.Mul: a.interval * b.interval}
    interval = combined[type(node)]
    return ValueExpr(paren(type(node)(this=a.node, expression=b.node)), interval, a.integer and b.integer)


def divide(node: exp.Expr, t: Translate, context: str) -> ValueExpr:
    """``a / b`` with a divisor whose interval excludes 0 (otherwise the quotient is unbounded)."""
    a, b = t.value(node.this, context), t.value(node.expression, context)
    if b.interval.contains_zero():
        raise QueryRejected(
            f"{context}: the divisor's bounds [{num(b.interval.lo)}, {num(b.interval.hi)}] "
            "include 0, so the quotient is unbounded",
            hint="divide by a constant or by a column whose bounds exclude 0",
        )
    inverse = Interval(1.0 / b.interval.hi, 1.0 / b.interval.lo)
    return ValueExpr(paren(exp.Div(this=a.node, expression=b.node)), a.interval * inverse, False)


def negate(node: exp.Expr, t: Translate, context: str) -> ValueExpr:
    inner = t.value(node.this, context)
    return ValueExpr(paren(exp.Neg(this=inner.node)), Interval(-inner.interval.hi, -inner.interval.lo), inner.integer)


def if_branches(node: exp.Expr, t: Translate, context: str) -> ValueExpr:
    return t.branches([(node.this, node.args.get("true")), (None, node.args.get("false"))], context)


def case_branches(node: exp.Expr, t: Translate, context: str) -> ValueExpr:
    if node.this is not None:
        raise QueryRejected(f"{context}: write CASE WHEN condition THEN ... (simple CASE is not supported)")
    branches: list[Branch] = [(w.this, w.args.get("true")) for w in node.args.get("ifs") or []]
    branches.append((None, node.args.get("default")))
    return t.branches(branches, context)


def multi_if(node: exp.Expr, t: Translate, context: str) -> ValueExpr:
    items = list(node.expressions)
    branches: list[Branch] = [(items[i], items[i + 1]) for i in range(0, len(items) - 1, 2)]
    branches.append((None, items[-1]))
    return t.branches(branches, context)


def absolute(node: exp.Expr, t: Translate, context: str) -> ValueExpr:
    a = t.value(node.this, context)
    lo = 0.0 if a.interval.contains_zero() else min(abs(a.interval.lo), abs(a.interval.hi))
    return ValueExpr(call("abs", a.node), Interval(lo, a.interval.magnitude), a.integer)


def extreme(node: exp.Expr, t: Translate, context: str) -> ValueExpr:
    """least/greatest. ClickHouse's skip NULL arguments: with some arguments NULL the result is the
    pick among the others, so only never-NULL arguments can tighten the far end."""
    name = "least" if isinstance(node, exp.Least) else "greatest"
    nodes = [node.this, *node.expressions]
    values = [t.value(a, context) for a in nodes]
    sure = [v for v, a in zip(values, nodes, strict=True) if not t.nullable(a)]
    if name == "least":
        hi = min(v.interval.hi for v in sure) if sure else max(v.interval.hi for v in values)
        interval = Interval(min(v.interval.lo for v in values), hi)
    else:
        lo = max(v.interval.lo for v in sure) if sure else min(v.interval.lo for v in values)
        interval = Interval(lo, max(v.interval.hi for v in values))
    return ValueExpr(call(name, *(v.node for v in values)), interval, all(v.integer for v in values))


def rounding(node: exp.Expr, t: Translate, context: str) -> ValueExpr:
    """round/floor/ceil to N places: the bounds rounded outwards to multiples of 10^-N."""
    name = type(node).__name__.lower()
    a = t.value(node.this, context)
    digits = node.args.get("decimals") or node.args.get("expression")
    places = int(literal_number(digits, context)) if digits is not None else 0
    if abs(places) > MAX_ROUND_PLACES:
        raise QueryRejected(f"{context}: {name}() to {places} places is outside what dpch can bound",
                            hint=f"use between -{MAX_ROUND_PLACES} and {MAX_ROUND_PLACES} places")
    step = 10.0 ** (-places)
    lo = math.floor(a.interval.lo / step) * step
    hi = math.ceil(a.interval.hi / step) * step
    rounded = call(name, a.node, number(places)) if digits is not None else call(name, a.node)
    return ValueExpr(rounded, Interval(lo, hi), a.integer or places <= 0)


def square_root(node: exp.Expr, t: Translate, context: str) -> ValueExpr:
    a = t.value(node.this, context)
    return ValueExpr(call("sqrt", a.node), Interval(math.sqrt(max(0.0, a.interval.lo)),
                                                  math.sqrt(max(0.0, a.interval.hi))), False)


def logarithm(node: exp.Expr, t: Translate, context: str) -> ValueExpr:
    """ln/log, and log2/log10 (sqlglot reads them as a two-argument Log with the base first)."""
    name, arg = "ln", node.this
    if isinstance(node, exp.Log) and node.expression is not None:
        base = node.this
        if not (isinstance(base, exp.Literal) and base.this in ("2", "10")):
            raise QueryRejected(f"{context}: write log(x), ln(x), log2(x) or log10(x)")
        name, arg = f"log{base.this}", node.expression
    a = t.value(arg, context)
    if a.interval.lo <= 0:
        raise QueryRejected(f"{context}: {name}() needs a positive argument; its bounds start at "
                            f"{num(a.interval.lo)}", hint="add a positive constant, e.g. log(x + 1)")
    fn = {"ln": math.log, "log2": math.log2, "log10": math.log10}[name]
    sql_name = "log" if name == "ln" else name
    return ValueExpr(call(sql_name, a.node), Interval(fn(a.interval.lo), fn(a.interval.hi)), False)


def exponential(node: exp.Expr, t: Translate, context: str) -> ValueExpr:
    a = t.value(node.this, context)
    if a.interval.hi > MAX_EXP:
        raise QueryRejected(f"{context}: exp() of values up to {num(a.interval.hi)} overflows")
    return ValueExpr(call("exp", a.node), Interval(math.exp(a.interval.lo), math.exp(a.interval.hi)), False)


def power(node: exp.Expr, t: Translate, context: str) -> ValueExpr:
    """pow(x, n) for a whole n from 0 to :data:`MAX_POWER`: the endpoints' powers, and 0 where the
    interval holds 0 (an even power is smallest there)."""
    base = t.value(node.this, context)
    exponent = literal_number(node.expression, context)
    if not (float(exponent).is_integer() and 0 <= exponent <= MAX_POWER):
        raise QueryRejected(f"{context}: pow() takes a whole exponent from 0 to {MAX_POWER}")
    corners = [base.interval.lo**exponent, base.interval.hi**exponent]
    if base.interval.contains_zero():
        corners.append(0.0)
    return ValueExpr(call("pow", base.node, number(exponent)), Interval(min(corners), max(corners)), base.integer)


def sign(node: exp.Expr, t: Translate, context: str) -> ValueExpr:
    a = t.value(node.this, context)
    return ValueExpr(call("sign", a.node), Interval(-1.0 if a.interval.lo < 0 else 0.0,
                                                  1.0 if a.interval.hi > 0 else 0.0), True)


def coalesce(node: exp.Expr, t: Translate, context: str) -> ValueExpr:
    """coalesce/ifNull: the union of the arguments' intervals."""
    values = [t.value(a, context) for a in [node.this, *node.expressions]]
    interval = values[0].interval
    for v in values[1:]:
        interval = interval.union(v.interval)
    return ValueExpr(call("coalesce", *(v.node for v in values)), interval, all(v.integer for v in values))


def literal_number(node: exp.Expr | None, context: str) -> float:
    """A numeric literal's value (possibly negated); refuses anything else."""
    if isinstance(node, exp.Neg) and isinstance(node.this, exp.Literal) and not node.this.is_string:
        value = -float(node.this.this)
    elif isinstance(node, exp.Literal) and not node.is_string:
        value = float(node.this)
    else:
        raise QueryRejected(f"{context}: expected a number literal")
    if not math.isfinite(value):
        raise QueryRejected(f"{context}: the number {node.sql(dialect=DIALECT)} is too large")
    return value


__all__ = ["MAX_EXP", "MAX_POWER", "MAX_ROUND_PLACES", "Translate", "ValueRule", "absolute", "arithmetic",
           "case_branches", "coalesce", "divide", "exponential", "extreme", "if_branches", "literal_number",
           "logarithm", "multi_if", "negate", "power", "rounding", "sign", "square_root"]
