"""The independent cost check (issue 24 item 7; dpch/pipeline/cost_audit.py).

The charge used to be checked by recomposing the mechanisms' typed costs with the same ``compose()``
that built it, so a wrong ``compose`` passed its own check. Here a wrong ``compose`` — and wrong cost
formulas of the releases that do not compose (a watch's ε_post and ε_max, an accuracy-first plan's
costs) — are injected, the database staying real, and every kind of release must be refused before
its charge with nothing new in the ledger. Before the check, each of these was charged the wrong
amount.

The independent formulas are also checked against the papers' numbers (docs/algorithms.md B10, C)
to the digits given there.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

import dpch
from dpch.accounting.watches import WatchParams
from dpch.accuracy.planner import BrownianPlan, LaplacePlan
from dpch.errors import CostCheckFailed
from dpch.mechanisms.boundaries import MixtureBoundary
from dpch.mechanisms.gaussian import GaussianMechanism
from dpch.mechanisms.laplace import LaplaceMechanism
from dpch.mechanisms.partition_selection import LaplacePartitionSelection
from dpch.mechanisms.selection import GaussianReportNoisyMax
from dpch.pipeline import cost_audit
from dpch.pipeline.calibrate import calibrate
from dpch.pipeline.top_k import calibrate_top_k
from dpch.privacy import cost as cost_module
from tests.helpers import KINDS_TABLE, ledger_rows, make_kinds_table, make_table

# -- the formulas against the papers' numbers --------------------------------------------------------------

#: docs/algorithms.md B10, Gaussian report noisy max: (c, Δ, σ, d) → ε (log form; 10 digits, 7 for the last two)
RNM = [(1, 0.01, 0.3, 2, 0.1259421424), (1, 0.01, 0.3, 100, 0.3586691452), (1, 0.01, 0.3, 1000, 0.4169933488),
       (1, 0.05, 0.3, 4, 0.9801642773), (10, 1, 3, 5, 2.062608351), (1, 1 / 6946, 0.1, 365, 0.0353046),
       (1, 1 / 5564, 0.1, 829, 0.0452578)]


@pytest.mark.parametrize(("c", "sensitivity", "sigma", "d", "epsilon"), RNM)
def test_report_noisy_max_matches_b10(c, sensitivity, sigma, d, epsilon):
    digits = len(f"{epsilon:.10g}".split(".")[1])
    assert cost_audit.report_noisy_max_epsilon(c, sensitivity, sigma, d) == pytest.approx(epsilon, abs=10.0**-digits)


@pytest.mark.parametrize(("t", "threshold", "epsilon"), [
    (1, 0.5, 0.0069336), (2, 0.5, 0.0177944), (10, 0.5, 0.0486995), (200, 0.5, 0.0877017),
    (1, 1.0, 0.0119766), (50, 1.0, 0.0565056)])
def test_above_threshold_epsilon_post_matches_b10(t, threshold, epsilon):
    """B10: Δ 0.001, σ_X 0.15, σ_Z = √3σ_X, a 0, b 1 (7 digits)."""
    got = cost_audit.above_threshold_epsilon_post(t, 0.001, 0.15, math.sqrt(3) * 0.15, threshold, 0.0, 1.0)
    assert got == pytest.approx(epsilon, abs=5e-8)


def test_above_threshold_epsilon_max_matches_b10():
    """B10: Thm 7's ε_max at Δ 0.001, σ_X 0.15, ρ 0.5, δ 1e-5 is 0.0781427 (by α minimised numerically here)."""
    got = cost_audit.above_threshold_epsilon_max(0.001, 0.15, math.sqrt(3) * 0.15, 0.5, 1e-5)
    assert got == pytest.approx(0.0781427, abs=5e-8)


@pytest.mark.parametrize(("epsilon", "delta", "sigma"), [(1, 1e-5, 3.730632), (0.5, 1e-6, 8.057618),
                                                        (0.1, 1e-5, 30.749566), (2, 1e-5, 1.993812)])
def test_gaussian_epsilon_inverts_the_c_vectors(epsilon, delta, sigma):
    """docs/algorithms.md C (Balle & Wang 2018, Thm 8; σ to 7 digits): the ε of that σ is the target."""
    assert cost_audit.gaussian_epsilon(sigma, delta, 1.0) == pytest.approx(epsilon, rel=1e-6)


