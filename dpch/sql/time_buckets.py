"""Time buckets as GROUP BY keys: which forms are accepted, and their key domain without the data.

A dashboard groups by a bucket of a time column: Grafana's ``$__timeInterval(t)`` expands to
``toStartOfInterval(toDateTime(t), INTERVAL 30 second)`` (grafana/clickhouse-datasource,
pkg/macros/macros.go), Superset's time grains to ``toStartOfHour(toDateTime(t))`` or
``toDateTime(intDiv(toUInt32(toDateTime(t)), 300)*300)`` (superset/db_engine_specs/clickhouse.py,
``_time_grain_expressions``). A key's domain must not come from the data (a bucket that appears only
because someone's row is in it reveals them), so it is derived from the column's declared date
bounds and, when the WHERE clause limits the column with constants (``t >= toDateTime(…) AND t <=
toDateTime(…)``), from that range: a last-24-hours panel releases its 24 hours of buckets, not every
bucket of the bounds, and costs no more (the cost depends on the per-unit key count, not the domain).

**Which forms.** A bucket is a chain of the functions in :data:`BUCKET_RULES` over one column with
date bounds. Each is total on Date/DateTime values (its other arguments are literals; a bad literal,
such as a zero interval, is refused here or fails the probe on no data), so no row can make the key
raise.

**The domain, exactly.** Rows are clamped into the bounds in the emitted key, and a row passing the
WHERE range lies in it, so every key a row can take is ``key(x)`` for some ``x`` of the column's type
in ``[a, b]`` = the range clamped to the bounds. ClickHouse evaluates ``key`` on a grid of ``x``
from ``a`` to ``b`` (plus ``b``), on no table. The grid's spacing divides every boundary a function of
the chain introduces (:attr:`BucketRule.width`: an interval of n seconds starts at multiples of n
seconds; calendar units start at whole quarter hours in every time zone whose offsets are whole
quarter hours), so every bucket that meets ``[a, b]`` holds a grid point, and the grid's image is the
key's exact set of values on the range. A bucket the grid missed (a time zone with an offset in
seconds, before 1900) would only drop that bucket's rows from the answer, never add a key.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sqlglot import exp

from dpch.errors import QueryRejected
from dpch.policy.model import base_type
from dpch.sql import functions
from dpch.sql.nodes import call, conjuncts, show
from dpch.sql.time_constants import ConstantQuery

SECOND = 1_000_000_000  # nanoseconds
#: every boundary of a calendar unit (day, week, month, …) is a whole quarter hour in time zones
#: whose offsets and daylight-saving shifts are whole quarter hours (all current ones)
QUARTER_HOUR = 900 * SECOND
#: the most grid points a domain may evaluate (a few tens of milliseconds in ClickHouse)
GRID_LIMIT = 10_000_000

_UNIT_NS = {"nanosecond": 1, "microsecond": 1_000, "millisecond": 1_000_000, "second": SECOND,
            "minute": 60 * SECOND, "hour": 3600 * SECOND, "day": 86400 * SECOND, "week": 7 * 86400 * SECOND}
_CALENDAR = {"month", "quarter", "year"}
_TRUNC_NS = {"second": SECOND, "minute": 60 * SECOND}


@dataclass(frozen=True)
class BucketRule:
    """One function of a bucket chain.

    ``time``: the argument that carries the time (an arg name for typed nodes, a position for
    anonymous calls); every other argument must be a literal. ``width(node)``: the nanoseconds every
    boundary the function introduces is a multiple of (0: it introduces none), or raises
    :class:`QueryRejected` for arguments it does not accept.
    """

    why: str
    time: str | int
    width: Callable[[exp.Expr], int]
    #: a type conversion (toDateTime, toUInt32, …): its boundaries are its output's resolution, so on a
    #: column whose resolution that divides (toDateTime of a DateTime) it introduces none
    conversion: bool = False


def _fixed(ns: int) -> Callable[[exp.Expr], int]:
    return lambda _node: ns


def _positive_int(node: exp.Expr | None, what: str) -> int:
    if isinstance(node, exp.Literal) and not node.is_string and node.this.isdigit() and int(node.this) > 0:
        return int(node.this)
    raise QueryRejected(f"{what} must be a positive whole number")


def _interval_width(node: exp.Expr) -> int:
    interval = node.expressions[1] if len(node.expressions) > 1 else None
    if not isinstance(interval, exp.Interval):
        raise QueryRejected("toStartOfInterval needs an interval, e.g. INTERVAL 5 minute")
    count = _positive_int(interval.this if not isinstance(interval.this, exp.Literal) or not interval.this.is_string
                          else exp.Literal.number(interval.this.this), "the interval's length")
    unit = str(interval.unit.name if interval.unit is not None else "").lower().rstrip("s")
    if unit in _CALENDAR:
        return QUARTER_HOUR
    if unit not in _UNIT_NS:
        raise QueryRejected(f"toStartOfInterval: unknown interval unit {unit or '(none)'}")
    return math.gcd(count * _UNIT_NS[unit], QUARTER_HOUR)


def _trunc_width(node: exp.Expr) -> int:
    unit_node = node.args.get("unit")
    unit = str(unit_node.name if unit_node is not None else "").lower()
    if unit in _TRUNC_NS:
        return _TRUNC_NS[unit]
    if unit in ("hour", "day", "week", "month", "quarter", "year"):
        return QUARTER_HOUR
    raise QueryRejected(f"dateTrunc: unit {unit or '(none)'} is not a time bucket dpch can list")


def _datetime64_width(node: exp.Expr) -> int:
    precision = node.expressions[1] if len(node.expressions) > 1 else None
    if not (isinstance(precision, exp.Literal) and not precision.is_string and precision.this.isdigit()
            and int(precision.this) <= 9):
        raise QueryRejected("toDateTime64 needs a precision from 0 to 9")
    return 10 ** (9 - int(precision.this))


def _intdiv_width(node: exp.Expr) -> int:
    if len(node.expressions) != 2 or _name(node.expressions[0]) not in ("touint32", "tounixtimestamp"):
        raise QueryRejected("intDiv of a time bucket needs seconds: intDiv(toUInt32(column), n)")
    return _positive_int(node.expressions[1], "intDiv's divisor") * SECOND


def _mul_width(node: exp.Expr) -> int:
    if not any(isinstance(side, exp.Literal) and not side.is_string for side in (node.this, node.expression)):
        raise QueryRejected("a time bucket may only be multiplied by a number")
    return 0


_SECOND_RULE = BucketRule("a conversion total on dates and times", 0, _fixed(SECOND), conversion=True)
_CALENDAR_RULE = BucketRule("a calendar bucket, total on dates and times", 0, _fixed(QUARTER_HOUR))

#: the functions a time bucket may chain, keyed by node class or lower-case name
BUCKET_RULES: dict[type[exp.Expr] | str, BucketRule] = {
    exp.TimestampTrunc: BucketRule("truncation to a constant unit", "this", _trunc_width),
    exp.DateTrunc: BucketRule("truncation to a constant unit", "this", _trunc_width),
    exp.Mul: BucketRule("bucket number times a constant (wraps, never raises)", "this", _mul_width),
    "todatetime": _SECOND_RULE,
    "tounixtimestamp": _SECOND_RULE,
    "touint32": _SECOND_RULE,
    "todatetime64": BucketRule("a conversion total on dates and times", 0, _datetime64_width, conversion=True),
    "todate": _CALENDAR_RULE, "todate32": _CALENDAR_RULE, "tostartofweek": _CALENDAR_RULE,
    "toyyyymm": _CALENDAR_RULE, "toyyyymmdd": _CALENDAR_RULE, "toyear": _CALENDAR_RULE,
    "tomonth": _CALENDAR_RULE, "tostartofisoyear": _CALENDAR_RULE, "tolastdayofmonth": _CALENDAR_RULE,
    "tostartofday": _CALENDAR_RULE, "tostartofhour": _CALENDAR_RULE, "tostartofmonth": _CALENDAR_RULE,
    "tostartofquarter": _CALENDAR_RULE, "tostartofyear": _CALENDAR_RULE, "tomonday": _CALENDAR_RULE,
    "tostartofsecond": BucketRule("a bucket of whole seconds", 0, _fixed(SECOND)),
    "tostartofminute": BucketRule("a bucket of whole minutes", 0, _fixed(60 * SECOND)),
    "tostartoffiveminutes": BucketRule("a bucket of five minutes", 0, _fixed(300 * SECOND)),
    "tostartoftenminutes": BucketRule("a bucket of ten minutes", 0, _fixed(math.gcd(600 * SECOND, QUARTER_HOUR))),
    "tostartoffifteenminutes": BucketRule("a bucket of fifteen minutes", 0, _fixed(QUARTER_HOUR)),
    "tostartofinterval": BucketRule("a bucket of a constant positive interval", 0, _interval_width),
    "intdiv": BucketRule("seconds divided by a constant positive number", 0, _intdiv_width),
}


def _name(node: exp.Expr) -> str:
    return str(node.this).lower() if isinstance(node, exp.Anonymous) else ""


def _rule(node: exp.Expr) -> BucketRule | None:
    """The bucket rule of a link; only functions the registry admits in time buckets have one."""
    if not functions.allowed_in(node, functions.Use.BUCKET) and not isinstance(node, exp.Mul):
        return None
    return BUCKET_RULES.get(_name(node) or type(node))


def _time_argument(node: exp.Expr, rule: BucketRule) -> exp.Expr | None:
    if isinstance(rule.time, int):
        items = node.expressions
        return items[rule.time] if rule.time < len(items) else None
    if isinstance(node, exp.Mul):  # the side that is not the number
        return node.expression if isinstance(node.this, exp.Literal) else node.this
    found = node.args.get(rule.time)
    return found if isinstance(found, exp.Expr) else None


#: one function's boundaries in a chain: (nanoseconds they are multiples of, whether it is a conversion)
Width = tuple[int, bool]


@dataclass(frozen=True)
class BucketChain:
    """A key that is a chain of :data:`BUCKET_RULES` functions over one column."""

    column: exp.Column
    links: tuple[exp.Expr, ...]

    def widths(self) -> tuple[Width, ...]:
        """The boundaries each function introduces (raises :class:`QueryRejected` for a bad argument,
        such as a zero interval); ``((1, False),)`` for the bare column: every value its own key."""
        if not self.links:
            return ((1, False),)
        found = []
        for link in self.links:
            rule = _rule(link)
            assert rule is not None  # a link is in the table by construction
            found.append((rule.width(link), rule.conversion))
        return tuple(found)


def bucket_column(expr: exp.Expr) -> BucketChain | None:
    """``expr`` as a chain of bucket functions over one column (the bare column is a chain of none);
    None if it is not one."""
    links: list[exp.Expr] = []
    node = expr
    while not isinstance(node, exp.Column):
        rule = _rule(node)
        if rule is None:
            return None
        inner = _time_argument(node, rule)
        if inner is None:
            return None
        for child in node.iter_expressions():
            if child is not inner and not _literal_argument(child):
                return None
        links.append(node)
        node = inner
    return BucketChain(node, tuple(links))


def grid_width(widths: tuple[Width, ...], resolution: int) -> int:
    """Nanoseconds that divide every boundary of the chain on a column of ``resolution`` ns: the gcd of
    the functions' widths and a quarter hour (calendar units), leaving out conversions whose output
    resolution divides the column's (they map its values one to one)."""
    width = QUARTER_HOUR
    for w, conversion in widths:
        if not (conversion and resolution % w == 0):
            width = math.gcd(width, w)
    return width


