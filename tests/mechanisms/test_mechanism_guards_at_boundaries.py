"""Every guard on a bad ε, δ, σ, scale, sensitivity, k or probability in dpch/mechanisms/ at its boundary
(issue 31, "Test each guard at its boundary: every ``raise`` on bad ε, δ, G, σ or k has a test that
reaches it with the boundary value and the first bad one").

The model is tests/privacy/test_guards_at_boundaries.py. Each guard is reached twice: with the boundary
value it must accept (for an open interval, the float next to the excluded end; for an integer bound,
the bound itself), checked for its *value*, and with the first bad value (the float just past the
boundary: −ulp(0) = −5e-324 below 0, the excluded end itself, the next integer), checked for the
refusal's *words*. NaN is tried on every float guard: ``if x <= 0: raise`` lets a NaN through (every
comparison with NaN is false), so the guards are written ``if not x > 0: raise``. A guard moved by one
(``<`` → ``<=``), flipped, or turned into ``pass`` fails one of the two.

Holes these tests found (fixed in the modules, each with a comment citing its theorem):

- the Brownian boundaries (Whitehouse et al. 2022, Thm 3.6) took any δ: δ ≥ 1 gave b < 0 and a
  negative time, a NaN δ or ε a NaN time; a subnormal δ made log(1/δ) infinite (a* = inf − inf = NaN);
- a NaN Brownian time, LNR/RAT ε, or Laplace-path time passed ``<=`` checks; Z_NaN of the Laplace path
  was 0, i.e. Reduced Above Threshold's threshold noise vanished;
- Gaussian Above Threshold's Thm 7 (Lebensold et al. 2024) took σ_X < 0 (then σ_Z ≥ √3·σ_X holds for
  every σ_Z), δ ≥ 1 (a *smaller* ε_max), and NaN σ_Z, threshold, lower bound or δ (a NaN ε_max);
- the sparse vector's halt ``spent + ε_max ≥ budget`` never fired on a NaN budget;
- Report Noisy Max's ε was NaN for a σ so small that c/σ overflows;
- a negative Δ2 gave the Gaussian mechanism σ = 0 (no noise, ρ = 0).

Expected values are the closed forms in the docstrings, written out here: ψ^L and ψ^M (Thm 3.6), the
time Δ2(Δ2/2 + b)/(ε − Δ2·a), ε_max = A + 2√(AB) (Thm 7), ε(d = 2) = log Φ(−(c−2Δ)/(σ√2)) −
log Φ(−c/(σ√2)) (B7), ε_post(1) = log Φ((a−ρ+Δ)/s) − log Φ((a−ρ)/s) with s = √(σ_X² + σ_Z²) (Thm 17).
"""

from __future__ import annotations

import math
import sys
from fractions import Fraction

import numpy as np
import pytest
from scipy.special import log_ndtr

from dpch.errors import QueryRejected
from dpch.mechanisms import exact, representable
from dpch.mechanisms.boundaries import LinearBoundary, MixtureBoundary
from dpch.mechanisms.brownian import BrownianMechanism, bridge_step, simulated_path
from dpch.mechanisms.exponential import ExponentialMechanism, quantile_utilities
from dpch.mechanisms.gaussian import GaussianMechanism
from dpch.mechanisms.grid import GaussianGrid, LaplaceGrid
from dpch.mechanisms.laplace import LaplaceMechanism
from dpch.mechanisms.lnr import LaplaceNoiseReduction, LaplacePath, markov_laplace_path
from dpch.mechanisms.rat import ReducedAboveThreshold, halting_margins
from dpch.mechanisms.selection import GaussianAboveThreshold, GaussianReportNoisyMax
from dpch.mechanisms.selection_bounds import at_epsilon_max, at_epsilon_post, rnm_epsilon
from dpch.mechanisms.svt import BudgetExhausted, GaussianSparseVector
from dpch.mechanisms.top_k import PeelingTopK, gumbel_top_k

#: the first float below 0
BELOW_ZERO = -math.ulp(0.0)
#: the first float above 0 (subnormal: 1/x overflows, so log(1/δ) must be computed as −log δ)
ABOVE_ZERO = math.ulp(0.0)
#: the last float below 1
BELOW_ONE = math.nextafter(1.0, 0.0)
NAN = math.nan


def below(x: float) -> float:
    return math.nextafter(x, -math.inf)


def above(x: float) -> float:
    return math.nextafter(x, math.inf)


# ------------------------------------------------------------------ boundaries.py: δ in (0, 1), a > 0, ρ > 0, ε


def _psi_linear(t: float, a: float, delta: float, d: float = 1.0) -> float:
    """Thm 3.6: (Δ2/t)(Δ2/2 + b) + Δ2·a with 2ab = log(1/δ)."""
    return (d / t) * (d / 2 + -math.log(delta) / (2 * a)) + d * a


def _psi_mixture(t: float, rho: float, delta: float, d: float = 1.0) -> float:
    """Thm 3.6: Δ2²/(2t) + (Δ2/t)·√(2(t+ρ)·log((1/δ)·√((t+ρ)/ρ)))."""
    return d * d / (2 * t) + (d / t) * math.sqrt(2 * (t + rho) * (-math.log(delta) + 0.5 * math.log((t + rho) / rho)))


BOUNDARY_DELTAS = [
    ("linear", lambda d: LinearBoundary(0.2, d)),
    ("linear optimal", lambda d: LinearBoundary.optimal(0.5, d)),
    ("mixture", lambda d: MixtureBoundary(5.0, d)),
]


