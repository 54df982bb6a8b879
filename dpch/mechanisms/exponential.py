"""The exponential mechanism by Gumbel-max, and private quantiles over a bounded domain.

Selecting argmax_i (ε·u_i/(2Δ) + G_i), G_i iid Gumbel(0, 1), samples i with probability
∝ exp(ε·u_i/(2Δ)): the exponential mechanism (McSherry & Talwar 2007), ε-DP; for monotone
utilities (counts under add/remove) ε·u_i/Δ suffices. It is also ε²/8-zCDP (Rogers et al. 2023, §7.2,
bounded range). Accuracy (Dwork & Roth 2014, Thm 3.11): with probability ≥ 1 − e^{−t},
u(selected) ≥ OPT − (2Δ/ε)(ln m + t) for m candidates (Δ/ε for monotone utilities).

Only the index is released, so the float Gumbel keys never leave (cf. B11 pitfall 3).

Quantiles: over a public grid of m candidates in [lower, upper] (the bounded domain), the
utility of candidate c is −|#{x ≤ c} − q·n| (sensitivity 1 under adding or removing a row).
The selected candidate's rank error is ≤ 2(ln m + t)/ε with probability ≥ 1 − e^{−t}.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from dpch.mechanisms.sampling import NoiseSource
from dpch.privacy.conversions import exponential_mechanism_rho
from dpch.privacy.cost import ZCDP, PrivacyCost, PureDP


@dataclass(frozen=True)
class ExponentialMechanism:
    """Gumbel-max exponential mechanism for utilities of sensitivity Δ."""

    epsilon: float
    sensitivity: float
    monotonic: bool = False
    name = "exponential"

    @property
    def cost(self) -> PrivacyCost:
        # ε-DP, and ε²/8-zCDP as an ε-bounded-range mechanism (Cesar & Rogers 2021)
        return PrivacyCost.of(PureDP(self.epsilon), ZCDP(exponential_mechanism_rho(self.epsilon)))

    def utility_gap(self, m: int, confidence: float = 0.95) -> float:
        """OPT − u(selected) is below this with the given confidence (DR Thm 3.11)."""
        factor = 1.0 if self.monotonic else 2.0
        return factor * self.sensitivity / self.epsilon * (math.log(m) - math.log(1 - confidence))

    def logits(self, utilities: np.ndarray) -> np.ndarray:
        """ε·u/(2Δ) (ε·u/Δ when monotone): candidate i is selected with probability ∝ e^{logit_i}."""
        factor = 1.0 if self.monotonic else 2.0
        return self.epsilon * np.asarray(utilities, dtype=float) / (factor * self.sensitivity)

    def select(self, utilities: np.ndarray, source: NoiseSource) -> int:
        u = np.asarray(utilities, dtype=float)
        keys = self.logits(u) + source.generator.gumbel(size=u.shape)
        return int(np.argmax(keys))

    def select_many(self, utilities: np.ndarray, size: int, source: NoiseSource) -> np.ndarray:
        """``size`` independent selections over the same utilities (for audits): the Gumbel-max
        pick's exact distribution, softmax of :meth:`logits`, drawn by inverse CDF."""
        logits = self.logits(utilities)
        p = np.exp(logits - logits.max())
        cdf = np.cumsum(p / p.sum())
        draws = np.searchsorted(cdf, source.generator.random(size) * cdf[-1], side="right")
        picked: np.ndarray = np.minimum(draws, logits.size - 1)
        return picked


def quantile_utilities(values: np.ndarray, q: float, candidates: np.ndarray) -> np.ndarray:
    """−|#{x ≤ c} − q·n| for each candidate c (sensitivity 1)."""
    if not 0.0 <= q <= 1.0:
        raise ValueError("q must be in [0, 1]")
    ranks = np.searchsorted(np.sort(np.asarray(values, dtype=float)), candidates, side="right")
    utilities: np.ndarray = -np.abs(ranks - q * np.asarray(values).size)
    return utilities


def private_quantile(
    values: np.ndarray,
    q: float,
    lower: float,
    upper: float,
    epsilon: float,
    source: NoiseSource,
    candidates: int = 1024,
) -> tuple[float, PrivacyCost]:
    """ε-DP q-quantile of ``values`` over an evenly spaced public grid on [lower, upper]."""
    grid = np.linspace(lower, upper, candidates)
    clipped = np.clip(np.asarray(values, dtype=float), lower, upper)
    mech = ExponentialMechanism(epsilon, 1.0)
    index = mech.select(quantile_utilities(clipped, q, grid), source)
    return float(grid[index]), mech.cost
