"""ReducedAboveThreshold (docs/algorithms.md A3; Whitehouse et al. 2022, Algorithm 1, Thm 5.1, Cor 5.2).

Stopping a noise-reduction mechanism on a rule that looks at *private* data (e.g. "stop when
the model's loss on the data is ≤ τ") needs this wrapper (A7 pitfall 2). For n = 1, 2, …:

1. ε_n := E_n (a non-decreasing schedule ≤ ε_max); T_n := 2Δ/ε_n.
2. ζ_n := Z_{T_n} from **one** continuous Laplace path with floor η = 2Δ/ε_max
   (:class:`.lnr.LaplacePath`), so the threshold noise is correlated across rounds.
3. ξ_n ~ Lap(4Δ/ε_n), fresh each round.
4. If u(Alg_n(x), x) + ξ_n ≥ τ + ζ_n: output 1 and halt; else output 0.

Privacy (Thm 5.1): L^RAT ≤ L^Alg_{1:N} + E_N(Alg_{1:N−1}); with BM and E_n = ψ(T_n) this is
(2ψ(T_N), δ)-ex-post private (Cor 5.2). The inner iterates up to N are charged as released.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from dpch.mechanisms.boundaries import Boundary
from dpch.mechanisms.lnr import LaplacePath
from dpch.mechanisms.sampling import NoiseSource
from dpch.privacy.cost import PrivacyCost


class NoiseReductionRun(Protocol):
    """What RAT needs from a BM or LNR run."""

    def next(self) -> np.ndarray: ...

    @property
    def cost(self) -> PrivacyCost: ...


@dataclass(frozen=True)
class RATResult:
    """Halting round (1-based; None if the schedule ran out), its iterate, and the cost."""

    halted_at: int | None
    iterate: np.ndarray
    cost: PrivacyCost


def brownian_times_for(boundary: Boundary, epsilons: Sequence[float]) -> list[float]:
    """BM times with ψ(T_n) = ε_n, so RAT with BM costs 2ψ(T_N) (Cor 5.2)."""
    return [boundary.time_for(e) for e in epsilons]


@dataclass(frozen=True)
class ReducedAboveThreshold:
    """Whitehouse et al. 2022, Algorithm 1 over an inner noise-reduction run."""

    sensitivity: float  # Δ of the utility u
    epsilon_max: float
    threshold: float
    epsilons: tuple[float, ...]
    name = "reduced-above-threshold"

    def __post_init__(self) -> None:
        eps = np.asarray(self.epsilons, dtype=float)
        if eps.size == 0 or np.any(eps <= 0) or np.any(np.diff(eps) < 0):
            raise ValueError("the privacy schedule E_n must be positive and non-decreasing")
        if eps[-1] > self.epsilon_max:
            raise ValueError("E_n must not exceed ε_max (A7 pitfall 5: the floor is fixed)")

    def run(
        self,
        inner: NoiseReductionRun,
        utility: Callable[[np.ndarray], float],
        source: NoiseSource,
    ) -> RATResult:
        rng = source.generator
        path = LaplacePath(floor=2 * self.sensitivity / self.epsilon_max, rng=rng, size=1)
        iterate = np.empty(0)
        for n, eps_n in enumerate(self.epsilons, start=1):
            iterate = inner.next()
            zeta = float(path.value(2 * self.sensitivity / eps_n)[0])
            xi = float(rng.laplace(0.0, 4 * self.sensitivity / eps_n))
            if utility(iterate) + xi >= self.threshold + zeta:
                return RATResult(n, iterate, self._cost(inner.cost, eps_n))
        return RATResult(None, iterate, self._cost(inner.cost, self.epsilons[-1]))

    def _cost(self, inner: PrivacyCost, eps_n: float) -> PrivacyCost:
        """Thm 5.1: L^Alg_{1:N} + E_N, ex post."""
        worst_inner = inner.worst_epsilon if inner.worst_epsilon is not None else inner.epsilon
        return PrivacyCost(
            inner.epsilon + eps_n,
            inner.delta,
            ex_post=True,
            worst_epsilon=worst_inner + self.epsilon_max,
        )
