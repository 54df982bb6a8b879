"""Lower bounds on ε from samples of a mechanism on neighbouring datasets D and D′.

Any test that tells D′ from D with false-positive rate FPR and false-negative rate FNR bounds
the privacy of an (ε, δ)-DP mechanism from below: by Definition 1 of the DPCH paper applied to
the rejection region S and to its complement (neighbours are symmetric),

    1 − FNR − δ ≤ e^ε · FPR        and        1 − FPR − δ ≤ e^ε · FNR.

With Clopper–Pearson upper confidence bounds FPR_u and FNR_u (each at level 1 − α/2), the
quantity ε_lb = log((1 − FNR_u − δ)/FPR_u) (or its mirror) is, with probability ≥ 1 − α, at
most the true ε: the standard auditing bound (Jagielski et al. 2020; Nasr et al. 2021).

A bound is only valid for a test fixed *before* its rates are measured. Both estimators
therefore split the samples: the first half chooses the test (statistic, direction and
threshold, or the classifier's weights and threshold), the second half measures it once.

- :func:`threshold_bound` scans thresholds on every output coordinate and on a linear
  discriminant (the likelihood-ratio statistic for shifted Gaussian noise; for one coordinate
  of Laplace or Gaussian noise the likelihood ratio is monotone, so a threshold on the
  coordinate *is* the likelihood-ratio test).
- :func:`classifier_bound` trains a logistic regression (numpy/scipy) on the first half and
  thresholds its score.
- :func:`likelihood_ratio_bound` thresholds the summed per-coordinate log-likelihood ratio over
  binned outcomes (discrete outputs: quantile indices, partition selection).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from scipy import optimize, stats

#: thresholds scanned per statistic (dense in both tails, where the best tests live)
_MAX_THRESHOLDS = 1500


@dataclass(frozen=True)
class EpsilonBound:
    """ε_lb ≥ 0 with confidence ``confidence`` and the test that achieved it."""

    epsilon_lb: float
    confidence: float
    method: str
    statistic: str
    threshold: float
    #: "above": guess D′ when the statistic exceeds the threshold; "below": when it does not
    direction: str
    fpr: float
    fnr: float
    fpr_upper: float
    fnr_upper: float
    n_d: int
    n_dprime: int


def clopper_pearson_upper(k: np.ndarray | int, n: int, alpha: float) -> np.ndarray:
    """One-sided upper (1 − α) Clopper–Pearson bound on a binomial rate from k successes in n."""
    k = np.asarray(k, dtype=float)
    upper = stats.beta.ppf(1.0 - alpha, k + 1.0, np.maximum(n - k, 1e-300))
    return np.where(k >= n, 1.0, upper)


def epsilon_from_rates(fpr_u: npt.ArrayLike, fnr_u: npt.ArrayLike, delta: float) -> np.ndarray:
    """max(log((1 − FNR_u − δ)/FPR_u), log((1 − FPR_u − δ)/FNR_u)), or 0 where both are ≤ 0."""
    fpr = np.asarray(fpr_u, dtype=float)
    fnr = np.asarray(fnr_u, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        a = np.log(np.maximum(1.0 - fnr - delta, 0.0) / fpr)
        b = np.log(np.maximum(1.0 - fpr - delta, 0.0) / fnr)
    out = np.fmax(np.nan_to_num(a, nan=-np.inf), np.nan_to_num(b, nan=-np.inf))
    return np.maximum(out, 0.0)


def _candidate_thresholds(a0: np.ndarray, a1: np.ndarray) -> np.ndarray:
    values = np.unique(np.concatenate([a0, a1]))
    m = values.size
    if m <= _MAX_THRESHOLDS:
        return values
    ranks = np.concatenate([
        np.linspace(0, m - 1, _MAX_THRESHOLDS // 3),
        np.geomspace(1, m, _MAX_THRESHOLDS // 3) - 1,
        (m - 1) - (np.geomspace(1, m, _MAX_THRESHOLDS // 3) - 1),
    ])
    return values[np.unique(np.clip(np.rint(ranks).astype(int), 0, m - 1))]


def _rates(a0: np.ndarray, a1: np.ndarray, thresholds: np.ndarray, direction: str) -> tuple[np.ndarray, np.ndarray]:
    """Counts of false positives (D flagged) and false negatives (D′ missed) per threshold."""
    s0, s1 = np.sort(a0), np.sort(a1)
    above0 = a0.size - np.searchsorted(s0, thresholds, side="right")
    above1 = a1.size - np.searchsorted(s1, thresholds, side="right")
    if direction == "above":
        return above0, a1.size - above1
    return a0.size - above0, above1


def _scan(a0: np.ndarray, a1: np.ndarray, delta: float, alpha: float) -> tuple[float, float, str]:
    """The (ε_lb, threshold, direction) that is best on these samples."""
    thresholds = _candidate_thresholds(a0, a1)
    best = (-1.0, float(thresholds[0]), "above")
    for direction in ("above", "below"):
        fp, fn = _rates(a0, a1, thresholds, direction)
        eps = epsilon_from_rates(clopper_pearson_upper(fp, a0.size, alpha / 2),
                                 clopper_pearson_upper(fn, a1.size, alpha / 2), delta)
        i = int(np.argmax(eps))
        if eps[i] > best[0]:
            best = (float(eps[i]), float(thresholds[i]), direction)
    return best


def _measure(a0: np.ndarray, a1: np.ndarray, threshold: float, direction: str, delta: float,
             alpha: float, method: str, statistic: str) -> EpsilonBound:
    fp, fn = _rates(a0, a1, np.array([threshold]), direction)
    fpr_u = float(clopper_pearson_upper(fp, a0.size, alpha / 2)[0])
    fnr_u = float(clopper_pearson_upper(fn, a1.size, alpha / 2)[0])
    eps = float(epsilon_from_rates(fpr_u, fnr_u, delta))
    return EpsilonBound(
        epsilon_lb=eps, confidence=1.0 - alpha, method=method, statistic=statistic,
        threshold=threshold, direction=direction, fpr=float(fp[0]) / a0.size, fnr=float(fn[0]) / a1.size,
        fpr_upper=fpr_u, fnr_upper=fnr_u, n_d=a0.size, n_dprime=a1.size,
    )


def _halves(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    half = x.shape[0] // 2
    return x[:half], x[half:]


def _as_2d(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=float)
    return x.reshape(-1, 1) if x.ndim == 1 else x


def linear_discriminant(x0: np.ndarray, x1: np.ndarray) -> np.ndarray:
    """Weights (m1 − m0)/pooled variance per coordinate: the likelihood-ratio direction for a
    mean shift under independent Gaussian noise (coordinates that do not move get weight 0)."""
    var = (x0.var(axis=0) + x1.var(axis=0)) / 2.0
    diff = x1.mean(axis=0) - x0.mean(axis=0)
    return np.divide(diff, var, out=np.zeros_like(diff), where=var > 0)


def threshold_bound(
    x_d: np.ndarray,
    x_dprime: np.ndarray,
    *,
    delta: float = 0.0,
    confidence: float = 0.95,
    labels: list[str] | None = None,
) -> EpsilonBound:
    """ε_lb from threshold tests on each coordinate (and a linear discriminant when there are
    several), chosen on the first half of the samples and measured on the second."""
    x0, x1 = _as_2d(x_d), _as_2d(x_dprime)
    alpha = 1.0 - confidence
    sel0, ev0 = _halves(x0)
    sel1, ev1 = _halves(x1)
    names = list(labels or [f"x{j}" for j in range(x0.shape[1])])
    candidates: list[tuple[str, np.ndarray]] = [(names[j], np.eye(x0.shape[1])[j]) for j in range(x0.shape[1])]
    if x0.shape[1] > 1:
        candidates.append(("linear discriminant", linear_discriminant(sel0, sel1)))
    best: tuple[float, str, np.ndarray, float, str] | None = None
    for name, w in candidates:
        eps, threshold, direction = _scan(sel0 @ w, sel1 @ w, delta, alpha)
        if best is None or eps > best[0]:
            best = (eps, name, w, threshold, direction)
    assert best is not None
    _, name, w, threshold, direction = best
    return _measure(ev0 @ w, ev1 @ w, threshold, direction, delta, alpha, "threshold", name)


def _standardize(x: np.ndarray, mean: np.ndarray, scale: np.ndarray) -> np.ndarray:
    return (x - mean) / scale


def fit_logistic(x: np.ndarray, y: np.ndarray, l2: float = 1e-3) -> np.ndarray:
    """Logistic regression weights (intercept first) by L-BFGS on the L2-penalised log loss."""
    design = np.hstack([np.ones((x.shape[0], 1)), x])

    def loss(w: np.ndarray) -> tuple[float, np.ndarray]:
        z = design @ w
        # log(1 + e^z) − y·z, computed stably
        value = np.sum(np.logaddexp(0.0, z) - y * z) / len(y) + l2 * np.dot(w[1:], w[1:])
        p = 1.0 / (1.0 + np.exp(-z))
        grad = design.T @ (p - y) / len(y)
        grad[1:] += 2 * l2 * w[1:]
        return value, grad

    result = optimize.minimize(loss, np.zeros(design.shape[1]), jac=True, method="L-BFGS-B")
    return result.x


def classifier_bound(
    x_d: np.ndarray,
    x_dprime: np.ndarray,
    *,
    delta: float = 0.0,
    confidence: float = 0.95,
) -> EpsilonBound:
    """ε_lb from a logistic-regression classifier trained (weights and threshold) on the first
    half of the samples and measured on the second."""
    x0, x1 = _as_2d(x_d), _as_2d(x_dprime)
    alpha = 1.0 - confidence
    sel0, ev0 = _halves(x0)
    sel1, ev1 = _halves(x1)
    train = np.vstack([sel0, sel1])
    mean = train.mean(axis=0)
    scale = train.std(axis=0)
    scale[scale == 0] = 1.0
    y = np.concatenate([np.zeros(len(sel0)), np.ones(len(sel1))])
    w = fit_logistic(_standardize(train, mean, scale), y)

    def score(x: np.ndarray) -> np.ndarray:
        return _standardize(x, mean, scale) @ w[1:] + w[0]

    _, threshold, direction = _scan(score(sel0), score(sel1), delta, alpha)
    return _measure(score(ev0), score(ev1), threshold, direction, delta, alpha, "classifier",
                    "logistic regression")


#: bins per coordinate of the likelihood-ratio statistic (chosen on the first half's quantiles)
_LLR_BINS = 64


def _bin_edges(pooled: np.ndarray) -> np.ndarray:
    """Edges between the distinct outcomes of a discrete coordinate, or quantile edges of a
    continuous one (at most ``_LLR_BINS`` bins)."""
    values = np.unique(pooled)
    if values.size <= _LLR_BINS:
        return (values[:-1] + values[1:]) / 2.0
    return np.unique(np.quantile(pooled, np.linspace(0.0, 1.0, _LLR_BINS + 1)[1:-1]))


def likelihood_ratio_bound(
    x_d: np.ndarray,
    x_dprime: np.ndarray,
    *,
    delta: float = 0.0,
    confidence: float = 0.95,
) -> EpsilonBound:
    """ε_lb from a threshold on the summed per-coordinate log-likelihood ratio, each coordinate's
    ratio estimated over binned outcomes of the first half (add-½ smoothing) and the test
    measured on the second half.

    It suits discrete outputs — an exponential mechanism's released index, a key released or
    not — whose likelihood ratio is not monotone in the value, so no single threshold on the value
    finds the best test. Summing over coordinates is the likelihood-ratio test when they are
    independent, as the noise of separate mechanisms is: several quantiles of one query are
    observed jointly, and each one's under-charging adds to the statistic.
    """
    x0, x1 = _as_2d(x_d), _as_2d(x_dprime)
    alpha = 1.0 - confidence
    sel0, ev0 = _halves(x0)
    sel1, ev1 = _halves(x1)
    tables = []
    for j in range(x0.shape[1]):
        edges = _bin_edges(np.concatenate([sel0[:, j], sel1[:, j]]))
        bins = edges.size + 1
        c0 = np.bincount(np.searchsorted(edges, sel0[:, j]), minlength=bins) + 0.5
        c1 = np.bincount(np.searchsorted(edges, sel1[:, j]), minlength=bins) + 0.5
        tables.append((edges, np.log(c1 / c1.sum()) - np.log(c0 / c0.sum())))

    def statistic(x: np.ndarray) -> np.ndarray:
        total = np.zeros(x.shape[0])
        for j, (edges, llr) in enumerate(tables):
            total += llr[np.searchsorted(edges, x[:, j])]
        return total

    _, threshold, direction = _scan(statistic(sel0), statistic(sel1), delta, alpha)
    return _measure(statistic(ev0), statistic(ev1), threshold, direction, delta, alpha, "likelihood ratio",
                    "summed log-likelihood ratio over binned outcomes")


def threshold_curve(
    a_d: np.ndarray, a_dprime: np.ndarray, *, delta: float = 0.0, confidence: float = 0.95, points: int = 200
) -> dict[str, np.ndarray]:
    """For a report: over thresholds of one statistic (all samples), the point estimate of
    log(TPR/FPR)-style ε and its Clopper–Pearson lower bound (not selection-corrected)."""
    a0, a1 = np.asarray(a_d, dtype=float), np.asarray(a_dprime, dtype=float)
    lo, hi = np.quantile(np.concatenate([a0, a1]), [0.001, 0.999])
    thresholds = np.linspace(lo, hi, points)
    alpha = 1.0 - confidence
    best_point = np.zeros(points)
    best_lower = np.zeros(points)
    for direction in ("above", "below"):
        fp, fn = _rates(a0, a1, thresholds, direction)
        with np.errstate(divide="ignore", invalid="ignore"):
            point = epsilon_from_rates(fp / a0.size, fn / a1.size, delta)
        point = np.where(np.isfinite(point), point, 0.0)
        lower = epsilon_from_rates(clopper_pearson_upper(fp, a0.size, alpha / 2),
                                   clopper_pearson_upper(fn, a1.size, alpha / 2), delta)
        best_point = np.maximum(best_point, point)
        best_lower = np.maximum(best_lower, lower)
    return {"threshold": thresholds, "epsilon_point": best_point, "epsilon_lower": best_lower}


def combine(bounds: list[EpsilonBound]) -> EpsilonBound:
    """The largest of several bounds. Each must have been computed at confidence 1 − α/m for m
    bounds, so that the maximum holds at 1 − α (union bound); the result says 1 − α."""
    best = max(bounds, key=lambda b: b.epsilon_lb)
    alpha = sum(1.0 - b.confidence for b in bounds)
    return EpsilonBound(**{**best.__dict__, "confidence": max(0.0, 1.0 - alpha)})
