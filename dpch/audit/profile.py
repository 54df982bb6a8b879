"""The privacy profile δ(ε) of a Gaussian release, estimated from samples on D and D′ and compared
with the curve its calibration claims (issue 16).

Why: an (ε, δ) Gaussian with δ ≈ 1e-6 exceeds its ε only far in the tails, so the pure-ε lower
bound of :mod:`.estimators` reaches about half of the claim and misses a σ 30% too small. The
whole curve says more: the Gaussian calibrated for (ε₀, δ₀) at sensitivity Δ claims, for *every*
ε ≥ 0, the Balle & Wang (2018, Thm 8) profile

    δ(ε) = Φ(μ/2 − ε/μ) − e^ε Φ(−μ/2 − ε/μ),   μ = Δ/σ,

(CKS 2020 Thm 7 for the discrete Gaussian of integer releases), and at small ε that δ is large —
the total variation distance μ·φ(0) ≈ 0.09 at ε 0 for a count at (1, 1e-6) — so it is measurable.

Estimate. For any output set S, P_D(S) − e^ε P_D′(S) ≤ δ(ε) (and with D, D′ swapped: neighbours
are symmetric). Over the half-lines S = {x > t} and {x ≤ t} of one statistic x (for a shifted
Gaussian, the likelihood-ratio sets are exactly such half-lines), with the Dvoretzky–Kiefer–Wolfowitz
inequality (Massart 1990: P(sup_t |F̂_n(t) − F(t)| > λ) ≤ 2e^{−2nλ²}) giving bands of half-width
λ = √(log(4/α)/(2n)) on each side's CDF (α/2 each), the curve

    δ_lb(ε) = max_S [ (P̂_A(S) − λ_A) − e^ε (P̂_B(S) + λ_B) ]⁺   over S and (A, B) ∈ {(D, D′), (D′, D)}

is, with probability ≥ 1 − α, below the true δ(ε) *simultaneously for every ε and every
threshold* (the bands hold uniformly), so the thresholds and the ε grid may be chosen freely.
VIOLATION when δ_lb(ε) > claimed δ(ε) at some ε: a correctly calibrated release is flagged with
probability ≤ α.

Which statistic: with one observed coordinate, that coordinate (all samples). With several, the
statistic (each coordinate, or the linear discriminant) is chosen on the first half of the
samples — the one whose point estimate comes closest to (or furthest over) the claim — and
measured on the second half, as :mod:`.estimators` does.

What it catches: noise smaller than claimed (a wrong σ, a wrong Δ, a missing clamp or cap — any
shift larger than Δ relative to σ), by as little as the sampling slack allows (λ(1 + e^ε) in δ:
about 0.01 at 100 000 trials per side, against 0.04 between a count's claimed profile and that of
σ 30% too small). It tests the release *as a Gaussian of the claimed σ*: a non-Gaussian release
whose (ε₀, δ₀) holds but whose profile crosses the Gaussian's at small ε would be flagged, which is
why only Gaussian releases get this test. It cannot see δ itself (1e-6 needs ~10⁸ trials) nor the
tails of non-Gaussian noise.

Real-valued releases are sampled on a power-of-two grid (:mod:`dpch.mechanisms.grid`): exact
discrete Gaussian noise at least 2^20 times finer than σ, calibrated for the rounded query's
sensitivity (inflated by at most 2^-7). Their curve is the continuous one at the mechanism's σ up to
that inflation — less than 0.001 in δ at ε 0 — far below the sampling slack; the claim uses the
continuous curve.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from dpch.audit.estimators import linear_discriminant
from dpch.mechanisms.calibration import analytic_gaussian_delta
from dpch.mechanisms.discrete import discrete_gaussian_delta
from dpch.mechanisms.gaussian import GaussianMechanism

#: thresholds per statistic (any set is valid: the DKW bands are uniform in the threshold)
_MAX_THRESHOLDS = 4000
#: points of the ε grid
_GRID_POINTS = 121
#: the grid stops where the claimed δ falls below this (beyond it only gross breakage shows)
_GRID_FLOOR = 1e-9


@dataclass(frozen=True)
class ClaimedProfile:
    """The δ(ε) curve a calibrated Gaussian release claims for the worst neighbour.

    ``kind`` "gaussian": Balle & Wang's curve at μ = ‖Δ/σ‖₂ (several measures compose into one μ);
    "discrete gaussian": CKS Thm 7 for N_Z(0, σ²) and the integer shift ``shift``.
    """

    kind: str
    mu: float = 0.0
    sigma: float = 0.0
    shift: int = 0
    #: which neighbours the curve is claimed for
    scope: str = "every neighbour"

    def delta(self, epsilons: Sequence[float] | np.ndarray) -> np.ndarray:
        """Claimed δ at each ε."""
        eps = np.atleast_1d(np.asarray(epsilons, dtype=float))
        if self.kind == "gaussian":
            return np.array([analytic_gaussian_delta(1.0, float(e), self.mu) for e in eps])
        return np.array([discrete_gaussian_delta(float(e), self.sigma, self.shift) for e in eps])

    def epsilon_grid(self, points: int = _GRID_POINTS) -> np.ndarray:
        """0 … the ε where the claimed δ falls below 1e-9 (at most 64), evenly spaced."""
        top = 0.125
        while top < 64 and float(self.delta([top])[0]) > _GRID_FLOOR:
            top *= 2
        return np.linspace(0.0, top, points)

    @property
    def description(self) -> str:
        scope = "" if self.scope == "every neighbour" else f" ({self.scope})"
        if self.kind == "gaussian":
            return f"Gaussian, μ = Δ/σ {self.mu:.4g}{scope}"
        return f"discrete Gaussian, σ {self.sigma:.4g}, shift {self.shift}{scope}"


def claimed_profile(mechanisms: Mapping[str, object], *, other_mechanisms: bool = False,
                    moved: Mapping[str, int] | None = None) -> tuple[ClaimedProfile | None, str]:
    """The claimed profile of a release made of ``mechanisms`` (the noise plan's additive ones, by
    measure), or None and why not. ``other_mechanisms``: quantiles or partition selection are
    released too. ``moved``: how many coordinates of each measure differ between the audited D and
    D′ (fast mode, from their exact aggregates), when known.

    Covered exactly: any number of continuous (grid) Gaussian measures (one μ: the Gaussian is
    rotation invariant and independent Gaussians compose into one); one integer measure whose worst
    neighbour moves one coordinate (the scalar discrete Gaussian, CKS Thm 7, at the shift ⌈Δ⌉); and
    an integer release of several coordinates or measures *for a pair that moves one coordinate
    only*: the other coordinates are identically distributed on both sides, so the pair's profile is
    the scalar discrete Gaussian's at that coordinate's σ and a shift of at most ⌈Δ2⌉ (the claim uses
    ⌈Δ2⌉, so a shift beyond the sensitivity is still caught). Other integer releases have no
    closed-form profile here, and Laplace or exponential noise is audited by the pure-ε bound alone.
    """
    if other_mechanisms:
        return None, "the release includes quantiles or partition selection, which are not Gaussian"
    if not mechanisms:
        return None, "nothing noisy to profile"
    if not all(isinstance(m, GaussianMechanism) for m in mechanisms.values()):
        return None, "not a Gaussian release: its pure-ε bound is the test"
    gaussians = {k: m for k, m in mechanisms.items() if isinstance(m, GaussianMechanism) and m.sensitivity > 0}
    if not gaussians:
        return None, "no measure moves between neighbours"
    if not any(m.integer for m in gaussians.values()):
        mu = math.sqrt(sum((m.sensitivity / m.sigma) ** 2 for m in gaussians.values()))
        return ClaimedProfile("gaussian", mu=mu), ""
    if len(gaussians) == 1:
        only = next(iter(gaussians.values()))
        if only.dimension == 1 or only.unit_coordinates == 1:
            return ClaimedProfile("discrete gaussian", sigma=only.sigma, shift=math.ceil(only.sensitivity)), ""
    if moved is not None:
        moving = [k for k, n in moved.items() if n > 0]
        if len(moving) == 1 and moved[moving[0]] == 1 and moving[0] in gaussians:
            m = gaussians[moving[0]]
            return ClaimedProfile("discrete gaussian", sigma=m.sigma, shift=math.ceil(m.sensitivity),
                                  scope="this pair: one coordinate moves"), ""
    return None, ("integer Gaussian noise on several coordinates or measures, and the audited pair moves more than "
                  "one: its exact profile is not computed")


@dataclass(frozen=True)
class ProfileBound:
    """δ_lb(ε) with confidence ``confidence`` on a grid of ε, against the claimed δ(ε)."""

    epsilons: np.ndarray
    #: lower confidence bound on the release's δ(ε) (simultaneous over the grid)
    delta_lower: np.ndarray
    #: the same without the DKW slack (a point estimate, for the report)
    delta_point: np.ndarray
    claimed: np.ndarray
    claim: ClaimedProfile
    confidence: float
    statistic: str
    #: DKW half-widths on D's and D′'s CDF of the statistic
    slack_d: float
    slack_dprime: float
    n_d: int
    n_dprime: int

    @property
    def worst(self) -> int:
        """Index of the ε where δ_lb comes closest to (or furthest over) the claim."""
        return int(np.argmax(self.delta_lower - self.claimed))

    @property
    def closest(self) -> int | None:
        """Index of the ε where δ_lb is the largest fraction of the claim (None if δ_lb is 0 everywhere)."""
        seen = (self.delta_lower > 0) & (self.claimed > 0)
        if not seen.any():
            return None
        ratio = np.where(seen, self.delta_lower / np.where(seen, self.claimed, 1.0), -np.inf)
        return int(np.argmax(ratio))

    @property
    def excess(self) -> float:
        """max_ε δ_lb(ε) − claimed δ(ε): > 0 is a violation."""
        return float(np.max(self.delta_lower - self.claimed))

    @property
    def violation(self) -> bool:
        return self.excess > 0

    @property
    def tightness(self) -> float:
        """δ_lb / claimed δ at ε 0 (the total variation distance): how much of the claim is seen."""
        return float(self.delta_lower[0] / self.claimed[0]) if self.claimed[0] > 0 else float("inf")


def dkw_slack(n: int, alpha: float) -> float:
    """λ with P(sup_t |F̂_n(t) − F(t)| > λ) ≤ α (Massart's constant; valid for any F, discrete too)."""
    return math.sqrt(math.log(2.0 / alpha) / (2.0 * n))


def _thresholds(a0: np.ndarray, a1: np.ndarray) -> np.ndarray:
    values = np.unique(np.concatenate([a0, a1]))
    if values.size <= _MAX_THRESHOLDS:
        return values
    return np.unique(np.quantile(values, np.linspace(0.0, 1.0, _MAX_THRESHOLDS)))


def empirical_profile(a_d: np.ndarray, a_dprime: np.ndarray, epsilons: np.ndarray,
                      slack_d: float = 0.0, slack_dprime: float = 0.0) -> np.ndarray:
    """max over half-lines S of one statistic and both orders of (P̂_A(S) − λ_A) − e^ε (P̂_B(S) + λ_B),
    at least 0, at each ε (with zero slack: the point estimate)."""
    a0, a1 = np.sort(np.asarray(a_d, dtype=float)), np.sort(np.asarray(a_dprime, dtype=float))
    t = _thresholds(a0, a1)
    above0 = 1.0 - np.searchsorted(a0, t, side="right") / a0.size
    above1 = 1.0 - np.searchsorted(a1, t, side="right") / a1.size
    scale = np.exp(np.asarray(epsilons, dtype=float))[:, None]
    best = np.zeros(len(epsilons))
    for pa, la, pb, lb in ((above0, slack_d, above1, slack_dprime), (1 - above0, slack_d, 1 - above1, slack_dprime),
                           (above1, slack_dprime, above0, slack_d), (1 - above1, slack_dprime, 1 - above0, slack_d)):
        value = (pa - la)[None, :] - scale * np.minimum(pb + lb, 1.0)[None, :]
        best = np.maximum(best, value.max(axis=1))
    return best


def _as_2d(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=float)
    return x.reshape(-1, 1) if x.ndim == 1 else x


def profile_bound(x_d: np.ndarray, x_dprime: np.ndarray, claim: ClaimedProfile, *, confidence: float = 0.95,
                  labels: list[str] | None = None, epsilons: np.ndarray | None = None) -> ProfileBound:
    """δ_lb(ε) on ``epsilons`` (default: :meth:`ClaimedProfile.epsilon_grid`) at ``confidence``,
    from samples of the release on D (rows of ``x_d``) and D′."""
    x0, x1 = _as_2d(x_d), _as_2d(x_dprime)
    eps = claim.epsilon_grid() if epsilons is None else np.asarray(epsilons, dtype=float)
    claimed = claim.delta(eps)
    names = list(labels or [f"x{j}" for j in range(x0.shape[1])])
    if x0.shape[1] == 1:
        name, w, ev0, ev1 = names[0], np.ones(1), x0, x1
    else:
        half0, half1 = x0.shape[0] // 2, x1.shape[0] // 2
        sel0, sel1, ev0, ev1 = x0[:half0], x1[:half1], x0[half0:], x1[half1:]
        candidates = [(names[j], np.eye(x0.shape[1])[j]) for j in range(x0.shape[1])]
        candidates.append(("linear discriminant", linear_discriminant(sel0, sel1)))
        scores = [float(np.max(empirical_profile(sel0 @ cw, sel1 @ cw, eps) - claimed)) for _, cw in candidates]
        name, w = candidates[int(np.argmax(scores))]
    alpha = 1.0 - confidence
    s0, s1 = dkw_slack(ev0.shape[0], alpha / 2), dkw_slack(ev1.shape[0], alpha / 2)
    a0, a1 = ev0 @ w, ev1 @ w
    return ProfileBound(
        epsilons=eps, delta_lower=empirical_profile(a0, a1, eps, s0, s1), delta_point=empirical_profile(a0, a1, eps),
        claimed=claimed, claim=claim, confidence=confidence, statistic=name, slack_d=s0, slack_dprime=s1,
        n_d=int(ev0.shape[0]), n_dprime=int(ev1.shape[0]),
    )
