"""Hypothesis strategies for the soundness fuzzer: adversarial tables and queries from dpch's grammar.

Every generated expression carries its SQL and, where the test can compute it independently, a
Python evaluator of its *intended* value on one row (``None`` = SQL NULL). The evaluators follow
ClickHouse 26 semantics as the analyst would get them asking ClickHouse directly, with each column
read as a value first clamped to its declared bounds (dpch's documented rule):

- NULL propagates through arithmetic and functions; aggregates skip NULL values; ``count(e)``
  counts non-NULL values; ``least``/``greatest`` skip NULL arguments (ClickHouse ≥ 24.12);
- conditions are three-valued; a row is kept only when the condition is true;
- ``round`` rounds half to even on floats (as Python's ``round``);
- integer arithmetic is exact (a sum that wraps around in ClickHouse is a wrong answer).

An evaluator is ``None`` when the expression is in the grammar only to probe admission and
execution errors (row-computed regex and LIKE patterns, Decimal arithmetic in WHERE): such
queries are checked for (a) no execution error and (b) sensitivity, not for (c) values.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

from dpch.sql import functions
from dpch.sql.expression_types import Family
from tests.soundness.boundaries import LITERALS, slots

CAP = 3
GROUPS_PER_UNIT = 3
KEYS = ("a", "b", "c")

#: bounded numeric columns of the private table: name → (ClickHouse type, declared bounds)
BOUNDED: dict[str, tuple[str, tuple[float, float]]] = {
    "i8": ("Int8", (-100, 50)),  # |lo| > |hi|: the magnitude is |lo|
    "u64": ("UInt64", (0, 10**12)),
    "i64": ("Int64", (-(10**6), 10**6)),
    "f": ("Float64", (-5, 10)),
    "y": ("Nullable(Float64)", (2, 4)),
    "dec": ("Decimal(38, 6)", (-1000, 1000)),
    "n": ("Nullable(Int32)", (0, 100)),
}
INTEGER_COLUMNS = {"i8", "u64", "i64", "n"}
NAMES = ["uid", "g", *BOUNDED, "s", "dt", "t64"]
COLUMNS_SQL = (
    "uid Nullable(Int64), g String COMMENT 'dp: public, values=[\"a\", \"b\", \"c\"]', "
    + ", ".join(f"{c} {t} COMMENT 'dp: bounds=[{lo}, {hi}]'" for c, (t, (lo, hi)) in BOUNDED.items())
    + ", s String, dt Date COMMENT 'dp: bounds=[\"1970-01-01\", \"2149-06-06\"]'"
    # a DateTime64 in another zone than the server's, with date bounds (time buckets), whose extremes
    # include ticks far outside ClickHouse's documented range (issue 24)
    + ", t64 DateTime64(3, 'Asia/Kolkata') COMMENT 'dp: bounds=[\"2000-01-01\", \"2030-12-31\"]'"
)
TABLE_COMMENT = f"dp: privacy_unit=uid, max_rows_per_unit={CAP}, max_groups_per_unit={GROUPS_PER_UNIT}"

#: the public table joined on g (one row per key, so a correct lookup join keeps every private row)
PUBLIC_COLUMNS_SQL = "pg String, w Float64 COMMENT 'dp: bounds=[0, 10]'"
PUBLIC_NAMES = ["pg", "w"]
PUBLIC_ROWS = [("a", 1.5), ("b", 7.0), ("c", 10.0)]
PUBLIC_W = dict(PUBLIC_ROWS)

Row = dict[str, Any]
Eval = Callable[[Row], Any] | None


@dataclass(frozen=True)
class E:
    """A generated SQL fragment and its independent evaluator (None: no reference)."""

    sql: str
    ev: Eval
    join: bool = False  # reads the public table's column

    def __str__(self) -> str:
        return self.sql


def _both(*parts: E) -> bool:
    return all(p.ev is not None for p in parts)


# -- values in the table ----------------------------------------------------------------------

INT_RANGES = {"i8": (-(2**7), 2**7 - 1), "u64": (0, 2**64 - 1), "i64": (-(2**63), 2**63 - 1),
              "n": (-(2**31), 2**31 - 1)}
HUGE_DECIMAL = Decimal("99999999999999999999999999999999.999999")  # Decimal(38, 6) max
STRINGS = ["", "a", "ab", "(", "[", "\\", "a\\b", "%", "_", "a%b", "x_y", ".*", "?", "$", "^", "'", "é", "abc"]


DATES = st.sampled_from([date(1970, 1, 1), date(2149, 6, 6), date(2020, 1, 5), date(2020, 2, 29)]) \
    | st.dates(date(1970, 1, 1), date(2149, 6, 6))
#: DateTime64 values: ordinary ones, and at their worst the edges of the type and far beyond them
TIMES = st.datetimes(datetime(2000, 1, 1), datetime(2030, 12, 31))
EXTREME_TIMES = TIMES | st.sampled_from([datetime(1900, 1, 1), datetime(2262, 4, 11, 23, 47, 16),
                                         datetime(2299, 12, 31, 23, 59, 59), datetime(9999, 12, 31, 23, 59, 59),
                                         datetime(1, 1, 2), datetime(1970, 1, 1)])


def _int(col: str, extreme: bool) -> st.SearchStrategy:
    lo, hi = INT_RANGES[col]
    blo, bhi = BOUNDED[col][1]
    inside = st.integers(int(max(lo, blo - 5)), int(min(hi, bhi + 5)))
    return st.sampled_from([lo, hi, 0, -1, 1]).filter(lambda v: lo <= v <= hi) | inside if extreme else inside


def _float(extreme: bool) -> st.SearchStrategy:
    tame = st.sampled_from([0.0, -0.0, 1e-300, -3.25, 2.5, 9.75]) | st.floats(-20, 20, allow_nan=False)
    if not extreme:
        return tame | st.sampled_from([1e300, -1e300])
    return tame | st.sampled_from([math.nan, math.inf, -math.inf, 1.7976931348623157e308, -0.0])


def _decimal(extreme: bool) -> st.SearchStrategy:
    tame = st.decimals(-2000, 2000, places=6, allow_nan=False, allow_infinity=False)
    big = st.sampled_from([HUGE_DECIMAL, -HUGE_DECIMAL, Decimal("0.000001"), Decimal("-0")])
    return tame | big


def row_values(extreme: bool, key_strategy: st.SearchStrategy | None = None) -> st.SearchStrategy:
    """One row without its unit: (g, i8, u64, i64, f, y, dec, n, s, dt, t64)."""
    keys = key_strategy if key_strategy is not None else st.sampled_from([*KEYS, "z", ""])

    def nullable(values: st.SearchStrategy) -> st.SearchStrategy:
        return st.none() | values

    return st.tuples(
        keys,
        _int("i8", extreme), _int("u64", extreme), _int("i64", extreme),
        _float(extreme), nullable(_float(extreme)), _decimal(extreme),
        nullable(_int("n", extreme)), st.sampled_from(STRINGS), DATES, EXTREME_TIMES if extreme else TIMES,
    )


@st.composite
def tables(draw, units: int = 12) -> list[tuple]:
    """A base table: ``units`` units of 1..CAP rows (so the cap keeps every row and the reference
    does not depend on which rows dpch keeps), finite floats, NULLs in nullable value columns."""
    rows = []
    for uid in range(1, units + 1):
        for values in draw(st.lists(row_values(False), min_size=1, max_size=CAP)):
            rows.append((uid, *values))
    return rows


@st.composite
def extreme_unit(draw, uid: int | None) -> list[tuple]:
    """A unit at its worst: more rows than the cap, rows in every group, extreme values."""
    every_group = [draw(row_values(True, st.just(k))) for k in (*KEYS, "z")]
    more = draw(st.lists(row_values(True), min_size=0, max_size=2))
    return [(uid, *r) for r in every_group + more]


# -- expressions ------------------------------------------------------------------------------


def clamp(value: Any, lo: float, hi: float) -> Any:
    if value is None:
        return None
    if isinstance(value, Decimal):
        value = float(value)
    return min(max(value, lo), hi)


def column_value(name: str) -> E:
    lo, hi = BOUNDED[name][1]
    return E(name, lambda r, n=name, lo=lo, hi=hi: clamp(r[n], lo, hi))


def _nullary(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Lifts ``fn`` over NULL: NULL if any argument is NULL."""
    return lambda *a: None if any(x is None for x in a) else fn(*a)


