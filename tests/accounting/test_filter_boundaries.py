"""Each filter's comparisons at their exact float boundary, and the numbers its refusals and status print
(issue 31: the survivors of ``accounting/filters.py``).

A filter compares a running total with its limit widened by ``FLOAT_SLACK`` (1e-9, so that a sum the
owner wrote as exactly the budget is not refused for its last bit). Whether that comparison is ``>`` or
``>=``, and whether the slack widens or narrows the limit, changes a decision only at the boundary
itself: the tests below find, by bisection over floats, a request whose total lands *exactly* on
``limit · (1 + FLOAT_SLACK)`` and check that it is admitted while the next float up is refused.
Expected values come from the theorems' formulas (:mod:`dpch.accounting.odometers`, written from
Rogers et al. 2016) and from the worked numbers in docs/algorithms.md, not from the filter under test.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable

import pytest

from dpch.accounting import odometers
from dpch.accounting.budget import Budget
from dpch.accounting.filters import (
    FLOAT_SLACK,
    AdvancedCompositionFilter,
    MixedFilter,
    PureEpsilonFilter,
    UnifiedZCDPFilter,
    ZCDPFilter,
    make_filter,
)
from dpch.errors import ConfigError
from dpch.privacy.conversions import rho_max
from dpch.privacy.cost import ZCDP, ApproxDP, ExPost, PrivacyCost, PureDP


def _largest_at_most(f: Callable[[float], float], target: float, lo: float, hi: float) -> float:
    """The largest float x in [lo, hi] with f(x) ≤ target, for f non-decreasing (bisection down to adjacent
    floats)."""
    assert f(lo) <= target < f(hi)
    while math.nextafter(lo, math.inf) < hi:
        mid = lo + (hi - lo) / 2.0
        if mid in (lo, hi):
            break
        if f(mid) <= target:
            lo = mid
        else:
            hi = mid
    return lo


def _exact_hit(f: Callable[[float, float], float], limits: list[float], lo: float,
               hi: Callable[[float], float]) -> tuple[float, float]:
    """(limit, x) with f(limit, x) == limit·(1 + FLOAT_SLACK) exactly, trying each limit in turn."""
    for limit in limits:
        target = limit * (1 + FLOAT_SLACK)
        x = _largest_at_most(lambda v, g=limit: f(g, v), target, lo, hi(limit))
        if f(limit, x) == target:
            return limit, x
    raise AssertionError("no float lands exactly on the boundary for any of the limits tried")


# ------------------------------------------------------------------ the advanced filter (Thm 5.1)


def test_advanced_filter_admits_a_round_whose_k_lands_exactly_on_the_slack_widened_budget():
    delta = 1e-6

    def k(eps_g: float, eps: float) -> float:  # Thm 5.1's K of one round (B3)
        return odometers.filter_k_of_sums(eps * eps, odometers.drift_term(eps), eps_g, delta)

    eps_g, eps = _exact_hit(k, [1.0 + i / 64 for i in range(64)], 0.0, lambda g: g)
    flt = AdvancedCompositionFilter(Budget(eps_g, delta))
    at = flt.decide([], PrivacyCost.of(PureDP(eps)))
    assert at.admitted, at.reason  # K = εg(1 + slack): inside; `>=` or a narrowing slack would refuse it
    above = flt.decide([], PrivacyCost.of(PureDP(math.nextafter(eps, math.inf))))
    assert not above.admitted and "advanced-composition bound" in above.reason


def test_advanced_filter_admits_a_delta_that_lands_exactly_on_the_lemma_3_3_share():
    """Lemma 3.3's Σ 2δ_i/(ε_i e^{ε_i}) against δg' = share·δ, at the boundary and one float above."""
    budget_eps, share = 50.0, 0.25
    found = None
    for i in range(64):
        delta_budget = 1e-6 * (1 + i / 64)
        target = delta_budget * share * (1 + FLOAT_SLACK)
        d = _largest_at_most(lambda v: odometers.lemma_3_3_term(0.9, v), target, 0.0, 1.0)
        if odometers.lemma_3_3_term(0.9, d) == target:
            found = delta_budget, d
            break
    assert found is not None, "no δ lands exactly on the boundary"
    delta_budget, d = found
    flt = AdvancedCompositionFilter(Budget(budget_eps, delta_budget), approx_delta_share=share)
    assert flt.delta_g_prime == delta_budget * share
    at = flt.decide([], PrivacyCost.of(ApproxDP(0.9, d)))
    assert at.admitted, at.reason
    above = flt.decide([], PrivacyCost.of(ApproxDP(0.9, math.nextafter(d, math.inf))))
    assert not above.admitted and "Lemma 3.3" in above.reason


def test_advanced_filter_at_exactly_its_budget_still_reports_the_delta_left():
    """A history whose K (with nothing more) is exactly εg has no ε left but keeps its unused δg'."""
    share, delta = 0.5, 1e-6
    delta_g = delta * (1 - share)

    def k(eps_g: float, eps: float) -> float:  # one past round of ε, doubled under Lemma 3.3 (eff = 2ε)
        return odometers.filter_k_of_sums(4 * eps * eps, odometers.drift_term(2 * eps), eps_g, delta_g)

    for i in range(64):
        eps_g = 1.0 + i / 64
        eps = _largest_at_most(lambda v, g=eps_g: k(g, v), eps_g, 0.0, eps_g)
        if k(eps_g, eps) == eps_g:
            break
    else:
        raise AssertionError("no ε lands exactly on the budget")
    flt = AdvancedCompositionFilter(Budget(eps_g, delta), approx_delta_share=share)
    left = flt.remaining([PrivacyCost.of(PureDP(eps))])
    assert left.epsilon == pytest.approx(0.0, abs=1e-8)  # K cannot notice a round of ε 1e-9
    assert left.delta == delta * share  # nothing of δg' used: a `>=` there reported (0, 0)
    over = flt.remaining([PrivacyCost.of(PureDP(math.nextafter(eps, math.inf)))])
    assert (over.epsilon, over.delta) == (0.0, 0.0)  # past the budget: nothing left at all


