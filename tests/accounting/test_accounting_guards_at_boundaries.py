"""Every guard on a bad ε, δ, δg, share, split, x or n in dpch/accounting/ (budget.py, filters.py,
odometers.py) at its boundary (issue 31, "Test each guard at its boundary").

As in tests/privacy/test_guards_at_boundaries.py: the boundary value is accepted and checked for its
*value*; the first bad one (the float past the boundary, the excluded end itself) is refused and checked
for its *words*; NaN is refused by every float guard (``if x <= 0: raise`` would let it through). The
advanced filter's δg < 1/e and its approx_delta_share are in tests/accounting/test_advanced_filter_delta_guard.py;
only NaN is added here.

Holes these tests found (fixed in odometers.py): the odometers' x > 0 and n > e checks let a NaN through
(a NaN odometer), and ``_check_delta`` returned log(1/δg), which is inf for an accepted subnormal δg, so
Thm 5.1's x = εg²/(28.04·log(1/δg)) was 0 and K a ZeroDivisionError.

Expected values are the closed forms, written here: x = εg²/(28.04·log(1/δg)) and K (Rogers et al. 2016,
Thm 5.1), the Lemma 6.4 and Thm 6.5 odometers (B4), and ρ_max = (√(L + ε) − √L)², L = log(1/δ'')
(Rogers et al. 2023, Thm 2; docs/algorithms.md A4).
"""

from __future__ import annotations

import math
import sys

import pytest

from dpch.accounting import odometers
from dpch.accounting.budget import Budget
from dpch.accounting.filters import AdvancedCompositionFilter, MixedFilter, ZCDPFilter
from dpch.errors import ConfigError
from dpch.privacy.cost import PrivacyCost

BELOW_ZERO = -math.ulp(0.0)
ABOVE_ZERO = math.ulp(0.0)
BELOW_ONE = math.nextafter(1.0, 0.0)
ONE_OVER_E = 1.0 / math.e
NAN = math.nan


def above(x: float) -> float:
    return math.nextafter(x, math.inf)


def below(x: float) -> float:
    return math.nextafter(x, -math.inf)


# ------------------------------------------------------------------ budget.py: ε > 0 finite, δ in [0, 1)


@pytest.mark.parametrize("epsilon", [ABOVE_ZERO, sys.float_info.max], ids=["ulp(0)", "max float"])
def test_a_budget_epsilon_just_inside_is_kept(epsilon):
    assert Budget(epsilon, 1e-6).epsilon == epsilon


@pytest.mark.parametrize("epsilon", [0.0, BELOW_ZERO, math.inf, NAN], ids=["0", "-ulp(0)", "inf", "nan"])
def test_a_budget_epsilon_outside_is_refused(epsilon):
    with pytest.raises(ConfigError, match="budget epsilon must be a positive number, got "):
        Budget(epsilon, 1e-6)


@pytest.mark.parametrize("delta", [0.0, BELOW_ONE], ids=["0", "just below 1"])
def test_a_budget_delta_at_either_end_of_0_1_is_kept(delta):
    assert Budget(1.0, delta).delta == delta


@pytest.mark.parametrize("delta", [1.0, BELOW_ZERO, above(1.0), NAN], ids=["1", "-ulp(0)", "just above 1", "nan"])
def test_a_budget_delta_outside_0_1_is_refused(delta):
    with pytest.raises(ConfigError, match=r"budget delta must be in \[0, 1\), got "):
        Budget(1.0, delta)


# ------------------------------------------------------------------ filters.py


def test_the_advanced_filter_refuses_a_nan_approx_delta_share():
    with pytest.raises(ConfigError, match=r"approx_delta_share must be in \[0, 1\), got nan"):
        AdvancedCompositionFilter(Budget(1.0, 1e-6), approx_delta_share=NAN)


def test_the_advanced_filter_decides_at_a_subnormal_delta_g():
    """δg = ulp(0) is accepted by the guard; x and K are finite (x was 0 and K a ZeroDivisionError)."""
    flt = AdvancedCompositionFilter(Budget(1.0, ABOVE_ZERO))
    assert flt.x == pytest.approx(1.0 / (28.04 * -math.log(ABOVE_ZERO)), rel=1e-12) and flt.x > 0
    assert flt.decide([], PrivacyCost(0.01)).admitted
    assert not flt.decide([], PrivacyCost(1.0)).admitted


def _rho_max(epsilon: float, delta: float) -> float:
    big_l = -math.log(delta)
    return (math.sqrt(big_l + epsilon) - math.sqrt(big_l)) ** 2


@pytest.mark.parametrize(("delta", "share"), [(1e-6, 1.0), (BELOW_ONE, ABOVE_ZERO)],
                         ids=["share 1", "share ulp(0) of δ just below 1"])
def test_a_conversion_delta_share_in_0_1_is_kept(delta, share):
    """δ'' = share·δ (BELOW_ONE·ulp(0) rounds to ulp(0)), and the ρ budget is ρ_max(ε, δ'')."""
    flt = ZCDPFilter(Budget(1.0, delta), conversion_delta_share=share)
    assert flt.delta_conv == delta * share > 0
    assert flt.rho_budget == pytest.approx(_rho_max(1.0, flt.delta_conv), rel=1e-9)


@pytest.mark.parametrize("share", [0.0, BELOW_ZERO, above(1.0), NAN], ids=["0", "-ulp(0)", "just above 1", "nan"])
def test_a_conversion_delta_share_outside_0_1_is_refused(share):
    with pytest.raises(ConfigError, match=r"conversion_delta_share must be in \(0, 1\], got "):
        ZCDPFilter(Budget(1.0, 1e-6), conversion_delta_share=share)


