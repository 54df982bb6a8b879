"""A Grafana time-series panel end to end over HTTP (issue 15, part 2): the query builder's SQL with
its macros expanded as grafana/clickhouse-datasource expands them (commit and files cited in
tests/sql/fixtures/bi_time.toml), answered with one key per bucket of the panel's range."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from tests.server.http_post import post as http_post

FROM = int(datetime(2026, 3, 1, tzinfo=UTC).timestamp())
TO = int(datetime(2026, 3, 7, 23, 59, 59, tzinfo=UTC).timestamp())


def post(srv, sql: str):
    response, data = http_post(srv, sql, user="grafana", password="bi-pw")
    assert response.status == 200, data
    return response, data


def test_a_time_series_panel_gets_one_row_per_day_of_its_range(serve, small_visits):
    srv = serve(cache_ttl=300)
    # generateAggregateTimeSeriesQuery with $__timeInterval, $__fromTime and $__toTime expanded
    sql = (f'SELECT toStartOfInterval(toDateTime(visit_date), INTERVAL 86400 second) as "time", count(*) '
           f'FROM "{small_visits}"."visits" WHERE ( visit_date >= toDateTime({FROM}) AND visit_date <= '
           f'toDateTime({TO}) ) GROUP BY time ORDER BY time ASC LIMIT 1000 FORMAT JSON')
    response, data = post(srv, sql)
    body = json.loads(data)
    assert [c["type"] for c in body["meta"]][0] == "DateTime"
    assert [row["time"] for row in body["data"]] == [f"2026-03-0{d} 00:00:00" for d in range(1, 8)]
    assert json.loads(response.getheader("X-Dpch-Cost"))["epsilon"] > 0


def test_a_panel_written_with_now_is_one_query_for_the_cache(serve):
    """The text as written names the release: a refresh of a now()-relative panel within the TTL is
    a cache hit, though its folded instant moved."""
    srv = serve(cache_ttl=300)
    sql = ("SELECT toStartOfMonth(visit_date) AS m, count() FROM visits "
           "WHERE visit_date >= today() - INTERVAL 3650 DAY GROUP BY m ORDER BY m")
    first, _ = post(srv, sql)
    again, _ = post(srv, sql)
    assert (first.getheader("X-Dpch-Cache"), again.getheader("X-Dpch-Cache")) == ("miss", "hit")


def test_superset_time_grains_through_the_clickhousedb_dialect(serve, small_visits):
    """Superset's chart query — a grain from its ClickHouse engine spec (_time_grain_expressions, cited
    in tests/sql/fixtures/bi_time.toml) inline in SELECT and GROUP BY, the range as convert_dttm writes
    it — through clickhouse-connect's SQLAlchemy dialect and pandas.read_sql, one row per week."""
    sqlalchemy = pytest.importorskip("sqlalchemy", reason="sqlalchemy is not installed")
    pandas = pytest.importorskip("pandas", reason="pandas is not installed")
    pytest.importorskip("clickhouse_connect.cc_sqlalchemy", reason="clickhouse-connect's SQLAlchemy dialect missing")
    grain = "toMonday(toDateTime(visit_date))"
    sql = (f"SELECT {grain} AS __timestamp, count(*) AS count FROM visits "
           f"WHERE visit_date >= toDate('2026-03-02') AND visit_date < toDate('2026-03-30') "
           f"GROUP BY {grain} ORDER BY __timestamp LIMIT 10000")
    engine = sqlalchemy.create_engine(f"clickhousedb://grafana:bi-pw@127.0.0.1:{serve().port}/{small_visits}")
    try:
        frame = pandas.read_sql(sql, engine)
    finally:
        engine.dispose()
    assert [str(d)[:10] for d in frame["__timestamp"]] == ["2026-03-02", "2026-03-09", "2026-03-16", "2026-03-23"]
    assert list(frame.columns) == ["__timestamp", "count"]


