"""Every guard on a bad ε, δ, ρ or σ in dpch/privacy/ at its boundary (issue 31, "Test each guard at its
boundary"; "the negative-ε guards of the zCDP conversions never run in any test").

Each guard is reached twice: with the boundary value it must accept (ε = 0 gives ρ = 0; for an open
interval, the float next to the excluded end), checked for its value, and with the first bad value
(the float just past the boundary: −ulp(0) = −5e-324 below 0, δ = 0 and δ = 1 themselves), checked for
the refusal's words. A guard that a mutant moves by one (``< 0`` → ``<= 0`` or ``< 1``), flips, or turns
into ``pass`` fails one of the two. Without the conversions' guards a negative ε would become a positive
ρ = ε²/2; the test for that asserts the refusal, not just any exception.

Expected values are the closed forms written here: ε²/2 (Bun & Steinke 2016, Prop 1.4), ε²/8
(Cesar & Rogers 2021), ρ + 2√(ρ log(1/δ)) (Prop 1.3), Δ²/(2σ²) (Prop 1.6), and ρ_max's
(√(L + ε) − √L)² with L = log(1/δ) (docs/algorithms.md A4).
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable

import pytest

from dpch.privacy import conversions
from dpch.privacy.cost import ZCDP, ApproxDP, ExPost, PrivacyCost, PureDP, zcdp_to_approx

#: the first float below 0
BELOW_ZERO = -math.ulp(0.0)
#: the first float above 0 (subnormal: 1/δ overflows, so log(1/δ) must be computed as −log δ)
ABOVE_ZERO = math.ulp(0.0)
#: the last float below 1
BELOW_ONE = math.nextafter(1.0, 0.0)


def test_the_neighbours_are_the_floats_next_to_the_boundaries():
    assert BELOW_ZERO < 0.0 < ABOVE_ZERO and math.nextafter(BELOW_ZERO, 1.0) == 0.0
    assert math.nextafter(0.0, 1.0) == ABOVE_ZERO and math.nextafter(BELOW_ONE, 2.0) == 1.0


# ------------------------------------------------------------------ conversions: ε, ρ ≥ 0

NON_NEGATIVE: list[tuple[str, Callable[[float], float], str]] = [
    ("pure_dp_to_zcdp_rho", conversions.pure_dp_to_zcdp_rho, "epsilon must be non-negative"),
    ("approx_dp_to_zcdp_rho", conversions.approx_dp_to_zcdp_rho, "epsilon must be non-negative"),
    ("exponential_mechanism_rho", conversions.exponential_mechanism_rho, "epsilon must be non-negative"),
    ("rho_max", lambda e: conversions.rho_max(e, 1e-6), "epsilon must be non-negative"),
    ("rho_max printed", lambda e: conversions.rho_max(e, 1e-6, printed_theorem_6=True),
     "epsilon must be non-negative"),
    ("zcdp_to_dp_epsilon", lambda r: conversions.zcdp_to_dp_epsilon(r, 1e-6), "rho must be non-negative"),
    ("zcdp_to_dp_epsilon printed", lambda r: conversions.zcdp_to_dp_epsilon(r, 1e-6, printed_theorem_6=True),
     "rho must be non-negative"),
]


@pytest.mark.parametrize(("name", "fn", "words"), NON_NEGATIVE, ids=[n for n, _, _ in NON_NEGATIVE])
def test_zero_is_accepted_and_maps_to_zero(name, fn, words):
    assert fn(0.0) == 0.0


@pytest.mark.parametrize(("name", "fn", "words"), NON_NEGATIVE, ids=[n for n, _, _ in NON_NEGATIVE])
@pytest.mark.parametrize("bad", [BELOW_ZERO, -1.0])
def test_the_first_negative_value_is_refused(name, fn, words, bad):
    with pytest.raises(ValueError, match=words):
        fn(bad)


@pytest.mark.parametrize(("fn", "expected"), [
    (conversions.pure_dp_to_zcdp_rho, lambda e: e * e / 2),
    (conversions.approx_dp_to_zcdp_rho, lambda e: e * e / 2),
    (conversions.exponential_mechanism_rho, lambda e: e * e / 8),
])
@pytest.mark.parametrize("epsilon", [ABOVE_ZERO, 0.5, 3.0])
def test_just_inside_the_conversions_keep_their_value(fn, expected, epsilon):
    assert fn(epsilon) == pytest.approx(expected(epsilon), rel=1e-15, abs=0.0)


def test_a_negative_epsilon_never_becomes_a_positive_rho():
    """The survivor's consequence, said as such: −0.5 would otherwise give ρ = 0.125 > 0."""
    for fn in (conversions.pure_dp_to_zcdp_rho, conversions.approx_dp_to_zcdp_rho):
        with pytest.raises(ValueError, match="epsilon must be non-negative"):
            fn(-0.5)
    with pytest.raises(ValueError, match="privacy cost must be non-negative"):
        PrivacyCost(-0.5)


