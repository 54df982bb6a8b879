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


# -- the builder's sensitivities, from the bound (docs/algorithms.md, "Per-group contribution bounds") -------

def _measure(plan, stat_kind):
    stat = next(s for s in plan.stats.values() if s.kind == stat_kind)
    return next(m for m in plan.measures if m.name == stat.measures[0])


@pytest.mark.parametrize(("sql", "l1", "l2"), [
    # one unit is one distinct unit of the whole table: 1, whatever its k = 3 rows
    ("SELECT count(DISTINCT uid) FROM t", 1.0, 1.0),
    # … and of each of the groups its rows reach: min(k, |sex|) = 2 groups, ℓ2 = √2 (one per group)
    ("SELECT sex, count(DISTINCT uid) FROM t GROUP BY sex", 2.0, 2 ** 0.5),
    # k rows add at most k distinct values; under the row cap ℓ2 = ℓ1 (they may all be in one group)
    ("SELECT count(DISTINCT age) FROM t", 3.0, 3.0),
    ("SELECT sex, count(DISTINCT age) FROM t GROUP BY sex", 3.0, 3.0),
    # per-group bound G = 2, c = 2: R = 4 rows, 2 groups; a unit is distinct in min(R, G) = 2 groups
    ("SELECT sex, count(DISTINCT uid) FROM t GROUP BY sex SETTINGS dp_bound = 'groups', dp_max_groups = 2, "
     "dp_max_rows_per_group = 2", 2.0, 2 ** 0.5),
    # … and adds at most R = 4 distinct values, packed c = 2 to a group: ℓ2 = √(2·2²)
    ("SELECT sex, count(DISTINCT age) FROM t GROUP BY sex SETTINGS dp_bound = 'groups', dp_max_groups = 2, "
     "dp_max_rows_per_group = 2", 4.0, 8 ** 0.5),
])
def test_count_distinct_sensitivities(session, sql, l1, l2):
    m = _measure(session.plan(sql)[0], "count")
    assert m.kind == "distinct" and m.integer  # a count: discrete noise
    assert m.sensitivity == pytest.approx(l1, rel=1e-12) and m.l2_sensitivity == pytest.approx(l2, rel=1e-12)
    # the declared types (the audit stores them as JSON numbers, where 3 and 3.0 differ)
    assert type(m.sensitivity) is float and type(m.l2_sensitivity) is float


def test_the_dp_bound_setting_is_what_changes_the_sensitivity(session):
    """Negative control of the table above: the same query without the per-group settings has the row cap's."""
    plain = _measure(session.plan("SELECT sex, count(DISTINCT age) FROM t GROUP BY sex")[0], "count")
    bounded = _measure(session.plan("SELECT sex, count(DISTINCT age) FROM t GROUP BY sex SETTINGS dp_bound = "
                                    "'groups', dp_max_groups = 2, dp_max_rows_per_group = 2")[0], "count")
    assert (plain.sensitivity, plain.l2_sensitivity) != (bounded.sensitivity, bounded.l2_sensitivity)


def test_the_plan_cannot_be_changed_after_its_check(session):
    """Measures and statistics are frozen: what was checked and charged is what is computed (compile →
    check → evaluate)."""
    import dataclasses

    plan, _ = session.plan("SELECT sex, avg(age) FROM t GROUP BY sex")
    with pytest.raises(dataclasses.FrozenInstanceError):
        plan.measures[0].sensitivity = 0.0
    with pytest.raises(dataclasses.FrozenInstanceError):
        next(iter(plan.stats.values())).nonnegative = True


def test_identical_statistics_are_one(session):
    """count() twice is one statistic of one measure (released once, so the two columns agree); a count and a
    sum of the same rows are two."""
    plan, _ = session.plan("SELECT count() AS a, count() AS b, sum(age) AS c FROM t")
    assert [s.kind for s in plan.stats.values()] == ["count", "sum"]
    assert len(plan.measures) == 2


def test_a_centred_sum_gets_continuous_noise(session):
    """avg(age) of an integer age: its count is an integer (discrete noise) but Σ(age − mid) is not (mid = 54
    here, but a half-integer for other bounds): integer noise on it would leave neighbours' outputs on
    disjoint lattices, an unbounded privacy loss."""
    plan, _ = session.plan("SELECT avg(age) FROM t")
    by_kind = {m.kind: m for m in plan.measures if m.name in plan.stats["s0"].measures}
    assert by_kind["count"].integer and not by_kind["sum"].integer
    plain, _ = session.plan("SELECT sum(age) FROM t")  # negative control: the plain sum of integers is exact
    assert plain.measures[0].integer


