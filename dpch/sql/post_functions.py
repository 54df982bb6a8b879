"""Scalar functions over released values (post-processing): ClickHouse's value, and an interval rule.

A result column may apply a scalar function to noisy statistics (``pow(sum(x), 2)``,
``CAST(avg(x) AS Int64)``). That is post-processing: it reads no data and costs nothing. Two
things must still be right, and each function's entry in :data:`BY_NODE` / :data:`BY_NAME` holds
both:

- **value**: what ClickHouse returns for the same function of the same (noisy) Float64, so the
  released number means what the analyst's SQL means there: ``round`` rounds half to even *after*
  scaling by 10^N (ClickHouse gives ``round(2.675, 2) = 2.68``, Python's correctly rounded
  ``round`` 2.67); a cast to an integer truncates toward zero (``toInt64(-2.5) = -2``), and outside
  the target type's range does what ClickHouse does (``toInt8(300.5) = 44``, ``toInt64(1e30)`` is
  the type's minimum); ``pow(-8, 1/3)``, ``sqrt(-1)`` and ``log(-1)`` are NaN, ``log(0)`` is −inf,
  ``pow(0, -1)`` is +inf (numpy's IEEE functions, as ClickHouse's). Where ClickHouse raises (NaN or
  ±inf cast to an integer) dpch answers NULL: the release is already charged, and the noisy value
  is public, so there is nothing to protect and no reason to waste the budget.
- **image**: given intervals that hold the arguments' true values, an interval that holds the
  function of them. A monotone non-decreasing function maps the endpoints; ``abs`` and an even
  power of an interval holding 0 start at 0; a negative power of an interval holding 0 has a pole
  there (the whole line); ``pow`` of a positive base is monotone in each argument, so its extremes
  are at the corners; a negative base with a fractional or noisy exponent may be NaN (the whole
  line); an integer cast that may leave its type's range (where ClickHouse wraps or saturates) is
  the type's whole range. A function undefined below 0 (sqrt, log) maps the part of the interval
  where it is defined.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from sqlglot import exp

from dpch.errors import QueryRejected
from dpch.sql.parse import DIALECT
from dpch.sql.text_form import clickhouse_text

Interval = tuple[float, float]
_WHOLE_LINE: Interval = (-math.inf, math.inf)


@dataclass(frozen=True)
class PostFunction:
    """A scalar function post-processing may apply: ClickHouse's value and its interval rule."""

    #: how the analyst writes it (messages)
    name: str
    #: ClickHouse's value on numbers (arguments are never NULL here: NULL propagates before)
    value: Callable[..., Any]
    #: the arguments' intervals → an interval holding the value of any arguments within them
    image: Callable[..., Interval]
    #: argument positions ClickHouse requires to be constant (round's N)
    constants: tuple[int, ...] = ()


