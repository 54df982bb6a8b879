"""Pure-DP bounds for Gaussian Report Noisy Max and Gaussian Above Threshold (Lebensold et al. 2024).

docs/algorithms.md B7, B8, B10, B11. All of 004's ε formulas are *ratios* that need a log
(B11 pitfall 2), and the integrands' mass sits far in the tail where Φ^{d−1} underflows
(B11 pitfall 1: naive quadrature returned 0.00037 instead of 0.815). So every expectation
E_{z~N(0,1)}[g(z)] is computed in log space: log φ(z) + log g(z) with ``log_ndtr``, the
maximum located on a coarse grid, then exp(h − max) integrated with Simpson's rule on a fine
grid around the mode; the result is (max + log I). Tests cross-check against table B10
(mpmath values) and a second, independent quadrature.

- :func:`rnm_epsilon` — Lebensold et al. 2024, Thm 8 (= Thm 12), ex-ante pure ε of Gaussian RNM:
  ε = log E[Φ(z − (c−2Δ)/σ)^{d−1}] − log E[Φ(z − c/σ)^{d−1}].
- :func:`at_epsilon_post` — Lebensold et al. 2024, Thm 10 (= Thm 17), ex-post pure ε of the outcome ⊥^{t−1}⊤:
  ε_post(t) = log N_Δ − log N_0,
  N_ξ = E_x[Φ((σ_X x + ρ − b + ξ)/σ_Z)^{t−1}·Φ((−σ_X x − ρ + a + ξ)/σ_Z)]
  (the −σ_X x of Thm 17, not Thm 10's printed +x, which under-reports; B8).
- :func:`at_epsilon_max` — Lebensold et al. 2024, Thm 7 (Zhu & Wang 2020) RDP converted to pure-DP-with-δ:
  ε_max = A + 2√(AB) at α* = 1 + √(B/A) (B8).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from dpch.mechanisms.normal import log_ndtr

_LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)


def log_gaussian_expectation(log_g: Callable[[np.ndarray], np.ndarray], points: int = 20_001) -> float:
    """log E_{z~N(0,1)}[g(z)] from a vectorised log g, robust to underflow (B11).

    The coarse pass covers z ∈ [−60, 60] (log φ < −1800 beyond, so nothing relevant is
    missed); the fine pass integrates where h > max − 80 with ``points`` Simpson nodes.
    """
    # start-up: scipy.integrate loads scipy.sparse/fft; load it when an integral is first needed
    from scipy.integrate import simpson


    def h(z: np.ndarray) -> np.ndarray:
        out: np.ndarray = -0.5 * z * z - _LOG_SQRT_2PI + log_g(z)
        return out

    coarse = np.linspace(-60.0, 60.0, 24_001)
    hc = h(coarse)
    peak = float(np.max(hc))
    live = np.flatnonzero(hc > peak - 80.0)
    step = coarse[1] - coarse[0]
    lo, hi = coarse[live[0]] - step, coarse[live[-1]] + step
    fine = np.linspace(lo, hi, points)
    hf = h(fine)
    top = float(np.max(hf))
    integral = float(simpson(np.exp(hf - top), x=fine))
    return top + math.log(integral)


def rnm_epsilon(c: float, sensitivity: float, sigma: float, d: int) -> float:
    """Pure ε of Gaussian Report Noisy Max over d > 1 queries in [a, a + c] (Lebensold et al. 2024, Thm 8/12)."""
    if d < 2:
        raise ValueError("Report Noisy Max needs d > 1 queries")
    if not 0 < 2 * sensitivity <= c:
        raise ValueError("need 0 < 2Δ ≤ c = b − a")
    k = d - 1
    num = log_gaussian_expectation(lambda z: k * log_ndtr(z - (c - 2 * sensitivity) / sigma))
    den = log_gaussian_expectation(lambda z: k * log_ndtr(z - c / sigma))
    return num - den


def rnm_epsilon_two(c: float, sensitivity: float, sigma: float) -> float:
    """d = 2 closed form (B7): log Φ(−(c−2Δ)/(σ√2)) − log Φ(−c/(σ√2))."""
    s = sigma * math.sqrt(2.0)
    return float(log_ndtr(-(c - 2 * sensitivity) / s) - log_ndtr(-c / s))


def at_epsilon_post(
    t: int,
    sensitivity: float,
    sigma_x: float,
    sigma_z: float,
    threshold: float,
    a: float = 0.0,
    b: float = 1.0,
) -> float:
    """Ex-post pure ε of Gaussian Above Threshold halting at query t (Lebensold et al. 2024, Thm 17; B8)."""
    if t < 1:
        raise ValueError("t counts queries from 1")
    if t == 1:
        s = math.hypot(sigma_x, sigma_z)
        return float(log_ndtr((a - threshold + sensitivity) / s) - log_ndtr((a - threshold) / s))

    def log_n(xi: float) -> float:
        def log_g(x: np.ndarray) -> np.ndarray:
            below = log_ndtr((sigma_x * x + threshold - b + xi) / sigma_z)
            top = log_ndtr((-sigma_x * x - threshold + a + xi) / sigma_z)
            return np.asarray((t - 1) * below + top)

        return log_gaussian_expectation(log_g)

    return log_n(sensitivity) - log_n(0.0)


def at_epsilon_max(sensitivity: float, sigma_x: float, sigma_z: float, threshold: float, delta: float) -> float:
    """Ex-ante ε (with failure probability δ) of Gaussian AT from Lebensold et al. 2024, Thm 7's RDP bound (B8).

    Requires σ_Z ≥ √3·σ_X, threshold ρ ≥ 0 and non-negative Δ-sensitive queries.
    """
    if sigma_z < math.sqrt(3.0) * sigma_x * (1 - 1e-12):
        raise ValueError("Thm 7 needs σ_Z ≥ √3·σ_X")
    if threshold < 0:
        raise ValueError("Thm 7 needs a non-negative threshold")
    big_a = sensitivity**2 / sigma_x**2 + 2.0 * sensitivity**2 / sigma_z**2
    r = threshold**2 / sigma_x**2
    c = 2.0 * math.sqrt(3.0) * math.pi * (1.0 + 9.0 * r)
    big_l = r + math.log(c) + math.log1p(math.exp(-r) / c)
    big_b = big_l / 2.0 + math.log(1.0 / delta)
    return big_a + 2.0 * math.sqrt(big_a * big_b)
