"""The "doubling" baseline of Rogers et al. 2023, §7.1 and the relative-error experiment of Rogers et al. 2023, §7.2.

Doubling: fresh Gaussian releases with ε^(i+1) = √2·ε^(i) (σ_i = Δ2/ε^(i)), each charged ε_i²/2 in
zCDP (Rogers et al. 2023, Thm 2), until the stopping rule holds or the next release no longer fits the budget;
it overshoots the needed ε* by up to √2 and spends up to Σε_i² ≤ 4(ε*)² (Rogers et al. 2023, §7.1).

Brownian noise reduction (Rogers et al. 2023, §7, docs/algorithms.md A5): ε² on a grid of ``points`` equally spaced
values from ``eps2_first`` to 2·ρ_left, t = Δ2²/ε², one Brownian path read noisiest first; the
run is charged only the stopping iterate's ε²/2 (Rogers et al. 2023, Thm 6) — or ε²_max/2 if it never stops.

Both use the paper's relative rule with h = 1/ε (one standard deviation):
1 − α < |(ŷ + 1/ε)/(ŷ − 1/ε)| ≤ 1 + α and |ŷ| > 1/ε (:func:`dpch.accuracy.rules.relative_ok`).

The experiment (Rogers et al. 2023, §7.2): counts of a Zipf(a) sample over ``items`` values (ℓ∞ sensitivity 1);
repeatedly pick the top remaining item with the exponential mechanism (Gumbel noise of scale
1/ε_EM, charged ε_EM²/8 zCDP), then release its count by Brownian noise reduction or by doubling,
all under one zCDP budget ρ_max(ε, δ'') (Rogers et al. 2023, Thm 2 / Thm 6); report how many counts were returned
and the share of them within α of the truth (precision; 1 if none returned).

The Brownian path here is :func:`dpch.mechanisms.brownian.simulated_path` (built forward, the same
law as the bridge a release walks), so a whole grid is simulated in one vector operation.
Simulation only: no private data.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from dpch.accuracy.rules import relative_ok
from dpch.mechanisms.brownian import simulated_path
from dpch.mechanisms.zcdp import exponential_mechanism_rho, rho_max


@dataclass(frozen=True)
class Outcome:
    """One noise-reduction (or doubling) run: the value if returned, the ρ charged, iterates seen."""

    value: float | None
    rho: float
    steps: int


def _rule(values: np.ndarray, eps: np.ndarray, alpha: float) -> np.ndarray:
    h = 1.0 / eps
    return relative_ok(values - h, values + h, alpha)


def brownian_relative(value: float, rho_left: float, alpha: float, rng: np.random.Generator, *,
                      eps2_first: float = 1e-4, points: int = 1000, grid: str = "linear") -> Outcome:
    """Rogers et al. 2023, §7 Brownian noise reduction for one count of sensitivity 1 (charges the stop's ε²/2).

    ``grid="linear"`` is the paper's (ε² equally spaced); ``"geometric"`` spaces ε² geometrically over
    the same range (dpch's SQL default, :mod:`.planner`), so small ε² needs are not overshot."""
    if 2 * rho_left < eps2_first:
        return Outcome(None, 0.0, 0)
    space = np.linspace if grid == "linear" else np.geomspace
    eps2 = space(eps2_first, 2 * rho_left, points)
    noise = simulated_path(1.0 / eps2, rng)  # t = 1/ε², decreasing
    noisy = value + noise
    ok = _rule(noisy, np.sqrt(eps2), alpha)
    hit = int(np.argmax(ok)) if ok.any() else -1
    if hit < 0:
        return Outcome(None, float(eps2[-1]) / 2.0, points)
    return Outcome(float(noisy[hit]), float(eps2[hit]) / 2.0, hit + 1)


def doubling_relative(value: float, rho_left: float, alpha: float, rng: np.random.Generator, *,
                      eps2_first: float = 1e-4) -> Outcome:
    """Rogers et al. 2023, §7.1 doubling: fresh N(0, 1/ε_i²) releases, ε_i² doubling, every release charged ε_i²/2."""
    spent, eps2, steps = 0.0, eps2_first, 0
    while spent + eps2 / 2.0 <= rho_left * (1 + 1e-12):
        spent += eps2 / 2.0
        steps += 1
        noisy = value + rng.standard_normal() / math.sqrt(eps2)
        if bool(_rule(np.array([noisy]), np.array([math.sqrt(eps2)]), alpha)[0]):
            return Outcome(noisy, spent, steps)
        eps2 *= 2.0
    return Outcome(None, spent, steps)


def zipf_counts(n: int, rng: np.random.Generator, *, a: float = 0.75, items: int = 300) -> np.ndarray:
    """Counts of n draws from P(k) ∝ k^−a on 1..items (Rogers et al. 2023, §7.2, Figure 2)."""
    p = np.arange(1, items + 1, dtype=float) ** -a
    return rng.multinomial(n, p / p.sum()).astype(float)


@dataclass(frozen=True)
class TrialResult:
    returned: int
    correct: int

    @property
    def precision(self) -> float:
        return 1.0 if self.returned == 0 else self.correct / self.returned


def relative_error_trial(counts: np.ndarray, method: str, rng: np.random.Generator, *, alpha: float = 0.1,
                         epsilon: float = 10.0, delta: float = 1e-6, eps_em: float = 0.1,
                         eps2_first: float = 1e-4, points: int = 1000) -> TrialResult:
    """One trial of Rogers et al. 2023, §7.2: select the top remaining item (exponential mechanism), release its count
    accuracy-first, until the zCDP budget ρ_max(ε, δ'') cannot pay for another selection and release."""
    rho_left = rho_max(epsilon, delta)
    em = exponential_mechanism_rho(eps_em)
    remaining = np.ones(counts.size, dtype=bool)
    returned = correct = 0
    while remaining.any() and rho_left - em >= eps2_first / 2.0:
        rho_left -= em
        scores = np.where(remaining, counts + rng.gumbel(0.0, 1.0 / eps_em, counts.size), -np.inf)
        item = int(np.argmax(scores))
        remaining[item] = False
        if method.startswith("brownian"):
            grid = "geometric" if method == "brownian-geometric" else "linear"
            out = brownian_relative(counts[item], rho_left, alpha, rng, eps2_first=eps2_first, points=points,
                                    grid=grid)
        else:
            out = doubling_relative(counts[item], rho_left, alpha, rng, eps2_first=eps2_first)
        rho_left -= out.rho
        if out.value is not None:
            returned += 1
            y = counts[item]
            correct += int(y != 0 and abs(out.value / y - 1.0) < alpha)
    return TrialResult(returned, correct)


METHODS = ("brownian", "doubling", "brownian-geometric")


def relative_error_experiment(n: int, trials: int, seed: int, methods: tuple[str, ...] = METHODS,
                              **kw: float) -> dict[str, dict[str, float]]:
    """Mean (and min) results returned and precision over ``trials``: Brownian (paper's grid) vs doubling
    (vs Brownian on a geometric grid), on the same data sets (one Zipf sample per trial for all)."""
    rng = np.random.default_rng(seed)
    stats: dict[str, list[TrialResult]] = {m: [] for m in methods}
    for _ in range(trials):
        counts = zipf_counts(n, rng)
        for method in stats:
            stats[method].append(relative_error_trial(counts, method, rng, **kw))  # type: ignore[arg-type]
    out = {}
    for method, results in stats.items():
        returned = np.array([r.returned for r in results], dtype=float)
        precision = np.array([r.precision for r in results])
        out[method] = {"returned_mean": float(returned.mean()), "returned_min": float(returned.min()),
                       "returned_sd": float(returned.std()), "precision_mean": float(precision.mean()),
                       "precision_min": float(precision.min())}
    return out
