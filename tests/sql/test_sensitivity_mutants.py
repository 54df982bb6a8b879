"""Sensitivity cases that surviving mutants showed were never exercised (issue 12, mutation score).

Every expected value is either the sensitivity formula of :mod:`dpch.sql.aggregates` (sum:
k·max(|lo|, |hi|); a join of two private tables: rows per unit ≤ k1·k2) or measured on real
chdb: the exact (pre-noise) aggregate of a table and of its neighbour with one worst-case unit
added. Survivors this kills: ``abs(lo)`` → ``lo`` in ``Interval.magnitude``; a private⋈private
join read without its per-side caps, or capped at k1/k2 instead of k1·k2; the ``USING`` branch
of the private-join guard.
"""

from __future__ import annotations

import math

import pytest

from dpch.accounting.budget import Budget
from dpch.errors import QueryRejected
from dpch.pipeline import execute
from dpch.sql.rewrite import emit_sql
from tests.helpers import CAP_KEY, make_table

K1, K2 = 2, 3
#: rows per unit far above both caps, so an uncapped read is visible
MANY = 6


def _exact(session, sql: str) -> dict[str, tuple[float, float]]:
    """{measure: (declared ℓ1 sensitivity, exact value)} of a one-group query, computed by chdb."""
    plan, _ = session.plan(sql)
    values = execute.exact(session.engine, plan, emit_sql(plan, session.engine.database), CAP_KEY).measures
    return {m.name: (m.sensitivity, float(values[m.name][0])) for m in plan.measures}


def _moves(session, template: str, neighbour_rows: dict[str, list[tuple]], names: dict[str, list[str]]):
    """(declared sensitivity, |change|) per measure when ``neighbour_rows`` are added to the tables."""
    before = _exact(session, template)
    for table, rows in neighbour_rows.items():
        session.engine.insert(table, rows, names[table])
    after = _exact(session, template)
    return {name: (sens, abs(after[name][1] - value)) for name, (sens, value) in before.items()}


# ------------------------------------------------------------------ sums with |lo| > |hi|

SKEWED = "uid UInt64, x Float64 COMMENT 'dp: bounds=[-10, 5]', n Int32 COMMENT 'dp: bounds=[-7, 2]'"
SKEWED_NAMES = ["uid", "x", "n"]


@pytest.fixture
def skewed(connect):
    session = connect(analyst="mutants", default_budget=Budget(100.0, 1e-6))
    rows = [(u, float(u % 7) - 4.0, (u % 5) - 3) for u in range(1, 21)]
    make_table(session, SKEWED, rows, SKEWED_NAMES, name="s", comment=f"dp: privacy_unit=uid, max_rows_per_unit={K1}")
    return session


def test_sum_sensitivity_uses_the_larger_magnitude_when_it_is_the_lower_bound(skewed):
    """bounds [−10, 5]: Δ1 = k·max(|−10|, |5|) = 2·10, and a unit of rows at −∞ (clamped to −10) reaches it."""
    moved = _moves(skewed, "SELECT sum(x), sum(n) FROM s",
                   {"s": [(999, -1e12, -(2**31))] * MANY}, {"s": SKEWED_NAMES})
    (sens_x, move_x), (sens_n, move_n) = moved["m0"], moved["m1"]
    assert sens_x == K1 * max(abs(-10), abs(5))
    assert sens_n == K1 * max(abs(-7), abs(2))
    # tight: the clamped worst-case unit moves each sum by exactly its sensitivity
    assert move_x == pytest.approx(sens_x, abs=1e-9)
    assert move_n == pytest.approx(sens_n, abs=1e-9)


def test_sum_of_a_negated_skewed_value_uses_the_magnitude_too(skewed):
    """−x lies in [−5, 10]; abs(x) in [0, 10]: the translated intervals keep the magnitude 10."""
    moved = _moves(skewed, "SELECT sum(-x), sum(abs(x)) FROM s",
                   {"s": [(998, -1e12, 0)] * MANY}, {"s": SKEWED_NAMES})
    for sens, move in moved.values():
        assert sens == K1 * 10
        assert move == pytest.approx(sens, abs=1e-9)