@pytest.mark.parametrize(("name", "build"), BOUNDARY_DELTAS, ids=[n for n, _ in BOUNDARY_DELTAS])
@pytest.mark.parametrize("delta", [ABOVE_ZERO, sys.float_info.min, 1e-6, BELOW_ONE],
                         ids=["ulp(0)", "smallest normal", "1e-6", "just below 1"])
def test_a_boundary_delta_just_inside_0_1_is_accepted_with_its_psi(name, build, delta):
    boundary = build(delta)
    assert boundary.delta == delta
    expected = (_psi_linear(10.0, boundary.a, delta) if isinstance(boundary, LinearBoundary)
                else _psi_mixture(10.0, boundary.rho, delta))
    assert math.isfinite(boundary(10.0)) and boundary(10.0) == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize(("name", "build"), BOUNDARY_DELTAS, ids=[n for n, _ in BOUNDARY_DELTAS])
@pytest.mark.parametrize("delta", [0.0, 1.0, BELOW_ZERO, above(1.0), 1.5, NAN],
                         ids=["0", "1", "-ulp(0)", "just above 1", "1.5", "nan"])
def test_a_boundary_delta_outside_0_1_is_refused(name, build, delta):
    with pytest.raises(ValueError, match=r"δ must be in \(0, 1\), got "):
        build(delta)


def test_the_optimal_linear_boundary_at_a_subnormal_delta_is_finite():
    """a* = (√(L² + Lε) − L)/Δ2 with L = −log δ = 744.4 (log(1/δ) was inf, and a* = inf − inf = NaN)."""
    big_l = -math.log(ABOVE_ZERO)
    boundary = LinearBoundary.optimal(0.5, ABOVE_ZERO)
    assert boundary.a == pytest.approx(math.sqrt(big_l**2 + big_l * 0.5) - big_l, rel=1e-9)
    assert boundary(boundary.time_for(0.5)) == pytest.approx(0.5, rel=1e-9)


def test_a_linear_boundary_needs_a_positive_a():
    assert LinearBoundary(ABOVE_ZERO, 1e-6).a == ABOVE_ZERO  # b = L/(2a) overflows to inf: ψ = inf, never too little
    assert LinearBoundary(ABOVE_ZERO, 1e-6).time_for(1.0) == math.inf
    for a in (0.0, BELOW_ZERO, -0.2, NAN):
        with pytest.raises(ValueError, match="the linear boundary needs a > 0, got "):
            LinearBoundary(a, 1e-6)


def test_a_mixture_boundary_needs_a_positive_rho():
    t = 2.0**-60  # (t + ρ)/ρ = 2^1014 is finite at ρ = ulp(0)
    assert MixtureBoundary(ABOVE_ZERO, 1e-6)(t) == pytest.approx(_psi_mixture(t, ABOVE_ZERO, 1e-6), rel=1e-12)
    for rho in (0.0, BELOW_ZERO, -5.0, NAN):
        with pytest.raises(ValueError, match="the mixture boundary needs ρ > 0, got "):
            MixtureBoundary(rho, 1e-6)


def test_the_linear_time_is_finite_just_above_the_floor_and_refused_at_it():
    """time_for needs ε > Δ2·a: the float above the floor gives Δ2(Δ2/2 + b)/(ε − Δ2·a), huge but finite."""
    boundary = LinearBoundary(0.2, 1e-6, 2.0)
    floor = 2.0 * 0.2
    eps = above(floor)
    expected = 2.0 * (1.0 + boundary.b) / (eps - floor)
    assert boundary.time_for(eps) == expected and math.isfinite(expected)
    for bad in (floor, below(floor), 0.0, NAN):
        with pytest.raises(ValueError, match="is at or below the linear boundary's floor"):
            boundary.time_for(bad)


def test_the_mixture_time_needs_a_positive_epsilon():
    boundary = MixtureBoundary(5.0, 1e-6)
    for bad in (0.0, BELOW_ZERO, NAN):
        with pytest.raises(ValueError, match="epsilon must be positive"):
            boundary.time_for(bad)


def test_the_mixture_time_stops_at_the_last_representable_doubling():
    """The search doubles t from 1 and gives up past 1e300: ψ(2^996) is the smallest ε it reaches, and the
    float below it is refused in words (t = 2^997 > 1e300)."""
    boundary = MixtureBoundary(5.0, 1e-6)
    last = 2.0**996
    assert last < 1e300 < 2 * last
    eps = boundary(last)
    assert boundary.time_for(eps) == pytest.approx(last, rel=1e-9)
    for bad in (below(eps), ABOVE_ZERO):
        with pytest.raises(ValueError, match="is below what ψ reaches at any representable time"):
            boundary.time_for(bad)


# ------------------------------------------------------------------ brownian.py: times T > 0, non-increasing


BOUNDARY = LinearBoundary.optimal(0.5, 1e-6)


def test_brownian_times_just_above_zero_and_equal_are_accepted():
    mech = BrownianMechanism(1.0, [2.0, 2.0, ABOVE_ZERO], BOUNDARY)
    assert list(mech.times) == [2.0, 2.0, ABOVE_ZERO]
    assert mech.worst_cost.rho == math.inf  # Δ2²/(2·ulp(0)) overflows: the finest point costs everything
    assert simulated_path([2.0, ABOVE_ZERO], np.random.default_rng(1)).shape == (2,)


@pytest.mark.parametrize("times", [[0.0], [BELOW_ZERO], [NAN], [2.0, NAN], [], [2.0, above(2.0)]],
                         ids=["0", "-ulp(0)", "nan", "2, nan", "empty", "increasing by one ulp"])