def test_a_gaussian_so_wide_it_is_private_at_epsilon_zero():
    """δ(0) is the total variation 2Φ(μ/2) − 1 ≈ μ/√(2π): at σ 10⁷ (μ 10⁻⁷) below δ 10⁻⁶, so ε 0."""
    assert cost_audit.gaussian_epsilon(1e7, 1e-6, 1.0) == 0.0
    assert cost_audit.gaussian_epsilon(1e5, 1e-6, 1.0) > 0.0


def test_mixture_boundary_matches_a2():
    """docs/algorithms.md A2: ψ^M at Δ2 1, δ 1e-6 with ρ* ≈ 11.58 (the table's digits: 5)."""
    psi = cost_audit.mixture_boundary(np.array([100.0, 1000.0, 10000.0]), 1.0, 11.58, 1e-6)
    assert psi == pytest.approx([0.58256, 0.18070, 0.05873], abs=2e-5)


def test_a_gaussian_whose_sigma_is_too_small_for_its_claim_is_a_problem():
    """Negative control of the one-sided Gaussian check: σ 30% below the calibrated one breaks the
    claimed (ε, δ) (its δ at ε is far above the claim)."""
    honest = GaussianMechanism(1.0, 1e-6, 1.0)
    assert cost_audit.charge_problems(honest.cost, [honest]) == []
    for factor in (0.7, 1 - 1e-4):  # far too small, and just too small (its δ at ε 1 is a little above 1e-6)
        thin = dataclasses.replace(honest)
        object.__setattr__(thin, "sigma", factor * honest.sigma)
        problems = cost_audit.charge_problems(honest.cost, [thin])
        assert any("is not (ε 1, δ 1e-06)-DP" in p for p in problems), (factor, problems)


def test_a_query_of_sensitivity_zero_keeps_its_claim():
    """Nothing is drawn for a data-independent value (Δ 0): its claimed ε is what is composed."""
    for mech in (LaplaceMechanism(0.5, 0.0), GaussianMechanism(0.5, 1e-6, 0.0)):
        assert cost_audit.charge_problems(mech.cost, [mech]) == [], mech


def test_report_noisy_max_on_a_range_that_does_not_start_at_zero():
    """Thm 8 reads the range's width c = b − a: a range [500, 1000] is audited at c 500."""
    sel = GaussianReportNoisyMax.for_epsilon(0.5, 1.0, 500.0, 1000.0, 5)
    assert cost_audit.charge_problems(sel.cost, [sel]) == []
    assert cost_audit.report_noisy_max_epsilon(500.0, 1.0, sel.sigma, 5) == pytest.approx(sel.epsilon, rel=1e-6)


def test_a_brownian_plan_without_a_boundary_is_refused(filtered):
    s = filtered("zcdp_bm")
    plan, opts = s.plan("SELECT count(*) FROM t_zcdp_bm SETTINGS dp_relative_error = 0.2, dp_max_epsilon = 5")
    from dpch.pipeline.accuracy_first import plan_for

    afplan = plan_for(s.context, plan, opts)
    with pytest.raises(CostCheckFailed):
        cost_audit.accuracy_plan_problems(dataclasses.replace(afplan, boundary=None))


def test_mixture_boundary_at_a_sensitivity_other_than_one():
    """Cross-check with the mechanism's own boundary at Δ2 2.5 (the A2 table is at Δ2 1)."""
    t = np.array([50.0, 700.0, 12_000.0])
    ours = cost_audit.mixture_boundary(t, 2.5, 7.0, 1e-7)
    assert ours == pytest.approx([MixtureBoundary(7.0, 1e-7, 2.5)(float(x)) for x in t], rel=1e-12)


def test_a_partition_selection_whose_threshold_is_too_low_is_a_problem():
    """Negative controls of the threshold check: one below the calibrated threshold releases a key of the
    added unit alone with probability above δ; one above is not the smallest (the check recomputes τ)."""
    honest = LaplacePartitionSelection(1.0, 1e-6, 2)
    assert cost_audit.charge_problems(honest.cost, [honest]) == []
    for shift, expected in ((-1, "releases a key of one unit with probability"), (1, "the smallest threshold")):
        moved = dataclasses.replace(honest)
        object.__setattr__(moved, "threshold", honest.threshold + shift)
        problems = cost_audit.charge_problems(honest.cost, [moved])
        assert any(expected in p for p in problems), problems