def _literal_argument(node: exp.Expr) -> bool:
    if isinstance(node, exp.Interval):
        return isinstance(node.this, exp.Literal)
    return isinstance(node, exp.Literal | exp.Var)


@dataclass(frozen=True)
class Limit:
    """One constant limit on a column: ``column >= value`` (or ``>`` when ``strict``), or ``<=``/``<``."""

    value: exp.Expr
    strict: bool = False


@dataclass(frozen=True)
class TimeRange:
    """Constant limits the WHERE clause puts on a column (every row counted satisfies each)."""

    lower: tuple[Limit, ...] = ()
    upper: tuple[Limit, ...] = ()


#: comparison → (the limit is a lower one when the column is on the left, strict)
_COMPARISONS: dict[type[exp.Expr], tuple[bool, bool]] = {
    exp.GTE: (True, False), exp.GT: (True, True), exp.LTE: (False, False), exp.LT: (False, True)}


def where_ranges(where: exp.Expr | None, identity: Callable[[exp.Column], str | None]) -> dict[str, TimeRange]:
    """The constant limits of each column in ``where``'s top-level AND: ``col >= c``, ``col < c``,
    ``c <= col``, ``col BETWEEN c1 AND c2``, ``col = c``; keyed by ``identity(column)``. A limit under
    OR or NOT is not used (the range is then the bounds), which is always sound."""
    found: dict[str, tuple[list[Limit], list[Limit]]] = {}

    def add(side: exp.Expr, value: exp.Expr, lower: bool, strict: bool = False) -> None:
        col = floored_column(side)
        if col is None or not _constant_value(value):
            return
        key = identity(col)
        if key is not None:
            found.setdefault(key, ([], []))[0 if lower else 1].append(Limit(value, strict))

    for part in conjuncts(where):
        if isinstance(part, exp.Between):
            add(part.this, part.args["low"], True)
            add(part.this, part.args["high"], False)
        elif isinstance(part, exp.EQ):
            for col, value in ((part.this, part.expression), (part.expression, part.this)):
                add(col, value, True)
                add(col, value, False)
        elif type(part) in _COMPARISONS:
            lower, strict = _COMPARISONS[type(part)]
            add(part.this, part.expression, lower, strict)
            add(part.expression, part.this, not lower, strict)
    return {k: TimeRange(tuple(lo), tuple(hi)) for k, (lo, hi) in found.items()}