def test_brownian_times_not_positive_or_increasing_are_refused(times):
    with pytest.raises(ValueError, match="times must be positive and non-increasing"):
        BrownianMechanism(1.0, times, BOUNDARY)
    with pytest.raises(ValueError, match="times must be positive and non-increasing"):
        simulated_path(times, np.random.default_rng(1))


def test_the_boundary_must_have_the_mechanisms_sensitivity():
    assert BrownianMechanism(1.0, [1.0], BOUNDARY).sensitivity == 1.0
    with pytest.raises(ValueError, match="the boundary must be built for the same sensitivity"):
        BrownianMechanism(above(1.0), [1.0], BOUNDARY)


def test_a_bridge_step_to_the_same_time_keeps_the_noise_and_a_later_time_is_refused():
    noise = np.array([0.25, -3.0])
    assert bridge_step(noise, 4.0, 4.0, np.random.default_rng(1)) is noise
    for bad in (above(4.0), NAN):
        with pytest.raises(ValueError, match="Brownian times must be non-increasing"):
            bridge_step(noise, 4.0, bad, np.random.default_rng(1))


def test_a_run_refines_down_to_its_floor_tolerance_and_not_below(source):
    """The floor check accepts T ≥ T_K·(1 − 1e-12) (a float tolerance); the float below, and NaN, are refused."""
    mech = BrownianMechanism(1.0, [100.0, 10.0], BOUNDARY)
    edge = 10.0 * (1 - 1e-12)
    run = mech.start(np.zeros(1), source)
    run.refine(edge)
    assert run.time == edge and run.cost.rho == pytest.approx(1.0 / (2 * edge), rel=1e-15)
    for bad in (below(edge), NAN):
        fresh = mech.start(np.zeros(1), source)
        with pytest.raises(ValueError, match="is below the mechanism's finest grid point"):
            fresh.refine(bad)
        assert fresh.time is None and fresh.released == 0


def test_a_run_releases_each_grid_point_once(source):
    run = BrownianMechanism(1.0, [100.0, 10.0], BOUNDARY).start(np.zeros(1), source)
    run.next()
    run.next()
    assert run.released == 2 and run.time == 10.0
    with pytest.raises(StopIteration, match="no more Brownian grid points"):
        run.next()


def test_a_continuation_may_start_at_the_current_time_and_not_above(source):
    mech = BrownianMechanism(1.0, [100.0, 10.0], BOUNDARY)
    run = mech.start(np.zeros(1), source)
    with pytest.raises(ValueError, match="a run continues only after its first release"):
        run.continued(mech)
    run.next()
    rest = run.continued(BrownianMechanism(1.0, [100.0, 50.0], BOUNDARY))
    assert rest.time == 100.0
    with pytest.raises(ValueError, match="a continuation's times must not exceed the current time"):
        run.continued(BrownianMechanism(1.0, [above(100.0)], BOUNDARY))


# ------------------------------------------------------------------ exact.py: scales and σ² of the exact samplers


def test_rational_at_least_takes_tiny_positive_values_and_those_below_2_to_the_50():
    tiny = 2.0**-1000  # below ~2^-1003 the denominator 2^(21 − exponent) overflows the float product
    assert tiny <= exact.rational_at_least(tiny) <= tiny * (1 + 2.0**-20)
    # D = 1 above 2^21: the float below 2^50 (2^50 − 1/8) rounds up to 2^50, still a numerator below 2^51
    top = exact.rational_at_least(below(2.0**50))
    assert top == Fraction(2**50, 1) and top.numerator < 2**51


@pytest.mark.parametrize("value", [0.0, -0.0, BELOW_ZERO, NAN, math.inf], ids=["0", "-0", "-ulp(0)", "nan", "inf"])
def test_rational_at_least_refuses_what_is_not_positive_and_finite(value):
    with pytest.raises(ValueError, match="parameter must be positive and finite, got "):
        exact.rational_at_least(value)


def test_rational_at_least_refuses_2_to_the_50():
    with pytest.raises(ValueError, match="is too large to sample exactly"):
        exact.rational_at_least(2.0**50)


def test_discrete_laplace_scale_guards():
    rng = np.random.default_rng(3)
    # the smallest scales sample 0 (P(Z ≠ 0) = 2p/(1 + p), p = e^{-64})
    assert list(exact.discrete_laplace(rng, Fraction(1, 64), 5)) == [0] * 5
    top = exact.discrete_laplace(rng, Fraction((1 << 52) - 1), 0)  # numerator 2^52 − 1: accepted
    assert top.shape == (0,) and top.dtype == np.int64
    for bad in (Fraction(0), Fraction(-1, 64)):
        with pytest.raises(ValueError, match="scale must be positive"):
            exact.discrete_laplace(rng, bad, 1)
    with pytest.raises(ValueError, match="scale numerator too large for exact int64 sampling"):
        exact.discrete_laplace(rng, Fraction(1 << 52), 0)


def test_discrete_gaussian_variance_guards():
    rng = np.random.default_rng(3)
    assert exact.discrete_gaussian(rng, Fraction(1, 1 << 30), 0).shape == (0,)
    assert exact.discrete_gaussian(rng, Fraction((1 << 51) - 1), 0).shape == (0,)  # 2n = 2^52 − 2
    for bad in (Fraction(0), Fraction(-1, 4)):
        with pytest.raises(ValueError, match="sigma² must be positive"):
            exact.discrete_gaussian(rng, bad, 1)
    with pytest.raises(ValueError, match="sigma² too large for exact int64 sampling"):
        exact.discrete_gaussian(rng, Fraction(1 << 51), 0)  # 2n = 2^52


