"""Calibration that cannot be represented is refused before the charge (issue 12, defects 2 and 9;
docs/design.md rule 6), and calibration edge cases that surviving mutants showed were unpinned.

Each refusal goes through ``session.query`` and asserts that no ledger row was written. The
limits come from the exact samplers (:mod:`dpch.mechanisms.exact`: an integer scale or σ² must
be below 2^50) and are computed from the plan's own sensitivity, not guessed.
"""

from __future__ import annotations

import math

import pytest

from dpch.accounting.budget import Budget
from dpch.errors import QueryRejected
from dpch.mechanisms import calibration
from dpch.mechanisms.gaussian import GaussianMechanism
from dpch.mechanisms.laplace import LaplaceMechanism
from dpch.mechanisms.representable import MAX_INTEGER_SCALE, MIN_INTEGER_SIGMA
from dpch.mechanisms.zcdp import sigma_for_zcdp
from tests.helpers import make_table

COLUMNS = "uid UInt64, x Float64 COMMENT 'dp: bounds=[0, 100]', n Int64 COMMENT 'dp: bounds=[0, 1000000]'"


@pytest.fixture
def session(connect):
    s = connect(analyst="guards", default_budget=Budget(1e9, 0.5))
    make_table(s, COLUMNS, [(u, float(u), u * 1000) for u in range(1, 40)], ["uid", "x", "n"])
    return s


def _refused(session, sql: str, match: str, **options) -> QueryRejected:
    before = session.budget().releases
    with pytest.raises(QueryRejected, match=match) as info:
        session.query(sql, **options)
    assert session.budget().releases == before, "a refused query must not be charged"
    assert "Traceback" not in str(info.value)
    return info.value


def _sensitivity(session, sql: str) -> float:
    plan, _ = session.plan(sql)
    (measure,) = plan.measures
    return measure.sensitivity


@pytest.mark.parametrize("epsilon", [math.inf, math.nan, -1.0, 0.0])
def test_non_finite_or_non_positive_epsilon_is_refused(session, epsilon):
    _refused(session, "SELECT count() FROM t", "dp_epsilon", epsilon=epsilon)


@pytest.mark.parametrize("delta", [math.inf, math.nan, 1.0, -1e-9])
def test_non_finite_or_out_of_range_delta_is_refused(session, delta):
    _refused(session, "SELECT count() FROM t", "dp_delta", epsilon=1.0, delta=delta)


@pytest.mark.parametrize("sql", ["SELECT count() FROM t", "SELECT sum(n) FROM t"])
def test_integer_laplace_scale_at_2_to_the_50_is_refused_before_the_charge(session, sql):
    """The discrete Laplace takes scales Δ1/ε below 2^50 (exact.rational_at_least)."""
    sens = _sensitivity(session, sql)
    error = _refused(session, sql, "dp_epsilon", epsilon=sens / MAX_INTEGER_SCALE)  # scale exactly 2^50
    assert "2^50" in error.message
    _refused(session, sql, "dp_epsilon", epsilon=sens / MAX_INTEGER_SCALE / 1e3)
    # control: a scale of 2^48 is sampled, and charged once
    before = session.budget().releases
    session.query(sql, epsilon=sens / 2.0**48)
    assert session.budget().releases == before + 1


@pytest.mark.parametrize("epsilon", [1e-300, 1e-320])  # Δ1/ε overflows to inf at 1e-320
def test_tiny_epsilon_is_refused_not_a_traceback(session, epsilon):
    for sql in ("SELECT count() FROM t", "SELECT sum(x) FROM t", "SELECT avg(x) FROM t"):
        _refused(session, sql, "dp_epsilon", epsilon=epsilon)


@pytest.mark.parametrize("sql", ["SELECT count() FROM t", "SELECT sum(x) FROM t"])
def test_tiny_epsilon_and_delta_with_the_gaussian_mechanism_are_refused(session, sql):
    # σ ≈ Δ/(δ·√(2π)) at ε → 0: ~1e299, so σ² overflows (integer) or the grid is too fine (real)
    _refused(session, sql, "dp_epsilon", epsilon=1e-300, delta=1e-300, mechanism="gaussian")


