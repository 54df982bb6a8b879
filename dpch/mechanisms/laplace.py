"""The Laplace mechanism: f(x) + Lap(Δ1/ε) is ε-DP (ALGORITHMS.md A0, Lemma 2.1)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dpch.mechanisms import calibration
from dpch.mechanisms.cost import PrivacyCost
from dpch.mechanisms.sampling import NoiseSource


@dataclass(frozen=True)
class LaplaceMechanism:
    """Adds Lap(Δ1/ε) to each coordinate of a query with ℓ1 sensitivity ``sensitivity``."""

    epsilon: float
    sensitivity: float
    #: the query's exact values are integers (counts, integer sums): issue 3 samples these exactly
    integer: bool = False
    name = "laplace"

    @property
    def scale(self) -> float:
        return calibration.laplace_scale(self.sensitivity, self.epsilon)

    @property
    def cost(self) -> PrivacyCost:
        return PrivacyCost(self.epsilon, 0.0)

    def half_width(self, confidence: float = 0.95) -> float:
        """Half-width of the per-coordinate interval that holds with ``confidence``."""
        return calibration.laplace_half_width(self.scale, confidence)

    def release(self, values: np.ndarray, source: NoiseSource) -> np.ndarray:
        """Returns ``values`` plus fresh Laplace noise (one draw per coordinate)."""
        values = np.asarray(values, dtype=float)
        if self.sensitivity == 0:
            return values.copy()
        return values + source.laplace(self.scale, values.shape)