@pytest.mark.parametrize("epsilon", [700.0, 1e7])
def test_a_partition_selection_at_a_huge_epsilon_is_checked_not_crashed(epsilon):
    """At ε past ~745 per key exp(−1/scale) underflows to 0: the smallest threshold is 1 (a key of the unit
    alone passes none), where the logarithm of 0 raised a ValueError out of the check (found by a series-limit
    test at ε 1e7). The threshold 1 passes; 0 would release the unit's key always and is still caught."""
    honest = LaplacePartitionSelection(epsilon, 1e-6, 2)
    assert cost_audit.charge_problems(honest.cost, [honest]) == []
    moved = dataclasses.replace(honest)
    object.__setattr__(moved, "threshold", 0)
    assert cost_audit.charge_problems(honest.cost, [moved]) != []


def test_a_partition_selection_drawing_less_noise_than_its_epsilon_is_a_problem(monkeypatch):
    """Negative control of the ε check: the selection's noise (its scale) two thirds of what ε needs."""
    honest = LaplacePartitionSelection(1.0, 1e-6, 2)
    real = LaplacePartitionSelection.scale
    monkeypatch.setattr(LaplacePartitionSelection, "scale", property(lambda sel: real.fget(sel) / 1.5))
    problems = cost_audit.charge_problems(honest.cost, [honest])
    assert any("gives ε 1.5" in p for p in problems), problems


def test_a_part_without_a_zcdp_view_cannot_enter_a_fixed_cost_composition():
    with pytest.raises(CostCheckFailed):
        cost_audit.compose_terms([cost_audit.Term("an ex-post run", 1.0, 0.0, None)])


def test_a_mechanism_without_an_independent_formula_is_refused():
    problems = cost_audit.charge_problems(cost_module.PrivacyCost(1.0, 0.0, 0.5), [object()])
    assert problems and "no independent cost formula for object" in problems[0]


# -- every kind of release: honest charges pass, a wrong compose is caught before the charge ------------

TABLE = KINDS_TABLE  # one query of every kind of release runs on it

#: one query per fixed-cost kind: (kind, sql)
FIXED = [
    ("laplace", "SELECT g, count(*), sum(x) FROM t GROUP BY g"),
    ("gaussian", "SELECT g, sum(x) FROM t GROUP BY g SETTINGS dp_mechanism = 'gaussian', dp_delta = 1e-6"),
    ("quantiles", "SELECT quantile(0.5)(x), quantile(0.9)(x), count(*) FROM t"),
    ("partition selection", "SELECT occupation, count(*), avg(x) FROM t GROUP BY occupation SETTINGS dp_delta = 1e-6"),
    ("key release", "SELECT occupation FROM t GROUP BY occupation SETTINGS dp_delta = 1e-6"),
    ("top-k", "SELECT g, count() AS n FROM t GROUP BY g ORDER BY n DESC LIMIT 2 SETTINGS dp_select = 'top'"),
    ("gaussian top-k", "SELECT g FROM t GROUP BY g ORDER BY count() DESC LIMIT 2 "
                       "SETTINGS dp_select = 'top', dp_mechanism = 'gaussian', dp_score_max = 1000"),
]


@pytest.fixture
def session(connect):
    s = connect(analyst="costs", default_budget=dpch.Budget(50.0, 1e-3), seed=5)
    make_kinds_table(s)
    return s


def _noise(session, sql):
    plan, opts = session.plan(sql)
    return calibrate_top_k(plan, opts) if opts.select == "top" else calibrate(plan, opts)


@pytest.mark.parametrize("sql", [q for _, q in FIXED], ids=[k for k, _ in FIXED])
def test_honest_charges_equal_the_independent_composition(session, sql):
    """The charge of each kind is the independent recomposition, in every view (ε, δ, ρ, ρ's δ), and the
    query runs and is charged exactly that."""
    noise = _noise(session, sql)
    problems: list[str] = []
    expected = cost_audit.compose_terms(cost_audit.mechanism_terms(noise.mechanisms, problems))
    assert problems == [] and cost_audit.mismatch(noise.cost, expected) is None
    release = session.query(sql)
    assert release.cost == noise.cost


def _wrong_compose(monkeypatch):
    """A ``compose`` that halves every parameter, bound wherever it is imported (the cost module, the
    filters, and on older code the calibration's own check): the fully circular case."""
    real = cost_module.compose

    def wrong(costs):
        right = real(costs)
        return type(right)(*[v / 2 for v in dataclasses.astuple(right)])

    monkeypatch.setattr(cost_module, "compose", wrong)
    monkeypatch.setattr("dpch.accounting.filters.compose", wrong, raising=False)  # filters sum a tally now
    monkeypatch.setattr("dpch.pipeline.calibrate.compose", wrong, raising=False)


