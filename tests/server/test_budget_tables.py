"""Issue 15 part 3: ``dpch.budget`` and ``dpch.releases`` — the requesting user's own budget and
ledger as SQL tables, with the client's column list, WHERE, ORDER BY and LIMIT evaluated by
ClickHouse over those rows only. Never another analyst's rows; reading them charges nothing."""

from __future__ import annotations

import json

import clickhouse_connect
import pytest

from tests.server.http_post import post

Q = "SELECT region, count(*) AS n FROM visits GROUP BY region"
USERS = {
    "ana": {"password": "ana-pw", "epsilon": 2.0, "delta": 1e-6},
    "bob": {"password": "bob-pw", "epsilon": 5.0, "delta": 1e-5},
    "ana_bi": {"password": "bi-pw", "analyst": "ana"},  # another gateway user paying from ana's budget
}


def rows(srv, sql: str, **kw) -> list[dict]:
    response, data = post(srv, sql + " FORMAT JSONEachRow", **kw)
    assert response.status == 200, data
    return [json.loads(line) for line in data.splitlines()]


def ledger_rows(keeper, database: str) -> int:
    return keeper.query_rows(f"SELECT count() FROM `{database}`.dpch_ledger")[0][0]


@pytest.fixture
def spent(serve):
    """ana releases at ε 0.3 and 0.2, bob at ε 0.7 (cache off: each is charged)."""
    srv = serve(cache_ttl=0, users=USERS)
    ids: dict[str, list[str]] = {"ana": [], "bob": []}
    for user, password, eps in (("ana", "ana-pw", 0.3), ("bob", "bob-pw", 0.7), ("ana", "ana-pw", 0.2)):
        response, data = post(srv, f"{Q} SETTINGS dp_epsilon = {eps}", user=user, password=password)
        assert response.status == 200, data
        ids[user].append(response.getheader("X-Dpch-Release-Id"))
    return srv, ids


def test_budget_is_the_users_own(spent):
    srv, _ = spent
    (ana,) = rows(srv, "SELECT * FROM dpch.budget")
    assert ana["analyst"] == "ana" and ana["dataset"] == "" and ana["epsilon"] == 2.0 and ana["delta"] == 1e-6
    assert ana["spent_epsilon"] == pytest.approx(0.5) and ana["remaining_epsilon"] == pytest.approx(1.5)
    assert ana["spent"] == ana["spent_epsilon"] and ana["remaining"] == ana["remaining_epsilon"]
    assert int(ana["releases"]) == 2 and ana["locked"] == 0 and ana["warning"] == ""
    (bob,) = rows(srv, "SELECT * FROM dpch.budget", user="bob", password="bob-pw")
    assert bob["analyst"] == "bob" and bob["epsilon"] == 5.0
    assert bob["spent_epsilon"] == pytest.approx(0.7) and int(bob["releases"]) == 1
    # another gateway user of the same analyst sees that analyst's budget
    (shared,) = rows(srv, "SELECT analyst, spent FROM dpch.budget", user="ana_bi", password="bi-pw")
    assert shared == {"analyst": "ana", "spent": pytest.approx(0.5)}


def test_budget_column_lists_and_clauses(spent):
    srv, _ = spent
    assert rows(srv, "SELECT spent, remaining FROM dpch.budget") == [
        {"spent": pytest.approx(0.5), "remaining": pytest.approx(1.5)}]
    assert rows(srv, "SELECT analyst FROM `dpch`.`budget` WHERE remaining_epsilon > 100") == []
    assert rows(srv, 'select round(spent_epsilon / epsilon, 2) AS share from "dpch"."budget" limit 1') == [
        {"share": 0.25}]


def test_releases_are_the_users_own_with_where_order_limit(spent):
    srv, ids = spent
    mine = rows(srv, "SELECT * FROM dpch.releases ORDER BY time")
    assert [r["release_id"] for r in mine] == ids["ana"]
    assert not {r["release_id"] for r in mine} & set(ids["bob"]), "another analyst's release was shown"
    assert [r["epsilon"] for r in mine] == [pytest.approx(0.3), pytest.approx(0.2)]
    assert {r["status"] for r in mine} == {"charged"} and {r["mechanism"] for r in mine} == {"laplace"}
    assert all(r["analyst"] == "ana" and len(r["query_hash"]) == 64 for r in mine)
    assert mine[0]["query_hash"] == mine[1]["query_hash"]  # same query, different ε
    latest = rows(srv, "SELECT release_id, epsilon FROM dpch.releases ORDER BY time DESC LIMIT 1")
    assert latest == [{"release_id": ids["ana"][1], "epsilon": pytest.approx(0.2)}]
    assert rows(srv, "SELECT toString(count()) AS c FROM dpch.releases WHERE epsilon > 0.25") == [{"c": "1"}]
    theirs = rows(srv, "SELECT release_id FROM dpch.releases", user="bob", password="bob-pw")
    assert [r["release_id"] for r in theirs] == ids["bob"]


