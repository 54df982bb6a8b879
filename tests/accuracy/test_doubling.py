"""The doubling baseline (Rogers et al. 2023, §7.1) and the Brownian relative-error run (same paper,
§7): their charges follow
the formulas, and on the §7.2 synthetic data Brownian noise reduction returns more counts than
doubling at a precision no more than a few points lower (a small version of the benchmark)."""

from __future__ import annotations

import numpy as np
import pytest

from dpch.accuracy.doubling import (
    brownian_relative,
    doubling_relative,
    relative_error_experiment,
    relative_error_trial,
    zipf_counts,
)
from dpch.mechanisms.zcdp import rho_max


def test_doubling_charges_every_release_and_brownian_only_the_last():
    rng = np.random.default_rng(5)
    for value in (50.0, 400.0, 3000.0):
        d = doubling_relative(value, 1.0, 0.1, rng)
        # Σ_{i<steps} 1e-4·2^i / 2 = 1e-4·(2^steps − 1)/2
        assert d.rho == pytest.approx(1e-4 * (2**d.steps - 1) / 2, rel=1e-12)
        assert d.value is not None
        b = brownian_relative(value, 1.0, 0.1, rng)
        grid = np.linspace(1e-4, 2.0, 1000)
        assert b.value is not None and b.rho == pytest.approx(grid[b.steps - 1] / 2, rel=1e-12)
    # out of reach within the budget: withheld, and the whole grid's last point is charged
    b = brownian_relative(0.0, 0.01, 0.1, rng)
    assert b.value is None and b.rho == pytest.approx(0.01)
    d = doubling_relative(0.0, 0.01, 0.1, rng)
    assert d.value is None and d.rho <= 0.01


def test_a_trial_never_spends_more_than_the_zcdp_budget():
    rng = np.random.default_rng(9)
    counts = zipf_counts(8000, rng)
    assert counts.sum() == 8000 and counts.size == 300
    for method in ("brownian", "doubling"):
        res = relative_error_trial(counts, method, rng)
        assert 0 < res.returned <= 300 and 0.0 <= res.precision <= 1.0
    assert rho_max(10.0, 1e-6) == pytest.approx(1.353015, abs=1e-6)


def test_brownian_returns_more_results_than_doubling_on_zipf_data():
    """40 trials at n = 32 000 (the README table uses 1000 trials over all n). Stated tolerance:
    the ratio's standard error at 40 trials is ≈ 0.01, far below the margin to 1.3."""
    res = relative_error_experiment(32_000, 40, seed=3, methods=("brownian", "doubling"))
    b, d = res["brownian"], res["doubling"]
    assert b["returned_mean"] >= 1.3 * d["returned_mean"], res
    assert b["precision_mean"] >= d["precision_mean"] - 0.03, res