_add = _nullary(lambda a, b: a + b)
_sub = _nullary(lambda a, b: a - b)
_mul = _nullary(lambda a, b: a * b)


def _skip_null(fn):
    def apply(*a):
        present = [x for x in a if x is not None]
        return fn(present) if present else None
    return apply


value_leaves = st.sampled_from(
    [column_value(c) for c in BOUNDED]
    + [E("2", lambda r: 2), E("0.5", lambda r: 0.5), E("-3", lambda r: -3)]
)


def arith(a: E, op: str, b: E) -> E:
    fn = {"+": _add, "-": _sub, "*": _mul}[op]
    ev = (lambda r: fn(a.ev(r), b.ev(r))) if _both(a, b) else None
    return E(f"({a} {op} {b})", ev, a.join or b.join)


def _if(c: E, a: E, b: E) -> E:
    ev = (lambda r: a.ev(r) if c.ev(r) else b.ev(r)) if _both(c, a, b) else None
    return E(f"if({c}, {a}, {b})", ev, a.join or b.join or c.join)


def _case(c: E, a: E, b: E) -> E:
    ev = (lambda r: a.ev(r) if c.ev(r) else b.ev(r)) if _both(c, a, b) else None
    return E(f"CASE WHEN {c} THEN {a} ELSE {b} END", ev, a.join or b.join or c.join)


