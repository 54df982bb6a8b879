"""The Gaussian calibration is cached per (ε, δ, Δ2, integer, vector) and never conflates two settings.

The count of calibrations comes from the cache's own public counters (``cache_info()``): a miss is
one run of the calibration, a hit is none.
"""

from __future__ import annotations

import pytest

from dpch.errors import QueryRejected
from dpch.mechanisms.gaussian import GaussianMechanism, calibrated_sigma


@pytest.fixture(autouse=True)
def empty_cache():
    calibrated_sigma.cache_clear()
    yield
    calibrated_sigma.cache_clear()


def test_a_second_calibration_with_the_same_arguments_is_not_recomputed():
    first = GaussianMechanism(0.7, 1e-6, 3.0)
    assert calibrated_sigma.cache_info().misses == 1
    second = GaussianMechanism(0.7, 1e-6, 3.0)
    info = calibrated_sigma.cache_info()
    assert (info.misses, info.hits) == (1, 1)
    assert second.sigma == first.sigma
    # the cached σ is the one an uncached calibration gives (negative control for a stale entry)
    assert first.sigma == calibrated_sigma.__wrapped__(0.7, 1e-6, 3.0, False, False)


def test_an_int_and_a_float_of_the_same_value_share_one_entry():
    GaussianMechanism(1, 1e-6, 2)
    GaussianMechanism(1.0, 1e-6, 2.0)
    assert calibrated_sigma.cache_info().misses == 1


@pytest.mark.parametrize("other", [
    dict(epsilon=0.71),
    dict(delta=1e-7),
    dict(sensitivity=3.5),
    dict(integer=True),
    dict(dimension=3),
])
def test_different_arguments_are_not_conflated(other):
    base = dict(epsilon=0.7, delta=1e-6, sensitivity=3.0, integer=False, dimension=1)
    first = GaussianMechanism(**base)
    changed = GaussianMechanism(**{**base, **other})
    assert calibrated_sigma.cache_info().misses == 2
    assert changed.sigma != first.sigma
    args = ({**base, **other}["epsilon"], {**base, **other}["delta"], {**base, **other}["sensitivity"],
            {**base, **other}["integer"], {**base, **other}["dimension"] > 1)
    assert changed.sigma == calibrated_sigma.__wrapped__(*args)


def test_the_dimension_matters_only_through_whether_a_unit_moves_several_coordinates():
    # one unit per coordinate: the scalar calibration, whatever the number of coordinates
    scalar = GaussianMechanism(0.5, 1e-6, 1.0, integer=True, dimension=1).sigma
    assert GaussianMechanism(0.5, 1e-6, 1.0, integer=True, dimension=7, unit_coordinates=1).sigma == scalar
    assert calibrated_sigma.cache_info().misses == 1
    # a unit moving several coordinates needs the vector (zCDP) calibration: a different entry
    vector = GaussianMechanism(0.5, 1e-6, 1.0, integer=True, dimension=7).sigma
    assert GaussianMechanism(0.5, 1e-6, 1.0, integer=True, dimension=2, unit_coordinates=2).sigma == vector
    assert vector > scalar
    info = calibrated_sigma.cache_info()
    assert (info.misses, info.hits) == (2, 2)


def test_a_refusal_is_not_cached():
    for _ in range(2):  # the mechanism refuses a δ of 1 before calibrating; the calibration itself raises
        with pytest.raises(QueryRejected):
            GaussianMechanism(0.5, 1.0, 1.0)
        with pytest.raises(ValueError):
            calibrated_sigma(0.5, 1.0, 1.0, False, False)
    assert calibrated_sigma.cache_info().hits == 0
    assert calibrated_sigma.cache_info().currsize == 0


def test_the_cache_is_bounded():
    assert calibrated_sigma.cache_info().maxsize is not None
