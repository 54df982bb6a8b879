"""The exact samplers' Python-integer path, tested for its law (issue 31: the campaign's map showed no test
reaching it).

:func:`discrete_gaussian` hands a candidate whose exponent would overflow int64 to
:func:`bernoulli_exp_exact` (CKS 2020, Algorithm 1 with Python integers), which draws its fractional part
with :func:`uniform_below`. The path is rare in a release (|Y| beyond ~32σ), so it is checked directly:

- ``bernoulli_exp_exact(num, den)`` is Bernoulli(exp(−num/den)): its rate over 40 000 draws is within
  4.5 standard errors of e^−γ for γ below 1, above 1 with a fraction, a whole number, and with num and
  den far beyond int64 (2^70); a draw at γ 10 % larger is far outside (the negative control);
- ``uniform_below(bound)`` is uniform on {0, …, bound − 1}: χ² over 7 and over 12 cells (bounds just
  above and at a power of two, where the rejection step matters), never ``bound`` or above, and a
  bound of several 32-bit words covers its top half as often as its bottom half.

Fixed seeds; P_CRIT 1e-4 as in tests/mechanisms/test_exact.py.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from dpch.mechanisms.exact import bernoulli_exp_exact, uniform_below

DRAWS = 40_000
P_CRIT = 1e-4


def rate(gamma: Fraction, seed: int, scale: int = 1) -> float:
    rng = np.random.default_rng(seed)
    num, den = gamma.numerator * scale, gamma.denominator * scale
    return sum(bernoulli_exp_exact(rng, num, den) for _ in range(DRAWS)) / DRAWS


def within(observed: float, gamma: float) -> bool:
    p = math.exp(-gamma)
    return abs(observed - p) < 4.5 * math.sqrt(p * (1 - p) / DRAWS)


@pytest.mark.parametrize("gamma, scale", [
    (Fraction(1, 3), 1),
    (Fraction(7, 4), 1),  # ⌊γ⌋ = 1 Bernoulli(e^−1), then the fraction ¾
    (Fraction(2), 1),  # a whole γ: no fractional step left
    (Fraction(5, 2), 2**70),  # num and den beyond int64
], ids=["1/3", "7/4", "2", "5/2 at 2^70"])
def test_bernoulli_exp_exact_has_rate_exp_minus_gamma(gamma, scale):
    observed = rate(gamma, seed=31, scale=scale)
    assert within(observed, float(gamma)), f"rate {observed:.4f}, e^−{gamma} = {math.exp(-float(gamma)):.4f}"


def test_a_gamma_ten_percent_off_is_detected():
    """Negative control: the draws at γ = 7/4 are not within the tolerance of e^−(1.1·7/4)."""
    assert not within(rate(Fraction(7, 4), seed=31), 1.1 * 1.75)


def test_a_zero_exponent_always_succeeds():
    rng = np.random.default_rng(1)
    assert all(bernoulli_exp_exact(rng, 0, 5) for _ in range(1000))


@pytest.mark.parametrize("bound", [7, 12, 16, 17])
def test_uniform_below_is_uniform(bound):
    rng = np.random.default_rng(bound)
    draws = [uniform_below(rng, bound) for _ in range(1000 * bound)]
    assert min(draws) == 0 and max(draws) == bound - 1
    counts = np.bincount(draws, minlength=bound)
    assert counts.size == bound
    assert stats.chisquare(counts).pvalue > P_CRIT


def test_uniform_below_of_one_is_zero():
    rng = np.random.default_rng(1)
    assert {uniform_below(rng, 1) for _ in range(100)} == {0}


def test_uniform_below_a_bound_of_several_words_covers_both_halves():
    bound = 3 * 2**95 + 12345  # four 32-bit words, not a power of two
    rng = np.random.default_rng(5)
    draws = [uniform_below(rng, bound) for _ in range(20_000)]
    assert all(0 <= x < bound for x in draws)
    upper = sum(x >= bound // 2 for x in draws) / len(draws)
    assert abs(upper - 0.5) < 4.5 * math.sqrt(0.25 / len(draws))
    # the top word varies: the draws are not confined to the low words
    assert len({x >> 64 for x in draws}) > 1000
