"""The Brownian mechanism: Gaussian noise reduction (docs/algorithms.md A2; Whitehouse et al. 2022,
Def 3.1; Rogers et al. 2023, Def 4.4).

BM(x) = (f(x) + B_{T_n})_{n ≥ 1} for a standard Brownian motion B (independent coordinates)
and times T_1 ≥ T_2 ≥ … (each may depend on earlier *released* values). Iterate n alone is
the Gaussian mechanism with variance T_n, and seeing all of 1..n costs what iterate n costs
(the noise-reduction property, Rogers et al. 2023, Def 4.2).

Sampling along the reversed path (Whitehouse et al. 2022, Appendix E; Lemma B.5's printed density has the factor
inverted, we implement the corrected bridge):

    B_{T_1} ~ N(0, T_1·I)
    B_{T_m} | B_{T_{m−1}} ~ N((T_m/T_{m−1})·B_{T_{m−1}}, ((T_{m−1} − T_m)·T_m/T_{m−1})·I)

(a Brownian bridge pinned at B_0 = 0). Fresh independent noise per step would lose noise
reduction (A7 pitfall 1; the tests keep such a broken run as their negative control).

Privacy at the stop N (Whitehouse et al. 2022, Thm 3.4, Cor 3.7): (ψ(T_N), δ)-ex-post private for a δ-boundary ψ
(:mod:`.boundaries`), and — for the zCDP filter of Rogers et al. 2023, Thm 6 — the charge Δ2²/(2T_N): a BM
stopped at T costs what a Gaussian of variance T costs. Both are reported by
:attr:`BrownianRun.cost`; the worst case (finest grid point) by
:attr:`BrownianMechanism.worst_cost`.

Floating point: each released iterate is rounded to a public grid 2^⌊log2(√T·2^-20)⌋, so no
low-order bits of f(x) + B_T leave (Mironov 2012); the rounding is in the half-width.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from dpch.mechanisms import calibration
from dpch.mechanisms.boundaries import Boundary, LinearBoundary, MixtureBoundary
from dpch.mechanisms.lnr import snap
from dpch.mechanisms.sampling import NoiseSource
from dpch.privacy.cost import ExPost, PrivacyCost


def bridge_step(noise: np.ndarray, t_prev: float, t_next: float, rng: np.random.Generator) -> np.ndarray:
    """B_{t_next} given B_{t_prev} = noise (t_next ≤ t_prev), the corrected Whitehouse et al. 2022, App. E bridge."""
    if not t_next <= t_prev:  # `not <=`: a NaN time gave NaN noise
        raise ValueError("Brownian times must be non-increasing")
    if t_next == t_prev:
        return noise
    mean = (t_next / t_prev) * noise
    var = (t_prev - t_next) * t_next / t_prev
    return mean + rng.normal(0.0, math.sqrt(var), noise.shape)


def simulated_path(times: Sequence[float] | np.ndarray, rng: np.random.Generator,
                   size: int | None = None) -> np.ndarray:
    """B at every time of a non-increasing grid at once, for simulations (benchmarks, no private data).

    Built forward from the smallest time (B_{t_K}, then independent N(0, t_i − t_{i+1}) increments up
    to t_1): the same law as the reversed-path bridge of :func:`bridge_step`, in one vector operation.
    A release never uses it — :class:`BrownianRun` walks the bridge so that only the current noise
    exists. Shape (K,) or (size, K)."""
    t = np.asarray(times, dtype=float)
    if t.size == 0 or not np.all(t > 0) or np.any(np.diff(t) > 0):
        raise ValueError("times must be positive and non-increasing")
    u = t[::-1]  # increasing
    steps = np.sqrt(np.diff(u, prepend=0.0))
    draws = rng.standard_normal(t.size if size is None else (size, t.size))
    path: np.ndarray = np.cumsum(steps * draws, axis=-1)[..., ::-1]
    return path


def accuracy_first_times(
    rho_remaining: float,
    sensitivity: float = 1.0,
    points: int = 1000,
    eps2_min: float = 1e-4,
) -> np.ndarray:
    """The Rogers et al. 2023, §7 grid (docs/algorithms.md A5): ε² equally spaced from 1e-4 to 2ρ_rem, t = Δ2²/ε².

    Returned noisiest first (decreasing t). The last point costs Δ2²/(2t) = ρ_rem.
    """
    eps2 = np.linspace(eps2_min, 2.0 * rho_remaining, points)
    return sensitivity**2 / eps2


class BrownianMechanism:
    """BM for a vector query of ℓ2 sensitivity Δ2 with a δ-boundary ψ and a time schedule.

    ``times`` (non-increasing) is the finite grid (A7 pitfall 4); a run may also refine to any
    time between grid points with :meth:`BrownianRun.refine`, but never below the last one.
    """

    name = "brownian"

    def __init__(self, sensitivity: float, times: Sequence[float] | np.ndarray, boundary: Boundary) -> None:
        t = np.asarray(times, dtype=float)
        if t.size == 0 or not np.all(t > 0) or np.any(np.diff(t) > 0):
            raise ValueError("times must be positive and non-increasing")
        if boundary.sensitivity != sensitivity:
            raise ValueError("the boundary must be built for the same sensitivity")
        self.sensitivity = float(sensitivity)
        self.times = t
        self.boundary = boundary

    @classmethod
    def for_target(
        cls,
        epsilon: float,
        delta: float,
        sensitivity: float = 1.0,
        *,
        kind: str = "linear",
        steps: int = 20,
        start_factor: float = 100.0,
    ) -> BrownianMechanism:
        """A schedule ending at the time T* where the optimised boundary reaches ``epsilon``.

        Times are geometric from start_factor·T* down to T*; ``kind`` is "linear" or "mixture".
        """
        boundary: Boundary
        if kind == "linear":
            boundary = LinearBoundary.optimal(epsilon, delta, sensitivity)
        elif kind == "mixture":
            boundary = MixtureBoundary.optimal(epsilon, delta, sensitivity)
        else:
            raise ValueError(f"unknown boundary kind {kind!r}")
        t_star = boundary.time_for(epsilon)
        times = np.geomspace(start_factor * t_star, t_star, steps)
        return cls(sensitivity, times, boundary)

    @property
    def delta(self) -> float:
        return self.boundary.delta

    def cost_at(self, time: float) -> PrivacyCost:
        """(ψ(T), δ)-ex-post and Δ2²/(2T) zCDP for a run stopped at T (Whitehouse et al. 2022, Cor 3.7;
        Rogers et al. 2023, Thm 6)."""
        finest = float(self.times[-1])
        return PrivacyCost.realized(
            ExPost(self.boundary(time), self.delta, self.boundary(finest)),
            rho=self.sensitivity**2 / (2.0 * time),
            worst_rho=self.sensitivity**2 / (2.0 * finest),
        )

    @property
    def worst_cost(self) -> PrivacyCost:
        """The cost if the run reaches the finest grid point (for admission, A7 pitfall 3)."""
        return self.cost_at(float(self.times[-1]))

    @staticmethod
    def half_width(time: float, confidence: float = 0.95) -> float:
        """Per-coordinate half-width of an iterate at time T: N(0, T) plus grid rounding."""
        sigma = math.sqrt(time)
        return calibration.gaussian_half_width(sigma, confidence) + sigma * 2.0**-20

    @staticmethod
    def time_for_half_width(half_width: float, confidence: float = 0.95) -> float:
        """The largest time T whose iterate is within ±half_width (inverse of half_width)."""
        sigma = calibration.gaussian_sigma_for_half_width(half_width, confidence)
        return (sigma / (1 + 2.0**-20 / calibration.gaussian_half_width(1.0, confidence))) ** 2

    def start(self, values: np.ndarray, source: NoiseSource) -> BrownianRun:
        return BrownianRun(self, np.asarray(values, dtype=float), source.generator)


class BrownianRun:
    """One run of BM. Only the current noise B_{T_n} is kept (Whitehouse et al. 2022, App. E)."""

    def __init__(self, mechanism: BrownianMechanism, values: np.ndarray, rng: np.random.Generator) -> None:
        self._mechanism = mechanism
        self._values = values
        self._rng = rng
        self._noise: np.ndarray | None = None
        self.time: float | None = None
        self.released = 0

    def _advance(self, time: float) -> np.ndarray:
        floor = float(self._mechanism.times[-1])
        # `not >=`: a NaN time passed, released NaN and left the run a NaN time and cost (Cor 3.7 needs T > 0)
        if not time >= floor * (1 - 1e-12):
            raise ValueError(f"time {time} is below the mechanism's finest grid point {floor}")
        if self._noise is None:
            self._noise = self._rng.normal(0.0, math.sqrt(time), self._values.shape)
        else:
            assert self.time is not None
            self._noise = bridge_step(self._noise, self.time, time, self._rng)
        self.time = time
        self.released += 1
        return snap(self._values + self._noise, math.sqrt(time))

    def next(self) -> np.ndarray:
        """Release the next grid iterate f(x) + B_{T_n}."""
        if self.released >= self._mechanism.times.size:
            raise StopIteration("no more Brownian grid points")
        return self._advance(float(self._mechanism.times[self.released]))

    def refine(self, time: float) -> np.ndarray:
        """Release f(x) + B_t for a data-independent t ≤ the current time (≥ the grid floor)."""
        return self._advance(time)

    @property
    def values(self) -> np.ndarray:
        """The exact query vector f(x) (stays in the process; needed by ReducedAboveThreshold's utility)."""
        return self._values

    @property
    def rng(self) -> np.random.Generator:
        """The generator the path draws from."""
        return self._rng

    def continued(self, mechanism: BrownianMechanism) -> BrownianRun:
        """The same path, continued over ``mechanism``'s finer grid (every time ≤ the current one).

        Given B_{T} the rest of the path below T is again a Brownian noise reduction (time inversion:
        s·B(1/s) has independent increments), so a refinement is a new run that starts from the
        current noise instead of a fresh draw."""
        if self.time is None:
            raise ValueError("a run continues only after its first release")
        if float(mechanism.times[0]) > self.time:
            raise ValueError("a continuation's times must not exceed the current time")
        run = BrownianRun(mechanism, self._values, self._rng)
        run._noise, run.time = self._noise, self.time
        return run

    @property
    def cost(self) -> PrivacyCost:
        """Realized cost at the current stop (zero before any release)."""
        if self.time is None:
            return PrivacyCost.zero(ex_post=True)
        return self._mechanism.cost_at(self.time)