def test_releases_chart_by_time_bucket(spent):
    """A dashboard panel of ε spent per day: time buckets and INTERVAL ranges work on the views."""
    srv, _ = spent
    buckets = rows(srv, "SELECT toStartOfDay(time) AS d, sum(epsilon) AS e FROM dpch.releases "
                        "WHERE time > now() - INTERVAL 1 DAY GROUP BY d ORDER BY d")
    assert 1 <= len(buckets) <= 2 and sum(b["e"] for b in buckets) == pytest.approx(0.5)  # 2 at midnight
    hourly = rows(srv, "SELECT toStartOfInterval(time, INTERVAL 1 HOUR) AS h, count() AS c FROM dpch.releases "
                       "WHERE time < now() - INTERVAL 1 DAY GROUP BY h")
    assert hourly == []
    response, data = post(srv, "SELECT toStartOfDay(toDateTime(dictGet('d', 'x', 1))) FROM dpch.releases")
    assert response.status != 200 and b"dictGet is not allowed" in data, data


def test_reading_the_views_is_free(spent, keeper, database):
    srv, _ = spent
    before = ledger_rows(keeper, database)
    for sql in ("SELECT * FROM dpch.budget", "SELECT * FROM dpch.releases", "SELECT spent FROM dpch.budget"):
        response, data = post(srv, sql)
        assert response.status == 200, data
        assert json.loads(response.getheader("X-Dpch-Budget-Remaining"))["epsilon"] == pytest.approx(1.5)
    assert ledger_rows(keeper, database) == before
    (ana,) = rows(srv, "SELECT spent_epsilon, toString(releases) AS n FROM dpch.budget")
    assert ana == {"spent_epsilon": pytest.approx(0.5), "n": "2"}
    # negative control: the count moves when something is charged
    assert post(srv, Q)[0].status == 200
    assert ledger_rows(keeper, database) == before + 1


def test_views_through_clickhouse_connect(spent, database):
    srv, ids = spent
    client = clickhouse_connect.get_client(host="127.0.0.1", port=srv.port, username="bob", password="bob-pw",
                                           database=database)
    result = client.query("SELECT analyst, spent_epsilon, remaining_epsilon FROM dpch.budget")
    assert result.result_rows == [("bob", pytest.approx(0.7), pytest.approx(4.3))]
    frame = client.query_df("SELECT release_id, time, epsilon FROM dpch.releases")
    assert list(frame["release_id"]) == ids["bob"] and str(frame["time"].dtype).startswith("datetime64")
    client.close()


def test_views_cannot_be_mixed_or_misnamed(spent):
    srv, _ = spent
    response, data = post(srv, "SELECT * FROM dpch.budget, visits")
    assert response.status != 200 and b"cannot read other tables" in data, data
    response, data = post(srv, "SELECT * FROM dpch.releases AS r JOIN system.tables AS t ON 1")
    assert response.status != 200 and b"cannot read other tables" in data, data
    response, data = post(srv, "SELECT * FROM dpch.ledger")
    assert response.status != 200 and b"dpch.budget and dpch.releases" in data, data
    response, data = post(srv, "SELECT * FROM dpch.budget WHERE analyst IN (SELECT name FROM file('x'))")
    assert response.status != 200, data


def test_the_views_are_listed_and_described(serve):
    """A schema browser finds them: SHOW TABLES FROM dpch lists both, DESCRIBE gives their columns."""
    srv = serve()
    assert [r["name"] for r in rows(srv, "SHOW TABLES FROM dpch")] == ["budget", "releases"]
    assert [r["name"] for r in rows(srv, "SHOW TABLES FROM dpch LIKE 'rel%'")] == ["releases"]
    described = rows(srv, "DESCRIBE TABLE dpch.budget")
    assert [r["name"] for r in described][:3] == ["analyst", "dataset", "filter"]
    assert {r["name"]: r["type"] for r in rows(srv, "DESC dpch.releases")}["time"] == "DateTime64(6, 'UTC')"
    # negative control: an unknown view is not described as one
    response, _ = post(srv, "DESCRIBE TABLE dpch.nosuch")
    assert response.status != 200
