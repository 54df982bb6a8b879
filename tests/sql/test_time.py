"""Time as BI tools write it (issue 15, part 2): constant dates and times in WHERE, time buckets as
GROUP BY keys whose domain follows from the bounds and the WHERE range.

Values, not acceptance: every accepted query's exact (noise-free) answer equals the same text run in
ClickHouse directly. The queries are Grafana's and Superset's, taken from their source
(``fixtures/bi_time.toml`` cites file and commit) with Grafana's macros expanded as its
``pkg/macros/macros.go`` expands them.
"""

from __future__ import annotations

import re
import tomllib
from datetime import UTC, datetime
from pathlib import Path

import pytest
from sqlglot import exp

import dpch
from dpch import Budget
from dpch.sql import time_buckets
from dpch.sql.parse import DIALECT
from dpch.sql.time_buckets import Limit, TimeRange, bucket_column, bucket_domain
from tests.helpers import refused_uncharged
from tests.soundness.exact_answers import exact_answer, mismatches, raw_rows

FIXTURE = tomllib.loads((Path(__file__).parent / "fixtures" / "bi_time.toml").read_text())
RANGE = FIXTURE["range"]
TABLES = ("events",)

DDL = """CREATE TABLE {db}.events (
  uid    UInt64,
  ts     DateTime      COMMENT 'dp: bounds=["2026-01-01", "2026-12-31"]',
  day    Date          COMMENT 'dp: bounds=["2026-01-01", "2026-12-31"]',
  ms     DateTime64(3) COMMENT 'dp: bounds=["2026-01-01", "2026-12-31"]',
  amount Float64       COMMENT 'dp: bounds=[0, 100]'
) ENGINE = MergeTree ORDER BY uid COMMENT 'dp: privacy_unit=uid, max_rows_per_unit=5'"""
#: 2 000 people × 5 rows from 2026-02-28 20:00 over four days (inside every bound and under the cap)
ROWS = """INSERT INTO {db}.events SELECT number % 2000,
  toDateTime('2026-02-28 20:00:00', 'UTC') + (number * 3571) % (4 * 86400) AS t, toDate(t),
  toDateTime64(t, 3) + (number % 1000) / 1000, (number * 7) % 101 FROM numbers(10000)"""


@pytest.fixture(scope="module")
def session(keeper, store_dsn):
    db = "time_fixture"
    keeper.command(f"DROP DATABASE IF EXISTS {db}")
    keeper.command(f"CREATE DATABASE {db}")
    keeper.command(DDL.format(db=db))
    keeper.command(ROWS.format(db=db))
    s = dpch.connect(store_dsn, database=db, analyst="time", default_budget=Budget(1e6, 0.5), seed=7)
    yield s
    s.close()
    keeper.command(f"DROP DATABASE IF EXISTS {db}")


def grafana(sql: str) -> str:
    """``sql`` with Grafana's macros expanded as pkg/macros/macros.go does (commit in the fixture)."""
    start, end, seconds, millis = RANGE["from"], RANGE["to"], RANGE["interval_s"], RANGE["interval_ms"]

    def date(ts: int) -> str:
        return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d")

    def group(match: re.Match[str]) -> str:
        period = match.group(2).strip("'\"")
        secs = int(period[:-1]) * {"s": 1, "m": 60, "h": 3600}[period[-1]]
        return f"toStartOfInterval(toDateTime({match.group(1)}), INTERVAL {secs} second)"

    macros = [
        (r"\$__timeGroup\((\w+),\s*([^)]+)\)", group),
        (r"\$__timeFilter_ms\((\w+)\)", lambda m: f"{m[1]} >= fromUnixTimestamp64Milli({start * 1000}) AND "
                                                   f"{m[1]} <= fromUnixTimestamp64Milli({end * 1000})"),
        (r"\$__timeFilter\((\w+)\)", lambda m: f"{m[1]} >= toDateTime({start}) AND {m[1]} <= toDateTime({end})"),
        (r"\$__dateFilter\((\w+)\)",
         lambda m: f"{m[1]} >= toDate('{date(start)}') AND {m[1]} <= toDate('{date(end)}')"),
        (r"\$__timeInterval_ms\((\w+)\)",
         lambda m: f"toStartOfInterval(toDateTime64({m[1]}, 3), INTERVAL {millis} millisecond)"),
        (r"\$__timeInterval\((\w+)\)", lambda m: f"toStartOfInterval(toDateTime({m[1]}), INTERVAL {seconds} second)"),
        (r"\$__fromTime_ms\b", lambda m: f"fromUnixTimestamp64Milli({start * 1000})"),
        (r"\$__toTime_ms\b", lambda m: f"fromUnixTimestamp64Milli({end * 1000})"),
        (r"\$__fromTime\b", lambda m: f"toDateTime({start})"),
        (r"\$__toTime\b", lambda m: f"toDateTime({end})"),
        (r"\$__interval_s\b", lambda m: str(seconds)),
    ]
    for pattern, expand in macros:
        sql = re.sub(pattern, expand, sql)
    assert "$__" not in sql, sql
    return sql