@pytest.mark.parametrize("sql", [q for _, q in FIXED], ids=[k for k, _ in FIXED])
def test_a_wrong_compose_is_refused_before_the_charge(session, sql, monkeypatch):
    before = ledger_rows(session)
    _wrong_compose(monkeypatch)
    with pytest.raises(CostCheckFailed) as info:
        session.query(sql)
    assert ledger_rows(session) == before, "refused before anything is charged"
    assert "is not the composition of" in info.value.detail


# -- watches: ε_max and ε_post recomputed ---------------------------------------------------------------


def _watch(session):
    return session.watch_create("w", epsilon=1.0, delta=1e-7, threshold=100, lower=80, upper=200, tables="t")


def test_a_wrong_watch_epsilon_max_is_refused_before_the_reservation(session, monkeypatch):
    before = ledger_rows(session)
    real = WatchParams.epsilon_max
    monkeypatch.setattr(WatchParams, "epsilon_max", property(lambda p: real.fget(p) / 2))
    with pytest.raises(CostCheckFailed) as info:
        _watch(session)
    assert ledger_rows(session) == before and "Thm 7 gives" in info.value.detail
    monkeypatch.undo()
    _watch(session)  # the honest watch is reserved
    assert ledger_rows(session) == before + 1


def test_a_wrong_watch_epsilon_post_is_caught_at_the_settle(session, monkeypatch):
    """Each ⊤ charges the watch ε_post(t); the settle recomputes E from the watch's rows. A watch whose
    ε_post is halved settles nothing: the reservation stays counted at its worst case — also once the
    formula is right again, since the rows hold the halved charges (fail closed)."""
    _watch(session)
    real = WatchParams.epsilon_post
    monkeypatch.setattr(WatchParams, "epsilon_post", lambda p, t: real(p, t) / 2)
    sql = "SELECT count() FROM t WHERE g = 'a' SETTINGS dp_watch = 'w'"  # 100 rows: at the threshold
    answers = [session.query(sql).rows[0][0] for _ in range(6)]
    assert "above" in answers, answers
    rows = ledger_rows(session)
    with pytest.raises(CostCheckFailed) as info:
        session.watch_close("w")
    assert "its rows give" in info.value.detail
    assert ledger_rows(session) == rows and session.budget().reserved.epsilon == 1.0
    monkeypatch.undo()
    with pytest.raises(CostCheckFailed):
        session.watch_close("w")
    assert ledger_rows(session) == rows and session.budget().reserved.epsilon == 1.0


def test_the_replay_of_a_watchs_rows(session):
    """E of a watch that never opened an instance is 0; a history where an instance opens while the
    previous one never halted is not a watch's (the check refuses to settle it)."""
    _watch(session)
    events = session.watch_service.store.history(session.analyst, "w")
    assert [e.event for e in events] == ["create"] and cost_audit.watch_realized_epsilon(events) == 0.0
    opened = dataclasses.replace(events[0], event="open")
    below = dataclasses.replace(events[0], event="below")
    with pytest.raises(CostCheckFailed) as info:
        cost_audit.watch_realized_epsilon([events[0], opened, below, opened])
    assert "before the previous one halted" in info.value.detail


def test_an_honest_watch_settles_at_the_recomputed_e(session):
    _watch(session)
    sql = "SELECT count() FROM t WHERE g = 'a' SETTINGS dp_watch = 'w'"
    answers = [session.query(sql).rows[0][0] for _ in range(8)]
    state = session.watch_close("w")
    events = session.watch_service.store.history(session.analyst, "w")
    # two ⊤ at least: E then holds an instance's ε_post whole (the last one's is capped by ε_max)
    assert answers.count("above") >= 2 and state.realized_epsilon() == pytest.approx(
        cost_audit.watch_realized_epsilon(events), rel=1e-9)
    assert session.budget().reserved.epsilon == 0.0 and session.budget().spent.epsilon == 1.0  # basic: worst


# -- accuracy-first: every cost the plan can charge recomputed ------------------------------------------

