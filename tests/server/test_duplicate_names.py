"""Over HTTP (issue 16): a result that repeats a column name (one expression written twice) in each
format exactly as ClickHouse writes it, and key releases' cost headers (free for a declared domain)."""

from __future__ import annotations

import json

import pytest

from tests.server.test_http_formats import request

DUPLICATE = "SELECT count(*) AS n, count(*) AS n FROM visits"


@pytest.mark.parametrize("fmt", ["JSON", "JSONEachRow", "JSONCompact", "TabSeparatedWithNamesAndTypes",
                                 "CSVWithNames", "Native", "RowBinary"])
def test_repeated_name_as_clickhouse_writes_it(serve, keeper, fmt):
    srv = serve(cache_ttl=300)
    response, data = request(srv, DUPLICATE + " FORMAT JSONCompact")
    assert response.status == 200, data
    value = json.loads(data)["data"][0][0]
    response, data = request(srv, DUPLICATE + f" FORMAT {fmt}")  # the cached release, in fmt
    assert response.status == 200, data
    expected = keeper.raw_query(f"SELECT toInt64({int(value)}) AS n, n", fmt)
    if fmt.startswith("JSON") and fmt != "JSONEachRow":
        expected, data = (json.loads(x) for x in (expected, data))
        for body in (expected, data):
            body.pop("statistics")
    assert data == expected


def test_key_release_over_http(serve):
    srv = serve()
    response, data = request(srv, "SELECT DISTINCT region FROM visits ORDER BY region FORMAT TabSeparated")
    assert response.status == 200, data
    assert data == b"east\nnorth\nsouth\nwest\n"
    assert json.loads(response.getheader("X-Dpch-Cost")) == {"epsilon": 0.0, "delta": 0.0}
    response, data = request(srv, "SELECT region, converted FROM visits GROUP BY region, converted "
                                  "SETTINGS dp_delta = 1e-6 FORMAT JSONCompact")
    assert response.status == 200, data
    assert json.loads(response.getheader("X-Dpch-Cost"))["delta"] == 1e-6
    assert response.getheader("X-Dpch-Mechanism") == "partition selection"
    rows = json.loads(data)["data"]
    assert rows and all(len(r) == 2 for r in rows)


def test_top_k_over_http(serve):
    """dp_select = 'top' through the gateway: k rows, the mechanism and cost headers, and an EXPLAIN
    that states the alternative of releasing every count."""
    srv = serve()
    sql = ("SELECT region, count() AS n FROM visits GROUP BY region ORDER BY n DESC LIMIT 2 "
           "SETTINGS dp_select = 'top', dp_epsilon = 0.8")
    response, data = request(srv, sql + " FORMAT JSONCompact")
    assert response.status == 200, data
    rows = json.loads(data)["data"]
    assert len(rows) == 2 and len({r[0] for r in rows}) == 2
    assert response.getheader("X-Dpch-Mechanism") == "top-k (exponential (gumbel))"
    assert json.loads(response.getheader("X-Dpch-Cost")) == {"epsilon": 0.8, "delta": 0.0}
    response, data = request(srv, "EXPLAIN DP " + sql + " FORMAT TabSeparated")
    assert response.status == 200, data
    assert b"alternative: without dp_select" in data and b"top 2 of 4 keys" in data


def test_conversions_have_clickhouses_types(serve, keeper):
    """A result column that converts a statistic has the type ClickHouse gives the same SQL (asked
    directly, on a one-row table), not Float64; its value is whole for an integer type."""
    srv = serve()
    select = "SELECT CAST(avg(spend) AS Int32) AS a, toFloat32(sum(spend)) AS s, toUInt16(count()) AS n"
    response, data = request(srv, f"{select} FROM visits SETTINGS dp_epsilon = 1 FORMAT JSONCompact")
    assert response.status == 200, data
    body = json.loads(data)
    expected = json.loads(keeper.raw_query(f"{select} FROM (SELECT 1.5 AS spend)", "JSONCompact"))
    assert body["meta"] == expected["meta"]
    a, _, n = body["data"][0]
    assert isinstance(a, int) and isinstance(n, int)


def test_a_watch_question_over_http_is_a_string_and_never_a_cached_replay(serve):
    """A watched count through the gateway: one String column 'above'/'below', typed as ClickHouse
    would type a string; asking twice (cache on) asks the watch twice — its position advances —
    rather than replaying the first answer."""
    srv = serve(cache_ttl=300)
    gateway = srv.gateway
    session = gateway.session(gateway.authenticate("ana", "ana-pw"), None)
    session.watch_create("busy", epsilon=1.0, delta=1e-6, threshold=1e6, upper=2e6, tables="visits")
    sql = "SELECT count() AS n FROM visits SETTINGS dp_watch = 'busy'"
    for asked in (1, 2):
        response, data = request(srv, sql + " FORMAT JSONCompact")
        assert response.status == 200, data
        body = json.loads(data)
        assert body["meta"] == [{"name": "n", "type": "String"}]
        assert body["data"] == [["below"]]  # 1 500 people's visits are far below a million
        assert session.watch_state("busy").position == asked
        assert response.getheader("X-Dpch-Cache") == "miss"
