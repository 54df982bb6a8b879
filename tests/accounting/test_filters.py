"""Filters and odometers: the seeds' numbers (docs/algorithms.md A4, A6, B3, B4, B6), and hypothesis
property tests that no filter admits an adaptive sequence violating its theorem's inequality,
checked against an independent computation written here (not the code under test)."""

from __future__ import annotations

import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dpch.accounting import odometers
from dpch.accounting.budget import Budget
from dpch.accounting.filters import (
    FILTERS,
    AdvancedCompositionFilter,
    BasicCompositionFilter,
    ExPostFilter,
    MixedFilter,
    PureEpsilonFilter,
    PureExPostFilter,
    UnifiedZCDPFilter,
    ZCDPFilter,
    make_filter,
)
from dpch.errors import ConfigError
from dpch.mechanisms.brownian import BrownianMechanism
from dpch.privacy.cost import PrivacyCost

TOL = 1e-9


def rounds_admitted(flt, cost: PrivacyCost, cap: int) -> int:
    """How many equal rounds the filter admits: binary search on decide(k−1 rounds, one more)."""
    lo, hi = 0, cap  # decide([c]*(k-1), c) is monotone in k
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if flt.decide([cost] * (mid - 1), cost).admitted:
            lo = mid
        else:
            hi = mid - 1
    return lo


# -- numbers from the seeds ------------------------------------------------------------------------

@pytest.mark.parametrize(("eps", "basic", "thm51"), [(0.001, 1000, 15481), (0.01, 100, 154), (0.05, 20, 6),
                                                      (0.1, 10, 1)])
def test_b6_rounds_allowed_basic_and_thm_5_1(eps, basic, thm51):
    """docs/algorithms.md B6 (εg = 1, δg = 1e-6): rounds allowed at constant ε_i."""
    budget = Budget(1.0, 1e-6)
    c = PrivacyCost(eps)
    assert rounds_admitted(BasicCompositionFilter(budget), c, 3000) == basic
    assert rounds_admitted(AdvancedCompositionFilter(budget), c, 20000) == thm51


def test_b6_thm_5_1_values():
    """B6: x = 0.00258140; K(100×0.01) = 0.794294; K(154×0.01) = 0.997200 CONT; K(155×0.01) = 1.000696 HALT."""
    flt = AdvancedCompositionFilter(Budget(1.0, 1e-6))
    assert flt.x == pytest.approx(0.00258140, abs=5e-9)
    assert flt.k([0.01] * 100) == pytest.approx(0.794294, abs=5e-7)
    assert flt.k([0.01] * 154) == pytest.approx(0.997200, abs=5e-7)
    assert flt.k([0.01] * 155) == pytest.approx(1.000696, abs=5e-7)
    c = PrivacyCost(0.01)
    assert flt.decide([c] * 153, c).admitted
    assert not flt.decide([c] * 154, c).admitted


def test_b4_odometer_values():
    """B6: Thm 6.5 n = 1e4, δg = 1e-6: 100×0.01 → 0.874187 (branch 11), 200×0.1 → 28.4592 (branch 12);
    n = 1e6, δg = 1e-9: 1000×0.005 → 1.631151; Lemma 6.4 x = 1e-4, δg = 1e-6: 100×0.01 → 0.989587."""
    assert odometers.odometer_thm_6_5([0.01] * 100, 1e4, 1e-6) == pytest.approx(0.874187, abs=5e-7)
    assert odometers.odometer_thm_6_5([0.1] * 200, 1e4, 1e-6) == pytest.approx(28.4592, abs=5e-5)
    assert odometers.odometer_thm_6_5([0.005] * 1000, 1e6, 1e-9) == pytest.approx(1.631151, abs=5e-7)
    assert odometers.odometer_lemma_6_4([0.01] * 100, 1e-4, 1e-6) == pytest.approx(0.989587, abs=5e-7)
    # min with the deterministic basic odometer: 200×0.1 is worth 20 by basic composition
    assert odometers.odometer([0.1] * 200, 1e4, 1e-6) == pytest.approx(20.0)


