"""Accuracy-first queries end to end on the embedded engine (issue 4): the ledger protocol
(reserve the finest grid point, settle the realized cost), the cost formulas, withheld answers,
refinement along the same Brownian path, and the filter never overspent across a mixed sequence."""

from __future__ import annotations

import math
import random
from dataclasses import replace

import numpy as np
import pytest
from scipy.special import ndtri

from dpch import Budget, BudgetExceeded
from dpch.accuracy import planner
from dpch.errors import AccuracyNotReached, QueryRejected
from dpch.mechanisms.calibration import analytic_gaussian_sigma
from dpch.mechanisms.zcdp import rho_max

COUNT = "SELECT count(*) FROM visits"
BY_REGION = "SELECT region, count(*) FROM visits GROUP BY region"


@pytest.fixture
def session(connect, visits_db, database):
    s = connect(analyst="af", filter="zcdp_bm", default_budget=Budget(10.0, 1e-6), seed=7)
    s.engine.command(f"CREATE TABLE {s.engine.table('visits')} AS {visits_db}.visits")
    s.engine.command(f"INSERT INTO {s.engine.table('visits')} SELECT * FROM {visits_db}.visits")
    return s


def _ledger(session) -> list[tuple]:
    return session.engine.query_rows(
        f"SELECT toString(release_id), seq, status, mechanism, epsilon, rho, worst_epsilon, worst_rho "
        f"FROM {session.engine.table('dpch_ledger')} ORDER BY time, seq")


def _with_visits(s):
    s.engine.command(f"CREATE TABLE {s.engine.table('visits')} AS visits_fixture.visits")
    s.engine.command(f"INSERT INTO {s.engine.table('visits')} SELECT * FROM visits_fixture.visits")
    return s


def test_absolute_count_is_one_gaussian_calibrated_to_the_target_at_the_cost_explain_shows(session):
    """A count's half-width depends on the noise scale alone, so the stop is data-independent: ONE
    Gaussian of variance σ² = (h/(z + 2^-20))²/Δ2²·Δ2² is calibrated to h (no walk, no reservation).
    Its ρ = Δ2²(z + 2^-20)²/(2h²) (zcdp_bm prefers the cheaper ρ), its ε the analytic-Gaussian ε at
    δ = 1% of the budget's; EXPLAIN shows that cost, the ledger charges it in one row, the release
    reports it."""
    h = 40.0
    explained = session.explain(COUNT, accuracy=h)
    assert explained.admissible and explained.measures[0].mechanism == "gaussian"
    release = session.query(COUNT, accuracy=h)
    rep = release.accuracy
    assert rep.met and rep.direct and not rep.uniform_intervals and rep.steps == 1
    plan, _ = session.plan(COUNT)
    delta2 = plan.measures[0].l2_sensitivity
    z = float(ndtri(0.975))
    rows = _ledger(session)
    assert len(rows) == 1
    _, seq, status, mech, eps, rho, _, _ = rows[0]
    assert (seq, status, mech) == (1, "charged", "gaussian")
    assert rho == pytest.approx(delta2**2 * (z + 2.0**-20) ** 2 / (2 * h * h), rel=1e-9)
    sigma = h / (z + 2.0**-20)
    assert analytic_gaussian_sigma(eps, 1e-8, delta2) == pytest.approx(sigma, rel=1e-6)
    assert (release.cost.epsilon, release.cost.rho) == pytest.approx((eps, rho), rel=1e-12)
    assert (explained.cost.epsilon, explained.cost.rho) == pytest.approx((eps, rho), rel=1e-12)
    lo, hi = release.intervals[0][0]
    assert h * (1 - 1e-9) < (hi - lo) / 2 <= h
    assert rep.fixed["gaussian_rho"] == pytest.approx(rho, rel=1e-6)
    assert session.budget().spent.rho == pytest.approx(rho)