# ------------------------------------------------------------------ grid.py: ε too small for the grid


def test_the_laplace_grid_takes_epsilon_2_to_the_minus_37_and_not_the_float_below():
    """Δ1 = 1, one coordinate: λ = 2^-12, so b/λ = 2^12/ε ≤ 2^49 exactly when ε ≥ 2^-37."""
    grid = LaplaceGrid.for_release(1.0, 2.0**-37, 1)
    assert grid.width == 2.0**-12 and grid.scale == Fraction((2**12 + 1) * 2**37)
    for bad in (below(2.0**-37), NAN):
        with pytest.raises(ValueError):
            LaplaceGrid.for_release(1.0, bad, 1)
    with pytest.raises(ValueError, match="need a grid too fine for exact sampling"):
        LaplaceGrid.for_release(1.0, below(2.0**-37), 1)


def test_the_gaussian_grid_takes_sigma_2_to_the_16_and_not_the_float_above():
    """Δ2 = 1, one coordinate: λ = 2^-7, so σ/λ ≤ 2^23 exactly when σ ≤ 2^16."""
    grid = GaussianGrid.for_release(1.0, 1.0, 1e-6, 2.0**16, 1)
    assert grid.width == 2.0**-7 and float(grid.sigma2) >= (2.0**16 * 129) ** 2
    with pytest.raises(ValueError, match="need a grid too fine for exact Gaussian sampling"):
        GaussianGrid.for_release(1.0, 1.0, 1e-6, above(2.0**16), 1)


# ------------------------------------------------------------------ exponential.py: quantile level q in [0, 1]


@pytest.mark.parametrize(("q", "expected"), [(0.0, [0.0, -1.0, -2.0]), (1.0, [-2.0, -1.0, 0.0])])
def test_quantile_levels_0_and_1_are_accepted(q, expected):
    """−|#{x ≤ c} − q·n| over candidates 0, 1, 2 for the values 1, 2."""
    assert list(quantile_utilities(np.array([1.0, 2.0]), q, np.array([0.0, 1.0, 2.0]))) == expected


@pytest.mark.parametrize("q", [BELOW_ZERO, above(1.0), NAN], ids=["-ulp(0)", "just above 1", "nan"])
def test_quantile_levels_outside_0_1_are_refused(q):
    with pytest.raises(ValueError, match=r"q must be in \[0, 1\]"):
        quantile_utilities(np.array([1.0, 2.0]), q, np.array([0.0, 1.0]))


# ------------------------------------------------------------------ lnr.py: scales, ε's and the path's floor η


def test_lnr_schedules_at_their_boundaries_are_accepted():
    lnr = LaplaceNoiseReduction(1e-300, [ABOVE_ZERO])  # Δ1 = 1e-300 keeps the scale Δ1/ε finite
    assert lnr.worst_cost.epsilon == ABOVE_ZERO and lnr.scales[0] == 1e-300 / ABOVE_ZERO
    lnr = LaplaceNoiseReduction(2.0, [0.5, above(0.5)])  # strictly increasing by one ulp
    assert list(lnr.scales) == [4.0, 2.0 / above(0.5)]
    path = markov_laplace_path([ABOVE_ZERO, 1.0], 3, np.random.default_rng(5))
    assert path.shape == (2, 3) and np.all(np.abs(path[0]) < 1e-300)


@pytest.mark.parametrize("eps", [[0.0], [BELOW_ZERO], [NAN], [0.5, NAN], [0.5, 0.5], []],
                         ids=["0", "-ulp(0)", "nan", "0.5, nan", "equal", "empty"])
def test_lnr_schedules_not_positive_and_strictly_increasing_are_refused(eps):
    with pytest.raises(ValueError, match="epsilons must be positive and strictly increasing"):
        LaplaceNoiseReduction(1.0, eps)
    with pytest.raises(ValueError, match="scales must be positive and strictly increasing"):
        markov_laplace_path(eps, 1, np.random.default_rng(5))


def test_the_laplace_path_floor_must_be_positive_and_the_path_is_read_from_it():
    path = LaplacePath(ABOVE_ZERO, np.random.default_rng(5))
    assert path.floor == ABOVE_ZERO
    for bad in (0.0, BELOW_ZERO, NAN):
        with pytest.raises(ValueError, match="floor η must be positive"):
            LaplacePath(bad, np.random.default_rng(5))


def test_the_laplace_path_is_read_at_its_floor_and_not_below_or_at_nan():
    path = LaplacePath(2.0, np.random.default_rng(5))
    z = path.value(2.0)  # Z_η is the jump at η itself, Lap(η): not 0
    assert z.shape == (1,) and z[0] != 0.0
    for bad in (below(2.0), NAN):  # Z_NaN was 0: no noise at all
        with pytest.raises(ValueError, match="is below the floor η=2.0"):
            path.value(bad)


def test_an_lnr_run_releases_each_step_once(source):
    run = LaplaceNoiseReduction(1.0, [0.5, 1.0]).start(np.zeros(1), source)
    run.next()
    run.next()
    assert run.cost.epsilon == 1.0
    with pytest.raises(StopIteration, match="no more noise-reduction steps"):
        run.next()


# ------------------------------------------------------------------ rat.py: E_n, ε_max and β


def test_rat_schedules_at_their_boundaries_are_accepted():
    rat = ReducedAboveThreshold(1.0, 0.5, 0.0, (ABOVE_ZERO, 0.5, 0.5), (0.0, 0.0, 0.0))  # E_N = ε_max
    assert rat.epsilons[-1] == rat.epsilon_max == 0.5


