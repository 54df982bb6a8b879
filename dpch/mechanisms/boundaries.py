"""Privacy boundaries ψ for the Brownian mechanism (docs/algorithms.md A2; Whitehouse et al. 2022, Def 3.5, Thm 3.6).

ψ is a δ-boundary if P(∃n: L_{1:n} ≥ ψ(T_n)) ≤ δ; then BM stopped at any stopping time N is
(ψ(T_N), δ)-ex-post private (Whitehouse et al. 2022, Cor 3.7). Both boundaries decrease in t.

- Linear (a, b > 0, 2ab = log(1/δ)): ψ^L(t) = (Δ2/t)(Δ2/2 + b) + Δ2·a. Floor Δ2·a.
- Mixture (ρ > 0): ψ^M(t) = Δ2²/(2t) + (Δ2/t)·√(2(t+ρ)·log((1/δ)·√((t+ρ)/ρ))).

From a target ε the time is the *smallest* t with ψ(t) ≤ ε (002 prints "inf{t: ψ(t) ≥ E}",
which has the inequality backwards — docs/algorithms.md A2/A7). The optimal parameters for a
target are [derived] in A2: linear a* = (√(L² + Lε) − L)/Δ2, b* = L/(2a*), L = log(1/δ);
mixture ρ* minimises ψ^M's inverse at ε (found numerically).
"""

from __future__ import annotations

import math
from dataclasses import dataclass


def _check_delta(delta: float) -> None:
    # Whitehouse et al. 2022, Thm 3.6: ψ is a δ-boundary for δ in (0, 1) (2ab = log(1/δ) > 0 needs δ < 1;
    # δ ≥ 1 gave b < 0 and a negative time, a NaN δ a NaN time); written `not (…)` so NaN is refused
    if not 0.0 < delta < 1.0:
        raise ValueError(f"δ must be in (0, 1), got {delta!r}")


@dataclass(frozen=True)
class LinearBoundary:
    """ψ^L_{a,b}(t) = (Δ2/t)(Δ2/2 + b) + Δ2·a with 2ab = log(1/δ) (Whitehouse et al. 2022, Thm 3.6)."""

    a: float
    delta: float
    sensitivity: float = 1.0

    def __post_init__(self) -> None:
        _check_delta(self.delta)
        if not self.a > 0:  # Thm 3.6 needs a, b > 0
            raise ValueError(f"the linear boundary needs a > 0, got {self.a!r}")

    @property
    def b(self) -> float:
        return -math.log(self.delta) / (2.0 * self.a)  # −log δ: 1/δ overflows for a subnormal δ

    def __call__(self, t: float) -> float:
        d = self.sensitivity
        return (d / t) * (d / 2.0 + self.b) + d * self.a

    def time_for(self, epsilon: float) -> float:
        """Smallest t with ψ(t) ≤ ε: Δ2(Δ2/2 + b)/(ε − Δ2·a); needs ε > Δ2·a."""
        d = self.sensitivity
        if not epsilon > d * self.a:  # `not >`: a NaN ε gave a NaN time
            raise ValueError(f"ε={epsilon} is at or below the linear boundary's floor Δ2·a")
        return d * (d / 2.0 + self.b) / (epsilon - d * self.a)

    @classmethod
    def optimal(cls, epsilon: float, delta: float, sensitivity: float = 1.0) -> LinearBoundary:
        """(a*, b*) minimising the time to reach ε (A2 [derived])."""
        _check_delta(delta)  # before log(1/δ): δ = 0 was a ZeroDivisionError, not a refusal
        big_l = -math.log(delta)  # not log(1/δ): inf for a subnormal δ, and then a* = inf − inf = NaN
        a = (math.sqrt(big_l**2 + big_l * epsilon) - big_l) / sensitivity
        return cls(a, delta, sensitivity)


@dataclass(frozen=True)
class MixtureBoundary:
    """ψ^M_ρ(t) = Δ2²/(2t) + (Δ2/t)·√(2(t+ρ)·log((1/δ)√((t+ρ)/ρ))) (Whitehouse et al. 2022, Thm 3.6)."""

    rho: float
    delta: float
    sensitivity: float = 1.0

    def __post_init__(self) -> None:
        _check_delta(self.delta)
        if not self.rho > 0:  # Thm 3.6's mixture needs ρ > 0 (log((t+ρ)/ρ))
            raise ValueError(f"the mixture boundary needs ρ > 0, got {self.rho!r}")

    def __call__(self, t: float) -> float:
        d, r = self.sensitivity, self.rho
        inner = -math.log(self.delta) + 0.5 * math.log((t + r) / r)
        return d * d / (2.0 * t) + (d / t) * math.sqrt(2.0 * (t + r) * inner)

    def time_for(self, epsilon: float) -> float:
        """Smallest t with ψ(t) ≤ ε (ψ^M decreases to 0, so every ε > 0 is reachable)."""
        # start-up: scipy.optimize takes 0.1–0.5 s to import; load it when a root or minimum is first needed
        from scipy.optimize import brentq

        if not epsilon > 0:  # `not >`: a NaN ε reached brentq
            raise ValueError("epsilon must be positive")
        hi = 1.0
        while self(hi) > epsilon:
            hi *= 2.0
            if hi > 1e300:  # ψ ~ √(2·log(1/δ)/t): an ε below ~1e-150 has no representable time
                raise ValueError(f"ε={epsilon:g} is below what ψ reaches at any representable time")
        lo = hi / 2.0
        if self(lo) <= epsilon:
            lo = 1e-12
        return float(brentq(lambda t: self(t) - epsilon, lo, hi, xtol=1e-12, rtol=1e-12))

    @classmethod
    def optimal(cls, epsilon: float, delta: float, sensitivity: float = 1.0) -> MixtureBoundary:
        """ρ* minimising the time to reach ε (A2: ρ* ≈ 11.58, T* ≈ 360.0 at ε=0.3, δ=1e-6)."""
        # start-up: scipy.optimize takes 0.1–0.5 s to import; load it when a root or minimum is first needed
        from scipy.optimize import minimize_scalar

        res = minimize_scalar(
            lambda log_rho: cls(math.exp(log_rho), delta, sensitivity).time_for(epsilon),
            bounds=(math.log(1e-6), math.log(1e8)),
            method="bounded",
            options={"xatol": 1e-10},
        )
        return cls(math.exp(float(res.x)), delta, sensitivity)


Boundary = LinearBoundary | MixtureBoundary
