"""Privacy and accuracy of the discrete Laplace and discrete Gaussian distributions.

Computed for the distribution actually sampled (:mod:`.exact`), not its continuous twin.

- Discrete Laplace, P(z) ∝ p^|z| with p = e^{−1/b}: an integer query of ℓ1 sensitivity Δ1
  plus this noise is (Δ1/b)-DP (the geometric mechanism; docs/algorithms.md part C). Its tails are
  exact: P(|Z| > k) = 2·p^{k+1}/(1 + p).
- Discrete Gaussian N_Z(0, σ²) (Canonne, Kamath & Steinke 2020):
  * zCDP: an integer query of ℓ2 sensitivity Δ2 plus N_Z(0, σ²) per coordinate is
    Δ2²/(2σ²)-zCDP — the same ρ as the continuous Gaussian (CKS Theorem 4 and its
    product form for vectors).
  * (ε, δ): CKS Theorem 7 gives the exact δ for a scalar integer shift Δ:
    δ = P[Y > εσ²/Δ − Δ/2] − e^ε·P[Y > εσ²/Δ + Δ/2], Y ~ N_Z(0, σ²).
    For σ ≤ :data:`EXACT_SIGMA_LIMIT` the tails are summed exactly; above it δ is bounded
    above by Euler–Maclaurin with an explicit remainder (so the calibrated σ is
    conservative, by a relative amount of order 1/σ).
    For vector-valued releases the (ε, δ) figure is that of the worst scalar shift of size
    ⌈Δ2⌉; CKS (§3, multivariate) show the product discrete Gaussian matches the continuous
    one up to a term exponentially small in σ², and the ρ above is exact. Accounting layers
    that compose in zCDP should use ρ.
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np

from dpch.mechanisms.calibration import analytic_gaussian_sigma
from dpch.mechanisms.normal import logsumexp, ndtr, ndtri

#: above this σ the discrete Gaussian's tails are bounded by integrals instead of summed
EXACT_SIGMA_LIMIT = 2000.0


# ---------------------------------------------------------------- discrete Laplace


def discrete_laplace_tail(scale: float, k: int) -> float:
    """P(|Z| > k) for P(z) ∝ exp(−|z|/scale): 2·p^{k+1}/(1 + p), p = e^{−1/scale}."""
    if k < 0:
        return 1.0
    p = math.exp(-1.0 / scale)
    return 2.0 * math.exp(-(k + 1) / scale) / (1.0 + p)


def discrete_laplace_half_width(scale: float, confidence: float) -> int:
    """Smallest integer k with P(|Z| ≤ k) ≥ confidence, for the discrete Laplace of ``scale``.

    Never larger than the continuous b·ln(1/β) rounded up (the discrete tail is lighter).
    """
    beta = 1.0 - confidence
    p = math.exp(-1.0 / scale)
    # 2 p^{k+1}/(1+p) ≤ β  ⇔  k ≥ scale·ln(2/(β(1+p))) − 1
    k = max(0, math.ceil(scale * math.log(2.0 / (beta * (1.0 + p))) - 1.0 - 1e-9))
    while k > 0 and discrete_laplace_tail(scale, k - 1) <= beta:
        k -= 1
    while discrete_laplace_tail(scale, k) > beta:
        k += 1
    return k


# ---------------------------------------------------------------- discrete Gaussian


def _log_norm(sigma: float) -> float:
    """log Σ_y exp(−y²/(2σ²)) (exact sum; σ ≤ EXACT_SIGMA_LIMIT)."""
    k = int(40 * sigma) + 40
    ys = np.arange(-k, k + 1, dtype=float)
    return float(logsumexp(-(ys**2) / (2 * sigma**2)))


def _log_tail_exact(sigma: float, n: int, log_norm: float) -> float:
    """log P[Y ≥ n] by summation (σ ≤ EXACT_SIGMA_LIMIT)."""
    if n <= 0:
        # P[Y ≥ n] = 1 − P[Y ≥ 1 − n]
        return math.log1p(-math.exp(_log_tail_exact(sigma, 1 - n, log_norm)))
    ys = np.arange(n, n + int(40 * sigma) + 40, dtype=float)
    return float(logsumexp(-(ys**2) / (2 * sigma**2))) - log_norm


def _tail_bounds(sigma: float, n: int) -> tuple[float, float]:
    """Rigorous (lower, upper) bounds on P[Y ≥ n] for Y ~ N_Z(0, σ²) (any σ)."""
    if n <= 0:
        lo, hi = _tail_bounds(sigma, 1 - n)
        return 1.0 - hi, 1.0 - lo
    slack = 1.0 + 3.0 * math.exp(-2.0 * math.pi**2 * sigma**2)
    upper = float(ndtr(-(n - 1) / sigma))
    lower = float(ndtr(-n / sigma)) / slack
    return lower, upper


def discrete_gaussian_delta(epsilon: float, sigma: float, sensitivity: int) -> float:
    """δ of N_Z(0, σ²) on an integer query with integer shift ``sensitivity`` (CKS Theorem 7).

    Exact for σ ≤ EXACT_SIGMA_LIMIT, an upper bound above it (module docstring).
    """
    delta_int = int(sensitivity)
    if delta_int <= 0:
        return 0.0
    a1 = epsilon * sigma**2 / delta_int - delta_int / 2.0
    a2 = epsilon * sigma**2 / delta_int + delta_int / 2.0
    n1, n2 = math.floor(a1) + 1, math.floor(a2) + 1  # P[Y > a] = P[Y ≥ ⌊a⌋ + 1]
    if sigma <= EXACT_SIGMA_LIMIT:
        log_norm = _log_norm(sigma)
        t1 = math.exp(_log_tail_exact(sigma, n1, log_norm))
        t2 = _log_tail_exact(sigma, n2, log_norm)
        return max(0.0, t1 - math.exp(epsilon + t2))
    return delta_euler_maclaurin(epsilon, sigma, delta_int, n1)


def delta_euler_maclaurin(epsilon: float, sigma: float, shift: int, n1: int) -> float:
    """Upper bound on CKS Theorem 7's δ for large σ, by Euler–Maclaurin with remainder.

    δ = Σ_{y ≥ n1} h(y)/Z with h(y) = f(y) − e^ε·f(y + Δ), f(y) = exp(−y²/(2σ²)), smooth on
    [n1, ∞). Σ_{y≥n} h = ∫_n^∞ h + h(n)/2 − h'(n)/12 + R, |R| ≤ (2ζ(2)/(2π)²)·∫_n^∞|h''|
    = (1/12)·∫|h''|, and ∫_n^∞|f''| ≤ 2·sup_{[n,∞)}|f'|. Z ≥ σ√(2π) (Poisson summation).
    """
    root = sigma * math.sqrt(2.0 * math.pi)
    e = math.exp(epsilon)

    def f(y: float) -> float:
        return math.exp(-(y * y) / (2.0 * sigma * sigma))

    def df(y: float) -> float:
        return -y / (sigma * sigma) * f(y)

    def sup_df(n: float) -> float:
        return abs(df(n)) if n >= sigma else math.exp(-0.5) / sigma

    n = float(n1)
    integral = root * (float(ndtr(-n / sigma)) - e * float(ndtr(-(n + shift) / sigma)))
    h = f(n) - e * f(n + shift)
    dh = df(n) - e * df(n + shift)
    remainder = (2.0 * sup_df(n) + e * 2.0 * sup_df(n + shift)) / 12.0
    return max(0.0, (integral + h / 2.0 - dh / 12.0 + remainder) / root)


@lru_cache(maxsize=256)
def discrete_gaussian_sigma(epsilon: float, delta: float, sensitivity: float) -> float:
    """Smallest σ (to 1e-9 relative) with :func:`discrete_gaussian_delta` ≤ δ.

    The integer shift is ⌈sensitivity⌉. Starts from the continuous analytic σ (Balle & Wang)
    and root-finds on the discrete δ; the returned σ is verified to meet δ.
    """
    # start-up: scipy.optimize takes ~0.1–0.3 s to import; only an integer Gaussian calibration needs it
    from scipy.optimize import brentq

    shift = math.ceil(sensitivity - 1e-12)
    if shift <= 0:
        return 0.0

    def excess(sigma: float) -> float:
        return discrete_gaussian_delta(epsilon, sigma, shift) - delta

    sigma0 = analytic_gaussian_sigma(epsilon, delta, float(shift))
    lo, hi = sigma0 * 0.5, sigma0 * 1.05
    while excess(hi) > 0:
        hi *= 1.5
    if excess(lo) <= 0:
        return lo
    sigma = float(brentq(excess, lo, hi, xtol=1e-12, rtol=1e-9))
    while excess(sigma) > 0:  # the discrete δ may step; make sure the result meets it
        sigma *= 1.0 + 1e-9
    return sigma


def discrete_gaussian_tail(sigma: float, k: int) -> float:
    """P(|Y| > k) for Y ~ N_Z(0, σ²); an upper bound above EXACT_SIGMA_LIMIT."""
    if k < 0:
        return 1.0
    if sigma <= EXACT_SIGMA_LIMIT:
        return min(1.0, 2.0 * math.exp(_log_tail_exact(sigma, k + 1, _log_norm(sigma))))
    return min(1.0, 2.0 * _tail_bounds(sigma, k + 1)[1])


def discrete_gaussian_half_width(sigma: float, confidence: float) -> int:
    """Smallest integer k with P(|Y| ≤ k) ≥ confidence for Y ~ N_Z(0, σ²).

    P(|Y| > k) ≤ 2Φ̄(k/σ) (the integral bounds above), so the continuous half-width rounded
    up is always enough; below EXACT_SIGMA_LIMIT we search down from it on the exact tails.
    """
    beta = 1.0 - confidence
    k = math.ceil(-sigma * float(ndtri(beta / 2.0)))
    if sigma > EXACT_SIGMA_LIMIT:
        return k
    while k > 0 and discrete_gaussian_tail(sigma, k - 1) <= beta:
        k -= 1
    return k
