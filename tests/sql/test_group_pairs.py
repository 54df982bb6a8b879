"""Each unit's G groups read once, as (unit, group) pairs of partial states (issue 29: partition selection
and the groups-per-unit bound read the capped rows twice and built a set of (unit, group) tuples), against
the reference form — the ``IN`` set over a second read (``emit_tree(plan, fast_cap=False)``) — under one
cap key: the same groups, the same exact measures, the same units per group.

Values are multiples of 1/4, so a sum of partial sums is exactly the sum (the comparison is exact).
A negative control keeps G + 1 groups per unit in the pairs and must differ."""

from __future__ import annotations

import random

import pytest
from sqlglot import exp

from dpch.pipeline.execute import GroupData, exact
from dpch.sql.nodes import render
from dpch.sql.rewrite import emit_tree

KEY = (0x0F1E2D3C4B5A6978, 0x1122334455667788)
G = 2
QUERIES = [
    "SELECT page, count() FROM views GROUP BY page",
    "SELECT page, sum(x), avg(x) FROM views GROUP BY page",
    "SELECT page, count(DISTINCT x) FROM views GROUP BY page",
    "SELECT page, quantile(0.5)(x) FROM views GROUP BY page",
    "SELECT page, region, count(), varPop(x) FROM views WHERE x > 1 GROUP BY page, region",
    "SELECT upper(page) AS p, count() FROM views GROUP BY p",
]


@pytest.fixture
def session(connect):
    s = connect(analyst="pairs", default_budget=None)
    engine = s.engine
    rng = random.Random(29)
    rows = [(u, rng.choice([None, "a", "b", "c", "d", "e"]), rng.choice(["n", "s"]), rng.randrange(0, 40) / 4)
            for u in range(80) for _ in range(rng.randrange(1, 9))]
    engine.command(f"CREATE TABLE {engine.table('views')} (uid UInt32, page Nullable(String), "
                   "region String COMMENT 'dp: public, values=[\"n\", \"s\"]', x Float64 COMMENT 'dp: bounds=[0, 10]') "
                   "ENGINE = MergeTree ORDER BY uid "
                   f"COMMENT 'dp: privacy_unit=uid, max_rows_per_unit=6, max_groups_per_unit={G}'")
    engine.insert("views", rows, ["uid", "page", "region", "x"])
    s.policy.reload()
    return s


def _kept_set(tree: exp.Expr) -> exp.In | None:
    """The ``(unit, keys) IN (SELECT …)`` of the reference form (a declared key's own ``IN`` list is not it)."""
    return next((node for node in tree.find_all(exp.In) if node.args.get("query") is not None), None)


def _by_key(data: GroupData) -> dict:
    return {key: (tuple(float(data.measures[m][i]) for m in sorted(data.measures)),
                  tuple(tuple(sorted(data.histograms[h][i].items())) for h in sorted(data.histograms)),
                  float(data.units[i]))
            for i, key in enumerate(data.keys)}


@pytest.mark.parametrize("sql", QUERIES)
@pytest.mark.parametrize("settings", ["dp_delta = 1e-6",
                                      "dp_delta = 1e-6, dp_bound = 'groups', dp_max_rows_per_group = 2"])
def test_the_pairs_keep_the_same_groups_and_values_as_the_in_set(session, sql, settings):
    if "quantile" in sql and "groups" in settings:
        pytest.skip("a quantile needs the row cap")
    plan = session.explain(f"{sql} SETTINGS {settings}").plan
    assert plan.restrict_groups and plan.groups_per_unit == G
    fast, reference = emit_tree(plan), emit_tree(plan, fast_cap=False)
    assert _kept_set(fast) is None and _kept_set(reference) is not None  # the rewrite is really there
    got = exact(session.engine, plan, render(fast), KEY)
    want = exact(session.engine, plan, render(reference), KEY)
    assert _by_key(got) == _by_key(want)
    assert len(got.keys) > 1


def test_negative_control_one_more_group_per_unit_differs(session):
    plan = session.explain("SELECT page, count() FROM views GROUP BY page SETTINGS dp_delta = 1e-6").plan
    reference = exact(session.engine, plan, render(emit_tree(plan, fast_cap=False)), KEY)
    broken = emit_tree(plan)
    pairs = broken.args["from_"].this.this
    pairs.args["limit"].set("expression", exp.Literal.number(G + 1))
    assert _by_key(exact(session.engine, plan, render(broken), KEY)) != _by_key(reference)