# ------------------------------------------------------------------ conversions: δ in (0, 1)


def _prop_1_3(rho: float, delta: float, c: float = 1.0) -> float:
    return rho + 2.0 * math.sqrt(c * rho * -math.log(delta))


def _rho_max(epsilon: float, delta: float, c: float = 1.0) -> float:
    cl = c * -math.log(delta)
    return (math.sqrt(cl + epsilon) - math.sqrt(cl)) ** 2


DELTA_USERS = [
    ("zcdp_to_dp_epsilon", lambda d: conversions.zcdp_to_dp_epsilon(0.5, d), lambda d: _prop_1_3(0.5, d)),
    ("zcdp_to_dp_epsilon printed", lambda d: conversions.zcdp_to_dp_epsilon(0.5, d, printed_theorem_6=True),
     lambda d: _prop_1_3(0.5, d, 2.0)),
    ("rho_max", lambda d: conversions.rho_max(1.0, d), lambda d: _rho_max(1.0, d)),
    ("rho_max printed", lambda d: conversions.rho_max(1.0, d, printed_theorem_6=True),
     lambda d: _rho_max(1.0, d, 2.0)),
]


@pytest.mark.parametrize(("name", "fn", "reference"), DELTA_USERS, ids=[n for n, _, _ in DELTA_USERS])
@pytest.mark.parametrize("delta", [ABOVE_ZERO, sys.float_info.min, 1e-6, BELOW_ONE],
                         ids=["ulp(0)", "smallest normal", "1e-6", "just below 1"])
def test_a_delta_just_inside_0_1_is_accepted_with_a_finite_value(name, fn, reference, delta):
    value = fn(delta)
    assert math.isfinite(value) and value > 0
    assert value == pytest.approx(reference(delta), rel=1e-9)


@pytest.mark.parametrize(("name", "fn", "reference"), DELTA_USERS, ids=[n for n, _, _ in DELTA_USERS])
@pytest.mark.parametrize("delta", [0.0, 1.0, BELOW_ZERO, math.nextafter(1.0, 2.0), math.nan],
                         ids=["0", "1", "-ulp(0)", "just above 1", "nan"])
def test_a_delta_outside_0_1_is_refused(name, fn, reference, delta):
    with pytest.raises(ValueError, match=r"delta must be in \(0, 1\), got "):
        fn(delta)


def test_rho_max_is_the_largest_rho_the_conversion_maps_into_epsilon():
    """At the far end of δ: ρ_max inverts Prop 1.3 (negative control: a ρ 1% larger exceeds ε)."""
    for delta in (ABOVE_ZERO, BELOW_ONE):
        rho = conversions.rho_max(1.0, delta)
        assert conversions.zcdp_to_dp_epsilon(rho, delta) == pytest.approx(1.0, rel=1e-9)
        assert conversions.zcdp_to_dp_epsilon(rho * 1.01, delta) > 1.0


