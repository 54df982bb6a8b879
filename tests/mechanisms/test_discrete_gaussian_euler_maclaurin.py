"""The discrete Gaussian's δ above σ = 2000 (Euler–Maclaurin) against exact summation (issue 31,
"Privacy-relevant survivors": ``discrete.py``, ``h / 2.0`` → ``h * 2.0`` survived because no test compared
the bound with the sum it bounds).

CKS 2020, Theorem 7: for Y ~ N_Z(0, σ²) and an integer shift Δ,
δ = Σ_{y ≥ n1} (f(y) − e^ε f(y + Δ)) / Z, f(y) = exp(−y²/(2σ²)), Z = Σ_y f(y), n1 = ⌊εσ²/Δ − Δ/2⌋ + 1.
Above :data:`EXACT_SIGMA_LIMIT` dpch bounds it by Euler–Maclaurin with an explicit remainder term R (the
docstring of :func:`delta_euler_maclaurin`: |true remainder| ≤ R = (2 sup|f'| on [n1, ∞) + 2e^ε sup|f'| on
[n1 + Δ, ∞))/12, over Z ≥ σ√(2π)). So the bound lies in [δ, δ + 2R/(σ√(2π))]: it adds R, and the
true remainder it replaced is at most R in size.

The exact δ is summed here with :func:`math.fsum` (correctly rounded sums of the terms) over
|y| ≤ 40σ + 40 (the terms beyond are below e^{−800}); R is computed here from its definition, with
sup_{y ≥ n}|f'(y)| = |f'(max(n, σ))| (|f'| peaks at y = σ).

The shift Δ is of the order of σ, where the h(n1)/2 term is large against R: the mutant's bound lies
1.3–2.6 allowances above the exact δ (the negative control builds it and asserts that it would fail).
"""

from __future__ import annotations

import functools
import math

import numpy as np
import pytest

from dpch.mechanisms.discrete import EXACT_SIGMA_LIMIT, delta_euler_maclaurin, discrete_gaussian_delta

#: (ε, σ, Δ): every σ above the exact limit; a1 = εσ²/Δ − Δ/2 both whole (n1 − a1 = 1) and not
CASES = [(1.0, 2500.0, 2500), (1.0, 3000.0, 3000), (0.5, 4000.0, 2000), (1.0, 2001.0, 1500),
         (0.8, 2700.0, 2000), (2.0, 4096.0, 4096), (1.0, 5000.0, 5000)]


def _f(y: np.ndarray | float, sigma: float) -> np.ndarray | float:
    return np.exp(-(np.asarray(y, dtype=float) ** 2) / (2.0 * sigma * sigma))


@functools.cache  # each case's sum is shared by the tests below (seconds of the fast tier's time)
def _exact_delta(epsilon: float, sigma: float, shift: int) -> tuple[float, int]:
    """CKS Thm 7's δ by summation, and n1."""
    n1 = math.floor(epsilon * sigma * sigma / shift - shift / 2.0) + 1
    reach = int(40 * sigma) + 40
    z = math.fsum(_f(np.arange(-reach, reach + 1), sigma))
    ys = np.arange(n1, n1 + 2 * reach)
    tail = math.fsum(_f(ys, sigma)) - math.exp(epsilon) * math.fsum(_f(ys + shift, sigma))
    return tail / z, n1


def _allowance(epsilon: float, sigma: float, shift: int, n1: int) -> float:
    """2R/(σ√(2π)): how far above the exact δ the bound may lie."""
    def sup_df(n: float) -> float:
        y = max(n, sigma)
        return y / (sigma * sigma) * float(_f(y, sigma))

    r = (2.0 * sup_df(n1) + math.exp(epsilon) * 2.0 * sup_df(n1 + shift)) / 12.0
    return 2.0 * r / (sigma * math.sqrt(2.0 * math.pi))


@pytest.mark.parametrize(("epsilon", "sigma", "shift"), CASES)
def test_the_bound_is_above_the_exact_sum_and_within_its_remainder(epsilon, sigma, shift):
    assert sigma > EXACT_SIGMA_LIMIT
    exact, n1 = _exact_delta(epsilon, sigma, shift)
    allowance = _allowance(epsilon, sigma, shift, n1)
    bound = delta_euler_maclaurin(epsilon, sigma, shift, n1)
    assert exact > 1e-3, "a δ large enough that the summation's rounding (~1e-16 relative) is negligible"
    assert bound >= exact, f"Euler–Maclaurin must bound δ above: {bound!r} < exact {exact!r}"
    assert bound - exact <= allowance, (
        f"bound − exact = {bound - exact:.3e} exceeds 2R/(σ√2π) = {allowance:.3e} (exact δ {exact:.12g})")
    # what the release path uses above the limit is this bound
    assert discrete_gaussian_delta(epsilon, sigma, shift) == bound