def test_the_zcdp_filter_takes_the_smallest_positive_conversion_delta_and_refuses_zero():
    """δ'' < 1 always holds (δ < 1, share ≤ 1): the guard's live side is δ'' > 0. δ'' = 0 is a budget δ of 0, or
    a share so small that share·δ underflows (½·ulp(0) rounds to 0)."""
    flt = ZCDPFilter(Budget(1.0, ABOVE_ZERO), conversion_delta_share=1.0)
    assert flt.delta_conv == ABOVE_ZERO and flt.delta_mech == 0.0
    assert flt.rho_budget == pytest.approx(_rho_max(1.0, ABOVE_ZERO), rel=1e-9)
    for budget, share in ((Budget(1.0, 0.0), 1.0), (Budget(1.0, ABOVE_ZERO), 0.5)):
        with pytest.raises(ConfigError, match="the zcdp filter needs a budget δ > 0 for the zCDP → DP conversion"):
            ZCDPFilter(budget, conversion_delta_share=share)


def test_a_mixed_split_just_inside_0_1_is_kept():
    flt = MixedFilter(Budget(1.0, 1e-6), split=BELOW_ONE)
    assert flt.zcdp.budget.epsilon == BELOW_ONE and flt.ex_post.budget.epsilon == 1.0 - BELOW_ONE
    # at split = ulp(0) the zCDP side's δ'' must survive the product: δ just below 1, all of it to the conversion
    low = MixedFilter(Budget(1.0, BELOW_ONE), split=ABOVE_ZERO, conversion_delta_share=1.0)
    assert low.zcdp.budget.epsilon == ABOVE_ZERO and low.ex_post.budget.epsilon == 1.0


@pytest.mark.parametrize("split", [0.0, 1.0, BELOW_ZERO, above(1.0), NAN], ids=["0", "1", "-ulp(0)", "just above 1",
                                                                           "nan"])
def test_a_mixed_split_outside_0_1_is_refused(split):
    with pytest.raises(ConfigError, match=r"split must be in \(0, 1\), got "):
        MixedFilter(Budget(1.0, 1e-6), split=split)


# ------------------------------------------------------------------ odometers.py: δg in (0, 1/e), x > 0, n > e


@pytest.mark.parametrize("delta_g", [ABOVE_ZERO, 1e-6, below(ONE_OVER_E)], ids=["ulp(0)", "1e-6", "just below 1/e"])
def test_filter_x_is_eps_squared_over_28_04_log_one_over_delta_g(delta_g):
    assert odometers.filter_x(2.0, delta_g) == pytest.approx(4.0 / (28.04 * -math.log(delta_g)), rel=1e-12)
    assert math.isfinite(odometers.filter_k([0.1], 2.0, delta_g))


@pytest.mark.parametrize("delta_g", [0.0, ONE_OVER_E, BELOW_ZERO, 0.5, NAN], ids=["0", "1/e", "-ulp(0)", "0.5", "nan"])
def test_a_delta_g_outside_0_to_1_over_e_is_refused_by_every_bound(delta_g):
    for bound in (lambda: odometers.filter_x(1.0, delta_g),
                  lambda: odometers.filter_k([0.1], 1.0, delta_g),
                  lambda: odometers.odometer_lemma_6_4([0.1], 1.0, delta_g),
                  lambda: odometers.odometer_thm_6_5([0.1], 1e6, delta_g)):
        with pytest.raises(ValueError, match=r"δg must be in \(0, 1/e\), got "):
            bound()


def test_the_lemma_6_4_odometer_takes_a_tiny_x():
    """Σ ε(e^ε − 1)/2 + √(2(S + x)(1 + ½ log(S/x + 1))·log(2/δg)), S = Σ ε²."""
    x, eps, dg = 1e-300, [0.1, 0.2], 1e-6
    s = 0.1**2 + 0.2**2
    drift = sum(e * math.expm1(e) / 2 for e in eps)
    expected = drift + math.sqrt(2 * (s + x) * (1 + 0.5 * math.log(s / x + 1)) * math.log(2 / dg))
    assert odometers.odometer_lemma_6_4(eps, x, dg) == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("x", [0.0, BELOW_ZERO, NAN], ids=["0", "-ulp(0)", "nan"])
def test_the_lemma_6_4_odometer_refuses_x_not_positive(x):
    with pytest.raises(ValueError, match="x must be positive"):
        odometers.odometer_lemma_6_4([0.1], x, 1e-6)


def test_the_thm_6_5_odometer_takes_n_just_above_e():
    """n = e⁺: S = 0.5 ∈ [1/n², 1] = [0.135, 1], branch (11): drift + √(2S(log(110e) + 2 log(log n/δg)))."""
    n, dg, s, drift = above(math.e), 1e-6, 0.5, 0.001
    expected = drift + math.sqrt(2 * s * (math.log(110 * math.e) + 2 * math.log(math.log(n) / dg)))
    assert odometers.odometer_thm_6_5_of_sums(s, drift, n, dg) == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("n", [math.e, below(math.e), 1.0, NAN], ids=["e", "just below e", "1", "nan"])
def test_the_thm_6_5_odometer_refuses_n_up_to_e(n):
    with pytest.raises(ValueError, match=r"n must exceed e \(log log n > 0\)"):
        odometers.odometer_thm_6_5_of_sums(0.05, 0.001, n, 1e-6)
    with pytest.raises(ValueError, match=r"n must exceed e"):
        odometers.odometer([0.1], n, 1e-6)
