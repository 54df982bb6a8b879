"""Lower bounds on the privacy loss of one outcome, for mechanisms whose claim depends on the outcome
(ex-post DP: a watch's ⊤ at position t costs ε_post(t); issue 16, docs/algorithms.md B8–B9).

An ex-post claim says: for every outcome o and both orders of the neighbours,
|log P_D(o)/P_D′(o)| ≤ ε(o). For a discrete output (an Above Threshold instance's halting position,
a selected index) each outcome is its own test set, so one outcome's frequencies bound its loss from
below. With a one-sided Clopper–Pearson lower bound on P_A(o) and upper bound on P_B(o) (each at
1 − α/2),

    loss_lb(o) = log(P_A,lower(o) / P_B,upper(o))

is below the true log P_A(o)/P_B(o) with probability ≥ 1 − α. As in :mod:`.estimators`, the outcome
and the order (A, B) are chosen on the first half of the samples — the outcome whose smoothed
point estimate of the loss exceeds (or comes closest to) its claim — and measured once on the
second half, so no correction for the choice is needed. VIOLATION when loss_lb(o) > ε(o).

An outcome with no claim (ε(o) = ∞, e.g. "no ⊤ within the queries asked": an instance still open,
whose charge is the ex-ante ε_max when it is closed) is never chosen.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from dpch.audit.estimators import clopper_pearson_upper


@dataclass(frozen=True)
class ExPostBound:
    """loss_lb at one outcome with confidence ``confidence``, against that outcome's claimed ε."""

    outcome: float
    #: "D/D′": the bound is on log P_D(o)/P_D′(o); "D′/D": the mirror
    order: str
    loss_lb: float
    claimed: float
    confidence: float
    #: the outcome's frequency on the measuring half (A then B)
    frequency_a: float
    frequency_b: float
    n_d: int
    n_dprime: int

    @property
    def violation(self) -> bool:
        return self.loss_lb > self.claimed

    @property
    def tightness(self) -> float:
        """loss_lb / claimed ε of the chosen outcome (1 = tight)."""
        return self.loss_lb / self.claimed if self.claimed > 0 else float("inf")


def clopper_pearson_lower(k: int, n: int, alpha: float) -> float:
    """One-sided lower (1 − α) Clopper–Pearson bound on a binomial rate from k successes in n."""
    return 1.0 - float(clopper_pearson_upper(n - k, n, alpha))


def _smoothed_loss(k_a: int, n_a: int, k_b: int, n_b: int) -> float:
    return math.log((k_a + 0.5) / (n_a + 1.0)) - math.log((k_b + 0.5) / (n_b + 1.0))


def _halves(x_d: np.ndarray, x_dprime: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(selecting half on D, on D′, measuring half on D, on D′) of one-dimensional samples."""
    a0, a1 = np.asarray(x_d, dtype=float).ravel(), np.asarray(x_dprime, dtype=float).ravel()
    h0, h1 = a0.size // 2, a1.size // 2
    return a0[:h0], a1[:h1], a0[h0:], a1[h1:]


def claimed_outcomes(x_d: np.ndarray, x_dprime: np.ndarray,
                     claimed: Callable[[float], float]) -> list[tuple[float, float]]:
    """(outcome, claimed ε) of every outcome :func:`ex_post_bound` may choose: those seen in the selecting
    halves whose claim is finite. Empty when there is nothing to test (e.g. no instance of a watch
    halted: every outcome is an open instance, which has no ex-post claim)."""
    sel0, sel1, _, _ = _halves(x_d, x_dprime)
    pairs = [(float(o), float(claimed(float(o)))) for o in np.unique(np.concatenate([sel0, sel1]))]
    return [(o, eps) for o, eps in pairs if math.isfinite(eps)]


def ex_post_bound(x_d: np.ndarray, x_dprime: np.ndarray, claimed: Callable[[float], float], *,
                  confidence: float = 0.95) -> ExPostBound:
    """loss_lb at the outcome chosen on the first half of the one-dimensional discrete samples
    ``x_d`` (on D) and ``x_dprime`` (on D′), measured on the second half; ``claimed(o)`` is the
    ex-post ε the mechanism claims for outcome o (∞: no claim, never chosen). ValueError when no
    outcome has a claim (:func:`claimed_outcomes` is empty)."""
    sel0, sel1, ev0, ev1 = _halves(x_d, x_dprime)
    h0, h1 = sel0.size, sel1.size
    best: tuple[float, float, str, float] | None = None
    for o, eps in claimed_outcomes(x_d, x_dprime, claimed):
        k0, k1 = int(np.sum(sel0 == o)), int(np.sum(sel1 == o))
        for order, score in (("D/D′", _smoothed_loss(k0, h0, k1, h1)), ("D′/D", _smoothed_loss(k1, h1, k0, h0))):
            if best is None or score - eps > best[0]:
                best = (score - eps, float(o), order, eps)
    if best is None:
        raise ValueError("no outcome with a finite claimed ε among the samples")
    _, outcome, order, eps = best
    alpha = 1.0 - confidence
    k0, k1 = int(np.sum(ev0 == outcome)), int(np.sum(ev1 == outcome))
    n0, n1 = ev0.size, ev1.size
    (k_a, n_a), (k_b, n_b) = ((k0, n0), (k1, n1)) if order == "D/D′" else ((k1, n1), (k0, n0))
    lower_a = clopper_pearson_lower(k_a, n_a, alpha / 2)
    upper_b = float(clopper_pearson_upper(k_b, n_b, alpha / 2))
    loss = math.log(lower_a / upper_b) if lower_a > 0 else 0.0
    return ExPostBound(outcome=outcome, order=order, loss_lb=max(loss, 0.0), claimed=eps, confidence=confidence,
                       frequency_a=k_a / n_a, frequency_b=k_b / n_b, n_d=n0, n_dprime=n1)
