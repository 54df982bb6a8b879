"""One class per aggregate (issue 25): the tables that find them, the guard that nothing else tells the
statistic kinds apart by name, and the worked example of docs/development.md, ``uniqExact``.

``uniqExact(e)`` is ClickHouse's exact count of distinct values: the same statistic as
``count(DISTINCT e)``. Added as one class and one table entry, it must plan to the very measures
(SQL and sensitivity) of ``count(DISTINCT e)``, release ClickHouse's own answer at a huge ε, and be
refused in the spellings ClickHouse refuses.
"""

from __future__ import annotations

import ast
import typing
from pathlib import Path

import pytest

from dpch.sql import aggregate_kinds
from dpch.sql.aggregates import StatKind
from tests.helpers import make_table, refused_uncharged
from tests.soundness.exact_answers import assert_same_as_clickhouse, raw_rows

COLUMNS = ("uid UInt32, sex String COMMENT 'dp: public, values=[\"f\", \"m\"]', "
           "age UInt8 COMMENT 'dp: bounds=[18, 90]', city Nullable(String) COMMENT 'dp: public'")
ROWS = [(1, "f", 30, "a"), (1, "f", 31, "b"), (2, "m", 45, None), (3, "m", 60, "a"), (3, "m", 61, "c"),
        (4, "f", 22, "a"), (5, "f", 88, None), (6, "m", 35, "b")]


@pytest.fixture
def session(connect):
    s = connect(analyst="kinds")
    make_table(s, COLUMNS, ROWS, ["uid", "sex", "age", "city"])
    return s


def _measures(session, sql):
    plan, _ = session.plan(sql)
    return [(m.kind, m.sql, m.sensitivity, m.l2_sensitivity) for m in plan.measures], \
        [(s.kind, s.nonnegative) for s in plan.stats.values()]


@pytest.mark.parametrize(("ours", "same_as"), [
    ("SELECT uniqExact(age) FROM t", "SELECT count(DISTINCT age) FROM t"),
    ("SELECT sex, uniqExact(city) FROM t GROUP BY sex", "SELECT sex, count(DISTINCT city) FROM t GROUP BY sex"),
    ("SELECT sex, uniqExact(uid) FROM t GROUP BY sex", "SELECT sex, count(DISTINCT uid) FROM t GROUP BY sex"),
])
def test_uniq_exact_plans_as_count_distinct(session, ours, same_as):
    assert _measures(session, ours) == _measures(session, same_as)


@pytest.mark.parametrize("sql", [
    "SELECT uniqExact(age) FROM t",
    "SELECT sex, uniqExact(city) FROM t GROUP BY sex ORDER BY sex",  # NULL is not a value, as in ClickHouse
    "SELECT sex, uniqExact(uid) AS units FROM t GROUP BY sex ORDER BY sex",
    # count(e) of a Nullable e counts its non-NULL values, as ClickHouse does
    "SELECT sex, count(city) AS with_city, count() AS rows FROM t GROUP BY sex ORDER BY sex",
])
def test_uniq_exact_releases_clickhouses_answer(session, sql):
    assert_same_as_clickhouse(session, sql, raw_rows(session.engine, session.engine.database, sql, ("t",)))


@pytest.mark.parametrize(("sql", "words"), [
    ("SELECT UNIQEXACT(age) FROM t", "UNIQEXACT"),  # ClickHouse's name is case-sensitive (code 46)
    ("SELECT uniqexact(age) FROM t", "uniqexact"),
    ("SELECT uniqExact(age, sex) FROM t", "uniqExact(tuple(a, b))"),
])
def test_uniq_exact_refusals(session, sql, words):
    refusal = refused_uncharged(session, sql, epsilon=1.0)
    assert words in f"{refusal} {refusal.hint or ''}"


