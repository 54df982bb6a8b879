"""Stage 5, execute: the exact inputs of every declared group, equal to ClickHouse asked directly
(every unit here has at most k rows, so the cap changes nothing)."""

from __future__ import annotations

from dpch.pipeline import execute
from dpch.sql.rewrite import emit_sql
from tests.helpers import CAP_KEY


def test_exact_group_data_matches_clickhouse(session):
    plan, _ = session.plan("SELECT region, count(), sum(x) FROM t GROUP BY region")
    data = execute.exact(session.engine, plan, emit_sql(plan, session.engine.database), CAP_KEY)
    assert data.keys == [("a",), ("b",), ("c",)]
    raw = dict((r, (c, s)) for r, c, s in session.engine.query_rows(
        f"SELECT region, count(), sum(x) FROM {session.engine.table('t')} GROUP BY region"))
    counts, sums = (data.measures[m.name] for m in plan.measures[:2])
    for g, (region,) in enumerate(data.keys):
        expected = raw.get(region, (0, 0.0))
        assert counts[g] == expected[0]
        assert sums[g] == expected[1]  # every x lies within its bounds [0, 10]: the clamp changes nothing


def test_a_declared_group_without_rows_is_zero(session):
    plan, _ = session.plan("SELECT region, count() FROM t GROUP BY region")
    data = execute.exact(session.engine, plan, emit_sql(plan, session.engine.database), CAP_KEY)
    assert data.measures[plan.measures[0].name][data.keys.index(("c",))] == 0.0
