"""A deliberately BROKEN Brownian run, the negative control of the noise-reduction tests and the audit.

It draws independent N(0, T_n) noise at every step (docs/algorithms.md A7 pitfall 1): each iterate alone
has the right marginal, but seeing all of them costs every step, not the last one. It lives in the
tests, never in the package."""

from __future__ import annotations

import math

import numpy as np

from dpch.mechanisms.brownian import BrownianMechanism, BrownianRun


class FreshNoiseRun(BrownianRun):
    """BROKEN on purpose: independent N(0, T_n) per step, no bridge, no rounding."""

    def __init__(self, mechanism: BrownianMechanism, values: np.ndarray, rng: np.random.Generator) -> None:
        super().__init__(mechanism, values, rng)
        self._times = mechanism.times

    def next(self) -> np.ndarray:
        if self.released >= self._times.size:
            raise StopIteration("no more Brownian grid points")
        t = float(self._times[self.released])
        self.time = t
        self.released += 1
        return self.values + self.rng.normal(0.0, math.sqrt(t), self.values.shape)

    def refine(self, time: float) -> np.ndarray:
        self.time = time
        self.released += 1
        return self.values + self.rng.normal(0.0, math.sqrt(time), self.values.shape)