def _extreme(name: str, a: E, k: float) -> E:
    pick = min if name == "least" else max
    return E(f"{name}({a}, {k:g})", (lambda r: _skip_null(pick)(a.ev(r), k)) if a.ev else None, a.join)


def _round_half_even(v: float) -> float:
    return float(round(v)) if isinstance(v, float) else v


def wrap(template: str, fn: Callable[[Any], Any], skip_null: Callable[[Any], Any] | None = None):
    """``template`` (with ``{}`` for the argument) applied to an expression; NULL in, NULL out —
    except ``skip_null``: an inner least/greatest that ClickHouse evaluates skipping NULL."""
    def build(a: E) -> E:
        def ev(r):
            v = a.ev(r)
            if skip_null is not None:
                v = 5 if v is None else skip_null(v)
            return None if v is None else fn(v)
        return E(template.format(a), ev if a.ev else None, a.join)
    return build


#: one-argument wrappers inside aggregates: SQL template and its value (NULL propagates)
WRAPPERS = [
    ("abs({})", abs),
    ("round({})", _round_half_even),
    ("floor({})", lambda v: math.floor(v) if isinstance(v, float) else v),
    ("ceil({})", lambda v: math.ceil(v) if isinstance(v, float) else v),
    ("sign({})", lambda v: (v > 0) - (v < 0)),
    ("sqrt(abs({}))", lambda v: math.sqrt(abs(v))),
    ("log(abs({}) + 1)", lambda v: math.log(abs(v) + 1)),
    # log2/log10 are refused inside aggregates today ("function log() is not supported"): they stay
    # in conditions, where they are accepted, and out of here so the budget goes to accepted queries
    ("pow({}, 2)", lambda v: v * v),
    ("({} / 4)", lambda v: v / 4),
]


def _multi_if(c: E, a: E, b: E) -> E:
    ev = (lambda r: a.ev(r) if c.ev(r) else b.ev(r)) if _both(c, a, b) else None
    return E(f"multiIf({c}, {a}, {b})", ev, a.join or b.join or c.join)


def value_expressions(conditions: st.SearchStrategy, join: bool = False) -> st.SearchStrategy:
    leaves = value_leaves
    if join:
        leaves = leaves | st.just(E("w", lambda r: clamp(r["w"], 0, 10), join=True))

    def extend(children):
        return st.one_of(
            st.builds(arith, children, st.sampled_from(["+", "-", "*"]), children),
            *(children.map(wrap(template, fn)) for template, fn in WRAPPERS),
            st.builds(_extreme, st.sampled_from(["least", "greatest"]), children, st.sampled_from([0, 7, -2.5])),
            children.map(wrap("exp(least({}, 5))", math.exp, skip_null=lambda v: min(v, 5))),
            children.map(lambda a: E(f"ifNull({a}, 1)", (lambda r: 1 if a.ev(r) is None else a.ev(r))
                                     if a.ev else None, a.join)),
            st.builds(_if, conditions, children, children),
            st.builds(_case, conditions, children, children),
            st.builds(_multi_if, conditions, children, children),
        )

    return st.recursive(leaves, extend, max_leaves=4)


# -- conditions -------------------------------------------------------------------------------


