"""The groups a unit keeps are chosen without bias (issue 27, item 2; docs/design.md rule 10).

Under partition selection a unit contributes to at most G = ``max_groups_per_unit`` groups. Which G
of its groups it keeps is chosen uniformly at random, per unit, under the release's key
(``dpch.sql.rewrite``'s kept groups). So, in expectation over the key, each group keeps the share G/M
of the rows of units that touch M groups, whatever the group's value, its hash, or whether it is NULL.

Tested on the exact pre-noise values (``execute.exact``: no DP noise, only the choice's randomness)
averaged over ``KEYS`` fixed keys, on a table where every heavy unit has ``PER_GROUP`` rows in each of
``GROUPS`` groups (one of them NULL) and the row cap does not bind: each group's ratio capped ÷ true
is G/M for every group. Tolerance from the choice's own variance: a unit keeps a given group with
probability p = G/M, contributing PER_GROUP rows, so a group's kept count has variance
U·PER_GROUP²·p(1−p) over U independent units, divided by KEYS for the mean; Z = 5 standard errors
(a false failure below 1e-6; the keys are fixed, so the verdict is the same on every run).

The emitted query reads each unit's groups as (unit, group) pairs, ordered per unit by
``sipHash64Keyed(<key>, unit, tuple(keys))`` and cut by ``LIMIT G BY unit`` (issue 29: one read of the
kept rows). Negative controls, each a rewrite of that order in the emitted tree: a hash of the keys
alone (dpch before issue 27: every unit preferred the same G groups), and the keys themselves (every
unit keeps its G smallest keys). Each must fail the same assertion.
"""

from __future__ import annotations

import math
import random

import pytest
from sqlglot import exp

from dpch.pipeline.execute import exact
from dpch.sql.nodes import call, render
from dpch.sql.rewrite import emit_tree

KEYS = 24
Z = 5.0
UNITS = 150
GROUPS = 12  # eleven named pages and NULL
PER_GROUP = 2
G = 3
SQL = "SELECT page, count(*) FROM views GROUP BY page SETTINGS dp_delta = 1e-6"


@pytest.fixture
def session(connect):
    s = connect(analyst="groups")
    engine = s.engine
    rows = [(u, None if g == 0 else f"p{g:02d}") for u in range(UNITS) for g in range(GROUPS)
            for _ in range(PER_GROUP)]
    random.Random(7).shuffle(rows)
    engine.command(f"CREATE TABLE {engine.table('views')} (uid UInt32, page Nullable(String)) "
                   f"ENGINE = MergeTree ORDER BY uid "
                   f"COMMENT 'dp: privacy_unit=uid, max_rows_per_unit={GROUPS * PER_GROUP}, "
                   f"max_groups_per_unit={G}'")
    engine.insert("views", rows, ["uid", "page"])
    s.policy.reload()
    return s


def _keys() -> list[tuple[int, int]]:
    rng = random.Random(27)
    return [(rng.getrandbits(64), rng.getrandbits(64)) for _ in range(KEYS)]


def _ratios(session, tree: exp.Expr, keys: list[tuple[int, int]]) -> dict:
    """Group → mean over ``keys`` of the exact kept count ÷ the true count (UNITS × PER_GROUP)."""
    plan = session.explain(SQL).plan
    text = render(tree)
    sums = {(None if g == 0 else f"p{g:02d}"): 0.0 for g in range(GROUPS)}
    for key in keys:
        data = exact(session.engine, plan, text, key)
        for group, value in zip(data.keys, data.measures["m0"], strict=True):
            sums[group[0]] += float(value)
    return {g: total / len(keys) / (UNITS * PER_GROUP) for g, total in sums.items()}


def _tolerance(keys: int) -> float:
    p = G / GROUPS
    sd = math.sqrt(UNITS * PER_GROUP**2 * p * (1 - p) / keys) / (UNITS * PER_GROUP)
    return Z * sd


def _kept_groups_subquery(tree: exp.Expr) -> exp.Select:
    pairs = tree.args["from_"].this
    assert isinstance(pairs, exp.Subquery) and pairs.alias == "__pairs"
    return pairs.this


def test_every_group_keeps_its_share(session):
    plan = session.explain(SQL).plan
    assert plan.restrict_groups and plan.groups_per_unit == G
    ratios = _ratios(session, emit_tree(plan), _keys())
    tolerance = _tolerance(KEYS)
    print(f"\nkept share by group (expected {G / GROUPS:.3f} ± {tolerance:.3f}): "
          f"{ {g: round(r, 3) for g, r in ratios.items()} }")
    assert all(abs(r - G / GROUPS) < tolerance for r in ratios.values()), ratios
    assert ratios[None] > 0  # the NULL group keeps its rows too


def test_negative_control_a_hash_of_the_keys_alone(session):
    """The order before issue 27 (``cityHash64(keys)``: the same for every unit) fails the test above."""
    tree = emit_tree(session.explain(SQL).plan)
    order = _kept_groups_subquery(tree).args["order"]
    order.expressions[1].set("this", call("cityHash64", order.expressions[1].this.expressions[-1].copy()))
    ratios = _ratios(session, tree, _keys()[:1])
    print(f"\nhash of the keys alone: {ratios}")
    assert max(abs(r - G / GROUPS) for r in ratios.values()) >= _tolerance(KEYS)


def test_negative_control_the_smallest_keys(session):
    """Each unit keeps its G smallest keys (an order by the keys themselves): the groups after them keep
    nothing, and fail the test."""
    tree = emit_tree(session.explain(SQL).plan)
    order = _kept_groups_subquery(tree).args["order"]
    order.expressions[1].set("this", order.expressions[1].this.expressions[-1].copy())
    ratios = _ratios(session, tree, _keys()[:1])
    print(f"\nsmallest keys: {ratios}")
    assert max(abs(r - G / GROUPS) for r in ratios.values()) >= _tolerance(KEYS)