def test_absolute_count_works_under_the_default_basic_filter_at_the_explained_cost(connect, visits_db):
    """Today's failure: `SELECT count() FROM visits SETTINGS dp_accuracy = 50` under `basic` said
    "needs a cap". Now: one Laplace release (cheaper in ε than the Gaussian at δ 1e-8), ε =
    Δ1·(ln 20 + 2^-20)/50, shown by EXPLAIN DP, charged, and reported as charged."""
    s = _with_visits(connect(analyst="af_basic", seed=3))
    sql = "SELECT count() FROM visits SETTINGS dp_accuracy = 50"
    text = "\n".join(r[0] for r in s.query("EXPLAIN DP " + sql).rows)
    plan, _ = s.plan(sql)
    expected = plan.measures[0].sensitivity * (math.log(20.0) + 2.0**-20) / 50
    assert f"cost: ε {expected:g}" in text and "laplace" in text
    assert s.budget().spent.epsilon == 0
    release = s.query(sql)
    assert release.mechanism == "laplace" and release.accuracy.direct
    rows = _ledger(s)
    assert len(rows) == 1 and rows[0][2] == "charged"
    assert release.cost.epsilon == pytest.approx(expected, rel=1e-9) == pytest.approx(rows[0][4], rel=1e-12)
    assert s.budget().spent.epsilon == pytest.approx(expected, rel=1e-9)
    lo, hi = release.intervals[0][0]
    assert 50 * (1 - 1e-9) < (hi - lo) / 2 <= 50


def test_a_target_the_budget_cannot_reach_is_refused_before_anything_is_spent(connect, visits_db):
    """Today under zcdp_bm with budget (1, 1e-6) `dp_accuracy = 5` on a count ran, was withheld and was
    charged the whole budget. Its exact cost is known in advance, so the filter refuses it first."""
    s = _with_visits(connect(analyst="af_unreach", filter="zcdp_bm", default_budget=Budget(1.0, 1e-6), seed=3))
    before = s.budget()
    with pytest.raises(BudgetExceeded):
        s.query(COUNT + " SETTINGS dp_accuracy = 5")
    assert _ledger(s) == []
    after = s.budget()
    assert (after.spent, after.remaining) == (before.spent, before.remaining)
    explained = s.explain(COUNT, accuracy=5.0)
    assert not explained.admissible and explained.cost.rho > before.remaining.rho


def test_a_cap_below_the_calibrated_cost_is_refused_and_writes_nothing(session):
    with pytest.raises(QueryRejected, match="dp_max_epsilon") as info:
        session.query(COUNT + " SETTINGS dp_accuracy = 0.5, dp_max_epsilon = 0.5")
    assert "nothing was spent" in info.value.message
    assert _ledger(session) == []


def test_a_noise_reduction_run_that_never_meets_the_target_is_withheld_and_charged_its_worst_case(session):
    with pytest.raises(AccuracyNotReached) as info:
        session.query(COUNT + " SETTINGS dp_relative_error = 0.00001, dp_max_epsilon = 0.5")
    err = info.value
    rows = _ledger(session)
    assert [r[2] for r in rows] == ["reserved", "charged"]
    _, _, _, _, eps, rho, worst_eps, worst_rho = rows[-1]
    assert eps == pytest.approx(worst_eps) and rho == pytest.approx(worst_rho)
    assert eps <= 0.5 * (1 + 1e-9)  # ψ(t_K) ≤ dp_max_epsilon
    assert err.charged.rho == pytest.approx(rho) and err.release_id == rows[-1][0]
    assert "withheld" in err.message and "charged" in err.message
    exact = session.engine.query_rows(f"SELECT count() FROM {session.engine.table('visits')}")[0][0]
    assert str(exact) not in str(err) and not err.report.met
    assert session.budget().spent.rho == pytest.approx(rho)


def test_release_cost_is_the_ledger_charge_under_a_worst_case_filter(connect, visits_db):
    """Today under `basic` a relative-target release reported its realized ε (0.79) while the worst case
    (2.0) was charged. `basic` counts an ex-post release at its worst case, so that is what the ledger
    row records and what the release reports; EXPLAIN shows the same worst case in advance."""
    s = _with_visits(connect(analyst="af_worst", seed=3))
    sql = COUNT + " SETTINGS dp_relative_error = 0.05, dp_max_epsilon = 2"
    explained = s.explain(sql)
    release = s.query(sql)
    assert release.accuracy.met
    _, _, status, _, eps, _, worst_eps, _ = _ledger(s)[-1]
    assert release.cost.epsilon == pytest.approx(eps, rel=1e-12) and eps <= 2.0 * (1 + 1e-9)
    assert status == "charged" and eps == pytest.approx(worst_eps, rel=1e-12)
    assert release.accuracy.ex_post_epsilon < release.cost.epsilon  # the stop came before the cap
    assert release.cost.delta == pytest.approx(s.budget().spent.delta, rel=1e-12)
    assert explained.cost.epsilon == pytest.approx(eps, rel=1e-9)
    assert s.budget().spent.epsilon == pytest.approx(eps, rel=1e-9)


