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

from dpch.mechanisms.normal import log_ndtr, log_ndtr_excess

_LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)


def _log_integral(h: Callable[[np.ndarray], np.ndarray], lo: float, hi: float, points: int) -> float:
    """log ∫ exp(h(u)) du for a concave h with h'' ≤ −1 whose maximum lies in [lo, hi] (B11).

    The mode is located by bounded Brent on [lo, hi] (h is unimodal); since h'' ≤ −1, h is below its
    maximum − 80 farther than 13 from the mode, so the live region's ends are roots of h − (max − 80)
    within 13 of it; exp(h − max) is integrated there with Simpson's rule on ``points`` nodes. The live
    region's width adapts to the peak: a sharp one (curvature up to d) gets as many nodes as a wide one.
    """
    # start-up: scipy.integrate and scipy.optimize load scipy.sparse/fft; load them when first needed
    from scipy.integrate import simpson
    from scipy.optimize import brentq, minimize_scalar

    def scalar(u: float) -> float:
        return float(h(np.asarray([u]))[0])

    found = minimize_scalar(lambda u: -scalar(u), bounds=(lo, hi), method="bounded",
                            options={"xatol": 1e-9 * max(1.0, abs(hi - lo))})
    mode = float(found.x)
    peak = scalar(mode)
    floor = peak - 80.0

    def end(a: float, b: float) -> float:
        if scalar(a) >= floor:  # impossible when h'' ≤ −1 (h(mode ± 14) ≤ max − 98): a guard for brentq
            return a
        return float(brentq(lambda u: scalar(u) - floor, a, b, xtol=1e-12, rtol=1e-12))

    left, right = end(mode - 14.0, mode), end(mode + 14.0, mode)
    fine = np.linspace(left, right, points)
    hf = h(fine)
    top = float(np.max(hf))
    integral = float(simpson(np.exp(hf - top), x=fine))
    return top + math.log(integral)


def log_gaussian_expectation(log_g: Callable[[np.ndarray], np.ndarray], points: int = 20_001) -> float:
    """log E_{z~N(0,1)}[g(z)] from a vectorised log g, robust to underflow (B11), for g ≤ 1 with log g
    concave (products of Φ's of affine functions, as every caller here has).

    h(z) = log φ(z) + log g(z) is then concave with h'' ≤ −1. Its mode is where the mass is, and it
    can lie far from 0: h(z*) ≥ h(0) and log g ≤ 0 give z*² ≤ −2·log g(0), so it is searched in
    |z| ≤ √(−2·log g(0)) + 1 (the old fixed window [−60, 60] missed modes beyond 60, B11 pitfall 1).
    """

    def h(z: np.ndarray) -> np.ndarray:
        out: np.ndarray = -0.5 * z * z - _LOG_SQRT_2PI + log_g(z)
        return out

    at_zero = float(log_g(np.asarray([0.0]))[0])
    reach = math.sqrt(max(0.0, -2.0 * at_zero)) + 1.0
    return _log_integral(h, -reach, reach, points)


def _log_rnm_integral(shift: float, k: int, points: int = 20_001) -> float:
    """J(s) = log ∫ exp(−(k+1)u²/2 + k·M(u − s/(k+1))) du, M(x) = log Φ(x) + x²/2, s ≥ 0.

    With z = ks/(k+1) + u, log φ(z) + k·log Φ(z − s) = −ks²/(2(k+1)) − log √(2π) + that integrand: the
    quadratic part that swamps log Φ far in its tail (B11 pitfall 1) is taken out exactly, so J is
    of moderate size for every s, and E[Φ(z − s)^k] = exp(−ks²/(2(k+1)) + J(s)) / √(2π). The integrand
    is concave with second derivative between −(k+1) and −1 (M is convex with M'' < 1); its slope at
    0 is k·M'(−s/(k+1)) > 0 and falls by at least 1 per unit, so the mode is in [0, that slope]."""
    kk = float(k)
    x0 = -shift / (kk + 1.0)

    def h(u: np.ndarray) -> np.ndarray:
        out: np.ndarray = -0.5 * (kk + 1.0) * u * u + kk * np.asarray(log_ndtr_excess(u + x0))
        return out

    # M'(x) = φ(x)/Φ(x) + x, and φ(x)/Φ(x) = e^(−M(x))/√(2π). Below x = −1 the Mills-ratio bounds
    # t < φ(−t)/Φ(−t) < t + 1/t give M'(x) < −1/x, a bound without the cancellation of the sum
    if x0 < -1.0:
        slope = kk / -x0
    else:
        slope = kk * (math.exp(-float(log_ndtr_excess(x0))) / math.sqrt(2.0 * math.pi) + x0)
    return _log_integral(h, 0.0, max(slope, 0.0) * 1.01 + 1.0, points)