@pytest.mark.parametrize("eps", [(0.0,), (BELOW_ZERO,), (NAN,), (0.25, NAN), (0.5, below(0.5)), ()],
                         ids=["0", "-ulp(0)", "nan", "0.25, nan", "decreasing by one ulp", "empty"])
def test_rat_schedules_not_positive_and_non_decreasing_are_refused(eps):
    with pytest.raises(ValueError, match="the privacy schedule E_n must be positive and non-decreasing"):
        ReducedAboveThreshold(1.0, 0.5, 0.0, eps)


@pytest.mark.parametrize("epsilon_max", [below(0.5), NAN], ids=["one ulp below E_N", "nan"])
def test_rat_epsilon_max_below_the_last_e_n_is_refused(epsilon_max):
    with pytest.raises(ValueError, match="E_n must not exceed ε_max"):
        ReducedAboveThreshold(1.0, epsilon_max, 0.0, (0.25, 0.5))


def test_rat_needs_one_margin_per_round():
    assert ReducedAboveThreshold(1.0, 0.5, 0.0, (0.5,), (1.0,)).margins == (1.0,)
    with pytest.raises(ValueError, match="one margin per round"):
        ReducedAboveThreshold(1.0, 0.5, 0.0, (0.5,), (1.0, 1.0))


def test_halting_margins_at_beta_one_half_and_just_above_zero():
    """One round: P(ξ − ζ ≥ 0) = (4 − 1)/6 = ½, so β = ½ gives the margin 0; a tiny β a finite margin
    m = −2b·log x with x = 6β/(2 + √(4 − 6β)), b = 2Δ/ε."""
    assert halting_margins([0.5], 1.0, 0.5) == (0.0,)
    # log x from its factors: x = 6β/4 computed in floats is a subnormal rounded to a whole ulp (2 ulps
    # here, a margin 2.3 smaller than the exact one)
    log_x = math.log(6.0) + math.log(ABOVE_ZERO) - math.log(2 + math.sqrt(4.0))
    (margin,) = halting_margins([0.5], 1.0, ABOVE_ZERO)
    assert margin == pytest.approx(-2 * 4.0 * log_x, rel=1e-12) and math.isfinite(margin)


def test_halting_margins_at_a_subnormal_beta_over_two_rounds_are_finite():
    """β = ulp(0) over two rounds: β·p_n = ulp(0)/2 underflows to 0, and log 0 was a "math domain
    error" for an accepted β. Each margin is −2b·log(6β·p_n/(2 + √4)), with log(β·p_n) = log β + log ½."""
    margins = halting_margins([0.5, 0.5], 1.0, ABOVE_ZERO)
    expected = -2 * 4.0 * (math.log(6.0) + math.log(ABOVE_ZERO) + math.log(0.5) - math.log(4.0))
    assert margins == pytest.approx((expected, expected), rel=1e-12)


@pytest.mark.parametrize("beta", [0.0, BELOW_ZERO, 1.0, NAN], ids=["0", "-ulp(0)", "1", "nan"])
def test_halting_margins_refuse_beta_outside_0_1(beta):
    with pytest.raises(ValueError, match=r"β must be in \(0, 1\)"):
        halting_margins([0.5], 1.0, beta)


# ------------------------------------------------------------------ selection_bounds.py: d, Δ, c, σ, t, Thm 7


def _rnm_two(c: float, sens: float, sigma: float) -> float:
    """B7, d = 2: log Φ(−(c − 2Δ)/(σ√2)) − log Φ(−c/(σ√2))."""
    s = sigma * math.sqrt(2)
    return float(log_ndtr(-(c - 2 * sens) / s) - log_ndtr(-c / s))


def test_rnm_at_two_queries_and_at_2_delta_equal_to_c_is_the_closed_form():
    assert rnm_epsilon(2.0, 0.5, 1.0, 2) == pytest.approx(_rnm_two(2.0, 0.5, 1.0), rel=1e-9)
    assert rnm_epsilon(3.0, 1.5, 1.0, 2) == pytest.approx(_rnm_two(3.0, 1.5, 1.0), rel=1e-9)  # 2Δ = c


def test_rnm_needs_two_queries():
    with pytest.raises(ValueError, match="Report Noisy Max needs d > 1 queries"):
        rnm_epsilon(2.0, 0.5, 1.0, 1)


@pytest.mark.parametrize("sens", [0.0, BELOW_ZERO, above(1.5), NAN], ids=["0", "-ulp(0)", "2Δ one ulp above c", "nan"])
def test_rnm_refuses_a_sensitivity_outside_0_to_c_over_2(sens):
    with pytest.raises(ValueError, match="need 0 < 2Δ ≤ c = b − a"):
        rnm_epsilon(3.0, sens, 1.0, 2)


def test_rnm_takes_the_smallest_positive_sensitivity_at_a_tiny_epsilon():
    eps = rnm_epsilon(3.0, ABOVE_ZERO, 1.0, 2)
    assert 0.0 <= eps < 1e-300


@pytest.mark.parametrize("sigma", [0.0, -0.0, BELOW_ZERO, NAN, math.inf, ABOVE_ZERO],
                         ids=["0", "-0", "-ulp(0)", "nan", "inf", "ulp(0): c/σ overflows"])
def test_rnm_refuses_a_sigma_that_is_not_positive_and_finite(sigma):
    with pytest.raises(ValueError, match="need a finite range and a positive finite σ"):
        rnm_epsilon(2.0, 0.5, sigma, 2)