def test_release_cost_is_the_realized_charge_under_zcdp_bm(session):
    release = session.query(COUNT + " SETTINGS dp_relative_error = 0.05")
    _, _, status, _, eps, rho, worst_eps, worst_rho = _ledger(session)[-1]
    assert status == "charged" and rho < worst_rho
    assert (release.cost.epsilon, release.cost.rho) == pytest.approx((eps, rho), rel=1e-12)
    assert session.budget().spent.rho == pytest.approx(rho, rel=1e-9)


def test_refine_continues_the_path_and_the_path_costs_its_final_iterate(session):
    first = session.query(BY_REGION, accuracy=200.0)
    second = session.refine()  # twice as accurate by default
    assert second.accuracy.achieved_half_width <= first.accuracy.achieved_half_width / 2
    assert second.accuracy.refinements == 1
    rows = [r for r in _ledger(session) if r[2] == "charged"]
    assert [r[3] for r in rows] == ["gaussian", "brownian-refine"]  # a direct release, then the path
    total_rho = sum(r[5] for r in rows)
    assert total_rho == pytest.approx(second.accuracy.rho, rel=1e-9)  # k/(2 t_final)
    assert session.budget().spent.rho == pytest.approx(total_rho)
    # the same path: the refined values move by far less than two independent draws would
    a = np.array([r[1] for r in first.rows])
    b = np.array([r[1] for r in second.rows])
    sigma1 = first.accuracy.achieved_half_width / float(ndtri(0.975))
    assert np.all(np.abs(a - b) < 4 * sigma1)
    third = session.refine(second.release_id, accuracy=second.accuracy.achieved_half_width / 3)
    assert third.accuracy.refinements == 2
    with pytest.raises(QueryRejected, match="cannot be refined"):
        session.refine("00000000-0000-0000-0000-000000000000")


def test_relative_and_avg_targets_use_time_uniform_intervals(session):
    rel = session.query(BY_REGION + " SETTINGS dp_relative_error = 0.1")
    assert rel.accuracy.met and rel.accuracy.uniform_intervals
    for row, ivs in zip(rel.rows, rel.intervals, strict=True):
        lo, hi = ivs[1]
        assert lo > 0 and hi / lo <= 1.1 + 1e-12, row
    avg = session.query("SELECT region, avg(spend) FROM visits GROUP BY region "
                        "SETTINGS dp_accuracy = 5, dp_confidence = 0.9")
    assert avg.accuracy.met and avg.accuracy.uniform_intervals
    assert all((iv[1][1] - iv[1][0]) / 2 <= 5 for iv in avg.intervals)
    assert avg.as_dict()["accuracy"]["confidence"] == 0.9


def test_pure_filter_calibrates_laplace_directly_and_uses_noise_reduction_for_relative_targets(connect, session):
    pure = connect(analyst="af_pure", filter="pure", default_budget=Budget(5.0, 0.0), seed=3)
    plan, _ = pure.plan(COUNT)
    direct = pure.query(COUNT, accuracy=40.0)  # no cap needed: the cost is known in advance
    assert direct.mechanism == "laplace"
    expected = plan.measures[0].sensitivity * (math.log(20.0) + 2.0**-20) / 40.0
    assert direct.cost.epsilon == pytest.approx(expected, rel=1e-9)
    assert pure.budget().spent.epsilon == pytest.approx(expected, rel=1e-9)
    with pytest.raises(QueryRejected, match="needs a cap"):
        pure.query(COUNT, relative_error=0.05)
    release = pure.query(COUNT, relative_error=0.05, max_epsilon=2.0)
    rep = release.accuracy
    assert rep.mechanism == "laplace-noise-reduction" and rep.met
    grid = np.geomspace(2.0 * 1e-3, 2.0, planner.LAPLACE_POINTS)
    assert rep.ex_post_epsilon == pytest.approx(grid[rep.steps - 1], rel=1e-6)
    # the pure filter counts an ex-post release at its worst case, dp_max_epsilon: so does the release
    assert release.cost.epsilon == pytest.approx(2.0, rel=1e-6)
    assert pure.budget().spent.epsilon == pytest.approx(2.0 + expected, rel=1e-6)


def test_exact_stop_rule_runs_reduced_above_threshold_at_twice_the_cost(connect, session):
    ex = connect(analyst="af_rat", filter="ex_post", default_budget=Budget(50.0, 1e-6), seed=5)
    release = ex.query(COUNT + " SETTINGS dp_accuracy = 60, dp_stop_rule = 'exact', dp_max_epsilon = 40")
    rep = release.accuracy
    assert rep.mechanism == "brownian+rat"
    rows = _ledger(ex)
    assert rows[-1][2] == "charged" and rows[-1][5] is None  # no zCDP view: Whitehouse et al. 2022, Cor 5.2 is ex post
    assert rows[-1][4] == pytest.approx(rep.ex_post_epsilon) and rows[-1][6] <= 40 * (1 + 1e-9)