#: bucket functions that return the start of the bucket holding their argument, as a time: f(x) ≤ x and f
#: non-decreasing. Not the numbers (toYYYYMM, toUnixTimestamp, intDiv), not toLastDayOfMonth (a ceiling),
#: not toDate of a time (a Date compares as midnight in the server's zone, not the column's)
_FLOORS = frozenset({
    "tostartofsecond", "tostartofminute", "tostartoffiveminutes", "tostartoftenminutes", "tostartoffifteenminutes",
    "tostartofhour", "tostartofday", "tostartofweek", "tomonday", "tostartofmonth", "tostartofquarter",
    "tostartofyear", "tostartofinterval", "todatetime"})
#: the parser's nodes for date_trunc / timestamp truncation: floors too
_FLOOR_NODES = (exp.TimestampTrunc, exp.DateTrunc)


def floored_column(node: exp.Expr) -> exp.Column | None:
    """The column a limit on ``node`` also limits, for the key domain: the column itself, or the column under
    a chain of :data:`_FLOORS` (Grafana's builder filters on its bucket's alias, ``WHERE time >= …`` with
    ``toStartOfInterval(ts, …) AS time``). Since each floor f has f(x) ≤ x and is non-decreasing,
    f(x) ≥ c implies x ≥ c, and the buckets of the x ≤ c are every bucket ≤ c: the range of the column
    read so yields every bucket the limit lets through (at most one more, empty, at the lower edge).
    The limit in WHERE itself is unchanged: it still filters the rows."""
    while not isinstance(node, exp.Column):
        if isinstance(node, exp.Paren):  # an alias read in WHERE is its definition in parentheses
            node = node.this
            continue
        rule = _rule(node)
        if rule is None or not (isinstance(node, _FLOOR_NODES) or _name(node) in _FLOORS):
            return None
        inner = _time_argument(node, rule)
        if inner is None:
            return None
        node = inner
    return node


