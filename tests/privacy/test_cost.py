"""Typed privacy costs: the named conversions, compose(), and the ledger record built from them.

Expected values are the formulas of docs/algorithms.md C8 written out again here, not read from
the code under test; floats are compared at relative 1e-12 (sums of a few terms).
"""

from __future__ import annotations

import dataclasses
import math

import pytest

from dpch.mechanisms.exponential import ExponentialMechanism
from dpch.mechanisms.gaussian import GaussianMechanism
from dpch.mechanisms.laplace import LaplaceMechanism
from dpch.mechanisms.partition_selection import LaplacePartitionSelection
from dpch.privacy.cost import (
    ZCDP,
    ApproxDP,
    ExPost,
    PrivacyCost,
    PureDP,
    approx_to_zcdp,
    compose,
    ex_post_to_approx,
    pure_to_approx,
    pure_to_zcdp,
    zcdp_to_approx,
    zcdp_to_approx_optimal,
)

REL = 1e-12


def test_compose_sums_within_each_kind():
    assert compose([PureDP(0.1), PureDP(0.2), PureDP(0.7)]).epsilon == pytest.approx(1.0, rel=REL)
    approx = compose([ApproxDP(0.5, 1e-6), ApproxDP(0.25, 2e-6)])
    assert (approx.epsilon, approx.delta) == pytest.approx((0.75, 3e-6), rel=REL)
    zcdp = compose([ZCDP(0.01), ZCDP(0.02, 1e-7)])
    assert isinstance(zcdp, ZCDP) and (zcdp.rho, zcdp.delta) == pytest.approx((0.03, 1e-7), rel=REL)
    assert compose([ExPost(0.2, 1e-6, 1.0), ExPost(0.3, 0.0, 0.5)]) == ExPost(0.5, 1e-6, 1.5)
    # ten charges of 0.1 compose exactly enough to fit a budget of 1.0 (fsum)
    assert compose([PureDP(0.1)] * 10).epsilon == 1.0


def test_compose_refuses_mixed_kinds_and_nothing():
    with pytest.raises(TypeError, match="convert them first"):
        compose([PureDP(0.1), ZCDP(0.1)])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="at least one"):
        compose([])


def test_costs_are_non_negative():
    for bad in (lambda: PureDP(-0.1), lambda: ApproxDP(0.1, -1e-9), lambda: ZCDP(math.nan),
                lambda: ExPost(0.1, 0.0, -1.0)):
        with pytest.raises(ValueError):
            bad()


def test_named_conversions():
    assert pure_to_approx(PureDP(0.3)) == ApproxDP(0.3, 0.0)
    # Bun & Steinke 2016, Prop 1.4: ε-DP ⇒ ε²/2-zCDP
    assert pure_to_zcdp(PureDP(0.3)).rho == pytest.approx(0.045, rel=REL)
    assert pure_to_zcdp(PureDP(0.3)).delta == 0.0
    # Rogers et al. 2023, Lemma 2.3: (ε, δ)-DP ⇒ δ-approximate ε²/2-zCDP
    assert approx_to_zcdp(ApproxDP(0.5, 1e-6)) == ZCDP(0.125, 1e-6)
    # Bun & Steinke 2016, Prop 1.3 (δ's add for approximate zCDP): ρ + 2√(ρ log(1/δ''))
    rho, d2 = 0.0039, 5e-6
    out = zcdp_to_approx(ZCDP(rho, 1e-7), d2)
    assert out.epsilon == pytest.approx(rho + 2 * math.sqrt(rho * math.log(1 / d2)), rel=REL)
    assert out.delta == pytest.approx(1e-7 + d2, rel=REL)
    printed = zcdp_to_approx(ZCDP(rho), d2, printed_theorem_6=True)
    assert printed.epsilon == pytest.approx(rho + 2 * math.sqrt(2 * rho * math.log(1 / d2)), rel=REL)
    # an ex-post release bounded by its worst case is (worst, δ)-DP
    assert ex_post_to_approx(ExPost(0.2, 1e-6, 1.0)) == ApproxDP(1.0, 1e-6)


def test_optimal_conversion_is_tighter_than_prop_1_3():
    """Canonne, Kamath & Steinke 2020, Cor 13 needs less δ than Prop 1.3's at the same ε."""
    rho, d2 = 0.0039, 5e-6
    eps = zcdp_to_approx(ZCDP(rho), d2).epsilon
    optimal = zcdp_to_approx_optimal(ZCDP(rho), eps)
    assert optimal.epsilon == eps
    assert 0 < optimal.delta < d2