def rnm_epsilon(c: float, sensitivity: float, sigma: float, d: int) -> float:
    """Pure ε of Gaussian Report Noisy Max over d > 1 queries in [a, a + c] (Lebensold et al. 2024, Thm 8/12):
    ε = log E[Φ(z − (c−2Δ)/σ)^{d−1}] − log E[Φ(z − c/σ)^{d−1}].

    With s = c/σ and s' = (c − 2Δ)/σ the two expectations' quadratic parts differ by
    k(s² − s'²)/(2(k+1)) = k·(2Δ/σ)·((2c − 2Δ)/σ)/(2(k+1)), computed as that product (both are huge
    when c/σ is, e.g. a score range of 10¹⁰⁰); the rest is J(s') − J(s) (:func:`_log_rnm_integral`).
    So ε is accurate for every range, where integrating log φ + k·log Φ directly lost the mass beyond
    z = 60 (an over-estimate from c/σ ≈ 60 on) and failed outright (IndexError) from c/σ ≈ 10⁸."""
    if d < 2:
        raise ValueError("Report Noisy Max needs d > 1 queries")
    if not 0 < 2 * sensitivity <= c:
        raise ValueError("need 0 < 2Δ ≤ c = b − a")
    # c/σ must be finite too: for σ below c/1.8e308 it overflows and J(∞) made ε a NaN, not a refusal
    if not (math.isfinite(c) and math.isfinite(sigma) and sigma > 0 and math.isfinite(c / sigma)):
        raise ValueError("need a finite range and a positive finite σ (with c/σ finite)")
    k = d - 1
    quadratic = k * ((2.0 * sensitivity) / sigma) * ((2.0 * c - 2.0 * sensitivity) / sigma) / (2.0 * (k + 1))
    return quadratic + _log_rnm_integral((c - 2.0 * sensitivity) / sigma, k) - _log_rnm_integral(c / sigma, k)


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
    # Lebensold et al. 2024, Thm 7: σ_X > 0 (a negative σ_X passed σ_Z ≥ √3·σ_X whatever σ_Z, and only
    # σ_X² entered ε), and the pDP conversion needs δ in (0, 1) (δ > 1 gave a smaller ε_max, δ = 0 a
    # ZeroDivisionError); every check is `not (…)` so that a NaN is refused, not turned into a NaN ε
    if not (sigma_x > 0 and math.isfinite(sigma_x)):
        raise ValueError(f"Thm 7 needs a positive finite σ_X, got {sigma_x!r}")
    if not sigma_z >= math.sqrt(3.0) * sigma_x * (1 - 1e-12):
        raise ValueError("Thm 7 needs σ_Z ≥ √3·σ_X")
    if not threshold >= 0:
        raise ValueError("Thm 7 needs a non-negative threshold")
    if not 0.0 < delta < 1.0:
        raise ValueError(f"Thm 7's failure probability δ must be in (0, 1), got {delta!r}")
    big_a = sensitivity**2 / sigma_x**2 + 2.0 * sensitivity**2 / sigma_z**2
    r = threshold**2 / sigma_x**2
    c = 2.0 * math.sqrt(3.0) * math.pi * (1.0 + 9.0 * r)
    big_l = r + math.log(c) + math.log1p(math.exp(-r) / c)
    big_b = big_l / 2.0 - math.log(delta)  # −log δ: log(1/δ) is inf for a subnormal δ (an infinite ε_max)
    return big_a + 2.0 * math.sqrt(big_a * big_b)
