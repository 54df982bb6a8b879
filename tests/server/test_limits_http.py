"""The planner's limits through ``dpch serve`` (issue 24, "Limits on the planner itself"): the gateway
parses a query for its own paths (ledger views, metadata) before the DP path does, so the limits on
size and nesting are checked first there too. 300 nested calls answered 500 (RecursionError) for a
DP query, a metadata query and a ledger view alike; each is now a ClickHouse-style refusal naming the
limit, and nothing is charged."""

from __future__ import annotations

import pytest

from tests.server.http_post import post


def _nested(depth: int) -> str:
    text = "toDate('2026-01-01')"
    for _ in range(depth):
        text = f"addDays({text}, 1)"
    return text


@pytest.mark.parametrize(("sql", "says"), [
    (f"SELECT count(*) FROM visits WHERE visit_date > {_nested(300)}", "nests brackets 301 levels deep"),
    ("SELECT count() FROM system.tables WHERE " + "(" * 300 + "1" + ")" * 300, "nests brackets 300 levels deep"),
    ("SELECT * FROM dpch.budget WHERE " + "(" * 300 + "1" + ")" * 300, "nests brackets 300 levels deep"),
    ("SELECT count(*) FROM visits WHERE visit_date" + " + INTERVAL 1 DAY" * 4250 + " > toDate('2026-01-01')",
     "more than 64 levels deep"),
    ("SELECT count() FROM system.tables WHERE " + "NOT " * 3000 + "1", "nested too deeply for dpch's planner"),
])
def test_a_query_past_the_limits_is_refused_in_words_and_nothing_is_charged(serve, sql, says):
    srv = serve(cache_ttl=0)
    response, body = post(srv, sql)
    text = body.decode()
    assert 400 <= response.status < 500, text[:300]
    assert says in text and "RecursionError" not in text
    assert srv.gateway.session(srv.config.users["ana"], None).budget().spent.epsilon == 0.0