@pytest.mark.parametrize(("epsilon", "sigma", "shift"), CASES)
def test_negative_control_doubling_the_half_term_leaves_the_allowance(epsilon, sigma, shift):
    """The mutant (h/2 → 2h) adds 1.5·h(n1)/(σ√(2π)) to the bound: that bound is out of the allowance."""
    exact, n1 = _exact_delta(epsilon, sigma, shift)
    h = float(_f(n1, sigma)) - math.exp(epsilon) * float(_f(n1 + shift, sigma))
    mutant = delta_euler_maclaurin(epsilon, sigma, shift, n1) + 1.5 * h / (sigma * math.sqrt(2.0 * math.pi))
    assert mutant - exact > 1.3 * _allowance(epsilon, sigma, shift, n1)


def test_small_shift_far_tail_is_still_a_bound():
    """Δ = 1: h(n1) is tiny against R (the mutant is not visible here), and δ ≈ 1.4e-9; the bound still
    bounds the exact δ within the allowance."""
    epsilon, sigma, shift = 0.002, 2100.0, 1
    exact, n1 = _exact_delta(epsilon, sigma, shift)
    bound = delta_euler_maclaurin(epsilon, sigma, shift, n1)
    assert 1e-10 < exact < 1e-8
    assert exact <= bound <= exact + _allowance(epsilon, sigma, shift, n1)


def _added(epsilon: float, sigma: float, shift: int, n1: int) -> float:
    """R/(σ√(2π)): the remainder allowance the bound adds (half of :func:`_allowance`)."""
    return _allowance(epsilon, sigma, shift, n1) / 2.0


def _next_term(epsilon: float, sigma: float, shift: int, n1: int) -> float:
    """|h'''(n1)|/720/(σ√(2π)): Euler–Maclaurin's next term, the size of the remainder the bound replaces by R
    (f''' = (3y/σ⁴ − y³/σ⁶)·f)."""
    def d3f(y: float) -> float:
        return (3 * y / sigma**4 - y**3 / sigma**6) * float(_f(y, sigma))

    return abs(d3f(n1) - math.exp(epsilon) * d3f(n1 + shift)) / 720.0 / (sigma * math.sqrt(2.0 * math.pi))


@pytest.mark.parametrize(("epsilon", "sigma", "shift"), CASES)
def test_the_bound_is_the_exact_sum_plus_the_remainder_it_adds(epsilon, sigma, shift):
    """Sharper: Σ h = ∫h + h(n1)/2 − h'(n1)/12 + R_true, and the bound puts R in place of R_true, so
    bound − exact = R − R_true with R_true of the order of the next term |h'''|/720, O(1/σ²) below R.
    Allowed: 1e-6·R (far above the next term and the sums' rounding, asserted first); a change of the
    h'/12 term or of R by a few percent is outside it."""
    exact, n1 = _exact_delta(epsilon, sigma, shift)
    added = _added(epsilon, sigma, shift, n1)
    assert _next_term(epsilon, sigma, shift, n1) < 1e-8 * added and 1e-15 * exact < 1e-7 * added
    bound = delta_euler_maclaurin(epsilon, sigma, shift, n1)
    assert bound - exact == pytest.approx(added, rel=1e-6), f"bound − exact {bound - exact:.6e} ≠ R {added:.6e}"


def test_the_exact_limit_is_summed_and_the_float_above_it_is_bounded():
    """σ = 2000 is summed exactly (equal to the sum here within 1e-10, far below the R ≈ 1.6e-7·δ the bound
    would add); the next float above it takes the Euler–Maclaurin bound."""
    epsilon, shift = 1.0, 2000
    exact, n1 = _exact_delta(epsilon, EXACT_SIGMA_LIMIT, shift)
    assert _added(epsilon, EXACT_SIGMA_LIMIT, shift, n1) > 1e-8 * exact
    assert discrete_gaussian_delta(epsilon, EXACT_SIGMA_LIMIT, shift) == pytest.approx(exact, rel=1e-10)
    above = math.nextafter(EXACT_SIGMA_LIMIT, math.inf)
    _, n1_above = _exact_delta(epsilon, above, shift)
    assert discrete_gaussian_delta(epsilon, above, shift) == delta_euler_maclaurin(epsilon, above, shift, n1_above)
