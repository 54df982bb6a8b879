"""The Gaussian mechanism with analytic calibration (Balle & Wang 2018; ALGORITHMS.md part C)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from dpch.mechanisms import calibration
from dpch.mechanisms.cost import PrivacyCost
from dpch.mechanisms.sampling import NoiseSource


@dataclass(frozen=True)
class GaussianMechanism:
    """Adds N(0, σ²) to each coordinate of a query with ℓ2 sensitivity ``sensitivity``.

    σ is the smallest value that makes the release (ε, δ)-DP (analytic calibration); the
    release is also Δ2²/(2σ²)-zCDP, reported as ``cost.rho``.
    """

    epsilon: float
    delta: float
    sensitivity: float
    #: the query's exact values are integers (counts, integer sums): issue 3 samples these exactly
    integer: bool = False
    sigma: float = field(init=False)
    name = "gaussian"

    def __post_init__(self) -> None:
        sigma = (
            calibration.analytic_gaussian_sigma(self.epsilon, self.delta, self.sensitivity)
            if self.sensitivity > 0
            else 0.0
        )
        object.__setattr__(self, "sigma", sigma)

    @property
    def cost(self) -> PrivacyCost:
        rho = calibration.gaussian_rho(self.sigma, self.sensitivity) if self.sigma > 0 else 0.0
        return PrivacyCost(self.epsilon, self.delta, rho)

    def half_width(self, confidence: float = 0.95) -> float:
        return calibration.gaussian_half_width(self.sigma, confidence)

    def release(self, values: np.ndarray, source: NoiseSource) -> np.ndarray:
        values = np.asarray(values, dtype=float)
        if self.sigma == 0:
            return values.copy()
        return values + source.normal(self.sigma, values.shape)