ACCURACY = [("direct laplace", "SELECT count(*) FROM t SETTINGS dp_accuracy = 20", "basic"),
            ("direct gaussian", "SELECT count(*) FROM t SETTINGS dp_accuracy = 20", "zcdp_bm"),
            ("brownian", "SELECT count(*) FROM t SETTINGS dp_relative_error = 0.2, dp_max_epsilon = 5", "zcdp_bm"),
            # two measures stacked: the normalized ℓ2 sensitivity is √2, not 1
            ("brownian, two measures", "SELECT count(*), sum(x) FROM t SETTINGS dp_relative_error = 0.2, "
                                       "dp_max_epsilon = 5", "zcdp_bm"),
            ("laplace noise reduction", "SELECT count(*) FROM t SETTINGS dp_relative_error = 0.2, "
                                        "dp_max_epsilon = 5", "pure")]


@pytest.fixture
def filtered(connect):
    def _open(flt):
        s = connect(analyst=f"af-{flt}", filter=flt, default_budget=dpch.Budget(20.0, 1e-5), seed=5)
        make_table(s, TABLE, [(u, "abc"[u % 3], "cook", float(u % 11)) for u in range(300)],
                   ["uid", "g", "occupation", "x"], name=f"t_{flt}", comment="dp: privacy_unit=uid, unique_units")
        return s
    return _open


#: (kind, broken): every plan with its cost halved; the Brownian one also with its boundary ψ halved
BROKEN = [(k, b) for k, _, _ in ACCURACY for b in ("honest", "half cost")] + [("brownian", "half boundary")]


@pytest.mark.parametrize(("kind", "broken"), BROKEN, ids=[f"{k}-{b}" for k, b in BROKEN])
def test_accuracy_first_costs_are_recomputed_before_the_reservation(filtered, monkeypatch, kind, broken):
    sql, flt = next((q, f) for k, q, f in ACCURACY if k == kind)
    s = filtered(flt)
    sql = sql.replace("FROM t ", f"FROM t_{flt} ")
    before = ledger_rows(s)
    if broken == "half cost":
        for family in (BrownianPlan, LaplacePlan):  # each plan family computes its own cost
            real = family.cost_at
            monkeypatch.setattr(family, "cost_at", lambda self, step, real=real: dataclasses.replace(
                real(self, step), epsilon=real(self, step).epsilon / 2))
    elif broken == "half boundary":
        real_psi = MixtureBoundary.__call__
        monkeypatch.setattr(MixtureBoundary, "__call__", lambda self, t: real_psi(self, t) / 2)
    if broken == "honest":
        from dpch.pipeline.accuracy_first import plan_for

        assert cost_audit.accuracy_plan_problems(plan_for(s.context, *s.plan(sql))) == []
        s.query(sql)
        assert ledger_rows(s) > before
        return
    with pytest.raises(CostCheckFailed) as info:
        s.query(sql)
    assert ledger_rows(s) == before, "refused before anything is reserved or charged"
    assert "is not the" in info.value.detail or "reservation" in info.value.detail


def test_report_noisy_max_epsilon_far_out_is_the_asymptotic_form_of_the_integrals(monkeypatch):
    """Past c/σ = 1e5 the check uses Thm 8's asymptotic form (the exact integrals overflow at the score
    ranges an analyst may declare, 1e300); where both can be computed they agree to 1e-11."""
    from dpch.pipeline import cost_audit

    for ratio in (2e4, 9e4):
        monkeypatch.setattr(cost_audit, "ASYMPTOTIC_RANGE", 1e9)
        cost_audit.report_noisy_max_epsilon.cache_clear()
        exact = cost_audit.report_noisy_max_epsilon(ratio, 1.0, 1.0, 4)
        monkeypatch.setattr(cost_audit, "ASYMPTOTIC_RANGE", 1e3)
        cost_audit.report_noisy_max_epsilon.cache_clear()
        asymptotic = cost_audit.report_noisy_max_epsilon(ratio, 1.0, 1.0, 4)
        assert abs(exact - asymptotic) <= 1e-11 * exact, (ratio, exact, asymptotic)
    cost_audit.report_noisy_max_epsilon.cache_clear()
    monkeypatch.undo()
    # at 1e300 the value is finite and positive: (2k/(k+1))·(Δ/σ)·((c − Δ)/σ) for σ = c/3e149
    value = cost_audit.report_noisy_max_epsilon(1e300, 1.0, 1e300 / 3e149, 4)
    assert value == pytest.approx(1.5 * 3e149 / (1e300 / 3e149), rel=1e-9)
