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

import math
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from dpch.mechanisms.boundaries import Boundary
from dpch.mechanisms.lnr import LaplacePath
from dpch.mechanisms.sampling import NoiseSource
from dpch.privacy.cost import ExPost, PrivacyCost


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


def halting_tail(margin: float, epsilon: float, sensitivity: float) -> float:
    """P(ξ − ζ ≥ m) for a round at ε: ξ ~ Lap(4Δ/ε) fresh, ζ ~ Lap(2Δ/ε) (the threshold path's value
    at 2Δ/ε, Laplace-distributed by Thm D.1), independent. With b = 2Δ/ε the density of a sum of
    Laplaces of scales 2b and b gives (4·e^(−m/(2b)) − e^(−m/b))/6 for m ≥ 0 **[derived]**; ξ − ζ is
    symmetric and continuous, so for m < 0 it is 1 − P(ξ − ζ ≥ −m)."""
    if margin < 0:
        return 1.0 - halting_tail(-margin, epsilon, sensitivity)
    b = 2.0 * sensitivity / epsilon
    return (4.0 * math.exp(-margin / (2.0 * b)) - math.exp(-margin / b)) / 6.0


def halting_margins(epsilons: Sequence[float], sensitivity: float, beta: float,
                    weights: Sequence[float] | None = None) -> tuple[float, ...]:
    """Per-round threshold margins m_n with P(ξ_n − ζ_n ≥ m_n) = β·p_n, p_n = weights normalized
    (default: proportional to ε_n, so the rounds where a halt is likely get most of β).

    With τ_n = τ + m_n, a run halts at a round whose utility is below τ only if that round's noise
    ξ_n − ζ_n exceeds m_n; by a union bound over the rounds this happens with probability at most
    Σ β·p_n = β (Whitehouse et al. 2022, Prop C.1, with the exact one-sided tail of ξ − ζ
    (:func:`halting_tail`) in place of its two two-sided bounds, which cost η_n = (4Δ/ε_n)·log(2/(β·p_n))).
    So when it halts, u ≥ τ with probability at least 1 − β."""
    if not 0 < beta < 1:
        raise ValueError("β must be in (0, 1)")
    w = np.asarray(epsilons if weights is None else weights, dtype=float)
    p = w / w.sum()
    margins = []
    for eps_n, p_n in zip(epsilons, p, strict=True):
        q = beta * float(p_n)
        b = 2.0 * sensitivity / float(eps_n)
        # e^(−|m|/(2b)) = x solves (4x − x²)/6 = t: x = 2 − √(4 − 6t), written without the cancellation;
        # the tail formula holds for m ≥ 0, i.e. t = q ≤ ½; above ½ the margin is negative and, by the
        # symmetry of ξ − ζ, its tail at −m is 1 − q (:func:`halting_tail`)
        t = q if q <= 0.5 else 1.0 - q
        root = 2.0 + math.sqrt(4.0 - 6.0 * t)
        if q < sys.float_info.min:
            # t = β·p_n is subnormal: the product loses its bits there, and is 0 for β = 5e-324 over two
            # rounds (a "math domain error" for an accepted β); log t is taken from its factors instead
            magnitude = -2.0 * b * (math.log(6.0) + math.log(beta) + math.log(float(p_n)) - math.log(root))
        else:
            magnitude = -2.0 * b * math.log(6.0 * t / root)  # ≥ 0: its tail is t
        margins.append(magnitude if q <= 0.5 else -magnitude)
    return tuple(margins)


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
    #: per-round additions to the threshold, τ_n = τ + margins[n − 1] (none: τ every round). Public
    #: constants fixed before the run; §5 allows a threshold per round (the proof of Thm 5.1 shifts u_n)
    margins: tuple[float, ...] = ()
    name = "reduced-above-threshold"

    def __post_init__(self) -> None:
        eps = np.asarray(self.epsilons, dtype=float)
        if eps.size == 0 or not np.all(eps > 0) or np.any(np.diff(eps) < 0):
            raise ValueError("the privacy schedule E_n must be positive and non-decreasing")
        # `not <=`: a NaN E_n or ε_max passed, and the threshold path's noise at 2Δ/NaN was 0
        if not eps[-1] <= self.epsilon_max:
            raise ValueError("E_n must not exceed ε_max (A7 pitfall 5: the floor is fixed)")
        if self.margins and len(self.margins) != eps.size:
            raise ValueError("one margin per round")

    def run(
        self,
        inner: NoiseReductionRun,
        utility: Callable[[np.ndarray], float],
        source: NoiseSource,
    ) -> RATResult:
        rng = source.generator
        path = LaplacePath(floor=2 * self.sensitivity / self.epsilon_max, rng=rng, size=1)
        iterate = np.empty(0)
        margins = self.margins or (0.0,) * len(self.epsilons)
        for n, (eps_n, margin) in enumerate(zip(self.epsilons, margins, strict=True), start=1):
            iterate = inner.next()
            zeta = float(path.value(2 * self.sensitivity / eps_n)[0])
            xi = float(rng.laplace(0.0, 4 * self.sensitivity / eps_n))
            if utility(iterate) + xi >= self.threshold + margin + zeta:
                return RATResult(n, iterate, self._cost(inner.cost, eps_n))
        return RATResult(None, iterate, self._cost(inner.cost, self.epsilons[-1]))

    def _cost(self, inner: PrivacyCost, eps_n: float) -> PrivacyCost:
        """Thm 5.1: L^Alg_{1:N} + E_N, ex post."""
        worst_inner = inner.worst_epsilon if inner.worst_epsilon is not None else inner.epsilon
        return PrivacyCost.realized(ExPost(inner.epsilon + eps_n, inner.delta, worst_inner + self.epsilon_max))
