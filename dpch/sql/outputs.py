"""Post-processing expressions: result columns, HAVING and ORDER BY over noisy statistics.

Anything computed from released values is free (post-processing). Select items, HAVING and
ORDER BY may combine aggregates with arithmetic, ``least``/``greatest``, comparisons, AND/OR/NOT,
CASE/if() with numeric values, and the scalar functions the registry (:mod:`.functions`) marks for
post-processing (``round``, ``abs``, ``pow``, ``sqrt``, ``log``, ``CAST(… AS Int64)``, ``toFloat64`` …, each
with ClickHouse's value
and an interval rule, :mod:`.post_functions`); dpch evaluates them in Python on the noisy values.
Each statistic's interval holds with probability 1 − β/s when an expression uses s of them
(Bonferroni), so the expression's interval — by interval arithmetic — holds with 1 − β.

They follow ClickHouse's rules, so an expression means what it would mean there:

- truthiness (HAVING, AND/OR/NOT): a number is true when it is non-zero (NaN included), NULL
  is false in HAVING and unknown inside AND/OR/NOT (three-valued logic);
- types (:func:`check_types`, at analysis, before anything is charged): a String key compares
  with strings only, a number with numbers, a date with dates; a string literal compared with a
  number or a date is read as one (``count(*) > '5'``, ``month >= '2026-03-01'``) or refused if
  it is not one; arithmetic takes numbers; a String or a date is not a condition.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from datetime import date, datetime
from typing import Any

from sqlglot import exp

from dpch.errors import QueryRejected
from dpch.policy.model import is_date_type, is_numeric_type
from dpch.sql import functions, post_functions

Interval = tuple[float, float]

PLACEHOLDER = "__"

_ALLOWED = (exp.Var, exp.Literal, exp.Paren, exp.Add, exp.Sub, exp.Mul, exp.Div, exp.Neg,
            exp.Least, exp.Greatest, exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT,
            exp.LTE, exp.And, exp.Or, exp.Not, exp.Boolean, exp.Null, exp.Is, exp.In, exp.Between, exp.Tuple,
            exp.Case, exp.If)


def placeholder(name: str) -> exp.Var:
    return exp.Var(this=f"{PLACEHOLDER}{name}")


def references(node: exp.Expr) -> list[str]:
    """Names (statistic or key ids) an expression refers to, in order of appearance."""
    return [v.name[len(PLACEHOLDER):] for v in node.find_all(exp.Var) if v.name.startswith(PLACEHOLDER)]


def reference(node: exp.Expr) -> str | None:
    """The statistic or key id ``node`` is, when it is nothing but a reference to one (in parentheses or
    not); None for any other expression."""
    while isinstance(node, exp.Paren):
        node = node.this
    if isinstance(node, exp.Var) and node.name.startswith(PLACEHOLDER):
        return str(node.name[len(PLACEHOLDER):])
    return None


def check(node: exp.Expr, what: str) -> None:
    """Refuses what post-processing cannot evaluate (before anything is charged)."""
    cast_targets = set()
    for sub in node.walk():
        if isinstance(sub, exp.Var) and not sub.name.startswith(PLACEHOLDER):
            raise QueryRejected(f"{what}: {sub.name} is not a result column or aggregate")
        resolved = functions.post_function(sub)
        if resolved is not None:
            fn, args = resolved
            for position in fn.constants:
                if position < len(args) and not post_functions.is_constant(args[position]):
                    raise QueryRejected(f"{what}: {fn.name}'s argument {position + 1} must be a constant number",
                                        hint="ClickHouse requires it too, e.g. round(avg(x), 1)")
            if isinstance(sub, exp.Cast):
                cast_targets.add(id(sub.args["to"]))
            continue
        if isinstance(sub, exp.DataType) and (id(sub) in cast_targets or id(sub.parent) in cast_targets):
            continue
        if not isinstance(sub, _ALLOWED):
            name = sub.this if isinstance(sub, exp.Anonymous) else \
                sub.sql_name() if isinstance(sub, exp.Func) else sub.key.upper()
            raise QueryRejected(
                f"{what}: {name} is not supported on released values and keys",
                hint="use arithmetic, least/greatest, comparisons, AND/OR/NOT and "
                     + ", ".join(functions.post_names()),
            )


def has_text(node: exp.Expr) -> bool:
    """Whether ``node`` takes the text of a value (``toString``, ``CAST(… AS String)``): a value with no
    interval, which a result column cannot be."""
    for sub in node.walk():
        resolved = functions.post_function(sub)
        if resolved is not None and resolved[0] is post_functions.TO_STRING:
            return True
    return False


def evaluate(node: exp.Expr, env: Mapping[str, Any]) -> Any:
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
    resolved = functions.post_function(node)
    if resolved is not None:
        fn, args = resolved
        values = [evaluate(a, env) for a in args]
        return None if any(v is None for v in values) else fn.value(*values)
    if isinstance(node, exp.Neg):
        v = evaluate(node.this, env)
        return None if v is None else -v
    if isinstance(node, exp.Not):
        v = truth(evaluate(node.this, env))
        return None if v is None else not v
    if isinstance(node, exp.And | exp.Or):
        a, b = truth(evaluate(node.this, env)), truth(evaluate(node.expression, env))
        decisive = isinstance(node, exp.Or)  # the value that decides alone: True for OR, False for AND
        if a is decisive or b is decisive:
            return decisive
        return None if a is None or b is None else not decisive
    if isinstance(node, exp.In):
        v = evaluate(node.this, env)
        return None if v is None else any(_compare(exp.EQ, v, evaluate(e, env)) for e in node.expressions)
    if isinstance(node, exp.Between):
        v, lo, hi = (evaluate(node.this, env), evaluate(node.args["low"], env), evaluate(node.args["high"], env))
        return None if None in (v, lo, hi) else _compare(exp.LTE, lo, v) and _compare(exp.LTE, v, hi)
    if isinstance(node, exp.Is):
        return evaluate(node.this, env) is None
    if isinstance(node, exp.Binary):
        a, b = evaluate(node.this, env), evaluate(node.expression, env)
        if a is None or b is None:
            return None
        return _binary(node, a, b)
    if isinstance(node, exp.Least | exp.Greatest):
        values = [evaluate(e, env) for e in [node.this, *node.expressions]]
        if any(v is None for v in values):
            return None
        return min(values) if isinstance(node, exp.Least) else max(values)
    if isinstance(node, exp.Case | exp.If):
        # ClickHouse's CASE/if: the first branch whose condition is true (a NULL condition is not), else
        # the ELSE value (NULL without one)
        for condition, value in _branches(node):
            if truth(evaluate(condition, env)) is True:
                return evaluate(value, env)
        default = _default(node)
        return None if default is None else evaluate(default, env)
    raise QueryRejected(f"cannot evaluate {node.sql()}")


def _branches(node: exp.Case | exp.If) -> list[tuple[exp.Expr, exp.Expr]]:
    """(condition, value) of each branch of a CASE or an if(); a simple ``CASE x WHEN v THEN …`` branch's
    condition is ``x = v``, as ClickHouse reads it (NULL = v is not true)."""
    if isinstance(node, exp.If):
        return [(node.this, node.args["true"])]
    subject = node.this
    return [(branch.this if subject is None else exp.EQ(this=subject, expression=branch.this), branch.args["true"])
            for branch in node.args.get("ifs") or []]


def _default(node: exp.Case | exp.If) -> exp.Expr | None:
    return node.args.get("false") if isinstance(node, exp.If) else node.args.get("default")


def _binary(node: exp.Expr, a: Any, b: Any) -> Any:
    if isinstance(node, exp.Add):
        return a + b
    if isinstance(node, exp.Sub):
        return a - b
    if isinstance(node, exp.Mul):
        return a * b
    if isinstance(node, exp.Div):
        return a / b if b != 0 else (math.nan if a == 0 else math.copysign(math.inf, a) * math.copysign(1, b))
    for cls in _COMPARISONS:
        if isinstance(node, cls):
            return _compare(cls, a, b)
    raise QueryRejected(f"cannot evaluate {node.sql()}")


_COMPARISONS: dict[type, Callable[[Any, Any], bool]] = {
    exp.EQ: lambda a, b: a == b, exp.NEQ: lambda a, b: a != b, exp.GT: lambda a, b: a > b,
    exp.GTE: lambda a, b: a >= b, exp.LT: lambda a, b: a < b, exp.LTE: lambda a, b: a <= b,
}


def _compare(cls: type, a: Any, b: Any) -> bool:
    """A comparison of two values :func:`check_types` accepted: same kinds, or a date with a
    date string (ClickHouse reads the string as a date)."""
    if isinstance(a, date) or isinstance(b, date):
        a, b = _as_datetime(a), _as_datetime(b)
    return _COMPARISONS[cls](a, b)


def _as_datetime(value: Any) -> datetime:
    if isinstance(value, datetime):
        return value
    if isinstance(value, date):
        return datetime(value.year, value.month, value.day)
    return _parse_date(str(value))


def _parse_date(text: str) -> datetime:
    return datetime.fromisoformat(text.strip())


def truth(value: Any) -> bool | None:
    """ClickHouse's truthiness of a value: None (NULL) stays unknown, a number is true when non-zero."""
    if value is None:
        return None
    return bool(value)