def test_every_statistic_kind_has_its_aggregate():
    kinds = set(typing.get_args(StatKind))
    assert set(aggregate_kinds.STATISTICS) == kinds
    for kind, aggregate in aggregate_kinds.STATISTICS.items():
        assert aggregate.kind == kind
    # the first aggregate of each kind computes its statistic (a subclass such as UniqExact shares it)
    assert type(aggregate_kinds.STATISTICS["count"]) is aggregate_kinds.Count


def test_the_flags_say_what_the_kinds_are():
    flags = {k: (a.additive, a.selected, a.derived) for k, a in aggregate_kinds.STATISTICS.items()}
    assert flags == {"count": (True, False, False), "sum": (True, False, False), "avg": (False, False, True),
                     "var": (False, False, True), "quantile": (False, True, False)}


# -- the guard: no comparison of a statistic kind with its name outside the aggregates ---------------------

DPCH = Path(__file__).resolve().parents[2] / "dpch"
#: the aggregates' own modules (the builder shares a count's statistic by its kind)
ALLOWED = {"sql/aggregate_kinds.py", "sql/aggregates.py"}
KIND_NAMES = set(typing.get_args(StatKind))


def _is_measure(node: ast.expr) -> bool:
    """``m``, ``measure`` or ``measures[i]``: a measure, whose kinds (count, sum, distinct, histogram) are not
    a statistic's."""
    if isinstance(node, ast.Subscript):
        node = node.value
    return isinstance(node, ast.Name) and node.id in {"m", "measure", "measures"}


def compares_stat_kinds(source: str) -> list[int]:
    """Lines where ``source`` compares an attribute ``.kind`` with a statistic kind's name (``stat.kind ==
    'avg'``, ``s.kind in ('count', 'sum')``) or collects the kinds to test them (``{s.kind for …}``)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            names = {c.value for side in sides for c in ast.walk(side) if isinstance(c, ast.Constant)}
            kinds = [s for s in sides if isinstance(s, ast.Attribute) and s.attr == "kind"
                     and not _is_measure(s.value)]
            if kinds and names & KIND_NAMES:
                found.append(node.lineno)
        if isinstance(node, ast.SetComp) and isinstance(node.elt, ast.Attribute) and node.elt.attr == "kind":
            found.append(node.lineno)
    return sorted(set(found))


def test_no_module_outside_the_aggregates_tells_statistic_kinds_apart_by_name():
    offending = []
    for path in sorted(DPCH.rglob("*.py")):
        name = path.relative_to(DPCH).as_posix()
        if name not in ALLOWED:
            offending += [f"dpch/{name}:{line}" for line in compares_stat_kinds(path.read_text())]
    assert offending == [], f"ask dpch.sql.aggregate_kinds.statistic(stat)'s flags instead: {offending}"


def test_the_scan_finds_such_comparisons():
    """Negative control: each form the modules used before issue 25 is found; a measure's kind is not."""
    assert compares_stat_kinds("if stat.kind == 'quantile':\n    pass\n") == [1]
    assert compares_stat_kinds("x = 1\nok = s.kind not in ('count', 'sum')\n") == [2]
    assert compares_stat_kinds("kinds = {s.kind for s in plan.stats.values()}\n") == [1]
    assert compares_stat_kinds("ok = any(plan.stats[n].kind not in ('count', 'sum') for n in names)\n") == [1]
    assert compares_stat_kinds("if m.kind == 'count' or measures[0].kind == 'sum':\n    pass\n") == []


# -- the variance's measures: accumulable, and continuous -----------------------------------------------

WIDE = ("uid UInt32, big Float64 COMMENT 'dp: bounds=[-1e300, 1e300]', "
        "wide UInt64 COMMENT 'dp: bounds=[0, 9000000000000000000]', "
        "thousand UInt16 COMMENT 'dp: bounds=[0, 1000]', most UInt16 COMMENT 'dp: bounds=[0, 999]'")


