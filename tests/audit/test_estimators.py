"""The ε lower-bound estimators on samples with known privacy (numpy noise, no database).

Confidence: each bound holds with probability ≥ 1 − α; the false-violation test runs 60
replicates of an exactly ε-DP mechanism at α = 0.05 and allows 9 violations (binomial(60, 0.05)
exceeds 8 with probability < 0.3%; the split makes the real rate far lower)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpch.audit.estimators import (
    classifier_bound,
    clopper_pearson_upper,
    combine,
    epsilon_from_rates,
    likelihood_ratio_bound,
    threshold_bound,
)


def test_clopper_pearson_zero_successes_is_closed_form():
    # k = 0: the upper bound solves (1 − p)^n = α
    n, alpha = 1000, 0.025
    assert float(clopper_pearson_upper(0, n, alpha)) == pytest.approx(1 - alpha ** (1 / n), rel=1e-9)
    assert float(clopper_pearson_upper(n, n, alpha)) == 1.0


def test_epsilon_from_rates_is_the_auditing_bound():
    # 1 − FNR − δ ≤ e^ε FPR: FPR 0.1, FNR 0.5, δ 0 → ε ≥ log 5
    assert float(epsilon_from_rates(0.1, 0.5, 0.0)) == pytest.approx(math.log(5))
    assert float(epsilon_from_rates(0.5, 0.1, 0.0)) == pytest.approx(math.log(0.5 / 0.1))  # the mirror
    assert float(epsilon_from_rates(0.6, 0.6, 0.0)) == 0.0


def test_exact_laplace_is_never_a_violation_beyond_alpha():
    rng = np.random.default_rng(11)
    violations = 0
    for _ in range(60):
        x0, x1 = rng.laplace(0, 1, 3000), rng.laplace(1, 1, 3000)  # exactly 1-DP
        if threshold_bound(x0, x1, confidence=0.95).epsilon_lb > 1.0:
            violations += 1
    assert violations <= 8, f"{violations}/60 false violations at α = 0.05"


def test_laplace_bound_is_tight_and_classifier_agrees():
    rng = np.random.default_rng(12)
    x0, x1 = rng.laplace(0, 1, 20000), rng.laplace(1, 1, 20000)
    t, c = threshold_bound(x0, x1, confidence=0.975), classifier_bound(x0, x1, confidence=0.975)
    assert 0.8 < t.epsilon_lb <= 1.0 and 0.8 < c.epsilon_lb <= 1.0, (t, c)
    both = combine([t, c])
    assert both.confidence == pytest.approx(0.95) and both.epsilon_lb == max(t.epsilon_lb, c.epsilon_lb)


def test_grouped_shift_is_found_by_the_linear_discriminant_or_its_coordinate():
    rng = np.random.default_rng(13)
    x0, x1 = rng.laplace(0, 1, (20000, 4)), rng.laplace(0, 1, (20000, 4))
    x1[:, 2] += 2.0  # a 2-DP shift in one group
    b = threshold_bound(x0, x1, labels=["a", "b", "c", "d"])
    assert b.statistic in ("c", "linear discriminant") and 1.0 < b.epsilon_lb <= 2.0, b


def test_likelihood_ratio_bound_on_discrete_outputs():
    """Randomized response at ε = 1 on each of 3 independent coordinates (ε 3 jointly): the
    summed likelihood ratio finds the joint loss, which no single coordinate shows. 100 000 draws
    per side: the Clopper–Pearson slack at the best test's rates is < 0.25 in ε, so ε_lb > 2.5
    holds unless the test is wrong; identical distributions give ε_lb ≤ 0.1 (a 95% bound)."""
    rng = np.random.default_rng(5)
    p = math.e / (1 + math.e)
    n = 100_000
    d = (rng.random((n, 3)) < p).astype(float)
    dprime = (rng.random((n, 3)) < 1 - p).astype(float)
    joint = likelihood_ratio_bound(d, dprime, confidence=0.95)
    assert 2.5 < joint.epsilon_lb <= 3.0, joint
    assert threshold_bound(d[:, :1], dprime[:, :1], confidence=0.95).epsilon_lb <= 1.0  # one coordinate
    same = likelihood_ratio_bound(d, (rng.random((n, 3)) < p).astype(float), confidence=0.95)
    assert same.epsilon_lb <= 0.1, same
