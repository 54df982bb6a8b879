"""Every guard on a privacy parameter, reached at its boundary (issue 31, "Test each guard at its
boundary: every ``raise`` on bad ε, δ, G, σ or k has a test that reaches it with the boundary value and
the first bad one").

:data:`GUARDS` is keyed by each guard as it reads in the code (``path function: condition``, found by
:func:`guards_in_the_code`, which scans ``dpch/mechanisms``, ``dpch/privacy``, ``dpch/accounting`` and
``dpch/accuracy`` for an ``if`` whose body raises and whose condition names a privacy parameter). A new
guard fails :func:`test_every_guard_in_the_code_is_listed` until it is listed here with its two values:

- the boundary value it must *accept* (for a closed end the end itself, for an open end the float next
  to it), and
- the first value it must *refuse* (the end of an open interval, or the float just past a closed one),
  checked for the refusal's words, not for any exception.

A mutant that moves a guard by one (``<`` → ``<=``), flips it, or turns its ``raise`` into ``pass`` fails
one of the two. A guard tested at its boundary by a test written for it elsewhere is listed as
:class:`Elsewhere` (that test is checked to exist); an internal self-check that no parameter reaches is
listed as :class:`Invariant`, with the reason.
"""

from __future__ import annotations

import ast
import dataclasses
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from dpch.accounting.watches import WatchParams, validate_params
from dpch.errors import QueryRejected
from dpch.mechanisms.calibration import analytic_gaussian_sigma

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("mechanisms", "privacy", "accounting", "accuracy")
#: the names a guard on a privacy parameter reads
PARAMETERS = re.compile(
    r"\b(a|epsilon|eps|epsilons|epsilon_max|delta|delta_g|rho|rho_delta|sigma|sigma2|sigma_x|sigma_z|k|d|n|t|c|"
    r"beta|threshold|max_partitions|scale|sensitivity|width|upper|lower|instances|floor)\b")

#: the first float above 0 and the last below 1
TINY = math.ulp(0.0)
BELOW_ONE = math.nextafter(1.0, 0.0)


@dataclass(frozen=True)
class Boundary:
    """The values at a guard's edge: each of ``accept`` runs without a refusal (and, when ``check`` is
    given, its result passes it); each of ``refuse`` raises ``error`` with words matching ``words``."""

    accept: tuple[Callable[[], object], ...]
    refuse: tuple[Callable[[], object], ...]
    error: type[Exception]
    words: str
    check: Callable[[object], bool] | None = None


@dataclass(frozen=True)
class Elsewhere:
    """Tested at its boundary by a test written for it: ``path::function``."""

    test: str


@dataclass(frozen=True)
class Invariant:
    """A self-check no parameter reaches; ``why`` says why."""

    why: str


def guards_in_the_code() -> set[str]:
    """``path function: condition`` of every ``if … raise`` on a privacy parameter."""
    found = set()
    for package in PACKAGES:
        for path in sorted((ROOT / "dpch" / package).rglob("*.py")):
            tree = ast.parse(path.read_text())
            for function in ast.walk(tree):
                if not isinstance(function, ast.FunctionDef):
                    continue
                for node in ast.walk(function):
                    if isinstance(node, ast.If) and any(isinstance(s, ast.Raise) for s in node.body):
                        condition = ast.unparse(node.test)
                        if PARAMETERS.search(condition):
                            found.add(f"{path.relative_to(ROOT)} {function.name}: {condition}")
    return found


# ------------------------------------------------------------------ a valid watch, changed one field at a time

def watch(**changes: object) -> WatchParams:
    base = WatchParams(name="w", threshold=0.5, upper=1.0, sensitivity=1.0, sigma=1.0, epsilon=1.0, delta=1e-6,
                       instances=1, datasets=("db.t",), lower=0.0)
    return dataclasses.replace(base, **changes)  # type: ignore[arg-type]