def _quiet(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` with numpy's IEEE results (NaN, ±inf) and without its warnings."""
    def wrapped(*args: Any) -> Any:
        with np.errstate(all="ignore"):
            return fn(*args)
    return wrapped


def _monotone(fn: Callable[[float], Any], domain_lo: float = -math.inf) -> Callable[[Interval], Interval]:
    """The image of a non-decreasing ``fn`` defined from ``domain_lo`` on: its endpoints' values."""
    def image(iv: Interval) -> Interval:
        lo, hi = iv
        if hi < domain_lo:
            return math.nan, math.nan
        return float(fn(max(lo, domain_lo))), float(fn(hi))
    return _quiet(image)


# -- rounding: ClickHouse's FloatRoundingComputation (scale by 10^|N|, round, scale back) -----------

def _scaled(mode: Callable[[float], float]) -> Callable[..., float]:
    def value(x: float, digits: float = 0.0) -> float:
        n = int(digits)
        x = float(x)
        if n > 0:
            scale = 10.0 ** n
            return float(mode(x * scale) / scale)
        if n < 0:
            scale = 10.0 ** -n
            return float(mode(x / scale) * scale)
        return float(mode(x))
    return _quiet(value)


def _scaled_image(value: Callable[..., float]) -> Callable[..., Interval]:
    def image(iv: Interval, digits: Interval = (0.0, 0.0)) -> Interval:
        return value(iv[0], digits[0]), value(iv[1], digits[0])  # non-decreasing in x for a fixed N
    return image


def _rounding(name: str, mode: Callable[[float], float]) -> PostFunction:
    value = _scaled(mode)
    return PostFunction(name, value, _scaled_image(value), constants=(1,))


# -- abs, pow --------------------------------------------------------------------------------------

def _abs_image(iv: Interval) -> Interval:
    lo, hi = iv
    return (0.0 if lo <= 0 <= hi else min(abs(lo), abs(hi))), max(abs(lo), abs(hi))


def _odd_integer(y: float) -> bool:
    return math.isfinite(y) and y.is_integer() and abs(y) < 2**53 and int(y) % 2 == 1


def _pow_value(base: float, exponent: float) -> float:
    """C's pow, which ClickHouse calls: a pole is ±inf, a domain error NaN (Python's math.pow raises)."""
    x, y = float(base), float(exponent)
    try:
        return math.pow(x, y)
    except OverflowError:
        return -math.inf if x < 0 and _odd_integer(y) else math.inf
    except ValueError:
        if x == 0:  # pow(±0, y < 0): a pole, signed for an odd y
            return math.copysign(math.inf, x) if _odd_integer(y) else math.inf
        return math.nan


def _pow_image(base: Interval, exponent: Interval) -> Interval:
    (alo, ahi), (blo, bhi) = base, exponent
    if blo == bhi and math.isfinite(blo) and float(blo).is_integer():
        n = blo
        ends = sorted((_pow_value(alo, n), _pow_value(ahi, n)))
        if n == 0:
            return 1.0, 1.0
        if alo <= 0 <= ahi:
            if n < 0:
                return _WHOLE_LINE  # a pole at 0: pow(0, -1) is +inf, and either sign near it
            if n % 2 == 0:
                return 0.0, ends[1]  # not monotone: the minimum is at 0, inside the interval
        return ends[0], ends[1]  # monotone on each side of 0 (odd powers on the whole line)
    if alo >= 0:
        # x^y = exp(y·ln x) with y·ln x bilinear in (y, ln x): the extremes are at the box's corners
        corners = [_pow_value(x, y) for x in (alo, ahi) for y in (blo, bhi)]
        if not any(math.isnan(c) for c in corners):
            return min(corners), max(corners)
    return _WHOLE_LINE  # a negative base with a fractional or noisy exponent may be NaN


# -- casts -----------------------------------------------------------------------------------------

_INT32 = (-(2**31), 2**31 - 1)
_INT64 = (-(2**63), 2**63 - 1)
#: float → UInt64 takes [−2^63, 2^64) (then wraps); outside it gives 2^63, i.e. −2^63 wrapped
_UINT64_VIA = (-(2**63), 2**64 - 1)


def _saturating(x: float, bounds: tuple[int, int]) -> int:
    """C's float → int conversion on x86 as ClickHouse runs it: the truncation, or the wider
    type's minimum ("integer indefinite") when it does not fit."""
    t = math.trunc(x)
    return t if bounds[0] <= t <= bounds[1] else bounds[0]


def _wrap(t: int, bits: int, signed: bool) -> int:
    t %= 2**bits
    return t - 2**bits if signed and t >= 2 ** (bits - 1) else t


#: integer type → (bits, signed, the wider conversion ClickHouse goes through before wrapping)
_INT_TYPES: dict[str, tuple[int, bool, tuple[int, int]]] = {
    "Int8": (8, True, _INT32), "Int16": (16, True, _INT32), "Int32": (32, True, _INT32),
    "Int64": (64, True, _INT64), "UInt8": (8, False, _INT32), "UInt16": (16, False, _INT32),
    "UInt32": (32, False, _INT64), "UInt64": (64, False, _UINT64_VIA),
}


def _to_int(type_name: str) -> PostFunction:
    bits, signed, via = _INT_TYPES[type_name]
    type_range = (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1) if signed else (0, 2**bits - 1)

    def value(x: float) -> int | None:
        if isinstance(x, int):  # an integer key (or a comparison's 0/1): ClickHouse wraps integers
            return _wrap(int(x), bits, signed)
        if not math.isfinite(x):
            return None  # ClickHouse raises "Unexpected inf or nan to integer conversion"
        return _wrap(_saturating(x, via), bits, signed)

    def image(iv: Interval) -> Interval:
        lo, hi = iv
        if all(math.isfinite(v) and type_range[0] <= math.trunc(v) <= type_range[1] for v in iv):
            return float(math.trunc(lo)), float(math.trunc(hi))  # truncation is non-decreasing
        return float(type_range[0]), float(type_range[1])  # ClickHouse wraps or saturates out there

    return PostFunction(f"to{type_name}", value, image)


def _to_float32(x: float) -> float:
    with np.errstate(all="ignore"):
        return float(np.float32(x))


_TO_FLOAT64 = PostFunction("toFloat64", lambda x: float(x), lambda iv: iv)
_TO_FLOAT32 = PostFunction("toFloat32", _to_float32, _monotone(_to_float32))
#: conversions by ClickHouse type name (CAST(x AS T), x::T, toT(x))
CONVERSIONS: dict[str, PostFunction] = {
    **{name: _to_int(name) for name in _INT_TYPES}, "Float64": _TO_FLOAT64, "Float32": _TO_FLOAT32,
}


# -- the table -------------------------------------------------------------------------------------

def _unary(name: str, fn: Callable[[float], Any], domain_lo: float = -math.inf) -> PostFunction:
    value = _quiet(lambda x: float(fn(float(x))))
    return PostFunction(name, value, _monotone(value, domain_lo))


ABS = PostFunction("abs", lambda x: abs(float(x)), _abs_image)
POW = PostFunction("pow", _pow_value, _pow_image)
SQRT = _unary("sqrt", np.sqrt, 0.0)
LN = _unary("log", np.log, 0.0)
LOG2 = _unary("log2", np.log2, 0.0)
LOG10 = _unary("log10", np.log10, 0.0)
def _sign(x: float) -> int:
    x = float(x)
    return 1 if math.isnan(x) else int(np.sign(x))  # ClickHouse's sign(nan) is 1


SIGN = PostFunction("sign", _sign, _monotone(_sign))

_Resolved = tuple[PostFunction, list[exp.Expr]]
#: a call node → the post-processing function it calls and its arguments (the registry,
#: :mod:`dpch.sql.functions`, names one per function)
PostResolver = Callable[[exp.Expr], _Resolved]


def _this(fn: PostFunction) -> PostResolver:
    return lambda node: (fn, [node.this])


def _this_and(arg: str, fn: PostFunction) -> PostResolver:
    return lambda node: (fn, [a for a in (node.this, node.args.get(arg)) if a is not None])


def log_resolver(node: exp.Expr) -> _Resolved:
    """log2(x) / log10(x), which sqlglot reads as a logarithm with the base first."""
    base = node.this
    if node.expression is not None and isinstance(base, exp.Literal) and base.this in ("2", "10"):
        return (LOG2 if base.this == "2" else LOG10), [node.expression]
    raise QueryRejected("a logarithm of another base is not a ClickHouse function",
                        hint="write log(x) (natural), log2(x) or log10(x), or divide: log(x) / log(b)")


#: ``CAST(x AS Nullable(T))`` for each T of :data:`CONVERSIONS` (tools write it: sqlglot turns T-SQL's
#: ``CAST(x AS int)`` into ``Nullable(Int32)``): T's value, a NULL where T's cast gives none (ClickHouse
#: raises there; dpch answers NULL, as for T), typed ``Nullable(T)``
NULLABLE_CONVERSIONS: dict[str, PostFunction] = {
    f"Nullable({name})": PostFunction(f"CAST(… AS Nullable({name}))", fn.value, fn.image)
    for name, fn in CONVERSIONS.items()}


#: ``toString(x)``, ``CAST(x AS String)``: ClickHouse's text of a key or a released value (:mod:`.text_form`).
#: Its value is text, so it has no interval: analysis allows it where no interval is needed (HAVING, ORDER BY)
TO_STRING = PostFunction("toString", clickhouse_text, lambda *_: _WHOLE_LINE)
#: the String types a cast may name (a Nullable or LowCardinality String holds the same text here)
STRING_TYPES = frozenset({"String", "Nullable(String)", "LowCardinality(String)",
                          "LowCardinality(Nullable(String))"})


def cast_resolver(node: exp.Expr) -> _Resolved:
    """``CAST(x AS T)`` and ``x::T`` to a type of :data:`CONVERSIONS` or :data:`NULLABLE_CONVERSIONS`, or to
    String (:data:`TO_STRING`)."""
    target = node.args["to"].sql(DIALECT)
    fn = CONVERSIONS.get(target) or NULLABLE_CONVERSIONS.get(target) or (
        TO_STRING if target in STRING_TYPES else None)
    if fn is None:
        raise QueryRejected(
            f"CAST(... AS {target}) is not supported on released values and keys",
            hint="cast to " + ", ".join(CONVERSIONS) + ", String, or Nullable(T) of one (a Decimal: round(x, N) "
                 "instead)")
    return fn, [node.this]


def to_string_resolver(node: exp.Expr) -> _Resolved:
    """``toString(x)`` of a key or released value; the time-zone form ``toString(t, zone)`` is refused."""
    if str(node.this) != "toString":
        raise QueryRejected(f"{node.this}() is not a ClickHouse function", hint="write toString(…)")
    args = list(node.expressions)
    if len(args) != 1:
        raise QueryRejected("toString of a released value or key takes one argument",
                            hint="a time zone's text is not supported here; format the key in the client")
    return TO_STRING, args


ABS_RESOLVER = _this(ABS)
SQRT_RESOLVER = _this(SQRT)
CBRT_RESOLVER = _this(_unary("cbrt", np.cbrt))
EXP_RESOLVER = _this(_unary("exp", np.exp))
LN_RESOLVER = _this(LN)
SIGN_RESOLVER = _this(SIGN)
POW_RESOLVER = _this_and("expression", POW)
ROUND_RESOLVER = _this_and("decimals", _rounding("round", np.rint))  # rint: half to even, as nearbyint
FLOOR_RESOLVER = _this_and("decimals", _rounding("floor", np.floor))
CEIL_RESOLVER = _this_and("decimals", _rounding("ceil", np.ceil))
TRUNC_RESOLVER = _this_and("decimals", _rounding("trunc", np.trunc))

#: functions the parser leaves by name, spelled as ClickHouse spells them (case-sensitive there)
BY_NAME: dict[str, PostFunction] = {
    **{f"to{name}": fn for name, fn in CONVERSIONS.items()},
    "exp2": _unary("exp2", np.exp2),
    "exp10": _unary("exp10", lambda x: np.power(10.0, x)),
}
#: the names of :data:`BY_NAME`, for the registry
NAMED = tuple(BY_NAME)


def named_resolver(name: str) -> PostResolver:
    """The resolver of an anonymous call to ``name`` (exactly as spelled)."""
    fn = BY_NAME[name]

    def resolve(node: exp.Expr) -> _Resolved:
        if str(node.this) != name:
            raise QueryRejected(f"{node.this}() is not a ClickHouse function", hint=f"write {name}(…)")
        return fn, list(node.expressions)
    return resolve


def result_type_of(fn: PostFunction) -> str | None:
    """The ClickHouse type a conversion gives (``CAST(avg(x) AS Int64)``: Int64), None for the rest."""
    for type_name, conversion in (CONVERSIONS | NULLABLE_CONVERSIONS).items():
        if fn is conversion:
            return type_name
    return None


def is_constant(node: exp.Expr) -> bool:
    """A numeric literal, possibly negated (what ClickHouse accepts as round's N)."""
    while isinstance(node, exp.Neg | exp.Paren):
        node = node.this
    return isinstance(node, exp.Literal) and not node.is_string


__all__ = ["STRING_TYPES", "TO_STRING", "to_string_resolver",
           "ABS_RESOLVER", "BY_NAME", "CBRT_RESOLVER", "CEIL_RESOLVER", "CONVERSIONS", "EXP_RESOLVER",
           "FLOOR_RESOLVER", "LN_RESOLVER", "NAMED", "NULLABLE_CONVERSIONS", "POW_RESOLVER", "PostFunction",
           "PostResolver", "ROUND_RESOLVER", "SIGN_RESOLVER", "SQRT_RESOLVER", "TRUNC_RESOLVER", "cast_resolver",
           "is_constant", "log_resolver", "named_resolver", "result_type_of"]