# -- types, checked at analysis (before the charge) ------------------------------------------------

#: the kinds of value a post-processing expression can have
NUMBER, STRING, DATE, NULL, TEXT_LITERAL = "number", "String", "date", "NULL", "string literal"


def kind_of_type(ch_type: str) -> str:
    """The kind (number, String or date) of a ClickHouse type, e.g. a GROUP BY key's."""
    if is_numeric_type(ch_type):
        return NUMBER
    if is_date_type(ch_type):
        return DATE
    return STRING


_ARITHMETIC = (exp.Add, exp.Sub, exp.Mul, exp.Div, exp.Neg)
_LOGIC = (exp.And, exp.Or, exp.Not)


def check_types(node: exp.Expr, kinds: Mapping[str, str], what: str, *,
                condition: bool = False, labels: Mapping[str, str] | None = None) -> exp.Expr:
    """Checks ``node`` (after :func:`check`) as ClickHouse would type it; returns it with each string
    literal compared with a number replaced by that number. ``kinds`` maps a placeholder name
    (``k0``, ``s1``) to its kind; statistics are numbers. ``condition``: ``node`` is a HAVING.
    ``labels`` names placeholders in messages (a key's GROUP BY text)."""
    node = node.copy()
    names = dict(labels or {})

    def describe(n: exp.Expr, k: str) -> str:
        while isinstance(n, exp.Paren):
            n = n.this
        if isinstance(n, exp.Var):
            label = names.get(n.name[len(PLACEHOLDER):])
            return f"{label} (a {k})" if label else f"a {k} value"
        return f"{n.sql()} (a {k})"

    def kind(n: exp.Expr) -> str:
        if isinstance(n, exp.Var):
            return kinds.get(n.name[len(PLACEHOLDER):], NUMBER)
        if isinstance(n, exp.Paren):
            return kind(n.this)
        if isinstance(n, exp.Literal):
            return TEXT_LITERAL if n.is_string else NUMBER
        if isinstance(n, exp.Null):
            return NULL
        if isinstance(n, exp.Boolean):
            return NUMBER
        resolved = functions.post_function(n)
        if resolved is not None and resolved[0] is post_functions.TO_STRING:
            for arg in resolved[1]:
                kind(arg)  # any kind has a text
            return STRING
        if isinstance(n, _ARITHMETIC) or resolved is not None:
            for arg in _operands(n):
                if kind(arg) not in (NUMBER, NULL):
                    raise QueryRejected(f"{what}: arithmetic on {describe(arg, kind(arg))}",
                                        hint="arithmetic takes numbers (ClickHouse refuses it too)")
            return NUMBER
        if isinstance(n, exp.Least | exp.Greatest):
            found = {kind(a) for a in _operands(n)} - {NULL}
            if len(found - {TEXT_LITERAL}) > 1:
                raise QueryRejected(f"{what}: {n.sql()} mixes {' and '.join(sorted(found))} values")
            for arg in _operands(n):
                _coerce(arg, found - {TEXT_LITERAL}, what)
            return next(iter(found - {TEXT_LITERAL}), TEXT_LITERAL if found else NULL)
        if isinstance(n, _LOGIC):
            for arg in _operands(n):
                _condition(arg)
            return NUMBER
        if isinstance(n, exp.Is):
            kind(n.this)
            return NUMBER
        if isinstance(n, exp.Case | exp.If):
            # conditions are conditions; every value a number (or NULL): a CASE over released values gives a
            # noisy number with an interval (the union of its branches'), not a label
            for condition, value in _branches(n):
                _condition(condition)
                if kind(value) not in (NUMBER, NULL):
                    raise QueryRejected(f"{what}: a CASE over released values gives {describe(value, kind(value))}",
                                        hint="give each branch a number (or NULL); label rows in the client")
            default = _default(n)
            if default is not None and kind(default) not in (NUMBER, NULL):
                raise QueryRejected(f"{what}: a CASE over released values gives {describe(default, kind(default))}",
                                    hint="give each branch a number (or NULL); label rows in the client")
            return NUMBER
        if isinstance(n, tuple(_COMPARISONS) + (exp.In, exp.Between)):
            args = _operands(n)
            found = {kind(a) for a in args} - {NULL}
            strict = found - {TEXT_LITERAL}
            if len(strict) > 1:
                left, right = args[0], next(a for a in args[1:] if kind(a) in strict - {kind(args[0])})
                raise QueryRejected(
                    f"{what}: cannot compare {describe(left, kind(left))} with {describe(right, kind(right))}",
                    hint="ClickHouse refuses it too; compare like with like: a String with a string ('f'), "
                    "a date with a date ('2026-03-01'), a number with a number")
            for arg in args:
                _coerce(arg, strict, what)
            return NUMBER
        return NUMBER

    def _condition(n: exp.Expr) -> None:
        k = kind(n)
        if k not in (NUMBER, NULL):
            raise QueryRejected(f"{what}: {describe(n, k)} is not a condition",
                                hint="compare it, e.g. sex = 'f' (ClickHouse refuses it as a filter too)")

    if condition:
        _condition(node)
    else:
        kind(node)
    return node


