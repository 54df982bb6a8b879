"""Noise scales from sensitivities and privacy targets, and the accuracy they give.

Formulas: ALGORITHMS.md part C. The Gaussian mechanism uses the analytic calibration of
Balle & Wang (ICML 2018, Theorem 8): the smallest σ with
Φ(Δ/(2σ) − εσ/Δ) − e^ε·Φ(−Δ/(2σ) − εσ/Δ) ≤ δ, found by root-finding. It is far tighter than
the classic σ = Δ·√(2 ln(1.25/δ))/ε, which is also only valid for ε < 1.
"""

from __future__ import annotations

import math

from scipy.optimize import brentq
from scipy.special import log_ndtr, ndtri


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


def _analytic_gaussian_excess(sigma: float, epsilon: float, sensitivity: float) -> float:
    """δ(σ) − 0 for the Balle–Wang condition, computed in log space to avoid underflow."""
    a = sensitivity / (2.0 * sigma)
    b = epsilon * sigma / sensitivity
    first = math.exp(float(log_ndtr(a - b)))
    second = math.exp(epsilon + float(log_ndtr(-a - b)))
    return first - second


def analytic_gaussian_sigma(epsilon: float, delta: float, sensitivity: float = 1.0) -> float:
    """Smallest σ for which N(0, σ²) noise makes a query of ℓ2 sensitivity Δ2 (ε, δ)-DP.

    Balle & Wang 2018, Theorem 8 (ALGORITHMS.md part C). δ(σ) is decreasing in σ, so the
    root is bracketed and found with Brent's method to relative precision 1e-12.
    """
    _check_positive(epsilon=epsilon, delta=delta, sensitivity=sensitivity)
    if delta >= 1:
        raise ValueError("delta must be below 1")

    def excess(sigma: float) -> float:
        return _analytic_gaussian_excess(sigma, epsilon, sensitivity) - delta

    lo, hi = sensitivity * 1e-3, sensitivity
    while excess(lo) < 0:
        lo /= 10.0
    while excess(hi) > 0:
        hi *= 2.0
    return float(brentq(excess, lo, hi, xtol=1e-14, rtol=1e-12, maxiter=500))


def classic_gaussian_sigma(epsilon: float, delta: float, sensitivity: float = 1.0) -> float:
    """The textbook bound σ = Δ·√(2 ln(1.25/δ))/ε (valid for ε < 1 only); for comparison."""
    _check_positive(epsilon=epsilon, delta=delta, sensitivity=sensitivity)
    return sensitivity * math.sqrt(2.0 * math.log(1.25 / delta)) / epsilon


def gaussian_rho(sigma: float, sensitivity: float) -> float:
    """zCDP parameter of N(0, σ²) on a query of ℓ2 sensitivity Δ2: ρ = Δ2²/(2σ²)."""
    return sensitivity**2 / (2.0 * sigma**2)


def _beta(confidence: float) -> float:
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be strictly between 0 and 1, got {confidence!r}")
    return 1.0 - confidence