def test_advanced_filter_spent_is_the_odometer():
    flt = AdvancedCompositionFilter(Budget(1.0, 1e-6), odometer_n=1e4)
    assert flt.spent([PrivacyCost(0.01)] * 100).epsilon == pytest.approx(0.874187, abs=5e-7)
    rem = flt.remaining([PrivacyCost(0.01)] * 100).epsilon
    assert flt.k([0.01] * 100 + [rem]) == pytest.approx(1.0, abs=1e-9)


def test_000_budget_under_both_conversions():
    """A6: (ε, δ'') = (10, 1e-6) gives Σε² = 2ρ ≈ 2.705 under the proof's conversion
    (ρ_max = 1.353015, 2ρ = 2.706029); the printed Thm 6 formula ρ + 2√(2ρ log(1/δ'')) gives
    ρ_max = 0.770693 (Σε² = 1.541386). zcdp (Thm 2) uses the former, zcdp_bm (Thm 6) the printed one."""
    budget = Budget(10.0, 2e-6)  # half of δ is δ'' = 1e-6
    thm2 = ZCDPFilter(budget)
    assert thm2.delta_conv == pytest.approx(1e-6)
    assert thm2.rho_budget == pytest.approx(1.353015, abs=5e-7)
    assert 2 * thm2.rho_budget == pytest.approx(2.706029, abs=5e-7)
    thm6 = UnifiedZCDPFilter(budget)
    assert thm6.printed and thm6.rho_budget == pytest.approx(0.7706928, abs=5e-7)
    assert UnifiedZCDPFilter(budget, printed_theorem_6=False).rho_budget == pytest.approx(1.353015, abs=5e-7)
    # the conversion choice lives in one function; both forms map the budget back to ε exactly
    for printed in (False, True):
        rho = ZCDPFilter.rho_limit(10.0, 1e-6, printed=printed)
        factor = 2.0 if printed else 1.0
        assert rho + 2 * math.sqrt(factor * rho * math.log(1e6)) == pytest.approx(10.0, rel=1e-12)
    # Reddit experiment: (1, 1e-6) → ρ_max = 0.0174689
    assert ZCDPFilter(Budget(1.0, 2e-6)).rho_budget == pytest.approx(0.0174689, abs=5e-8)