def _operands(n: exp.Expr) -> list[exp.Expr]:
    resolved = functions.post_function(n)
    if resolved is not None:
        return resolved[1]
    if isinstance(n, exp.In):
        return [n.this, *n.expressions]
    if isinstance(n, exp.Between):
        return [n.this, n.args["low"], n.args["high"]]
    if isinstance(n, exp.Least | exp.Greatest):
        return [n.this, *n.expressions]
    return [a for a in (n.this, n.args.get("expression")) if isinstance(a, exp.Expression)]


def _coerce(arg: exp.Expr, kinds: set[str], what: str) -> None:
    """A string literal compared with a number or date becomes one (as ClickHouse converts it)."""
    while isinstance(arg, exp.Paren):
        arg = arg.this
    if not (isinstance(arg, exp.Literal) and arg.is_string) or not kinds:
        return
    (target,) = kinds
    text = arg.this
    if target == NUMBER:
        try:
            value = float(text)
        except ValueError:
            raise QueryRejected(f"{what}: {arg.sql()} is compared with a number but is not one",
                                hint="ClickHouse cannot convert it either; write a number") from None
        arg.replace(exp.Literal.number(repr(value)))
    elif target == DATE:
        try:
            _parse_date(text)
        except ValueError:
            raise QueryRejected(f"{what}: {arg.sql()} is compared with a date but is not one",
                                hint="write a date as 'YYYY-MM-DD'") from None