GUARDS: dict[str, Boundary | Elsewhere | Invariant] = {
    "dpch/accounting/accountant.py set_budget: renewal.lifetime.epsilon < budget.epsilon or "
    "renewal.lifetime.delta < budget.delta":
        Elsewhere("tests/accounting/test_renewal.py::test_a_lifetime_cap_equal_to_one_period_is_the_boundary"),
    "dpch/accounting/budget.py __post_init__: not (self.epsilon > 0 and math.isfinite(self.epsilon))":
        Elsewhere("tests/accounting/test_accounting_guards_at_boundaries.py::"
              "test_a_budget_epsilon_outside_is_refused"),
    "dpch/accounting/budget.py __post_init__: not 0 <= self.delta < 1":
        Elsewhere("tests/accounting/test_accounting_guards_at_boundaries.py::"
              "test_a_budget_delta_outside_0_1_is_refused"),
    "dpch/accounting/filters.py __init__: not 0.0 < self.delta_g < 1.0 / math.e":
        Elsewhere("tests/accounting/test_advanced_filter_delta_guard.py::"
              "test_delta_g_outside_0_to_1_over_e_is_refused_in_words"),
    "dpch/accounting/odometers.py _check_delta: not 0.0 < delta_g < 1.0 / math.e":
        Elsewhere("tests/accounting/test_accounting_guards_at_boundaries.py::"
              "test_a_delta_g_outside_0_to_1_over_e_is_refused_by_every_bound"),
    "dpch/accounting/odometers.py odometer_thm_6_5_of_sums: not n > math.e":
        Elsewhere("tests/accounting/test_accounting_guards_at_boundaries.py::"
              "test_the_thm_6_5_odometer_refuses_n_up_to_e"),
    "dpch/accounting/watches.py validate_params: not (isinstance(p.lower, int | float) and "
    "isinstance(p.upper, int | float) and math.isfinite(p.lower) and (p.lower < p.upper))":
        Elsewhere("tests/accounting/test_watches_mutants.py::test_an_empty_range_is_refused_as_empty"),
    "dpch/accounting/watches.py validate_params: not (isinstance(p.threshold, int | float) and p.lower "
    "<= p.threshold <= p.upper)":
        Elsewhere("tests/accounting/test_watches_mutants.py::"
              "test_a_threshold_at_either_end_of_the_range_is_valid"),
    "dpch/accuracy/planner.py plan_direct: cap is not None and cost.epsilon > cap * (1 + 1e-12)":
        Elsewhere("tests/accuracy/test_max_epsilon_floor.py::"
              "test_a_tiny_cap_on_a_direct_target_is_refused_naming_the_epsilon_it_needs"),
    "dpch/mechanisms/boundaries.py __post_init__: not self.a > 0":
        Elsewhere("tests/mechanisms/test_mechanism_guards_at_boundaries.py::"
              "test_a_linear_boundary_needs_a_positive_a"),
    "dpch/mechanisms/boundaries.py __post_init__: not self.rho > 0":
        Elsewhere("tests/mechanisms/test_mechanism_guards_at_boundaries.py::"
              "test_a_mixture_boundary_needs_a_positive_rho"),
    "dpch/mechanisms/boundaries.py _check_delta: not 0.0 < delta < 1.0":
        Elsewhere("tests/mechanisms/test_mechanism_guards_at_boundaries.py::"
              "test_a_boundary_delta_outside_0_1_is_refused"),
    "dpch/mechanisms/boundaries.py time_for: not epsilon > 0":
        Elsewhere("tests/mechanisms/test_mechanism_guards_at_boundaries.py::"
              "test_the_mixture_time_needs_a_positive_epsilon"),
    "dpch/mechanisms/boundaries.py time_for: not epsilon > d * self.a":
        Elsewhere("tests/mechanisms/test_mechanism_guards_at_boundaries.py::"
              "test_the_linear_time_is_finite_just_above_the_floor_and_refused_at_it"),
    "dpch/mechanisms/brownian.py __init__: boundary.sensitivity != sensitivity":
        Elsewhere("tests/mechanisms/test_mechanism_guards_at_boundaries.py::"
              "test_the_boundary_must_have_the_mechanisms_sensitivity"),
    "dpch/mechanisms/brownian.py __init__: t.size == 0 or not np.all(t > 0) or np.any(np.diff(t) > 0)":
        Elsewhere("tests/mechanisms/test_mechanism_guards_at_boundaries.py::"
              "test_brownian_times_not_positive_or_increasing_are_refused"),
    "dpch/mechanisms/brownian.py _advance: not time >= floor * (1 - 1e-12)":
        Elsewhere("tests/mechanisms/test_mechanism_guards_at_boundaries.py::"
              "test_a_run_refines_down_to_its_floor_tolerance_and_not_below"),
    "dpch/mechanisms/brownian.py simulated_path: t.size == 0 or not np.all(t > 0) or np.any(np.diff(t) > "
    "0)":
        Elsewhere("tests/mechanisms/test_mechanism_guards_at_boundaries.py::"
              "test_brownian_times_not_positive_or_increasing_are_refused"),
    "dpch/mechanisms/exact.py discrete_gaussian: 2 * n >= _INT64_SAFE >> 10":
        Elsewhere("tests/mechanisms/test_mechanism_guards_at_boundaries.py::"
              "test_discrete_gaussian_variance_guards"),
    "dpch/mechanisms/exact.py discrete_gaussian: sigma2 <= 0":
        Elsewhere("tests/mechanisms/test_mechanism_guards_at_boundaries.py::"
              "test_discrete_gaussian_variance_guards"),
    "dpch/mechanisms/exact.py discrete_laplace: t <= 0":
        Elsewhere("tests/mechanisms/test_mechanism_guards_at_boundaries.py::"
              "test_discrete_laplace_scale_guards"),
    "dpch/mechanisms/exact.py discrete_laplace: t >= _INT64_SAFE >> 10":
        Elsewhere("tests/mechanisms/test_mechanism_guards_at_boundaries.py::"
              "test_discrete_laplace_scale_guards"),
    "dpch/mechanisms/grid.py for_release: b / width > _MAX_LAPLACE_GRID_SCALE":
        Elsewhere("tests/mechanisms/test_mechanism_guards_at_boundaries.py::"
              "test_the_laplace_grid_takes_epsilon_2_to_the_minus_37_and_not_the_float_below"),
    "dpch/mechanisms/grid.py for_release: sigma / width > _MAX_GAUSSIAN_GRID_SIGMA / 2":
        Elsewhere("tests/mechanisms/test_mechanism_guards_at_boundaries.py::"
              "test_the_gaussian_grid_takes_sigma_2_to_the_16_and_not_the_float_above"),
    "dpch/mechanisms/lnr.py __init__: eps.size == 0 or not np.all(eps > 0) or np.any(np.diff(eps) <= 0)":
        Elsewhere("tests/mechanisms/test_mechanism_guards_at_boundaries.py::"
              "test_lnr_schedules_not_positive_and_strictly_increasing_are_refused"),
    "dpch/mechanisms/lnr.py __init__: not floor > 0":
        Elsewhere("tests/mechanisms/test_mechanism_guards_at_boundaries.py::"
              "test_the_laplace_path_floor_must_be_positive_and_the_path_is_read_from_it"),
    "dpch/mechanisms/lnr.py markov_laplace_path: t.ndim != 1 or t.size == 0 or (not np.all(t > 0)) or "
    "np.any(np.diff(t) <= 0)":
        Elsewhere("tests/mechanisms/test_mechanism_guards_at_boundaries.py::"
              "test_lnr_schedules_not_positive_and_strictly_increasing_are_refused"),
    "dpch/mechanisms/lnr.py value: not t >= self.floor":
        Elsewhere("tests/mechanisms/test_mechanism_guards_at_boundaries.py::"
              "test_the_laplace_path_is_read_at_its_floor_and_not_below_or_at_nan"),
    "dpch/mechanisms/partition_selection.py __post_init__: not (self.epsilon > 0 and 0 < self.delta < 1 "
    "and (self.max_partitions >= 1))":
        Elsewhere("tests/mechanisms/test_partition_selection_threshold.py::"
              "test_a_bad_parameter_is_refused_in_words"),
    "dpch/mechanisms/rat.py __post_init__: eps.size == 0 or not np.all(eps > 0) or np.any(np.diff(eps) < "
    "0)":
        Elsewhere("tests/mechanisms/test_mechanism_guards_at_boundaries.py::"
              "test_rat_schedules_not_positive_and_non_decreasing_are_refused"),
    "dpch/mechanisms/rat.py __post_init__: not eps[-1] <= self.epsilon_max":
        Elsewhere("tests/mechanisms/test_mechanism_guards_at_boundaries.py::"
              "test_rat_epsilon_max_below_the_last_e_n_is_refused"),
    "dpch/mechanisms/rat.py __post_init__: self.margins and len(self.margins) != eps.size":
        Elsewhere("tests/mechanisms/test_mechanism_guards_at_boundaries.py::"
              "test_rat_needs_one_margin_per_round"),
    "dpch/mechanisms/rat.py halting_margins: not 0 < beta < 1":
        Elsewhere("tests/mechanisms/test_mechanism_guards_at_boundaries.py::"
              "test_halting_margins_refuse_beta_outside_0_1"),
    "dpch/mechanisms/representable.py check_delta: isinstance(delta, bool) or not (isinstance(delta, int "
    "| float) and 0 < delta < 1)":
        Elsewhere("tests/mechanisms/test_mechanism_guards_at_boundaries.py::"
              "test_check_delta_refuses_the_rest_in_words"),
    "dpch/mechanisms/representable.py check_epsilon: isinstance(epsilon, bool) or not "
    "(isinstance(epsilon, int | float) and 0 < epsilon < math.inf)":
        Elsewhere("tests/mechanisms/test_mechanism_guards_at_boundaries.py::"
              "test_check_epsilon_refuses_the_rest_in_words"),
    "dpch/mechanisms/representable.py check_gaussian: not sigma * sigma < MAX_INTEGER_SCALE":
        Elsewhere("tests/mechanisms/test_mechanism_guards_at_boundaries.py::"
              "test_the_integer_gaussian_variance_just_below_2_to_the_50_is_sampled_and_2_to_the_50_is_refused"),
    "dpch/mechanisms/representable.py check_laplace: not scale < MAX_INTEGER_SCALE":
        Elsewhere("tests/mechanisms/test_mechanism_guards_at_boundaries.py::"
              "test_the_integer_laplace_scale_just_below_2_to_the_50_is_sampled_and_2_to_the_50_is_refused"),
    "dpch/mechanisms/representable.py check_laplace: not scale >= MIN_INTEGER_SCALE":
        Elsewhere("tests/mechanisms/test_mechanism_guards_at_boundaries.py::"
              "test_the_integer_laplace_scale_of_2_to_the_minus_40_is_sampled_and_below_it_refused"),
    "dpch/mechanisms/representable.py check_laplace: not sensitivity >= 0":
        Elsewhere("tests/mechanisms/test_mechanism_guards_at_boundaries.py::"
              "test_a_negative_or_nan_sensitivity_laplace_is_refused"),
    "dpch/mechanisms/representable.py gaussian_sigma: not (sigma >= 0 and math.isfinite(sigma))":
        Elsewhere("tests/mechanisms/test_mechanism_guards_at_boundaries.py::"
              "test_gaussian_sigma_takes_0_and_refuses_what_is_not_a_finite_non_negative_number"),
    "dpch/mechanisms/representable.py integer_sigma: discrete_gaussian_delta(epsilon, MIN_INTEGER_SIGMA, "
    "math.ceil(sensitivity - 1e-12)) > delta":
        Elsewhere("tests/mechanisms/test_mechanism_guards_at_boundaries.py::"
              "test_the_floor_sigma_is_used_while_theorem_7_holds_at_it"),
    "dpch/mechanisms/selection.py epsilon_max: not self.lower >= 0":
        Elsewhere("tests/mechanisms/test_mechanism_guards_at_boundaries.py::"
              "test_above_threshold_takes_lower_0_and_refuses_below_or_nan"),
    "dpch/mechanisms/selection.py for_epsilon: not math.isfinite(c)":
        Elsewhere("tests/mechanisms/test_mechanism_guards_at_boundaries.py::"
              "test_rnm_refuses_an_infinite_range"),
    "dpch/mechanisms/selection.py release: q.size != self.d":
        Elsewhere("tests/mechanisms/test_mechanism_guards_at_boundaries.py::test_rnm_release_needs_d_values"),
    "dpch/mechanisms/selection_bounds.py at_epsilon_max: not (sigma_x > 0 and math.isfinite(sigma_x))":
        Elsewhere("tests/mechanisms/test_mechanism_guards_at_boundaries.py::"
              "test_thm_7_refuses_a_sigma_x_that_is_not_positive"),
    "dpch/mechanisms/selection_bounds.py at_epsilon_max: not 0.0 < delta < 1.0":
        Elsewhere("tests/mechanisms/test_mechanism_guards_at_boundaries.py::"
              "test_thm_7_refuses_a_delta_outside_0_1"),
    "dpch/mechanisms/selection_bounds.py at_epsilon_max: not sigma_z >= math.sqrt(3.0) * sigma_x * (1 - "
    "1e-12)":
        Elsewhere("tests/mechanisms/test_mechanism_guards_at_boundaries.py::"
              "test_thm_7_refuses_sigma_z_one_float_below_its_tolerance_and_nan"),
    "dpch/mechanisms/selection_bounds.py at_epsilon_max: not threshold >= 0":
        Elsewhere("tests/mechanisms/test_mechanism_guards_at_boundaries.py::"
              "test_thm_7_refuses_a_negative_threshold"),
    "dpch/mechanisms/selection_bounds.py at_epsilon_post: t < 1":
        Elsewhere("tests/mechanisms/test_mechanism_guards_at_boundaries.py::"
              "test_at_epsilon_post_counts_from_one"),
    "dpch/mechanisms/selection_bounds.py rnm_epsilon: d < 2":
        Elsewhere("tests/mechanisms/test_mechanism_guards_at_boundaries.py::test_rnm_needs_two_queries"),
    "dpch/mechanisms/selection_bounds.py rnm_epsilon: not (math.isfinite(c) and math.isfinite(sigma) and "
    "(sigma > 0) and math.isfinite(c / sigma))":
        Elsewhere("tests/mechanisms/test_mechanism_guards_at_boundaries.py::"
              "test_rnm_refuses_a_sigma_that_is_not_positive_and_finite"),
    "dpch/mechanisms/selection_bounds.py rnm_epsilon: not 0 < 2 * sensitivity <= c":
        Elsewhere("tests/mechanisms/test_mechanism_guards_at_boundaries.py::"
              "test_rnm_refuses_a_sensitivity_outside_0_to_c_over_2"),
    "dpch/mechanisms/top_k.py __post_init__: len(self.rounds) != self.k":
        Elsewhere("tests/mechanisms/test_mechanism_guards_at_boundaries.py::"
              "test_top_k_needs_one_selector_per_round_and_d_scores"),
    "dpch/mechanisms/top_k.py __post_init__: not 1 <= self.k < self.d":
        Elsewhere("tests/mechanisms/test_mechanism_guards_at_boundaries.py::test_top_k_refuses_k_of_0_or_d"),
    "dpch/mechanisms/top_k.py gumbel_top_k: not (epsilon > 0 and math.isfinite(epsilon))":
        Elsewhere("tests/mechanisms/test_mechanism_guards_at_boundaries.py::"
              "test_gumbel_top_k_refuses_an_epsilon_that_is_not_positive_and_finite"),
    "dpch/mechanisms/top_k.py select: scores.size != self.d":
        Elsewhere("tests/mechanisms/test_mechanism_guards_at_boundaries.py::"
              "test_top_k_needs_one_selector_per_round_and_d_scores"),
    "dpch/privacy/conversions.py _log_inv: not 0.0 < delta < 1.0":
        Elsewhere("tests/privacy/test_guards_at_boundaries.py::test_a_delta_outside_0_1_is_refused"),
    "dpch/privacy/conversions.py approx_dp_to_zcdp_rho: epsilon < 0":
        Elsewhere("tests/privacy/test_guards_at_boundaries.py::test_the_first_negative_value_is_refused"),
    "dpch/privacy/conversions.py gaussian_rho: not sigma > 0":
        Elsewhere("tests/privacy/test_guards_at_boundaries.py::test_a_sigma_that_is_not_positive_is_refused"),
    "dpch/privacy/conversions.py pure_dp_to_zcdp_rho: epsilon < 0":
        Elsewhere("tests/privacy/test_guards_at_boundaries.py::test_the_first_negative_value_is_refused"),
    "dpch/privacy/conversions.py rho_max: epsilon < 0":
        Elsewhere("tests/privacy/test_guards_at_boundaries.py::test_the_first_negative_value_is_refused"),
    "dpch/privacy/conversions.py zcdp_to_dp_epsilon: rho < 0":
        Elsewhere("tests/privacy/test_guards_at_boundaries.py::test_the_first_negative_value_is_refused"),
    "dpch/privacy/cost.py __post_init__: not (self.epsilon >= 0 and self.delta >= 0)":
        Elsewhere("tests/privacy/test_guards_at_boundaries.py::"
              "test_a_cost_parameter_below_zero_or_nan_is_refused"),
    "dpch/privacy/cost.py __post_init__: not self.rho_delta >= 0":
        Elsewhere("tests/privacy/test_guards_at_boundaries.py::"
              "test_a_cost_parameter_below_zero_or_nan_is_refused"),
    "dpch/privacy/cost.py __post_init__: self.rho is not None and (not self.rho >= 0)":
        Elsewhere("tests/privacy/test_guards_at_boundaries.py::"
              "test_a_cost_parameter_below_zero_or_nan_is_refused"),
    "dpch/privacy/cost.py from_dict: 'epsilon' not in data":
        Elsewhere("tests/privacy/test_costs_built_typed.py::test_from_dict_refuses_what_is_not_a_record"),
    # ------------------------------------------------------- reached at their boundary here
    "dpch/mechanisms/calibration.py analytic_gaussian_sigma: delta >= 1": Boundary(
        accept=(lambda: analytic_gaussian_sigma(1.0, BELOW_ONE),),
        refuse=(lambda: analytic_gaussian_sigma(1.0, 1.0),),
        error=ValueError, words="delta must be below 1",
        check=lambda s: 0 < s < 1),  # type: ignore[operator]
    "dpch/accounting/watches.py validate_params: not (isinstance(p.delta, int | float) and 0 < p.delta < 1)": Boundary(
        accept=(lambda: validate_params(watch(delta=TINY)), lambda: validate_params(watch(delta=BELOW_ONE))),
        refuse=(lambda: validate_params(watch(delta=0.0)), lambda: validate_params(watch(delta=1.0))),
        error=QueryRejected, words=r"delta must be in \(0, 1\)"),
    "dpch/accounting/watches.py validate_params: p.instances < 1": Boundary(
        accept=(lambda: validate_params(watch(instances=1)),),
        refuse=(lambda: validate_params(watch(instances=0)),),
        error=QueryRejected, words="not even one instance fits"),
    "dpch/mechanisms/grid.py for_release: math.sqrt(float(sigma2)) * width > sigma * (1 + GAUSSIAN_INFLATION) * "
    "(1 + 2.0 ** (-16))": Invariant(
        "a self-check that the grid σ stays within the half-widths' allowance: the grid σ is the larger of the "
        "continuous σ scaled by shift/Δ2 ≤ 1 + inflation and a discrete calibration below it; no parameter "
        "reaches it (tests/mechanisms/test_calibration_guards.py checks that the half-widths cover the noise sampled)"),
}


