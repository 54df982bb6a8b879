"""Noise scales from sensitivities and privacy targets, and the accuracy they give.

Formulas: docs/algorithms.md part C. The Gaussian mechanism uses the analytic calibration of
Balle & Wang (ICML 2018, Theorem 8): the smallest σ with
Φ(Δ/(2σ) − εσ/Δ) − e^ε·Φ(−Δ/(2σ) − εσ/Δ) ≤ δ, found by root-finding. It is far tighter than
the classic σ = Δ·√(2 ln(1.25/δ))/ε, which is also only valid for ε < 1.
"""

from __future__ import annotations

import math

from dpch.mechanisms.normal import log_ndtr, ndtri
from dpch.privacy import conversions


def _check_positive(**values: float) -> None:
    for name, value in values.items():
        if not (value > 0 and math.isfinite(value)):
            raise ValueError(f"{name} must be a positive finite number, got {value!r}")


def laplace_scale(sensitivity: float, epsilon: float) -> float:
    """Scale b of Lap(b) that makes a query of ℓ1 sensitivity Δ1 ε-DP: b = Δ1/ε."""
    _check_positive(epsilon=epsilon)
    return sensitivity / epsilon


def laplace_half_width(scale: float, confidence: float) -> float:
    """Half-width h with P(|Lap(b)| ≤ h) = confidence: h = b·ln(1/β), β = 1 − confidence."""
    beta = _beta(confidence)
    return scale * math.log(1.0 / beta)


def laplace_scale_for_half_width(half_width: float, confidence: float) -> float:
    """Inverse of :func:`laplace_half_width`: the scale whose interval is ±half_width."""
    return half_width / math.log(1.0 / _beta(confidence))


def gaussian_half_width(sigma: float, confidence: float) -> float:
    """Half-width h with P(|N(0, σ²)| ≤ h) = confidence: h = σ·Φ⁻¹(1 − β/2)."""
    return sigma * float(ndtri(1.0 - _beta(confidence) / 2.0))


def gaussian_sigma_for_half_width(half_width: float, confidence: float) -> float:
    """Inverse of :func:`gaussian_half_width`."""
    return half_width / float(ndtri(1.0 - _beta(confidence) / 2.0))


def analytic_gaussian_delta(sigma: float, epsilon: float, sensitivity: float) -> float:
    """The exact δ at ε of N(0, σ²·I) noise on a query of ℓ2 sensitivity Δ2 (Balle & Wang 2018,
    Thm 8): Φ(Δ/(2σ) − εσ/Δ) − e^ε·Φ(−Δ/(2σ) − εσ/Δ), in log space to avoid underflow.

    For a vector query Δ2 is the ℓ2 sensitivity of the whole vector: the Gaussian is rotation
    invariant, so the privacy loss of a shift μ is that of a scalar shift ‖μ‖₂ (Thm 8 is stated
    for ℓ2 sensitivity)."""
    a = sensitivity / (2.0 * sigma)
    b = epsilon * sigma / sensitivity
    first = math.exp(float(log_ndtr(a - b)))
    second = math.exp(epsilon + float(log_ndtr(-a - b)))
    return max(0.0, first - second)


def analytic_gaussian_sigma(epsilon: float, delta: float, sensitivity: float = 1.0) -> float:
    """Smallest σ for which N(0, σ²) noise makes a query of ℓ2 sensitivity Δ2 (ε, δ)-DP.

    Balle & Wang 2018, Thm 8 (docs/algorithms.md part C): δ(σ) (:func:`analytic_gaussian_delta`)
    decreases in σ, so the root is bracketed and bisected to relative width 1e-12; the upper
    end is returned, so the exact δ at the σ returned never exceeds ``delta``.
    """
    _check_positive(epsilon=epsilon, delta=delta, sensitivity=sensitivity)
    if delta >= 1:
        raise ValueError("delta must be below 1")

    def fits(sigma: float) -> bool:
        return analytic_gaussian_delta(sigma, epsilon, sensitivity) <= delta

    lo, hi = sensitivity * 1e-3, sensitivity
    while fits(lo):
        lo /= 10.0
    while not fits(hi):
        hi *= 2.0
    # bisection keeps the invariant fits(hi) and not fits(lo); brentq's root may land on either side
    for _ in range(200):
        if hi - lo <= 1e-12 * hi:
            break
        mid = 0.5 * (lo + hi)
        if fits(mid):
            hi = mid
        else:
            lo = mid
    return hi


def classic_gaussian_sigma(epsilon: float, delta: float, sensitivity: float = 1.0) -> float:
    """The textbook bound σ = Δ·√(2 ln(1.25/δ))/ε (valid for ε < 1 only); for comparison."""
    _check_positive(epsilon=epsilon, delta=delta, sensitivity=sensitivity)
    return sensitivity * math.sqrt(2.0 * math.log(1.25 / delta)) / epsilon


def gaussian_rho(sigma: float, sensitivity: float) -> float:
    """zCDP parameter of N(0, σ²) on a query of ℓ2 sensitivity Δ2: ρ = Δ2²/(2σ²) (Bun & Steinke
    2016, Prop 1.6; :func:`dpch.privacy.conversions.gaussian_rho`)."""
    return conversions.gaussian_rho(sigma, sensitivity)


def _beta(confidence: float) -> float:
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be strictly between 0 and 1, got {confidence!r}")
    return 1.0 - confidence
