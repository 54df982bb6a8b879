"""zCDP calibration of the vector discrete Gaussian, and the zCDP conversions the filters use.

The conversions live in :mod:`dpch.privacy.conversions`, each with its lemma (Bun & Steinke 2016,
Prop 1.3 and 1.4; Rogers et al. 2023, Lemma 2.3 and Thm 6; Canonne, Kamath & Steinke 2020, Cor 13;
Cesar & Rogers 2021); they are re-exported here for the modules that import them from this one.
"""

from __future__ import annotations

import math

from dpch.privacy.conversions import (
    approx_dp_to_zcdp_rho,
    exponential_mechanism_rho,
    rho_max,
    zcdp_delta,
    zcdp_to_dp_epsilon,
)

__all__ = ["dp_to_zcdp_rho", "exponential_mechanism_rho", "rho_max", "sigma_for_zcdp", "zcdp_delta",
           "zcdp_to_dp_epsilon"]


def dp_to_zcdp_rho(epsilon: float) -> float:
    """(ε, δ)-DP ⇒ δ-approximate (ε²/2)-zCDP (Rogers et al. 2023, Lemma 2.3)."""
    return approx_dp_to_zcdp_rho(epsilon)


def sigma_for_zcdp(epsilon: float, delta: float, sensitivity: float) -> float:
    """Smallest σ whose ρ = Δ2²/(2σ²) converts (:func:`zcdp_delta`) to (ε, δ)-DP.

    The multivariate discrete Gaussian is exactly ρ-zCDP (CKS 2020 Theorem 14), so this σ
    makes a vector release of exact discrete Gaussian noise (ε, δ)-DP with a proof, where
    the single-coordinate CKS Theorem 7 calibration does not apply.
    """
    # start-up: scipy.optimize takes 0.1–0.5 s to import; load it when a root or minimum is first needed
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
