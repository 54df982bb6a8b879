"""The selection mechanisms' costs, half-widths and σ search, pinned by value (issue 31: the campaign's map
showed no test reaching them in ``mechanisms/selection.py``).

- Gaussian Report Noisy Max's ``for_epsilon`` returns the *smallest* σ whose Thm 8 ε (Lebensold et al.
  2024) fits, also where its first bracket does not hold the root: a tiny ε needs σ far above 10·c (the
  bracket's upper end grows), a huge ε a σ below Δ/100 (its lower end falls).
- ``score_half_width``: all d noisy scores are within it with the stated confidence. Written out:
  σ·Φ⁻¹(1 − β/(2d)) for the Gaussian (a union bound over d two-sided tails), b·log(d/β) for the Laplace
  (d·e^{−t/b} = β), β = 1 − confidence; and checked against 20 000 simulated noise vectors (the share
  covered is at least the confidence, minus 4.5 standard errors).
- Laplace Above Threshold (Dwork & Roth 2014, Alg. 1) costs ε, pure.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import norm

from dpch.mechanisms.sampling import NoiseSource
from dpch.mechanisms.selection import GaussianReportNoisyMax, LaplaceAboveThreshold, LaplaceReportNoisyMax
from dpch.mechanisms.selection_bounds import rnm_epsilon
from dpch.privacy.cost import PrivacyCost

TRIALS = 20_000


@pytest.mark.parametrize("epsilon, sensitivity, upper, d", [
    (1e-3, 1.0, 10.0, 4),  # σ ≈ 10^3·c: above the first bracket's 10·c
    (1e6, 1.0, 10.0, 3),  # σ ≈ 0.0035, below Δ/100: under the first bracket's lower end
    (0.5, 0.25, 1.0, 8),  # inside the first bracket
], ids=["tiny epsilon", "huge epsilon", "ordinary"])
def test_for_epsilon_is_the_smallest_sigma_that_fits(epsilon, sensitivity, upper, d):
    mech = GaussianReportNoisyMax.for_epsilon(epsilon, sensitivity, 0.0, upper, d)
    assert mech.epsilon == rnm_epsilon(upper, sensitivity, mech.sigma, d) <= epsilon
    # 2·10^-6 smaller (twice its round-up) no longer fits: the search found the root, not any σ above it
    assert rnm_epsilon(upper, sensitivity, mech.sigma / (1 + 2e-6), d) > epsilon


def test_the_brackets_first_ends_do_not_hold_the_extreme_roots():
    """The cases above reach the widening loops: the tiny ε's σ is above 10·c, the huge ε's below Δ/100."""
    assert GaussianReportNoisyMax.for_epsilon(1e-3, 1.0, 0.0, 10.0, 4).sigma > 10 * 10.0
    assert GaussianReportNoisyMax.for_epsilon(1e6, 1.0, 0.0, 10.0, 3).sigma < 1.0 * 1e-2


def covered(noise: np.ndarray, half_width: float) -> float:
    return float(np.mean(np.max(np.abs(noise), axis=1) <= half_width))


@pytest.mark.parametrize("confidence", [0.9, 0.95])
def test_gaussian_score_half_width_is_the_union_bound(confidence):
    d, sigma = 6, 2.0
    mech = GaussianReportNoisyMax(sigma, 0.5, 0.0, 100.0, d)
    beta = 1 - confidence
    half = mech.score_half_width(confidence)
    assert half == pytest.approx(sigma * norm.ppf(1 - beta / (2 * d)), rel=1e-12)
    noise = NoiseSource(seed=7).normal(sigma, (TRIALS, d))
    share = covered(noise, half)
    assert share >= confidence - 4.5 * math.sqrt(confidence * beta / TRIALS)
    # the union bound is not slack by more than its d-fold: a half-width for β·d is not enough
    assert covered(noise, sigma * norm.ppf(1 - beta / 2)) < confidence


@pytest.mark.parametrize("monotonic", [False, True])
def test_laplace_score_half_width_is_the_union_bound(monotonic):
    d, confidence = 5, 0.95
    mech = LaplaceReportNoisyMax(0.5, 1.0, monotonic=monotonic)
    half = mech.score_half_width(d, confidence)
    assert half == pytest.approx(mech.scale * math.log(d / (1 - confidence)), rel=1e-12)
    noise = NoiseSource(seed=8).laplace(mech.scale, (TRIALS, d))
    share = covered(noise, half)
    assert share >= confidence - 4.5 * math.sqrt(confidence * (1 - confidence) / TRIALS)
    assert covered(noise, mech.scale * math.log(1 / (1 - confidence))) < confidence


def test_laplace_selections_cost_their_epsilon_pure():
    assert LaplaceAboveThreshold(0.7, 1.0, threshold=3.0).cost == PrivacyCost(0.7, 0.0)
    assert LaplaceReportNoisyMax(0.3, 1.0).cost == PrivacyCost(0.3, 0.0)