def test_real_valued_gaussian_too_fine_a_grid_is_refused(session):
    """The grid sampler needs σ/Δ2 below about 2^14 per coordinate (dpch.mechanisms.grid)."""
    _refused(session, "SELECT sum(x) FROM t", "dp_epsilon", epsilon=1e-9, delta=1e-6, mechanism="gaussian")
    before = session.budget().releases
    session.query("SELECT sum(x) FROM t", epsilon=1.0, delta=1e-6, mechanism="gaussian")  # control
    assert session.budget().releases == before + 1


def test_large_epsilon_integer_gaussian_is_sampled_at_the_floor_sigma(session):
    """σ below MIN_INTEGER_SIGMA never finishes sampling; it is raised to the floor when
    CKS Thm 7 still gives (ε, δ) there — more noise, never less privacy."""
    mech = GaussianMechanism(50.0, 1e-6, 1.0, integer=True)
    assert calibration.analytic_gaussian_sigma(50.0, 1e-6, 1.0) < MIN_INTEGER_SIGMA
    assert mech.sigma == MIN_INTEGER_SIGMA
    assert mech.cost.rho == pytest.approx(1.0 / (2 * MIN_INTEGER_SIGMA**2))
    release = session.query("SELECT count() FROM t", epsilon=50.0, delta=1e-6, mechanism="gaussian")
    assert release.rows[0][0] == pytest.approx(39, abs=10)


# ------------------------------------------------------------------ the mechanisms and calibration directly


@pytest.mark.parametrize("epsilon", [math.inf, math.nan, 0.0, -0.5])
def test_calibration_refuses_a_non_finite_epsilon(epsilon):
    with pytest.raises(ValueError):
        calibration.laplace_scale(1.0, epsilon)
    with pytest.raises(ValueError):
        calibration.analytic_gaussian_sigma(epsilon, 1e-6, 1.0)
    with pytest.raises(ValueError):
        calibration.classic_gaussian_sigma(epsilon, 1e-6, 1.0)
    with pytest.raises(QueryRejected, match="dp_epsilon"):
        LaplaceMechanism(epsilon, 1.0)
    with pytest.raises(QueryRejected, match="dp_epsilon"):
        GaussianMechanism(epsilon, 1e-6, 1.0)


@pytest.mark.parametrize("delta", [math.inf, math.nan, 0.0, 1.0])
def test_calibration_refuses_a_delta_outside_0_1(delta):
    with pytest.raises(ValueError):
        calibration.analytic_gaussian_sigma(1.0, delta, 1.0)
    with pytest.raises(QueryRejected, match="dp_delta"):
        GaussianMechanism(1.0, delta, 1.0)


def test_laplace_scale_is_sensitivity_over_epsilon():
    assert calibration.laplace_scale(3.0, 0.5) == 6.0
    assert LaplaceMechanism(0.5, 3.0).scale == 6.0


def test_zero_sensitivity_needs_no_noise_and_is_never_refused():
    assert GaussianMechanism(1e-300, 1e-6, 0.0).sigma == 0.0
    assert GaussianMechanism(1.0, 1e-6, 0.0).cost.rho == 0.0
    assert GaussianMechanism(1.0, 1e-6, 0.0).half_width() == 0.0
    assert LaplaceMechanism(1e-300, 0.0).half_width() == 0.0


@pytest.mark.parametrize("integer", [True, False])
def test_vector_gaussian_at_dimension_2_uses_the_zcdp_calibration(integer):
    """Two coordinates already need the vector (zCDP, CKS Cor 13) calibration, not only four."""
    eps, delta, sens = 0.5, 1e-6, 10.0
    scalar = GaussianMechanism(eps, delta, sens, integer=integer)
    pair = GaussianMechanism(eps, delta, sens, integer=integer, dimension=2)
    assert pair.sigma == pytest.approx(max(scalar.sigma, sigma_for_zcdp(eps, delta, sens)))
    assert pair.sigma > scalar.sigma
    # the σ meets δ by the CKS Cor 13 conversion, brute-forced here over α
    rho = sens**2 / (2 * pair.sigma**2)
    brute = min(math.exp((a - 1) * (a * rho - eps)) / (a - 1) * (1 - 1 / a) ** a
                for a in (1 + i / 200 for i in range(1, 20_000)))
    assert brute <= delta * (1 + 1e-3)
    assert GaussianMechanism(eps, delta, sens, integer=integer, dimension=1).sigma == scalar.sigma


# ------------------------------------------------------------------ discrete distributions: exact tails