def test_thm6_reserves_finest_grid_point_and_charges_realized():
    """Rogers et al. 2023, Thm 6: a Brownian run is admitted on Δ2²/(2·t_finest) and charged Δ2²/(2·T_stop)."""
    flt = UnifiedZCDPFilter(Budget(1.0, 2e-6))
    bm = BrownianMechanism.for_target(0.3, 1e-6, 1.0, steps=10)
    worst = bm.worst_cost
    assert worst.worst_rho == pytest.approx(1.0 / (2 * bm.times[-1]))
    stopped = bm.cost_at(float(bm.times[2]))  # stopped early: cheaper
    assert stopped.rho < worst.worst_rho
    history: list[PrivacyCost] = []
    admitted = 0
    while flt.decide(history, worst).admitted:
        history.append(stopped)
        admitted += 1
    assert math.fsum(c.rho for c in history) + worst.worst_rho > flt.rho_budget
    assert admitted == int((flt.rho_budget - worst.worst_rho) // stopped.rho) + 1
    # the Thm 2 filter counts the same runs at the worst case: fewer fit
    thm2 = ZCDPFilter(Budget(1.0, 2e-6), printed_theorem_6=True)
    assert rounds_admitted(thm2, stopped, 10000) == int(thm2.rho_budget // worst.worst_rho)
    assert rounds_admitted(thm2, stopped, 10000) < admitted


def test_pure_ex_post_uses_strict_check_and_charges_realized():
    """Lebensold et al. 2024, Alg 2 (B9): HALT if spent + ε_max ≥ ε; realized ε_post (possibly above
    ε_max) is charged."""
    flt = PureExPostFilter(Budget(1.0, 1e-5))
    req = PrivacyCost(0.0796178, 1e-6, ex_post=True, worst_epsilon=0.0796178)
    assert not flt.decide([PrivacyCost(0.5)], PrivacyCost(0.5)).admitted  # 0.5 + 0.5 ≥ 1
    realized = PrivacyCost(0.1582021, 1e-6, ex_post=True, worst_epsilon=0.0796178)  # London t = 100
    history = [realized] * 6
    assert flt.spent(history).epsilon == pytest.approx(6 * 0.1582021)
    assert flt.decide(history[:5], req).admitted
    assert not flt.decide(history, req).admitted  # 0.949 + 0.0796 ≥ 1
    # δ per instance, union bound: ten instances of 1e-6 use the whole δ budget
    assert not flt.decide([PrivacyCost(0.01, 1e-6)] * 10, req).admitted


def test_mixed_routes_by_kind_and_split():
    flt = MixedFilter(Budget(2.0, 4e-6), split=0.5)
    fixed = PrivacyCost(0.5, 0.0)
    post = PrivacyCost(0.3, 0.0, ex_post=True, worst_epsilon=0.6)
    assert flt.decide([fixed] * 3, post).admitted  # ex-post side untouched by fixed releases
    assert flt.decide([fixed] * 3 + [post], post).admitted  # 0.3 realized + worst 0.6 ≤ 1
    assert not flt.decide([post] * 2, post).admitted  # 0.6 realized + worst 0.6 > 1
    assert flt.zcdp.budget == Budget(1.0, 2e-6) and flt.ex_post.budget == Budget(1.0, 2e-6)


def test_pure_filter_refuses_delta_and_advanced_lemma_3_3_doubles():
    assert not PureEpsilonFilter(Budget(1.0)).decide([], PrivacyCost(0.1, 1e-9)).admitted
    assert not AdvancedCompositionFilter(Budget(1.0, 1e-6)).decide([], PrivacyCost(0.1, 1e-9)).admitted
    flt = AdvancedCompositionFilter(Budget(1.0, 2e-6), approx_delta_share=0.5)
    assert flt.decide([], PrivacyCost(0.01, 1e-9)).admitted
    # rounds at 0.01 count as 0.02: K(2ε) — fewer than half of the pure count at δg = 1e-6
    n = rounds_admitted(flt, PrivacyCost(0.01, 1e-12), 1000)
    assert odometers.filter_k([0.02] * n, 1.0, 1e-6) <= 1.0 < odometers.filter_k([0.02] * (n + 1), 1.0, 1e-6)
    assert not flt.decide([], PrivacyCost(0.0, 1e-9)).admitted  # ε = 0 with δ > 0: HALT (B5)


def test_bad_configuration_is_a_clear_error():
    with pytest.raises(ConfigError, match="unknown privacy filter"):
        make_filter("fancy", Budget())
    with pytest.raises(ConfigError, match="bad options"):
        make_filter("zcdp", Budget(), {"nonsense": 1})
    with pytest.raises(ConfigError, match="δ"):
        make_filter("zcdp", Budget(1.0, 0.0))
    with pytest.raises(ConfigError, match="δg"):
        make_filter("advanced", Budget(1.0, 0.0))


# -- property tests: random adaptive sequences -------------------------------------------------------

request = st.builds(
    lambda eps, delta, ex_post, frac, gauss: (eps, delta, ex_post, frac, gauss),
    st.floats(0.001, 0.8), st.sampled_from([0.0, 0.0, 1e-8, 1e-7]), st.booleans(), st.floats(0.0, 1.0),
    st.booleans(),
)


def _make(eps: float, delta: float, ex_post: bool, frac: float, gauss: bool) -> tuple[PrivacyCost, PrivacyCost]:
    """(request, realized). Ex-post requests look like a Brownian run (rho) or an LNR/SVT run."""
    rho = eps * eps / 2.0 if gauss else None
    if not ex_post:
        c = PrivacyCost(eps, delta, rho)
        return c, c
    req = PrivacyCost(eps, delta, rho, ex_post=True, worst_epsilon=eps, worst_rho=rho)
    real = PrivacyCost(frac * eps, delta, None if rho is None else frac * rho, ex_post=True,
                       worst_epsilon=eps, worst_rho=rho)
    return req, real


def _run(flt, seq):
    """Feeds the adaptive sequence; returns [(history_before, request, realized)] of admitted rounds."""
    history: list[PrivacyCost] = []
    admitted = []
    for params in seq:
        req, real = _make(*params)
        if flt.decide(history, req).admitted:
            admitted.append((list(history), req, real))
            history.append(real)
    return admitted


def _worst(c: PrivacyCost) -> tuple[float, float]:
    return (c.worst_epsilon if c.ex_post else c.epsilon), c.delta


def _le(a: float, b: float) -> bool:
    return a <= b * (1 + 1e-9) + 1e-15


sequences = st.lists(request, min_size=1, max_size=60)
budgets = st.builds(Budget, st.floats(0.2, 5.0), st.sampled_from([1e-7, 1e-6, 1e-5]))
prop = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@prop
@given(budgets, sequences)
def test_basic_and_pure_never_overspend(budget, seq):
    rounds = _run(BasicCompositionFilter(budget), seq)
    assert _le(math.fsum(_worst(r)[0] for _, r, _ in rounds), budget.epsilon)
    assert _le(math.fsum(r.delta for _, r, _ in rounds), budget.delta)
    pure = _run(PureEpsilonFilter(budget), seq)
    assert all(r.delta == 0 for _, r, _ in pure)
    assert _le(math.fsum(_worst(r)[0] for _, r, _ in pure), budget.epsilon)


def _k_independent(eps: list[float], eg: float, dg: float) -> float:
    """Rogers et al. 2016, Thm 5.1, written out again: Σ ε(e^ε−1)/2 + sqrt(2(S+x)(1 + ½ ln(S/x + 1)) ln(1/δ))."""
    x = eg**2 / (28.04 * math.log(1 / dg))
    s = sum(e**2 for e in eps)
    return sum(e * (math.exp(e) - 1) / 2 for e in eps) + math.sqrt(
        2 * (s + x) * (1 + 0.5 * math.log(s / x + 1)) * math.log(1 / dg))


@prop
@given(budgets, st.lists(st.tuples(st.floats(0.0005, 0.3), st.sampled_from([0.0, 1e-9])), min_size=1,
                         max_size=80), st.sampled_from([0.0, 0.5]))
def test_advanced_filter_matches_thm_5_1_and_lemma_3_3(budget, seq, share):
    flt = AdvancedCompositionFilter(budget, approx_delta_share=share)
    history: list[PrivacyCost] = []
    for eps, delta in seq:
        req = PrivacyCost(eps, delta)
        if flt.decide(history, req).admitted:
            history.append(req)
    eps = [c.epsilon for c in history]
    if share == 0:
        assert all(c.delta == 0 for c in history)
        assert not history or _k_independent(eps, budget.epsilon, budget.delta) <= budget.epsilon * (1 + 1e-9)
    else:
        dg, dgp = budget.delta * (1 - share), budget.delta * share
        assert not history or _k_independent([2 * e for e in eps], budget.epsilon, dg) <= budget.epsilon * (1 + 1e-9)
        assert _le(sum(2 * c.delta / (c.epsilon * math.exp(c.epsilon)) for c in history), dgp)


def _zcdp_eps(rho: float, delta: float, factor: float) -> float:
    return rho + 2 * math.sqrt(factor * rho * math.log(1 / delta))


@prop
@given(budgets, sequences)
def test_zcdp_filter_thm_2(budget, seq):
    """Thm 2: ρ_cum + 2√(ρ_cum log(1/δ'')) ≤ ε and δ_cum ≤ δ, ex-post runs counted at their worst."""
    rounds = _run(ZCDPFilter(budget), seq)
    rho = math.fsum((r.worst_rho if r.ex_post else r.rho) if r.rho is not None else _worst(r)[0] ** 2 / 2
                    for _, r, _ in rounds)
    delta = math.fsum(0.0 if r.rho is not None else r.delta for _, r, _ in rounds)
    assert _le(_zcdp_eps(rho, budget.delta / 2, 1.0), budget.epsilon)
    assert _le(delta, budget.delta / 2)


@prop
@given(budgets, sequences)
def test_unified_filter_thm_6(budget, seq):
    """Thm 6: before round n, ρ_n + Δ²/(2t_finest) ≤ ρ − Σ_{i<n}(ρ_i + Δ²/(2T_i)) with realized T_i;
    the printed conversion maps the final Σ into ε."""
    rho_budget = (math.sqrt(2 * math.log(2 / budget.delta) + budget.epsilon)
                  - math.sqrt(2 * math.log(2 / budget.delta))) ** 2
    rounds = _run(UnifiedZCDPFilter(budget), seq)

    def realized(c):
        if c.ex_post and c.rho is not None:
            return c.rho
        return c.rho if c.rho is not None else _worst(c)[0] ** 2 / 2

    for before, req, _ in rounds:
        need = req.worst_rho if (req.ex_post and req.rho is not None) else realized(req)
        assert _le(need, rho_budget - math.fsum(realized(c) for c in before) + 1e-15)
    total = math.fsum(realized(real) for _, _, real in rounds)
    assert _le(_zcdp_eps(total, budget.delta / 2, 2.0), budget.epsilon)


@prop
@given(budgets, sequences)
def test_ex_post_filters_lemma_5_2_and_004(budget, seq):
    """Lemma 5.2: E_n's worst case ≤ ε − Σ_{i<n} E_i(y_i) (realized); 004: spent + ε_max < ε; Σδ ≤ δ."""
    for cls, strict in ((ExPostFilter, False), (PureExPostFilter, True)):
        rounds = _run(cls(budget), seq)
        for before, req, _ in rounds:
            spent = math.fsum(c.epsilon for c in before)
            need = _worst(req)[0]
            assert (spent + need < budget.epsilon) if strict else _le(spent + need, budget.epsilon)
        assert _le(math.fsum(real.epsilon for _, _, real in rounds), budget.epsilon)
        assert _le(math.fsum(real.delta for _, _, real in rounds), budget.delta)


@prop
@given(budgets, sequences, st.floats(0.2, 0.8))
def test_mixed_filter_thm_3(budget, seq, split):
    """Thm 3: the zCDP side satisfies Thm 2 on (split·ε, split·δ), the ex-post side Lemma 5.2 on the rest."""
    rounds = _run(MixedFilter(budget, split=split), seq)
    fixed = [r for _, r, _ in rounds if not r.ex_post]
    post = [(b, r, real) for b, r, real in rounds if r.ex_post]
    rho = math.fsum(r.rho if r.rho is not None else r.epsilon ** 2 / 2 for r in fixed)
    delta = math.fsum(0.0 if r.rho is not None else r.delta for r in fixed)
    assert _le(_zcdp_eps(rho, budget.delta * split / 2, 1.0), budget.epsilon * split)
    assert _le(delta, budget.delta * split / 2)
    for before, req, _ in post:
        spent = math.fsum(c.epsilon for c in before if c.ex_post)
        assert _le(spent + req.worst_epsilon, budget.epsilon * (1 - split))
    assert _le(math.fsum(r.delta for _, r, _ in post), budget.delta * (1 - split))


def test_negative_control_the_checker_catches_an_overspending_filter():
    """A filter that forgets the proposed round (Rogers et al. 2016, Def 3.1) admits 155 × 0.01: the independent
    Thm 5.1 check used above rejects that sequence."""
    eps = [0.01] * 155
    assert _k_independent(eps[:-1], 1.0, 1e-6) <= 1.0 < _k_independent(eps, 1.0, 1e-6)


def test_every_filter_is_registered_and_describes_its_guarantee():
    assert set(FILTERS) == {"basic", "pure", "advanced", "zcdp", "zcdp_bm", "ex_post", "pure_ex_post", "mixed"}
    for name in FILTERS:
        flt = make_filter(name, Budget(1.0, 1e-6))
        assert name in flt.describe() and "DP overall" in flt.describe()
        assert flt.decide([], PrivacyCost(0.01)).admitted
        assert flt.spent([]).epsilon == pytest.approx(0.0, abs=1e-12)