def test_every_guard_in_the_code_is_listed():
    found = guards_in_the_code()
    assert sorted(found - GUARDS.keys()) == [], "a new guard: list it in GUARDS with its boundary values"
    assert sorted(GUARDS.keys() - found) == [], "a listed guard is gone or reads differently: update GUARDS"


def test_the_scan_finds_a_guard_written_anywhere_in_a_function():
    """Negative control for the scan itself: nested in a loop, a method, or a ``not (…)``."""
    assert "dpch/mechanisms/brownian.py _advance: not time >= floor * (1 - 1e-12)" in guards_in_the_code()
    assert "dpch/mechanisms/lnr.py value: not t >= self.floor" in guards_in_the_code()


BOUNDARIES = sorted(key for key, how in GUARDS.items() if isinstance(how, Boundary))


@pytest.mark.parametrize("key", BOUNDARIES)
def test_the_boundary_value_is_accepted(key):
    how = GUARDS[key]
    assert isinstance(how, Boundary) and how.accept
    for accept in how.accept:
        result = accept()
        if how.check is not None:
            assert how.check(result), f"{key}: accepted, but with a wrong value {result!r}"


@pytest.mark.parametrize("key", BOUNDARIES)
def test_the_first_bad_value_is_refused_in_words(key):
    how = GUARDS[key]
    assert isinstance(how, Boundary) and how.refuse
    for refuse in how.refuse:
        with pytest.raises(how.error, match=how.words):
            refuse()


@pytest.mark.parametrize("key", sorted(key for key, how in GUARDS.items() if isinstance(how, Elsewhere)))
def test_a_guard_tested_elsewhere_has_that_test(key):
    how = GUARDS[key]
    assert isinstance(how, Elsewhere)
    path, _, name = how.test.partition("::")
    source = (ROOT / path).read_text()
    assert re.search(rf"^def {re.escape(name)}\(", source, re.MULTILINE), f"{key}: {how.test} does not exist"
