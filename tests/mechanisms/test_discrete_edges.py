"""Edges of the discrete Laplace's and Gaussian's tails (issue 31: branches no test reached survived the
campaign)."""

from __future__ import annotations

import math

import pytest

from dpch.mechanisms.discrete import discrete_gaussian_tail, discrete_laplace_tail


@pytest.mark.parametrize("scale", [0.5, 3.0, 40.0])
def test_the_tail_below_zero_is_everything(scale):
    """P(|Z| > k) = 1 for k < 0 (every draw, 0 included, exceeds a negative k); at k = 0 it is 2p/(1 + p)."""
    for k in (-1, -2, -10):
        assert discrete_laplace_tail(scale, k) == 1.0
    p = math.exp(-1.0 / scale)
    assert discrete_laplace_tail(scale, 0) == pytest.approx(2 * p / (1 + p), rel=1e-12)


@pytest.mark.parametrize("sigma", [0.7, 5.0, 3000.0])
def test_the_gaussian_tail_below_zero_is_everything(sigma):
    """Likewise P(|Y| > k) = 1 for k < 0, on both sides of the exact-summation limit (σ = 2000)."""
    for k in (-1, -3):
        assert discrete_gaussian_tail(sigma, k) == 1.0
    assert 0.0 < discrete_gaussian_tail(sigma, int(3 * sigma)) < 0.01  # and a real tail at 3σ