def arrange(having: exp.Expr | None, order: Sequence[tuple[exp.Expr, bool]], limit: int | None,
            offset: int, envs: Sequence[Mapping[str, Any]]) -> list[int]:
    """The groups HAVING keeps, in ORDER BY order, after LIMIT/OFFSET: indices into ``envs``
    (each group's key and statistic values). HAVING keeps a group when its value is true
    (non-zero, not NULL), as in ClickHouse; ORDER BY puts NULLs last."""
    kept = list(range(len(envs)))
    if having is not None:
        kept = [g for g in kept if truth(evaluate(having, envs[g])) is True]
    for expr, descending in reversed(order):
        values = {g: evaluate(expr, envs[g]) for g in kept}
        kept.sort(key=lambda g: _sort_key(values[g]), reverse=descending)
        kept.sort(key=lambda g: values[g] is None)  # stable: NULLs last in both directions, as in ClickHouse
    stop = None if limit is None else offset + limit
    return kept[offset:stop]


def _sort_key(value: Any) -> tuple[Any, ...]:
    if value is None:
        return (0.0, "")
    if isinstance(value, int | float):
        return (float(value), "")
    if isinstance(value, date):
        return ((_as_datetime(value) - datetime(1, 1, 1)).total_seconds(), "")
    return (0.0, str(value))


def interval(node: exp.Expr, env: Mapping[str, Interval]) -> Interval:
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
    resolved = functions.post_function(node)
    if resolved is not None:
        fn, args = resolved
        return fn.image(*(interval(a, env) for a in args))
    if isinstance(node, exp.Least | exp.Greatest):
        parts = [interval(e, env) for e in [node.this, *node.expressions]]
        pick = min if isinstance(node, exp.Least) else max
        return pick(p[0] for p in parts), pick(p[1] for p in parts)
    if isinstance(node, exp.Case | exp.If):
        # a noisy condition may pick another branch than the true values would: the interval holds every
        # branch's (their union); a NULL branch adds no number
        values = [value for _, value in _branches(node)] + [d for d in [_default(node)] if d is not None]
        parts = [interval(v, env) for v in values if not isinstance(v, exp.Null)]
        if not parts:
            return -math.inf, math.inf
        return min(p[0] for p in parts), max(p[1] for p in parts)
    return -math.inf, math.inf