def check_values(session: dpch.Session, sql: str) -> None:
    answer = exact_answer(session, sql)
    problems = mismatches(answer.rows, raw_rows(session.engine, "time_fixture", sql, TABLES))
    assert not problems, f"{sql}: " + "; ".join(problems[:5])


@pytest.mark.parametrize("case", FIXTURE["grafana"], ids=[c["name"] for c in FIXTURE["grafana"]])
def test_grafana_panels_answer_exactly(session, case):
    check_values(session, grafana(case["sql"]))


def superset(grain: str, column: str = "ts") -> str:
    """A Superset time-series chart's query: the grain inline in SELECT and GROUP BY, the time range
    as convert_dttm writes it for a DateTime column."""
    expression = grain.format(col=column)
    rng = FIXTURE["superset"]
    return (f"SELECT {expression} AS __timestamp, count(*) AS count FROM events "
            f"WHERE {column} >= toDateTime('{rng['from']}') AND {column} < toDateTime('{rng['to']}') "
            f"GROUP BY {expression} ORDER BY count DESC LIMIT 10000")


@pytest.mark.parametrize("grain", sorted(FIXTURE["superset"]["grains"]))
def test_superset_time_grains_answer_exactly(session, grain):
    check_values(session, superset(FIXTURE["superset"]["grains"][grain]))


#: the query builder's filter on a hinted time column is written on the column's alias (grafana/clickhouse-datasource
#: at commit 03b0ccaccc6ed24194277f810bfa8ef5c02f5366, src/data/sqlGenerator.test.ts, "generates logs query":
#: ``SELECT log_ts as "timestamp", … WHERE ( timestamp >= $__fromTime AND timestamp <= $__toTime )``); on an
#: aggregate series the alias is the bucket's (issue 28: "ClickHouse resolves aliases in WHERE")
ON_ALIAS = ('SELECT toStartOfHour(ts) as "time", count(*) FROM events '
            'WHERE ( time >= $__fromTime AND time <= $__toTime ) GROUP BY time ORDER BY time ASC LIMIT 1000')


def test_a_filter_on_the_buckets_alias_answers_as_clickhouse(session):
    check_values(session, grafana(ON_ALIAS))


def test_a_filter_on_the_buckets_alias_narrows_the_buckets_as_one_on_the_column(session):
    """The alias reads as the bucket, and dpch releases the buckets of the range: exactly those of the same
    filter written on the column (the fixture's day: 24 hours), not every hour of the column's bounds."""
    on_column = ON_ALIAS.replace("time >=", "ts >=").replace("time <=", "ts <=")
    alias_keys = session.plan(grafana(ON_ALIAS))[0].keys[0].values
    assert alias_keys == session.plan(grafana(on_column))[0].keys[0].values and len(alias_keys) == 24
    # an alias of an aggregate is still an aggregate in WHERE: refused in words, as ClickHouse refuses it
    refusal = refused_uncharged(session, "SELECT toStartOfHour(ts) AS h, count() AS n FROM events WHERE n > 3 "
                                         "GROUP BY h")
    assert "aggregate functions are not allowed in WHERE" in str(refusal)