def _constant_value(node: exp.Expr) -> bool:
    if isinstance(node, exp.Literal):
        return True
    return _name(node) in ("todate", "todate32", "todatetime", "fromunixtimestamp64nano") and all(
        isinstance(a, exp.Literal) for a in node.expressions)


@dataclass(frozen=True)
class BucketDomain:
    """A time bucket's released key: its tree over the clamped column, values and ClickHouse type."""

    node: exp.Expr
    values: tuple[Any, ...]
    type: str


def _cast(value: exp.Expr, ch_type: str) -> exp.Expr:
    return exp.cast(value, exp.DataType.build(ch_type, dialect="clickhouse"))


def _bounds(ch_type: str, lo: Any, hi: Any) -> tuple[exp.Expr, exp.Expr]:
    if ch_type.startswith("DateTime"):
        last = "23:59:59.999999999" if ch_type.startswith("DateTime64") else "23:59:59"
        return (_cast(exp.Literal.string(f"{lo} 00:00:00"), ch_type),
                _cast(exp.Literal.string(f"{hi} {last}"), ch_type))
    return _cast(exp.Literal.string(str(lo)), ch_type), _cast(exp.Literal.string(str(hi)), ch_type)


def _clamp(node: exp.Expr, lo: exp.Expr, hi: exp.Expr) -> exp.Expr:
    return call("least", call("greatest", node, lo), hi)


