"""The registry's pieces one by one (issue 24): type families, guards and their exact values on real
ClickHouse, the argument checks and their words. The boundary fuzzer (tests/soundness/test_boundaries.py)
checks the whole; these pin each rule, so that a change to one is caught where it is made."""

from __future__ import annotations

import math

import pytest
import sqlglot
from sqlglot import exp

from dpch.errors import QueryRejected
from dpch.sql import functions, guards
from dpch.sql.bounds import ColumnRef, Typer, read_column, read_type
from dpch.sql.expression_types import ExpressionTypes, Family, describe_family, families, unwrap
from dpch.sql.nodes import call, pinned_settings, render
from dpch.sql.parse import DIALECT
from dpch.store.engine import Engine


def _node(sql: str) -> exp.Expr:
    return sqlglot.parse_one(f"SELECT {sql}", read=DIALECT).expressions[0]


def _value(engine: Engine, node: exp.Expr) -> object:
    return engine.query_rows(f"SELECT toString({render(node)})")[0][0]


# -- families ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("type_, expected", [
    ("Int8", Family.NUMBER | Family.INTEGER), ("UInt256", Family.NUMBER | Family.INTEGER),
    ("Bool", Family.NUMBER | Family.INTEGER), ("Float32", Family.NUMBER), ("Decimal(38, 6)", Family.NUMBER),
    ("String", Family.STRING), ("FixedString(4)", Family.STRING), ("LowCardinality(Nullable(String))", Family.STRING),
    ("Date", Family.DATE), ("Date32", Family.DATE), ("DateTime('Asia/Tokyo')", Family.DATE | Family.TIME),
    ("Nullable(DateTime64(3, 'UTC'))", Family.DATE | Family.TIME), ("IntervalDay", Family.INTERVAL),
    ("Enum8('a' = 1)", Family.OTHER), ("UUID", Family.OTHER), ("Array(String)", Family.OTHER),
    ("Nullable(Nothing)", Family.ANY),
])
def test_families_of_clickhouse_types(type_, expected):
    assert families(type_) == expected


def test_unwrap_and_words():
    assert unwrap("LowCardinality(Nullable(String))") == "String"
    assert unwrap("Nullable(DateTime64(3))") == "DateTime64(3)"
    assert describe_family(Family.ANY) == "any value"
    assert describe_family(Family.INTEGER) == "a whole number"
    assert describe_family(Family.NUMBER | Family.DATE) == "a number or a date or time"
    assert describe_family(Family.TIME) == "a date with a time of day (DateTime or DateTime64)"


# -- guards, with their values on ClickHouse --------------------------------------------------------


def test_substring_guard_clamps_to_two_to_the_62(keeper):
    assert guards.SUBSTRING_LIMIT == 2**62
    column = _node("x")
    assert guards.substring_argument(_node("3"), "UInt8") is not None
    assert render(guards.substring_argument(_node("3"), "UInt8")) == "3", "a small literal is left as written"
    assert render(guards.substring_argument(_node("-4611686018427387904"), "Int64")) == "-4611686018427387904"
    big = guards.substring_argument(_node("-4611686018427387905"), "Int64")
    assert "least" in render(big), "a literal beyond the limit is clamped"
    clamped = guards.substring_argument(column, "Int64")
    assert render(clamped) == "least(greatest(x, -4611686018427387904), 4611686018427387904)"
    nullable = guards.substring_argument(column, "Nullable(Int64)")
    assert render(nullable).startswith("CASE WHEN isNull(x) THEN NULL"), render(nullable)
    # on ClickHouse: Int64's minimum, which raised, now gives the empty string as -2^62 does
    for raw, expected in (("-9223372036854775808", ""), ("9223372036854775807", "abc"), ("2", "ab")):
        guarded = guards.substring_argument(call("toInt64", exp.Literal.string(raw)), "Int64")
        assert _value(keeper, call("substring", exp.Literal.string("abc"), exp.Literal.number(1), guarded)) == expected


def test_datetime64_read_clamp_on_clickhouse(keeper):
    assert guards.DATETIME64_RANGE == (-2_208_988_800, 9_223_372_036)
    for ticks, expected in (("9223372036854775807", "2262-04-11 23:47:16.000"),
                            ("-9223372036854775808", "1900-01-01 00:00:00.000"),
                            ("1609459200123", "2021-01-01 00:00:00.123")):
        node = call("reinterpret", call("toInt64", exp.Literal.string(ticks)), exp.Literal.string("DateTime64(3)"))
        assert _value(keeper, read_column(node, "DateTime64(3)")) == expected
    # in the column's zone, and NULL stays NULL (least/greatest would make it the lower bound)
    zoned = call("toDateTime64", exp.Literal.string("2021-01-01 00:00:00"), exp.Literal.number(3),
                 exp.Literal.string("Asia/Tokyo"))
    assert _value(keeper, read_column(zoned, "DateTime64(3, 'Asia/Tokyo')")) == "2021-01-01 00:00:00.000"
    null = exp.cast(exp.Null(), "Nullable(DateTime64(3))", dialect=DIALECT)
    assert keeper.query_rows(f"SELECT {render(read_column(null, 'Nullable(DateTime64(3))'))} IS NULL")[0][0] == 1
    assert read_type("Nullable(Decimal(18, 2))") == "Nullable(Float64)"
    assert read_type("DateTime64(3)") == "DateTime64(3)"


