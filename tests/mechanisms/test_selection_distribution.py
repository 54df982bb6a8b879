"""The released index (or halting time) of each selection mechanism against its exact distribution
(issue 16; docs/algorithms.md B7–B11).

Each test draws through the mechanism's own public method (``release``, ``select``,
``select_many``, ``start().test``, ``run``) at a fixed seed and compares the counts with the
distribution computed from the formula by a χ² goodness-of-fit test (scipy.stats.chisquare):

- accepted when p > 1e-3 (with a fixed seed the verdict never changes; a correct sampler would
  fail at a random seed with probability 1e-3);
- negative control: the *same* counts against the formula at a wrong noise scale (1.3σ, 1.3b)
  or a wrong ε (1.3ε) must be rejected at p < 1e-6. The sample size is chosen for that: at 30 000
  draws the controls' χ² statistics at the fixed seed are 240–2 400 (the smallest: Gaussian RNM at
  its calibrated σ), while the p = 1e-6 critical value of χ² with ≤ 15 degrees of freedom is below
  53; the correct formulas give p between 0.25 and 0.99.

The formulas (computed here independently of dpch.mechanisms.selection_bounds):

- Gaussian RNM: P(argmax = i) = ∫ φ(z) Π_{j≠i} Φ((q_i − q_j)/σ + z) dz over the clamped values, in
  log space (log_ndtr, B11 pitfall 1) by Simpson's rule on [−14, 14];
- Laplace RNM: P(argmax = i) = ∫ f_b(z) Π_{j≠i} F_b(q_i − q_j + z) dz (scipy quad with the kinks
  as breakpoints);
- exponential mechanism: softmax of ε·u/(2Δ);
- Gaussian Above Threshold: P(halt at t) = E_x[Π_{s<t} Φ((ρ + σ_X x − q_s)/σ_Z)·(1 − Φ((ρ + σ_X x − q_t)/σ_Z))],
  and P(no halt within T) = E_x[Π_{s≤T} Φ(·)];
- Laplace Above Threshold: the same with Lap(2Δ/ε) threshold noise and Lap(4Δ/ε) query noise.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pytest
from scipy import integrate, stats
from scipy.special import log_ndtr

from dpch.mechanisms.exponential import ExponentialMechanism
from dpch.mechanisms.sampling import NoiseSource
from dpch.mechanisms.selection import (
    AboveThresholdRun,
    GaussianAboveThreshold,
    GaussianReportNoisyMax,
    LaplaceAboveThreshold,
    LaplaceReportNoisyMax,
)
from dpch.mechanisms.selection_bounds import at_epsilon_max, rnm_epsilon
from dpch.mechanisms.svt import GaussianSparseVector

SQ3 = math.sqrt(3.0)
#: draws per test (see the module docstring for the power this gives)
DRAWS = 30_000
#: a correct sampler passes above this p-value (fixed seed)
ACCEPT_P = 1e-3
#: the negative control must fall below this p-value
REJECT_P = 1e-6
#: a wrong noise scale or ε for the negative controls
WRONG = 1.3

_Z = np.linspace(-14.0, 14.0, 56_001)
_LOG_PHI = -0.5 * _Z * _Z - 0.5 * math.log(2 * math.pi)


def _simpson_exp(log_f: np.ndarray) -> float:
    return float(integrate.simpson(np.exp(log_f), x=_Z))


def gaussian_rnm_pmf(values: np.ndarray, sigma: float) -> np.ndarray:
    """P(argmax_i q_i + N(0, σ²) = i) for every i (B7's integrand, in log space)."""
    q = np.asarray(values, dtype=float)
    pmf = []
    for i in range(q.size):
        log_f = _LOG_PHI + sum(log_ndtr((q[i] - q[j]) / sigma + _Z) for j in range(q.size) if j != i)
        pmf.append(_simpson_exp(log_f))
    return np.array(pmf)


def _laplace_cdf(x: float, b: float) -> float:
    return 0.5 * math.exp(x / b) if x < 0 else 1.0 - 0.5 * math.exp(-x / b)


def laplace_rnm_pmf(values: np.ndarray, b: float) -> np.ndarray:
    """P(argmax_i q_i + Lap(b) = i) for every i: ∫ f_b(z) Π_{j≠i} F_b(q_i − q_j + z) dz."""
    q = np.asarray(values, dtype=float)
    pmf = []
    for i in range(q.size):
        others = [float(q[j]) for j in range(q.size) if j != i]

        def f(z: float, qi: float = float(q[i]), others: list[float] = others) -> float:
            return math.exp(-abs(z) / b) / (2 * b) * math.prod(_laplace_cdf(qi - qj + z, b) for qj in others)

        kinks = sorted({0.0, *(qj - float(q[i]) for qj in others)})
        pmf.append(integrate.quad(f, -60 * b, 60 * b, points=kinks, limit=500, epsabs=1e-13)[0])
    return np.array(pmf)


def gaussian_at_pmf(values: list[float], threshold: float, sigma_x: float, sigma_z: float) -> np.ndarray:
    """P(halt at t) for t = 1..T, then P(no halt within T), for Gaussian Above Threshold (B8)."""
    noisy_threshold = threshold + sigma_x * _Z
    log_below = np.zeros_like(_Z)  # log Π_{s<t} P(⊥ at s | ρ̂)
    pmf = []
    for q in values:
        pmf.append(_simpson_exp(_LOG_PHI + log_below + log_ndtr((q - noisy_threshold) / sigma_z)))
        log_below = log_below + log_ndtr((noisy_threshold - q) / sigma_z)
    pmf.append(_simpson_exp(_LOG_PHI + log_below))
    return np.array(pmf)


def laplace_at_pmf(values: list[float], threshold: float, epsilon: float, sensitivity: float) -> np.ndarray:
    """The same for Laplace Above Threshold (Dwork & Roth Alg. 1): ρ̂ = T + Lap(2Δ/ε), query noise
    Lap(4Δ/ε); ⊤ when q_t + ν_t ≥ ρ̂."""
    b1, b2 = 2 * sensitivity / epsilon, 4 * sensitivity / epsilon
    kinks = sorted({0.0, *(q - threshold for q in values)})
    pmf = []
    for t in range(len(values) + 1):

        def f(x: float, t: int = t) -> float:
            rho = threshold + x
            p = math.exp(-abs(x) / b1) / (2 * b1)
            for q in values[:t]:
                p *= _laplace_cdf(rho - q, b2)
            if t < len(values):
                p *= 1.0 - _laplace_cdf(rho - values[t], b2)
            return p

        pmf.append(integrate.quad(f, -60 * b1, 60 * b1, points=kinks, limit=500, epsabs=1e-13)[0])
    return np.array(pmf)


def _chi2_p(counts: np.ndarray, pmf: np.ndarray) -> float:
    """χ² p-value of ``counts`` against ``pmf``. Cells expecting fewer than 5 draws (only in the
    negative controls' wrong formulas) are pooled into one, with the smallest other cell if the pool
    still expects fewer than 5, as the χ² approximation needs."""
    assert pmf.sum() == pytest.approx(1.0, abs=1e-9), f"the formula's pmf sums to {pmf.sum()!r}"
    expected = pmf * counts.sum()
    small = expected < 5
    if small.any():
        if expected[small].sum() < 5:
            small[np.flatnonzero(~small)[np.argmin(expected[~small])]] = True
        counts = np.append(counts[~small], counts[small].sum())
        expected = np.append(expected[~small], expected[small].sum())
    return float(stats.chisquare(counts, expected).pvalue)


def _check(counts: np.ndarray, right: np.ndarray, wrong: np.ndarray, what: str) -> None:
    p_right, p_wrong = _chi2_p(counts, right), _chi2_p(counts, wrong)
    assert p_right > ACCEPT_P, f"{what}: χ² p = {p_right:.2e} against the formula (accept above {ACCEPT_P})"
    assert p_wrong < REJECT_P, f"{what}: χ² p = {p_wrong:.2e} against the wrong formula (reject below {REJECT_P})"


def _draws(draw: Callable[[], int], categories: int) -> np.ndarray:
    return np.bincount([draw() for _ in range(DRAWS)], minlength=categories)


# -- report noisy max ---------------------------------------------------------------------------


def test_gaussian_report_noisy_max_index_follows_b7(source: NoiseSource):
    """Values outside [0, 1] are clamped before noise (B11 pitfall 4): −0.3 → 0, 1.4 → 1."""
    mech = GaussianReportNoisyMax(sigma=0.3, sensitivity=0.01, lower=0.0, upper=1.0, d=5)
    values = np.array([-0.3, 0.4, 0.5, 0.55, 1.4])
    counts = _draws(lambda: mech.release(values, source).index, 5)
    clamped = np.clip(values, 0.0, 1.0)
    _check(counts, gaussian_rnm_pmf(clamped, 0.3), gaussian_rnm_pmf(clamped, WRONG * 0.3), "Gaussian RNM")
    # the clamp matters: unclamped values give a distribution these draws reject
    assert _chi2_p(counts, gaussian_rnm_pmf(values, 0.3)) < REJECT_P


def test_gaussian_report_noisy_max_at_its_calibrated_sigma(source: NoiseSource):
    """for_epsilon's σ (ε 1 over d = 6 queries in [0, 10], Δ 1) is the σ the draws show."""
    mech = GaussianReportNoisyMax.for_epsilon(1.0, 1.0, 0.0, 10.0, 6)
    values = np.array([2.0, 4.0, 5.0, 6.0, 6.5, 7.0])
    counts = _draws(lambda: mech.release(values, source).index, 6)
    _check(counts, gaussian_rnm_pmf(values, mech.sigma), gaussian_rnm_pmf(values, WRONG * mech.sigma),
           f"Gaussian RNM at σ {mech.sigma:.3f}")


def test_b7_worst_case_ratio_of_the_selection_pmf_is_the_b10_epsilon():
    """B7's tight worst case: log P_D(d)/P_D′(d) from the selection pmf above equals Thm 8's ε in
    log form, and the B10 row (c 1, Δ 0.05, σ 0.3, d 4) → 0.9801642773, to 1e-7."""
    c, delta, sigma, d = 1.0, 0.05, 0.3, 4
    on_d = gaussian_rnm_pmf(np.array([c - delta] * (d - 1) + [delta]), sigma)[-1]
    on_dprime = gaussian_rnm_pmf(np.array([c] * (d - 1) + [0.0]), sigma)[-1]
    assert math.log(on_d / on_dprime) == pytest.approx(0.9801642773, abs=1e-7)
    assert rnm_epsilon(c, delta, sigma, d) == pytest.approx(0.9801642773, abs=1e-7)


@pytest.mark.parametrize("t", [1, 2, 3])
def test_b8_worst_case_ratio_of_the_halting_pmf_is_thm17_epsilon_post(t: int):
    """Thm 17's worst case (queries in [a, b] = [0, 1]): D asks b − Δ before and a + Δ at t, D′ asks
    b and a; log P_D(halt at t)/P_D′(halt at t) from the halting pmf above equals ε_post(t) (log form,
    −σ_X x; B8) to 1e-6 — the ex-post claim is attained, so an audit can be tight."""
    sigma_x, rho, delta = 0.3, 0.9, 0.2
    mech = GaussianAboveThreshold(sigma_x=sigma_x, sigma_z=SQ3 * sigma_x, threshold=rho, sensitivity=delta)
    on_d = gaussian_at_pmf([1 - delta] * (t - 1) + [delta], rho, sigma_x, SQ3 * sigma_x)[t - 1]
    on_dprime = gaussian_at_pmf([1.0] * (t - 1) + [0.0], rho, sigma_x, SQ3 * sigma_x)[t - 1]
    assert math.log(on_d / on_dprime) == pytest.approx(mech.epsilon_post(t), abs=1e-6)


@pytest.mark.parametrize("monotonic", [False, True])
def test_laplace_report_noisy_max_index(source: NoiseSource, monotonic: bool):
    mech = LaplaceReportNoisyMax(epsilon=1.0, sensitivity=1.0, monotonic=monotonic)
    values = np.array([0.0, 1.0, 1.5, 2.0, 3.0])
    counts = _draws(lambda: mech.release(values, source).index, 5)
    b = mech.scale
    _check(counts, laplace_rnm_pmf(values, b), laplace_rnm_pmf(values, WRONG * b), f"Laplace RNM b = {b:g}")


# -- exponential mechanism ----------------------------------------------------------------------


@pytest.mark.parametrize("method", ["select", "select_many"])
def test_exponential_mechanism_index_is_softmax(source: NoiseSource, method: str):
    """Gumbel-max (select) and the audit's inverse-CDF draws (select_many) both pick i with
    probability ∝ exp(ε u_i/(2Δ)); the control is the softmax at 1.3ε."""
    mech = ExponentialMechanism(epsilon=1.0, sensitivity=1.0)
    u = np.array([0.0, 1.0, 2.0, 3.0, 4.0])
    if method == "select":
        counts = _draws(lambda: mech.select(u, source), 5)
    else:
        counts = np.bincount(mech.select_many(u, DRAWS, source), minlength=5)

    def softmax(epsilon: float) -> np.ndarray:
        w = np.exp(epsilon * u / 2)
        return w / w.sum()

    _check(counts, softmax(1.0), softmax(WRONG), f"exponential mechanism ({method})")


# -- above threshold and the sparse vector ------------------------------------------------------

AT_VALUES = [0.1, 0.3, 0.4, 0.5, 0.6, 0.7]


def _halting_category(run: AboveThresholdRun, values: list[float]) -> int:
    """0-based halting position, or len(values) when no ⊤ came within the values."""
    for t, q in enumerate(values):
        if run.test(q):
            return t
    return len(values)


def test_gaussian_above_threshold_halting_time(source: NoiseSource):
    """Halting time of Alg 1 (ρ 0.5, σ_X 0.15, σ_Z √3σ_X) through start().test; the control has both
    noise scales 1.3× larger."""
    mech = GaussianAboveThreshold(sigma_x=0.15, sigma_z=SQ3 * 0.15, threshold=0.5, sensitivity=0.001)
    counts = _draws(lambda: _halting_category(mech.start(source), AT_VALUES), len(AT_VALUES) + 1)
    right = gaussian_at_pmf(AT_VALUES, 0.5, 0.15, SQ3 * 0.15)
    wrong = gaussian_at_pmf(AT_VALUES, 0.5, WRONG * 0.15, WRONG * SQ3 * 0.15)
    _check(counts, right, wrong, "Gaussian Above Threshold")


def test_gaussian_above_threshold_clamps_queries(source: NoiseSource):
    """Queries are clamped to [lower, upper] = [0, 1] before noise: 1.8 acts as 1 and −0.5 as 0."""
    mech = GaussianAboveThreshold(sigma_x=0.2, sigma_z=SQ3 * 0.2, threshold=0.8, sensitivity=0.001)
    values = [-0.5, 0.5, 1.8]
    counts = _draws(lambda: _halting_category(mech.start(source), values), 4)
    right = gaussian_at_pmf([0.0, 0.5, 1.0], 0.8, 0.2, SQ3 * 0.2)
    _check(counts, right, gaussian_at_pmf([0.0, 0.5, 1.0], 0.8, WRONG * 0.2, WRONG * SQ3 * 0.2),
           "Gaussian Above Threshold (clamped)")
    assert _chi2_p(counts, gaussian_at_pmf(values, 0.8, 0.2, SQ3 * 0.2)) < REJECT_P


def test_laplace_above_threshold_halting_time(source: NoiseSource):
    mech = LaplaceAboveThreshold(epsilon=1.0, sensitivity=0.5, threshold=2.0)
    values = [0.0, 1.0, 1.5, 2.0, 2.5, 3.0]

    def draw() -> int:
        first = mech.run(np.array(values), source)
        return len(values) if first is None else first

    counts = _draws(draw, len(values) + 1)
    _check(counts, laplace_at_pmf(values, 2.0, 1.0, 0.5), laplace_at_pmf(values, 2.0, 1.0 / WRONG, 0.5),
           "Laplace Above Threshold")


SVT_VALUES = [0.2, 0.45, 0.6, 1.0]  # the last value repeats until ⊤, so every instance halts


def _instance_halts(next_top: Callable[[float], bool], instances: int) -> np.ndarray:
    """Halting positions (0-based, capped at len(SVT_VALUES) − 1) of consecutive instances."""
    halts = []
    position = 0
    while len(halts) < instances:
        if next_top(SVT_VALUES[min(position, len(SVT_VALUES) - 1)]):
            halts.append(min(position, len(SVT_VALUES) - 1))
            position = 0
        else:
            position += 1
    return np.array(halts)


def _pair_counts(halts: np.ndarray) -> np.ndarray:
    k = len(SVT_VALUES)
    pairs = halts[: halts.size // 2 * 2].reshape(-1, 2)
    return np.bincount(pairs[:, 0] * k + pairs[:, 1], minlength=k * k)


def test_sparse_vector_instances_are_independent_with_the_at_distribution(source: NoiseSource):
    """The fully adaptive SVT (B9) draws a fresh threshold per instance: consecutive instances'
    halting times are i.i.d. with the Above Threshold law, so the (t_k, t_k+1) pairs follow the
    product pmf (χ² over 16 cells, 2 × 30 000 instances). Control: instances that *reuse* one
    noisy threshold (built from the public AboveThresholdRun) have the same marginal law but
    correlated pairs, and the same test rejects them."""
    sigma_x = 0.15
    svt = GaussianSparseVector(epsilon=1e9, delta=1.0, delta_per_instance=1e-12, sigma_x=sigma_x,
                               sensitivity=0.001, threshold=0.5)
    halts = _instance_halts(lambda q: svt.test(q, source), 2 * DRAWS)
    marginal = gaussian_at_pmf(SVT_VALUES[:-1], 0.5, sigma_x, SQ3 * sigma_x)  # last cell: "halts at ≥ 4"
    product = np.outer(marginal, marginal).ravel()
    assert _chi2_p(np.bincount(halts, minlength=4), marginal) > ACCEPT_P
    assert _chi2_p(_pair_counts(halts), product) > ACCEPT_P

    # control: one noisy threshold per *pair* of instances (the defect B9's fresh threshold avoids)
    reused: list[int] = []
    for _ in range(DRAWS):
        noisy_threshold = svt.instance.threshold + float(source.normal(sigma_x))  # as start() draws it
        for run in (AboveThresholdRun(svt.instance, noisy_threshold, source),
                    AboveThresholdRun(svt.instance, noisy_threshold, source)):
            reused.append(_instance_halts(run.test, 1)[0])
    reused_halts = np.array(reused)
    assert _chi2_p(np.bincount(reused_halts, minlength=4), marginal) > ACCEPT_P, "the marginal is unchanged"
    p_pairs = _chi2_p(_pair_counts(reused_halts), product)
    assert p_pairs < REJECT_P, f"reused thresholds: pairs χ² p = {p_pairs:.2e} (reject below {REJECT_P})"


# -- B10 vectors not covered by tests/mechanisms/test_selection.py ------------------------------


@pytest.mark.parametrize(
    ("sensitivity", "sigma_x", "rho", "eps"),
    [(1 / 6946, 0.09, 0.575, 0.0238752), (1 / 5564, 0.04, 0.33, 0.0796178)],
)
def test_at_epsilon_max_bikes_and_london_b10(sensitivity, sigma_x, rho, eps):
    """B10 Thm 7 ε_max for Bikes and London at δ = 1/N, N = 1/Δ (6946 and 5564 records)."""
    assert at_epsilon_max(sensitivity, sigma_x, SQ3 * sigma_x, rho, sensitivity) == pytest.approx(eps, abs=1e-7)


def test_rnm_near_sigma_half_b10():
    """B10 NEAR row σ = 0.5 (Δ 1/300, d 364) → 0.0627271 (the other σ are in test_selection.py)."""
    assert rnm_epsilon(1.0, 1 / 300, 0.5, 364) == pytest.approx(0.0627271, abs=1e-7)