def _cmp(op: str) -> Callable[[Any, Any], Any]:
    import operator

    fn = {"<": operator.lt, ">": operator.gt, "=": operator.eq, "!=": operator.ne,
          "<=": operator.le, ">=": operator.ge}[op]

    def compare(a, b):
        if a is None or b is None:
            return None
        if isinstance(a, Decimal):
            a = float(a)
        return fn(a, b)
    return compare


def like_regex(pattern: str) -> re.Pattern[str]:
    """A SQL LIKE pattern as a Python regex (``%``: any string, ``_``: one character, ``\\`` escapes)."""
    out, i = [], 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\" and i + 1 < len(pattern):
            out.append(re.escape(pattern[i + 1]))
            i += 2
            continue
        out.append(".*" if ch == "%" else "." if ch == "_" else re.escape(ch))
        i += 1
    return re.compile("".join(out), re.DOTALL)


def _raw(name: str) -> Callable[[Row], Any]:
    return lambda r: r[name]


def _numeric_condition(col: str, op: str, k: float) -> E:
    return E(f"{col} {op} {k:g}", lambda r: _cmp(op)(r[col], k))


def _like(pattern: str, negate: bool) -> E:
    rx = like_regex(pattern)
    sql_pattern = pattern.replace("\\", "\\\\").replace("'", "\\'")

    def ev(r):
        hit = rx.fullmatch(r["s"]) is not None
        return not hit if negate else hit
    return E(f"s {'NOT ' if negate else ''}LIKE '{sql_pattern}'", ev)


def _match(regex: str) -> E:
    rx = re.compile(regex)
    return E(f"match(s, '{regex}')", lambda r: rx.search(r["s"]) is not None)


LIKE_PATTERNS = ["%(%", "a%", "%b", "_", "", "%", "a_c", "%.*%", "[%", "%\\%%", "%\\_%", "%\\\\%"]
REGEXES = ["^a", "b$", "[(]", "a.c", "^$", "[.]", "[\\[]", "^[^a]"]