def test_only_a_floor_of_the_column_narrows_its_buckets(session):
    """A limit on toStartOfMonth(ts) limits ts (a floor: f(x) ≤ x), one on toMonth(ts) does not (a number:
    read as a time it would drop every month; negative control), and the rows still answer the filter."""
    months = "SELECT toStartOfMonth(ts) AS m, count() FROM events WHERE {} GROUP BY m"
    floor = session.plan(months.format("toStartOfMonth(ts) >= toDateTime('2026-06-01 00:00:00')"))[0]
    assert len(floor.keys[0].values) == 7
    number = session.plan(months.format("toMonth(ts) <= 6"))[0]
    assert len(number.keys[0].values) == 12
    check_values(session, months.format("toStartOfMonth(ts) >= toDateTime('2026-06-01 00:00:00')"))


def test_a_filter_on_an_interval_bucket_alias_is_refused_naming_the_alias(session):
    """toStartOfInterval is a bucket dpch evaluates only on a key (clamped into the column's bounds), not
    on a row (dpch.sql.functions): the builder's $__timeInterval alias in WHERE is refused before any
    charge, saying which alias it read and what to write."""
    sql = grafana(ON_ALIAS.replace("toStartOfHour(ts)", "$__timeInterval(ts)"))
    refusal = refused_uncharged(session, sql)
    assert "WHERE reads the select alias time as toStartOfInterval(" in str(refusal)
    assert "compare the date or time column itself" in str(refusal)


def test_superset_date_filter_on_a_date_column(session):
    rng = FIXTURE["superset"]
    check_values(session, f"SELECT toStartOfDay(toDateTime(day)) AS __timestamp, count(*) FROM events "
                          f"WHERE day >= toDate('{rng['date_from']}') AND day < toDate('{rng['date_to']}') "
                          f"GROUP BY toStartOfDay(toDateTime(day))")


def test_a_narrow_range_releases_its_buckets_only_and_costs_no_more(session):
    """A one-day panel with hourly buckets releases 24 keys (empty ones with noise), not the 8 760
    hours of the bounds; and its cost equals the same query's over the whole year."""
    day = ("SELECT toStartOfHour(ts) AS h, count() FROM events WHERE ts >= toDateTime('2026-03-01 00:00:00') "
           "AND ts < toDateTime('2026-03-02 00:00:00') GROUP BY h")
    plan, _ = session.plan(day)
    hours = plan.keys[0].values
    assert len(hours) == 24
    assert hours[0] == datetime(2026, 3, 1, 0, 0) and hours[-1] == datetime(2026, 3, 1, 23, 0)
    year, _ = session.plan("SELECT toStartOfHour(ts) AS h, count() FROM events GROUP BY h")
    assert len(year.keys[0].values) == 365 * 24
    assert session.explain(day).cost == session.explain(
        "SELECT toStartOfHour(ts) AS h, count() FROM events GROUP BY h").cost
    release = session.query(day, epsilon=0.5)
    assert len(release.rows) == 24


def test_a_range_outside_the_bounds_clamps_to_them(session):
    """Rows are clamped into the bounds, so a range past them keeps only the buckets at the edge."""
    plan, _ = session.plan("SELECT toStartOfMonth(ts) AS m, count() FROM events "
                           "WHERE ts >= toDateTime('2027-02-01 00:00:00') GROUP BY m")
    assert plan.keys[0].values == (datetime(2026, 12, 1).date(),)


def test_the_domain_does_not_depend_on_the_data(session, keeper):
    """Two tables with the same policy, one empty: the same keys, the same emitted SQL."""
    keeper.command("DROP TABLE IF EXISTS time_fixture.events_empty")
    keeper.command(DDL.format(db="time_fixture").replace(".events", ".events_empty"))
    sql = grafana(FIXTURE["grafana"][0]["sql"])
    full, _ = session.plan(sql)
    empty, _ = session.plan(sql.replace("FROM events", "FROM events_empty"))
    assert full.keys[0].values == empty.keys[0].values and len(full.keys[0].values) == 48
    keeper.command("DROP TABLE time_fixture.events_empty")