@pytest.fixture
def wide(connect):
    s = connect(analyst="wide")
    make_table(s, WIDE, [(1, 1.0, 5, 10, 10), (2, -3.0, 7, 20, 20)], ["uid", "big", "wide", "thousand", "most"])
    return s


def test_a_variance_of_values_too_large_for_float64_is_refused(wide):
    refusal = refused_uncharged(wide, "SELECT varPop(big) FROM t")
    assert "too large for a floating-point sum" in str(refusal)


def test_a_variance_of_a_wide_integer_is_summed_in_float64(wide):
    """Its centred sums are Float64 (values below 1e280 fit), not exact integers (whose limit, 2^62, a
    UInt64 of bound 9e18 is past): accepted, where the exact-integer check would refuse it."""
    plan, _ = wide.plan("SELECT varPop(wide) FROM t")
    count, s1, s2 = (next(m for m in plan.measures if m.name == name) for name in plan.stats["s0"].measures)
    assert count.integer and not s1.integer and not s2.integer  # Σ(x − mid) is continuous: continuous noise
    refusal = refused_uncharged(wide, "SELECT sum(wide) FROM t")  # negative control: the exact sum refuses it
    assert "too large for an exact integer sum" in str(refusal)


def test_the_variance_measures_carry_their_sensitivities(session):
    """varPop(age), age in [18, 90] (r = 36), at most k = 3 rows per unit: count k, Σ(x − mid) k·r,
    Σ(x − mid)² k·r² (a mutant making the last k·r/r survived a value test at a huge ε)."""
    plan, _ = session.plan("SELECT varPop(age) FROM t")
    count, s1, s2 = (next(m for m in plan.measures if m.name == name) for name in plan.stats["s0"].measures)
    assert (count.sensitivity, s1.sensitivity, s2.sensitivity) == (3.0, 3.0 * 36, 3.0 * 36 * 36)
    assert (s1.l2_sensitivity, s2.l2_sensitivity) == (3.0 * 36, 3.0 * 36 * 36)  # the row cap: ℓ2 = ℓ1


def test_quantile_forms_and_grids(wide):
    """quantile(x) is the median (ClickHouse's default level), as median(x); an integer value of width below
    1 000 gets one grid point per integer, one of width 1 000 or more the 1 000-point grid; a value whose
    bounds are one point is refused (it would need no private answer)."""
    for sql in ("SELECT quantile(thousand) FROM t", "SELECT median(thousand) FROM t"):
        plan, _ = wide.plan(sql)
        assert plan.stats["s0"].quantile == 0.5
    most, _ = wide.plan("SELECT quantile(0.9)(most) FROM t")
    assert most.stats["s0"].grid == (0, 1.0, 1000)  # 0 … 999: every integer
    thousand, _ = wide.plan("SELECT quantile(0.9)(thousand) FROM t")
    assert thousand.stats["s0"].grid == (0, 1000 / 999, 1000)  # 1 001 integers: the 1 000-point grid
    refusal = refused_uncharged(wide, "SELECT quantile(0.5)(thousand * 0) FROM t")
    assert "bounds are a single point" in str(refusal)


def test_the_variance_measures_under_the_per_group_bound(session):
    """Under the per-group bound (G = 1 group, c = 2 rows) a unit moves each group's sums by c·r and c·r²,
    so ℓ2 is c·r and c·r² (ℓ1 alike with one group): the ℓ2 of Σ(x − mid)² is not c (a mutant r·r → r/r)."""
    plan, _ = session.plan("SELECT sex, varPop(age) FROM t GROUP BY sex SETTINGS dp_max_groups = 1, "
                           "dp_max_rows_per_group = 2")
    stat = next(s for s in plan.stats.values() if s.kind == "var")
    count, s1, s2 = (next(m for m in plan.measures if m.name == name) for name in stat.measures)
    assert (count.l2_sensitivity, s1.l2_sensitivity, s2.l2_sensitivity) == (2.0, 2.0 * 36, 2.0 * 36 * 36)