simple_conditions = st.one_of(
    st.builds(_numeric_condition, st.sampled_from(list(BOUNDED)), st.sampled_from(["<", ">", "=", "!=", "<=", ">="]),
              st.sampled_from([0, 1, -1, 2.5, 50, 10**12, -(2**63)])),
    st.sampled_from([
        E("y IS NULL", lambda r: r["y"] is None),
        E("n IS NOT NULL", lambda r: r["n"] is not None),
        E("isNull(n)", lambda r: r["n"] is None),
        E("g IN ('a', 'b')", lambda r: r["g"] in ("a", "b")),
        E("g = ''", lambda r: r["g"] == ""),
        # constant lists on a key narrow its domain (dpch.sql.where_lists): a private key's list is its domain
        E("s IN ('a', 'ab', '')", lambda r: r["s"] in ("a", "ab", "")),
        E("s = 'b'", lambda r: r["s"] == "b"),
        E("g = 'c'", lambda r: r["g"] == "c"),
        E("f BETWEEN -1 AND 1", lambda r: -1 <= r["f"] <= 1),
        E("abs(f) < 3", lambda r: abs(r["f"]) < 3),
        E("startsWith(s, 'a')", lambda r: r["s"].startswith("a")),
        E("endsWith(s, 'b')", lambda r: r["s"].endswith("b")),
        E("empty(s)", lambda r: r["s"] == ""),
        E("notEmpty(s)", lambda r: r["s"] != ""),
        E("length(s) > 1", lambda r: len(r["s"].encode()) > 1),
        E("position(s, '(') > 0", lambda r: "(" in r["s"]),
        E("lower(s) = 'ab'", lambda r: r["s"].lower() == "ab"),
        E("coalesce(n, 0) > 10", lambda r: (r["n"] if r["n"] is not None else 0) > 10),
        E("least(i8, 0) < -5", lambda r: min(r["i8"], 0) < -5),
        E("greatest(i8, 0) > 5", lambda r: max(r["i8"], 0) > 5),
        E("round(f) = 2", lambda r: round(r["f"]) == 2),
        E("sqrt(abs(f)) > 1", lambda r: math.sqrt(abs(r["f"])) > 1),
        E("toInt64OrNull(s) IS NULL", lambda r: not re.fullmatch(r"[+-]?\d+", r["s"])),
        E("concat(s, 'x') = 'ax'", lambda r: r["s"] + "x" == "ax"),
        E("ceil(f) = 1", lambda r: math.ceil(r["f"]) == 1),
        E("floor(f) = -1", lambda r: math.floor(r["f"]) == -1),
        E("exp(least(f, 5)) > 2", lambda r: math.exp(min(r["f"], 5)) > 2),
        E("has(['a', '(', ''], s)", lambda r: r["s"] in ("a", "(", "")),
        E("ifNull(y, 0) > 3", lambda r: (r["y"] if r["y"] is not None else 0) > 3),
        E("ln(abs(f) + 1) > 1", lambda r: math.log(abs(r["f"]) + 1) > 1),
        E("log2(abs(f) + 1) > 1", lambda r: math.log2(abs(r["f"]) + 1) > 1),
        E("log10(abs(f) + 1) > 0.5", lambda r: math.log10(abs(r["f"]) + 1) > 0.5),
        E("multiIf(f > 0, 1, f < 0, -1, 0) = 1", lambda r: r["f"] > 0),
        E("positionCaseInsensitive(s, 'A') > 0", lambda r: "a" in r["s"].lower()),
        E("power(f, 2) > 4", lambda r: r["f"] * r["f"] > 4),  # Float64: 1e300² is inf, not an error
        E("sign(i64) = -1", lambda r: r["i64"] < 0),
        E("substring(s, 1, 1) = 'a'", lambda r: r["s"].encode()[:1] == b"a"),
        E("toFloat64OrNull(s) IS NOT NULL", None),
        E("toString(i8) = '5'", lambda r: str(r["i8"]) == "5"),
        E("trim(s) = ''", lambda r: r["s"].strip(" ") == ""),
        E("upper(s) = 'AB'", lambda r: r["s"].upper() == "AB"),
        E("lengthUTF8(s) > 1", lambda r: len(r["s"]) > 1),
        E("toYear(dt) = 2020", lambda r: r["dt"].year == 2020),
        E("year(dt) > 2100", lambda r: r["dt"].year > 2100),
        E("toMonth(dt) > 6", lambda r: r["dt"].month > 6),
        E("month(dt) = 2", lambda r: r["dt"].month == 2),
        E("toDayOfMonth(dt) = 29", lambda r: r["dt"].day == 29),
        E("day(dt) < 3", lambda r: r["dt"].day < 3),
        E("toDayOfWeek(dt) = 7", lambda r: r["dt"].isoweekday() == 7),
        E("toStartOfWeek(dt) = '2020-01-05'", None),
        E("dateTrunc('month', dt) = '2020-02-01'", None),
        E("toDateOrNull(s) IS NULL", None),
        E("toHour(dt) = 0", None),
        # time constants as BI tools write them (issue 15): folded to exact values before the charge
        E("dt >= toDate('2020-01-05')", lambda r: r["dt"] >= date(2020, 1, 5)),
        E("dt < toDateTime(1580515200)", lambda r: r["dt"] < date(2020, 2, 1)),
        E("dt <= toDateTime('2100-01-01 00:00:00')", lambda r: r["dt"] <= date(2100, 1, 1)),
        E("dt > fromUnixTimestamp64Milli(1582934400000)", lambda r: r["dt"] > date(2020, 2, 29)),
        E("dt BETWEEN parseDateTimeBestEffort('2020-01-01') AND toDate32('2020-12-31')",
          lambda r: date(2020, 1, 1) <= r["dt"] <= date(2020, 12, 31)),
        E("dt <= today() - INTERVAL 1 DAY", None),
        E("dt > now() - INTERVAL 3650 DAY", None),
        E("dt >= addDays(toDate('2020-01-01'), 30)", lambda r: r["dt"] >= date(2020, 1, 31)),
        E("dt >= yesterday()", None),
        E("dt < toStartOfMonth(toDate('2020-03-15'))", lambda r: r["dt"] < date(2020, 3, 1)),
        E("dt < toDateTime64('2020-03-01 00:00:00.000', 3)", lambda r: r["dt"] < date(2020, 3, 1)),
        E("dt > fromUnixTimestamp64Nano(1582934400000000000)", lambda r: r["dt"] > date(2020, 2, 29)),
        E("isNotNull(y)", lambda r: r["y"] is not None),
        E("substr(s, 1, 1) = 'a'", lambda r: r["s"].encode()[:1] == b"a"),
        E("xor(i8 > 0, f > 0)", lambda r: (r["i8"] > 0) != (r["f"] > 0)),
        E("t64 >= toDateTime64('2020-01-01 00:00:00', 9)", None),  # a scale-9 constant beside scale 3
        E("t64 + INTERVAL 1 HOUR > t64", None),
        E("toHour(t64, 'Asia/Kolkata') = 5", None),
    ]),
    st.builds(_like, st.sampled_from(LIKE_PATTERNS), st.booleans()),
    st.builds(_match, st.sampled_from(REGEXES)),
)

