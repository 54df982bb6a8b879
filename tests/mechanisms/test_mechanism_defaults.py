"""The defaults and the immutability of the additive mechanisms (issue 31: mutants of these survived).

- A mechanism is frozen: its ε, sensitivity and scale are fixed once it is calibrated and charged, so no
  code can change what it draws after the cost was computed from it.
- ``LaplaceMechanism``'s default ``dimension`` is 1 (one coordinate: the finest grid the refusal
  threshold allows, ε ≥ 2^-37 for Δ1 = 1; two coordinates need twice that).
- ``half_width()``'s default confidence is 95%.
"""

from __future__ import annotations

import dataclasses

import pytest

from dpch.errors import QueryRejected
from dpch.mechanisms.gaussian import GaussianMechanism
from dpch.mechanisms.laplace import LaplaceMechanism


@pytest.mark.parametrize("mechanism", [LaplaceMechanism(0.5, 2.0), LaplaceMechanism(0.5, 2.0, integer=True),
                                       GaussianMechanism(0.5, 1e-6, 2.0)], ids=["laplace", "discrete", "gaussian"])
def test_a_mechanism_is_frozen(mechanism):
    with pytest.raises(dataclasses.FrozenInstanceError):
        mechanism.epsilon = 100.0  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        mechanism.sensitivity = 0.0  # type: ignore[misc]


def test_partition_selection_is_frozen():
    """Its threshold is computed once from ε, δ and G; none of them can change after."""
    from dpch.mechanisms.partition_selection import LaplacePartitionSelection

    selection = LaplacePartitionSelection(1.0, 1e-6, 3)
    for name, value in (("epsilon", 100.0), ("delta", 0.5), ("max_partitions", 1), ("threshold", 0.0)):
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(selection, name, value)


def test_laplace_defaults_to_one_coordinate():
    epsilon = 2.0**-37  # the smallest per-coordinate ε the grid samples exactly for one coordinate of Δ1 = 1
    assert LaplaceMechanism(epsilon, 1.0).dimension == 1
    with pytest.raises(QueryRejected):
        LaplaceMechanism(epsilon, 1.0, dimension=2)


@pytest.mark.parametrize("mechanism", [LaplaceMechanism(0.5, 2.0), LaplaceMechanism(0.5, 2.0, integer=True),
                                       GaussianMechanism(0.5, 1e-6, 2.0)], ids=["laplace", "discrete", "gaussian"])
def test_the_default_confidence_is_95_percent(mechanism):
    assert mechanism.half_width() == mechanism.half_width(0.95)
    assert mechanism.half_width(0.9) < mechanism.half_width() < mechanism.half_width(0.99)


@pytest.mark.parametrize("integer", [False, True], ids=["grid", "discrete"])
@pytest.mark.parametrize(("half_width", "confidence", "sensitivity"),
                         [(10.0, 0.95, 2.0), (3.0, 0.9, 1.0), (250.0, 0.99, 40.0), (0.5, 0.95, 0.01)])
def test_laplace_for_half_width_is_the_smallest_epsilon_that_fits(half_width, confidence, sensitivity, integer):
    """Accuracy-first's inverse (issue 31: its bracket and bisection survived): the ε returned meets the
    half-width for what is sampled, and 1e-6 less does not — the smallest, so no ε is spent beyond need."""
    mech = LaplaceMechanism.for_half_width(half_width, confidence, sensitivity, integer=integer)
    assert mech.integer == integer and mech.half_width(confidence) <= half_width
    smaller = LaplaceMechanism(mech.epsilon * (1 - 1e-6), sensitivity, integer)
    assert smaller.half_width(confidence) > half_width


def test_laplace_for_half_width_defaults_to_real_values():
    assert not LaplaceMechanism.for_half_width(10.0, 0.95, 2.0).integer


def test_a_release_is_float_whatever_the_exact_values_type():
    """ClickHouse returns counts as integers: the released values are floats all the same (Δ = 0 too)."""
    import numpy as np

    from dpch.mechanisms.sampling import NoiseSource

    exact = np.array([3, 5, 8], dtype=np.int64)
    for mech in (LaplaceMechanism(0.5, 0.0), LaplaceMechanism(0.5, 2.0)):
        released = mech.release(exact, NoiseSource(seed=1))
        assert released.dtype == np.float64, mech


def test_laplace_for_half_width_settles_on_the_smallest_representable_epsilon():
    """A half-width so wide that its ε lies near the smallest the exact sampler takes (2^-37 for Δ1 = 1):
    an ε below it cannot be built, and the search treats it like one too wide, so it returns the smallest
    representable ε that fits rather than refusing."""
    import math

    half_width = 2.0**37 * math.log(20)  # continuous inverse: ε = 2^-37 at 95%
    mech = LaplaceMechanism.for_half_width(half_width, 0.95, 1.0)
    assert 2.0**-37 <= mech.epsilon <= 2.0**-37 * 1.001 and mech.half_width(0.95) <= half_width
