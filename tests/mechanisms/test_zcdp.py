"""zCDP conversions: docs/algorithms.md A4/A6 [derived] numbers."""

from __future__ import annotations

import math

import pytest

from dpch.mechanisms.zcdp import (
    dp_to_zcdp_rho,
    exponential_mechanism_rho,
    rho_max,
    zcdp_to_dp_epsilon,
)


def test_rho_max_a6_numbers():
    """docs/algorithms.md A6: ρ_max(10, 1e-6) = 1.353015 (2ρ = 2.706029 ≈ 000's Σε² ≈ 2.705),
    ρ_max(1, 1e-6) = 0.0174689 — the form ρ + 2√(ρ log(1/δ'')) of Rogers et al. 2023, Thm 2/Lemma 2.3."""
    assert rho_max(10.0, 1e-6) == pytest.approx(1.353015, abs=5e-7)
    assert 2 * rho_max(10.0, 1e-6) == pytest.approx(2.706029, abs=1e-6)
    assert rho_max(1.0, 1e-6) == pytest.approx(0.0174689, abs=5e-8)


def test_rho_max_inverts_conversion():
    for eps, d in [(10.0, 1e-6), (1.0, 1e-6), (0.3, 1e-9)]:
        for printed in (False, True):
            r = rho_max(eps, d, printed_theorem_6=printed)
            assert zcdp_to_dp_epsilon(r, d, printed_theorem_6=printed) == pytest.approx(eps)


def test_printed_theorem_6_is_more_conservative():
    """Rogers et al. 2023, Thm 6's printed 2√(2ρ log) admits less ρ than the proof's 2√(ρ log)."""
    assert rho_max(10.0, 1e-6, printed_theorem_6=True) < rho_max(10.0, 1e-6)


def test_simple_conversions():
    assert dp_to_zcdp_rho(0.5) == pytest.approx(0.125)
    assert exponential_mechanism_rho(0.1) == pytest.approx(0.00125)


@pytest.mark.parametrize("delta", [1e-6, 1e-30, 1e-200, 1e-300, 1.5e-300])
@pytest.mark.parametrize("sensitivity", [1e-3, 1.0, 250.0])
def test_sigma_for_zcdp_meets_delta_down_to_its_floor(delta, sensitivity):
    """The vector Gaussian's σ (CKS 2020 Thm 14 through Prop 1.3) meets δ for δ down to 1e-300, the floor
    of the log of δ(σ) in its root search (where δ(σ) underflows), and tightly (a 1e-6 smaller σ does
    not) away from it. A floor above the target δ (1.5e-300 under a doubled floor) never lets the
    search stop."""
    from dpch.mechanisms.zcdp import sigma_for_zcdp, zcdp_delta

    sigma = sigma_for_zcdp(1.0, delta, sensitivity)
    rho = sensitivity**2 / (2.0 * sigma**2)
    assert zcdp_delta(rho, 1.0) <= delta
    if delta >= 1e-200:  # near the floor, δ(σ) underflows and the search stops at a larger (safe) σ
        smaller = sigma * (1.0 - 1e-6)
        assert zcdp_delta(sensitivity**2 / (2.0 * smaller**2), 1.0) > delta


@pytest.mark.parametrize(("epsilon", "delta"), [(0.01, 1e-10), (0.001, 1e-6), (20_000.0, 0.1), (50_000.0, 0.3)])
def test_sigma_for_zcdp_widens_its_bracket_both_ways(epsilon, delta):
    """A small ε needs σ above the search's first upper end (e^5 × Δ), a large ε below its lower end
    (e^−5 × Δ): the bracket is widened until it holds the root, and the σ found meets δ tightly."""
    from dpch.mechanisms.zcdp import sigma_for_zcdp, zcdp_delta

    sigma = sigma_for_zcdp(epsilon, delta, 1.0)
    assert not math.exp(-5.0) < sigma < math.exp(5.0)  # outside the first bracket: the widening ran
    assert zcdp_delta(1.0 / (2.0 * sigma**2), epsilon) <= delta
    assert zcdp_delta(1.0 / (2.0 * (sigma * (1 - 1e-6)) ** 2), epsilon) > delta


def test_sigma_for_zcdp_widens_until_the_end_is_past_the_root():
    """The upper end is widened while δ(σ) is above the target at all, not only while it is far above:
    a target a factor e^0.5 below δ at the first upper end (excess 0.5) still needs one widening step."""
    from dpch.mechanisms.zcdp import sigma_for_zcdp, zcdp_delta

    first_hi = math.exp(5.0)  # Δ = 1
    target = zcdp_delta(1.0 / (2.0 * first_hi**2), 0.001) * math.exp(-0.5)
    sigma = sigma_for_zcdp(0.001, target, 1.0)
    assert sigma > first_hi and zcdp_delta(1.0 / (2.0 * sigma**2), 0.001) <= target
