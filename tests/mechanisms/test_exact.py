"""Exact discrete samplers (CKS 2020 Algorithms 1–3) against their exact pmfs.

χ² goodness of fit at p = 1e-4 with 10^5 samples (fixed seeds: a pass is permanent). The
negative controls show the same test rejects a sampler with a 10% wrong scale, so the test
has power for the errors we care about.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from dpch.mechanisms.exact import (
    bernoulli_exp,
    discrete_gaussian,
    discrete_laplace,
    rational_at_least,
)

N = 100_000
P_CRIT = 1e-4


def chi2_pvalue(samples: np.ndarray, pmf, support_half: int) -> float:
    """χ² p-value of integer samples against ``pmf`` on bins [-K, K], bins with < 5 expected
    merged into one, and both tails (|z| > K) pooled into a final bin."""
    ks = np.arange(-support_half, support_half + 1)
    expected = pmf(ks) * samples.size
    tail_expected = samples.size - expected.sum()
    inside = np.abs(samples) <= support_half
    observed = np.bincount(samples[inside] + support_half, minlength=ks.size).astype(float)
    tail_observed = float(np.sum(~inside))
    keep = expected >= 5
    obs = np.concatenate([observed[keep], [observed[~keep].sum() + tail_observed]])
    exp = np.concatenate([expected[keep], [expected[~keep].sum() + tail_expected]])
    if exp[-1] < 5:  # fold a tiny remainder bin into the last kept one
        obs[-2] += obs[-1]
        exp[-2] += exp[-1]
        obs, exp = obs[:-1], exp[:-1]
    return float(stats.chisquare(obs, exp).pvalue)


def dlap_pmf(scale: float):
    p = np.exp(-1.0 / scale)
    return lambda k: (1 - p) / (1 + p) * p ** np.abs(k)


def dgauss_pmf(sigma: float):
    support = np.arange(-int(60 * sigma) - 60, int(60 * sigma) + 61)
    norm = np.exp(-(support**2) / (2 * sigma**2)).sum()
    return lambda k: np.exp(-(np.asarray(k, float) ** 2) / (2 * sigma**2)) / norm


@pytest.mark.parametrize("scale", [0.5, 1.0, 3.0, 7.25])
def test_discrete_laplace_matches_pmf(rng, scale):
    z = discrete_laplace(rng, rational_at_least(scale), N)
    half = int(6 * scale) + 2
    p = chi2_pvalue(z, dlap_pmf(scale), half)
    assert p > P_CRIT, f"discrete Laplace(scale={scale}) χ² p={p:.2e} ≤ {P_CRIT}"


def test_discrete_laplace_chi2_rejects_wrong_scale(rng):
    """Negative control: samples at 1.1× the scale fail the same test."""
    z = discrete_laplace(rng, rational_at_least(3.3), N)
    p = chi2_pvalue(z, dlap_pmf(3.0), 20)
    assert p < P_CRIT, f"χ² should reject scale 3.3 vs pmf at 3.0, got p={p:.2e}"


@pytest.mark.parametrize("sigma", [0.6, 1.0, 3.73, 12.5])
def test_discrete_gaussian_matches_pmf(rng, sigma):
    z = discrete_gaussian(rng, rational_at_least(sigma**2), N)
    half = int(5 * sigma) + 2
    p = chi2_pvalue(z, dgauss_pmf(sigma), half)
    assert p > P_CRIT, f"discrete Gaussian(σ={sigma}) χ² p={p:.2e} ≤ {P_CRIT}"


def test_discrete_gaussian_chi2_rejects_wrong_sigma(rng):
    z = discrete_gaussian(rng, rational_at_least(3.3**2), N)
    p = chi2_pvalue(z, dgauss_pmf(3.0), 16)
    assert p < P_CRIT, f"χ² should reject σ=3.3 vs pmf at σ=3, got p={p:.2e}"


def test_discrete_gaussian_large_sigma_moments(rng):
    """σ = 2^20 (the grid-release regime): mean and variance within 4 standard errors."""
    sigma = 2.0**20
    z = discrete_gaussian(rng, rational_at_least(sigma**2), N).astype(float)
    se_mean = sigma / np.sqrt(N)
    se_var = sigma**2 * np.sqrt(2 / N)
    assert abs(z.mean()) < 4 * se_mean, f"mean {z.mean():.1f} beyond 4·se={4 * se_mean:.1f}"
    assert abs(z.var() - sigma**2) < 4 * se_var, f"var {z.var():.4g} vs {sigma**2:.4g} ± {4 * se_var:.3g}"


@pytest.mark.parametrize("gamma", [Fraction(1, 3), Fraction(1), Fraction(5, 2)])
def test_bernoulli_exp_rate(rng, gamma):
    n = 200_000
    hits = bernoulli_exp(rng, np.full(n, gamma.numerator), gamma.denominator).mean()
    p = np.exp(-float(gamma))
    se = np.sqrt(p * (1 - p) / n)
    assert abs(hits - p) < 4.5 * se, f"Bernoulli(exp(-{gamma})) rate {hits:.4f} vs {p:.4f} ± 4.5·se"


def test_rational_at_least_rounds_up():
    for v in [2.7, 1 / 3, 1e-3, 123456.789, 3.0, 2.0**45]:
        f = rational_at_least(v)
        assert f >= Fraction(v), f"{f} < {v}"
        assert float(f - Fraction(v)) <= v * 2**-20, f"{f} more than 2^-20 relative above {v}"


def test_exp_neg1_words_match_decimal():
    """The lazily compared bits of e^{-1} equal a 120-digit decimal expansion's."""
    from decimal import ROUND_FLOOR, Decimal, localcontext

    from dpch.mechanisms.exact import exp_neg1_word

    with localcontext() as ctx:
        ctx.prec = 120
        e1 = Decimal(-1).exp()
        for i in range(4):
            scaled = (e1 * Decimal(2) ** (64 * (i + 1))).to_integral_value(rounding=ROUND_FLOOR)
            assert exp_neg1_word(i) == int(scaled) & (2**64 - 1)


def test_bernoulli_exp_minus_one_rate(rng):
    from dpch.mechanisms.exact import bernoulli_exp_minus_one

    n = 1_000_000
    rate = bernoulli_exp_minus_one(rng, n).mean()
    p = np.exp(-1)
    se = np.sqrt(p * (1 - p) / n)
    assert abs(rate - p) < 4.5 * se, f"rate {rate:.5f} vs e^-1 ± 4.5·se={4.5 * se:.5f}"