@pytest.mark.parametrize("interval, seconds", [
    ("INTERVAL 5 SECOND", 5.0), ("INTERVAL -2 HOUR", -7200.0), ("INTERVAL 3 MILLISECOND", 0.003),
    ("INTERVAL 1 MONTH", 31 * 86400.0), ("INTERVAL 2 QUARTER", 184 * 86400.0), ("INTERVAL 1 YEAR", 366 * 86400.0),
    ("INTERVAL 1 WEEK", 7 * 86400.0), ("INTERVAL 7 NANOSECOND", 7e-9), ("INTERVAL 1 DAY", 86400.0),
    ("INTERVAL 1 MINUTE", 60.0), ("INTERVAL 1 MICROSECOND", 1e-6),
])
def test_interval_lengths(interval, seconds):
    node = _node(f"x + {interval}").expression
    assert math.isclose(guards.interval_seconds(node), seconds, rel_tol=1e-12)


def test_date_arithmetic_keeps_the_result_in_range_on_clickhouse(keeper):
    """The clamp window for ``x + INTERVAL 9000000000 SECOND`` at scale 9: the largest x gives exactly the
    range's end; the smallest is unchanged; x - INTERVAL moves the window up."""
    lo, hi = guards.DATETIME64_RANGE
    node = _node("x + INTERVAL 9000000000 SECOND")
    guarded = guards.date_arithmetic(node, "this", "DateTime64(9)", "DateTime64(9)")
    x = guarded.this
    assert render(x) == (f"least(greatest(x, toDateTime64({lo}, 9)), toDateTime64({hi - 9_000_000_000}, 9))")
    shifted = guards.date_arithmetic(_node("x - INTERVAL 1 DAY"), "this", "DateTime64(3, 'UTC')", "DateTime64(3)")
    assert render(shifted.this) == (f"least(greatest(x, toDateTime64({lo + 86400}, 3, 'UTC')), "
                                    f"toDateTime64({hi}, 3, 'UTC'))")
    with pytest.raises(QueryRejected, match="longer than the range"):
        guards.date_arithmetic(_node("x + INTERVAL 400 YEAR"), "this", "DateTime64(3)", "DateTime64(3)")
    with pytest.raises(QueryRejected, match="constant INTERVAL"):
        guards.date_arithmetic(_node("x + 5"), "this", "DateTime64(3)", "DateTime64(3)")
    # the guarded sum runs at the very end of the range
    top = call("reinterpret", call("toInt64", exp.Literal.string("9223372036854775807")),
               exp.Literal.string("DateTime64(9)"))
    sum_ = guards.date_arithmetic(exp.Add(this=read_column(top, "DateTime64(9)"), expression=node.expression.copy()),
                                  "this", "DateTime64(9)", "DateTime64(9)")
    assert _value(keeper, sum_) == "2262-04-11 23:47:16.000000000"


def test_date_literals_and_ranges(keeper):
    assert render(guards.date_literal("Date", 86400)) == "toDate('1970-01-02')"
    assert render(guards.date_literal("Date32", -86400)) == "toDate32('1969-12-31')"
    assert render(guards.date_literal("DateTime('Asia/Tokyo')", 0)) == "toDateTime(0, 'Asia/Tokyo')"
    assert guards.type_range("Date") == (0, 65_535 * 86_400)
    assert guards.type_range("Nullable(DateTime64(6))") == guards.DATETIME64_RANGE
    # each type's range ends where ClickHouse's does
    assert keeper.query_rows("SELECT toInt64(toDateTime64(toDate32('2299-12-31'), 0, 'UTC')), "
                             "toInt64(toDateTime64(toDate('2149-06-06'), 0, 'UTC'))")[0] == \
        (guards.type_range("Date32")[1], guards.type_range("Date")[1])


# -- the checks and their words ---------------------------------------------------------------------


def _types(mapping: dict[str, str]):
    def type_of(node: exp.Expr) -> str:
        return mapping[node.sql(dialect=DIALECT)]
    return type_of


def test_argument_families_are_checked():
    node = _node("toDayOfWeek(s)")
    with pytest.raises(QueryRejected, match=r"must be a date or time, not String.*toDateOrNull"):
        functions.check_families(node, _types({"s": "String"}))
    functions.check_families(node, _types({"s": "Nullable(Date32)"}))
    sub = _node("substring(s, 1, f)")
    with pytest.raises(QueryRejected, match="length of substring\\(\\) must be a whole number, not Float64"):
        functions.check_families(sub, _types({"s": "String", "1": "UInt8", "f": "Float64"}))