def test_every_grafana_macro_over_http(serve, small_visits, keeper):
    """Each panel of the fixture (every macro the plugin expands) over HTTP: answered, with every
    non-empty bucket ClickHouse finds among the released keys, and no key outside the panel's range."""
    from tests.sql.test_time import DDL, FIXTURE, ROWS, grafana

    keeper.command(DDL.format(db=f"`{small_visits}`"))
    keeper.command(ROWS.format(db=f"`{small_visits}`"))
    srv = serve()
    start = datetime.fromtimestamp(FIXTURE["range"]["from"], UTC).replace(tzinfo=None)
    end = datetime.fromtimestamp(FIXTURE["range"]["to"], UTC).replace(tzinfo=None)
    for case in FIXTURE["grafana"]:
        sql = grafana(case["sql"])
        _, data = post(srv, sql + " SETTINGS dp_epsilon = 0.1 FORMAT JSONCompact")
        body = json.loads(data)
        if not any(word in sql for word in ("GROUP BY",)):
            assert len(body["data"]) == 1, case["name"]
            continue
        released = {datetime.fromisoformat(str(row[0])) for row in body["data"]}
        raw = {datetime.fromisoformat(str(r[0])) for r in keeper.query_rows(
            sql.replace("FROM events", f"FROM `{small_visits}`.events"))}
        assert raw <= released, (case["name"], sorted(raw - released)[:3])
        assert all(start.date() <= moment.date() <= end.date() for moment in released), case["name"]


def test_grafanas_row_limit_setting_limits_the_released_rows(serve):
    """Grafana's "row limit" option sends ClickHouse's setting ``limit`` (grafana/clickhouse-datasource,
    pkg/plugin/driver.go at 02c908d1, MutateQuery): applied to the rows written out, after the release
    (post-processing), as ClickHouse applies it; ``offset`` too; 0 is no limit; a value that is not a
    number of rows is refused in words."""
    srv = serve(cache_ttl=300)
    sql = "SELECT visit_date AS d, count() AS n FROM visits GROUP BY d ORDER BY d LIMIT 10 FORMAT JSONCompact"
    _, full = post(srv, sql)
    rows = json.loads(full)["data"]
    response, data = http_post(srv, sql, user="grafana", password="bi-pw", params={"limit": "3"})
    assert response.status == 200 and json.loads(data)["data"] == rows[:3]
    assert response.getheader("X-Dpch-Cache") == "hit"  # the same release, only fewer rows shown
    _, data = http_post(srv, sql, user="grafana", password="bi-pw", params={"limit": "3", "offset": "2"})
    assert json.loads(data)["data"] == rows[2:5]
    _, data = http_post(srv, sql, user="grafana", password="bi-pw", params={"limit": "0"})
    assert json.loads(data)["data"] == rows
    response, data = http_post(srv, sql, user="grafana", password="bi-pw", params={"limit": "-1"})
    assert response.status != 200 and b"Invalid value '-1' for setting limit" in data


def test_a_moving_panel_over_http_pays_only_for_its_new_buckets(serve, small_visits, keeper):
    """The release store behind the gateway (issue 28, part 1): a panel whose range moved by a day re-serves
    the days it showed (the same values) and pays for the new one; a range inside them pays nothing."""
    keeper.command(f"CREATE TABLE `{small_visits}`.daily (uid UInt64, ts DateTime COMMENT 'dp: bounds=[\"2026-01-01\", "
                   "\"2026-12-31\"]') ENGINE = MergeTree ORDER BY uid COMMENT 'dp: privacy_unit=uid, "
                   "max_rows_per_unit=50, final_after=3600'")
    keeper.command(f"INSERT INTO `{small_visits}`.daily SELECT number % 300, toDateTime('2026-03-01 00:00:00', 'UTC') "
                   "+ number * 97 % (10 * 86400) FROM numbers(6000)")
    srv = serve(cache_ttl=300)

    def panel(first: int, last: int):
        sql = (f'SELECT toStartOfInterval(toDateTime(ts), INTERVAL 86400 second) as "time", count(*) FROM daily '
               f'WHERE ( ts >= toDateTime({first}) AND ts <= toDateTime({last}) ) GROUP BY time ORDER BY time ASC '
               "LIMIT 1000 SETTINGS dp_epsilon = 0.5 FORMAT JSONCompact")
        response, data = post(srv, sql)
        return json.loads(response.getheader("X-Dpch-Cost"))["epsilon"], json.loads(data)["data"]

    day = 86400
    cost, first = panel(FROM + 3600, FROM + 4 * day)
    assert cost == 0.5 and len(first) == 5
    cost, moved = panel(FROM + day + 3600, FROM + 5 * day)
    assert cost == 0.5 and moved[:4] == first[1:]
    cost, inside = panel(FROM + 2 * day, FROM + 3 * day)
    assert cost == 0 and inside == moved[1:3]