def test_rnm_at_a_tiny_sigma_is_an_infinite_epsilon_not_a_nan():
    """σ = 1e-300 is accepted: (2Δ/σ)·((2c − 2Δ)/σ) overflows, so ε = ∞ — which no budget admits."""
    assert rnm_epsilon(2.0, 0.5, 1e-300, 2) == math.inf


def test_rnm_refuses_an_infinite_range():
    assert GaussianReportNoisyMax.for_epsilon(1.0, 0.5, 0.0, 2.0, 3).epsilon <= 1.0
    with pytest.raises(ValueError, match="the score range must be finite"):
        GaussianReportNoisyMax.for_epsilon(1.0, 0.5, -sys.float_info.max, sys.float_info.max, 3)
    with pytest.raises(ValueError, match="need a finite range"):
        rnm_epsilon(math.inf, 0.5, 1.0, 2)


def test_rnm_release_needs_d_values(source):
    mech = GaussianReportNoisyMax(1.0, 0.5, 0.0, 2.0, 3)
    assert mech.release(np.array([0.0, 0.0, 2.0]), source).cost.epsilon == mech.epsilon
    with pytest.raises(ValueError, match="expected 3 query values, got 4"):
        mech.release(np.zeros(4), source)


def test_at_epsilon_post_counts_from_one():
    """Thm 17 at t = 1: log Φ((a − ρ + Δ)/s) − log Φ((a − ρ)/s), s = √(σ_X² + σ_Z²)."""
    s = math.hypot(1.0, 2.0)
    expected = float(log_ndtr((0.0 - 0.5 + 1.0) / s) - log_ndtr((0.0 - 0.5) / s))
    assert at_epsilon_post(1, 1.0, 1.0, 2.0, 0.5) == pytest.approx(expected, rel=1e-12)
    with pytest.raises(ValueError, match="t counts queries from 1"):
        at_epsilon_post(0, 1.0, 1.0, 2.0, 0.5)


def _thm_7(sens: float, sx: float, sz: float, thr: float, delta: float) -> float:
    """Lebensold et al. 2024, Thm 7 → pDP (B8): A + 2√(AB), A = Δ²/σ_X² + 2Δ²/σ_Z², r = ρ²/σ_X²,
    c = 2√3π(1 + 9r), L = r + log c + log(1 + e^{−r}/c), B = L/2 + log(1/δ)."""
    big_a = sens**2 / sx**2 + 2 * sens**2 / sz**2
    r = thr**2 / sx**2
    c = 2 * math.sqrt(3) * math.pi * (1 + 9 * r)
    big_b = (r + math.log(c) + math.log1p(math.exp(-r) / c)) / 2 - math.log(delta)
    return big_a + 2 * math.sqrt(big_a * big_b)


SQ3 = math.sqrt(3.0)


@pytest.mark.parametrize("delta", [ABOVE_ZERO, 1e-6, BELOW_ONE], ids=["ulp(0)", "1e-6", "just below 1"])
def test_thm_7_at_its_boundaries_is_the_closed_form(delta):
    """σ_Z at √3·σ_X less the code's 1e-12 tolerance, threshold 0, δ at either end of (0, 1)."""
    sz = SQ3 * 0.2 * (1 - 1e-12)
    value = at_epsilon_max(0.01, 0.2, sz, 0.0, delta)
    assert math.isfinite(value) and value == pytest.approx(_thm_7(0.01, 0.2, sz, 0.0, delta), rel=1e-12)


def test_thm_7_refuses_sigma_z_one_float_below_its_tolerance_and_nan():
    sz = SQ3 * 0.2 * (1 - 1e-12)
    for bad in (below(sz), NAN):
        with pytest.raises(ValueError, match="Thm 7 needs σ_Z ≥ √3·σ_X"):
            at_epsilon_max(0.01, 0.2, bad, 0.0, 1e-6)


@pytest.mark.parametrize("sigma_x", [0.0, BELOW_ZERO, -1.0, NAN, math.inf], ids=["0", "-ulp(0)", "-1", "nan", "inf"])
def test_thm_7_refuses_a_sigma_x_that_is_not_positive(sigma_x):
    """σ_X = −1 passed σ_Z ≥ √3·σ_X for every σ_Z (here σ_Z = −1), and gave ε_max as if σ_X = 1."""
    with pytest.raises(ValueError, match="Thm 7 needs a positive finite σ_X, got "):
        at_epsilon_max(0.01, sigma_x, -1.0, 0.0, 1e-6)


def test_thm_7_takes_a_tiny_positive_sigma_x_at_a_huge_epsilon():
    """1e-150 is near the smallest σ_X whose σ_X² is a normal float (below ~1.5e-154 Δ²/σ_X² is a
    ZeroDivisionError: a refusal, though not in words)."""
    value = at_epsilon_max(0.01, 1e-150, 1.0, 0.0, 1e-6)
    assert value == pytest.approx(_thm_7(0.01, 1e-150, 1.0, 0.0, 1e-6), rel=1e-12) and value > 1e290


@pytest.mark.parametrize("threshold", [BELOW_ZERO, NAN], ids=["-ulp(0)", "nan"])
def test_thm_7_refuses_a_negative_threshold(threshold):
    with pytest.raises(ValueError, match="Thm 7 needs a non-negative threshold"):
        at_epsilon_max(0.01, 0.2, 1.0, threshold, 1e-6)


@pytest.mark.parametrize("delta", [0.0, 1.0, BELOW_ZERO, above(1.0), 2.0, NAN],
                         ids=["0", "1", "-ulp(0)", "just above 1", "2", "nan"])
