"""Mechanism values no test reached before (issue 31: ``pytest tests/mechanisms tests/privacy --cov``
listed these lines as missed), each pinned by value:

- production noise: without ``DPCH_ALLOW_FIXED_SEED=1`` a fixed seed is refused in words, and an
  unseeded source draws from OS entropy (two sources differ, in noise and in cap keys);
- partition selection keeps a key only *strictly* above its threshold (Desfontaines et al. 2022's
  τ: a count at τ itself is dropped);
- the exponential mechanism's utility gap is (Δ/ε or 2Δ/ε)·(ln m − ln(1 − confidence)) (Dwork & Roth
  2014, Thm 3.11) and holds in 4 000 simulated selections; Gumbel top-k's score gap is one round's at
  β/k (a union bound over the k rounds);
- a Gaussian release of sensitivity 0 is the exact values, as a copy;
- a Brownian run costs nothing before its first release, an unknown boundary kind is refused, and a
  mixture-boundary schedule ends where ψ(T*) = ε (Whitehouse et al. 2022, Thm 3.6);
- composing no releases costs zero.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpch.errors import ConfigError
from dpch.mechanisms.brownian import BrownianMechanism
from dpch.mechanisms.exponential import ExponentialMechanism
from dpch.mechanisms.gaussian import GaussianMechanism
from dpch.mechanisms.partition_selection import LaplacePartitionSelection
from dpch.mechanisms.sampling import FIXED_SEED_ENV, NoiseSource
from dpch.mechanisms.top_k import gumbel_top_k
from dpch.privacy.cost import PrivacyCost


def test_production_refuses_a_fixed_seed_and_draws_from_os_entropy(monkeypatch):
    monkeypatch.delenv(FIXED_SEED_ENV, raising=False)
    with pytest.raises(ConfigError, match="a fixed noise seed is for tests and benchmarks only"):
        NoiseSource(seed=1)
    a, b = NoiseSource(), NoiseSource()
    assert not a.deterministic and not b.deterministic
    assert a.cap_key() != b.cap_key() and a.cap_key() != a.cap_key()
    assert not np.array_equal(a.laplace(1.0, 8), b.laplace(1.0, 8))


def test_the_environment_must_say_exactly_1(monkeypatch):
    monkeypatch.setenv(FIXED_SEED_ENV, "true")
    with pytest.raises(ConfigError):
        NoiseSource(seed=1)
    monkeypatch.setenv(FIXED_SEED_ENV, "1")
    assert NoiseSource(seed=1).deterministic


def test_partition_selection_keeps_only_counts_strictly_above_its_threshold():
    selection = LaplacePartitionSelection(1.0, 1e-6, 1)
    tau = selection.threshold
    kept = selection.keep(np.array([tau, math.nextafter(tau, math.inf), tau - 1, tau + 5]))
    assert kept.tolist() == [False, True, False, True]


@pytest.mark.parametrize("monotonic, factor", [(False, 2.0), (True, 1.0)])
def test_the_exponential_utility_gap_is_theorem_3_11(monotonic, factor):
    mech = ExponentialMechanism(0.5, 1.0, monotonic=monotonic)
    m, confidence = 20, 0.9
    gap = mech.utility_gap(m, confidence)
    assert gap == pytest.approx(factor * 1.0 / 0.5 * (math.log(m) - math.log(1 - confidence)), rel=1e-15)
    utilities = np.arange(m, dtype=float)
    picks = mech.select_many(utilities, 4000, NoiseSource(seed=11))
    share = float(np.mean(utilities.max() - utilities[picks] <= gap))
    assert share >= confidence - 4.5 * math.sqrt(confidence * (1 - confidence) / 4000)


def test_gumbel_top_k_score_gap_is_one_rounds_gap_at_beta_over_k():
    top = gumbel_top_k(1.0, 3, 1.0, 10, monotonic=False)
    beta = (1 - 0.95) / 3
    assert top.score_gap(0.95) == pytest.approx(top.rounds[0].utility_gap(10, 1 - beta), rel=1e-15)


def test_a_gaussian_release_of_sensitivity_zero_is_the_exact_values_as_a_copy():
    values = np.array([1.25, -3.0])
    released = GaussianMechanism(1.0, 1e-6, 0.0).release(values, NoiseSource(seed=1))
    assert released.tolist() == [1.25, -3.0] and released is not values


def test_a_brownian_run_costs_nothing_before_its_first_release():
    run = BrownianMechanism.for_target(1.0, 1e-6).start(np.zeros(2), NoiseSource(seed=1))
    assert run.cost == PrivacyCost(0.0, 0.0, 0.0, ex_post=True)


def test_an_unknown_boundary_kind_is_refused():
    with pytest.raises(ValueError, match="unknown boundary kind 'quadratic'"):
        BrownianMechanism.for_target(1.0, 1e-6, kind="quadratic")


def test_a_mixture_schedule_ends_where_its_boundary_reaches_epsilon():
    mech = BrownianMechanism.for_target(0.5, 1e-6, kind="mixture")
    assert mech.cost_at(float(mech.times[-1])).epsilon == pytest.approx(0.5, rel=1e-9)


def test_composing_no_releases_costs_zero():
    assert PrivacyCost.composed([]) == PrivacyCost.zero() == PrivacyCost(0.0, 0.0, 0.0)
