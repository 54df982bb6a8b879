"""The date-arithmetic guard changes no value it need not change (issue 31: the guard's type ranges and
clamp ends survived mutation — a range one second narrower, or a DateTime range starting at 1 instead of
0, clamps rows whose result was fine).

``guards.date_arithmetic`` clamps the date operand of ``x ± INTERVAL`` so that a DateTime64 result stays
inside ``DATETIME64_RANGE`` (docs/privacy-model.md, "Rows cannot fail"). The row rule allows any value
for a row whose unguarded result would overflow, never an error; for every other row the guarded
expression must give exactly ClickHouse's own result. Checked on chdb for each date type at its ends,
one step inside them and in the middle, with intervals of both signs and several units: where the
unguarded result is inside the range the two agree to the last digit, and nothing raises.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
import sqlglot

from dpch.errors import QueryRejected
from dpch.sql import guards
from dpch.sql.nodes import pinned_settings

LO, HI = guards.DATETIME64_RANGE

#: (type, result type of ± a sub-second interval, values as ClickHouse literals)
CASES = [
    ("DateTime('UTC')", "DateTime64(3, 'UTC')",
     ["'1970-01-01 00:00:00'", "'1970-01-01 00:00:01'", "'2026-06-01 12:00:00'", "'2106-02-07 06:28:14'",
      "'2106-02-07 06:28:15'"]),
    ("DateTime64(3, 'UTC')", "DateTime64(3, 'UTC')",
     ["'1900-01-01 00:00:00'", "'1900-01-01 00:00:00.001'", "'2026-06-01 12:00:00'", "'2262-04-11 23:47:15.999'",
      "'2262-04-11 23:47:16'"]),
    ("DateTime64(9, 'UTC')", "DateTime64(9, 'UTC')",
     ["'1900-01-01 00:00:00'", "'1900-01-01 00:00:00.000000001'", "'2026-06-01 12:00:00'",
      "'2262-04-11 23:47:15.999999999'", "'2262-04-11 23:47:16'"]),
    # the lower end in Kolkata's time: 1900-01-01 00:00 UTC, when Kolkata was +05:21:10 (ClickHouse's tzdata)
    ("Nullable(DateTime64(3, 'Asia/Kolkata'))", "Nullable(DateTime64(3, 'Asia/Kolkata'))",
     ["'1900-01-01 05:21:10'", "'1900-01-01 05:21:10.001'", "'2026-06-01 12:00:00'", "NULL"]),
]
INTERVALS = ["INTERVAL 1 MILLISECOND", "INTERVAL 1 SECOND", "INTERVAL 1 DAY", "INTERVAL 1 YEAR",
             "INTERVAL 100 YEAR"]
#: a Date32 ± seconds, minutes or hours is a DateTime64(3) (± days or more stays a Date32, and a Date ±
#: milliseconds does not type): the clamp's ends are then the Date32's own range (guards.type_range)
DATE32 = ("Date32", "DateTime64(3)", ["'1900-01-01'", "'1900-01-02'", "'2026-06-01'", "'2299-12-30'", "'2299-12-31'"])
DATE32_INTERVALS = ["INTERVAL 1 SECOND", "INTERVAL 36 HOUR", "INTERVAL 90 MINUTE"]


def _seconds(text: str | None) -> float | None:
    if text is None:
        return None
    return datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp()


def _utc(engine, expression: str, type_: str, value: str, settings: str) -> str | None:
    """``expression`` of v = CAST(value AS type_), as a UTC string; None when ClickHouse raises."""
    try:
        rows = engine.query_rows(f"SELECT toString(toTimeZone({expression}, 'UTC')) "
                                 f"FROM (SELECT CAST({value} AS {type_}) AS v) SETTINGS {settings}")
    except Exception:  # noqa: BLE001 — the unguarded form may overflow; that row is then not compared
        return None
    return rows[0][0]


@pytest.mark.parametrize("op", ["+", "-"])
@pytest.mark.parametrize(("type_", "result", "values", "interval"),
                         [(*case, interval) for case in CASES for interval in INTERVALS]
                         + [(*DATE32, interval) for interval in DATE32_INTERVALS],
                         ids=[f"{case[0]}-{interval}" for case in CASES for interval in INTERVALS]
                         + [f"Date32-{interval}" for interval in DATE32_INTERVALS])
def test_the_guard_keeps_every_result_that_is_in_range(keeper, type_, result, values, interval, op):
    node = sqlglot.parse_one(f"v {op} {interval}", read="clickhouse")
    guarded = guards.date_arithmetic(node, "this", type_, result).sql("clickhouse")
    settings = ", ".join(s.sql("clickhouse") for s in pinned_settings())
    compared = 0
    for value in values:
        got = _utc(keeper, guarded, type_, value, settings)  # the guarded form never raises
        raw = _utc(keeper, f"v {op} {interval}", type_, value, settings)
        if value == "NULL":
            assert got is None
            continue
        assert got is not None
        raw_seconds = _seconds(raw)
        if raw_seconds is not None and LO <= raw_seconds <= HI:
            assert got == raw, f"{value} {op} {interval}: the guard changed an in-range result"
            compared += 1
    assert compared >= 1


def _interval(text: str):
    return sqlglot.parse_one(f"v + {text}", read="clickhouse").expression


@pytest.mark.parametrize("text, seconds", [("INTERVAL 2 HOUR", 7200.0), ("INTERVAL -2 HOUR", -7200.0),
                                           ("INTERVAL 3 MILLISECOND", 0.003), ("INTERVAL 1 WEEK", 604_800.0),
                                           ("INTERVAL 1 MONTH", 31 * 86_400.0), ("INTERVAL 1 YEAR", 366 * 86_400.0)])
def test_an_interval_is_its_signed_length_with_calendar_units_at_their_longest(text, seconds):
    assert guards.interval_seconds(_interval(text)) == pytest.approx(seconds, rel=1e-15)


@pytest.mark.parametrize("text", ["INTERVAL x DAY", "INTERVAL 1 FORTNIGHT"])
def test_an_interval_that_is_not_a_number_and_a_unit_is_refused_in_words(text):
    with pytest.raises(QueryRejected, match=r"write the interval as INTERVAL <number> <unit>"):
        guards.interval_seconds(_interval(text))


@pytest.mark.parametrize("text", ["INTERVAL 'nan' SECOND", "INTERVAL 'inf' HOUR", "INTERVAL 'abc' DAY"])
def test_an_interval_whose_length_is_not_a_finite_number_is_refused_in_words(text):
    with pytest.raises(QueryRejected, match=r"the interval's length must be a number") as info:
        guards.interval_seconds(_interval(text))
    assert text in str(info.value)  # the analyst's own SQL, no parser names


def test_an_interval_written_as_a_string_or_negated_is_its_signed_length():
    assert guards.interval_seconds(_interval("INTERVAL '1' DAY")) == 86_400.0
    assert guards.interval_seconds(_interval("INTERVAL - 2 HOUR")) == -7200.0
    assert guards.interval_seconds(_interval("INTERVAL -'2' HOUR")) == -7200.0  # a negated string: Neg(Literal)


def test_an_interval_that_exactly_fills_the_range_is_kept_and_one_second_more_is_refused(keeper):
    type_ = "DateTime64(0, 'UTC')"
    settings = ", ".join(s.sql("clickhouse") for s in pinned_settings())
    fits = sqlglot.parse_one(f"v + INTERVAL {HI - LO} SECOND", read="clickhouse")
    guarded = guards.date_arithmetic(fits, "this", type_, type_).sql("clickhouse")
    value = _utc(keeper, guarded, type_, "'2026-06-01 12:00:00'", settings)
    assert value == "2262-04-11 23:47:16", "every operand is clamped to the one start that fits"
    too_long = sqlglot.parse_one(f"v + INTERVAL {HI - LO + 1} SECOND", read="clickhouse")
    with pytest.raises(QueryRejected, match="longer than the range of dates") as info:
        guards.date_arithmetic(too_long, "this", type_, type_)
    assert "v + INTERVAL" in str(info.value), "the message shows the SQL the analyst wrote"


def test_arithmetic_with_something_other_than_an_interval_is_refused_naming_the_sql_as_written():
    node = sqlglot.parse_one("toDateTime64(x, 3) + n", read="clickhouse")
    with pytest.raises(QueryRejected) as info:
        guards.date_arithmetic(node, "this", "DateTime64(3)", "DateTime64(3)")
    assert str(info.value).startswith("toDateTime64(x, 3) + n: arithmetic on a DateTime64 takes a constant INTERVAL")
