"""Superset's series limit through the gateway (issue 28, part 2): the chart query as Superset builds it
(``get_sqla_query``'s JOIN of a top-N subquery, labels mutated by ``ClickHouseConnectEngineSpec``; sources
cited in tests/pipeline/test_series_limit.py), sent through clickhouse-connect's SQLAlchemy dialect and
pandas as Superset reads it, and over plain HTTP for the cost header: two releases, charged together."""

from __future__ import annotations

import json

import pytest

from tests.pipeline.test_series_limit import label
from tests.server.http_post import post

GRAIN = "toStartOfDay(toDateTime(visit_date))"
SQL = (f"SELECT {GRAIN} AS {label('__timestamp')}, region AS {label('region')}, count(*) AS {label('count')} "
       f"FROM visits JOIN (SELECT region AS {label('region__')}, count(*) AS {label('mme_inner__')} FROM visits "
       f"GROUP BY region ORDER BY {label('mme_inner__')} DESC LIMIT 2) AS series_limit "
       f"ON region = {label('region__')} "
       f"WHERE visit_date >= toDate('2026-03-02') AND visit_date < toDate('2026-03-09') "
       f"GROUP BY region, {GRAIN} ORDER BY {label('count')} DESC LIMIT 10000")


def test_a_series_limited_chart_through_sqlalchemy_and_pandas(serve, small_visits):
    sqlalchemy = pytest.importorskip("sqlalchemy", reason="sqlalchemy is not installed")
    pandas = pytest.importorskip("pandas", reason="pandas is not installed")
    pytest.importorskip("clickhouse_connect.cc_sqlalchemy", reason="clickhouse-connect's SQLAlchemy dialect missing")
    engine = sqlalchemy.create_engine(f"clickhousedb://grafana:bi-pw@127.0.0.1:{serve().port}/{small_visits}")
    try:
        frame = pandas.read_sql(SQL, engine)
    finally:
        engine.dispose()
    assert list(frame.columns) == [label("__timestamp"), label("region"), label("count")]
    regions = set(frame[label("region")])
    assert len(regions) == 2 and regions <= {"north", "south", "east", "west"}  # two series, not four
    assert len(frame) == 2 * 7  # each chosen region on each day of the range


def test_the_cost_header_is_the_two_releases(serve):
    srv = serve(cache_ttl=300)
    plain, _ = post(srv, "SELECT region, count(*) FROM visits GROUP BY region FORMAT JSON",
                    user="grafana", password="bi-pw")
    response, data = post(srv, SQL + " FORMAT JSON", user="grafana", password="bi-pw")
    assert response.status == 200, data
    one = json.loads(plain.getheader("X-Dpch-Cost"))["epsilon"]
    assert json.loads(response.getheader("X-Dpch-Cost"))["epsilon"] == pytest.approx(2 * one)
    again, _ = post(srv, SQL + " FORMAT JSON", user="grafana", password="bi-pw")  # a refresh: free
    assert again.getheader("X-Dpch-Cache") == "hit"
    assert json.loads(again.getheader("X-Dpch-Cost"))["epsilon"] == 0.0
