"""The Gaussian mechanism with analytic calibration (Balle & Wang 2018; docs/algorithms.md part C).

Sampling (issue 3, see :mod:`.sampling`):

- ``integer=True``: exact discrete Gaussian (CKS 2020 Algorithm 3) with σ the larger of the
  continuous analytic σ (so ρ = Δ2²/(2σ²) still holds, CKS Theorem 4) and the smallest σ
  meeting (ε, δ) by CKS Theorem 7 for an integer shift ⌈Δ2⌉ (:mod:`.discrete`).
- otherwise: the grid defence of :mod:`.grid` (exact discrete Gaussian on a 2^k grid,
  calibrated so (ε, δ) and ρ still hold for the rounded query).

Accuracy: :meth:`GaussianMechanism.half_width` is for the sampled distribution: exact
discrete tails for integers; for the grid release the continuous half-width at the grid's
worst-case σ, plus the rounding error. P(|Y| > k) ≤ 2Φ̄(k/σ) for Y ~ N_Z(0, σ²), so the
continuous interval is conservative for the discrete Gaussian.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

from dpch.errors import QueryRejected
from dpch.mechanisms import calibration, representable
from dpch.mechanisms.discrete import discrete_gaussian_half_width, discrete_gaussian_sigma
from dpch.mechanisms.exact import rational_at_least
from dpch.mechanisms.grid import GAUSSIAN_INFLATION, GRID_BITS, gaussian_on_grid
from dpch.mechanisms.sampling import NoiseSource
from dpch.mechanisms.zcdp import sigma_for_zcdp
from dpch.privacy.conversions import gaussian_rho
from dpch.privacy.cost import ZCDP, ApproxDP, PrivacyCost

#: slack for the grid's discrete calibration (Euler–Maclaurin bound) over the continuous σ
_GRID_SIGMA_SLACK = 2.0**-16


@lru_cache(maxsize=1024)
def calibrated_sigma(epsilon: float, delta: float, sensitivity: float, integer: bool, vector: bool) -> float:
    """The σ :class:`GaussianMechanism` samples, before the representability checks.

    A pure function of public parameters, cached (``calibrated_sigma.cache_info()``): a session
    releases the same (ε, δ, Δ2) again and again, and each calibration is a bisection (Balle &
    Wang) plus, for integers, a root-find on CKS Theorem 7's exact δ — milliseconds each, and
    :meth:`GaussianMechanism.for_half_width` builds dozens. ``vector`` is whether one unit can move
    more than one coordinate (then σ also meets (ε, δ) through the vector's exact zCDP); the
    dimension matters to σ only through it, so releases of any size share one entry. A refusal
    (an exception) is not cached and is raised again on the next call.
    """
    # only an exact 0 needs no noise: a negative Δ2 is a planner bug, and `<= 0` released it without noise
    # at ρ = 0; it now reaches analytic_gaussian_sigma's positive-Δ check and is refused (Balle & Wang, Thm 8)
    if sensitivity == 0:
        return 0.0
    sigma = calibration.analytic_gaussian_sigma(epsilon, delta, sensitivity)
    if integer:
        sigma = max(sigma, discrete_gaussian_sigma(epsilon, delta, sensitivity))
    if vector:
        sigma = max(sigma, sigma_for_zcdp(epsilon, delta, sensitivity))
    if integer:
        sigma = representable.integer_sigma(sigma, epsilon, delta, sensitivity)
    return sigma


@dataclass(frozen=True)
class GaussianMechanism:
    """Adds Gaussian noise to each coordinate of a query with ℓ2 sensitivity ``sensitivity``.

    σ makes the release (ε, δ)-DP (analytic calibration, or CKS Theorem 7 for integers); the
    release is also Δ2²/(2σ²)-zCDP, reported as ``cost.rho``.
    """

    epsilon: float
    delta: float
    sensitivity: float
    #: the query's exact values are integers: sample the discrete Gaussian exactly
    integer: bool = False
    #: coordinates released together (groups)
    dimension: int = 1
    #: the most coordinates one privacy unit can move (``None``: any of them). When a unit moves one
    #: coordinate only (a GROUP BY where a unit has one row, or one group under partition
    #: selection), the other coordinates are identically distributed on both neighbours, so the
    #: vector release is exactly the scalar mechanism on that coordinate: the scalar calibration
    #: (Balle & Wang 2018, Thm 8; CKS Thm 7 for integers) is exact and the smallest valid σ.
    #: Otherwise σ also meets (ε, δ) through the exact zCDP of the multivariate discrete Gaussian
    #: (CKS Thm 14 + Cor 13): the scalar (ε, δ) calibrations are proven for one coordinate only,
    #: and the exact δ of the *discrete* vector Gaussian at the continuous vector σ can exceed the
    #: target (tests/mechanisms/test_vector_gaussian.py shows a shift (1, 1, 1) where it does).
    unit_coordinates: int | None = None
    sigma: float = field(init=False)
    name = "gaussian"

    def __post_init__(self) -> None:
        # refuse what cannot be calibrated or sampled now, before the charge (docs/design.md rule 6)
        sigma = representable.gaussian_sigma(self._calibrated_sigma, self.epsilon, self.delta)
        representable.check_gaussian(self.epsilon, self.delta, self.sensitivity, sigma, self.integer,
                                     self.dimension)
        object.__setattr__(self, "sigma", sigma)

    def _calibrated_sigma(self) -> float:
        vector = self.dimension > 1 and (self.unit_coordinates is None or self.unit_coordinates > 1)
        return calibrated_sigma(float(self.epsilon), float(self.delta), float(self.sensitivity),
                                bool(self.integer), vector)

    @property
    def cost(self) -> PrivacyCost:
        # (ε, δ)-DP by calibration, and ρ-zCDP with ρ = Δ2²/(2σ²) at the σ actually sampled
        # (Bun & Steinke 2016, Prop 1.6; Canonne, Kamath & Steinke 2020, Thm 4 and 14)
        rho = gaussian_rho(self.sigma, self.sensitivity) if self.sigma > 0 else 0.0
        return PrivacyCost.of(ApproxDP(self.epsilon, self.delta), ZCDP(rho))

    def half_width(self, confidence: float = 0.95) -> float:
        """Half-width h with P(|released − exact| ≤ h) ≥ confidence, per coordinate."""
        if self.sigma == 0:
            return 0.0
        if self.integer:
            return float(discrete_gaussian_half_width(math.sqrt(self._sigma2_float()), confidence))
        sigma_max = self.sigma * (1 + GAUSSIAN_INFLATION) * (1 + _GRID_SIGMA_SLACK)
        width = self.sigma * 2.0**-GRID_BITS
        return calibration.gaussian_half_width(sigma_max, confidence) + 1.5 * width

    @classmethod
    def for_half_width(
        cls,
        half_width: float,
        confidence: float,
        delta: float,
        sensitivity: float,
        integer: bool = False,
        dimension: int = 1,
        unit_coordinates: int | None = None,
    ) -> GaussianMechanism:
        """Accuracy-first inverse: the smallest ε (to 1e-9 relative) at ``delta`` whose
        :meth:`half_width` (for what is actually sampled) is within ±half_width."""
        lo, hi = 1e-6, 1.0

        def fits(eps: float) -> bool:
            # an ε too small to sample counts as too wide: the search ends on a representable ε
            try:
                return cls(eps, delta, sensitivity, integer, dimension,
                           unit_coordinates).half_width(confidence) <= half_width
            except QueryRejected:
                return False

        for _ in range(40):  # 4^40: far past any budget; a failure is then refused by the build below
            if fits(hi):
                break
            lo, hi = hi, hi * 4.0
        for _ in range(64):
            mid = math.sqrt(lo * hi)
            if fits(mid):
                hi = mid
            else:
                lo = mid
            if hi / lo < 1 + 1e-9:
                break
        return cls(hi, delta, sensitivity, integer, dimension, unit_coordinates)

    def _sigma2_float(self) -> float:
        return float(rational_at_least(self.sigma**2))

    def release(self, values: np.ndarray, source: NoiseSource) -> np.ndarray:
        """``values`` plus fresh Gaussian noise (one draw per coordinate), sampled exactly."""
        values = np.asarray(values, dtype=float)
        if self.sigma == 0:
            return values.copy()
        if self.integer:
            noise = source.discrete_gaussian(self.sigma, values.shape)
            released: np.ndarray = np.rint(values) + noise.astype(float)
            return released
        return gaussian_on_grid(values, self.sensitivity, self.epsilon, self.delta, self.sigma, source.generator)
