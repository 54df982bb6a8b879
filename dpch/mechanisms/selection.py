"""Selection mechanisms: Report Noisy Max and Above Threshold, Gaussian and Laplace (Lebensold et al. 2024).

Only the documented outputs are released — the argmax index, or the halting position —
never the noisy values (B11 pitfall 3). Queries are clamped to the declared [a, b]
(data-independently) before noise, as the bounds require (B11 pitfall 4).

Gaussian Report Noisy Max (Lebensold et al. 2024, Thm 8 = Thm 12; B7): pure ε-DP *ex ante*, ε from
:func:`.selection_bounds.rnm_epsilon`. Inverse: :meth:`GaussianReportNoisyMax.for_epsilon`.
Accuracy: each noisy score is within σ·Φ⁻¹(1 − β/(2d)) of its true value with probability
1 − β (union bound), so the selected query is within twice that of the best.

Laplace Report Noisy Max (Dwork & Roth 2014, Claim 3.9): Lap(2Δ/ε) per query is ε-DP (Lap(Δ/ε)
for monotone queries such as counts). Accuracy likewise with b·ln(d/β).

Gaussian Above Threshold (Lebensold et al. 2024, Alg 1/3; B8): ex-post pure ε_post(t) at the halting query t
(Thm 17) and ex-ante ε_max at failure probability δ from Thm 7 (which needs σ_Z ≥ √3σ_X,
threshold ≥ 0 and non-negative queries, i.e. a ≥ 0).

Laplace Above Threshold (Dwork & Roth 2014, Alg. 1 / Thm 3.23): threshold noise Lap(2Δ/ε),
query noise Lap(4Δ/ε), ε-DP for one ⊤.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

from dpch.mechanisms.normal import ndtri
from dpch.mechanisms.sampling import NoiseSource
from dpch.mechanisms.selection_bounds import at_epsilon_max, at_epsilon_post, rnm_epsilon
from dpch.privacy.cost import ExPost, PrivacyCost, PureDP


@dataclass(frozen=True)
class Selection:
    """A released index and what it cost."""

    index: int
    cost: PrivacyCost


@dataclass(frozen=True)
class GaussianReportNoisyMax:
    """argmax_i clamp(q_i) + N(0, σ²) over d queries in [lower, upper], each Δ-sensitive."""

    sigma: float
    sensitivity: float
    lower: float
    upper: float
    d: int
    epsilon: float = field(init=False)
    name = "gaussian-report-noisy-max"

    def __post_init__(self) -> None:
        eps = _rnm_epsilon_cached(self.upper - self.lower, self.sensitivity, self.sigma, self.d)
        object.__setattr__(self, "epsilon", eps)

    @classmethod
    def for_epsilon(
        cls, epsilon: float, sensitivity: float, lower: float, upper: float, d: int
    ) -> GaussianReportNoisyMax:
        """Smallest σ (to 1e-6 relative) whose Thm 8 ε is ≤ ``epsilon``."""
        # start-up: scipy.optimize takes 0.1–0.5 s to import; load it when a root or minimum is first needed
        from scipy.optimize import brentq

        c = upper - lower
        if not math.isfinite(c):
            raise ValueError("the score range must be finite")

        def excess(log_sigma: float) -> float:
            return _rnm_epsilon_cached(c, sensitivity, math.exp(log_sigma), d) - epsilon

        # log(c) + log(10), not log(10·c): a range near the largest float would overflow to inf
        lo, hi = math.log(sensitivity * 1e-2), math.log(c) + math.log(10.0)
        while excess(hi) > 0:
            hi += 1.0
        while excess(lo) < 0:
            lo -= 1.0
        log_sigma = float(brentq(excess, lo, hi, xtol=1e-7))
        sigma = math.exp(log_sigma) * (1 + 1e-6)
        return cls(sigma, sensitivity, lower, upper, d)

    @property
    def cost(self) -> PrivacyCost:
        return PrivacyCost.of(PureDP(self.epsilon))

    def score_half_width(self, confidence: float = 0.95) -> float:
        """All d noisy scores are within this of the true ones with the given confidence."""
        return self.sigma * float(ndtri(1.0 - (1.0 - confidence) / (2 * self.d)))

    def release(self, values: np.ndarray, source: NoiseSource) -> Selection:
        q = np.clip(np.asarray(values, dtype=float), self.lower, self.upper)
        if q.size != self.d:
            raise ValueError(f"expected {self.d} query values, got {q.size}")
        noisy = q + source.normal(self.sigma, q.shape)
        return Selection(int(np.argmax(noisy)), self.cost)


@lru_cache(maxsize=1024)
def _rnm_epsilon_cached(c: float, sensitivity: float, sigma: float, d: int) -> float:
    return rnm_epsilon(c, sensitivity, sigma, d)


@dataclass(frozen=True)
class LaplaceReportNoisyMax:
    """argmax_i q_i + Lap(2Δ/ε) (Lap(Δ/ε) if the queries are monotone): ε-DP."""

    epsilon: float
    sensitivity: float
    monotonic: bool = False
    name = "laplace-report-noisy-max"

    @property
    def scale(self) -> float:
        return (1.0 if self.monotonic else 2.0) * self.sensitivity / self.epsilon

    @property
    def cost(self) -> PrivacyCost:
        return PrivacyCost.of(PureDP(self.epsilon))

    def score_half_width(self, d: int, confidence: float = 0.95) -> float:
        return self.scale * math.log(d / (1.0 - confidence))

    def release(self, values: np.ndarray, source: NoiseSource) -> Selection:
        q = np.asarray(values, dtype=float)
        return Selection(int(np.argmax(q + source.laplace(self.scale, q.shape))), self.cost)


@lru_cache(maxsize=4096)
def _at_epsilon_post_cached(*args: float) -> float:
    t, sens, sx, sz, thr, a, b = args
    return at_epsilon_post(int(t), sens, sx, sz, thr, a, b)


@dataclass(frozen=True)
class GaussianAboveThreshold:
    """Lebensold et al. 2024, Alg 1/3: ρ̂ = ρ + N(0, σ_X²); halt at the first t with q_t + N(0, σ_Z²) ≥ ρ̂."""

    sigma_x: float
    sigma_z: float
    threshold: float
    sensitivity: float
    lower: float = 0.0
    upper: float = 1.0
    delta: float = 1e-6  # failure probability of the ex-ante bound (Thm 7)
    name = "gaussian-above-threshold"

    @property
    def epsilon_max(self) -> float:
        """Ex-ante ε at ``delta`` (Thm 7 → pDP, B8); needs lower ≥ 0."""
        if not self.lower >= 0:  # `not >=`: a NaN lower bound passed
            raise ValueError("Thm 7 needs non-negative queries (lower ≥ 0)")
        return at_epsilon_max(self.sensitivity, self.sigma_x, self.sigma_z, self.threshold, self.delta)

    def epsilon_post(self, t: int) -> float:
        """Ex-post ε of halting at query t (Thm 17, B8); grows with t."""
        return _at_epsilon_post_cached(
            float(t),
            self.sensitivity,
            self.sigma_x,
            self.sigma_z,
            self.threshold,
            self.lower,
            self.upper,
        )

    def start(self, source: NoiseSource) -> AboveThresholdRun:
        noisy_threshold = self.threshold + float(source.normal(self.sigma_x))
        return AboveThresholdRun(self, noisy_threshold, source)


class AboveThresholdRun:
    """One instance: feed query values with :meth:`test`; it halts at the first ⊤."""

    def __init__(self, mechanism: GaussianAboveThreshold, noisy_threshold: float, source: NoiseSource) -> None:
        self._mechanism = mechanism
        self._threshold = noisy_threshold
        self._source = source
        self.count = 0
        self.halted = False

    def test(self, value: float) -> bool:
        """Release ⊤ (True, and halt) or ⊥ (False) for the next query's exact value."""
        if self.halted:
            raise RuntimeError("Above Threshold already halted; start a new instance")
        m = self._mechanism
        q = min(max(float(value), m.lower), m.upper)
        self.count += 1
        if q + float(self._source.normal(m.sigma_z)) >= self._threshold:
            self.halted = True
        return self.halted

    @property
    def cost(self) -> PrivacyCost:
        """Ex-post ε_post(t) once halted at t; before halting, the ex-ante ε_max (B9)."""
        m = self._mechanism
        worst = m.epsilon_max
        if self.halted:
            return PrivacyCost.realized(ExPost(m.epsilon_post(self.count), m.delta, worst))
        return PrivacyCost.realized(ExPost(worst, m.delta, worst))


@dataclass(frozen=True)
class LaplaceAboveThreshold:
    """Dwork & Roth Alg. 1: ρ̂ = T + Lap(2Δ/ε); ⊤ at the first q_t + Lap(4Δ/ε) ≥ ρ̂. ε-DP."""

    epsilon: float
    sensitivity: float
    threshold: float
    name = "laplace-above-threshold"

    @property
    def cost(self) -> PrivacyCost:
        return PrivacyCost.of(PureDP(self.epsilon))

    def run(self, values: np.ndarray, source: NoiseSource) -> int | None:
        """Index of the first ⊤ among ``values`` (None if all ⊥)."""
        q = np.asarray(values, dtype=float)
        rho_hat = self.threshold + float(source.laplace(2 * self.sensitivity / self.epsilon))
        noisy = q + source.laplace(4 * self.sensitivity / self.epsilon, q.shape)
        hits = np.flatnonzero(noisy >= rho_hat)
        return int(hits[0]) if hits.size else None