def test_bad_accuracy_options_are_clear_errors_and_write_nothing(session):
    for sql, match in [
        (COUNT + " SETTINGS dp_relative_error = 2", "strictly between 0 and 1"),
        (COUNT + " SETTINGS dp_accuracy = -1", "positive"),
        (COUNT + " SETTINGS dp_accuracy = 5, dp_stop_rule = 'maybe'", "dp_stop_rule"),
        (COUNT + " SETTINGS dp_max_epsilon = 1", "accuracy-first"),
        ("SELECT quantile(0.5)(age) FROM visits SETTINGS dp_accuracy = 5", "quantiles"),
        ("SELECT region, avg(spend) FROM visits GROUP BY region SETTINGS dp_accuracy = 5, dp_stop_rule = 'exact'",
         "count and sum"),
    ]:
        with pytest.raises(QueryRejected, match=match):
            session.query(sql)
    assert _ledger(session) == []


def test_the_filter_is_never_overspent_across_ordinary_and_accuracy_first_queries(session):
    """A random mix under zcdp_bm with a small budget until it is exhausted: after every step the
    ledger's ρ (realized for settled runs, worst for open ones) stays within the filter's ρ budget."""
    s = session
    s.accountant.set_budget(Budget(3.0, 1e-6), filter="zcdp_bm")
    rho_budget = rho_max(3.0, 0.5e-6, printed_theorem_6=True)
    rng = random.Random(11)
    outcomes = {"released": 0, "withheld": 0, "refused": 0}
    for _ in range(40):
        kind = rng.choice(["fixed", "accuracy", "relative", "capped"])
        try:
            if kind == "fixed":
                s.query(BY_REGION, epsilon=rng.uniform(0.01, 0.2), delta=1e-8)
            elif kind == "accuracy":  # direct: refused up front if out of reach
                s.query(BY_REGION, accuracy=rng.uniform(50, 400), max_epsilon=rng.uniform(0.5, 2.0))
            elif kind == "relative":
                s.query(COUNT, relative_error=rng.uniform(0.001, 0.05), max_epsilon=rng.uniform(0.5, 2.0))
            else:  # out of reach of a noise-reduction run: withheld, charged its cap
                s.query(COUNT, relative_error=rng.uniform(1e-6, 1e-5), max_epsilon=rng.uniform(0.2, 1.0))
            outcomes["released"] += 1
        except AccuracyNotReached:
            outcomes["withheld"] += 1
        except (BudgetExceeded, QueryRejected):
            outcomes["refused"] += 1
        rows = _ledger(s)
        latest = {}
        for rid, _seq, status, _m, _e, rho, _we, worst_rho in rows:
            latest[rid] = worst_rho if status == "reserved" else rho
        assert sum(v or 0.0 for v in latest.values()) <= rho_budget * (1 + 1e-9)
        assert all(st in ("charged", "reserved") for _, _, st, *_ in rows)
    assert outcomes["refused"] > 0 and outcomes["released"] > 0 and outcomes["withheld"] > 0, outcomes
    assert s.budget().reserved.epsilon == 0  # every reservation settled
    # the last uncapped accuracy-first query takes what is left, and nothing more
    with pytest.raises((BudgetExceeded, AccuracyNotReached)):
        s.query(COUNT, accuracy=0.01)
    rows = _ledger(s)
    settled = {r[0]: r[5] for r in rows if r[2] == "charged"}
    assert sum(v or 0.0 for v in settled.values()) <= rho_budget * (1 + 1e-9)


def test_each_measure_of_a_direct_release_gets_only_the_noise_its_target_allows(connect, visits_db):
    """count and sum in one query: each is calibrated to ±h on its own, so ε = (Δ1_count + Δ1_sum)·
    (ln 20 + 2^-20)/h — not k·max Δ1 (one common scale would over-noise nothing and over-charge the
    count's share by Δ1_sum/Δ1_count)."""
    s = _with_visits(connect(analyst="af_two", seed=3))
    h = 20000.0
    sql = f"SELECT count(), sum(spend) FROM visits SETTINGS dp_accuracy = {h}"
    plan, _ = s.plan(sql)
    d1 = [m.sensitivity for m in plan.measures]
    assert d1[0] != d1[1]
    expected = sum(d1) * (math.log(20.0) + 2.0**-20) / h
    explained = s.explain(sql)
    release = s.query(sql)
    assert release.mechanism == "laplace"
    assert explained.cost.epsilon == pytest.approx(expected, rel=1e-9) == pytest.approx(release.cost.epsilon)
    assert [m.sensitivity for m in release.measures] == d1
    shares = [m.epsilon for m in release.measures]  # each measure's exact Laplace ε, Δ1_j·(ln 20 + 2^-20)/h
    assert shares == pytest.approx([d * (math.log(20.0) + 2.0**-20) / h for d in d1], rel=1e-9)
    for lo, hi in release.intervals[0]:
        assert h * (1 - 1e-9) < (hi - lo) / 2 <= h
    assert _ledger(s)[0][4] == pytest.approx(expected, rel=1e-9)