def test_the_record_keeps_every_view():
    gauss = PrivacyCost.of(ApproxDP(0.5, 1e-6), ZCDP(0.004))
    assert (gauss.epsilon, gauss.delta, gauss.rho, gauss.rho_delta) == (0.5, 1e-6, 0.004, 0.0)
    assert gauss.zcdp() == ZCDP(0.004, 0.0) and gauss.approx_dp() == ApproxDP(0.5, 1e-6)
    lap = PrivacyCost.of(PureDP(0.5))
    assert lap.rho is None and lap.zcdp() == ZCDP(0.125, 0.0)
    # an ex-post record's (ε, δ) view is its worst case; its ex-post view keeps the realized ε
    post = PrivacyCost(0.2, 1e-6, ex_post=True, worst_epsilon=1.0)
    assert post.approx_dp() == ApproxDP(1.0, 1e-6)
    assert post.realized_ex_post() == ExPost(0.2, 1e-6, 1.0)


def test_composed_record_sums_each_view_of_its_parts():
    """Two Gaussian measures, a Laplace measure, an exponential mechanism and partition selection:
    (ε, δ) add; ρ is each part's own ρ, or its (ε, δ) converted (Prop 1.4 / Lemma 2.3)."""
    g1, g2 = GaussianMechanism(0.2, 2e-7, 1.0), GaussianMechanism(0.2, 2e-7, 3.0)
    lap, em = LaplaceMechanism(0.2, 1.0), ExponentialMechanism(0.2, 1.0)
    sel = LaplacePartitionSelection(0.2, 6e-7, 2)
    total = PrivacyCost.composed([g1.cost, g2.cost, lap.cost, em.cost, sel.cost])
    assert total.epsilon == pytest.approx(1.0, rel=REL)
    assert total.delta == pytest.approx(1e-6, rel=REL)
    rho = (1.0 / (2 * g1.sigma**2) + 9.0 / (2 * g2.sigma**2)  # Gaussian: Δ2²/(2σ²)
           + 0.2**2 / 2  # Laplace: ε²/2 (Prop 1.4)
           + 0.2**2 / 8  # exponential mechanism: ε²/8 (Cesar & Rogers 2021)
           + 0.2**2 / 2)  # partition selection: ε²/2, δ-approximate (Lemma 2.3)
    assert total.rho == pytest.approx(rho, rel=REL)
    assert total.rho_delta == pytest.approx(6e-7, rel=REL)  # only the selection's δ enters the zCDP view


def test_negative_control_the_hand_summed_bag_loses_rho():
    """What NoisePlan.cost built before issue 13: ε and δ added by hand, no ρ. A zCDP filter then
    reads ρ = (Σε)²/2 — 0.125 at ε 0.5 — where the parts' own ρ's sum to far less."""
    g1, g2 = GaussianMechanism(0.25, 5e-7, 1.0), GaussianMechanism(0.25, 5e-7, 1.0)
    bag = PrivacyCost(g1.cost.epsilon + g2.cost.epsilon, g1.cost.delta + g2.cost.delta)
    composed = PrivacyCost.composed([g1.cost, g2.cost])
    assert bag.zcdp().rho == pytest.approx(0.125, rel=REL)
    assert composed.zcdp().rho == pytest.approx(0.0039, rel=0.01)
    assert bag.zcdp().rho > 30 * composed.zcdp().rho


def test_composed_refuses_ex_post_parts():
    with pytest.raises(ValueError, match="ex-post"):
        PrivacyCost.composed([PrivacyCost(0.2, 0.0, ex_post=True, worst_epsilon=1.0)])


def test_costs_compose_only_through_composed():
    """``PrivacyCost`` has no ``+`` (issue 25): the one it had dropped ρ when one side had none — the shape
    of the zCDP overcharge fixed earlier. Composition is :meth:`PrivacyCost.composed`, which keeps it."""
    a, b = PrivacyCost.of(PureDP(0.5)), PrivacyCost.of(PureDP(0.25))
    with pytest.raises(TypeError):
        a + b  # noqa: B018 — the operator must not exist
    both = PrivacyCost.composed([a, b])
    assert both.epsilon == pytest.approx(0.75) and both.rho is not None


def test_a_fixed_cost_is_its_own_worst_case_even_with_a_worst_epsilon_recorded():
    """realized_ex_post() takes the recorded worst case only for an ex-post release: a fixed-cost record
    that carries a worst_epsilon (the filter's admission bound) is still its own worst case, ε; an
    ex-post one without a recorded worst case is its own too."""
    fixed = PrivacyCost(0.5, 1e-6, worst_epsilon=2.0)
    assert fixed.realized_ex_post() == ExPost(0.5, 1e-6, 0.5)
    assert PrivacyCost(0.3, 0.0, ex_post=True).realized_ex_post() == ExPost(0.3, 0.0, 0.3)


@pytest.mark.parametrize("cost, field", [
    (PureDP(1.0), "epsilon"), (ApproxDP(1.0, 1e-6), "delta"), (ZCDP(0.5), "rho"),
    (ExPost(0.5, 0.0, 1.0), "worst_epsilon"), (PrivacyCost(1.0), "epsilon"),
], ids=["pure", "approx", "zcdp", "ex-post", "record"])
def test_costs_are_frozen(cost, field):
    """A cost charged to the ledger cannot change after the charge."""
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(cost, field, 0.0)