def test_comparisons_need_one_kind_but_take_a_string_constant():
    lt = _node("s < d")
    with pytest.raises(QueryRejected, match="s < d compares String with Date"):
        functions.check_families(lt, _types({"s": "String", "d": "Date"}))
    functions.check_families(_node("d < '2021-01-01'"), _types({"d": "Date", "'2021-01-01'": "String"}))
    functions.check_families(_node("i < u"), _types({"i": "Int8", "u": "UInt64"}))
    functions.check_families(_node("t3 < t9"), _types({"t3": "DateTime64(3)", "t9": "DateTime64(9)"}))
    with pytest.raises(QueryRejected, match="compares Int64 with DateTime64"):
        functions.check_families(_node("i < t"), _types({"i": "Int64", "t": "DateTime64(3)"}))


def test_constant_only_arguments_and_where_functions_may_appear():
    with pytest.raises(QueryRejected, match="needs a constant time zone"):
        functions.check_total(_node("toString(ts, tz)"))
    functions.check_total(_node("toString(ts, 'UTC')"))
    with pytest.raises(QueryRejected, match="toStartOfInterval\\(\\) is not allowed on a row"):
        functions.check_total(_node("toStartOfInterval(ts, INTERVAL 1 DAY)"))
    with pytest.raises(QueryRejected, match="intDiv\\(\\) is not allowed.*'/'"):
        functions.check_total(_node("intDiv(x, 3)"))
    assert functions.allowed_in(_node("toStartOfInterval(ts, INTERVAL 1 DAY)"), functions.Use.BUCKET)
    assert not functions.allowed_in(_node("lower(s)"), functions.Use.BUCKET)
    assert functions.is_constant_argument(_node("match(s, 'a.b')").expression)
    assert not functions.is_constant_argument(_node("substring(s, 1, 5)").args["length"])
    assert functions.display_name(_node("toStartOfMonth(d)")) == "toStartOfMonth()"
    assert functions.display_name(_node("a < b")) == "<"
    assert functions.display_name(_node("substring(s, 1)")) == "substring()"


def test_every_emitted_query_pins_the_settings():
    names = {s.this.name: s.expression.sql() for s in pinned_settings()}
    assert {"join_use_nulls": "0", "use_variant_as_common_type": "0",
            "date_time_overflow_behavior": "'ignore'", "enable_analyzer": "1"}.items() <= names.items()
    # the cluster pins (issue 26; each shown to matter in tests/sql/test_pinned_settings.py)
    assert {"distributed_group_by_no_merge": "0", "optimize_distributed_group_by_sharding_key": "0",
            "read_overflow_mode": "'throw'", "result_overflow_mode": "'throw'", "max_parallel_replicas": "1",
            "extremes": "0"}.items() <= names.items()


def test_types_of_literals_and_columns_are_known_without_asking():
    ref = ColumnRef(node=exp.column("c"), name="c", type="Nullable(Decimal(18, 2))", bounds=None, integer=False)
    typer = Typer(lambda col: ref, ExpressionTypes(None))
    assert typer(_node("c")) == "Nullable(Float64)"
    assert typer(_node("'x'")) == "String"
    assert typer(_node("300")) == "UInt16"
    assert typer(_node("-129")) == "Int16"
    assert typer(_node("1.5")) == "Float64"
    # folded time constants (how a dashboard's time filter arrives): typed without a round trip
    assert typer(_node("toDateTime(1700000000)")) == "DateTime"
    assert typer(_node("toDateTime(1700000000, 'Asia/Tokyo')")) == "DateTime('Asia/Tokyo')"
    assert typer(_node("toDate('2021-01-01')")) == "Date"
    assert typer(_node("fromUnixTimestamp64Nano(1)")) == "DateTime64(9)"
    with pytest.raises(QueryRejected, match="needs the database"):
        typer(_node("lower(c)"))


def test_types_are_asked_of_clickhouse_once_per_text(keeper):
    asked: list[str] = []

    def describe(sql: str) -> list[tuple[str, str]]:
        asked.append(sql)
        return keeper.describe_types(sql)

    types = ExpressionTypes(describe)
    ref = ColumnRef(node=exp.column("c"), name="c", type="DateTime64(3, 'Asia/Kolkata')", bounds=None, integer=False)
    typer = Typer(lambda col: ref, types)
    assert typer(_node("toStartOfDay(c)")) == "DateTime('Asia/Kolkata')"
    assert typer(_node("toStartOfDay(c)")) == "DateTime('Asia/Kolkata')"
    assert len(asked) == 1 and "use_variant_as_common_type = 0" in asked[0]
    with pytest.raises(QueryRejected, match="NO_COMMON_TYPE"):
        typer(_node("if(c > c, 'a', 1)"))