@pytest.mark.parametrize(("sql", "nonnegative"), [
    ("SELECT count() FROM t", True), ("SELECT count(DISTINCT uid) FROM t", True),
    ("SELECT sum(age - 50) FROM t", False), ("SELECT avg(age - 50) FROM t", False),
    ("SELECT varPop(age) FROM t", False),  # clipped by its own rule, to [0, r²]
])
def test_only_counts_are_clipped_at_zero(session, sql, nonnegative):
    plan, _ = session.plan(sql)
    assert [s.nonnegative for s in plan.stats.values()] == [nonnegative]


@pytest.mark.parametrize("sql", [
    "SELECT sum(age - 50) AS s, avg(age - 50) AS a FROM t",  # negative answers are released as they are
    "SELECT sex, avgIf(age, city = 'a' OR city = 'b') AS a FROM t GROUP BY sex ORDER BY sex",
])
def test_signed_and_conditional_answers_are_clickhouses(session, sql):
    assert_same_as_clickhouse(session, sql, raw_rows(session.engine, session.engine.database, sql, ("t",)))


NAMED = ("uid UInt32, std UInt8 COMMENT 'dp: bounds=[0, 100]', v Nullable(Float64) COMMENT 'dp: bounds=[0, 10]', "
         "uniq UInt8 COMMENT 'dp: bounds=[0, 100]'")


@pytest.fixture
def named(connect):
    """A column named like an aggregate (``std``), and a Nullable one."""
    s = connect(analyst="named")
    make_table(s, NAMED, [(1, 10, 1.0, 1), (1, 20, None, 2), (2, 30, 3.0, 3), (3, 40, None, 4), (4, 50, 3.0, 5)],
               ["uid", "std", "v", "uniq"])
    return s


def test_a_column_named_like_an_aggregate_is_its_argument(named):
    """median(std) is the median of the column std, not the aggregate STD(); min(std) is refused as min()."""
    plan, _ = named.plan("SELECT median(std) FROM t")
    assert [s.kind for s in plan.stats.values()] == ["quantile"]
    refusal = refused_uncharged(named, "SELECT min(std) FROM t")
    assert "min" in str(refusal) and "quantile(p)(x) with p near 0" in (refusal.hint or "")
    # the advice is chosen by the aggregate, not by its argument's name: groupBitAnd has none of its own,
    # so it gets the list of supported aggregates, not uniq()'s advice
    refusal = refused_uncharged(named, "SELECT groupBitAnd(uniq) FROM t")
    assert refusal.hint == aggregate_kinds.SUPPORTED_HINT


def test_a_nullable_value_under_a_disjunction(named):
    """avgIf(v, c1 OR c2) of a Nullable v counts the rows where (c1 OR c2) AND v IS NOT NULL: the
    disjunction is parenthesised (c1 OR (c2 AND v IS NOT NULL) counts a NULL row of c1). The values the
    conditions pick, 1 and 3, are not symmetric about the bounds' centre 5, so a wrong count moves avg."""
    sql = "SELECT avgIf(v, std < 25 OR std > 45) AS a, varPop(v) AS w FROM t"
    assert_same_as_clickhouse(named, sql, raw_rows(named.engine, named.engine.database, sql, ("t",)))


EDGES = ("uid UInt32, at_float Float64 COMMENT 'dp: bounds=[0, 1e280]', "
         "below_float Float64 COMMENT 'dp: bounds=[-9.999999999999998e+279, 0]', "
         "at_int UInt64 COMMENT 'dp: bounds=[0, 4611686018427387904]', "
         "below_int UInt64 COMMENT 'dp: bounds=[0, 4611686018427387392]'")


@pytest.fixture
def edges(connect):
    s = connect(analyst="edges")
    make_table(s, EDGES, [(1, 1.0, -1.0, 1, 1)], ["uid", "at_float", "below_float", "at_int", "below_int"])
    return s


@pytest.mark.parametrize(("column", "refusal"), [
    ("at_float", "too large for a floating-point sum"),  # |value| ≥ 1e280: 2^64 rows could overflow Float64
    ("below_float", None),  # the largest Float64 below it
    ("at_int", "too large for an exact integer sum"),  # ≥ 2^62: 2^64 rows could leave Int128
    ("below_int", None),  # 2^62 − 512, the largest Float64 below 2^62 (bounds are read as Float64)
])
def test_the_accumulator_limits_at_their_boundary(edges, column, refusal):
    sql = f"SELECT sum({column}) FROM t"
    if refusal is None:
        plan, _ = edges.plan(sql)
        assert plan.measures[0].kind == "sum"
    else:
        assert refusal in str(refused_uncharged(edges, sql))
