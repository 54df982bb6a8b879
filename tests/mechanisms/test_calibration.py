"""Calibration numbers: docs/algorithms.md part C test vectors and the discrete Gaussian (CKS)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpch.mechanisms import calibration
from dpch.mechanisms.discrete import (
    EXACT_SIGMA_LIMIT,
    delta_euler_maclaurin,
    discrete_gaussian_delta,
    discrete_gaussian_half_width,
    discrete_gaussian_sigma,
    discrete_gaussian_tail,
)


@pytest.mark.parametrize(
    ("eps", "delta", "sigma", "classic"),
    [
        (1.0, 1e-5, 3.730632, 4.844805),
        (0.5, 1e-6, 8.057618, 10.597605),
        (0.1, 1e-5, 30.749566, 48.448053),
        (2.0, 1e-5, 1.993812, 2.422403),
    ],
)
def test_analytic_gaussian_part_c_vectors(eps, delta, sigma, classic):
    """docs/algorithms.md part C [computed] vectors (Balle & Wang 2018 Thm 8 root), 7 digits."""
    assert calibration.analytic_gaussian_sigma(eps, delta, 1.0) == pytest.approx(sigma, abs=2e-6)
    assert calibration.classic_gaussian_sigma(eps, delta, 1.0) == pytest.approx(classic, abs=2e-6)


def test_half_width_inverses():
    for conf in (0.5, 0.9, 0.95, 0.999):
        h = calibration.laplace_half_width(2.5, conf)
        assert calibration.laplace_scale_for_half_width(h, conf) == pytest.approx(2.5)
        h = calibration.gaussian_half_width(2.5, conf)
        assert calibration.gaussian_sigma_for_half_width(h, conf) == pytest.approx(2.5)


def _dgauss_delta_bruteforce(eps: float, sigma: float, shift: int) -> float:
    """δ = Σ_y max(0, p(y) − e^ε p(y − Δ)) by direct summation (hockey-stick definition)."""
    ys = np.arange(-int(50 * sigma) - 50, int(50 * sigma) + 51)
    w = np.exp(-(ys.astype(float) ** 2) / (2 * sigma**2))
    p = w / w.sum()
    shifted = np.exp(-((ys - shift).astype(float) ** 2) / (2 * sigma**2)) / w.sum()
    return float(np.maximum(0.0, p - math.exp(eps) * shifted).sum())


@pytest.mark.parametrize(("eps", "sigma", "shift"), [(1.0, 3.74, 1), (0.5, 2.0, 2), (0.2, 10.3, 3)])
def test_discrete_gaussian_delta_matches_hockey_stick(eps, sigma, shift):
    """CKS Theorem 7's closed form equals the hockey-stick divergence computed by brute force."""
    got = discrete_gaussian_delta(eps, sigma, shift)
    want = _dgauss_delta_bruteforce(eps, sigma, shift)
    assert got == pytest.approx(want, rel=1e-9, abs=1e-15)


@pytest.mark.parametrize(("eps", "sigma"), [(0.001, 1500.0), (0.01, 200.0), (0.003, 900.0)])
def test_euler_maclaurin_bound_is_an_upper_bound_and_tight(eps, sigma):
    """Large-σ branch: the E–M bound is ≥ the exact δ, within 3% of it (checked below the limit)."""
    n1 = math.floor(eps * sigma**2 - 0.5) + 1
    exact = discrete_gaussian_delta(eps, sigma, 1)
    bound = delta_euler_maclaurin(eps, sigma, 1, n1)
    assert exact <= bound <= exact * 1.03 + 1e-300, f"bound {bound:.6g} vs exact {exact:.6g}"


def test_discrete_gaussian_sigma_meets_delta():
    for eps, delta, sens in [(1.0, 1e-5, 1.0), (0.001, 1e-6, 1.0), (0.3, 1e-6, 7.0)]:
        sigma = discrete_gaussian_sigma(eps, delta, sens)
        assert discrete_gaussian_delta(eps, sigma, math.ceil(sens)) <= delta
        # and it is tight: 0.1% less noise would break δ
        assert discrete_gaussian_delta(eps, sigma * 0.999, math.ceil(sens)) > delta
        # close to the continuous calibration (CKS: essentially the same privacy)
        cont = calibration.analytic_gaussian_sigma(eps, delta, math.ceil(sens))
        assert abs(sigma / cont - 1) < 0.01


def test_discrete_gaussian_half_width():
    for sigma in (0.8, 3.7, 40.0, EXACT_SIGMA_LIMIT * 3):
        k = discrete_gaussian_half_width(sigma, 0.95)
        assert discrete_gaussian_tail(sigma, k) <= 0.05
        assert k <= math.ceil(1.959964 * sigma)
        if sigma <= EXACT_SIGMA_LIMIT and k > 0:
            assert discrete_gaussian_tail(sigma, k - 1) > 0.05