@pytest.mark.parametrize("sql, reason", [
    ("SELECT count() FROM events WHERE ts >= toDate('garbage')", "is not a valid date or time"),
    ("SELECT count() FROM events WHERE ts >= toDateTime('2026-13-45 99:00:00')", "is not a valid date or time"),
    ("SELECT count() FROM events WHERE toDate(ts) = today()", "compare the date or time column itself"),
    ("SELECT toStartOfInterval(ts, INTERVAL 0 second) AS b, count() FROM events GROUP BY b", "positive whole number"),
    ("SELECT toStartOfInterval(ts, INTERVAL 1 second) AS b, count() FROM events GROUP BY b",
     "more than 100000 time buckets"),
    ("SELECT toDateTime(intDiv(toUInt32(toDateTime(ts)), 0)*0) AS b, count() FROM events GROUP BY b",
     "positive whole number"),
    ("SELECT count() FROM events WHERE ts >= now() - now()", "is a Int32, not a date or time"),
])
def test_bad_time_constants_and_buckets_are_refused_before_the_charge(session, sql, reason):
    assert reason in str(refused_uncharged(session, sql, epsilon=0.1))


def test_now_is_folded_afresh_each_time_and_never_cached(session):
    sql = "SELECT count() FROM events WHERE ts >= now() - INTERVAL 300 DAY"
    first, _ = session.plan(sql)
    assert first.volatile
    second, _ = session.plan(sql)
    assert second is not first  # a plan holding the clock is not reused
    steady, _ = session.plan("SELECT count() FROM events WHERE ts >= toDateTime(1772323200)")
    assert not steady.volatile and session.plan("SELECT count() FROM events WHERE ts >= toDateTime(1772323200)")[0] \
        is steady
    check_values(session, "SELECT count() FROM events WHERE ts >= toDateTime(1772323200)")


def test_folded_constants_are_exact_instants(session):
    """toDateTime(N) stays N; a DateTime64 keeps its nanoseconds; a Date stays a date."""
    plan, _ = session.plan("SELECT count() FROM events WHERE ts >= toDateTime('2026-03-01 00:00:00') AND "
                           "ms < fromUnixTimestamp64Milli(1772323200123) AND day <= toDate('2026-03-02')")
    text = " ".join(plan.conditions)
    assert "toDateTime(1772323200)" in text
    assert "fromUnixTimestamp64Nano(1772323200123000000)" in text
    assert "toDate('2026-03-02')" in text


# -- the grid lists every bucket: against every second, in several time zones ---------------------

GRID_KEYS = [
    "toStartOfInterval(x, INTERVAL 7 minute)", "toStartOfInterval(x, INTERVAL 7 hour)",
    "toStartOfInterval(x, INTERVAL 45 second)", "toStartOfInterval(x, INTERVAL 2 day)",
    "toStartOfHour(x)", "toStartOfDay(x)", "toMonday(x)", "toStartOfFifteenMinutes(x)",
    "toDateTime(intDiv(toUInt32(toDateTime(x)), 420)*420)", "toYYYYMMDD(x)", "toStartOfTenMinutes(x)",
]


@pytest.mark.parametrize("zone", ["UTC", "Asia/Kolkata", "America/St_Johns", "Australia/Lord_Howe"])
@pytest.mark.parametrize("key", GRID_KEYS)
def test_grid_lists_exactly_the_buckets_of_every_second(keeper, zone, key):
    """The grid's image equals the key over every second of a range that crosses days (and, in
    Lord Howe, a half-hour daylight-saving change on 2026-04-05)."""
    ch_type = f"DateTime('{zone}')"
    start, end = "2026-04-03 22:13:07", "2026-04-06 01:02:03"
    expr = exp.maybe_parse(key, dialect=DIALECT)
    chain = bucket_column(expr)
    assert chain is not None
    limits = TimeRange(lower=(Limit(exp.Literal.string(start)),), upper=(Limit(exp.Literal.string(end)),))
    domain = bucket_domain(expr, chain, exp.column("x"), ch_type, ("2026-01-01", "2026-12-31"), limits,
                           keeper.query_rows, 100_000)
    every = keeper.query_rows(
        f"SELECT DISTINCT {key} AS k FROM (SELECT addSeconds(CAST('{start}' AS {ch_type}), number) AS x "
        f"FROM numbers(toUInt64(CAST('{end}' AS {ch_type}) - CAST('{start}' AS {ch_type})) + 1)) ORDER BY k")
    assert list(domain.values) == [r[0] for r in every]


