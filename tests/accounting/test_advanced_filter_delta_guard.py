"""The advanced-composition filter's δg guard at its boundaries (issue 31, "Privacy-relevant survivors").

Rogers et al. 2016, Thm 5.1 (docs/algorithms.md B3) holds for δg in (0, 1/e): the filter must refuse
a budget that gives δg = 1/e exactly, or anything above it, with its own words (a ConfigError naming
the interval), and accept the float just below 1/e. Survivors this kills (``filters.py``,
``AdvancedCompositionFilter.__init__``): ``1.0 / math.e`` → ``1.0 * math.e`` (δg up to e accepted)
and ``< 1/e`` → ``<= 1/e``; also ``0.0 <`` → ``0.0 <=`` (δg = 0 accepted).

An accepted filter is also checked to *decide* with that δg: Thm 5.1's K written out below (not the
code under test) admits a request the filter admits and refuses one it refuses.
"""

from __future__ import annotations

import math
import sys

import pytest

from dpch.accounting.budget import Budget
from dpch.accounting.filters import AdvancedCompositionFilter
from dpch.errors import ConfigError
from dpch.privacy.cost import PrivacyCost

ONE_OVER_E = 1.0 / math.e
#: the largest float below 1/e: the last δg the theorem allows
JUST_BELOW = math.nextafter(ONE_OVER_E, 0.0)
REFUSAL = r"the advanced filter needs δg in \(0, 1/e\); the budget gives δg = "


def _k(eps: list[float], eg: float, dg: float) -> float:
    """Rogers et al. 2016, Thm 5.1 (B3): Σ ε(e^ε−1)/2 + √(2(S+x)(1 + ½ ln(S/x + 1)) ln(1/δg)),
    S = Σ ε², x = εg²/(28.04 ln(1/δg))."""
    x = eg**2 / (28.04 * math.log(1 / dg))
    s = sum(e**2 for e in eps)
    return sum(e * (math.exp(e) - 1) / 2 for e in eps) + math.sqrt(
        2 * (s + x) * (1 + 0.5 * math.log(s / x + 1)) * math.log(1 / dg))


def test_the_boundary_is_where_the_test_says():
    """Negative control on the constants: the float below 1/e is below it, and 1/e < 1 (a budget δ)."""
    assert JUST_BELOW < ONE_OVER_E < 1.0
    assert math.nextafter(JUST_BELOW, 1.0) == ONE_OVER_E


@pytest.mark.parametrize("delta", [ONE_OVER_E, math.nextafter(ONE_OVER_E, 1.0), 0.5, 0.99, 0.0],
                         ids=["1/e", "just above 1/e", "0.5", "0.99", "0"])
def test_delta_g_outside_0_to_1_over_e_is_refused_in_words(delta):
    with pytest.raises(ConfigError, match=REFUSAL) as info:
        AdvancedCompositionFilter(Budget(1.0, delta))
    assert f"δg = {delta:g}" in str(info.value)


@pytest.mark.parametrize("delta", [JUST_BELOW, sys.float_info.min], ids=["just below 1/e", "smallest normal"])
def test_delta_g_just_inside_is_accepted_and_decides_by_theorem_5_1(delta):
    eg = 1.0
    flt = AdvancedCompositionFilter(Budget(eg, delta))
    assert flt.delta_g == delta
    assert flt.x == pytest.approx(eg**2 / (28.04 * math.log(1 / delta)), rel=1e-12)
    # the largest single request Thm 5.1 admits, found on the reference K: the filter agrees on both sides
    lo, hi = 0.0, eg
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if _k([mid], eg, delta) <= eg else (lo, mid)
    assert flt.decide([], PrivacyCost(lo * (1 - 1e-6))).admitted
    assert not flt.decide([], PrivacyCost(hi * (1 + 1e-6))).admitted


def test_the_guard_reads_delta_g_not_the_budget_delta():
    """δ = 0.6 is above 1/e, but with half of it kept for (ε, δ) rounds (Lemma 3.3) δg = 0.3 is inside."""
    with pytest.raises(ConfigError, match=REFUSAL):
        AdvancedCompositionFilter(Budget(1.0, 0.6))
    flt = AdvancedCompositionFilter(Budget(1.0, 0.6), approx_delta_share=0.5)
    assert flt.delta_g == pytest.approx(0.3) and flt.delta_g_prime == pytest.approx(0.3)
    with pytest.raises(ConfigError, match=REFUSAL):  # 0.8 · 0.5 = 0.4 > 1/e
        AdvancedCompositionFilter(Budget(1.0, 0.8), approx_delta_share=0.5)


@pytest.mark.parametrize("share", [1.0, -math.ulp(0.0), 1.5])
def test_an_approx_delta_share_outside_0_to_1_is_refused_in_words(share):
    with pytest.raises(ConfigError, match=r"approx_delta_share must be in \[0, 1\), got "):
        AdvancedCompositionFilter(Budget(1.0, 1e-6), approx_delta_share=share)


@pytest.mark.parametrize("share", [0.0, math.nextafter(1.0, 0.0)], ids=["0", "just below 1"])
def test_an_approx_delta_share_at_either_end_of_0_to_1_is_accepted(share):
    """δg' = share·δ goes to the (ε, δ) rounds, δg = (1 − share)·δ to Thm 5.1."""
    flt = AdvancedCompositionFilter(Budget(1.0, 1e-6), approx_delta_share=share)
    assert flt.delta_g_prime == 1e-6 * share
    assert flt.delta_g == 1e-6 * (1.0 - share) > 0
