"""The noise source: one generator type for all of dpch's randomness.

Production noise comes from a generator seeded with 128 bits of OS entropy
(``secrets``), so no one can predict or replay it. A fixed seed exists only for tests and
benchmarks: it is refused unless ``DPCH_ALLOW_FIXED_SEED=1`` is set in the environment
(docs/design.md rule 3).

Which sampler a release uses (issue 3):

- Integer-valued releases (counts, integer sums) add *exact* discrete noise: the discrete
  Laplace and discrete Gaussian samplers of Canonne, Kamath & Steinke 2020 in
  :mod:`dpch.mechanisms.exact`, driven only by unbiased uniform integers from this generator.
- Real-valued releases are protected against Mironov's (2012) floating-point attack by the
  grid defence of :mod:`dpch.mechanisms.grid`: the exact value is rounded to a public
  power-of-two grid far finer than the noise, and exact integer noise is added on that grid,
  so every output is a lattice point whose low-order bits say nothing about the input.
- :meth:`NoiseSource.laplace` / :meth:`NoiseSource.normal` (numpy floats) remain for noise
  that is never added to a private value directly (e.g. Gumbel keys, simulations) and for
  benchmarks; mechanisms releasing values must not use them on private data.
"""

from __future__ import annotations

import os
import secrets
from fractions import Fraction

import numpy as np

from dpch.errors import ConfigError
from dpch.mechanisms.exact import discrete_gaussian, discrete_laplace, rational_at_least

FIXED_SEED_ENV = "DPCH_ALLOW_FIXED_SEED"

#: spawn key of the cap-key stream under a fixed seed ("cap-key")
_CAP_KEY_STREAM = 0x6361702D6B6579


def fixed_seeds_allowed() -> bool:
    """Whether this process may use a deterministic seed (tests and benchmarks only)."""
    return os.environ.get(FIXED_SEED_ENV) == "1"


class NoiseSource:
    """A random generator for noise. ``seed=None`` (the default) draws the seed from OS entropy."""

    def __init__(self, seed: int | None = None) -> None:
        if seed is None:
            seed = secrets.randbits(128)
            self.deterministic = False
        else:
            if not fixed_seeds_allowed():
                raise ConfigError(
                    "a fixed noise seed is for tests and benchmarks only",
                    hint=f"set {FIXED_SEED_ENV}=1 in a test environment, never in production",
                )
            self.deterministic = True
        self.generator = np.random.Generator(np.random.PCG64DXSM(seed))
        # the cap's keys come from a stream of their own, so that drawing one leaves the noise as it was
        self._keys = np.random.Generator(np.random.PCG64DXSM(np.random.SeedSequence([seed, _CAP_KEY_STREAM])))

    def cap_key(self) -> tuple[int, int]:
        """A fresh 128-bit key for one release's contribution cap (the order in which each unit's rows
        are kept, :func:`dpch.sql.cap.row_order`), as two 64-bit halves. From OS entropy, or under a
        fixed seed from a stream of its own (the noise draws do not move). Never shown to anyone."""
        if not self.deterministic:
            return secrets.randbits(64), secrets.randbits(64)
        first, second = self._keys.integers(0, 2**64, size=2, dtype=np.uint64, endpoint=False)
        return int(first), int(second)

    def laplace(self, scale: float, size: int | tuple[int, ...] | None = None) -> np.ndarray:
        """Draws from Lap(scale), density exp(-|z|/scale) / (2 scale)."""
        return self.generator.laplace(0.0, scale, size)

    def normal(self, sigma: float, size: int | tuple[int, ...] | None = None) -> np.ndarray:
        """Draws from N(0, sigma²)."""
        return self.generator.normal(0.0, sigma, size)

    def discrete_laplace(self, scale: float | Fraction, size: int | tuple[int, ...] = 1) -> np.ndarray:
        """Exact int64 draws with P(z) ∝ exp(−|z|/scale); a float scale is rounded *up* to a
        rational (CKS 2020 Algorithm 2)."""
        frac = scale if isinstance(scale, Fraction) else rational_at_least(scale)
        return discrete_laplace(self.generator, frac, size)

    def discrete_gaussian(
        self, sigma: float, size: int | tuple[int, ...] = 1, *, sigma2: Fraction | None = None
    ) -> np.ndarray:
        """Exact int64 draws with P(z) ∝ exp(−z²/(2σ²)); σ² is rounded *up* to a rational
        (CKS 2020 Algorithm 3). Pass ``sigma2`` to give the rational variance directly."""
        frac = sigma2 if sigma2 is not None else rational_at_least(sigma * sigma)
        return discrete_gaussian(self.generator, frac, size)
