"""A Grafana time-series panel end to end over HTTP (issue 15, part 2): the query builder's SQL with
its macros expanded as grafana/clickhouse-datasource expands them (commit and files cited in
tests/sql/fixtures/bi_time.toml), answered with one key per bucket of the panel's range."""

from __future__ import annotations

import base64
import http.client
import json
from datetime import UTC, datetime

FROM = int(datetime(2026, 3, 1, tzinfo=UTC).timestamp())
TO = int(datetime(2026, 3, 7, 23, 59, 59, tzinfo=UTC).timestamp())


def post(srv, sql: str):
    conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=60)
    auth = "Basic " + base64.b64encode(b"grafana:bi-pw").decode()
    conn.request("POST", "/", body=sql.encode(), headers={"Authorization": auth})
    response = conn.getresponse()
    data = response.read()
    conn.close()
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