def _units(ch_type: str) -> tuple[str, int, int]:
    """How the grid counts ``ch_type``'s values: the SQL of ``{x}`` as an integer, the nanoseconds one
    unit of that integer is, and the type's resolution in nanoseconds."""
    if ch_type.startswith("DateTime64"):
        return "toUnixTimestamp64Nano(toDateTime64({x}, 9))", 1, 10 ** (9 - _precision(ch_type))
    if ch_type.startswith("DateTime"):
        return "toInt64({x})", SECOND, SECOND
    return "toInt64({x})", 86400 * SECOND, 86400 * SECOND  # Date, Date32: days since 1970-01-01


def bucket_domain(key: exp.Expr, chain: BucketChain, column_node: exp.Expr, column_type: str,
                  date_bounds: tuple[Any, Any], limits: TimeRange, run: ConstantQuery,
                  max_groups: int) -> BucketDomain:
    """The released form of bucket ``key`` (``chain``, from :func:`bucket_column`): its tree over
    ``column_node`` clamped into the bounds, and its values on the bounds narrowed by ``limits``,
    evaluated by ClickHouse on a grid (reads no table)."""
    ch_type = base_type(column_type)
    label = show(key)
    lo, hi = _bounds(ch_type, *date_bounds)
    count_sql, unit, resolution = _units(ch_type)
    width = grid_width(chain.widths(), resolution)
    column = chain.column
    spacing = resolution if width < resolution else width // resolution * resolution

    def limit(values: tuple[Limit, ...], lower: bool, default: exp.Expr) -> exp.Expr:
        if not values:
            return default.copy()
        return _clamp(call("greatest" if lower else "least", *(_first_value(v, lower, ch_type) for v in values)),
                      lo, hi)

    a = limit(limits.lower, True, lo)
    b = limit(limits.upper, False, hi)
    ends = (f"SELECT {count_sql.format(x=a.sql('clickhouse'))}, {count_sql.format(x=b.sql('clickhouse'))}")
    try:
        first, last = (int(v) for v in run(ends)[0])
    except Exception:  # constants only: the failure depends on the text, never on the data
        raise QueryRejected(f"GROUP BY {label}: the time range in WHERE cannot be read as {ch_type}",
                            hint="limit the column with constants of its type, e.g. toDateTime('2026-01-31 00:00:00')"
                            ) from None
    first, last = min(first, last), max(first, last)
    step = spacing // unit
    points = (last - first) // step + 1
    if points > GRID_LIMIT:
        raise QueryRejected(f"GROUP BY {label} would release more than {max_groups} time buckets",
                            hint="use a coarser interval, or limit the time range in WHERE with constants, "
                                 "e.g. t >= now() - INTERVAL 1 DAY")
    start = _shifted(ch_type, _origin(ch_type), exp.Literal.number(first))
    grid = _shifted(ch_type, start, exp.Mul(this=exp.column("number"), expression=exp.Literal.number(step)))
    end = _shifted(ch_type, _origin(ch_type), exp.Literal.number(last))
    grid_sql, end_sql = grid.sql("clickhouse"), end.sql("clickhouse")
    k = _replace_column(key, column, exp.column("x")).sql("clickhouse")
    sql = (f"SELECT DISTINCT {k} AS k, toTypeName({k}) AS t FROM "
           f"(SELECT {grid_sql} AS x FROM numbers({points}) UNION ALL SELECT {end_sql} AS x) ORDER BY k")
    try:
        rows = run(sql)
    except Exception:  # the grid holds constants only: the failure depends on the text, never on the data
        raise QueryRejected(f"GROUP BY {label}: ClickHouse cannot compute this bucket of a {ch_type} column",
                            hint="a Date holds no time of day: use a bucket of days or longer, or group a "
                                 "DateTime column") from None
    if len(rows) > max_groups:
        raise QueryRejected(f"GROUP BY {label} would release {len(rows)} time buckets, more than the limit "
                            f"of {max_groups}", hint="use a coarser interval or a shorter time range")
    node = _replace_column(key, column, _clamp(column_node, lo, hi))
    return BucketDomain(node=node, values=tuple(r[0] for r in rows), type=str(rows[0][1]) if rows else "DateTime")


