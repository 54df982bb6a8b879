"""Gaussian report noisy max over wide score ranges (issue 24, item 4: ``dp_score_max = 1e300`` raised
IndexError before the charge).

Thm 8's ε (Lebensold et al. 2024; ALGORITHMS.md B7) is a difference of two log-expectations whose
integrands have their mass at z ≈ k·c/((k+1)σ). The old quadrature looked in [−60, 60] only: from
c/σ ≈ 60 it lost the mass (ε over-estimated: more noise than needed) and from c/σ ≈ 10⁸ it found
nothing (IndexError). ε is now computed with the quadratic part of the exponent taken out exactly
(selection_bounds._log_rnm_integral), which these tests check against two independent methods:

- d = 2: B7's closed form log Φ(−(c−2Δ)/(σ√2)) − log Φ(−c/(σ√2)), exact in log_ndtr's range;
- any d: scipy.quad around the integrand's mode, located by a separate optimizer.

Then the whole query: a Gaussian top-k with dp_score_max = 1e300 is calibrated (every round within
its ε), charged what EXPLAIN says, and returns k keys; a range whose width is not a finite number is
refused before the charge.
"""

from __future__ import annotations

import math

import pytest
from scipy.integrate import quad
from scipy.optimize import minimize_scalar
from scipy.special import log_ndtr

from dpch import Budget
from dpch.mechanisms.selection import GaussianReportNoisyMax
from dpch.mechanisms.selection_bounds import rnm_epsilon, rnm_epsilon_two
from tests.helpers import ledger_rows, make_table, refused_uncharged


def _quad_epsilon(c: float, delta: float, sigma: float, d: int) -> float:
    """Thm 8 by adaptive quadrature around each integrand's mode (independent of dpch's integrator)."""
    k = d - 1

    def log_expectation(shift: float) -> float:
        def h(z: float) -> float:
            return -0.5 * z * z + k * float(log_ndtr(z - shift))

        mode = float(minimize_scalar(lambda z: -h(z), bracket=(0.0, shift + 1.0)).x)
        top = h(mode)
        value, _ = quad(lambda z: math.exp(h(z) - top), mode - 40, mode + 40, points=[mode], limit=400,
                        epsabs=0.0, epsrel=1e-12)
        return top + math.log(value) - 0.5 * math.log(2 * math.pi)

    return log_expectation((c - 2 * delta) / sigma) - log_expectation(c / sigma)


@pytest.mark.parametrize(("c", "sigma"), [(1e2, 1.0), (1e3, 5.0), (1e4, 20.0), (1e6, 100.0)])
def test_two_scores_match_the_closed_form_far_beyond_the_old_window(c, sigma):
    """c/σ = 100 … 10⁴: the mass sits at z = c/(2σ), beyond the old [−60, 60]."""
    assert rnm_epsilon(c, 1.0, sigma, 2) == pytest.approx(rnm_epsilon_two(c, 1.0, sigma), rel=1e-9)


@pytest.mark.parametrize(("c", "sigma", "d"), [
    (1e5, 632.0, 4),      # c/σ ≈ 158: the old window gave 0.933 for 0.376
    (1e5, 632.0, 50),     # the old window gave 15.2 for 0.492
    (1e6, 2000.0, 4),
    (1e4, 200.0, 365),
])
def test_many_scores_match_an_independent_quadrature(c, sigma, d):
    assert rnm_epsilon(c, 1.0, sigma, d) == pytest.approx(_quad_epsilon(c, 1.0, sigma, d), rel=1e-8)


def test_the_quadratic_part_dominates_for_astronomic_ranges():
    """c = 10³⁰⁰: log Φ of the shifts is −10²⁹⁹-sized, but ε is of order k·Δ·c/((k+1)σ²), which the
    reduced form computes as a product: 1 for d = 2 at σ = 10¹⁵⁰ (closed form: Δc/σ² = 1)."""
    assert rnm_epsilon(1e300, 1.0, 1e150, 2) == pytest.approx(1.0, rel=1e-9)
    assert rnm_epsilon(1e300, 1.0, 1e150, 4) == pytest.approx(1.5, rel=1e-9)


@pytest.mark.parametrize("upper", [1e8, 1e100, 1e300])
def test_calibration_to_an_epsilon_holds_for_wide_ranges(upper):
    rnm = GaussianReportNoisyMax.for_epsilon(0.25, 1.0, 0.0, upper, 8)
    assert rnm.epsilon <= 0.25
    assert rnm.epsilon == pytest.approx(0.25, rel=1e-5)
    assert rnm_epsilon(upper, 1.0, rnm.sigma * 0.999, 8) > 0.25  # the smallest σ: a little less is too little


COLUMNS = "uid UInt32, page String COMMENT 'dp: public, values=[\"a\", \"b\", \"c\", \"d\"]'"
TOP = ("SELECT page, count() AS n FROM t GROUP BY page ORDER BY n DESC LIMIT 2 "
       "SETTINGS dp_select = 'top', dp_mechanism = 'gaussian', dp_delta = 1e-6")


@pytest.fixture
def session(connect):
    s = connect(analyst="wide", default_budget=Budget(10.0, 1e-3), seed=3)
    rows = [(i, "abcd"[i % 4]) for i in range(200)]
    make_table(s, COLUMNS, rows, ["uid", "page"], comment="dp: privacy_unit=uid, max_rows_per_unit=1")
    return s


def test_gaussian_top_k_with_an_astronomic_score_bound_runs(session):
    sql = TOP + ", dp_score_max = 1e300"
    explained = session.explain(sql)
    release = session.query(sql)
    assert len(release.rows) == 2 and {row[0] for row in release.rows} <= set("abcd")
    assert release.cost.epsilon == pytest.approx(explained.cost.epsilon) and release.cost.epsilon <= 0.5
    assert ledger_rows(session) == 1


def test_a_score_range_wider_than_a_float_is_refused_before_the_charge(session):
    err = refused_uncharged(session, TOP + ", dp_score_min = -1e308, dp_score_max = 1e308")
    assert "too wide" in err.message and "dp_score_max" in (err.hint or "")
