"""A query over time buckets split into shape and range (dpch.sql.bucketed, issue 28's release store): which
queries split, what the shape keeps, and the boundaries of a release of whole buckets, against ClickHouse."""

from __future__ import annotations

from datetime import UTC, date, datetime

import pytest

from dpch.sql.bucketed import end_probe, find, for_buckets, nominal_seconds
from dpch.sql.nodes import render, show
from dpch.sql.parse import parse_query

COLUMNS = ["uid", "ts", "region", "amount", "day", "ms"]
GRAFANA = ('SELECT toStartOfInterval(toDateTime(ts), INTERVAL 3600 second) as "time", count(*) FROM events '
           'WHERE ( ts >= toDateTime(1772323200) AND ts <= toDateTime(1772409599) ) GROUP BY time ORDER BY time ASC '
           'LIMIT 1000')


def split(sql: str):
    return find(parse_query(sql).select, COLUMNS)


def test_grafanas_query_builder_splits_into_shape_and_range():
    found = split(GRAFANA)
    assert found is not None
    assert (found.column, found.output, found.order, found.limit, found.offset) == ("ts", 0, ((0, False, False),),
                                                                                   1000, 0)
    assert [show(c) for c in found.range] == ["ts >= toDateTime(1772323200)", "ts <= toDateTime(1772409599)"]
    shape = render(found.shape)
    assert "1772323200" not in shape and "ORDER BY" not in shape and "LIMIT" not in shape
    assert "WHERE" not in shape  # the range was all of it


def test_the_shape_keeps_every_other_condition_and_reads_where_aliases():
    found = split("SELECT toStartOfHour(ts) AS time, region, sum(amount) FROM events WHERE time >= '2026-03-01' "
                  "AND time < '2026-03-02' AND region = 'north' GROUP BY time, region ORDER BY sum(amount) DESC "
                  "LIMIT 5 OFFSET 2")
    assert found is not None
    assert render(found.shape).count("region = 'north'") == 1 and "2026-03-01" not in render(found.shape)
    assert found.order == ((2, True, False),) and (found.limit, found.offset) == (5, 2)


@pytest.mark.parametrize("sql", [
    # only a lower limit: not a range
    "SELECT toStartOfHour(ts) AS h, count() FROM events WHERE ts >= '2026-03-01' GROUP BY h",
    # a range that is not constant (folded later, but its text moves with the clock)
    "SELECT toStartOfHour(ts) AS h, count() FROM events WHERE ts >= now() - INTERVAL 1 DAY AND ts <= now() "
    "GROUP BY h",
    # no time bucket, or a key of the time that is not a floor (hour of the day)
    "SELECT region, count() FROM events WHERE ts >= '2026-03-01' AND ts < '2026-03-02' GROUP BY region",
    "SELECT toHour(ts) AS h, count() FROM events WHERE ts >= '2026-03-01' AND ts < '2026-03-02' GROUP BY h",
    # two buckets
    "SELECT toStartOfHour(ts) AS h, toStartOfDay(ts) AS d, count() FROM events WHERE ts >= '2026-03-01' "
    "AND ts < '2026-03-02' GROUP BY h, d",
    # the bucket not shown, or an ORDER BY on what is not shown
    "SELECT count() FROM events WHERE ts >= '2026-03-01' AND ts < '2026-03-02' GROUP BY toStartOfHour(ts)",
    "SELECT toStartOfHour(ts) AS h, count() FROM events WHERE ts >= '2026-03-01' AND ts < '2026-03-02' "
    "GROUP BY h ORDER BY sum(amount)",
    # a range on another column than the bucketed one
    "SELECT toStartOfHour(ts) AS h, count() FROM events WHERE day >= '2026-03-01' AND day < '2026-03-02' GROUP BY h",
    # a subquery or a join
    "SELECT toStartOfHour(ts) AS h, count() FROM (SELECT * FROM events) WHERE ts >= '2026-03-01' "
    "AND ts < '2026-03-02' GROUP BY h",
])
def test_other_shapes_are_not_split(sql):
    assert split(sql) is None


def test_nominal_lengths():
    assert nominal_seconds(split(GRAFANA)) == 3600
    month = split("SELECT toStartOfMonth(day) AS m, count() FROM events WHERE day >= '2026-01-01' "
                  "AND day <= '2026-06-30' GROUP BY m")
    assert nominal_seconds(month) == 30 * 86400
    trunc = split("SELECT date_trunc('week', ts) AS w, count() FROM events WHERE ts >= '2026-01-01' "
                  "AND ts <= '2026-06-30' GROUP BY w")
    assert trunc is not None and nominal_seconds(trunc) == 7 * 86400


