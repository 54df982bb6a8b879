"""Calibration values the campaign's map showed unreached (issue 31), each pinned by value.

- The analytic Gaussian σ (Balle & Wang 2018, Thm 8) where it is below Δ·10⁻³ (ε 10⁶: the search's
  lower end must fall) is the smallest that fits: δ(σ) ≤ δ, and δ(σ·(1 − 2·10⁻¹²)) > δ (the bisection
  stops at relative width 10⁻¹²).
- A confidence outside (0, 1) is refused in words by every half-width; the last float below 1 is
  accepted with h = b·ln(1/β).
- ``calibration.gaussian_rho`` is Δ2²/(2σ²) (Bun & Steinke 2016, Prop 1.6).
- Laplace noise reduction's iterate half-width is Lap(t_step)'s plus the grid's rounding t_step·2⁻²⁰.
- A real-valued release of values beyond 2⁶¹ grid steps takes the Python-integer path and keeps them:
  ±10³⁰ comes back as ±10³⁰ (the noise is far below its ulp) and a small value beside it is noised.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpch.mechanisms import calibration
from dpch.mechanisms.laplace import LaplaceMechanism
from dpch.mechanisms.lnr import LaplaceNoiseReduction
from dpch.mechanisms.sampling import NoiseSource

BELOW_ONE = math.nextafter(1.0, 0.0)


@pytest.mark.parametrize("epsilon", [1e6, 1e7])
def test_the_analytic_sigma_below_a_thousandth_of_delta_is_the_smallest_that_fits(epsilon):
    delta, sensitivity = 1e-6, 1.0
    sigma = calibration.analytic_gaussian_sigma(epsilon, delta, sensitivity)
    assert sigma < sensitivity * 1e-3  # the search's first lower end did not hold it
    assert calibration.analytic_gaussian_delta(sigma, epsilon, sensitivity) <= delta
    assert calibration.analytic_gaussian_delta(sigma * (1 - 2e-12), epsilon, sensitivity) > delta


@pytest.mark.parametrize("half_width", [
    lambda c: calibration.laplace_half_width(2.0, c),
    lambda c: calibration.gaussian_half_width(2.0, c),
], ids=["laplace", "gaussian"])
@pytest.mark.parametrize("confidence", [0.0, 1.0, -0.5, math.nan])
def test_a_confidence_outside_0_1_is_refused_in_words(half_width, confidence):
    with pytest.raises(ValueError, match="confidence must be strictly between 0 and 1"):
        half_width(confidence)


def test_the_last_confidence_below_one_is_accepted():
    beta = 1.0 - BELOW_ONE
    assert calibration.laplace_half_width(2.0, BELOW_ONE) == pytest.approx(2.0 * math.log(1.0 / beta), rel=1e-12)


def test_gaussian_rho_is_delta_squared_over_two_sigma_squared():
    assert calibration.gaussian_rho(4.0, 2.0) == pytest.approx(2.0**2 / (2 * 4.0**2), rel=1e-15)


def test_a_noise_reduction_iterate_half_width_adds_the_grid_rounding():
    mech = LaplaceNoiseReduction(1.0, [0.25, 1.0])
    for step, scale in enumerate((4.0, 1.0)):
        expected = calibration.laplace_half_width(scale, 0.9) + scale * 2.0**-20
        assert mech.half_width(step, 0.9) == pytest.approx(expected, rel=1e-15)


def test_values_beyond_the_int64_grid_are_kept():
    released = LaplaceMechanism(1.0, 1.0).release(np.array([1e30, -1e30, 3.0]), NoiseSource(seed=1))
    assert released.dtype == np.float64
    assert (released[0], released[1]) == (1e30, -1e30)
    assert released[2] != 3.0 and abs(released[2] - 3.0) < 30.0  # noised: Lap(1) beyond 30 has chance e^−30