def test_thm_7_refuses_a_delta_outside_0_1(delta):
    """δ = 2 gave ε_max 3.31 where δ = 1 gave 4.22: a larger δ reported a *smaller* ε."""
    with pytest.raises(ValueError, match=r"Thm 7's failure probability δ must be in \(0, 1\), got "):
        at_epsilon_max(1.0, 1.0, 2.0, 0.0, delta)


# ------------------------------------------------------------------ selection.py: AT's lower bound, halting


def test_above_threshold_takes_lower_0_and_refuses_below_or_nan():
    mech = GaussianAboveThreshold(0.2, SQ3 * 0.2, 0.5, 0.01, lower=0.0, upper=1.0, delta=1e-6)
    assert mech.epsilon_max == at_epsilon_max(0.01, 0.2, SQ3 * 0.2, 0.5, 1e-6)
    for bad in (BELOW_ZERO, NAN):
        bad_mech = GaussianAboveThreshold(0.2, SQ3 * 0.2, 0.5, 0.01, lower=bad, upper=1.0, delta=1e-6)
        with pytest.raises(ValueError, match=r"Thm 7 needs non-negative queries \(lower ≥ 0\)"):
            _ = bad_mech.epsilon_max


def test_above_threshold_answers_until_its_first_top(source):
    run = GaussianAboveThreshold(1e-3, SQ3 * 1e-3, 0.5, 0.01).start(source)
    assert run.test(0.0) is False and run.test(1.0) is True and run.count == 2
    with pytest.raises(RuntimeError, match="Above Threshold already halted"):
        run.test(1.0)


# ------------------------------------------------------------------ svt.py: the filter's ε and δ budgets


def _svt(epsilon: float, delta: float, delta_per_instance: float = 1e-7) -> GaussianSparseVector:
    return GaussianSparseVector(epsilon, delta, delta_per_instance, sigma_x=0.2, sensitivity=0.01, threshold=0.5)


def test_the_sparse_vector_opens_an_instance_when_epsilon_max_fits_strictly(source):
    eps_max = _svt(1.0, 1e-6).instance.epsilon_max
    svt = _svt(above(eps_max), 1e-7)  # ε budget one ulp above ε_max, δ budget exactly one instance's δ
    svt.test(0.0, source)
    assert svt.instances == 1 and svt.cost.delta == 1e-7


@pytest.mark.parametrize(("epsilon", "delta"), [("eps_max", 1e-6), (1.0, below(1e-7)), (NAN, 1e-6), (1.0, NAN)],
                         ids=["ε budget = ε_max", "δ budget one ulp below δ_j", "nan ε budget", "nan δ budget"])
def test_the_sparse_vector_halts_when_the_instance_does_not_fit(source, epsilon, delta):
    """spent + ε_max ≥ budget halts (Lebensold et al. 2024, Alg 2), and so does a NaN budget."""
    if epsilon == "eps_max":
        epsilon = _svt(1.0, 1e-6).instance.epsilon_max
    svt = _svt(epsilon, delta)
    with pytest.raises(BudgetExhausted, match="the sparse-vector budget cannot cover another instance"):
        svt.test(0.0, source)
    assert svt.halted and svt.instances == 0
    with pytest.raises(BudgetExhausted, match="the sparse-vector filter has halted"):
        svt.test(0.0, source)


# ------------------------------------------------------------------ top_k.py: 1 ≤ k < d, ε > 0


def _rounds(k: int) -> tuple[ExponentialMechanism, ...]:
    return tuple(ExponentialMechanism(0.5, 1.0) for _ in range(k))


@pytest.mark.parametrize(("k", "d"), [(1, 2), (4, 5)])
def test_top_k_takes_k_from_1_to_d_minus_1(k, d):
    top = PeelingTopK(k, d, _rounds(k))
    assert top.epsilon == pytest.approx(0.5 * k)


@pytest.mark.parametrize(("k", "d"), [(0, 2), (2, 2), (5, 5)])
def test_top_k_refuses_k_of_0_or_d(k, d):
    with pytest.raises(ValueError, match=rf"top-k needs 1 ≤ k < d, got k = {k}, d = {d}"):
        PeelingTopK(k, d, _rounds(k))


def test_top_k_needs_one_selector_per_round_and_d_scores(source):
    with pytest.raises(ValueError, match="one selector per round"):
        PeelingTopK(2, 3, _rounds(1))
    top = PeelingTopK(1, 3, _rounds(1))
    assert len(top.select(np.zeros(3), source)) == 1
    with pytest.raises(ValueError, match="expected 3 scores, got 2"):
        top.select(np.zeros(2), source)


def test_gumbel_top_k_takes_the_smallest_positive_epsilon():
    top = gumbel_top_k(ABOVE_ZERO, 1, 1.0, 3, monotonic=False)
    assert top.epsilon == ABOVE_ZERO


@pytest.mark.parametrize("epsilon", [0.0, BELOW_ZERO, NAN, math.inf], ids=["0", "-ulp(0)", "nan", "inf"])
def test_gumbel_top_k_refuses_an_epsilon_that_is_not_positive_and_finite(epsilon):
    with pytest.raises(ValueError, match="ε must be positive"):
        gumbel_top_k(epsilon, 1, 1.0, 3, monotonic=False)


# ------------------------------------------------------------------ representable.py: ε, δ, scale and σ limits


@pytest.mark.parametrize("epsilon", [ABOVE_ZERO, 1, sys.float_info.max], ids=["ulp(0)", "int 1", "max float"])
def test_check_epsilon_takes_every_positive_finite_number(epsilon):
    assert representable.check_epsilon(epsilon) is None


