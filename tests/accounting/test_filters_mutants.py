"""Filter cases that surviving mutants showed were never exercised (issue 12, mutation score).

The advanced-composition filter (Rogers et al. 2016, Thm 5.1, docs/algorithms.md B3) cannot use a realized ex-post
cost: an ex-post release (noise reduction, Above Threshold) must count at its worst case, both
in admission and in the odometer. Expected decisions come from Thm 5.1's K written out again
below, not from the code under test.
"""

from __future__ import annotations

import math

import pytest

from dpch.accounting.budget import Budget
from dpch.accounting.filters import AdvancedCompositionFilter, BasicCompositionFilter
from dpch.privacy.cost import PrivacyCost

BUDGET = Budget(10.0, 1e-6)
WORST, REALIZED, NEXT = 1.0, 0.05, 0.8


def _k(eps: list[float], eg: float, dg: float) -> float:
    """Rogers et al. 2016, Thm 5.1 (B3): Σ ε(e^ε−1)/2 + sqrt(2(S+x)(1 + ½ ln(S/x + 1)) ln(1/δg)),
    x = εg²/(28.04 ln(1/δg))."""
    x = eg**2 / (28.04 * math.log(1 / dg))
    s = sum(e**2 for e in eps)
    return sum(e * (math.exp(e) - 1) / 2 for e in eps) + math.sqrt(
        2 * (s + x) * (1 + 0.5 * math.log(s / x + 1)) * math.log(1 / dg))


def _ex_post(realized: float, worst: float) -> PrivacyCost:
    return PrivacyCost(realized, 0.0, ex_post=True, worst_epsilon=worst)


def test_the_case_discriminates():
    """Negative control: at the realized cost the next query would fit, at the worst case it does not."""
    assert _k([REALIZED, NEXT], BUDGET.epsilon, BUDGET.delta) <= BUDGET.epsilon
    assert _k([WORST, NEXT], BUDGET.epsilon, BUDGET.delta) > BUDGET.epsilon
    assert _k([WORST], BUDGET.epsilon, BUDGET.delta) <= BUDGET.epsilon  # the worst case alone fits


def test_advanced_filter_counts_a_past_ex_post_release_at_its_worst_case():
    flt = AdvancedCompositionFilter(BUDGET)
    history = [_ex_post(REALIZED, WORST)]
    assert not flt.decide(history, PrivacyCost(NEXT)).admitted
    # exactly as if the release had cost its worst case as a fixed-cost release
    fixed = [PrivacyCost(WORST)]
    assert flt.spent(history) == flt.spent(fixed)
    assert flt.remaining(history) == flt.remaining(fixed)
    assert flt.spent(history).epsilon == pytest.approx(WORST)  # min(basic Σε, Thm 6.5) = basic here


def test_advanced_filter_admits_an_ex_post_request_on_its_worst_case():
    flt = AdvancedCompositionFilter(BUDGET)
    assert flt.decide([], _ex_post(REALIZED, WORST)).admitted
    too_big = _ex_post(REALIZED, 2 * BUDGET.epsilon)
    assert _k([REALIZED], BUDGET.epsilon, BUDGET.delta) <= BUDGET.epsilon  # control: realized would fit
    assert not flt.decide([], too_big).admitted


@pytest.mark.parametrize("cls", [AdvancedCompositionFilter, BasicCompositionFilter])
def test_remaining_never_grows_when_a_realized_cost_is_lower(cls):
    flt = cls(BUDGET)
    low = flt.remaining([_ex_post(REALIZED, WORST)]).epsilon
    assert low == pytest.approx(flt.remaining([PrivacyCost(WORST)]).epsilon)
    assert low < flt.remaining([PrivacyCost(REALIZED)]).epsilon


def test_at_worst_reads_the_worst_case_and_keeps_fixed_costs():
    """What the filters count an ex-post release as (``filters.ex_ante`` before issue 25)."""
    assert _ex_post(REALIZED, WORST).at_worst() == PrivacyCost(WORST, 0.0)
    fixed = PrivacyCost(0.3, 1e-7, 0.01)
    assert fixed.at_worst() is fixed
    # an ex-post cost without a stated worst case counts at what it says
    assert PrivacyCost(0.4, 0.0, ex_post=True).at_worst().epsilon == 0.4


def test_mixed_filter_spends_the_sum_of_its_two_sides():
    """Rogers et al. 2023, Thm 3 (concurrent composition): the mixed guarantee is the zCDP side's plus
    the ex-post side's."""
    from dpch.accounting.filters import MixedFilter

    flt = MixedFilter(BUDGET, split=0.5)
    post = [PrivacyCost(0.4, 2e-8, ex_post=True, worst_epsilon=0.9)]
    fixed = [PrivacyCost(0.3, 1e-7), PrivacyCost(0.2)]
    both = flt.spent(fixed + post)
    alone_fixed, alone_post = flt.spent(fixed), flt.spent(post)
    assert alone_fixed.epsilon > 0 and alone_post.epsilon == pytest.approx(0.4)  # ex-post: realized (Lemma 5.2)
    assert alone_fixed.delta > 0 and alone_post.delta == pytest.approx(2e-8)
    assert both.epsilon == pytest.approx(alone_fixed.epsilon + alone_post.epsilon)
    assert both.delta == pytest.approx(alone_fixed.delta + alone_post.delta)


def test_ledger_entries_show_the_worst_case_of_reservations_and_ex_post_charges_only():
    from datetime import UTC, datetime

    from dpch.accounting.accountant import entry_dict
    from dpch.accounting.ledger import LedgerEntry

    def entry(status: str, cost: PrivacyCost, worst: PrivacyCost) -> dict:
        return entry_dict(LedgerEntry("r", datetime(2026, 1, 1, tzinfo=UTC), "ana", "d.t", "h", "m", status,
                                      cost, worst))

    assert "worst_epsilon" not in entry("charged", PrivacyCost(0.1), PrivacyCost(0.1))
    assert entry("reserved", PrivacyCost(0.0), PrivacyCost(0.7))["worst_epsilon"] == 0.7
    assert entry("charged", _ex_post(0.2, 0.6), PrivacyCost(0.6))["worst_epsilon"] == 0.6
