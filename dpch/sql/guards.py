"""Saturating guards: SQL dpch wraps around an argument so that its function cannot raise on any row.

docs/design.md rule 5 says a row may be garbage, never an error. Where a function raises on some
values of an argument the analyst may compute per row, and refusing the argument would refuse
ordinary queries, dpch keeps the argument where the function is total instead. Each guard changes
nothing for the values a row of sensible data holds, and for the others gives some value of the
right type (garbage for that row, which the sensitivity bound already covers):

- :func:`substring_argument`: ``substring``'s length raises "Overflow in length argument" at
  Int64's minimum (and at 2^63 of a UInt64, which it reads as that); offsets and lengths are clamped
  to ±2^62, which no string reaches, so the result is the same for every real string;
- :func:`read_datetime64`: a DateTime64 column may hold any Int64 of ticks (ClickHouse stores what
  it is given, and its own arithmetic saturates at the year 9999), and comparing or converting such a
  value at another scale overflows ("Can't compare decimal number due to overflow"). Every DateTime64
  column is read clamped to [1900-01-01 00:00:00, 2262-04-11 23:47:16] UTC, ClickHouse's documented
  range cut to what scale 9 holds, so every later comparison or conversion fits;
- :func:`date_arithmetic`: ``x ± INTERVAL n unit`` with a DateTime64 result overflows when the sum
  leaves Int64's ticks; the date operand is clamped so that the result stays in that same range, and
  an interval longer than the range is refused.
"""

from __future__ import annotations

import math
from datetime import date, timedelta
from decimal import ROUND_CEILING, ROUND_FLOOR, Decimal, InvalidOperation

from sqlglot import exp

from dpch.errors import QueryRejected
from dpch.sql.expression_types import is_nullable, unwrap
from dpch.sql.nodes import call, number, show

#: |offset| and |length| substring may be given: beyond any string, far from Int64's minimum
SUBSTRING_LIMIT = 2**62
#: the range every DateTime64 value is kept in, in Unix seconds: 1900-01-01 00:00:00 UTC (ClickHouse's
#: documented lower limit) to 2262-04-11 23:47:16 UTC (the last whole second scale 9 holds)
DATETIME64_RANGE = (-2_208_988_800, 9_223_372_036)
#: the range of each date type, in Unix seconds (DateTime64: :data:`DATETIME64_RANGE`)
_TYPE_RANGE = {"Date": (0, 65_535 * 86_400), "Date32": (-2_208_988_800, 10_413_705_600),
               "DateTime": (0, 2**32 - 1)}
#: seconds of one interval unit; calendar units at their longest, so a clamp computed with them is safe
UNIT_SECONDS = {"NANOSECOND": 1e-9, "MICROSECOND": 1e-6, "MILLISECOND": 1e-3, "SECOND": 1.0, "MINUTE": 60.0,
                "HOUR": 3600.0, "DAY": 86_400.0, "WEEK": 7 * 86_400.0, "MONTH": 31 * 86_400.0,
                "QUARTER": 92 * 86_400.0, "YEAR": 366 * 86_400.0}


def keep_null(value: exp.Expr, guarded: exp.Expr, type_: str) -> exp.Expr:
    """``guarded``, but NULL where ``value`` is: least/greatest skip a NULL argument, so a bare clamp
    would turn NULL into a bound."""
    if not is_nullable(type_):
        return guarded
    return call("if", call("isNull", value), exp.Null(), guarded)


def _clamp(node: exp.Expr, lo: exp.Expr, hi: exp.Expr) -> exp.Expr:
    return call("least", call("greatest", node, lo), hi)


def _small_literal(node: exp.Expr, limit: int) -> bool:
    """A whole-number literal (possibly negated) of magnitude at most ``limit``, compared exactly (a
    Float64 comparison would round 2^62 + 1 down to the limit)."""
    inner = node.this if isinstance(node, exp.Neg) else node
    if not (isinstance(inner, exp.Literal) and not inner.is_string and inner.this.isdigit()):
        return False
    return int(inner.this) <= limit


def substring_argument(node: exp.Expr, type_: str) -> exp.Expr:
    """An offset or length of ``substring`` (an integer type) clamped to ±:data:`SUBSTRING_LIMIT`; a
    literal that is already inside is left as written."""
    if _small_literal(node, SUBSTRING_LIMIT):
        return node
    return keep_null(node, _clamp(node, number(-SUBSTRING_LIMIT), number(SUBSTRING_LIMIT)), type_)


def _scale_and_zone(type_: str) -> tuple[int, str | None]:
    """The scale and time zone of a ``DateTime64(p[, 'zone'])`` type."""
    inner = unwrap(type_)[len("DateTime64("):-1]
    scale, _, zone = inner.partition(",")
    return int(scale), (zone.strip().strip("'") or None)


def _zone(type_: str) -> str | None:
    base = unwrap(type_)
    if base.startswith("DateTime64("):
        return _scale_and_zone(type_)[1]
    if base.startswith("DateTime("):
        return base[len("DateTime("):-1].strip().strip("'") or None
    return None


