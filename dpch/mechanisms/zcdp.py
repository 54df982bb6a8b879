"""zCDP conversions used by the filters (ALGORITHMS.md A0 Lemma 2.3, A4 Thm 2 and Thm 6).

- δ-approximate ρ-zCDP ⇒ (ρ + 2√(ρ·log(1/δ'')), δ + δ'')-DP (000 Lemma 2.3, Bun–Steinke).
- (ε, δ)-DP ⇒ δ-approximate (ε²/2)-zCDP (000 Lemma 2.3).
- ρ_max(ε, δ'') = (√(log(1/δ'') + ε) − √(log(1/δ'')))²: the largest ρ with
  ρ + 2√(ρ·log(1/δ'')) ≤ ε ([derived] in ALGORITHMS.md A4; the budget of 000 Thm 2's filter).
- 000 Thm 6 *prints* ρ + 2√(2ρ·log(1/δ'')); its proof and experiments match the form above.
  ALGORITHMS.md A4 asks for the printed (more conservative) formula by default, so
  :func:`zcdp_to_dp_epsilon` takes ``printed_theorem_6``; both are tested.
- The exponential mechanism with parameter ε_EM is ε_EM²/8-zCDP (000 §7.2).
"""

from __future__ import annotations

import math


def _log_inv(delta: float) -> float:
    if not 0.0 < delta < 1.0:
        raise ValueError(f"delta must be in (0, 1), got {delta!r}")
    return math.log(1.0 / delta)


def zcdp_to_dp_epsilon(rho: float, delta: float, *, printed_theorem_6: bool = False) -> float:
    """ε such that ρ-zCDP ⇒ (ε, δ)-DP: ρ + 2√(ρ·log(1/δ)) (or the Thm 6 printed 2√(2ρ…))."""
    if rho < 0:
        raise ValueError("rho must be non-negative")
    factor = 2.0 if printed_theorem_6 else 1.0
    return rho + 2.0 * math.sqrt(factor * rho * _log_inv(delta))


def rho_max(epsilon: float, delta: float, *, printed_theorem_6: bool = False) -> float:
    """Largest ρ with :func:`zcdp_to_dp_epsilon`(ρ, δ) ≤ ε (ALGORITHMS.md A4, [derived]).

    Solving ρ + 2√(cρL) = ε for √ρ: √ρ = √(cL + ε) − √(cL), with L = log(1/δ) and c = 1
    (or 2 for Thm 6's printed form).
    """
    if epsilon < 0:
        raise ValueError("epsilon must be non-negative")
    cl = (2.0 if printed_theorem_6 else 1.0) * _log_inv(delta)
    return (math.sqrt(cl + epsilon) - math.sqrt(cl)) ** 2


def dp_to_zcdp_rho(epsilon: float) -> float:
    """(ε, δ)-DP ⇒ δ-approximate (ε²/2)-zCDP (000 Lemma 2.3)."""
    return epsilon * epsilon / 2.0


def exponential_mechanism_rho(epsilon_em: float) -> float:
    """The exponential mechanism with parameter ε_EM is ε_EM²/8-zCDP (000 §7.2)."""
    return epsilon_em * epsilon_em / 8.0


def zcdp_delta(rho: float, epsilon: float) -> float:
    """The δ at which ρ-zCDP implies (ε, δ)-DP, by the optimal conversion of Canonne, Kamath &
    Steinke 2020 (Corollary 13): δ = inf_{α>1} exp((α−1)(αρ−ε))/(α−1) · (1 − 1/α)^α.

    Tighter than ρ + 2√(ρ log(1/δ)); minimised over α numerically in log space.
    """
    from scipy.optimize import minimize_scalar

    if rho <= 0:
        return 0.0

    def log_delta(log_a1: float) -> float:
        a1 = math.exp(log_a1)  # α − 1, kept in log form so α → 1 stays finite
        a = 1.0 + a1
        return a1 * (a * rho - epsilon) - log_a1 + a * (log_a1 - math.log(a))

    # the leading term's optimum is near α = (ε + ρ)/(2ρ); search log(α − 1) around it
    guess = math.log(max(1e-9, (epsilon + rho) / (2.0 * rho) - 1.0))
    result = minimize_scalar(log_delta, bounds=(guess - 25.0, guess + 25.0), method="bounded",
                             options={"xatol": 1e-10})
    best = min(float(result.fun), log_delta(guess))
    return min(1.0, math.exp(best))


def sigma_for_zcdp(epsilon: float, delta: float, sensitivity: float) -> float:
    """Smallest σ whose ρ = Δ2²/(2σ²) converts (:func:`zcdp_delta`) to (ε, δ)-DP.

    The multivariate discrete Gaussian is exactly ρ-zCDP (CKS 2020 Theorem 14), so this σ
    makes a vector release of exact discrete Gaussian noise (ε, δ)-DP with a proof, where
    the single-coordinate CKS Theorem 7 calibration does not apply.
    """
    from scipy.optimize import brentq

    def excess(log_sigma: float) -> float:
        rho = sensitivity**2 / (2.0 * math.exp(2.0 * log_sigma))
        return math.log(max(zcdp_delta(rho, epsilon), 1e-300)) - math.log(delta)

    lo, hi = math.log(sensitivity) - 5.0, math.log(sensitivity) + 5.0
    while excess(hi) > 0:
        hi += 5.0
    while excess(lo) < 0:
        lo -= 5.0
    return math.exp(brentq(excess, lo, hi, xtol=1e-12)) * (1.0 + 1e-9)  # round up: never below
