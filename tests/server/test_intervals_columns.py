"""Issue 15 part 3: ``SETTINGS dp_intervals = 'columns'`` adds ``<c>_lo`` and ``<c>_hi`` after each
noisy column, so an ordinary client (a BI chart) can draw error bars. The bounds are the
release's own intervals (compared with the :class:`dpch.Release` of the same release, read through
``dpch://``); keys, exact columns and quantiles get none; without the setting nothing changes."""

from __future__ import annotations

import base64
import http.client
import json
from urllib.parse import urlencode

import clickhouse_connect
import pytest

import dpch
from dpch.errors import ConfigError
from dpch.server import ServerConfig
from tests.server.conftest import USERS

Q = ("SELECT region, count(*) AS n, avg(spend) AS a, quantile(0.5)(spend) AS med, 1 AS one "
     "FROM visits GROUP BY region")
BOUNDED = ["region", "n", "n_lo", "n_hi", "a", "a_lo", "a_hi", "med", "one"]
TYPES = ["LowCardinality(String)", "Int64", "Float64", "Float64", "Float64", "Float64", "Float64", "Float64",
         "Float64"]


def _auth(user: str, password: str) -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()}


def post(srv, sql: str, *, params: dict | None = None, user: str = "ana", password: str = "ana-pw"):
    conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=60)
    conn.request("POST", "/?" + urlencode(params or {}), body=sql.encode(), headers=_auth(user, password))
    response = conn.getresponse()
    data = response.read()
    conn.close()
    return response, data


def json_rows(srv, sql: str, **kw) -> tuple[list[dict], list[dict], http.client.HTTPResponse]:
    response, data = post(srv, sql + " FORMAT JSON", **kw)
    assert response.status == 200, data
    body = json.loads(data)
    return body["meta"], body["data"], response


def ledger_rows(keeper, database: str) -> int:
    return keeper.query_rows(f"SELECT count() FROM `{database}`.dpch_ledger")[0][0]


@pytest.fixture
def released(serve, database):
    """A gateway with the cache on, and the Release of Q taken through dpch:// (one charge)."""
    srv = serve(cache_ttl=300, users={**USERS, "chart": {"password": "chart-pw", "analyst": "ana",
                                                         "dp_intervals": "columns"}})
    with dpch.connect(f"dpch://127.0.0.1:{srv.port}/{database}", analyst="ana", password="ana-pw") as remote:
        release = remote.query(Q)
    assert release.columns == ["region", "n", "a", "med", "one"] and release.cost.epsilon > 0
    return srv, release


def _expected(release) -> list[list]:
    """The release's rows with each noisy column's interval after it (n and a; not region, med, one)."""
    return [[row[0], row[1], *ivs[1], row[2], *ivs[2], row[3], row[4]]
            for row, ivs in zip(release.rows, release.intervals, strict=True)]


def test_default_output_is_unchanged(released):
    srv, release = released
    meta, rows, response = json_rows(srv, Q)
    assert [m["name"] for m in meta] == ["region", "n", "a", "med", "one"]
    assert response.getheader("X-Dpch-Cache") == "hit"
    assert response.getheader("X-Dpch-Release-Id") == release.release_id


def test_columns_in_json_equal_the_release_intervals(released):
    srv, release = released
    meta, rows, response = json_rows(srv, Q + " SETTINGS dp_intervals = 'columns'")
    assert [m["name"] for m in meta] == BOUNDED and [m["type"] for m in meta] == TYPES
    # the same release, served from the cache: presentation never costs or re-draws anything
    assert response.getheader("X-Dpch-Cache") == "hit" and response.getheader("X-Dpch-Release-Id") == release.release_id
    assert json.loads(response.getheader("X-Dpch-Cost"))["epsilon"] == 0.0
    got = [[r[c] for c in BOUNDED] for r in rows]
    got = [[g[0], int(g[1]), *(float(x) for x in g[2:])] for g in got]  # JSON quotes Int64
    assert got == _expected(release)
    for g in got:  # the count's interval is symmetric around the noisy count (Laplace: n ± half-width)
        assert g[2] < g[1] < g[3] and g[1] - g[2] == pytest.approx(g[3] - g[1], rel=1e-12)


def test_columns_in_tsv_and_as_a_url_setting(released):
    srv, release = released
    response, data = post(srv, Q + " FORMAT TabSeparatedWithNamesAndTypes", params={"dp_intervals": "columns"})
    assert response.status == 200, data
    lines = [line.split("\t") for line in data.decode().splitlines()]
    assert lines[0] == BOUNDED and lines[1] == TYPES
    got = [[r[0], int(r[1]), *(float(x) for x in r[2:])] for r in lines[2:]]
    assert got == _expected(release)


def test_columns_through_clickhouse_connect_query_df(released, database):
    srv, release = released
    client = clickhouse_connect.get_client(host="127.0.0.1", port=srv.port, username="ana", password="ana-pw",
                                           database=database)
    frame = client.query_df(Q, settings={"dp_intervals": "columns"})
    client.close()
    assert list(frame.columns) == BOUNDED
    got = [[r[0], int(r[1]), *(float(x) for x in r[2:])] for r in frame.itertuples(index=False)]
    assert got == _expected(release)


def test_user_default_and_query_setting_wins(released):
    srv, release = released
    meta, rows, _ = json_rows(srv, Q, user="chart", password="chart-pw")
    assert [m["name"] for m in meta] == BOUNDED
    meta, _, _ = json_rows(srv, Q + " SETTINGS dp_intervals = 'none'", user="chart", password="chart-pw")
    assert [m["name"] for m in meta] == ["region", "n", "a", "med", "one"]
    meta, _, _ = json_rows(srv, Q, user="chart", password="chart-pw", params={"dp_intervals": "none"})
    assert [m["name"] for m in meta] == ["region", "n", "a", "med", "one"]
    meta, _, _ = json_rows(srv, Q)  # ana, same analyst, no default: unchanged
    assert [m["name"] for m in meta] == ["region", "n", "a", "med", "one"]


def test_explain_gets_no_bounds(released):
    srv, _ = released
    meta, rows, _ = json_rows(srv, f"EXPLAIN DP {Q}", user="chart", password="chart-pw")
    assert [m["name"] for m in meta] == ["explain"] and rows


def test_collision_and_bad_value_are_refused_before_any_charge(released, keeper, database):
    srv, _ = released
    before = ledger_rows(keeper, database)
    response, data = post(srv, "SELECT count(*) AS n, sum(pages) AS n_lo FROM visits SETTINGS dp_intervals = 'columns'")
    assert response.status != 200 and b"n_lo" in data and b"rename" in data, data
    response, data = post(srv, "SELECT count(*) AS n FROM visits SETTINGS dp_intervals = 'rows'")
    assert response.status != 200 and b"dp_intervals must be one of" in data, data
    assert ledger_rows(keeper, database) == before
    # negative control: without the setting the first query is an ordinary (charged) release
    response, data = post(srv, "SELECT count(*) AS n, sum(pages) AS n_lo FROM visits")
    assert response.status == 200, data
    assert ledger_rows(keeper, database) == before + 1


def test_server_config_checks_dp_intervals():
    with pytest.raises(ConfigError, match="dp_intervals must be one of"):
        ServerConfig.from_mapping({"users": {"u": {"password": "p", "dp_intervals": "bars"}}})
    config = ServerConfig.from_mapping({"users": {"u": {"password": "p", "dp_intervals": "columns"}}})
    assert config.users["u"].dp_intervals == "columns"
