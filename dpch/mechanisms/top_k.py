"""Top-k selection by peeling: k rounds of report noisy max, each removing its winner.

Only the selected keys' indexes, in the order they were picked, are released — never a noisy score
(Lebensold et al. 2024, B11 pitfall 3).

Two selectors, both pure ε-DP per round:

- **Gaussian report noisy max** (Lebensold et al. 2024, Thm 8 = Thm 12; ALGORITHMS.md B7): round r
  adds N(0, σ²) to each remaining score, clamped to the public range [a, b] (data-independently,
  B11 pitfall 4), and releases the argmax. Its ε is Thm 8's for the d − r scores it sees; σ is
  calibrated so that the first round, over all d scores, costs ε/k (Thm 8's ε grows with d, so the
  later rounds cost less: each is computed, and the charge is their exact sum).
- **Exponential mechanism by Gumbel-max** (McSherry & Talwar 2007; the "Laplace/Gumbel" baseline):
  round r picks argmax (ε/k)·u_i/(2Δ) + Gumbel (Δ instead of 2Δ for monotone scores such as counts
  under adding or removing a unit). Peeling k of them is distributed as the one-shot Gumbel top-k (Durfee &
  Rogers 2019, §4), ε-DP by basic composition and k·(ε/k)²/8-zCDP as k bounded-range mechanisms
  (Cesar & Rogers 2021).

Peeling composes the k rounds adaptively (each round's candidates depend on the earlier winners):
basic composition, Dwork & Roth 2014, Thm 3.16, gives the sum of the rounds' ε; the cost is composed
from the rounds' typed costs, so a zCDP filter charges the rounds' ρ.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from dpch.mechanisms.exponential import ExponentialMechanism
from dpch.mechanisms.normal import ndtri
from dpch.mechanisms.sampling import NoiseSource
from dpch.mechanisms.selection import GaussianReportNoisyMax
from dpch.privacy.cost import PrivacyCost

Selector = GaussianReportNoisyMax | ExponentialMechanism


@dataclass(frozen=True)
class PeelingTopK:
    """k rounds of report noisy max over d scores; ``rounds[r]`` runs over the d − r scores left."""

    k: int
    d: int
    rounds: tuple[Selector, ...]

    def __post_init__(self) -> None:
        if not 1 <= self.k < self.d:
            raise ValueError(f"top-k needs 1 ≤ k < d, got k = {self.k}, d = {self.d}")
        if len(self.rounds) != self.k:
            raise ValueError("one selector per round")

    @property
    def name(self) -> str:
        return "gaussian report noisy max" if self.gaussian else "exponential (gumbel)"

    @property
    def gaussian(self) -> bool:
        return isinstance(self.rounds[0], GaussianReportNoisyMax)

    @property
    def cost(self) -> PrivacyCost:
        """The basic (and zCDP) composition of the k rounds' typed costs."""
        return PrivacyCost.composed([r.cost for r in self.rounds])

    @property
    def epsilon(self) -> float:
        return self.cost.epsilon

    def select(self, scores: np.ndarray, source: NoiseSource) -> list[int]:
        """The indexes of the k selected scores, in the order picked (best first)."""
        scores = np.asarray(scores, dtype=float)
        if scores.size != self.d:
            raise ValueError(f"expected {self.d} scores, got {scores.size}")
        left = list(range(self.d))
        picked: list[int] = []
        for selector in self.rounds:
            values = scores[left]
            if isinstance(selector, GaussianReportNoisyMax):
                winner = selector.release(values, source).index
            else:
                winner = selector.select(values, source)
            picked.append(left.pop(winner))
        return picked

    def score_gap(self, confidence: float = 0.95) -> float:
        """With ``confidence``, every round's winner scores within this of the best score left in
        that round (a union bound over the k rounds)."""
        beta = (1.0 - confidence) / self.k
        first = self.rounds[0]
        if isinstance(first, GaussianReportNoisyMax):
            # every noisy score of every round within σ·Φ⁻¹(1 − β/(2d)) of its score: the winner's
            # score is within twice that of the round's best
            return 2.0 * first.sigma * float(ndtri(1.0 - beta / (2 * self.d)))
        return first.utility_gap(self.d, 1.0 - beta)


def gaussian_top_k(epsilon: float, k: int, sensitivity: float, lower: float, upper: float, d: int) -> PeelingTopK:
    """Peeling Gaussian report noisy max with ε/k for the first round (Lebensold et al. 2024, Thm 8)."""
    first = GaussianReportNoisyMax.for_epsilon(epsilon / k, sensitivity, lower, upper, d)
    rounds = tuple(GaussianReportNoisyMax(first.sigma, sensitivity, lower, upper, d - r) for r in range(k))
    return PeelingTopK(k, d, rounds)


def gumbel_top_k(epsilon: float, k: int, sensitivity: float, d: int, *, monotonic: bool) -> PeelingTopK:
    """Peeling exponential mechanisms (Gumbel-max), ε/k each (Durfee & Rogers 2019, §4)."""
    if not (epsilon > 0 and math.isfinite(epsilon)):
        raise ValueError("ε must be positive")
    rounds = tuple(ExponentialMechanism(epsilon / k, sensitivity, monotonic=monotonic) for _ in range(k))
    return PeelingTopK(k, d, rounds)
