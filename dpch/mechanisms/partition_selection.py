"""Partition selection: which GROUP BY keys of a private column may be released at all.

Laplace thresholding (as in Google's and SmartNoise's DP SQL): each key's count of distinct
units gets exact discrete Laplace noise of scale G/ε, where G bounds the keys one unit can
touch (the per-unit ℓ1 sensitivity of the vector of unit counts); a key is released only if
the noisy count exceeds τ = 1 + k, with k the smallest integer such that
P(Z > k) = p^{k+1}/(1 + p) ≤ δ/G (p = e^{−1/scale}).

Why (ε, δ): on neighbouring datasets the keys present in both see a shift of at most G in ℓ1
(ε-DP by the Laplace mechanism); the at most G keys held only by the added unit have exactly
one unit, so each appears with probability ≤ δ/G, and all together ≤ δ (union bound).

The noisy counts that decided the selection may themselves be released as the answer when the
released statistic *is* the count of distinct units per key (``count(DISTINCT unit)``, or
``count(*)`` where each unit has one row): one mechanism, the whole ε, instead of a selection and a
separate noisy count splitting it (Wilson et al. 2020, "Differentially Private SQL with Bounded User
Contribution", §3: the thresholded noisy count is released; Korolova et al. 2009). The argument above
covers it unchanged: on keys in both datasets the released vector is the Laplace mechanism's output,
and a key of the added unit alone appears — with its noisy count — with probability ≤ δ/G.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np

from dpch.mechanisms.discrete import discrete_laplace_half_width
from dpch.mechanisms.exact import rational_at_least
from dpch.mechanisms.sampling import NoiseSource
from dpch.privacy.cost import ApproxDP, PrivacyCost


@dataclass(frozen=True)
class LaplacePartitionSelection:
    """Releases a key iff (distinct units + discrete Laplace noise) > threshold."""

    epsilon: float
    delta: float
    max_partitions: int
    threshold: float = field(init=False)
    name = "laplace partition selection"

    def __post_init__(self) -> None:
        if not (self.epsilon > 0 and 0 < self.delta < 1 and self.max_partitions >= 1):
            raise ValueError("partition selection needs ε > 0, 0 < δ < 1 and max_partitions ≥ 1")
        object.__setattr__(self, "threshold", 1.0 + self._smallest_k())

    def _smallest_k(self) -> int:
        """The smallest integer k ≥ 0 whose tail P(Z > k) = p^{k+1}/(1+p) is *certainly* ≤ δ/G, decided in
        log space: the tail and δ/G may be subnormal floats (a δ the guard admits), where p^{k+1}/(1+p) has
        too few bits to compare (δ = 5e-324 would get a threshold one too low).

        log P(Z > k) = (k+1)·log p − log(1+p) is computed in floats with an error of a few ulps of its
        terms, which at k ≈ 10^6 is ~1e-10 — enough to call a tail that exceeds δ/G by 1e-10 relative
        "within δ". So a k is accepted only when its computed log tail is below log(δ/G) by more than a
        bound on that error (8 ulps of the terms' magnitudes): the threshold can come out one above the
        exact smallest at a float-exact boundary (fewer keys, same privacy), never one below."""
        log_p = -1.0 / float(self.scale)
        log_per_key = math.log(self.delta) - math.log(self.max_partitions)
        log1p_p = math.log1p(math.exp(log_p))

        def certainly_within(k: int) -> bool:  # log P(Z > k) ≤ log(δ/G), with the float error bounded
            terms = abs((k + 1) * log_p) + abs(log1p_p) + abs(log_per_key)
            return (k + 1) * log_p - log1p_p + 8.0 * sys.float_info.epsilon * terms <= log_per_key

        k = max(0, math.ceil((log_per_key + log1p_p) / log_p - 1.0 - 1e-12))
        while k > 0 and certainly_within(k - 1):
            k -= 1
        while not certainly_within(k):
            k += 1
        return k

    @property
    def scale(self) -> Fraction:
        """The discrete Laplace scale actually sampled (a rational ≥ G/ε)."""
        return rational_at_least(self.max_partitions / self.epsilon)

    @property
    def cost(self) -> PrivacyCost:
        return PrivacyCost.of(ApproxDP(self.epsilon, self.delta))

    def single_unit_release_probability(self) -> float:
        """P(a key held by one unit is released) = P(Z > τ − 1) ≤ δ/G."""
        p = math.exp(-1.0 / float(self.scale))
        k = int(self.threshold - 1.0)
        return p ** (k + 1) / (1.0 + p)

    def noisy_counts(self, unit_counts: np.ndarray, source: NoiseSource) -> np.ndarray:
        """Each key's count of distinct units plus its discrete Laplace noise (one draw per key)."""
        counts = np.asarray(unit_counts, dtype=float)
        if counts.size == 0:
            return counts.copy()
        noisy: np.ndarray = counts + source.discrete_laplace(self.scale, counts.shape).astype(float)
        return noisy

    def keep(self, noisy_counts: np.ndarray) -> np.ndarray:
        """The keys whose noisy count clears the threshold."""
        mask: np.ndarray = np.asarray(noisy_counts, dtype=float) > self.threshold
        return mask

    def half_width(self, confidence: float = 0.95) -> float:
        """Half-width h with P(|noisy count − count| ≤ h) ≥ confidence, per key (its discrete Laplace)."""
        return float(discrete_laplace_half_width(float(self.scale), confidence))
