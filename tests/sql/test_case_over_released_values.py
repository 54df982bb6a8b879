"""CASE and if() over released values (issue 28, part 2): post-processing, evaluated as ClickHouse evaluates
them, with an interval that holds the true value whichever branch the true values would take.

The noisy condition may pick another branch than the exact one would (count() > 0 on a noisy count), so the
interval is the union of every branch's interval; checked here against the exact value over random true
values inside the branches' intervals (a branch picked by the truth must be inside), with a negative control
that takes only the branch the noisy values picked.
"""

from __future__ import annotations

import random

import sqlglot
from sqlglot import exp

from dpch.sql import outputs

EXPR = "CASE WHEN __s0 > 10 THEN __s1 WHEN __s0 > 5 THEN __s2 * 2 ELSE NULL END"


def _tree(text: str) -> exp.Expr:
    tree = sqlglot.parse_one(text, read="clickhouse")
    return tree.transform(lambda n: outputs.placeholder(n.name[2:]) if isinstance(n, exp.Column) and
                          n.name.startswith("__") else n)


def test_value_is_clickhouses_first_true_branch():
    tree = _tree(EXPR)
    assert outputs.evaluate(tree, {"s0": 12.0, "s1": 3.0, "s2": 4.0}) == 3.0
    assert outputs.evaluate(tree, {"s0": 7.0, "s1": 3.0, "s2": 4.0}) == 8.0
    assert outputs.evaluate(tree, {"s0": 1.0, "s1": 3.0, "s2": 4.0}) is None
    assert outputs.evaluate(_tree("if(__s0 > 1, __s1, 0)"), {"s0": None, "s1": 5.0}) == 0.0  # NULL is not true
    simple = _tree("CASE __s0 WHEN 5 THEN 1 WHEN 6 THEN 2 ELSE 3 END")  # the subject equals a WHEN value
    assert [outputs.evaluate(simple, {"s0": v}) for v in (5.0, 6.0, 7.0, None)] == [1.0, 2.0, 3.0, 3.0]


def test_interval_holds_the_true_value_whatever_branch_the_truth_takes():
    tree = _tree(EXPR)
    env = {"s0": (4.0, 12.0), "s1": (2.0, 3.0), "s2": (1.0, 2.0)}
    lo, hi = outputs.interval(tree, env)
    rng = random.Random(5)
    for _ in range(2000):
        truth = {name: rng.uniform(*bounds) for name, bounds in env.items()}
        value = outputs.evaluate(tree, truth)
        assert value is None or lo <= value <= hi
    # negative control: the interval of the branch the noisy values took (s0 = 12: the first) misses truths
    # taken by the second branch (up to 4)
    first = outputs.interval(_tree("__s1"), env)
    assert any(v is not None and not first[0] <= v <= first[1] for v in
               (outputs.evaluate(tree, {"s0": 7.0, "s1": 2.5, "s2": s2}) for s2 in (1.5, 1.9)))