#: conditions whose failure could depend on a row's value (the error-oracle class of issue 12):
#: in the grammar to check that dpch refuses them or that they never raise; no reference value
oracle_conditions = st.sampled_from([
    E("match(s, s)", None),
    E("match('x', if(i8 > 0, '(', 'x'))", None),
    E("s LIKE concat(s, '%')", None),
    E("s LIKE s", None),
    E("dec / i8 > 1", None),
    E("dec / (i8 - 5) > 1", None),  # the probe's default row (i8 = 0) does not divide by zero
    E("dec * dec > 0", None),
    E("dec + 1 > 0", None),
    E("u64 * 1000000000 > 5", None),
    E("i64 * i64 > 0", None),
    E("dt >= toDate('not a date')", None),  # a constant that does not evaluate: refused, whatever the data
    E("dt >= toDateTime(s)", None),  # a time function of a row's text: refused
])


#: date and time constants as BI tools and analysts write them: folded before the charge (every registry
#: function that may appear only as a constant is here, so each is generated)
time_constants = st.sampled_from([E(f"dt >= {c}", None) for c in (
    "addHours(toDateTime('2020-01-01 00:00:00'), 5)", "addMilliseconds(toDateTime64('2020-01-01 00:00:00', 3), 5)",
    "addMinutes(now(), -5)", "addMonths(today(), -1)", "addQuarters(toDate('2020-01-01'), 1)",
    "addSeconds(toDateTime(1580515200), 7)", "addWeeks(toDate('2020-01-01'), 2)", "addYears(yesterday(), -3)",
    "subtractDays(today(), 30)", "subtractHours(now(), 2)", "subtractMilliseconds(now64(), 5)",
    "subtractMinutes(now(), 9)", "subtractMonths(today(), 2)", "subtractQuarters(today(), 1)",
    "subtractSeconds(now(), 1)", "subtractWeeks(today(), 1)", "subtractYears(today(), 100)",
    "fromUnixTimestamp(1580515200)", "fromUnixTimestamp64Micro(1580515200000000)",
    "fromUnixTimestamp64Second(1580515200)", "parseDateTime('2020-02-01', '%Y-%m-%d')",
    "parseDateTime64BestEffort('2020-02-01 00:00:00.5')", "parseDateTime64BestEffortUS('02/01/2020')",
    "parseDateTimeBestEffortUS('02/01/2020')", "parseDateTimeInJodaSyntax('2020-02-01', 'yyyy-MM-dd')",
    "toLastDayOfMonth(toDate('2020-02-10'))", "toStartOfDay(toDateTime('2020-02-10 12:00:00'), 'Asia/Tokyo')",
    "toStartOfFifteenMinutes(now())", "toStartOfFiveMinutes(now())", "toStartOfTenMinutes(now())",
    "toStartOfHour(now())", "toStartOfMinute(now())", "toStartOfSecond(now64())", "toStartOfQuarter(today())",
    "toStartOfYear(today())", "toMonday(today())", "toStartOfInterval(now(), INTERVAL 1 DAY)",
    "toDateTime('2020-01-01 00:00:00', 'Asia/Kolkata')", "toDate('not a date')",
)])

# -- every registry function, with a value the row chose at the extremes of a type in one argument ----

#: the row functions of the registry the boundary fuzzer tries (tests/soundness/boundaries.py)
ROW_ENTRIES = [e for e in functions.ENTRIES if e.row and e.template and e.args]
#: columns of the private table by family: the other arguments of a call read the row too
NORMALS = {Family.NUMBER: ("i8", "i64", "u64", "f", "n"), Family.STRING: ("s", "g"), Family.DATE: ("dt", "t64")}
ZONES = ("'UTC'", "'Asia/Kolkata'", "'America/New_York'", "'Asia/Kathmandu'", "'Australia/Lord_Howe'",
         "'Bad/Zone'")
SHIFT = ("INTERVAL 1 DAY", "INTERVAL 9000000000 SECOND", "INTERVAL -3 MONTH", "INTERVAL 5 MILLISECOND")


