"""The independent cost check (docs/design.md rule 7; issue 24 item 7).

The charge of a release is built by :mod:`dpch.privacy.cost` (each mechanism's typed cost, then
``compose``). A check that recomposed it with the same ``compose`` would pass a wrong ``compose``. So
this module recomputes every mechanism's cost **from the noise it will actually draw** — σ, a Laplace
scale, the exponential mechanism's coefficient, a threshold, a grid of times — and its sensitivity,
with formulas written here from the papers, and composes them with its own sums. It imports neither
:mod:`dpch.privacy.cost`'s ``compose`` and conversions nor :mod:`dpch.privacy.conversions`, nor the
mechanisms' own cost formulas (:mod:`dpch.mechanisms.selection_bounds`, :mod:`dpch.mechanisms.calibration`,
:mod:`dpch.mechanisms.boundaries`): its integrals use a different quadrature (adaptive, around the
mode) from theirs (Simpson on a grid). The charge must equal the recomputed composition in every
view a filter reads — ε and δ (basic composition), ρ and the δ of its approximate parts (zCDP
composition) — to float tolerance; else the release is refused before anything is charged
(:class:`~dpch.errors.CostCheckFailed`).

Each mechanism's term (ε, δ, ρ, ρ_δ):

- **Laplace** f + Lap(b), ℓ1 sensitivity Δ1: ε = Δ1/b (Dwork, McSherry, Nissim & Smith 2006, Prop 1;
  the discrete Laplace at an integer shift, Canonne, Kamath & Steinke 2020, §2.2), ρ = ε²/2 (pure ε-DP
  is ε²/2-zCDP, Bun & Steinke 2016, Prop 1.4).
- **Gaussian** N(0, σ²), ℓ2 sensitivity Δ2: ρ = Δ2²/(2σ²) (Bun & Steinke 2016, Prop 1.6; the discrete
  Gaussian likewise, Canonne, Kamath & Steinke 2020, Thm 4 and 14). Its (ε, δ) claim must hold at the
  σ drawn: Balle & Wang 2018, Thm 8 gives the exact δ(ε) of the continuous Gaussian, and every σ dpch
  draws is at least the continuous one for (ε, δ) (integer and vector calibrations take the larger of
  several), so δ(ε) ≤ δ is required; ε is then the claimed one (a charge may exceed what the noise
  needs, never fall short of it).
- **Exponential mechanism** (quantiles, top-k rounds) picking with probability ∝ exp(c·u): ε = 2Δ·c,
  or Δ·c for monotone utilities (McSherry & Talwar 2007, Thm 6; Dwork & Roth 2014, Thm 3.10 and the
  remark on monotone utilities in §3.4); ρ = ε²/8 (ε-bounded range, Cesar & Rogers 2021, Lemma 3.2 with
  Durfee & Rogers 2019's bounded-range definition).
- **Laplace partition selection** (a key released iff its count of units + discrete Laplace of scale
  b exceeds τ): ε = G/b for the G keys a unit touches (the Laplace mechanism on the vector of unit
  counts, ℓ1 sensitivity G); δ ≥ G·P(Z > τ − 1) with P(Z > k) = p^{k+1}/(1 + p), p = e^{−1/b} (the
  discrete Laplace tail, Canonne, Kamath & Steinke 2020, Def 2 summed; the union bound over the ≤ G keys
  of the added unit alone, Korolova et al. 2009 / Wilson et al. 2020, §3); zCDP view (ε²/2, δ)
  (Rogers et al. 2023, Lemma 2.3: (ε, δ)-DP ⇒ δ-approximate ε²/2-zCDP).
- **Gaussian report noisy max** over d scores clamped to a range of width c, Δ each: Lebensold et al.
  2024, Thm 8 (= Thm 12), with the logarithm the printed ratio omits (docs/algorithms.md B7):
  ε = log E[Φ(z − (c − 2Δ)/σ)^{d−1}] − log E[Φ(z − c/σ)^{d−1}], z ~ N(0, 1); the claimed ε must be at
  least that (one-sided, as for the Gaussian); ρ = ε²/2 of the claimed ε (Prop 1.4).
- **Gaussian Above Threshold** (a watch's instance): ε_max at δ_j from the RDP bound of Lebensold et al.
  2024, Thm 7, converted by the tail of the privacy loss (Mironov 2017, Prop 3: RDP at order α gives
  P[L > ε(α) + log(1/δ)/(α − 1)] ≤ δ), minimised over α numerically here; ε_post(t) of a ⊤ at t from
  Thm 17 (the −σ_X·x of Thm 17, not Thm 10's printed +x; docs/algorithms.md B8).
- **Brownian noise reduction** stopped at time t: ex-post ψ(t) of the mixture boundary (Whitehouse et
  al. 2022, Thm 3.6 and Cor 3.7), ρ = Δ2²/(2t) (Rogers et al. 2023, Thm 6: a Brownian run stopped at t
  costs what a Gaussian of variance t costs); with ReducedAboveThreshold 2ψ(t) (Whitehouse et al. 2022,
  Cor 5.2). **Laplace noise reduction** stopped at scale b: ε = Δ1/b (Whitehouse et al. 2022, Prop 4.2).

Composition: ε's add and δ's add (basic composition, Dwork et al. 2006; Dwork & Roth 2014, Thm 3.16);
ρ's add and the δ's of δ-approximate zCDP parts add (Bun & Steinke 2016, Lemma 1.7; Rogers et al. 2023,
Lemma 2.4). Sums are ``math.fsum``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np

from dpch.accounting.watches import WatchEvent, WatchParams
from dpch.accuracy.planner import AccuracyPlan
from dpch.errors import CostCheckFailed
from dpch.mechanisms.exponential import ExponentialMechanism
from dpch.mechanisms.gaussian import GaussianMechanism
from dpch.mechanisms.laplace import LaplaceMechanism
from dpch.mechanisms.partition_selection import LaplacePartitionSelection
from dpch.mechanisms.selection import GaussianReportNoisyMax
from dpch.privacy.cost import PrivacyCost

#: relative tolerance of sums and closed forms (the ε shares are ε/parts, summed back)
FLOAT_TOL = 1e-9
#: noise parameters are rounded *up* to a samplable rational (relative change < 2^-20,
#: :func:`dpch.mechanisms.exact.rational_at_least`): the ε they give may be that much smaller
SAMPLER_TOL = 2.0**-19
#: two quadratures of the same integral (theirs: Simpson on a grid; ours: adaptive around the mode)
NUMERIC_TOL = 1e-7


@dataclass(frozen=True)
class Term:
    """One mechanism's cost, recomputed: (ε, δ)-DP, and δ-approximate ρ-zCDP with δ = ``rho_delta``
    (``rho`` None: the release has no zCDP view of its own, and its record must carry none).
    ``tol``: the relative tolerance the charge is compared with."""

    what: str
    epsilon: float
    delta: float
    rho: float | None
    rho_delta: float = 0.0
    tol: float = FLOAT_TOL


def compose_terms(terms: Sequence[Term]) -> Term:
    """Basic composition of (ε, δ) and zCDP composition of (ρ, ρ_δ): each parameter sums
    (Dwork & Roth 2014, Thm 3.16; Bun & Steinke 2016, Lemma 1.7; Rogers et al. 2023, Lemma 2.4).
    Every term of a fixed-cost release has a ρ (its own, or its (ε, δ)'s ε²/2)."""
    rhos = [t.rho for t in terms]
    if any(r is None for r in rhos):
        raise CostCheckFailed("a fixed-cost release composes a part without a zCDP view")
    return Term("composition of " + (", ".join(t.what for t in terms) or "nothing"),
                math.fsum(t.epsilon for t in terms), math.fsum(t.delta for t in terms),
                math.fsum(r for r in rhos if r is not None), math.fsum(t.rho_delta for t in terms),
                max((t.tol for t in terms), default=FLOAT_TOL))


# -- numerics written for this check -----------------------------------------------------------------


def _log_cdf(u: float) -> float:
    """log Φ(u), accurate far in the left tail."""
    # start-up: scipy.special loads with scipy; only a check of Gaussian noise needs it
    from scipy.special import log_ndtr

    return float(log_ndtr(u))


def _mills(u: float) -> float:
    """φ(u)/Φ(u), the derivative of log Φ at u. Far in the left tail it is −u (1 + O(1/u²)) (Mills'
    ratio; the exact form would overflow computing u² for scores of 1e300)."""
    if u < -1e8:
        return -u
    return math.exp(-0.5 * u * u - 0.5 * math.log(2.0 * math.pi) - _log_cdf(u))


def _log_normal_expectation(factors: Sequence[tuple[float, float, float]]) -> float:
    """log E_{z~N(0,1)}[Π_i Φ(a_i·z + b_i)^{k_i}] for ``factors`` (k_i, a_i, b_i), k_i ≥ 0, up to the
    additive constant −log √(2π) (every use is a difference of two of these).

    The log-integrand h(z) = −z²/2 + Σ k_i log Φ(a_i z + b_i) is concave with h'' ≤ −1 (log Φ is
    concave), so it has one mode m and exp(h − h(m)) ≤ exp(−(z − m)²/2): the mode is the root of h'
    (bracketed, then Brent), and the integral over m ± 40 by adaptive quadrature around m misses
    less than e^{-800} of the mass.
    """
    try:
        return _log_expectation(factors)
    except (ArithmeticError, ValueError):  # fail closed, in words: a charge this check cannot compute is refused
        raise CostCheckFailed("the cost of this selection cannot be checked numerically (its score range is too "
                              "wide for its noise)") from None


def _log_expectation(factors: Sequence[tuple[float, float, float]]) -> float:
    # start-up: scipy.integrate/optimize load sparse and linalg; only a check of a selection mechanism needs them
    from scipy.integrate import quad
    from scipy.optimize import brentq

    def h(z: float) -> float:
        return -0.5 * z * z + sum(k * _log_cdf(a * z + b) for k, a, b in factors if k)

    def slope(z: float) -> float:
        return -z + sum(k * a * _mills(a * z + b) for k, a, b in factors if k)

    # a bracket of the mode: any start, grown until h' changes sign (not mutated: the start, the growth and the
    # iteration limits only change how fast the same root and integral are found)
    lo, hi = -1.0, 1.0  # pragma: no mutate
    while slope(lo) <= 0:  # pragma: no mutate
        lo *= 2.0  # pragma: no mutate
    while slope(hi) >= 0:  # pragma: no mutate
        hi *= 2.0  # pragma: no mutate
    mode = float(brentq(slope, lo, hi, xtol=1e-13, rtol=1e-13, maxiter=500))  # pragma: no mutate
    top = h(mode)
    area, _ = quad(lambda z: math.exp(h(z) - top), mode - 40.0, mode + 40.0, points=[mode],
                   limit=400, epsabs=0.0, epsrel=1e-12)  # pragma: no mutate
    return top + math.log(area)


def gaussian_delta(epsilon: float, sigma: float, sensitivity: float) -> float:
    """The exact δ(ε) of N(0, σ²) noise at an ℓ2 shift Δ (Balle & Wang 2018, Thm 8):
    Φ(μ/2 − ε/μ) − e^ε·Φ(−μ/2 − ε/μ), μ = Δ/σ; as exp(log Φ(·))·(1 − e^{ε + log Φ(·) − log Φ(·)})."""
    mu = sensitivity / sigma
    first = _log_cdf(mu / 2.0 - epsilon / mu)
    second = epsilon + _log_cdf(-mu / 2.0 - epsilon / mu)
    return max(0.0, math.exp(first) * -math.expm1(second - first))  # ≥ 0 up to rounding


def gaussian_epsilon(sigma: float, delta: float, sensitivity: float) -> float:
    """The smallest ε with :func:`gaussian_delta` ≤ δ, by bisection (δ(ε) decreases in ε)."""
    if gaussian_delta(0.0, sigma, sensitivity) <= delta:  # pragma: no mutate (< only differs at δ(0) = δ exactly)
        return 0.0
    lo, hi = 0.0, 1.0  # pragma: no mutate (a bracket's start; grown below)
    while gaussian_delta(hi, sigma, sensitivity) > delta:  # pragma: no mutate (≥: differs at δ(hi) = δ only)
        lo, hi = hi, 2.0 * hi  # pragma: no mutate (the bracket's growth)
    while hi - lo > 1e-13 * hi:  # pragma: no mutate (the bisection's precision, far below NUMERIC_TOL)
        mid = 0.5 * (lo + hi)
        # not mutated: < moves the boundary only where δ(mid) = δ exactly
        lo, hi = (lo, mid) if gaussian_delta(mid, sigma, sensitivity) <= delta else (mid, hi)  # pragma: no mutate
    return hi


#: beyond this c/σ, Thm 8's ε is computed from the integrals' asymptotic form (the exact form's terms
#: reach c²/σ², which overflows for the score ranges an analyst may declare, e.g. 1e300)
ASYMPTOTIC_RANGE = 1e5


@lru_cache(maxsize=4096)
def report_noisy_max_epsilon(width: float, sensitivity: float, sigma: float, d: int) -> float:
    """Lebensold et al. 2024, Thm 8 (= Thm 12), with the log (docs/algorithms.md B7): d scores in a
    range of width c, each moved by at most Δ, N(0, σ²) noise.

    For c/σ beyond :data:`ASYMPTOTIC_RANGE` the two integrals E[Φ(z + b)^k] (b = −(c − 2Δ)/σ and −c/σ)
    are taken in their asymptotic form: with log Φ(u) = −u²/2 − log(−u) − ½ log 2π + O(1/u²), Laplace's
    method gives log E[Φ(z + b)^k] = −k b²/(2(k + 1)) − k log(−b) + const + O(1/b²), so
    ε = (2k/(k + 1))·(Δ/σ)·((c − Δ)/σ) − k·log(1 − 2Δ/c), to a relative error far below the check's."""
    k = float(d - 1)
    if width / sigma > ASYMPTOTIC_RANGE:
        return (2.0 * k / (k + 1.0)) * (sensitivity / sigma) * ((width - sensitivity) / sigma) \
            - k * math.log1p(-2.0 * sensitivity / width)
    num = _log_normal_expectation([(k, 1.0, -(width - 2.0 * sensitivity) / sigma)])
    den = _log_normal_expectation([(k, 1.0, -width / sigma)])
    return num - den


@lru_cache(maxsize=4096)
def above_threshold_epsilon_post(t: int, sensitivity: float, sigma_x: float, sigma_z: float, threshold: float,
                                 lower: float, upper: float) -> float:
    """Lebensold et al. 2024, Thm 17 (docs/algorithms.md B8): ε_post(t) = log N_Δ − log N_0 with
    N_ξ = E_x[Φ((σ_X x + ρ − b + ξ)/σ_Z)^{t−1}·Φ((−σ_X x − ρ + a + ξ)/σ_Z)], x ~ N(0, 1)."""

    def log_n(xi: float) -> float:
        return _log_normal_expectation([(float(t - 1), sigma_x / sigma_z, (threshold - upper + xi) / sigma_z),
                                        (1.0, -sigma_x / sigma_z, (lower - threshold + xi) / sigma_z)])

    return log_n(sensitivity) - log_n(0.0)


@lru_cache(maxsize=4096)
def above_threshold_epsilon_max(sensitivity: float, sigma_x: float, sigma_z: float, threshold: float,
                                delta: float) -> float:
    """Lebensold et al. 2024, Thm 7: Above Threshold (σ_Z ≥ √3σ_X, ρ ≥ 0, non-negative Δ-sensitive
    queries) is (α, αA + L/(2(α − 1)))-RDP with A = Δ²/σ_X² + 2Δ²/σ_Z² and
    L = log(1 + 2√3π(1 + 9r)e^r), r = ρ²/σ_X². The loss exceeds ε(α) + log(1/δ)/(α − 1) with
    probability ≤ δ (Mironov 2017, Prop 3's proof, Markov's inequality on e^{(α−1)L}); minimised
    here over α > 1 numerically."""
    # start-up: as above, scipy.optimize loads only when a watch is checked
    from scipy.optimize import minimize_scalar

    big_a = sensitivity**2 / sigma_x**2 + 2.0 * sensitivity**2 / sigma_z**2
    r = threshold**2 / sigma_x**2
    big_l = float(np.logaddexp(0.0, math.log(2.0 * math.sqrt(3.0) * math.pi * (1.0 + 9.0 * r)) + r))
    tail = big_l / 2.0 + math.log(1.0 / delta)

    def bound(log_excess: float) -> float:  # α = 1 + e^{log_excess}
        excess = math.exp(log_excess)
        return (1.0 + excess) * big_a + tail / excess

    # the optimum is at α* − 1 = √(B/A): searched around it in log space (not mutated: the guess and the
    # window only help the search find the one minimum of a convex function)
    guess = 0.5 * math.log(tail / big_a)  # pragma: no mutate
    best = minimize_scalar(bound, bounds=(guess - 20.0, guess + 20.0), method="bounded",  # pragma: no mutate
                           options={"xatol": 1e-12})  # pragma: no mutate
    return min(float(best.fun), bound(guess))


def mixture_boundary(t: np.ndarray, sensitivity: float, rho: float, delta: float) -> np.ndarray:
    """Whitehouse et al. 2022, Thm 3.6: ψ^M_ρ(t) = Δ²/(2t) + (Δ/t)·√(2(t + ρ)·log(√((t + ρ)/ρ)/δ))."""
    t = np.asarray(t, dtype=float)
    out: np.ndarray = sensitivity**2 / (2.0 * t) + (sensitivity / t) * np.sqrt(
        2.0 * (t + rho) * np.log(np.sqrt((t + rho) / rho) / delta))
    return out


# -- one term per mechanism ----------------------------------------------------------------------------


def _laplace(mech: LaplaceMechanism) -> Term:
    # a query of sensitivity 0 is data-independent: any ε is valid for it, and no noise is drawn
    eps = mech.sensitivity / mech.scale if mech.sensitivity > 0 else mech.epsilon
    return Term(f"Laplace (scale {mech.scale:.6g}, Δ1 {mech.sensitivity:g})", eps, 0.0, eps * eps / 2.0)


def _gaussian(mech: GaussianMechanism, problems: list[str]) -> Term:
    what = f"Gaussian (σ {mech.sigma:.6g}, Δ2 {mech.sensitivity:g})"
    if mech.sensitivity == 0:
        return Term(what, mech.epsilon, mech.delta, 0.0)
    delta_at = gaussian_delta(mech.epsilon, mech.sigma, mech.sensitivity)
    if delta_at > mech.delta * (1 + FLOAT_TOL):
        problems.append(f"{what} is not (ε {mech.epsilon:.6g}, δ {mech.delta:.3g})-DP: its δ at that ε is "
                        f"{delta_at:.3g} (Balle & Wang 2018, Thm 8)")
    return Term(what, mech.epsilon, mech.delta, mech.sensitivity**2 / (2.0 * mech.sigma**2))


def _exponential(mech: ExponentialMechanism) -> Term:
    coefficient = float(np.diff(mech.logits(np.array([0.0, 1.0])))[0])  # the logits' slope in the utility
    eps = (1.0 if mech.monotonic else 2.0) * mech.sensitivity * coefficient
    return Term(f"exponential mechanism (coefficient {coefficient:.6g}, Δ {mech.sensitivity:g})", eps, 0.0,
                eps * eps / 8.0)


def _partition_selection(sel: LaplacePartitionSelection, problems: list[str]) -> Term:
    scale, keys = float(sel.scale), sel.max_partitions
    eps = keys / scale
    p = math.exp(-1.0 / scale)

    def released(threshold: float) -> float:
        """P(a key of the added unit alone is released) over its ≤ G keys: G·P(Z > τ − 1) = G·p^τ/(1 + p)."""
        return float(keys * p**threshold / (1.0 + p))

    # the threshold is the smallest integer τ ≥ 1 with that probability ≤ δ: solved here by its logarithm
    # a first guess, not mutated: the two loops after it move it to the smallest τ whatever it is
    if p == 0.0:  # exp(−1/scale) underflows (ε past ~745 per key): no key of the unit alone passes any τ ≥ 1
        lowest = 1
    else:
        lowest = max(1, math.ceil(math.log(sel.delta * (1.0 + p) / keys) / math.log(p)))  # pragma: no mutate
    while lowest > 1 and released(lowest - 1) <= sel.delta:  # pragma: no mutate (see the first guess)
        lowest -= 1  # pragma: no mutate (an overshoot is undone by the loop below)
    while released(lowest) > sel.delta:
        lowest += 1  # pragma: no mutate (the guess above is never below the root: this loop never runs)
    what = f"partition selection (scale {scale:.6g}, threshold {sel.threshold:g}, {keys} keys per unit)"
    if released(sel.threshold) > sel.delta * (1 + FLOAT_TOL):
        problems.append(f"{what} releases a key of one unit with probability {released(sel.threshold):.3g} > its "
                        f"δ {sel.delta:.3g}")
    elif sel.threshold != lowest:
        problems.append(f"{what}: the smallest threshold for δ {sel.delta:.3g} is {lowest}")
    if not sel.epsilon * (1 - SAMPLER_TOL) <= eps <= sel.epsilon * (1 + FLOAT_TOL):
        problems.append(f"{what} gives ε {eps:.9g}, not its ε {sel.epsilon:.9g}")
    return Term(what, sel.epsilon, sel.delta, sel.epsilon**2 / 2.0, sel.delta)


def _report_noisy_max(sel: GaussianReportNoisyMax, problems: list[str]) -> Term:
    what = f"Gaussian report noisy max (σ {sel.sigma:.6g}, d {sel.d}, range {sel.upper - sel.lower:g})"
    eps = report_noisy_max_epsilon(sel.upper - sel.lower, sel.sensitivity, sel.sigma, sel.d)
    # two-sided: the claimed ε is Thm 8's at the σ drawn (the mechanism's own quadrature once missed the
    # integrand's mode past c/σ ≈ 60 and over-stated ε; it locates the mode now, so the two agree)
    if abs(sel.epsilon - eps) > eps * NUMERIC_TOL:
        problems.append(f"{what} claims ε {sel.epsilon:.9g}; Lebensold et al. 2024, Thm 8 gives {eps:.9g}")
    return Term(what, sel.epsilon, 0.0, sel.epsilon**2 / 2.0)


def mechanism_terms(mechanisms: Iterable[Any], problems: list[str]) -> list[Term]:
    """One recomputed term per mechanism that will draw noise; a mechanism this check has no formula
    for is a problem (fail closed: a new mechanism cannot be charged unchecked)."""
    terms = []
    for mech in mechanisms:
        if isinstance(mech, LaplaceMechanism):
            terms.append(_laplace(mech))
        elif isinstance(mech, GaussianMechanism):
            terms.append(_gaussian(mech, problems))
        elif isinstance(mech, ExponentialMechanism):
            terms.append(_exponential(mech))
        elif isinstance(mech, LaplacePartitionSelection):
            terms.append(_partition_selection(mech, problems))
        elif isinstance(mech, GaussianReportNoisyMax):
            terms.append(_report_noisy_max(mech, problems))
        else:
            problems.append(f"no independent cost formula for {type(mech).__name__}")
    return terms


def _close(charged: float, expected: float, tol: float) -> bool:
    return abs(charged - expected) <= tol * max(abs(charged), abs(expected)) + 1e-300


def mismatch(charged: PrivacyCost, expected: Term) -> str | None:
    """Why ``charged`` is not ``expected`` in every view a filter reads (None: it is). A record without
    a ρ of its own is read by the zCDP filters as δ-approximate ε²/2-zCDP (Rogers et al. 2023, Lemma
    2.3), so that is its ρ view here; a term without one (an ex-post run with no zCDP view) requires
    a record without one."""
    views = [("ε", charged.epsilon, expected.epsilon), ("δ", charged.delta, expected.delta)]
    if expected.rho is None:
        wrong = [] if charged.rho is None else [f"ρ {charged.rho:.9g} where the release has none"]
    else:
        rho, rho_delta = ((charged.rho, charged.rho_delta) if charged.rho is not None
                          else (charged.epsilon**2 / 2.0, charged.delta))
        views += [("ρ", rho, expected.rho), ("ρ's δ", rho_delta, expected.rho_delta)]
        wrong = []
    wrong += [f"{name} {got:.9g} ≠ {want:.9g}" for name, got, want in views if not _close(got, want, expected.tol)]
    return f"the charge is not the {expected.what}: " + ", ".join(wrong) if wrong else None


def charge_problems(charged: PrivacyCost, mechanisms: Sequence[Any]) -> list[str]:
    """The independent check of a fixed-cost release: ``charged`` must be the composition of the
    recomputed costs of ``mechanisms`` (every mechanism that will draw noise for it)."""
    problems: list[str] = []
    terms = mechanism_terms(mechanisms, problems)
    if charged.ex_post:
        problems.append("a fixed-cost release is charged as an ex-post one")
    wrong = mismatch(charged, compose_terms(terms))
    return problems + ([wrong] if wrong else [])


def require(problems: list[str]) -> None:
    """Refuses (before anything is charged) when the check found a problem."""
    if problems:
        raise CostCheckFailed("; ".join(problems))


# -- watches ------------------------------------------------------------------------------------------


def _instance(params: WatchParams) -> tuple[float, float, float, float]:
    """A watch's instance on its normalised scale [0, 1]: (Δ, σ_X, σ_Z, ρ), σ_Z = √3·σ_X
    (Lebensold et al. 2024's experiments; Thm 7 needs σ_Z ≥ √3·σ_X)."""
    w = params.upper - params.lower
    sigma_x = params.sigma / w
    return params.sensitivity / w, sigma_x, math.sqrt(3.0) * sigma_x, (params.threshold - params.lower) / w


def watch_epsilon_max(params: WatchParams) -> float:
    """ε_max of one of the watch's instances at δ_j = δ/n (Thm 7, above)."""
    sens, sx, sz, rho = _instance(params)
    return above_threshold_epsilon_max(sens, sx, sz, rho, params.delta / params.instances)


def watch_epsilon_post(params: WatchParams, t: int) -> float:
    """ε_post(t) of a ⊤ at position t of one of the watch's instances (Thm 17, above)."""
    sens, sx, sz, rho = _instance(params)
    return above_threshold_epsilon_post(t, sens, sx, sz, rho, 0.0, 1.0)


def watch_reservation_problems(params: WatchParams, worst: PrivacyCost) -> list[str]:
    """A watch reserves its whole (ε, δ) as one ex-post release whose E never exceeds ε — the B9 filter
    opens an instance only while spent + ε_max(δ_j) < ε, and n·δ_j = δ (Lebensold et al. 2024, Alg 2 with
    docs/algorithms.md B9's per-instance δ) — so the reservation is (ε, δ) at worst ε, with no ρ of its
    own; and the ε_max the B9 check uses is Thm 7's."""
    problems = []
    name = f"watch {params.name}"
    if not (worst.ex_post and worst.worst_epsilon is not None and worst.rho is None
            and _close(worst.worst_epsilon, params.epsilon, FLOAT_TOL) and _close(worst.epsilon, params.epsilon,
                                                                                   FLOAT_TOL)
            and _close(worst.delta, params.delta, FLOAT_TOL)):
        problems.append(f"{name}'s reservation {worst} is not an ex-post (ε {params.epsilon:g}, δ {params.delta:g}) "
                        f"release of worst ε {params.epsilon:g}")
    if not _close(params.instance_delta * params.instances, params.delta, FLOAT_TOL):
        problems.append(f"{name} splits δ {params.delta:g} into {params.instances} × {params.instance_delta:.3g}")
    ours = watch_epsilon_max(params)
    if not _close(params.epsilon_max, ours, NUMERIC_TOL):
        problems.append(f"{name}'s ε_max is {params.epsilon_max:.9g}; Thm 7 gives {ours:.9g}")
    return problems


def watch_realized_epsilon(events: Sequence[WatchEvent]) -> float:
    """E of a watch from its rows (docs/watches.md "Accounting"): each instance but the last at the
    ε_post(t) of its ⊤ (t counts the questions of its instance), the last at the smaller of its
    ε_post(t) (if it halted) and its ε_max(δ_j) — Thm 17 and Thm 7 recomputed, not read from the rows."""
    start = max(i for i, ev in enumerate(events) if ev.event == "create")
    instances: list[float | None] = []  # each instance's ε_post, None while it has not halted
    position = 0
    params = events[start].state.params
    for ev in events[start:]:
        if ev.event == "open":
            instances.append(None)
            position = 0
        elif ev.event in ("below", "above"):
            position += 1
            if ev.event == "above":
                instances[-1] = watch_epsilon_post(params, position)
    if not instances:
        return 0.0
    *done, last = instances
    halted = [e for e in done if e is not None]
    if len(halted) != len(done):
        raise CostCheckFailed(f"watch {params.name}: an instance was opened before the previous one halted")
    return math.fsum([*halted, min(last if last is not None else math.inf, watch_epsilon_max(params))])


def watch_settle_problems(events: Sequence[WatchEvent], realized: PrivacyCost) -> list[str]:
    """The settle of a watch's reservation must be its E recomputed from its rows, with the watch's δ,
    and below its ε (the reservation it was admitted on)."""
    params = events[-1].state.params
    ours = watch_realized_epsilon(events)
    problems = []
    if not _close(realized.epsilon, ours, NUMERIC_TOL):
        problems.append(f"watch {params.name} settles at E {realized.epsilon:.9g}; its rows give {ours:.9g}")
    if not (ours < params.epsilon and _close(realized.delta, params.delta, FLOAT_TOL) and realized.ex_post):
        problems.append(f"watch {params.name}'s settle (E {ours:.6g}, δ {realized.delta:g}) is not within its "
                        f"reservation (ε {params.epsilon:g}, δ {params.delta:g})")
    return problems


# -- accuracy-first -----------------------------------------------------------------------------------


def _stack_sensitivities(afplan: AccuracyPlan) -> tuple[float, float]:
    """(ℓ1, ℓ2) sensitivity of the normalized stack: measure j divided by norm_j moves by Δ_j/norm_j."""
    b = afplan.blocks
    l1 = math.fsum(d / n for d, n in zip(b.l1, b.norms, strict=True))
    l2 = math.sqrt(math.fsum((d / n) ** 2 for d, n in zip(b.l2, b.norms, strict=True)))
    return l1, l2


def accuracy_plan_terms(afplan: AccuracyPlan) -> list[tuple[PrivacyCost, Term]]:
    """(charged, recomputed) for every cost the plan can charge: a direct release's one cost, or each
    grid step where a noise-reduction run may stop, the last one being its worst case. Refinements
    (a plan continuing a stopped path: ``base_time``) are not covered."""
    l1, l2 = _stack_sensitivities(afplan)
    if afplan.direct:
        if afplan.kind == "laplace":  # one Laplace release of scale l1/ε
            scale = afplan.scale(0)
            return [(afplan.cost_at(0), Term(f"direct Laplace (scale {scale:.6g}, Δ1 {l1:.6g})", l1 / scale, 0.0,
                                             (l1 / scale) ** 2 / 2.0))]
        sigma = math.sqrt(afplan.scale(0))  # one Gaussian of variance t per normalized coordinate
        return [(afplan.cost_at(0), Term(f"direct Gaussian (σ {sigma:.6g}, Δ2 {l2:.6g})",
                                         gaussian_epsilon(sigma, afplan.delta, l2), afplan.delta,
                                         l2 * l2 / (2.0 * sigma * sigma), tol=NUMERIC_TOL))]
    if afplan.base_time is not None:
        raise CostCheckFailed("the independent cost check does not cover refinements of an accuracy-first answer")
    scales = np.array([afplan.scale(s) for s in range(afplan.points)], dtype=float)
    if afplan.kind == "laplace":
        terms = [Term(f"Laplace noise reduction stopped at scale {b:.6g}", l1 / b, 0.0, None) for b in scales]
    else:
        boundary = afplan.boundary
        if boundary is None:
            raise CostCheckFailed("a Brownian accuracy-first plan has no privacy boundary")
        psi = mixture_boundary(scales, l2, boundary.rho, afplan.delta)
        if afplan.target.stop_rule == "exact":
            terms = [Term(f"Brownian noise reduction with ReducedAboveThreshold stopped at t {t:.6g}", 2.0 * p,
                          afplan.delta, None) for t, p in zip(scales, psi, strict=True)]
        else:
            terms = [Term(f"Brownian noise reduction stopped at t {t:.6g}", float(p), afplan.delta,
                          l2 * l2 / (2.0 * t)) for t, p in zip(scales, psi, strict=True)]
    return [(afplan.cost_at(s), term) for s, term in enumerate(terms)]


def accuracy_plan_problems(afplan: AccuracyPlan) -> list[str]:
    """Every cost an accuracy-first plan can charge — the direct release's, or each step a run may stop
    at — must be the recomputed one; a run's reservation (``worst_cost``) must be its last (least noisy)
    step's, and every step's realized cost must carry that worst case and stay within it."""
    problems = []
    costs = accuracy_plan_terms(afplan)
    for charged, term in costs:
        wrong = mismatch(charged, term)
        if wrong:
            problems.append(wrong)
            break
    last = costs[-1][1]
    worst = afplan.worst_cost
    if afplan.direct:
        if worst.ex_post or worst != costs[0][0]:
            problems.append(f"a direct accuracy-first release reserves {worst}, not its fixed cost")
        return problems
    wrong = mismatch(worst, last)
    if wrong:
        problems.append(f"the reservation: {wrong}")
    for charged, term in costs:
        # zcdp_bm admits a run on its worst ρ (Rogers et al. 2023, Thm 6): it must be the last step's
        worst_rho_ok = (charged.worst_rho is None if last.rho is None
                        else charged.worst_rho is not None and _close(charged.worst_rho, last.rho, term.tol))
        if not (charged.ex_post and charged.worst_epsilon is not None and worst_rho_ok
                and _close(charged.worst_epsilon, last.epsilon, term.tol)
                and charged.epsilon <= last.epsilon * (1 + term.tol)):
            problems.append(f"{term.what}: realized {charged} does not carry, or exceeds, the plan's worst case "
                            f"(ε {last.epsilon:.9g}, ρ {last.rho})")
            break
    return problems