def test_whole_buckets_are_a_range_of_the_column_and_runs_are_or_ed():
    found = split(GRAFANA)
    one = render(for_buckets(found, [(datetime(2026, 3, 1, 5), datetime(2026, 3, 1, 8))]))
    five, eight = (int(datetime(2026, 3, 1, h, tzinfo=UTC).timestamp()) * 10**9 for h in (5, 8))
    assert f"ts >= fromUnixTimestamp64Nano({five})" in one and f"ts < fromUnixTimestamp64Nano({eight})" in one
    assert " OR " not in one and one.count("ts >=") == 1 and one.count("ts <") == 1  # one run: its range alone
    two = render(for_buckets(found, [(datetime(2026, 3, 1, 5), datetime(2026, 3, 1, 6)),
                                     (datetime(2026, 3, 1, 9), datetime(2026, 3, 1, 10))]))
    # the hull (which narrows the key domain) and the runs within it
    ten = int(datetime(2026, 3, 1, 10, tzinfo=UTC).timestamp()) * 10**9
    assert f"(ts >= fromUnixTimestamp64Nano({five})) AND (ts < fromUnixTimestamp64Nano({ten}))" in two
    assert two.count(" OR ") == 1
    six, nine = (int(datetime(2026, 3, 1, h, tzinfo=UTC).timestamp()) * 10**9 for h in (6, 9))
    assert f"ts < fromUnixTimestamp64Nano({six})" in two and f"ts >= fromUnixTimestamp64Nano({nine})" in two
    on_dates = render(for_buckets(split("SELECT toStartOfMonth(day) AS m, count() FROM events WHERE "
                                        "day >= '2026-01-01' AND day <= '2026-06-30' GROUP BY m"),
                                  [(date(2026, 1, 1), date(2026, 3, 1))]))
    assert "day >= '2026-01-01'" in on_dates and "day < '2026-03-01'" in on_dates


@pytest.mark.parametrize(("bucket", "column_type", "value", "after"), [
    ("toStartOfMonth(day)", "Date", date(2026, 1, 1), date(2026, 2, 1)),
    ("toStartOfMonth(day)", "Date", date(2026, 2, 1), date(2026, 3, 1)),  # a short month after a long one
    ("toStartOfYear(day)", "Date", date(2024, 1, 1), date(2025, 1, 1)),  # a leap year
    ("toStartOfInterval(toDateTime(ts), INTERVAL 3600 second)", "DateTime", datetime(2026, 3, 1, 23),
     datetime(2026, 3, 2, 0)),
    ("toMonday(day)", "Date", date(2026, 3, 2), date(2026, 3, 9)),
    ("toStartOfQuarter(day)", "Date", date(2026, 1, 1), date(2026, 4, 1)),
])
def test_the_end_of_a_bucket_is_the_next_bucket_start_as_clickhouse_computes_it(keeper, bucket, column_type,
                                                                                   value, after):
    column = "day" if column_type == "Date" else "ts"
    found = split(f"SELECT {bucket} AS b, count() FROM events WHERE {column} >= '2026-01-01' "
                  f"AND {column} <= '2026-06-30' GROUP BY b")
    end, ok = keeper.query_rows(render(end_probe(found, value, column_type)))[0]
    assert ok and end == after


def test_a_day_in_a_daylight_saving_zone_ends_at_the_next_midnight(keeper):
    """2026-03-29 has 23 hours in Berlin: the next bucket still starts at the next local midnight (times as
    clickhouse-connect gives them: in UTC, 23:00 and 22:00)."""
    found = split("SELECT toStartOfDay(ts) AS d, count() FROM events WHERE ts >= '2026-03-01' "
                  "AND ts <= '2026-04-30' GROUP BY d")
    end, ok = keeper.query_rows(render(end_probe(found, datetime(2026, 3, 28, 23), "DateTime('Europe/Berlin')")))[0]
    assert ok and end == datetime(2026, 3, 29, 22)


def test_positions_name_select_items_from_one():
    found = split("SELECT toStartOfHour(ts) AS h, count() FROM events WHERE ts >= '2026-03-01' AND ts < '2026-03-02' "
                  "GROUP BY 1 ORDER BY 2 DESC, h")
    assert found is not None and found.output == 0
    assert found.order == ((1, True, False), (0, False, False))  # no direction: ascending, NULLs last


@pytest.mark.parametrize("order", ["ORDER BY 0", "ORDER BY 3", "ORDER BY '1'", "ORDER BY -1"])
def test_an_order_that_names_no_select_item_is_not_split(order):
    assert split("SELECT toStartOfHour(ts) AS h, count() FROM events WHERE ts >= '2026-03-01' "
                 f"AND ts < '2026-03-02' GROUP BY h {order}") is None


def test_nulls_first_is_kept():
    found = split("SELECT toStartOfHour(ts) AS h, count() AS n FROM events WHERE ts >= '2026-03-01' "
                  "AND ts < '2026-03-02' GROUP BY h ORDER BY n DESC NULLS FIRST")
    assert found is not None and found.order == ((1, True, True),)