def date_literal(type_: str, seconds: int | Decimal) -> exp.Expr:
    """The instant ``seconds`` (Unix time, within the type's range) as a constant of date type ``type_``;
    a DateTime64 instant with a fraction is given as a Decimal128 of its scale (a Float64 literal would
    round it)."""
    base = unwrap(type_)
    zone = [exp.Literal.string(z)] if (z := _zone(type_)) else []
    if base.startswith("DateTime64"):
        scale = _scale_and_zone(type_)[0]
        if isinstance(seconds, Decimal) and seconds != seconds.to_integral_value():
            exact = call("toDecimal128", exp.Literal.string(format(seconds, "f")), number(scale))
            return call("toDateTime64", exact, number(scale), *zone)
        return call("toDateTime64", number(int(seconds)), number(scale), *zone)
    if base.startswith("DateTime"):
        return call("toDateTime", number(int(seconds)), *zone)
    day = (date(1970, 1, 1) + timedelta(days=math.floor(seconds / 86_400))).isoformat()
    return call("toDate32" if base == "Date32" else "toDate", exp.Literal.string(day))


def type_range(type_: str) -> tuple[int, int]:
    """The Unix seconds a value of date type ``type_`` may be kept in."""
    base = unwrap(type_)
    if base.startswith("DateTime64"):
        return DATETIME64_RANGE
    return _TYPE_RANGE["DateTime" if base.startswith("DateTime") else base]


def read_datetime64(node: exp.Expr, type_: str) -> exp.Expr:
    """A DateTime64 column as emitted SQL reads it: clamped into :data:`DATETIME64_RANGE`."""
    lo, hi = DATETIME64_RANGE
    return keep_null(node, _clamp(node, date_literal(type_, lo), date_literal(type_, hi)), type_)


def interval_seconds(interval: exp.Interval) -> float:
    """The signed length of a constant ``INTERVAL n unit`` in seconds (calendar units at their longest)."""
    return float(_exact_seconds(interval))


def _exact_seconds(interval: exp.Interval) -> Decimal:
    """:func:`interval_seconds` in exact decimal arithmetic (``INTERVAL 1 MILLISECOND`` is 0.001, not the
    double nearest it); an interval that is not ``<number> <unit>`` is refused in words."""
    count = interval.this
    negative = isinstance(count, exp.Neg)
    if negative:
        count = count.this
    unit = str(interval.unit.name if interval.unit is not None else "").upper().rstrip("S")
    if not isinstance(count, exp.Literal) or unit not in UNIT_SECONDS:
        raise QueryRejected(f"{show(interval)}: write the interval as INTERVAL <number> <unit>")
    try:
        value = Decimal(count.this)
    except InvalidOperation:
        value = Decimal("NaN")
    if not value.is_finite():
        raise QueryRejected(f"{show(interval)}: the interval's length must be a number")
    value *= Decimal(repr(UNIT_SECONDS[unit]))
    return -value if negative else value


def date_arithmetic(node: exp.Expr, date_side: str, date_type: str, result_type: str) -> exp.Expr:
    """``node`` (``x + INTERVAL …`` or ``x - INTERVAL …``, x at arg ``date_side`` of type
    ``date_type``) with x clamped so that a DateTime64 result stays in :data:`DATETIME64_RANGE`."""
    other = node.expression if date_side == "this" else node.this
    what = show(node)
    if not isinstance(other, exp.Interval):
        raise QueryRejected(f"{what}: arithmetic on a DateTime64 takes a constant INTERVAL",
                            hint="write e.g. ts + INTERVAL 1 HOUR")
    shift = _exact_seconds(other) * (-1 if isinstance(node, exp.Sub) else 1)
    lo, hi = DATETIME64_RANGE
    own_lo, own_hi = type_range(date_type)
    # the clamp's ends in the operand's own ticks (a DateTime64's scale, else whole seconds): an end
    # rounded to the second would move in-range values of the last second before the limit
    tick = Decimal(1).scaleb(-_scale_and_zone(date_type)[0]) if unwrap(date_type).startswith("DateTime64(") \
        else Decimal(1)
    low = max(Decimal(own_lo), ((lo - min(Decimal(0), shift)) / tick).to_integral_value(ROUND_CEILING) * tick)
    high = min(Decimal(own_hi), ((hi - max(Decimal(0), shift)) / tick).to_integral_value(ROUND_FLOOR) * tick)
    if low > high:
        raise QueryRejected(f"{what}: the interval is longer than the range of dates ClickHouse can hold "
                            f"in the result ({result_type})", hint="use a shorter interval")
    operand = node.args[date_side]
    clamped = _clamp(operand, date_literal(date_type, low), date_literal(date_type, high))
    guarded = keep_null(operand, clamped, date_type)
    copy = node.copy()
    copy.set(date_side, guarded)
    return copy


__all__ = ["DATETIME64_RANGE", "SUBSTRING_LIMIT", "UNIT_SECONDS", "date_arithmetic", "date_literal",
           "interval_seconds", "keep_null", "read_datetime64", "substring_argument", "type_range"]
