"""The noise source.

Production noise comes from a generator seeded with 128 bits of OS entropy
(``secrets``), so no one can predict or replay it. A fixed seed exists only for tests and
benchmarks: it is refused unless ``DPCH_ALLOW_FIXED_SEED=1`` is set in the environment
(DESIGN.md rule 3).
"""

from __future__ import annotations

import os
import secrets

import numpy as np

from dpch.errors import ConfigError

FIXED_SEED_ENV = "DPCH_ALLOW_FIXED_SEED"


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

    def laplace(self, scale: float, size: int | tuple[int, ...] | None = None) -> np.ndarray:
        """Draws from Lap(scale), density exp(-|z|/scale) / (2 scale)."""
        return self.generator.laplace(0.0, scale, size)

    def normal(self, sigma: float, size: int | tuple[int, ...] | None = None) -> np.ndarray:
        """Draws from N(0, sigma²)."""
        return self.generator.normal(0.0, sigma, size)