@pytest.mark.parametrize("tail", ["LIMIT 2 + 3", "LIMIT 5 OFFSET 1 + 1", "LIMIT 1 + 1 OFFSET 2"])
def test_a_limit_or_offset_that_is_not_a_number_is_not_split(tail):
    assert split("SELECT toStartOfHour(ts) AS h, count() FROM events WHERE ts >= '2026-03-01' "
                 f"AND ts < '2026-03-02' GROUP BY h ORDER BY h {tail}") is None


@pytest.mark.parametrize("group", ["GROUP BY h WITH TOTALS", "GROUP BY h WITH ROLLUP", "GROUP BY h WITH CUBE"])
def test_totals_rollup_and_cube_are_not_split(group):
    assert split("SELECT toStartOfHour(ts) AS h, count() FROM events WHERE ts >= '2026-03-01' "
                 f"AND ts < '2026-03-02' {group}") is None


def test_a_split_query_is_immutable():
    found = split(GRAFANA)
    with pytest.raises(AttributeError):
        found.limit = 5  # type: ignore[misc]


@pytest.mark.parametrize(("bucket", "value", "after"), [
    ("toStartOfSecond(ms)", datetime(2026, 3, 1, 5, 0, 7), datetime(2026, 3, 1, 5, 0, 8)),
    ("toDateTime(ms)", datetime(2026, 3, 1, 5, 0, 7), datetime(2026, 3, 1, 5, 0, 8)),
    ("toStartOfInterval(ms, INTERVAL 100 millisecond)", datetime(2026, 3, 1, 5, 0, 7, 100000),
     datetime(2026, 3, 1, 5, 0, 7, 200000)),
    ("toStartOfMinute(ts)", datetime(2026, 3, 1, 5, 7), datetime(2026, 3, 1, 5, 8)),
    ("toStartOfFiveMinutes(ts)", datetime(2026, 3, 1, 5, 5), datetime(2026, 3, 1, 5, 10)),
    ("toStartOfTenMinutes(ts)", datetime(2026, 3, 1, 5, 10), datetime(2026, 3, 1, 5, 20)),
    ("toStartOfFifteenMinutes(ts)", datetime(2026, 3, 1, 5, 15), datetime(2026, 3, 1, 5, 30)),
    ("toStartOfHour(ts)", datetime(2026, 3, 1, 5), datetime(2026, 3, 1, 6)),
    ("toStartOfDay(ts)", datetime(2026, 3, 1), datetime(2026, 3, 2)),
    ("toStartOfWeek(ts)", date(2026, 3, 1), date(2026, 3, 8)),
    ("toDateTime(toStartOfHour(ts))", datetime(2026, 3, 1, 5), datetime(2026, 3, 1, 6)),
    ("toStartOfInterval(ts, INTERVAL 90 minute)", datetime(2026, 3, 1, 4, 30), datetime(2026, 3, 1, 6)),
    ("date_trunc('hour', ts)", datetime(2026, 3, 1, 5), datetime(2026, 3, 1, 6)),
])
def test_every_floor_ends_at_the_next_bucket(keeper, bucket, value, after):
    column = "ms" if "(ms" in bucket else "ts"
    found = split(f"SELECT {bucket} AS b, count() FROM events WHERE {column} >= '2026-01-01' "
                  f"AND {column} <= '2026-06-30' GROUP BY b")
    assert found is not None
    end, ok = keeper.query_rows(render(end_probe(found, value, "DateTime64(3)" if column == "ms" else "DateTime")))[0]
    assert ok and (end.replace(tzinfo=None) if isinstance(end, datetime) else end) == after


def test_a_time_with_microseconds_is_its_exact_instant():
    found = split(GRAFANA)
    moment = datetime(2026, 3, 1, 5, 6, 7, 123456)
    text = render(for_buckets(found, [(moment, moment)]))
    nanos = int(datetime(2026, 3, 1, 5, 6, 7, tzinfo=UTC).timestamp()) * 10**9 + 123456000
    assert f"fromUnixTimestamp64Nano({nanos})" in text


@pytest.mark.parametrize("bucket", ["toStartOfInterval(ts)", "toStartOfInterval(ts, INTERVAL 3 fortnight)",
                                    "toStartOfInterval(ts, INTERVAL 1.5 hour)"])
def test_a_bucket_of_unknown_length_has_no_nominal_length(bucket):
    found = split(f"SELECT {bucket} AS b, count() FROM events WHERE ts >= '2026-01-01' AND ts <= '2026-06-30' "
                  "GROUP BY b")
    assert found is not None and nominal_seconds(found) is None
    assert end_probe(found, datetime(2026, 3, 1), "DateTime") is None  # the store is then not used
