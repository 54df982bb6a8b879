"""The per-group contribution bound (issue 27, item 2; dpch.sql.contribution).

A GROUP BY may bound each unit to G groups and c rows in each, instead of k rows in all: sensitivities
ℓ1 = G·c and ℓ2 = √G·c rows, where the row cap gives k and k. Tested on values:

- the sensitivities of every measure kind under both bounds, against the formulas;
- the choice, from the plan and the options only: Gaussian noise (ℓ2) takes the per-group bound when
  √G·c < k, Laplace noise (ℓ1) only when G·c < k (a tie keeps the row cap, which drops less);
- the emitted SQL's exact values: with G at least the groups a unit has, each group's capped count is
  exactly Σ over units of min(rows in the group, c), whatever the key; with G smaller, each unit keeps at
  most G groups and c rows in each (checked per unit on the kept rows), and the kept groups are chosen
  at random (the monthly ratio is flat, with a negative control);
- refusals in words where it cannot apply.
"""

from __future__ import annotations

import dataclasses
import math
import random
from collections import Counter, defaultdict

import pytest
from sqlglot import exp

from dpch.errors import QueryRejected
from dpch.pipeline.execute import exact
from dpch.sql.analyze import UNIT_COLUMN
from dpch.sql.contribution import ContributionBound, better
from dpch.sql.nodes import alias, column, render
from dpch.sql.rewrite import emit_sql, emit_tree

CAP, PER_GROUP, MONTHS = 24, 2, 12
UNITS = 80


def _rows() -> list[tuple]:
    """Each unit: a random number of rows (0..6) in each month, values 0..10."""
    rng = random.Random(11)
    return [(u, m, rng.randrange(11)) for u in range(UNITS) for m in range(1, MONTHS + 1)
            for _ in range(rng.randrange(7))]


def _create(engine, name: str, extra: str = "") -> None:
    """``name`` (uid, month over a declared 12-month domain, x in [0, 10]{extra}), cap k, c per group."""
    months = ", ".join(str(m) for m in range(1, MONTHS + 1))
    engine.command(
        f"CREATE TABLE {engine.table(name)} (uid UInt32, month UInt8 COMMENT 'dp: public, values=[{months}]', "
        f"x UInt8 COMMENT 'dp: bounds=[0, 10]'{extra}) ENGINE = MergeTree ORDER BY (uid, month) "
        f"COMMENT 'dp: privacy_unit=uid, max_rows_per_unit={CAP}, max_rows_per_group={PER_GROUP}'")


