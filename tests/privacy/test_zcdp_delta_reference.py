"""The optimal zCDP → (ε, δ) conversion against a reference that shares nothing with the code
(issue 31, the campaign's survivors in ``privacy/conversions.py``: ``zcdp_delta``).

Canonne, Kamath & Steinke 2020, Cor 13: δ = inf_{α>1} exp((α−1)(αρ−ε))/(α−1)·(1 − 1/α)^α. The reference
evaluates the log of the bracket on a dense log grid of α − 1 (10^-8 to 10^12, 400 000 points) and takes
the minimum: it is at or above the infimum, and within a relative 1e-4 of it at this spacing. The code's
δ must lie between the two: at most the grid's minimum (plus 1e-9 relative) — a code δ above it means its
search missed the optimum — and at least 1e-4 below it.

The cases include ε ≫ ρ (with δ still a normal float), whose optimum α ≈ (ε + ρ)/(2ρ) is far from 1;
ρ = 0 (no privacy loss at all: δ = 0, not a division by zero); and ρ ≫ ε, where the bound
exceeds 1 and δ is 1.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpch.privacy.conversions import zcdp_delta

#: α − 1 on a log grid
ALPHA_MINUS_ONE = np.logspace(-8, 12, 400_000)


def reference_delta(rho: float, epsilon: float) -> float:
    a1 = ALPHA_MINUS_ONE
    a = 1.0 + a1
    log_bracket = a1 * (a * rho - epsilon) - np.log(a1) + a * (np.log(a1) - np.log(a))
    return float(min(1.0, math.exp(float(np.min(log_bracket)))))


CASES = [
    (0.5, 1.0),
    (0.01, 1.0),
    (1e-4, 0.3),  # the optimum α ≈ (ε + ρ)/(2ρ) = 1 500, δ about e^-225
    (1e-8, 0.003),  # α ≈ 1.5·10^5
    (2.0, 0.5),
    (0.125, 3.0),
]


@pytest.mark.parametrize("rho, epsilon", CASES)
def test_the_delta_is_the_infimum_over_alpha(rho, epsilon):
    got = zcdp_delta(rho, epsilon)
    grid = reference_delta(rho, epsilon)
    assert 0.0 < grid < 1.0  # the cases are inside (0, 1), where the search decides
    assert got <= grid * (1 + 1e-9), f"the search missed the optimum: {got} above the grid's {grid}"
    assert got >= grid * (1 - 1e-4), f"{got} is below the infimum the grid brackets ({grid})"


def test_the_reference_would_see_a_search_that_misses():
    """Negative control: the bracket evaluated at α = 2 (a fixed α, not the optimum) is far above the
    grid's minimum where the optimum α is 1 500, so a search bracketed away from it fails the test above."""
    rho, epsilon = 1e-4, 0.3
    a1 = 1.0
    fixed = math.exp(a1 * ((1 + a1) * rho - epsilon) - math.log(a1) + (1 + a1) * (math.log(a1) - math.log(1 + a1)))
    assert fixed > 1e3 * reference_delta(rho, epsilon)


def test_no_privacy_loss_has_no_delta():
    assert zcdp_delta(0.0, 1.0) == 0.0
    assert zcdp_delta(0.0, 0.0) == 0.0


@pytest.mark.parametrize("rho, epsilon", [(100.0, 0.0), (50.0, 1.0), (1e6, 0.5)])
def test_a_bound_above_one_is_one(rho, epsilon):
    """δ is a probability: where the bracket's infimum exceeds 1 the conversion says 1, not more."""
    assert reference_delta(rho, epsilon) == 1.0
    assert zcdp_delta(rho, epsilon) == 1.0
