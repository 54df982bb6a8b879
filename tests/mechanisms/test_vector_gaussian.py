"""Vector (GROUP BY) Gaussian releases: σ meets (ε, δ) through the exact zCDP of the
multivariate discrete Gaussian (CKS 2020 Thm 14) and CKS Corollary 13's conversion."""

from __future__ import annotations

import math

import pytest

from dpch.mechanisms.calibration import _analytic_gaussian_excess, analytic_gaussian_sigma
from dpch.mechanisms.gaussian import GaussianMechanism
from dpch.mechanisms.zcdp import sigma_for_zcdp, zcdp_delta, zcdp_to_dp_epsilon

CASES = [(1.0, 1e-5), (0.5, 1e-6), (0.1, 1e-5), (2.0, 1e-5)]


@pytest.mark.parametrize("epsilon, delta", CASES)
def test_conversion_is_tighter_than_the_simple_bound_and_sound(epsilon, delta):
    sigma = sigma_for_zcdp(epsilon, delta, 1.0)
    rho = 1 / (2 * sigma**2)
    assert zcdp_delta(rho, epsilon) <= delta
    # sound: never below the exact δ of the continuous Gaussian with this σ (Balle–Wang)
    assert _analytic_gaussian_excess(sigma, epsilon, 1.0) <= zcdp_delta(rho, epsilon) * (1 + 1e-9)
    # and never below the analytic Gaussian's σ, which is optimal for the Gaussian itself
    assert sigma >= analytic_gaussian_sigma(epsilon, delta)
    # tighter than ρ + 2√(ρ log 1/δ): the simple conversion would need a smaller ρ
    assert zcdp_to_dp_epsilon(rho, delta) > epsilon


def test_zcdp_delta_matches_a_brute_force_minimum():
    rho, epsilon = 0.05, 1.0
    brute = min(
        math.exp((a - 1) * (a * rho - epsilon)) / (a - 1) * (1 - 1 / a) ** a
        for a in (1 + i / 1000 for i in range(1, 100_000))
    )
    assert zcdp_delta(rho, epsilon) == pytest.approx(brute, rel=1e-6)


def test_grouped_integer_gaussian_uses_the_vector_calibration():
    scalar = GaussianMechanism(0.5, 1e-6, 10.0, integer=True)
    vector = GaussianMechanism(0.5, 1e-6, 10.0, integer=True, dimension=4)
    assert vector.sigma == pytest.approx(max(scalar.sigma, sigma_for_zcdp(0.5, 1e-6, 10.0)))
    assert vector.sigma > scalar.sigma
    assert vector.cost.rho == pytest.approx(100 / (2 * vector.sigma**2))