@pytest.mark.parametrize("epsilon", [0.0, BELOW_ZERO, math.inf, NAN, True, "1"], ids=["0", "-ulp(0)", "inf", "nan",
                                                                                  "True", "a string"])
def test_check_epsilon_refuses_the_rest_in_words(epsilon):
    with pytest.raises(QueryRejected, match="dp_epsilon must be a positive finite number, got "):
        representable.check_epsilon(epsilon)


@pytest.mark.parametrize("delta", [ABOVE_ZERO, BELOW_ONE], ids=["ulp(0)", "just below 1"])
def test_check_delta_takes_0_1_open(delta):
    assert representable.check_delta(delta) is None


@pytest.mark.parametrize("delta", [0.0, 1.0, BELOW_ZERO, above(1.0), NAN, True], ids=["0", "1", "-ulp(0)",
                                                                                  "just above 1", "nan", "True"])
def test_check_delta_refuses_the_rest_in_words(delta):
    with pytest.raises(QueryRejected, match="dp_delta must be strictly between 0 and 1 for the Gaussian mechanism"):
        representable.check_delta(delta)


def test_the_integer_laplace_scale_just_below_2_to_the_50_is_sampled_and_2_to_the_50_is_refused():
    eps = above(2.0**-50)
    assert LaplaceMechanism(eps, 1.0, integer=True).scale == 1.0 / eps < 2.0**50
    with pytest.raises(QueryRejected, match=r"is not below 2\^50"):
        LaplaceMechanism(2.0**-50, 1.0, integer=True)


def test_the_integer_laplace_scale_of_2_to_the_minus_40_is_sampled_and_below_it_refused():
    assert LaplaceMechanism(2.0**40, 1.0, integer=True).scale == representable.MIN_INTEGER_SCALE
    with pytest.raises(QueryRejected, match=r"would get a noise scale .* below 2\^-40"):
        LaplaceMechanism(above(2.0**40), 1.0, integer=True)


def test_gaussian_sigma_takes_0_and_refuses_what_is_not_a_finite_non_negative_number():
    assert representable.gaussian_sigma(lambda: 0.0, 1.0, 1e-6) == 0.0
    for bad in (BELOW_ZERO, NAN, math.inf):
        with pytest.raises(QueryRejected, match=r"σ = .* is not a finite number"):
            representable.gaussian_sigma(lambda v=bad: v, 1.0, 1e-6)
    with pytest.raises(QueryRejected, match=r"the calibration of σ fails \(ZeroDivisionError\)"):
        representable.gaussian_sigma(lambda: 1 / 0, 1.0, 1e-6)


def test_the_floor_sigma_is_used_while_theorem_7_holds_at_it():
    """integer_sigma raises a small σ to 0.5 when CKS Thm 7 gives δ(ε, 0.5) ≤ δ: at δ exactly that, yes;
    at the float below, refused."""
    from dpch.mechanisms.discrete import discrete_gaussian_delta

    needed = discrete_gaussian_delta(1.0, representable.MIN_INTEGER_SIGMA, 1)
    assert 0 < needed < 1
    assert representable.integer_sigma(0.1, 1.0, needed, 1.0) == representable.MIN_INTEGER_SIGMA
    with pytest.raises(QueryRejected, match="too large for the exact integer Gaussian sampler"):
        representable.integer_sigma(0.1, 1.0, below(needed), 1.0)


def test_the_integer_gaussian_variance_just_below_2_to_the_50_is_sampled_and_2_to_the_50_is_refused():
    representable.check_gaussian(1.0, 1e-6, 1.0, below(2.0**25), True, 1)
    with pytest.raises(QueryRejected, match=r"its integer variance σ² = .* is not below 2\^50"):
        representable.check_gaussian(1.0, 1e-6, 1.0, 2.0**25, True, 1)


# ------------------------------------------------------------------ gaussian.py: Δ2 = 0 is no noise, Δ2 < 0 refused


def test_a_zero_sensitivity_gaussian_has_no_noise():
    for zero in (0.0, -0.0):
        mech = GaussianMechanism(1.0, 1e-6, zero)
        assert mech.sigma == 0.0 and mech.cost.rho == 0.0


@pytest.mark.parametrize("integer", [False, True])
@pytest.mark.parametrize("sens", [BELOW_ZERO, -1.0, -math.inf], ids=["-ulp(0)", "-1", "-inf"])
def test_a_negative_sensitivity_gaussian_is_refused_not_noiseless(sens, integer):
    """It was σ = 0 at ρ = 0: the exact answer, released as if free."""
    with pytest.raises(QueryRejected, match=r"the calibration of σ fails \(ValueError\)"):
        GaussianMechanism(1.0, 1e-6, sens, integer=integer)


def test_a_zero_sensitivity_laplace_has_no_noise(source):
    for zero in (0.0, -0.0):
        assert LaplaceMechanism(1.0, zero).release(np.array([1.5]), source)[0] == 1.5


@pytest.mark.parametrize("integer", [False, True])
@pytest.mark.parametrize("sens", [BELOW_ZERO, -1.0, NAN], ids=["-ulp(0)", "-1", "nan"])
def test_a_negative_or_nan_sensitivity_laplace_is_refused(sens, integer):
    """−ulp(0) was accepted on the grid (frexp(−0.0) gave the width 0.5)."""
    with pytest.raises(QueryRejected, match="the Laplace noise needs a sensitivity ≥ 0, got "):
        LaplaceMechanism(1.0, sens, integer=integer)