def test_explain_of_a_noise_reduction_query_shows_the_reserved_worst_case(session):
    sql = BY_REGION + " SETTINGS dp_relative_error = 0.05"
    explained = session.explain(sql)
    assert explained.admissible and explained.cost.ex_post
    assert "brownian" in explained.describe()
    session.query(sql)
    reserved = _ledger(session)[0]
    assert reserved[2] == "reserved"
    assert (explained.cost.epsilon, explained.cost.worst_rho) == pytest.approx((reserved[6], reserved[7]), rel=1e-9)


def test_accuracy_first_noise_comes_from_the_tested_mechanisms(session):
    """One Brownian mechanism and one Laplace noise reduction: the runs a query walks are
    dpch.mechanisms' BrownianRun / LNRRun, and the broken fresh-noise control is not in the package."""
    import dpch.mechanisms.brownian as brownian
    from dpch.mechanisms.lnr import LNRRun
    from dpch.mechanisms.sampling import NoiseSource
    from dpch.pipeline import accuracy_first

    assert not hasattr(brownian, "FreshNoiseRun") and not hasattr(accuracy_first, "_BrownianPath")
    plan, opts = session.plan(BY_REGION + " SETTINGS dp_relative_error = 0.05")
    afplan = accuracy_first.plan_for(session.context, plan, opts)
    values = afplan.blocks.stack({plan.measures[0].name: np.full(len(plan.group_domain), 1000.0)})
    path, _ = accuracy_first.start(afplan, values, NoiseSource(1))
    assert isinstance(path, brownian.BrownianRun)
    # the same seed through the mechanism directly gives the same iterate
    direct = brownian.BrownianMechanism(afplan.sensitivity, afplan.grid, afplan.boundary).start(values, NoiseSource(1))
    assert np.array_equal(path.next(), direct.next())
    pure = accuracy_first.plan_for(session.context, plan, replace(opts, mechanism="laplace", max_epsilon=1.0))
    lnr, _ = accuracy_first.start(pure, values, NoiseSource(1))
    assert isinstance(lnr, LNRRun)


@pytest.mark.parametrize("filter_name", ["basic", "pure", "advanced", "zcdp", "zcdp_bm", "ex_post", "pure_ex_post",
                                         "mixed"])
def test_under_every_filter_explain_predicts_the_charge_and_the_release_reports_it(connect, visits_db, filter_name):
    """Direct (absolute count target): EXPLAIN's cost = the one ledger row = Release.cost. Noise reduction
    (relative target, capped): EXPLAIN's worst case = the reservation, and Release.cost = the settled row."""
    s = _with_visits(connect(analyst=f"af_{filter_name}", filter=filter_name, default_budget=Budget(5.0, 1e-6),
                             seed=3))
    explained = s.explain(COUNT, accuracy=60.0)
    release = s.query(COUNT, accuracy=60.0)
    (row,) = _ledger(s)
    assert row[2] == "charged" and release.accuracy.direct
    assert release.cost.epsilon == pytest.approx(row[4], rel=1e-12) == pytest.approx(explained.cost.epsilon)
    assert (release.cost.rho is None) == (row[5] is None) == (explained.cost.rho is None)
    if row[5] is not None:
        assert release.cost.rho == pytest.approx(row[5], rel=1e-12) == pytest.approx(explained.cost.rho)
    sql = COUNT + " SETTINGS dp_relative_error = 0.05, dp_max_epsilon = 1"
    explained = s.explain(sql)
    release = s.query(sql)
    reserved, settled = _ledger(s)[1:]
    assert (reserved[2], settled[2]) == ("reserved", "charged") and not release.accuracy.direct
    assert explained.cost.epsilon == pytest.approx(reserved[6], rel=1e-9)
    assert release.cost.epsilon == pytest.approx(settled[4], rel=1e-12)
    if settled[5] is not None:
        assert release.cost.rho == pytest.approx(settled[5], rel=1e-12)
