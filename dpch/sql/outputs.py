"""Post-processing expressions: result columns, HAVING and ORDER BY over noisy statistics.

Anything computed from released values is free (post-processing). Select items, HAVING and
ORDER BY may combine aggregates with arithmetic, ``round``, ``abs``, ``least``/``greatest``,
``sqrt``, comparisons and AND/OR/NOT; dpch evaluates them in Python on the noisy values.
Each statistic's interval holds with probability 1 − β/s when an expression uses s of them
(Bonferroni), so the expression's interval — by interval arithmetic — holds with 1 − β.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from sqlglot import exp

from dpch.errors import QueryRejected

Interval = tuple[float, float]

PLACEHOLDER = "__"

_ALLOWED = (exp.Var, exp.Literal, exp.Paren, exp.Add, exp.Sub, exp.Mul, exp.Div, exp.Neg, exp.Round, exp.Abs,
            exp.Least, exp.Greatest, exp.Sqrt, exp.Floor, exp.Ceil, exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT,
            exp.LTE, exp.And, exp.Or, exp.Not, exp.Boolean, exp.Null, exp.Is, exp.In, exp.Between, exp.Tuple)


def placeholder(name: str) -> exp.Var:
    return exp.Var(this=f"{PLACEHOLDER}{name}")


def references(node: exp.Expression) -> list[str]:
    """Names (statistic or key ids) an expression refers to, in order of appearance."""
    return [v.name[len(PLACEHOLDER):] for v in node.find_all(exp.Var) if v.name.startswith(PLACEHOLDER)]


def check(node: exp.Expression, what: str) -> None:
    for sub in node.walk():
        if isinstance(sub, exp.Var) and not sub.name.startswith(PLACEHOLDER):
            raise QueryRejected(f"{what}: {sub.name} is not a result column or aggregate")
        if not isinstance(sub, _ALLOWED):
            name = sub.sql_name() if isinstance(sub, exp.Func) else sub.key.upper()
            raise QueryRejected(
                f"{what}: {name} is not supported on aggregates",
                hint="use arithmetic, round, abs, least/greatest, sqrt, comparisons, AND/OR/NOT",
            )


def evaluate(node: exp.Expression, env: Mapping[str, Any]) -> Any:
    """The value of a post-processing expression (None propagates like SQL NULL)."""
    if isinstance(node, exp.Var):
        return env[node.name[len(PLACEHOLDER):]]
    if isinstance(node, exp.Literal):
        return node.this if node.is_string else float(node.this)
    if isinstance(node, exp.Boolean):
        return bool(node.this)
    if isinstance(node, exp.Null):
        return None
    if isinstance(node, exp.Paren):
        return evaluate(node.this, env)
    if isinstance(node, exp.Neg):
        v = evaluate(node.this, env)
        return None if v is None else -v
    if isinstance(node, exp.Not):
        v = evaluate(node.this, env)
        return None if v is None else not v
    if isinstance(node, exp.And | exp.Or):
        a, b = evaluate(node.this, env), evaluate(node.expression, env)
        if isinstance(node, exp.And):
            return (a and b) if a is not None and b is not None else (False if a is False or b is False else None)
        return (a or b) if a is not None and b is not None else (True if a is True or b is True else None)
    if isinstance(node, exp.In):
        v = evaluate(node.this, env)
        return None if v is None else any(v == evaluate(e, env) for e in node.expressions)
    if isinstance(node, exp.Between):
        v, lo, hi = (evaluate(node.this, env), evaluate(node.args["low"], env), evaluate(node.args["high"], env))
        return None if None in (v, lo, hi) else lo <= v <= hi
    if isinstance(node, exp.Is):
        return evaluate(node.this, env) is None
    if isinstance(node, exp.Binary):
        a, b = evaluate(node.this, env), evaluate(node.expression, env)
        if a is None or b is None:
            return None
        return _binary(node, a, b)
    if isinstance(node, exp.Round):
        v = evaluate(node.this, env)
        digits = int(evaluate(node.args["decimals"], env)) if node.args.get("decimals") else 0
        return None if v is None else round(v, digits)
    if isinstance(node, exp.Abs | exp.Sqrt | exp.Floor | exp.Ceil):
        v = evaluate(node.this, env)
        if v is None:
            return None
        fn = {exp.Abs: abs, exp.Sqrt: lambda x: math.sqrt(x) if x >= 0 else math.nan,
              exp.Floor: math.floor, exp.Ceil: math.ceil}[type(node)]
        return float(fn(v))
    if isinstance(node, exp.Least | exp.Greatest):
        values = [evaluate(e, env) for e in [node.this, *node.expressions]]
        if any(v is None for v in values):
            return None
        return min(values) if isinstance(node, exp.Least) else max(values)
    raise QueryRejected(f"cannot evaluate {node.sql()}")


def _binary(node: exp.Expression, a: Any, b: Any) -> Any:
    if isinstance(node, exp.Add):
        return a + b
    if isinstance(node, exp.Sub):
        return a - b
    if isinstance(node, exp.Mul):
        return a * b
    if isinstance(node, exp.Div):
        return a / b if b != 0 else (math.nan if a == 0 else math.copysign(math.inf, a) * math.copysign(1, b))
    ops = {exp.EQ: lambda: a == b, exp.NEQ: lambda: a != b, exp.GT: lambda: a > b, exp.GTE: lambda: a >= b,
           exp.LT: lambda: a < b, exp.LTE: lambda: a <= b}
    for cls, op in ops.items():
        if isinstance(node, cls):
            try:
                return op()
            except TypeError:
                return str(a) < str(b) if cls is exp.LT else op()
    raise QueryRejected(f"cannot evaluate {node.sql()}")


def interval(node: exp.Expression, env: Mapping[str, Interval]) -> Interval:
    """Interval arithmetic over statistic intervals (keys are exact: [v, v])."""
    if isinstance(node, exp.Var):
        return env[node.name[len(PLACEHOLDER):]]
    if isinstance(node, exp.Literal) and not node.is_string:
        v = float(node.this)
        return v, v
    if isinstance(node, exp.Paren):
        return interval(node.this, env)
    if isinstance(node, exp.Neg):
        lo, hi = interval(node.this, env)
        return -hi, -lo
    if isinstance(node, exp.Add | exp.Sub | exp.Mul | exp.Div):
        (alo, ahi), (blo, bhi) = interval(node.this, env), interval(node.expression, env)
        if isinstance(node, exp.Add):
            return alo + blo, ahi + bhi
        if isinstance(node, exp.Sub):
            return alo - bhi, ahi - blo
        if isinstance(node, exp.Div):
            if blo <= 0 <= bhi:
                return -math.inf, math.inf
            blo, bhi = 1 / bhi, 1 / blo
        products = [alo * blo, alo * bhi, ahi * blo, ahi * bhi]
        return min(products), max(products)
    if isinstance(node, exp.Round | exp.Floor | exp.Ceil):
        lo, hi = interval(node.this, env)
        decimals = node.args.get("decimals") if isinstance(node, exp.Round) else None
        digits = int(float(decimals.this)) if decimals is not None else 0
        step = 10.0 ** (-digits)
        return math.floor(lo / step) * step, math.ceil(hi / step) * step
    if isinstance(node, exp.Abs):
        lo, hi = interval(node.this, env)
        return (0.0 if lo <= 0 <= hi else min(abs(lo), abs(hi))), max(abs(lo), abs(hi))
    if isinstance(node, exp.Sqrt):
        lo, hi = interval(node.this, env)
        return math.sqrt(max(lo, 0.0)), math.sqrt(max(hi, 0.0))
    if isinstance(node, exp.Least | exp.Greatest):
        parts = [interval(e, env) for e in [node.this, *node.expressions]]
        pick = min if isinstance(node, exp.Least) else max
        return pick(p[0] for p in parts), pick(p[1] for p in parts)
    return -math.inf, math.inf