def _families(arg: Any) -> list[Family]:
    return [f for f in (Family.NUMBER, Family.STRING, Family.DATE) if f & arg.family]


@st.composite
def registry_conditions(draw) -> E:
    """``toString(<call>) < 'm'`` for a registry function whose arguments read the row, one of them
    ``if(<row condition>, <extreme literal>, <normal>)`` (issue 24): any failure after the charge is a
    counterexample. No reference value: checks (a) no error and (b) sensitivity."""
    entry = draw(st.sampled_from(ROW_ENTRIES))
    fuzzed = [i for i in slots(entry) if entry.args[i].accepts is not functions.Accepts.CONSTANT]
    slot = draw(st.sampled_from(fuzzed)) if fuzzed else -1
    # comparisons and arithmetic: the operands of one family (else the call is refused and tests nothing)
    shared = draw(st.sampled_from([Family.NUMBER, Family.STRING, Family.DATE]))
    args = []
    for i, arg in enumerate(entry.args):
        if arg.accepts is functions.Accepts.CONSTANT:
            args.append(draw(st.sampled_from(ZONES)) if arg.kind == functions.ZONE else arg.sample)
            continue
        family = shared if (entry.same_family or entry.guard is not None) else \
            draw(st.sampled_from(_families(arg) or [shared]))
        if entry.guard is not None and family is Family.DATE and i != slot and draw(st.booleans()):
            normal = draw(st.sampled_from(SHIFT))
        else:
            normal = draw(st.sampled_from((*NORMALS[family], arg.sample)))
        if i == slot:
            extreme = draw(st.sampled_from(LITERALS[draw(st.sampled_from(list(LITERALS)))]))
            extreme = extreme if len(extreme) < 200 else repr("x" * 300)  # a long string, kept short here
            normal = f"if({draw(simple_conditions).sql}, {extreme}, {normal})"
        args.append(normal)
    call = entry.template.format(*args).replace("{", "{{").replace("}", "}}")  # the query is .format()-ed later
    return E(f"toString({call}) < 'm'", None)


def covered_names() -> set[str]:
    """Lower-case names of the functions the grammar generates: written here, or generated from the
    registry (:func:`registry_conditions`)."""
    written = set(re.findall(r"([A-Za-z_][A-Za-z0-9_]*)\(", Path(__file__).read_text(encoding="utf-8")))
    generated = {e.name for e in ROW_ENTRIES}
    return {n.lower() for n in written | generated}


def _and(a: E, b: E) -> E:
    def ev(r):
        x, y = a.ev(r), b.ev(r)
        if x is False or y is False:
            return False
        return None if x is None or y is None else True
    return E(f"({a} AND {b})", ev if _both(a, b) else None)


def _or(a: E, b: E) -> E:
    def ev(r):
        x, y = a.ev(r), b.ev(r)
        if x is True or y is True:
            return True
        return None if x is None or y is None else False
    return E(f"({a} OR {b})", ev if _both(a, b) else None)


def _not(a: E) -> E:
    return E(f"NOT ({a})", (lambda r: None if a.ev(r) is None else not a.ev(r)) if a.ev else None)


def conditions(oracles: bool = True) -> st.SearchStrategy:
    base = simple_conditions | oracle_conditions | time_constants | registry_conditions() if oracles \
        else simple_conditions
    return st.recursive(base, lambda c: st.one_of(st.builds(_and, c, c), st.builds(_or, c, c), c.map(_not)),
                        max_leaves=3)


CONDITIONS = conditions()
SIMPLE_CONDITIONS = conditions(oracles=False)


# -- aggregates and queries -------------------------------------------------------------------


@dataclass(frozen=True)
class Agg:
    """An aggregate call: its SQL, kind, argument and condition (for the reference)."""

    sql: str
    kind: str  # count, count_value, distinct_unit, sum, avg, var, quantile
    arg: E | None = None
    cond: E | None = None

    @property
    def ev_ok(self) -> bool:
        return all(p is None or p.ev is not None for p in (self.arg, self.cond))