def _first_value(limit: Limit, lower: bool, ch_type: str) -> exp.Expr:
    """The first (``lower``) or last value of ``ch_type`` the limit lets through, exactly: the limit
    cast to the type rounds down, so ``>= 10.5 s`` on a DateTime starts at 11 s and ``< 12 s`` ends at
    11 s (an inexact limit would only add an empty bucket at the edge)."""
    value = limit.value
    floor = _cast(value, ch_type)
    _, unit, resolution = _units(ch_type)
    step = _shifted(ch_type, floor, exp.Literal.number((1 if lower else -1) * (resolution // unit)))
    below = exp.LT(this=floor.copy(), expression=value.copy())  # the cast rounded a value between two
    if lower:
        return step if limit.strict else call("if", below, step.copy(), floor.copy())
    return call("if", below, floor.copy(), step) if limit.strict else floor


def _replace_column(key: exp.Expr, column: exp.Column, by: exp.Expr) -> exp.Expr:
    """A copy of the chain ``key`` with its one column replaced by ``by`` (the bare column, a chain of
    no functions, is replaced whole)."""
    tree = key.copy()
    if isinstance(tree, exp.Column):
        return by.copy()
    next(c for c in tree.find_all(exp.Column) if c == column).replace(by)
    return tree


def _precision(ch_type: str) -> int:
    """The digits after the second of a ``DateTime64(p[, tz])`` type."""
    return int(ch_type[len("DateTime64("):].split(",")[0].rstrip(")") or 3)


def _origin(ch_type: str) -> exp.Expr:
    """1970-01-01 00:00:00 UTC (a date type: 1970-01-01) as a value of ``ch_type``, where the grid's
    count of units (:func:`_units`) is 0."""
    if ch_type.startswith("DateTime64"):
        return _cast(call("fromUnixTimestamp64Nano", exp.Literal.number(0)), ch_type)
    if ch_type.startswith("DateTime"):
        return _cast(call("toDateTime", exp.Literal.number(0)), ch_type)
    return _cast(exp.Literal.string("1970-01-01"), ch_type)


def _shifted(ch_type: str, start: exp.Expr, units: exp.Expr) -> exp.Expr:
    """``start`` moved by ``units`` of the grid's count (:func:`_units`: nanoseconds for a DateTime64,
    seconds for a DateTime, days for a date), as a value of ``ch_type``."""
    if ch_type.startswith("DateTime64"):
        return _cast(call("addNanoseconds", start, units), ch_type)
    if ch_type.startswith("DateTime"):
        return call("addSeconds", start, units)
    return call("addDays", start, units)


__all__ = ["BUCKET_RULES", "BucketChain", "BucketDomain", "BucketRule", "GRID_LIMIT", "Limit", "TimeRange", "Width",
           "bucket_column", "bucket_domain", "floored_column", "grid_width", "where_ranges"]
