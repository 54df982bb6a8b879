"""Conversions between privacy definitions, one named function per published result.

Float-level formulas; :mod:`dpch.privacy.cost` lifts them to typed costs. Sources (the
bibliography of docs/algorithms.md):

- ε-DP ⇒ (ε²/2)-zCDP: Bun & Steinke 2016, Prop 1.4.
- (ε, δ)-DP ⇒ δ-approximate (ε²/2)-zCDP: Rogers et al. 2023, Lemma 2.3.
- ρ-zCDP ⇒ (ρ + 2√(ρ·log(1/δ)), δ)-DP: Bun & Steinke 2016, Prop 1.3; for δ-approximate ρ-zCDP
  the δ's add (Rogers et al. 2023, Lemma 2.3). Rogers et al. 2023, Thm 6 *prints*
  ρ + 2√(2ρ·log(1/δ'')); its proof matches the form above. docs/algorithms.md A4 asks for the printed
  (more conservative) form where Thm 6 is used, so the functions take ``printed_theorem_6``.
- ρ-zCDP ⇒ (ε, δ(ρ, ε))-DP, the optimal conversion: Canonne, Kamath & Steinke 2020, Cor 13.
- N(0, σ²) noise on a query of ℓ2 sensitivity Δ2 is Δ2²/(2σ²)-zCDP: Bun & Steinke 2016, Prop 1.6.
- The exponential mechanism at ε is ε-bounded range, hence ε²/8-zCDP: Cesar & Rogers 2021
  (bounded range ⇒ zCDP), as used in Rogers et al. 2023, §7.2.
"""

from __future__ import annotations

import math


def _log_inv(delta: float) -> float:
    """log(1/δ) for δ in (0, 1), written −log δ: 1/δ overflows to inf for a subnormal δ (below
    ~5.6e-309), which the guard admits, and log(inf) would make ρ_max a NaN."""
    if not 0.0 < delta < 1.0:
        raise ValueError(f"delta must be in (0, 1), got {delta!r}")
    return -math.log(delta)


def pure_dp_to_zcdp_rho(epsilon: float) -> float:
    """ε-DP ⇒ (ε²/2)-zCDP (Bun & Steinke 2016, Prop 1.4)."""
    if epsilon < 0:
        raise ValueError("epsilon must be non-negative")
    return epsilon * epsilon / 2.0


def approx_dp_to_zcdp_rho(epsilon: float) -> float:
    """(ε, δ)-DP ⇒ δ-approximate (ε²/2)-zCDP (Rogers et al. 2023, Lemma 2.3); the δ carries over."""
    if epsilon < 0:
        raise ValueError("epsilon must be non-negative")
    return epsilon * epsilon / 2.0


def zcdp_to_dp_epsilon(rho: float, delta: float, *, printed_theorem_6: bool = False) -> float:
    """ε such that ρ-zCDP ⇒ (ε, δ)-DP: ρ + 2√(ρ·log(1/δ)) (Bun & Steinke 2016, Prop 1.3), or the
    form printed in Rogers et al. 2023, Thm 6, ρ + 2√(2ρ·log(1/δ)), when ``printed_theorem_6``."""
    if rho < 0:
        raise ValueError("rho must be non-negative")
    factor = 2.0 if printed_theorem_6 else 1.0
    return rho + 2.0 * math.sqrt(factor * rho * _log_inv(delta))


def rho_max(epsilon: float, delta: float, *, printed_theorem_6: bool = False) -> float:
    """Largest ρ with :func:`zcdp_to_dp_epsilon`(ρ, δ) ≤ ε (docs/algorithms.md A4, [derived]): the ρ
    budget of the zCDP filter of Rogers et al. 2023, Thm 2.

    Solving ρ + 2√(cρL) = ε for √ρ: √ρ = √(cL + ε) − √(cL), with L = log(1/δ) and c = 1
    (or 2 for Thm 6's printed form).
    """
    if epsilon < 0:
        raise ValueError("epsilon must be non-negative")
    cl = (2.0 if printed_theorem_6 else 1.0) * _log_inv(delta)
    return (math.sqrt(cl + epsilon) - math.sqrt(cl)) ** 2


def gaussian_rho(sigma: float, sensitivity: float) -> float:
    """ρ = Δ2²/(2σ²) of N(0, σ²) noise on a query of ℓ2 sensitivity Δ2 (Bun & Steinke 2016,
    Prop 1.6; the discrete Gaussian has the same ρ, Canonne, Kamath & Steinke 2020, Thm 4 and 14)."""
    if not sigma > 0:
        raise ValueError("sigma must be positive")
    return sensitivity**2 / (2.0 * sigma**2)


def exponential_mechanism_rho(epsilon_em: float) -> float:
    """The exponential mechanism at ε_EM is ε_EM-bounded range, hence ε_EM²/8-zCDP (Cesar & Rogers
    2021; Rogers et al. 2023, §7.2)."""
    if epsilon_em < 0:
        raise ValueError("epsilon must be non-negative")
    return epsilon_em * epsilon_em / 8.0


def zcdp_delta(rho: float, epsilon: float) -> float:
    """The δ at which ρ-zCDP implies (ε, δ)-DP, by the optimal conversion of Canonne, Kamath &
    Steinke 2020, Cor 13: δ = inf_{α>1} exp((α−1)(αρ−ε))/(α−1) · (1 − 1/α)^α.

    Tighter than :func:`zcdp_to_dp_epsilon`; minimised over α numerically in log space.
    """
    # start-up: scipy.optimize takes 0.1–0.5 s to import; load it when a root or minimum is first needed
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
