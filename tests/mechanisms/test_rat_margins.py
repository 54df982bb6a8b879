"""ReducedAboveThreshold's per-round margins (dpch/mechanisms/rat.py; issue 24, item 5).

- :func:`halting_tail`, P(ξ − ζ ≥ m) for ξ ~ Lap(4Δ/ε), ζ ~ Lap(2Δ/ε) independent, is **[derived]**:
  checked against 400 000 draws at several m (each rate within its binomial 99.9% band).
- :func:`halting_margins` puts β·p_n in each round's tail, Σ = β.
- A run whose utility stays just below the threshold halts (wrongly) at most β of the time over 2 000
  runs at a fixed seed (upper end of the 99.9% band); without margins it halts nearly always
  (negative control).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpch.mechanisms.rat import ReducedAboveThreshold, halting_margins, halting_tail
from dpch.mechanisms.sampling import NoiseSource
from dpch.privacy.cost import PrivacyCost

Z999 = 3.29


@pytest.mark.parametrize("margin", [-8.0, -2.0, 0.0, 2.0, 8.0, 20.0])
def test_the_tail_of_the_test_noise_matches_draws(margin):
    rng = np.random.default_rng(17)
    epsilon, delta, n = 0.8, 1.0, 400_000
    draws = rng.laplace(0.0, 4 * delta / epsilon, n) - rng.laplace(0.0, 2 * delta / epsilon, n)
    p = halting_tail(margin, epsilon, delta)
    rate = float(np.mean(draws >= margin))
    band = Z999 * math.sqrt(p * (1 - p) / n)
    assert abs(rate - p) <= band, f"P(ξ − ζ ≥ {margin}) = {rate:.5f}, formula {p:.5f} ± {band:.5f}"


def test_the_margins_spend_beta_over_the_rounds():
    epsilons = list(np.geomspace(0.01, 2.0, 50))
    margins = halting_margins(epsilons, 1.0, 0.05)
    tails = [halting_tail(m, e, 1.0) for m, e in zip(margins, epsilons, strict=True)]
    assert sum(tails) == pytest.approx(0.05, rel=1e-9)
    assert tails[-1] > tails[0]  # weighted towards the finer rounds, where a halt is likely
    uniform = halting_margins(epsilons, 1.0, 0.05, [1.0] * 50)
    assert [halting_tail(m, e, 1.0) for m, e in zip(uniform, epsilons, strict=True)] == pytest.approx([0.001] * 50)


class _Constant:
    """An inner run whose iterates do not matter: the utility below is constant."""

    def next(self) -> np.ndarray:
        return np.zeros(1)

    @property
    def cost(self) -> PrivacyCost:
        return PrivacyCost(0.0, 0.0)


def _wrong_halts(margins: tuple[float, ...], epsilons: list[float], runs: int) -> float:
    rat = ReducedAboveThreshold(1.0, epsilons[-1], 0.0, tuple(epsilons), margins)
    source = NoiseSource(99)
    halted = sum(rat.run(_Constant(), lambda _: -1e-9, source).halted_at is not None for _ in range(runs))
    return halted / runs


def test_a_utility_below_the_threshold_halts_at_most_beta_of_the_time():
    epsilons = list(np.geomspace(0.05, 5.0, 40))
    beta, runs = 0.05, 2000
    rate = _wrong_halts(halting_margins(epsilons, 1.0, beta), epsilons, runs)
    assert rate <= beta + Z999 * math.sqrt(beta * (1 - beta) / runs), f"halted {rate:.3f} of the runs"
    control = _wrong_halts(tuple(0.0 for _ in epsilons), epsilons, runs)
    assert control > 0.9, f"without margins it halted only {control:.3f}: the test has no power"


@pytest.mark.parametrize("beta", [0.05, 0.5, 0.6, 0.7, 0.9, 0.99])
def test_each_round_gets_its_share_of_beta_even_above_one_half(beta):
    """β·p_n above ½ (a confidence below ½, one round) needs a negative margin: the tail formula alone
    holds for m ≥ 0 and gave a wrong margin up to β·p_n = 2/3, and a math error above it. Each round's
    tail at its margin is its share of β, on either side of ½."""
    epsilons = [0.2, 0.5, 1.0]
    for weights in (None, [6.0, 1.0, 1.0]):
        margins = halting_margins(epsilons, 1.0, beta, weights)
        w = np.asarray(epsilons if weights is None else weights, dtype=float)
        for eps, m, share in zip(epsilons, margins, w / w.sum(), strict=True):
            assert halting_tail(m, eps, 1.0) == pytest.approx(beta * share, rel=1e-9, abs=1e-15)
            assert (m < 0) == (beta * share > 0.5)
