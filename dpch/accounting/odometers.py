"""Advanced composition for adaptively chosen parameters: the filter bound and the odometers
of Rogers, Roth, Ullman & Vadhan (Rogers et al. 2016, "001";
docs/algorithms.md B3, B4, B5).

Every function takes the per-round ε_i of *pure* ε_i-DP rounds (Lemma 3.3 handles δ_i > 0 by
doubling every ε_i, see :func:`lemma_3_3_epsilons`). The fixed-parameter Thm 2.10 is never
used: it is invalid when the ε_i are chosen adaptively (B1).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

#: log(110·e), the constant of Thm 6.5 branch (11)
LOG_110E = math.log(110.0 * math.e)


def _check_delta(delta_g: float) -> float:
    if not 0.0 < delta_g < 1.0 / math.e:
        raise ValueError(f"δg must be in (0, 1/e), got {delta_g!r}")
    # −log δg, not log(1/δg): below ~5.6e-309 the quotient overflows to inf, and x = εg²/(28.04·inf) = 0
    # made Thm 5.1's K a ZeroDivisionError for an accepted δg
    return -math.log(delta_g)


def _drift(epsilons: Iterable[float]) -> float:
    """Σ ε_j (e^{ε_j} − 1)/2, the expectation term shared by every bound here."""
    return math.fsum(drift_term(e) for e in epsilons)


def filter_x(epsilon_g: float, delta_g: float) -> float:
    """Thm 5.1's constant x = εg² / (28.04 · log(1/δg)), fixed before any query (B3)."""
    return epsilon_g * epsilon_g / (28.04 * _check_delta(delta_g))


def filter_k(epsilons: Sequence[float], epsilon_g: float, delta_g: float) -> float:
    """Thm 5.1's K for the rounds so far *including the proposed one*; HALT if K > εg (B3).

    K = Σ ε_j(e^{ε_j}−1)/2 + √( 2(S + x)(1 + ½ log(S/x + 1)) log(1/δg) ), S = Σ ε_j².
    """
    return filter_k_of_sums(math.fsum(e * e for e in epsilons), _drift(epsilons), epsilon_g, delta_g)


def filter_k_of_sums(squares: float, drift: float, epsilon_g: float, delta_g: float) -> float:
    """:func:`filter_k` from the rounds' sums: ``squares`` = Σ ε_j², ``drift`` = Σ ε_j(e^{ε_j}−1)/2
    (what a running tally keeps, so admission costs the same at any history)."""
    log_inv = _check_delta(delta_g)
    x = filter_x(epsilon_g, delta_g)
    s = squares
    return drift + math.sqrt(2.0 * (s + x) * (1.0 + 0.5 * math.log(s / x + 1.0)) * log_inv)


def odometer_lemma_6_4(epsilons: Sequence[float], x: float, delta_g: float) -> float:
    """Lemma 6.4 odometer for a fixed x > 0 (B4): the same form as K with log(2/δg)."""
    _check_delta(delta_g)
    if not x > 0:  # `not >`: a NaN x gave a NaN odometer
        raise ValueError("x must be positive")
    s = math.fsum(e * e for e in epsilons)
    return _drift(epsilons) + math.sqrt(
        2.0 * (s + x) * (1.0 + 0.5 * math.log(s / x + 1.0)) * math.log(2.0 / delta_g)
    )


def odometer_thm_6_5(epsilons: Sequence[float], n: float, delta_g: float) -> float:
    """Thm 6.5 odometer with public n (B4), valid at every round simultaneously.

    Branch (11) when S ∈ [1/n², 1]; branch (12) otherwise, with the statement's
    4·log₂(n) (the proof derives 2; 4 is the more conservative choice).
    """
    return odometer_thm_6_5_of_sums(math.fsum(e * e for e in epsilons), _drift(epsilons), n, delta_g)


def odometer_thm_6_5_of_sums(squares: float, drift: float, n: float, delta_g: float) -> float:
    """:func:`odometer_thm_6_5` from the rounds' sums Σ ε_j² and Σ ε_j(e^{ε_j}−1)/2."""
    _check_delta(delta_g)
    if not n > math.e:  # `not >`: a NaN n gave a NaN odometer
        raise ValueError("n must exceed e (log log n > 0)")
    s = squares
    if 1.0 / (n * n) <= s <= 1.0:
        return drift + math.sqrt(2.0 * s * (LOG_110E + 2.0 * math.log(math.log(n) / delta_g)))
    return drift + math.sqrt(
        2.0 * (1.0 / (n * n) + s) * (1.0 + 0.5 * math.log1p(n * n * s)) * math.log(4.0 * math.log2(n) / delta_g)
    )


def basic_odometer(epsilons: Sequence[float]) -> float:
    """Σ ε_i: the deterministic odometer of basic composition (Thm 3.4)."""
    return math.fsum(epsilons)


def odometer(epsilons: Sequence[float], n: float, delta_g: float) -> float:
    """min(basic, Thm 6.5): valid because the basic bound holds with probability 1 (B4)."""
    return min(basic_odometer(epsilons), odometer_thm_6_5(epsilons, n, delta_g))


def drift_term(epsilon: float) -> float:
    """One round's ε(e^ε − 1)/2 (the term :func:`filter_k` and the odometers sum)."""
    return epsilon * math.expm1(epsilon) / 2.0


def lemma_3_3_term(epsilon: float, delta: float) -> float:
    """One round's term of :func:`lemma_3_3_delta`: 2δ/(ε e^ε), 0 if δ = 0, infinite if ε = 0 < δ."""
    if delta <= 0:
        return 0.0
    if epsilon <= 0:
        return math.inf
    return 2.0 * delta / (epsilon * math.exp(epsilon))


def lemma_3_3_delta(epsilons: Sequence[float], deltas: Sequence[float]) -> float:
    """Σ 2δ_i/(ε_i e^{ε_i}) of Lemma 3.3 (B5); infinite if some round has ε_i = 0 < δ_i."""
    total = []
    for e, d in zip(epsilons, deltas, strict=True):
        if d <= 0:
            continue
        if e <= 0:
            return math.inf
        total.append(2.0 * d / (e * math.exp(e)))
    return math.fsum(total)


def lemma_3_3_epsilons(epsilons: Sequence[float]) -> list[float]:
    """Lemma 3.3 applies the pure filter to (2ε_1, 2ε_2, …): every ε_i is doubled (B5)."""
    return [2.0 * e for e in epsilons]