@pytest.fixture
def session(connect):
    s = connect(analyst="pergroup")
    engine = s.engine
    _create(engine, "v", ", q UInt8 COMMENT 'dp: public, values=[1, 2, 3, 4]'")
    engine.insert("v", [(u, m, x, (m - 1) // 3 + 1) for u, m, x in _rows()], ["uid", "month", "x", "q"])
    s.policy.reload()
    return s


GAUSSIAN = " SETTINGS dp_delta = 1e-6"


def test_the_bound_arithmetic():
    rows = ContributionBound.row_cap(24, 12)
    assert (rows.l1_rows, rows.l2_rows) == (24, 24.0)
    groups = ContributionBound.per_group(12, 2)
    assert groups.l1_rows == 24 and groups.l2_rows == pytest.approx(math.sqrt(12) * 2, rel=1e-15)
    assert ContributionBound.per_group(3, 5).l2_rows == pytest.approx(math.sqrt(75))
    # rows not a multiple of c pack the rest into one group: 7 rows, c = 3 → 3² + 3² + 1²
    assert ContributionBound("rows", 7, 3, 3).l2_rows == pytest.approx(math.sqrt(19))
    assert ContributionBound("rows", 8, 3, 3).l2_rows == pytest.approx(math.sqrt(22))  # 3² + 3² + 2²
    assert "2 rows in each of 12 groups" in groups.rows_text and "24 rows" == rows.rows_text
    assert better([(24, 6.9)], [(24, 24)], "gaussian") and not better([(24, 6.9)], [(24, 24)], "laplace")
    assert better([(20, 6.9)], [(24, 24)], "laplace")
    assert not better([(1, 1), (30, 30)], [(2, 2), (24, 24)], "gaussian")  # one measure worse: no
    assert not better([(1, 1)], [(2, 2)], "gaussian", groups=(5, 4))  # more keys per unit: no
    assert not better([], [], "gaussian")
    assert not better([(1, 1)], [], "gaussian") and not better([(1, 1)], [(2, 2), (3, 3)], "gaussian")
    assert better([(1, 1), (2, 2)], [(1, 1), (3, 3)], "gaussian")  # one equal, one lower: better
    assert not better([(2, 2)], [(2, 2)], "gaussian")  # all equal: the row cap stays
    assert better([(1, 1)], [(2, 2)], "gaussian", groups=(4, 4))  # the same keys per unit: allowed
    with pytest.raises(dataclasses.FrozenInstanceError):
        groups.rows = 1  # type: ignore[misc]


def test_gaussian_time_series_takes_the_per_group_bound(session):
    plan = session.explain("SELECT month, count(*), sum(x), avg(x) FROM v GROUP BY month" + GAUSSIAN).plan
    assert plan.per_group and plan.bound.groups == MONTHS and plan.bound.rows_per_group == PER_GROUP
    assert not plan.restrict_groups  # G is the domain's size: every unit keeps all its months
    count, total, centred = plan.measures  # count(*) (avg's count of a non-NULL column is the same), Σx, Σ(x − 5)
    assert count.kind == "count" and total.kind == centred.kind == "sum"
    assert (count.sensitivity, count.l2_sensitivity) == (24.0, pytest.approx(2 * math.sqrt(12)))
    assert (total.sensitivity, total.l2_sensitivity) == (240.0, pytest.approx(20 * math.sqrt(12)))
    assert (centred.sensitivity, centred.l2_sensitivity) == (120.0, pytest.approx(10 * math.sqrt(12)))
    assert "2 rows in each of 12 groups" in count.derivation
    explained = session.explain("SELECT month, count(*) FROM v GROUP BY month" + GAUSSIAN)
    assert any("per group, at most 12 groups per unit and 2 rows in each" in n for n in explained.notes)
    assert "LIMIT 2 BY" in explained.sql
    row_cap = session.explain("SELECT month, count(*), sum(x), avg(x) FROM v GROUP BY month SETTINGS dp_delta = 1e-6, "
                              "dp_bound = 'rows'").plan
    assert not row_cap.per_group and {m.l2_sensitivity for m in row_cap.measures} == {24.0, 240.0, 120.0}


def test_laplace_takes_it_only_when_it_lowers_the_l1(session):
    # G·c = 12 × 2 = k: a tie, the row cap stays (it keeps more of a unit's rows in one month)
    assert not session.explain("SELECT month, count(*) FROM v GROUP BY month").plan.per_group
    # by quarter: G·c = 4 × 2 = 8 < 24
    plan = session.explain("SELECT q, count(*) FROM v GROUP BY q").plan
    assert plan.per_group and plan.bound.groups == 4 and plan.measures[0].sensitivity == 8.0


def test_the_analyst_asks_within_the_owners_bounds(session):
    plan = session.explain("SELECT month, count(*) FROM v GROUP BY month SETTINGS dp_max_groups = 3").plan
    assert plan.per_group and plan.bound.groups == 3 and plan.restrict_groups
    assert plan.measures[0].sensitivity == 6.0
    # c above the owner's is the owner's
    plan = session.explain("SELECT month, count(*) FROM v GROUP BY month SETTINGS dp_max_rows_per_group = 9").plan
    assert plan.bound.rows_per_group == PER_GROUP


@pytest.mark.parametrize(("sql", "words"), [
    ("SELECT count(*) FROM v SETTINGS dp_bound = 'groups'", "needs a GROUP BY"),
    ("SELECT month, quantile(0.5)(x) FROM v GROUP BY month SETTINGS dp_bound = 'groups'", "quantile needs the row cap"),
    ("SELECT month, count(*) FROM v GROUP BY month SETTINGS dp_bound = 'cells'", "dp_bound must be one of"),
    ("SELECT month, count(*) FROM v GROUP BY month SETTINGS dp_max_groups = 0", "positive integer"),
    # 10^200 once reached the ℓ2 arithmetic and failed there with an OverflowError, unexplained
    ("SELECT month, count(*) FROM v GROUP BY month SETTINGS dp_max_rows_per_group = 1" + "0" * 200,
     "positive integer up to 1,000,000,000"),
    ("SELECT month, count(*) FROM v GROUP BY month SETTINGS dp_max_groups = 1000000001", "up to 1,000,000,000"),
    ("SELECT month, count(*) FROM v GROUP BY month SETTINGS dp_max_groups = 2, dp_bound = 'rows'", "drop one"),
])
def test_refusals_in_words(session, sql, words):
    with pytest.raises(QueryRejected) as info:
        session.explain(sql)
    assert words in str(info.value) + (info.value.hint or "")


def test_refused_without_a_per_group_row_bound(connect):
    s = connect(analyst="pergroup2")
    engine = s.engine
    engine.command(f"CREATE TABLE {engine.table('w')} (uid UInt32, month UInt8 COMMENT 'dp: public, values=[1, 2]') "
                   "ENGINE = MergeTree ORDER BY uid COMMENT 'dp: privacy_unit=uid, max_rows_per_unit=4'")
    s.policy.reload()
    assert not s.explain("SELECT month, count(*) FROM w GROUP BY month" + GAUSSIAN).plan.per_group  # not offered
    with pytest.raises(QueryRejected, match="rows a unit may add to one group"):
        s.explain("SELECT month, count(*) FROM w GROUP BY month SETTINGS dp_bound = 'groups'")
    plan = s.explain("SELECT month, count(*) FROM w GROUP BY month SETTINGS dp_max_rows_per_group = 1").plan
    assert plan.per_group and plan.measures[0].sensitivity == 2.0


def _keys(n: int) -> list[tuple[int, int]]:
    rng = random.Random(3)
    return [(rng.getrandbits(64), rng.getrandbits(64)) for _ in range(n)]


def test_each_group_keeps_min_of_its_rows_and_c(session):
    """G = 12: no group is dropped, so the capped count per month is exactly Σ_u min(n_u,month, c)."""
    plan = session.explain("SELECT month, count(*), sum(x) FROM v GROUP BY month" + GAUSSIAN).plan
    sql = emit_sql(plan, session.engine.database)
    per_cell = Counter((u, m) for u, m, _ in _rows())
    expected = defaultdict(int)
    for (_, month), n in per_cell.items():
        expected[month] += min(n, PER_GROUP)
    for key in _keys(3):
        data = exact(session.engine, plan, sql, key)
        got = {k[0]: int(v) for k, v in zip(data.keys, data.measures["m0"], strict=True)}
        assert got == dict(expected)
    # negative control: the row cap keeps other counts
    rows_plan = session.explain("SELECT month, count(*) FROM v GROUP BY month SETTINGS dp_bound = 'rows'").plan
    data = exact(session.engine, rows_plan, emit_sql(rows_plan, session.engine.database), _keys(1)[0])
    assert {k[0]: int(v) for k, v in zip(data.keys, data.measures["m0"], strict=True)} != dict(expected)


def test_each_unit_keeps_at_most_g_groups_and_c_rows_in_each(session):
    """G = 3 < 12 months: a unit's kept rows, grouped by month, span at most G months with at most c rows
    in each (read from the emitted query's own kept rows, per unit)."""
    plan = session.explain("SELECT month, count(*) FROM v GROUP BY month SETTINGS dp_max_groups = 3").plan
    # the emitted query with the unit as a second key: the kept rows per (unit, month)
    tree = emit_tree(plan)
    tree.expressions.insert(1, alias(column(UNIT_COLUMN), "k1", quoted=False))
    tree.args["group"].expressions.append(exp.column("k1"))
    kept_sql = render(tree)
    per_cell = Counter((u, m) for u, m, _ in _rows())
    months_of = defaultdict(set)
    for (u, m) in per_cell:
        months_of[u].add(m)
    for key in _keys(3):
        rows = session.engine.run_private(kept_sql, {"dpch_cap_key0": key[0], "dpch_cap_key1": key[1]})
        kept = defaultdict(dict)
        for month, unit, n in rows:
            kept[unit][month] = n
        for unit, months in kept.items():
            assert len(months) == min(3, len(months_of[unit])), (unit, months)
            assert all(n == min(PER_GROUP, per_cell[(unit, m)]) for m, n in months.items())


def test_a_heavy_neighbour_moves_each_measure_by_at_most_its_sensitivity(connect):
    """Neighbours: a table within the bound (≤ G months, ≤ c rows each per unit) and the same plus one unit
    with 10 rows of x = 10 in every month. Under the same key the exact measures move by at most their
    ℓ1 and ℓ2 sensitivities, and by exactly that much (the heavy unit keeps G months of c rows)."""
    s = connect(analyst="pergroup3")
    engine = s.engine
    _create(engine, "n")
    rng = random.Random(5)
    base = [(u, m, rng.randrange(11)) for u in range(30) for m in rng.sample(range(1, MONTHS + 1), 3)
            for _ in range(rng.randrange(1, PER_GROUP + 1))]
    engine.insert("n", base, ["uid", "month", "x"])
    s.policy.reload()
    plan = s.explain("SELECT month, count(*), sum(x) FROM n GROUP BY month SETTINGS dp_max_groups = 3, "
                     "dp_delta = 1e-6").plan
    assert plan.per_group
    sql = emit_sql(plan, engine.database)
    keys = _keys(4)
    before = [exact(engine, plan, sql, key) for key in keys]
    engine.insert("n", [(999, m, 10) for m in range(1, MONTHS + 1) for _ in range(10)], ["uid", "month", "x"])
    after = [exact(engine, plan, sql, key) for key in keys]
    for old, new in zip(before, after, strict=True):
        for measure in plan.measures:
            was = dict(zip(old.keys, old.measures[measure.name], strict=True))
            now = dict(zip(new.keys, new.measures[measure.name], strict=True))
            moves = [float(now[k]) - float(was.get(k, 0)) for k in now]
            l1, l2 = sum(abs(d) for d in moves), math.sqrt(sum(d * d for d in moves))
            assert l1 == pytest.approx(measure.sensitivity) and l2 == pytest.approx(measure.l2_sensitivity), \
                (measure.sql, moves)
