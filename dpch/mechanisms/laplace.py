"""The Laplace mechanism: f(x) + Lap(Δ1/ε) is ε-DP (docs/algorithms.md A0, Lemma 2.1).

Sampling (issue 3, see :mod:`.sampling`):

- ``integer=True`` (counts, integer sums): exact discrete Laplace with scale ⌈Δ1/ε⌉_rational
  (CKS 2020 Algorithm 2). For integer queries the privacy loss of a shift s ≤ Δ1 is
  s/scale ≤ ε (the geometric mechanism). Outputs are integer-valued floats.
- otherwise: the grid defence of :mod:`.grid` (exact discrete Laplace on a 2^k grid).

Accuracy: :meth:`LaplaceMechanism.half_width` is computed for the distribution actually
sampled — the discrete Laplace's exact tail for integers, and for the grid release the
continuous bound inflated by the grid's worst-case scale increase and rounding error.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from dpch.errors import QueryRejected
from dpch.mechanisms import calibration, representable
from dpch.mechanisms.discrete import discrete_laplace_half_width
from dpch.mechanisms.exact import rational_at_least
from dpch.mechanisms.grid import GRID_BITS, LAPLACE_INFLATION, laplace_on_grid
from dpch.mechanisms.sampling import NoiseSource
from dpch.privacy.cost import PrivacyCost, PureDP


@dataclass(frozen=True)
class LaplaceMechanism:
    """Adds Laplace noise of scale Δ1/ε to each coordinate of a query of ℓ1 sensitivity Δ1."""

    epsilon: float
    sensitivity: float
    #: the query's exact values are integers: sample the discrete Laplace exactly
    integer: bool = False
    #: coordinates released together (groups); the grid of a real-valued release depends on it
    dimension: int = 1
    name = "laplace"

    def __post_init__(self) -> None:
        # refuse what cannot be sampled now, before the charge, not when noise is drawn
        representable.check_laplace(self.epsilon, self.sensitivity, self.integer, self.dimension)

    @property
    def scale(self) -> float:
        return calibration.laplace_scale(self.sensitivity, self.epsilon)

    @property
    def cost(self) -> PrivacyCost:
        return PrivacyCost.of(PureDP(self.epsilon))

    def half_width(self, confidence: float = 0.95) -> float:
        """Half-width h with P(|released − exact| ≤ h) ≥ confidence, per coordinate."""
        if self.sensitivity == 0:
            return 0.0
        if self.integer:
            return float(discrete_laplace_half_width(float(rational_at_least(self.scale)), confidence))
        # grid release: scale ≤ b(1 + 2^-12)(1 + 2^-20); P(|λZ| > x) ≤ (1 + 2^-19)e^{−x/b'};
        # rounding adds at most λ/2 ≤ b·2^-21 (see dpch.mechanisms.grid)
        b_max = self.scale * (1 + LAPLACE_INFLATION) * (1 + 2.0**-GRID_BITS)
        beta = 1.0 - confidence
        return b_max * (math.log(1.0 / beta) + 2.0**-19) + self.scale * 2.0 ** -(GRID_BITS + 1)

    @classmethod
    def for_half_width(
        cls, half_width: float, confidence: float, sensitivity: float, integer: bool = False
    ) -> LaplaceMechanism:
        """Accuracy-first inverse: the smallest ε whose interval is within ±half_width.

        Uses the continuous inverse, then tightens by bisection on :meth:`half_width` (which
        includes the grid/discrete corrections) so the promise holds for what is sampled.
        """
        scale = calibration.laplace_scale_for_half_width(half_width, confidence)
        lo, hi = sensitivity / scale * 0.5, sensitivity / scale * 2.0
        for _ in range(60):
            mid = math.sqrt(lo * hi)
            if _fits(functools.partial(cls, mid, sensitivity, integer), half_width, confidence):
                hi = mid
            else:
                lo = mid
        return cls(hi, sensitivity, integer)

    def release(self, values: np.ndarray, source: NoiseSource) -> np.ndarray:
        """``values`` plus fresh Laplace noise (one draw per coordinate), sampled exactly."""
        values = np.asarray(values, dtype=float)
        if self.sensitivity == 0:
            return values.copy()
        if self.integer:
            q = np.rint(values)
            noise = source.discrete_laplace(self.scale, values.shape)
            released: np.ndarray = q + noise.astype(float)
            return released
        return laplace_on_grid(values, self.sensitivity, self.epsilon, source.generator)


def _fits(build: Callable[[], LaplaceMechanism], half_width: float, confidence: float) -> bool:
    """Whether the mechanism ``build()`` makes is representable and within ±half_width.

    An ε too small to sample is treated like one whose interval is too wide: the bisection
    then settles on the smallest representable ε (or the final build refuses clearly).
    """
    try:
        return bool(build().half_width(confidence) <= half_width)
    except QueryRejected:
        return False