def aggregates(join: bool) -> st.SearchStrategy:
    conds = CONDITIONS
    values = value_expressions(SIMPLE_CONDITIONS, join)
    return st.one_of(
        st.just(Agg("count(*)", "count")),
        st.sampled_from([Agg("count(y)", "count_value", E("y", _raw("y"))),
                         Agg("count(n)", "count_value", E("n", _raw("n"))),
                         Agg("count(DISTINCT uid)", "distinct_unit")]),
        conds.map(lambda c: Agg(f"countIf({c})", "count", cond=c)),
        values.map(lambda e: Agg(f"sum({e})", "sum", e)),
        st.builds(lambda e, c: Agg(f"sumIf({e}, {c})", "sum", e, c), values, conds),
        values.map(lambda e: Agg(f"avg({e})", "avg", e)),
        values.map(lambda e: Agg(f"varPop({e})", "var", e)),
        st.builds(lambda p, e: Agg(f"quantile({p})({e})", "quantile", e), st.sampled_from([0.1, 0.5, 0.9]), values),
        values.map(lambda e: Agg(f"median({e})", "quantile", e)),
    )


@dataclass(frozen=True)
class Query:
    """A generated query over the private table ``{t}`` (and the public table ``{p}``)."""

    sql: str
    aggs: tuple[Agg, ...]
    where: E | None
    group: str  # "", "g", "s", "intDiv(n, 25)"
    join: bool

    @property
    def reference_ok(self) -> bool:
        """Whether the test can compute every exact aggregate independently."""
        return (bool(self.aggs) and self.group in ("", "g", "s") and all(a.ev_ok for a in self.aggs)
                and (self.where is None or self.where.ev is not None))


AGGREGATES = {False: aggregates(False), True: aggregates(True)}


#: time buckets with zones and of the DateTime64 column (issue 24: a bucket's zone is honoured)
TIME_KEYS = ("toStartOfDay(t64, 'Asia/Tokyo')", "toStartOfInterval(t64, INTERVAL 1 MONTH, 'Asia/Kolkata')",
             "toStartOfYear(t64)", "toYYYYMM(dt)", "toYYYYMMDD(toDate(t64))", "toStartOfISOYear(dt)",
             "toLastDayOfMonth(dt)", "intDiv(toUInt32(toDateTime(dt)), 2592000)", "toUnixTimestamp(toStartOfYear(t64))",
             "toStartOfQuarter(t64, 'Asia/Kathmandu')", "toStartOfDay(t64, toString(uid))",
             "toStartOfDay(t64, 'Bad/Zone')")


@st.composite
def queries(draw) -> Query:
    join = draw(st.booleans()) and draw(st.booleans())  # a quarter of the queries join
    group = draw(st.sampled_from(["", "", "g", "g", "s", "intDiv(n, 25)", "toStartOfMonth(dt)",
                                  "toStartOfInterval(dt, INTERVAL 30 day)", "toMonday(toDateTime(dt))",
                                  *TIME_KEYS]))
    # one grouped query in six lists keys only (a key release: GROUP BY or DISTINCT without aggregate)
    keys_only = bool(group) and draw(st.integers(0, 5)) == 0
    aggs = () if keys_only else tuple(draw(st.lists(AGGREGATES[join], min_size=1, max_size=3)))
    where = draw(st.none() | CONDITIONS)
    form = draw(st.sampled_from(["plain", "plain", "subquery", "cte"]))
    having = draw(st.sampled_from(["", "", " HAVING count(*) > 2"] + ([] if keys_only else [" HAVING a0 > 0"])))
    source = "{t} JOIN {p} ON g = pg" if join else "{t}"
    if form == "subquery":
        source = f"(SELECT * FROM {source})"
    select = ", ".join(([group] if group else []) + [f"{a.sql} AS a{i}" for i, a in enumerate(aggs)])
    distinct = keys_only and draw(st.booleans())
    sql = f"SELECT {'DISTINCT ' if distinct else ''}{select} FROM {source}"
    if form == "cte":
        sql = f"WITH src AS (SELECT * FROM {source}) SELECT {select} FROM src"
    if where is not None:
        sql += f" WHERE {where}"
    if group and not distinct:
        sql += f" GROUP BY {group}" + having
    settings = " SETTINGS dp_delta = 1e-6"
    if group and not keys_only and draw(st.integers(0, 5)) == 0:
        # one grouped query in six under the per-group bound (issue 27): c = CAP rows per group never cuts
        # a base unit (≤ CAP rows), so the reference still holds; G = GROUPS_PER_UNIT groups per unit
        settings += f", dp_bound = 'groups', dp_max_rows_per_group = {CAP}"
    return Query(sql + settings, aggs, where, group, join)
