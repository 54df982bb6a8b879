"""Edges of the discrete Laplace's tail (issue 31: a branch no test reached survived the campaign)."""

from __future__ import annotations

import math

import pytest

from dpch.mechanisms.discrete import discrete_laplace_tail


@pytest.mark.parametrize("scale", [0.5, 3.0, 40.0])
def test_the_tail_below_zero_is_everything(scale):
    """P(|Z| > k) = 1 for k < 0 (every draw, 0 included, exceeds a negative k); at k = 0 it is 2p/(1 + p)."""
    for k in (-1, -2, -10):
        assert discrete_laplace_tail(scale, k) == 1.0
    p = math.exp(-1.0 / scale)
    assert discrete_laplace_tail(scale, 0) == pytest.approx(2 * p / (1 + p), rel=1e-12)
