"""Laplace noise reduction (docs/algorithms.md A1; Whitehouse et al. 2022, §4, eq. 5 and 6, Prop 4.2).

Two constructions of Laplace noise that gets *less* noisy as it is revealed:

- :class:`LaplaceNoiseReduction` — the discrete Markov chain of Whitehouse et al. 2022, eq. (5): scales
  t_1 < … < t_K, ζ_1 ~ Lap(t_1), and ζ_n = ζ_{n−1} with probability (t_{n−1}/t_n)², else
  ζ_{n−1} + Lap(t_n). Then ζ_n ~ Lap(t_n) for every n. The whole path is generated forward
  (smallest scale first) *before* anything is released; releases go noisiest first:
  f(x) + ζ_K, f(x) + ζ_{K−1}, …
- :class:`LaplacePath` — the continuous-time version of Whitehouse et al. 2022, eq. (6) / Def 4.1 with floor η:
  jump times of an inhomogeneous Poisson process of intensity 2/t on [η, ∞), sampled in
  u = 2·log t where arrivals are rate-1 ([derived] in A1); Z_t = Σ_{𝒯_k ≤ t} Lap(𝒯_k) ~ Lap(t)
  (Whitehouse et al. 2022, Thm D.1). Used by ReducedAboveThreshold for its correlated threshold noise.

Privacy (Whitehouse et al. 2022, Prop 4.2): stopping after the iterate with scale t_N is (Δ1/t_N, 0)-ex-post
private — the run costs ε_N, the ε of the last (least noisy) iterate seen. LNR composes only
additively in a filter (A1). Its worst case, for admission, is the last scheduled ε_K.

Floating point: the Laplace draws are numpy floats (the Markov/Poisson constructions have
no exact discrete analogue); every released iterate is rounded to a public grid of width
2^⌊log2(t·2^-20)⌋ of the current scale, so no low-order bits of f(x) + ζ are released
(Mironov 2012). The rounding error (≤ half a grid step) is included in the half-width.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from dpch.mechanisms import calibration
from dpch.mechanisms.sampling import NoiseSource
from dpch.privacy.cost import ExPost, PrivacyCost, PureDP


def snap(values: np.ndarray, scale: float) -> np.ndarray:
    """Round to the public grid 2^⌊log2(scale·2^-20)⌋ (scale = the current noise scale)."""
    width = math.ldexp(1.0, math.frexp(scale * 2.0**-20)[1] - 1)
    return np.rint(values / width) * width


def markov_laplace_path(scales: Sequence[float] | np.ndarray, size: int | tuple[int, ...],
                        rng: np.random.Generator) -> np.ndarray:
    """ζ_1..ζ_K for increasing ``scales`` (Whitehouse et al. 2022, eq. 5), shape (K, *size); ζ_n ~ Lap(t_n)."""
    t = np.asarray(scales, dtype=float)
    if t.ndim != 1 or t.size == 0 or not np.all(t > 0) or np.any(np.diff(t) <= 0):
        raise ValueError("scales must be positive and strictly increasing")
    shape = (size,) if isinstance(size, int) else tuple(size)
    out = np.empty((t.size, *shape))
    out[0] = rng.laplace(0.0, t[0], shape)
    for n in range(1, t.size):
        stay = rng.random(shape) < (t[n - 1] / t[n]) ** 2
        out[n] = np.where(stay, out[n - 1], out[n - 1] + rng.laplace(0.0, t[n], shape))
    return out


class LaplaceNoiseReduction:
    """The discrete LNR mechanism: ε_1 < ε_2 < … < ε_K, iterate n is the ε_n-Laplace release.

    ``epsilons`` are in *release* order (noisiest first); scale t_n = Δ1/ε_n.
    """

    name = "laplace-noise-reduction"

    def __init__(self, sensitivity: float, epsilons: Sequence[float] | np.ndarray) -> None:
        eps = np.asarray(epsilons, dtype=float)
        if eps.size == 0 or not np.all(eps > 0) or np.any(np.diff(eps) <= 0):
            raise ValueError("epsilons must be positive and strictly increasing")
        self.sensitivity = float(sensitivity)
        self.epsilons = eps
        self.scales = self.sensitivity / eps  # decreasing in release order

    @property
    def worst_cost(self) -> PrivacyCost:
        """What a run costs if it reaches the last iterate (for the filter's admission)."""
        return PrivacyCost.of(PureDP(float(self.epsilons[-1])))

    def half_width(self, step: int, confidence: float = 0.95) -> float:
        """Half-width of iterate ``step`` (0-based): Lap(t_step) plus grid rounding."""
        scale = float(self.scales[step])
        return calibration.laplace_half_width(scale, confidence) + scale * 2.0**-20

    def start(self, values: np.ndarray, source: NoiseSource) -> LNRRun:
        values = np.asarray(values, dtype=float)
        # generate forward from the smallest scale (the last release) up to the largest
        path = markov_laplace_path(self.scales[::-1], values.shape, source.generator)[::-1]
        return LNRRun(self, values + path)


class LNRRun:
    """One run: reveal iterates noisiest first; ``cost`` is the realized ex-post cost."""

    def __init__(self, mechanism: LaplaceNoiseReduction, noisy: np.ndarray) -> None:
        self._mechanism = mechanism
        self._noisy = noisy  # never exposed beyond the released steps
        self.released = 0

    def __len__(self) -> int:
        return int(self._noisy.shape[0])

    def next(self) -> np.ndarray:
        """Release the next (less noisy) iterate."""
        if self.released >= len(self):
            raise StopIteration("no more noise-reduction steps")
        step = self.released
        self.released += 1
        return snap(self._noisy[step], float(self._mechanism.scales[step]))

    @property
    def cost(self) -> PrivacyCost:
        """(ε_N, 0)-ex-post at the stop N (Whitehouse et al. 2022, Prop 4.2); zero before any release."""
        worst = float(self._mechanism.epsilons[-1])
        eps = float(self._mechanism.epsilons[self.released - 1]) if self.released else 0.0
        return PrivacyCost.realized(ExPost(eps, 0.0, worst))


class LaplacePath:
    """Continuous-time Laplace noise reduction Z_t, t ≥ η (Whitehouse et al. 2022, eq. 6, Def 4.1, Thm D.1).

    Scalar or vector (independent coordinates). The jump times are extended lazily, so any
    t ≥ η can be queried; Z_t ~ Lap(t) marginally and Z is flat on [s, t] with
    probability (s/t)².
    """

    def __init__(self, floor: float, rng: np.random.Generator, size: int = 1) -> None:
        if not floor > 0:
            raise ValueError("floor η must be positive")
        self.floor = float(floor)
        self._rng = rng
        self._size = size
        # event 0: the jump at η itself (𝒯_0 = η)
        self._coord = np.arange(size)
        self._time = np.full(size, self.floor)
        self._jump = rng.laplace(0.0, self.floor, size)
        self._u = np.full(size, 2.0 * math.log(self.floor))  # last arrival, in u = 2 log t
        self._horizon = self.floor

    def _extend(self, t: float) -> None:
        if t <= self._horizon:
            return
        u_max = 2.0 * math.log(t)
        active = np.arange(self._size)
        coords, times, jumps = [self._coord], [self._time], [self._jump]
        u = self._u.copy()
        while active.size:
            u_next = u[active] + self._rng.exponential(1.0, active.size)
            inside = u_next <= u_max
            active_in = active[inside]
            tau = np.exp(u_next[inside] / 2.0)
            coords.append(active_in)
            times.append(tau)
            jumps.append(self._rng.laplace(0.0, 1.0, tau.size) * tau)
            u[active_in] = u_next[inside]
            # an arrival beyond the horizon is *not* kept: by memorylessness, restarting
            # from the horizon later is the same process
            active = active_in
        self._u = np.maximum(u, u_max)
        self._coord = np.concatenate(coords)
        self._time = np.concatenate(times)
        self._jump = np.concatenate(jumps)
        self._horizon = t

    def value(self, t: float) -> np.ndarray:
        """Z_t for every coordinate (t ≥ η)."""
        # `not >=`: Z_NaN was 0 (no arrival is ≤ NaN), i.e. no noise at all (Thm D.1 needs t ≥ η)
        if not t >= self.floor:
            raise ValueError(f"t={t} is below the floor η={self.floor}")
        self._extend(t)
        mask = self._time <= t
        return np.bincount(self._coord[mask], weights=self._jump[mask], minlength=self._size)
