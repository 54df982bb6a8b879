"""Laplace and Gaussian releases: distribution, lattice outputs, honest half-widths.

KS tests at p = 1e-4 with 10^5 coordinates (fixed seeds). Continuous KS is used only for
the real-valued (grid) releases, whose grid is 2^20 times finer than the noise, so the
discreteness cannot move the KS statistic by more than ~1e-6 (far below the critical value
0.0061); integer releases are tested with exact pmf χ² in test_exact.py.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from dpch.mechanisms import GaussianMechanism, LaplaceMechanism
from dpch.mechanisms.discrete import discrete_laplace_tail
from dpch.mechanisms.grid import GaussianGrid, LaplaceGrid

N = 100_000
P_CRIT = 1e-4


def binomial_band(p: float, n: int, z: float = 3.29) -> float:
    """Half-width of the 99.9% normal-approximation binomial band for a rate p over n trials."""
    return z * np.sqrt(p * (1 - p) / n)


def test_laplace_real_release_is_laplace(source):
    mech = LaplaceMechanism(epsilon=0.7, sensitivity=2.0)
    values = np.full(N, 1234.56789)
    noise = mech.release(values, source) - values
    p = stats.kstest(noise, stats.laplace(scale=mech.scale).cdf).pvalue
    assert p > P_CRIT, f"grid Laplace noise vs Lap({mech.scale:.3f}): KS p={p:.2e} ≤ {P_CRIT}"


def test_laplace_ks_rejects_wrong_scale(source):
    """Negative control: a release at 0.83× the scale (Lap(b) vs Lap(1.2·b)) is rejected."""
    mech = LaplaceMechanism(epsilon=0.7 * 1.2, sensitivity=2.0)
    noise = mech.release(np.zeros(N), source)
    p = stats.kstest(noise, stats.laplace(scale=2.0 / 0.7).cdf).pvalue
    assert p < P_CRIT, f"KS should reject the wrong scale, p={p:.2e}"


def test_gaussian_real_release_is_gaussian(source):
    mech = GaussianMechanism(epsilon=1.0, delta=1e-5, sensitivity=1.0)
    values = np.full(N, -77.125)
    noise = mech.release(values, source) - values
    p = stats.kstest(noise, stats.norm(scale=mech.sigma).cdf).pvalue
    assert p > P_CRIT, f"grid Gaussian noise vs N(0, {mech.sigma:.3f}²): KS p={p:.2e}"


def test_gaussian_ks_rejects_wrong_sigma(source):
    mech = GaussianMechanism(epsilon=1.0, delta=1e-5, sensitivity=1.1)
    noise = mech.release(np.zeros(N), source)
    sigma = GaussianMechanism(epsilon=1.0, delta=1e-5, sensitivity=1.0).sigma
    p = stats.kstest(noise, stats.norm(scale=sigma).cdf).pvalue
    assert p < P_CRIT, f"KS should reject σ×1.1, p={p:.2e}"


def test_real_releases_are_grid_points(source):
    """Mironov defence: every output is an integer multiple of the public grid width."""
    values = np.random.default_rng(3).uniform(-1e4, 1e4, 1000)
    lap = LaplaceMechanism(0.3, 5.0)
    gau = GaussianMechanism(0.5, 1e-6, 5.0)
    widths = {
        "laplace": LaplaceGrid.for_release(5.0, 0.3, values.size).width,
        "gaussian": GaussianGrid.for_release(5.0, 0.5, 1e-6, gau.sigma, values.size).width,
    }
    for mech in (lap, gau):
        ratio = mech.release(values, source) / widths[mech.name]
        assert np.all(ratio == np.rint(ratio)), f"{mech.name} outputs off the 2^k grid"
        # and the grid is far finer than the noise
        assert widths[mech.name] < mech.half_width(0.5) * 2.0**-18


@pytest.mark.parametrize(
    "mech",
    [
        LaplaceMechanism(0.5, 1.0, integer=True),
        LaplaceMechanism(0.5, 1.0),
        GaussianMechanism(0.5, 1e-6, 1.0, integer=True),
        GaussianMechanism(0.5, 1e-6, 1.0),
        GaussianMechanism(2.0, 1e-5, 3.0, integer=True),
    ],
    ids=["lap-int", "lap-real", "gauss-int", "gauss-real", "gauss-int-3"],
)
def test_half_width_coverage(mech, source):
    """Coverage of ±half_width(0.9) lies in the 99.9% binomial band around ≥ 0.9."""
    n = 50_000
    values = np.full(n, 10.0)
    err = np.abs(mech.release(values, source) - values)
    rate = float(np.mean(err <= mech.half_width(0.9)))
    assert rate >= 0.9 - binomial_band(0.9, n), f"coverage {rate:.4f} below 0.9 band"
    if not mech.integer:  # integer intervals jump; real ones should be nearly tight
        assert rate <= 0.9 + binomial_band(0.9, n) + 0.001, f"coverage {rate:.4f}: half-width far too wide"


def test_integer_releases_are_integers(source):
    for mech in (LaplaceMechanism(1.0, 1.0, True), GaussianMechanism(1.0, 1e-5, 1.0, True)):
        out = mech.release(np.arange(100, dtype=float), source)
        assert np.all(out == np.rint(out)), f"{mech.name} integer release not integer-valued"


def test_discrete_laplace_half_width_is_exact():
    mech = LaplaceMechanism(1.0, 1.0, integer=True)
    k = mech.half_width(0.95)
    assert discrete_laplace_tail(1.0, int(k)) <= 0.05 < discrete_laplace_tail(1.0, int(k) - 1)


def test_integer_gaussian_keeps_rho_and_delta():
    """CKS Thm 4 (ρ) and Thm 7 (δ): the integer mechanism's σ is never below the analytic one."""
    real = GaussianMechanism(1.0, 1e-5, 1.0)
    integer = GaussianMechanism(1.0, 1e-5, 1.0, integer=True)
    assert integer.sigma >= real.sigma
    assert integer.cost.rho <= real.cost.rho


@pytest.mark.parametrize("integer", [False, True])
def test_accuracy_first_inverses(integer):
    """for_half_width returns the least-private-cost mechanism meeting the interval."""
    lap = LaplaceMechanism.for_half_width(10.0, 0.95, 2.0, integer)
    assert lap.half_width(0.95) <= 10.0
    assert LaplaceMechanism(lap.epsilon * 0.99, 2.0, integer).half_width(0.95) > 10.0 - 1.0
    gau = GaussianMechanism.for_half_width(10.0, 0.95, 1e-6, 2.0, integer)
    assert gau.half_width(0.95) <= 10.0
    assert GaussianMechanism(gau.epsilon * 0.99, 1e-6, 2.0, integer).half_width(0.95) > 9.0