def test_grid_too_coarse_misses_buckets(keeper, monkeypatch):
    """Negative control: a grid spaced by the calendar width alone misses minute buckets."""
    monkeypatch.setattr(time_buckets, "grid_width", lambda widths, resolution: time_buckets.QUARTER_HOUR)
    key = "toStartOfInterval(x, INTERVAL 7 minute)"
    expr = exp.maybe_parse(key, dialect=DIALECT)
    chain = bucket_column(expr)
    assert chain is not None
    limits = TimeRange(lower=(Limit(exp.Literal.string("2026-04-03 00:00:00")),),
                       upper=(Limit(exp.Literal.string("2026-04-03 06:00:00")),))
    domain = bucket_domain(expr, chain, exp.column("x"), "DateTime('UTC')", ("2026-01-01", "2026-12-31"), limits,
                           keeper.query_rows, 100_000)
    assert len(domain.values) < 6 * 60 // 7


EDGES = [  # (lower, strict), (upper, strict): at a bucket boundary, and between two representable values
    (("toDateTime('2026-04-03 10:00:00')", False), ("toDateTime('2026-04-03 11:00:00')", True)),
    (("toDateTime('2026-04-03 10:00:00')", True), ("toDateTime('2026-04-03 11:00:00')", False)),
    (("toDateTime('2026-04-03 09:59:59')", True), ("toDateTime('2026-04-03 11:00:00')", True)),
    (("fromUnixTimestamp64Nano(1775210399500000000)", False), ("fromUnixTimestamp64Nano(1775214000500000000)", True)),
    (("fromUnixTimestamp64Nano(1775210399500000000)", True), ("fromUnixTimestamp64Nano(1775213999500000000)", False)),
]


def _every_second(keeper, key: str, where: str) -> list:
    return [r[0] for r in keeper.query_rows(
        f"SELECT DISTINCT {key} AS k FROM (SELECT addSeconds(toDateTime('2026-04-03 09:00:00', 'UTC'), number) AS x "
        f"FROM numbers(3 * 3600)) WHERE {where} ORDER BY k")]


@pytest.mark.parametrize("edges", EDGES)
def test_range_limits_are_exact_at_the_edges(keeper, edges):
    """``>`` and ``<`` exclude the limit, ``>=`` and ``<=`` include it, and a limit between two
    seconds rounds the right way: the domain equals the buckets of the seconds the WHERE keeps, for
    the limits as written and read as inclusive (where the two differ, a strictness ignored fails)."""
    (lower, lower_strict), (upper, upper_strict) = edges
    key = "toStartOfMinute(x)"
    expr = exp.maybe_parse(key, dialect=DIALECT)
    chain = bucket_column(expr)
    assert chain is not None
    for strict_low, strict_up in {(lower_strict, upper_strict), (False, False)}:
        limits = TimeRange(lower=(Limit(exp.maybe_parse(lower, dialect=DIALECT), strict_low),),
                           upper=(Limit(exp.maybe_parse(upper, dialect=DIALECT), strict_up),))
        domain = bucket_domain(expr, chain, exp.column("x"), "DateTime('UTC')", ("2026-01-01", "2026-12-31"),
                               limits, keeper.query_rows, 100_000)
        where = f"x {'>' if strict_low else '>='} {lower} AND x {'<' if strict_up else '<='} {upper}"
        assert list(domain.values) == _every_second(keeper, key, where), where


def test_the_edge_cases_tell_strict_from_inclusive(keeper):
    """The cases above would catch a strictness ignored: in some, the two readings keep other buckets."""
    def where(e, strict: bool) -> str:
        (low, low_strict), (up, up_strict) = e
        return f"x {'>' if strict and low_strict else '>='} {low} AND x {'<' if strict and up_strict else '<='} {up}"

    differ = [e for e in EDGES if _every_second(keeper, "toStartOfMinute(x)", where(e, True))
              != _every_second(keeper, "toStartOfMinute(x)", where(e, False))]
    assert len(differ) >= 2


def test_a_bucket_clickhouse_cannot_compute_is_refused_in_words(session):
    """Seconds of a Date: ClickHouse refuses the type on the grid (no data read), and dpch says why."""
    refusal = refused_uncharged(
        session, "SELECT toStartOfInterval(day, INTERVAL 5 second) AS b, count() FROM events GROUP BY b", epsilon=0.1)
    assert "cannot compute this bucket of a Date column" in str(refusal)
