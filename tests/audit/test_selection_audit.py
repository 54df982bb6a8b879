"""Auditing selection outputs on their worst-case neighbours, at the mechanism level (no SQL yet):
report noisy max's released index against its pure ε (the estimators dpch audit already has), and
an Above Threshold instance's halting position against its ex-post ε_post(t) (dpch.audit.ex_post).
These are the observations a top-k query and a watch would hand to the audit (issue 16).

Worst cases (docs/algorithms.md B7, B8): for RNM with d = 2 queries in [0, 10], Δ 1, D = (9, 1) and
D′ = (10, 0), and the output 2 has loss exactly ε = log Φ(−8/(σ√2)) − log Φ(−10/(σ√2)); for Above
Threshold (ρ 0.9, σ_X 0.3, σ_Z √3σ_X, queries in [0, 1], Δ 0.2), D = (0.8, 0.2) and D′ = (1, 0)
and halting at t = 2 has loss exactly ε_post(2) = 1.0615 (Thm 17; the exactness is checked in
tests/mechanisms/test_selection_distribution.py).

Sample sizes and tolerances: 100 000 draws per side, fixed seeds, 95% confidence. The calibrated
mechanisms must not be flagged and must reach ≥ 80% of their claim (measured at these seeds: RNM
ε_lb 0.98 of 1.17, AT loss_lb 0.94 of 1.06); the under-charged variants (noise 0.7 × the declared
σ, still claiming the declared ε; true RNM loss 2.25) must be flagged (measured: ε_lb 1.40 > 1.17,
loss_lb 1.61 > 1.06).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpch.audit.estimators import combine, likelihood_ratio_bound, threshold_bound
from dpch.audit.ex_post import clopper_pearson_lower, ex_post_bound
from dpch.mechanisms.sampling import NoiseSource
from dpch.mechanisms.selection import GaussianAboveThreshold, GaussianReportNoisyMax

DRAWS = 100_000
SQ3 = math.sqrt(3.0)
#: the under-charged variants draw noise at this fraction of the declared σ
FACTOR = 0.7


@pytest.fixture
def source(monkeypatch: pytest.MonkeyPatch) -> NoiseSource:
    monkeypatch.setenv("DPCH_ALLOW_FIXED_SEED", "1")
    return NoiseSource(seed=2024_11_24)


@pytest.mark.parametrize("factor", [1.0, FACTOR])
def test_report_noisy_max_index_audited_against_its_pure_epsilon(source: NoiseSource, factor: float):
    declared = GaussianReportNoisyMax(sigma=3.0, sensitivity=1.0, lower=0.0, upper=10.0, d=2)
    drawn = GaussianReportNoisyMax(factor * 3.0, 1.0, 0.0, 10.0, 2)
    on_d = np.array([drawn.release(np.array([9.0, 1.0]), source).index for _ in range(DRAWS)], dtype=float)
    on_dprime = np.array([drawn.release(np.array([10.0, 0.0]), source).index for _ in range(DRAWS)], dtype=float)
    bound = combine([likelihood_ratio_bound(on_d, on_dprime, confidence=0.975),
                     threshold_bound(on_d, on_dprime, confidence=0.975)])
    claim = declared.epsilon
    assert claim == pytest.approx(1.169839703, abs=1e-7), "B10 row c 10, Δ 1, σ 3, d 2"
    if factor == 1.0:
        assert bound.epsilon_lb <= claim and bound.epsilon_lb > 0.8 * claim, f"ε_lb {bound.epsilon_lb:.3f}"
    else:
        assert bound.epsilon_lb > claim, f"σ × {factor}: ε_lb {bound.epsilon_lb:.3f} must exceed {claim:.3f}"


def _halting(mech: GaussianAboveThreshold, values: list[float], source: NoiseSource) -> float:
    run = mech.start(source)
    for t, q in enumerate(values, start=1):
        if run.test(q):
            return float(t)
    return float(len(values) + 1)  # no ⊤ within the queries: the instance is still open


@pytest.mark.parametrize("factor", [1.0, FACTOR])
def test_above_threshold_halting_time_audited_against_its_ex_post_epsilon(source: NoiseSource, factor: float):
    declared = GaussianAboveThreshold(sigma_x=0.3, sigma_z=SQ3 * 0.3, threshold=0.9, sensitivity=0.2)
    drawn = GaussianAboveThreshold(factor * 0.3, factor * SQ3 * 0.3, 0.9, 0.2)
    d, dprime = [0.8, 0.2], [1.0, 0.0]
    on_d = np.array([_halting(drawn, d, source) for _ in range(DRAWS)])
    on_dprime = np.array([_halting(drawn, dprime, source) for _ in range(DRAWS)])

    def claimed(t: float) -> float:  # an open instance has no ex-post claim (it is charged ε_max when closed)
        return declared.epsilon_post(int(t)) if t <= len(d) else math.inf

    bound = ex_post_bound(on_d, on_dprime, claimed, confidence=0.95)
    if factor == 1.0:
        assert bound.outcome == 2 and bound.order == "D/D′", bound
        assert bound.claimed == pytest.approx(1.0615, abs=1e-4)
        assert not bound.violation and bound.tightness > 0.8, bound
    else:
        assert bound.violation, f"σ × {factor}: {bound}"


def test_an_outcome_without_a_claim_is_never_chosen():
    on_d = np.array([1.0] * 50 + [3.0] * 950)
    on_dprime = np.array([1.0] * 60 + [3.0] * 940)
    bound = ex_post_bound(on_d, on_dprime, lambda t: 5.0 if t == 1 else math.inf)
    assert bound.outcome == 1.0
    with pytest.raises(ValueError, match="no outcome with a finite claimed"):
        ex_post_bound(on_d, on_dprime, lambda t: math.inf)


def test_clopper_pearson_lower_mirrors_the_upper_bound():
    # k = n: the lower bound solves p^n = α
    assert clopper_pearson_lower(1000, 1000, 0.025) == pytest.approx(0.025 ** (1 / 1000), rel=1e-9)
    assert clopper_pearson_lower(0, 1000, 0.025) == 0.0