# ------------------------------------------------------------------ private ⋈ private joins

LEFT = "uid UInt64, x Float64 COMMENT 'dp: bounds=[-1, 4]'"
RIGHT = "uid UInt64, y Float64 COMMENT 'dp: bounds=[0, 2]'"
NAMES = {"a": ["uid", "x"], "b": ["uid", "y"]}


@pytest.fixture
def joined(connect):
    session = connect(analyst="mutants")
    make_table(session, LEFT, [(u, float(u % 4), ) for u in range(1, 16) for _ in range(u % 3 + 1)], NAMES["a"],
               name="a", comment=f"dp: privacy_unit=uid, max_rows_per_unit={K1}")
    make_table(session, RIGHT, [(u, float(u % 2)) for u in range(5, 25) for _ in range(u % 4 + 1)], NAMES["b"],
               name="b", comment=f"dp: privacy_unit=uid, max_rows_per_unit={K2}")
    return session


def _worst_unit() -> dict[str, list[tuple]]:
    """One new unit with MANY rows on each side, at the bounds' largest magnitudes."""
    return {"a": [(777, 1e9)] * MANY, "b": [(777, 1e9)] * MANY}


@pytest.mark.parametrize("join", [
    "a JOIN b ON a.uid = b.uid", "a JOIN b USING (uid)", "a AS p JOIN b AS q ON q.uid = p.uid",
])
def test_private_join_rows_per_unit_are_k1_times_k2(joined, join):
    """Each side is capped before the join, so one unit contributes at most k1·k2 joined rows;
    a unit with MANY > k rows on both sides moves count() by exactly k1·k2 and sum(x) by k1·k2·4."""
    moved = _moves(joined, f"SELECT count(*), sum(x), sum(y) FROM {join}", _worst_unit(), NAMES)
    (sens_c, move_c), (sens_x, move_x), (sens_y, move_y) = moved["m0"], moved["m1"], moved["m2"]
    assert sens_c == K1 * K2
    assert sens_x == K1 * K2 * 4
    assert sens_y == K1 * K2 * 2
    assert move_c == K1 * K2  # an uncapped read would move it by MANY² = 36
    assert move_x == pytest.approx(sens_x)
    assert move_y == pytest.approx(sens_y)


def test_private_join_using_gives_the_same_exact_values_as_on(joined):
    on = _exact(joined, "SELECT count(*), sum(x) FROM a JOIN b ON a.uid = b.uid")
    using = _exact(joined, "SELECT count(*), sum(x) FROM a JOIN b USING (uid)")
    assert on == using
    assert on["m0"][1] > 0  # negative control: the tables do share units


@pytest.mark.parametrize("join", [
    "a JOIN b USING (x)",             # not the unit column (and not on both sides)
    "a JOIN b USING (uid, x)",        # more than the unit
    "a JOIN b ON a.uid = b.y",        # one side is not a unit
    "a JOIN b ON a.x = b.y",
])
def test_private_join_on_anything_but_the_units_is_refused(joined, join):
    with pytest.raises(QueryRejected):
        joined.plan(f"SELECT count(*) FROM {join}")


@pytest.mark.parametrize("sql", ["SELECT sumIf(x) FROM s", "SELECT avgIf(x, x > 0, n > 0) FROM s",
                                 "SELECT varPop(x, n) FROM s"])
def test_aggregates_with_the_wrong_number_of_arguments_are_refused_clearly(skewed, sql):
    with pytest.raises(QueryRejected, match=r"takes \d argument"):
        skewed.plan(sql)


def test_centred_sums_of_avg_and_variance_use_the_half_width(skewed):
    """aggregates.py table: avg → Σ(e − mid) with Δ = k·r; var → count k, Σ(e − mid) k·r,
    Σ(e − mid)² k·r², r = (hi − lo)/2 = 7.5 for bounds [−10, 5]; a unit of rows at −10 reaches each."""
    r = (5 - (-10)) / 2
    moved = _moves(skewed, "SELECT avg(x), varPop(x) FROM s",
                   {"s": [(997, -1e12, 0)] * MANY}, {"s": SKEWED_NAMES})
    sens = sorted(s for s, _ in moved.values())
    assert sens == sorted([K1 * r, K1, K1 * r * r])  # Σ(e − mid) and count are shared by avg and var
    for s, move in moved.values():
        assert move == pytest.approx(s, rel=1e-9)