@pytest.mark.parametrize("scale", [0.3, 1.0, 2.5, 17.0, 400.0])
@pytest.mark.parametrize("confidence", [0.5, 0.9, 0.95, 0.999])
def test_discrete_laplace_half_width_is_the_smallest_k(scale, confidence):
    """P(|Z| > k) = 2p^{k+1}/(1+p), p = e^{−1/b} (written out here): the half-width is the least k with tail ≤ β."""
    from dpch.mechanisms.discrete import discrete_laplace_half_width

    p, beta = math.exp(-1 / scale), 1 - confidence

    def tail(k: int) -> float:
        return 1.0 if k < 0 else 2 * p ** (k + 1) / (1 + p)

    k = discrete_laplace_half_width(scale, confidence)
    assert tail(k) <= beta < tail(k - 1)


def test_discrete_gaussian_delta_of_a_zero_shift_is_zero():
    from dpch.mechanisms.discrete import discrete_gaussian_delta

    assert discrete_gaussian_delta(1.0, 2.0, 0) == 0.0
    assert discrete_gaussian_delta(1.0, 2.0, 1) > 0.0  # control


@pytest.mark.parametrize("k", [0, 1500, 6000, 9000])
def test_discrete_gaussian_tail_above_the_exact_limit_brackets_the_continuous_tail(k):
    """Above EXACT_SIGMA_LIMIT the tail is bounded by integrals: P(|Y| > k) ≤ 2Φ̄(k/σ), and it is
    at least 2Φ̄((k+1)/σ)/(1 + 3e^{−2π²σ²}) (CKS; the slack is 1 in floating point at σ = 3000)."""
    from scipy.special import ndtr

    from dpch.mechanisms.discrete import EXACT_SIGMA_LIMIT, discrete_gaussian_tail

    sigma = 1.5 * EXACT_SIGMA_LIMIT
    tail = discrete_gaussian_tail(sigma, k)
    assert min(1.0, 2 * float(ndtr(-(k + 1) / sigma))) <= tail <= min(1.0, 2 * float(ndtr(-k / sigma))) + 1e-15


@pytest.mark.parametrize(("eps", "delta", "sens"), [(1.0, 1e-6, 1.0), (0.1, 1e-9, 37.5), (3.0, 1e-3, 0.01)])
def test_real_gaussian_half_width_covers_the_noise_actually_sampled(eps, delta, sens):
    """The grid release draws N_Z(0, σ_grid²) in units of the grid width λ and rounds by ≤ λ/2:
    the reported half-width must cover σ_grid·λ·Φ⁻¹(1 − β/2) + λ/2 for what the grid really uses."""
    from scipy.special import ndtri

    from dpch.mechanisms.grid import GaussianGrid

    mech = GaussianMechanism(eps, delta, sens)
    grid = GaussianGrid.for_release(sens, eps, delta, mech.sigma, 1)
    for confidence in (0.9, 0.95, 0.999):
        z = float(ndtri(1 - (1 - confidence) / 2))
        needed = math.sqrt(float(grid.sigma2)) * grid.width * z + grid.width / 2
        assert mech.half_width(confidence) >= needed


@pytest.mark.parametrize(("eps", "sens"), [(1.0, 1.0), (0.1, 37.5), (3.0, 0.01)])
def test_real_laplace_half_width_covers_the_noise_actually_sampled(eps, sens):
    """The grid release draws a discrete Laplace of scale t (grid units, exact tail
    P(|Z| > k) = 2p^{k+1}/(1+p)) times the width λ, after rounding by ≤ λ/2."""
    from dpch.mechanisms.grid import LaplaceGrid

    mech = LaplaceMechanism(eps, sens)
    grid = LaplaceGrid.for_release(sens, eps, 1)
    p = math.exp(-1 / float(grid.scale))
    for confidence in (0.9, 0.95, 0.999):
        beta = 1 - confidence
        k = math.ceil(float(grid.scale) * math.log(2 / (beta * (1 + p))) - 1)  # least k with tail ≤ β, ± 1
        while 2 * p ** k / (1 + p) <= beta:
            k -= 1
        needed = k * grid.width + grid.width / 2
        assert mech.half_width(confidence) >= needed


def test_for_half_width_defaults_to_one_coordinate():
    assert GaussianMechanism.for_half_width(10.0, 0.95, 1e-6, 2.0).dimension == 1
    mech = LaplaceMechanism.for_half_width(10.0, 0.95, 2.0)
    assert mech.half_width(0.95) <= 10.0
