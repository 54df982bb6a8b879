"""Real-valued releases on a power-of-two grid, safe against floating-point attacks.

Mironov (CCS 2012) showed that f(x) + (floating-point Laplace sample) leaks f(x) through the
low-order bits of the result: the set of representable outputs depends on f(x). dpch never
adds a floating-point noise sample to a private value. Instead (the "grid" defence, close to
Mironov's snapping mechanism but with exact integer noise):

1. Choose a grid width λ = 2^k from *public* quantities only: the noise scale, the
   sensitivity and the number of coordinates d.
2. Round each exact value to the grid: q = round(f(x)/λ), an integer (f/λ is exact in binary
   floating point because λ is a power of two).
3. Add exact integer noise on the grid: discrete Laplace / discrete Gaussian in grid units
   (:mod:`.exact`). The release is λ·(q + Z): a lattice point, whose low bits carry nothing.

Privacy of the rounded query: neighbouring inputs give |q_j − q'_j| ≤ |f_j − f'_j|/λ + 1 on
each coordinate that changes, so the integer query q has ℓ1 sensitivity ≤ Δ1/λ + d and ℓ2
sensitivity ≤ Δ2/λ + √d. The noise is calibrated to those inflated sensitivities, and λ is
chosen so the inflation is at most :data:`LAPLACE_INFLATION` (Laplace) or
:data:`GAUSSIAN_INFLATION` (Gaussian) of the original sensitivity; the mechanisms'
half-widths include that factor and the rounding error λ/2, so they stay honest.
Converting the integer release back to a float (λ·(q + Z)) is post-processing.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from dpch.mechanisms.discrete import discrete_gaussian_sigma
from dpch.mechanisms.exact import discrete_gaussian, discrete_laplace, rational_at_least

#: λ ≤ scale·2^-GRID_BITS: the grid is at least 2^20 times finer than the noise
GRID_BITS = 20
#: worst-case relative increase of the Laplace scale caused by rounding to the grid
LAPLACE_INFLATION = 2.0**-12
#: worst-case relative increase of the Gaussian σ caused by rounding to the grid
GAUSSIAN_INFLATION = 2.0**-7
#: the exact discrete Gaussian sampler works up to σ = 2^24 grid units
_MAX_GAUSSIAN_GRID_SIGMA = 2.0**24
_MAX_LAPLACE_GRID_SCALE = 2.0**49


def _pow2_floor(x: float) -> float:
    return math.ldexp(1.0, math.frexp(x)[1] - 1)


@dataclass(frozen=True)
class LaplaceGrid:
    """Grid width and discrete Laplace scale (in grid units) for a d-coordinate release."""

    width: float
    scale: Fraction

    @classmethod
    def for_release(cls, sensitivity: float, epsilon: float, dim: int) -> LaplaceGrid:
        b = sensitivity / epsilon
        width = _pow2_floor(min(b * 2.0**-GRID_BITS, sensitivity * LAPLACE_INFLATION / dim))
        if b / width > _MAX_LAPLACE_GRID_SCALE:
            raise ValueError(f"{dim} coordinates at ε={epsilon} need a grid too fine for exact sampling")
        # integer query q has ℓ1 sensitivity ≤ Δ1/λ + d; Lap scale (Δ1/λ + d)/ε keeps ε-DP
        scale = rational_at_least((sensitivity / width + dim) / epsilon)
        return cls(width, scale)


@dataclass(frozen=True)
class GaussianGrid:
    """Grid width and discrete Gaussian σ² (grid units) for a d-coordinate release."""

    width: float
    sigma2: Fraction

    @classmethod
    def for_release(cls, sensitivity: float, epsilon: float, delta: float, sigma: float, dim: int) -> GaussianGrid:
        """σ is the continuous calibration for (ε, δ, Δ2); the grid σ is ≥ σ·(shift/Δ2)."""
        width = _pow2_floor(min(sigma * 2.0**-GRID_BITS, sensitivity * GAUSSIAN_INFLATION / math.sqrt(dim)))
        if sigma / width > _MAX_GAUSSIAN_GRID_SIGMA / 2:
            raise ValueError(
                f"{dim} coordinates need a grid too fine for exact Gaussian sampling; use fewer groups or a larger ε"
            )
        shift = sensitivity / width + math.sqrt(dim)  # ℓ2 sensitivity of q in grid units
        sigma_grid = max(
            discrete_gaussian_sigma(epsilon, delta, float(math.ceil(shift))),
            sigma * shift * (1 + 1e-12) / sensitivity,  # keeps ρ ≤ Δ2²/(2σ²)
        )
        sigma2 = rational_at_least(sigma_grid**2)
        # the mechanisms' half-widths assume at most this much extra noise (checked, not hoped)
        if math.sqrt(float(sigma2)) * width > sigma * (1 + GAUSSIAN_INFLATION) * (1 + 2.0**-16):
            raise ValueError("grid calibration exceeded its accuracy allowance")
        return cls(width, sigma2)


def _round_to_grid(values: np.ndarray, width: float) -> np.ndarray:
    """round(values/width) exactly, as int64 when it fits, else as Python ints (object)."""
    scaled = np.rint(values / width)
    if values.size == 0 or np.max(np.abs(scaled)) < 2.0**61:
        return scaled.astype(np.int64)
    return np.array([int(v) for v in scaled.ravel()], dtype=object).reshape(values.shape)


def _from_grid(q: np.ndarray, noise: np.ndarray, width: float) -> np.ndarray:
    total = q + noise  # exact integer addition (int64, or Python ints for huge values)
    if total.dtype == object:
        return np.array([math.ldexp(float(v), 0) * width for v in total.ravel()]).reshape(total.shape)
    scaled: np.ndarray = total.astype(float) * width
    return scaled


def laplace_on_grid(values: np.ndarray, sensitivity: float, epsilon: float, rng: np.random.Generator) -> np.ndarray:
    """ε-DP release of real ``values`` (ℓ1 sensitivity Δ1) on a 2^k grid (module docstring)."""
    values = np.asarray(values, dtype=float)
    grid = LaplaceGrid.for_release(sensitivity, epsilon, max(1, values.size))
    q = _round_to_grid(values, grid.width)
    noise = discrete_laplace(rng, grid.scale, values.shape)
    return _from_grid(q, noise, grid.width)


def gaussian_on_grid(
    values: np.ndarray,
    sensitivity: float,
    epsilon: float,
    delta: float,
    sigma: float,
    rng: np.random.Generator,
) -> np.ndarray:
    """(ε, δ)-DP and Δ2²/(2σ²)-zCDP release of real ``values`` on a 2^k grid."""
    values = np.asarray(values, dtype=float)
    grid = GaussianGrid.for_release(sensitivity, epsilon, delta, sigma, max(1, values.size))
    q = _round_to_grid(values, grid.width)
    noise = discrete_gaussian(rng, grid.sigma2, values.shape)
    return _from_grid(q, noise, grid.width)