@pytest.mark.parametrize("aggregate", ["varPop(x)", "varSamp(x)", "stddevPop(x)"])
def test_variance_alone_has_its_own_centred_sensitivities(skewed, aggregate):
    """The variance's measures without an avg beside it (issue 31: paired with avg, whose identical
    Σ(e − mid) measure is shared, a var-only mutant k·r → k/r went unnoticed): count k, Σ(e − mid) k·r,
    Σ(e − mid)² k·r², and a unit of rows at −10 moves each by exactly that."""
    r = (5 - (-10)) / 2
    moved = _moves(skewed, f"SELECT {aggregate} FROM s", {"s": [(997, -1e12, 0)] * MANY}, {"s": SKEWED_NAMES})
    sens = sorted(s for s, _ in moved.values())
    assert sens == sorted([K1 * r, K1, K1 * r * r])
    for s, move in moved.values():
        assert move == pytest.approx(s, rel=1e-9)


def test_if_takes_the_union_of_its_branches_bounds(skewed):
    """if(c, n, x): value in [−7, 2] ∪ [−10, 5] = [−10, 5], Δ = k·10; a unit whose rows take
    the x branch at −10 reaches it."""
    moved = _moves(skewed, "SELECT sum(if(n > 0, n, x)) FROM s",
                   {"s": [(996, -1e12, -5)] * MANY}, {"s": SKEWED_NAMES})
    ((sens, move),) = moved.values()
    assert sens == K1 * 10
    assert move == pytest.approx(sens)


def test_a_comparison_is_a_0_1_value(skewed):
    """x > 0 lies in [0, 1]: sum → Δ = k, avg → Σ(e − ½) with Δ = k·½ (aggregates.py table)."""
    plan, _ = skewed.plan("SELECT sum(x > 0), avg(x > 0) FROM s")
    sens = sorted(m.sensitivity for m in plan.measures)
    assert sens == sorted([K1 * 1.0, K1 * 0.5, K1])  # sum, centred sum, count
    moved = _moves(skewed, "SELECT sum(x > 0) FROM s", {"s": [(995, 4.0, 0)] * MANY}, {"s": SKEWED_NAMES})
    assert moved["m0"] == (K1, K1)


def test_non_finite_values_count_as_zero_when_zero_is_within_the_bounds(skewed):
    moved = _moves(skewed, "SELECT sum(x) FROM s", {"s": [(994, math.nan, 0), (994, math.inf, 0)]},
                   {"s": SKEWED_NAMES})
    assert moved["m0"][1] == 0.0


@pytest.mark.parametrize("level", ["0", "1", "0.0", "1.0"])
def test_quantile_levels_0_and_1_are_accepted(skewed, level):
    skewed.plan(f"SELECT quantile({level})(x) FROM s")