# ------------------------------------------------------------------ gaussian_rho: σ > 0


@pytest.mark.parametrize("sigma", [0.0, -0.0, BELOW_ZERO, -1.0, math.nan])
def test_a_sigma_that_is_not_positive_is_refused(sigma):
    with pytest.raises(ValueError, match="sigma must be positive"):
        conversions.gaussian_rho(sigma, 1.0)


@pytest.mark.parametrize("sigma", [1e-150, 0.5, 2.0])
def test_a_positive_sigma_gives_delta_squared_over_two_sigma_squared(sigma):
    """1e-150 is near the smallest σ whose σ² is a normal float (below ~1.5e-154, σ² underflows to 0
    and the quotient is a ZeroDivisionError: no calibration produces such a σ)."""
    assert conversions.gaussian_rho(sigma, 3.0) == pytest.approx(9.0 / (2.0 * sigma * sigma), rel=1e-15)


# ------------------------------------------------------------------ typed costs and the ledger record

TYPED = [
    ("PureDP ε", lambda v: PureDP(v), "epsilon must be non-negative, got "),
    ("ApproxDP ε", lambda v: ApproxDP(v, 0.0), "epsilon must be non-negative, got "),
    ("ApproxDP δ", lambda v: ApproxDP(1.0, v), "delta must be non-negative, got "),
    ("ZCDP ρ", lambda v: ZCDP(v, 0.0), "rho must be non-negative, got "),
    ("ZCDP δ", lambda v: ZCDP(1.0, v), "delta must be non-negative, got "),
    ("ExPost ε", lambda v: ExPost(v, 0.0, 1.0), "epsilon must be non-negative, got "),
    ("ExPost δ", lambda v: ExPost(0.5, v, 1.0), "delta must be non-negative, got "),
    ("ExPost worst ε", lambda v: ExPost(0.0, 0.0, v), "worst_epsilon must be non-negative, got "),
    ("PrivacyCost ε", lambda v: PrivacyCost(v), "privacy cost must be non-negative"),
    ("PrivacyCost δ", lambda v: PrivacyCost(1.0, v), "privacy cost must be non-negative"),
    ("PrivacyCost ρ", lambda v: PrivacyCost(1.0, 0.0, v), "rho must be non-negative"),
    ("PrivacyCost ρ's δ", lambda v: PrivacyCost(1.0, 0.0, 0.5, rho_delta=v), "rho_delta must be non-negative"),
]


@pytest.mark.parametrize(("name", "build", "words"), TYPED, ids=[n for n, _, _ in TYPED])
def test_a_cost_parameter_of_zero_is_accepted_and_kept(name, build, words):
    cost = build(0.0)
    assert 0.0 in [v for v in vars(cost).values() if isinstance(v, float)]


@pytest.mark.parametrize(("name", "build", "words"), TYPED, ids=[n for n, _, _ in TYPED])
@pytest.mark.parametrize("bad", [BELOW_ZERO, math.nan], ids=["-ulp(0)", "nan"])
def test_a_cost_parameter_below_zero_or_nan_is_refused(name, build, words, bad):
    with pytest.raises(ValueError, match=words):
        build(bad)


def test_a_zero_rho_converts_to_a_zero_epsilon():
    """δ-approximate 0-zCDP is (0, δ + δ'')-DP: the guard's boundary value flows through the conversion."""
    approx = zcdp_to_approx(ZCDP(0.0, 1e-7), 1e-6)
    assert approx.epsilon == 0.0 and approx.delta == pytest.approx(1.1e-6)


def test_an_unstated_delta_is_zero():
    """ApproxDP(ε) is pure ε-DP and ZCDP(ρ) is plain ρ-zCDP: their δ defaults to the boundary value 0."""
    assert ApproxDP(0.5).delta == 0.0 and ZCDP(0.1).delta == 0.0
    assert PrivacyCost(0.5).delta == 0.0 and PrivacyCost(0.5).rho_delta == 0.0