def test_advanced_filter_odometer_uses_n_of_a_million_by_default():
    """docs/algorithms.md B4's worked number: Thm 6.5, n = 1e6, δg = 1e−9, 1000 rounds of 0.005 → 1.631151."""
    history = [PrivacyCost.of(PureDP(0.005))] * 1000
    spent = AdvancedCompositionFilter(Budget(10.0, 1e-9)).spent(history)
    assert spent.epsilon == pytest.approx(1.631151, abs=5e-7)
    other_n = AdvancedCompositionFilter(Budget(10.0, 1e-9), odometer_n=1e3).spent(history)
    assert other_n.epsilon != pytest.approx(1.631151, abs=5e-7)  # negative control: n matters here


# ------------------------------------------------------------------ zCDP filters (Rogers et al. 2023)


def _number(pattern: str, text: str) -> float:
    match = re.search(pattern, text)
    assert match, text
    return float(match.group(1))


def test_zcdp_refusal_prints_the_rho_left():
    flt = ZCDPFilter(Budget(1.0, 1e-6))
    spent = 0.3 * flt.rho_budget
    history = [PrivacyCost.of(ApproxDP(0.1, 0.0), ZCDP(spent))]
    refused = flt.decide(history, PrivacyCost.of(ApproxDP(0.5, 0.0), ZCDP(0.8 * flt.rho_budget)))
    assert not refused.admitted
    assert _number(r"only ρ (\S+) of", refused.reason) == pytest.approx(flt.rho_budget - spent, rel=1e-5)
    # a budget cut below what was spent: nothing left, never a negative amount
    overspent = [PrivacyCost.of(ApproxDP(0.1, 0.0), ZCDP(1.5 * flt.rho_budget))]
    refused = flt.decide(overspent, PrivacyCost.of(ApproxDP(0.01, 0.0), ZCDP(1e-6)))
    assert _number(r"only ρ (\S+) of", refused.reason) == 0.0


def test_zcdp_refusal_prints_the_delta_left():
    flt = ZCDPFilter(Budget(1.0, 1e-6))  # δ_mech = 5e-7 (half the budget's δ converts ρ to ε)
    assert flt.delta_mech == pytest.approx(5e-7)
    history = [PrivacyCost.of(ApproxDP(0.01, 2e-7))]
    refused = flt.decide(history, PrivacyCost.of(ApproxDP(0.01, 4e-7)))
    assert not refused.admitted
    assert _number(r"only δ (\S+) is left", refused.reason) == pytest.approx(3e-7, rel=1e-2)
    overspent = [PrivacyCost.of(ApproxDP(0.01, 6e-7))]
    refused = flt.decide(overspent, PrivacyCost.of(ApproxDP(0.01, 1e-9)))
    assert _number(r"only δ (\S+) is left", refused.reason) == 0.0


def test_a_brownian_reservation_counts_its_worst_rho():
    """Thm 6: a Brownian run is admitted on its finest grid point, so what its reservation holds is that
    worst ρ, not the ρ it happens to realize."""
    flt = UnifiedZCDPFilter(Budget(1.0, 1e-6))
    run = PrivacyCost.realized(ExPost(0.2, 0.0, 0.5), rho=0.01, worst_rho=0.04)
    worst_eps, delta, rho = flt.reserved_terms(run)
    assert (worst_eps, delta, rho) == (0.5, 0.0, 0.04)


@pytest.mark.parametrize("value", [1, 0, "false", "true", None])
def test_printed_theorem_6_takes_a_boolean_only(value):
    budget = Budget(1.0, 1e-6)
    if value is None:
        assert make_filter("zcdp_bm", budget, {}).printed is True  # Thm 6's printed form, by default
        assert make_filter("zcdp", budget, {}).printed is False
        return
    # an owner's JSON "false" is a non-empty string: coercing it with bool() would turn it into True
    with pytest.raises(ConfigError, match="printed_theorem_6 must be true or false"):
        make_filter("zcdp_bm", budget, {"printed_theorem_6": value})


@pytest.mark.parametrize("printed", [True, False])
def test_printed_theorem_6_sets_the_rho_budget(printed):
    flt = make_filter("zcdp_bm", Budget(1.0, 1e-6), {"printed_theorem_6": printed})
    assert flt.printed is printed
    assert flt.rho_budget == rho_max(1.0, 5e-7, printed_theorem_6=printed)


# ------------------------------------------------------------------ the pure and mixed filters


def test_the_pure_filter_guarantees_delta_zero():
    assert PureEpsilonFilter(Budget(2.0, 1e-6)).guarantee() == (2.0, 0.0)


def test_the_mixed_filter_splits_the_budget_evenly_by_default():
    flt = MixedFilter(Budget(2.0, 1e-6))
    assert (flt.zcdp.budget.epsilon, flt.zcdp.budget.delta) == (1.0, 5e-7)
    assert (flt.ex_post.budget.epsilon, flt.ex_post.budget.delta) == (1.0, 5e-7)
    # its zCDP side splits its δ as a zcdp filter does by default: half converts ρ to ε, half for releases
    assert (flt.zcdp.delta_conv, flt.zcdp.delta_mech) == (2.5e-7, 2.5e-7)
    uneven = MixedFilter(Budget(2.0, 1e-6), split=0.25)
    assert (uneven.zcdp.budget.epsilon, uneven.ex_post.budget.epsilon) == (0.5, 1.5)