def test_quantile_of_an_integer_column_is_released_on_its_integer_grid(skewed):
    """n in [−7, 2] has 10 integer candidates (step 1); at a large ε the exponential mechanism
    returns the true median of the 20 units' values (computed here) with overwhelming probability."""
    values = sorted((u % 5) - 3 for u in range(1, 21))
    median = values[len(values) // 2 - 1]  # ClickHouse's quantile(0.5) on an even count: the lower middle
    release = skewed.query("SELECT quantile(0.5)(n) FROM s", epsilon=30.0)
    got = release.rows[0][0]
    assert float(got).is_integer() and -7 <= got <= 2
    assert abs(got - median) <= 1


@pytest.mark.parametrize(("expr", "magnitude"), [
    ("CASE WHEN n > 0 THEN n ELSE x END", 10),   # [−7, 2] ∪ [−10, 5]
    ("CASE WHEN n > 0 THEN n END", 7),           # a missing ELSE is 0: [−7, 2] ∪ [0, 0]
])
def test_case_takes_the_union_of_its_branches_bounds(skewed, expr, magnitude):
    plan, _ = skewed.plan(f"SELECT sum({expr}) FROM s")
    assert [m.sensitivity for m in plan.measures] == [K1 * magnitude]


def test_abs_of_an_interval_around_zero_starts_at_zero(skewed):
    """abs(x) for x in [−10, 5] lies in [0, 10]: avg's centred sum has Δ = k·(10 − 0)/2."""
    plan, _ = skewed.plan("SELECT avg(abs(x)) FROM s")
    assert sorted(m.sensitivity for m in plan.measures) == sorted([K1, K1 * 5.0])
    plan, _ = skewed.plan("SELECT avg(abs(x + 20)) FROM s")  # [10, 25]: no zero, abs is the identity
    assert sorted(m.sensitivity for m in plan.measures) == sorted([K1, K1 * 7.5])
    plan, _ = skewed.plan("SELECT avg(abs(x - 20)) FROM s")  # [−30, −15] → [15, 30]
    assert sorted(m.sensitivity for m in plan.measures) == sorted([K1, K1 * 7.5])


def test_round_to_tens_widens_the_bounds_to_the_grid(skewed):
    """round(n, −1) for n in [−7, 2] lies in [−10, 10] (floor/ceil of the bounds on a step of 10):
    Δ = k·10, reached by a unit at −7 (rounded to −10)."""
    moved = _moves(skewed, "SELECT sum(round(n, -1)), sum(round(x, 1)) FROM s",
                   {"s": [(993, -1e12, -(2**31))] * MANY}, {"s": SKEWED_NAMES})
    (sens_n, move_n), (sens_x, move_x) = moved["m0"], moved["m1"]
    assert sens_n == K1 * 10 and move_n == pytest.approx(sens_n)
    assert sens_x == pytest.approx(K1 * 10) and move_x == pytest.approx(sens_x)


@pytest.mark.parametrize(("fn", "reference"), [("log", math.log), ("ln", math.log)])
def test_logarithms_map_the_bounds_and_run_the_same_function(skewed, fn, reference):
    """fn(x + 11) for x in [−10, 5] lies in [fn(1), fn(16)] = [0, fn(16)]: Δ = k·fn(16), and a unit
    at x = 5 moves the exact sum by exactly that (so ClickHouse ran the same logarithm)."""
    moved = _moves(skewed, f"SELECT sum({fn}(x + 11)) FROM s", {"s": [(992, 1e12, 0)] * MANY},
                   {"s": SKEWED_NAMES})
    ((sens, move),) = moved.values()
    assert sens == pytest.approx(K1 * reference(16))
    assert move == pytest.approx(sens, rel=1e-12)


@pytest.fixture
def cased(connect):
    session = connect(analyst="mutants")
    make_table(session, "uid UInt64, v Float64 COMMENT 'dp: bounds=[0, 1]', V Float64 COMMENT 'dp: bounds=[0, 50]', "
               "y Nullable(Float64) COMMENT 'dp: bounds=[0, 5]'",
               [(u, 0.5, 25.0, None if u % 3 else 1.0) for u in range(1, 10)], ["uid", "v", "V", "y"],
               name="c", comment=f"dp: privacy_unit=uid, max_rows_per_unit={K1}")
    return session


def test_column_names_match_exactly_first_then_case_insensitively(cased):
    """ClickHouse columns are case-sensitive: v and V are two columns (bounds 1 and 50)."""
    def sens(sql: str) -> list[float]:
        return [m.sensitivity for m in cased.plan(sql)[0].measures]

    assert sens("SELECT sum(v) FROM c") == [K1 * 1.0]
    assert sens("SELECT sum(V) FROM c") == [K1 * 50.0]
    assert sens("SELECT sum(c.V) FROM c") == [K1 * 50.0]
    assert sens("SELECT sum(Y) FROM c") == sens("SELECT sum(c.Y) FROM c") == [K1 * 5.0]  # no exact match: any case


@pytest.mark.parametrize("fn", ["coalesce", "ifNull"])
def test_coalesce_takes_the_union_of_its_arguments_bounds(cased, fn):
    """fn(y, −10) for y in [0, 5]: [0, 5] ∪ [−10, −10] = [−10, 5], Δ = k·10."""
    plan, _ = cased.plan(f"SELECT sum({fn}(y, -10)) FROM c")
    assert [m.sensitivity for m in plan.measures] == [K1 * 10]


def test_coalesce_of_a_null_takes_the_default(cased):
    moved = _moves(cased, "SELECT sum(coalesce(y, -10)) FROM c", {"c": [(991, 0.0, 0.0, None)] * MANY},
                   {"c": ["uid", "v", "V", "y"]})
    ((sens, move),) = moved.values()
    assert move == pytest.approx(sens)


@pytest.mark.parametrize(("join", "match"), [
    ("a JOIN (SELECT uid FROM b) AS q ON a.uid = q.uid", "tables of the database only"),
    ("a JOIN b", "ON or USING"),
    ("a JOIN plain ON a.uid = plain.uid", "no privacy policy"),
])
def test_joins_the_guard_refuses(joined, join, match):
    make_table(joined, "uid UInt64", [(1,)], ["uid"], name="plain", comment="")
    with pytest.raises(QueryRejected, match=match):
        joined.plan(f"SELECT count(*) FROM {join}")


def test_pow_0_and_round_to_decimals_keep_their_types(skewed):
    plan, _ = skewed.plan("SELECT sum(pow(x, 0)), sum(round(x, 1)), sum(round(x)) FROM s")
    assert [m.sensitivity for m in plan.measures] == [K1 * 1.0, K1 * 10.0, K1 * 10.0]
    assert [m.integer for m in plan.measures] == [False, False, True]  # round(x, 1) of a Float64 is not whole
    plan, _ = skewed.plan("SELECT sum(round(n, 1)) FROM s")
    assert [m.integer for m in plan.measures] == [True]


def test_a_negated_value_keeps_both_ends_of_its_interval(skewed):
    """−x of x in [−10, 5] is [−5, 10] — both ends, not only the magnitude (sum(−x) cannot tell an
    interval with one end wrong): avg(−x)'s centred sum has r = 7.5, and −x + 20 lies in [15, 30]."""
    plan = skewed.explain("SELECT avg(-x), sum(-x + 20) FROM s").plan
    sensitivities = sorted(m.sensitivity for m in plan.measures)
    # avg: the count (k) and Σ(−x − mid) with r = (10 − (−5))/2 = 7.5; the sum: k·30
    assert sensitivities == [K1 * 1.0, K1 * 7.5, K1 * 30.0]


@pytest.mark.parametrize(("sql", "refused"), [
    ("SELECT sum(round(x, 15)), sum(least(greatest(round(x, -15), -1), 1)) FROM s", None),
    ("SELECT sum(round(x, 16)) FROM s", "places"),
    ("SELECT sum(floor(x, -16)) FROM s", "places"),
    # x + 695 ≤ 700: exp's limit, inclusive (least() bounds the sum, so it can be calibrated)
    ("SELECT sum(least(exp(x + 695), 1)) FROM s", None),
    ("SELECT sum(least(exp(x + 695.5), 1)) FROM s", "exp() of values up to 700.5 overflows"),
    ("SELECT sum(CASE n WHEN 1 THEN x ELSE 0 END) FROM s", "simple CASE"),
])
def test_value_rule_limits_at_their_boundary(skewed, sql, refused):
    """round/floor places up to ±15 (10^-places stays a normal Float64), exp of at most 700 (Float64's
    exp overflows past 709.78): the last accepted and the first refused value of each; simple CASE is
    refused in words."""
    if refused is None:
        assert skewed.explain(sql).plan.measures
        return
    with pytest.raises(QueryRejected) as info:
        skewed.explain(sql)
    assert refused in str(info.value)
