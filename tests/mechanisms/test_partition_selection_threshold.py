"""Partition selection's threshold and guard, against an independent reference (issue 31, "Privacy-relevant
survivors": the threshold-raising loop and the ε/δ/G guard of ``partition_selection.py`` never ran).

The threshold is τ = 1 + k with k the smallest integer ≥ 0 such that a key held by one unit is released
with probability P(Z > k) ≤ δ/G, Z discrete Laplace of the sampled scale b (p = e^{−1/b}). The code starts
from the closed-form guess ⌈log(δ/G·(1 + p))/log p − 1 − 1e-12⌉ and corrects it in both directions; the
guess is one too low exactly when the real solution lies within 1e-12 above an integer m. The cases below
put it there: δ/G = p^{m+1}/(1 + p)·(1 − η) with η·b < 1e-12, so the guess is m and the loop must raise k
to m + 1. A threshold one too low would release a single unit's key with probability above δ/G.

The reference k is found here by summing the discrete Laplace pmf P(z) = (1 − p)/(1 + p)·p^{|z|} over
z > k (math.fsum), the smallest k found by doubling and bisection on that sum — neither the closed form nor
the code's loop.
"""

from __future__ import annotations

import math
import sys
from decimal import Decimal, localcontext

import pytest

from dpch.mechanisms.partition_selection import LaplacePartitionSelection

#: (ε, G, m, η): the guess lands on m, the answer is m + 1
LOOP_CASES = [(1.0, 1, 10, 1e-13), (0.5, 3, 20, 1e-14), (1.0, 1, 30, 1e-13), (2.0, 1, 5, 1e-13),
              (1.0, 4, 12, 3e-14),
              # δ/G within a few ulps below the tail at m: only the float-error allowance (its terms taken
              # as magnitudes) keeps m out; without it the threshold would be one too low
              (1.0, 1, 30, 2e-15)]
WORDS = r"partition selection needs ε > 0, 0 < δ < 1 and max_partitions ≥ 1"


def _tail(p: float, k: int) -> float:
    """P(Z > k) by summing the pmf until the terms vanish below 1e-30 of the sum."""
    norm = (1 - p) / (1 + p)
    terms, z = [], k + 1
    while True:
        term = norm * p**z
        terms.append(term)
        if term < 1e-30 * terms[0]:
            return math.fsum(terms)
        z += 1


def _reference_k(p: float, per_key: float) -> int:
    """The smallest k ≥ 0 with P(Z > k) ≤ per_key: the summed tail is decreasing in k, so a doubling then a
    bisection finds it in a few dozen tail sums (a scan from 0 took 24 s at k ≈ 8 000)."""
    if _tail(p, 0) <= per_key:
        return 0
    lo, hi = 0, 1  # tail(lo) > per_key; find hi with tail(hi) ≤ per_key
    while _tail(p, hi) > per_key:
        lo, hi = hi, hi * 2
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if _tail(p, mid) > per_key:
            lo = mid
        else:
            hi = mid
    return hi


def _p(epsilon: float, groups: int) -> float:
    """p of the scale actually sampled (a rational ≥ G/ε; G/ε itself for these cases)."""
    return math.exp(-1.0 / float(LaplacePartitionSelection(epsilon, 0.5, groups).scale))


def _loop_delta(epsilon: float, groups: int, m: int, eta: float) -> float:
    p = _p(epsilon, groups)
    return groups * p ** (m + 1) / (1 + p) * (1 - eta)


@pytest.mark.parametrize(("epsilon", "groups", "m", "eta"), LOOP_CASES)
def test_negative_control_the_closed_form_guess_is_one_too_low(epsilon, groups, m, eta):
    """What makes the loop run: the guess the code starts from is m, the reference k is m + 1."""
    delta = _loop_delta(epsilon, groups, m, eta)
    p = _p(epsilon, groups)
    guess = max(0, math.ceil(math.log(delta / groups * (1.0 + p)) / math.log(p) - 1.0 - 1e-12))
    assert guess == m
    assert _reference_k(p, delta / groups) == m + 1


@pytest.mark.parametrize(("epsilon", "groups", "m", "eta"), LOOP_CASES)
def test_the_threshold_is_raised_to_the_smallest_one_meeting_delta(epsilon, groups, m, eta):
    delta = _loop_delta(epsilon, groups, m, eta)
    selection = LaplacePartitionSelection(epsilon, delta, groups)
    p = _p(epsilon, groups)
    k = _reference_k(p, delta / groups)
    assert selection.threshold == 1.0 + k == m + 2.0
    # the release probability of a single unit's key meets δ/G, and the threshold below would not
    assert _tail(p, int(selection.threshold) - 1) <= delta / groups < _tail(p, int(selection.threshold) - 2)
    assert selection.single_unit_release_probability() <= delta / groups


@pytest.mark.parametrize(("epsilon", "delta", "groups"), [
    (1.0, 1e-6, 1), (0.1, 1e-9, 7), (3.0, 0.3, 2), (1.0, 0.5, 1), (0.25, 1e-5, 100), (1.0, 0.9, 1),
])
def test_ordinary_thresholds_match_the_reference(epsilon, delta, groups):
    """Where the guess is right (or too high) the threshold is the reference's too."""
    p = _p(epsilon, groups)
    assert LaplacePartitionSelection(epsilon, delta, groups).threshold == 1.0 + _reference_k(p, delta / groups)


# ------------------------------------------------------------------ the ε/δ/G guard at its boundaries


@pytest.mark.parametrize(("epsilon", "delta", "groups"), [
    (0.0, 1e-6, 1), (-0.0, 1e-6, 1), (-math.ulp(0.0), 1e-6, 1), (math.nan, 1e-6, 1),
    (1.0, 0.0, 1), (1.0, -math.ulp(0.0), 1), (1.0, 1.0, 1), (1.0, math.nextafter(1.0, 2.0), 1), (1.0, math.nan, 1),
    (1.0, 1e-6, 0), (1.0, 1e-6, -1),
], ids=["ε=0", "ε=-0", "ε=-ulp", "ε=nan", "δ=0", "δ=-ulp", "δ=1", "δ>1", "δ=nan", "G=0", "G=-1"])
def test_a_bad_parameter_is_refused_in_words(epsilon, delta, groups):
    with pytest.raises(ValueError, match=WORDS):
        LaplacePartitionSelection(epsilon, delta, groups)


@pytest.mark.parametrize(("epsilon", "delta", "groups"), [
    (2.0**-20, 1e-6, 1),                     # a tiny ε (b = 2^20): the smallest whose scale stays exact here
    (1.0, math.ulp(0.0), 1),                 # the first δ above 0
    (1.0, sys.float_info.min, 1),
    (1.0, math.nextafter(1.0, 0.0), 1),      # the last δ below 1: τ = 1 (k = 0)
    (1.0, 1e-6, 1),                          # G = 1, the smallest
], ids=["tiny ε", "δ=ulp(0)", "δ=min normal", "δ just below 1", "G=1"])
def test_the_first_good_parameters_are_accepted_with_the_reference_threshold(epsilon, delta, groups):
    selection = LaplacePartitionSelection(epsilon, delta, groups)
    p = math.exp(-1.0 / float(selection.scale))
    # the reference's scan is long for a tiny ε; its closed form p^{k+1}/(1+p) in log space decides here
    per_key = delta / groups
    k = selection.threshold - 1.0
    assert k >= 0 and k.is_integer()
    log_tail = lambda j: (j + 1) * math.log(p) - math.log1p(p)  # noqa: E731 — log P(Z > j)
    assert log_tail(k) <= math.log(per_key) + 1e-12
    assert k == 0 or log_tail(k - 1) > math.log(per_key) - 1e-12


def test_the_last_delta_below_one_releases_every_key_with_a_unit():
    """δ → 1: k = 0, τ = 1, so a noisy count above 1 is kept (P(Z > 0) = p/(1+p) ≤ δ)."""
    selection = LaplacePartitionSelection(1.0, math.nextafter(1.0, 0.0), 1)
    assert selection.threshold == 1.0 == 1.0 + _reference_k(math.exp(-1.0), math.nextafter(1.0, 0.0))


@pytest.mark.parametrize(("epsilon", "delta", "groups"), [
    (0.0025144159917585914, 1.0538919456413308e-15, 1000), (0.007195926838958299, 1.643678099416572e-08, 1000),
    # δ/G on the tail of an integer k ≈ 10^4..10^6: the closed-form guess, computed in floats, lands one
    # *above* the smallest k (its error exceeds the 1e-12 margin), and the downward loop must lower it
    (0.01, 6.723828352953192e-133, 1), (0.001, 2.872976986821489e-63, 10), (0.01, 2.306426385344379e-13, 1000),
    (1.0, 1.496126309290805e-11, 100000),
])
def test_a_large_scale_threshold_meets_delta_in_exact_arithmetic(epsilon, delta, groups):
    """b = G/ε ≈ 4·10^5 and k ≈ 10^7: p^{k+1} computed in floats drifts by about k ulps, and the linear-space
    loop stopped one below the smallest k (the tail then exceeds δ/G by ~1e-9 relative). Checked here at 60
    digits with the sampled rational scale: the threshold meets δ/G and the one below does not (so it is
    neither too low, a privacy loss, nor too high, keys lost for nothing)."""
    selection = LaplacePartitionSelection(epsilon, delta, groups)
    scale, k = selection.scale, int(selection.threshold) - 1
    with localcontext() as ctx:
        ctx.prec = 60
        p = (-(Decimal(scale.denominator) / Decimal(scale.numerator))).exp()
        per_key = Decimal(delta) / Decimal(groups)
        assert p ** (k + 1) / (1 + p) <= per_key < p**k / (1 + p)


@pytest.mark.parametrize(("epsilon", "groups", "k"), [(1.0, 1, 10), (0.5, 3, 25), (0.1, 2, 40), (2.0, 1, 3)])
def test_a_delta_equal_to_the_computed_tail_is_not_trusted(epsilon, groups, k):
    """δ/G set to exactly the float value of the code's own log tail at k: whether the exact tail is below it
    is undecidable in floats, so k is not accepted and the threshold is 1 + (k + 1) — one above, fewer keys,
    never one below (the error bound in ``_smallest_k``: without it, or with its sign flipped, k would pass)."""
    probe = LaplacePartitionSelection(epsilon, 0.5, groups)  # the scale depends on ε and G only
    log_p = -1.0 / float(probe.scale)
    log_tail = (k + 1) * log_p - math.log1p(math.exp(log_p))
    delta = math.exp(log_tail + math.log(groups))
    selection = LaplacePartitionSelection(epsilon, delta, groups)
    assert selection.threshold == 1.0 + k + 1
    # and one step further from the edge, k is accepted
    looser = LaplacePartitionSelection(epsilon, delta * (1 + 1e-9), groups)
    assert looser.threshold == 1.0 + k


@pytest.mark.parametrize(("epsilon", "groups", "k"), [(1.0, 1, 10), (0.5, 3, 25), (0.1, 2, 40), (2.0, 1, 3)])
def test_the_float_error_bound_is_eight_ulps_of_the_terms(epsilon, groups, k):
    """The margin k's computed log tail must clear is 8 ulps of |(k+1)·log p| + |log(1+p)| + |log(δ/G)|, as
    documented: a δ whose log lies 8.5 of those above the tail accepts k, one at 7.5 does not. (A larger
    margin only costs keys, a smaller one risks a threshold one too low: both are pinned here.)"""
    probe = LaplacePartitionSelection(epsilon, 0.5, groups)
    log_p = -1.0 / float(probe.scale)
    log1p_p = math.log1p(math.exp(log_p))
    log_tail = (k + 1) * log_p - log1p_p
    terms = abs((k + 1) * log_p) + abs(log1p_p) + abs(log_tail)
    ulp = sys.float_info.epsilon
    accepted = LaplacePartitionSelection(epsilon, math.exp(log_tail + 8.5 * ulp * terms + math.log(groups)), groups)
    refused = LaplacePartitionSelection(epsilon, math.exp(log_tail + 7.5 * ulp * terms + math.log(groups)), groups)
    assert (accepted.threshold, refused.threshold) == (1.0 + k, 1.0 + k + 1)


@pytest.mark.parametrize(("epsilon", "delta", "groups"), [(1.0, 0.9, 1), (1.0, 1e-6, 1), (0.1, 1e-9, 7)])
def test_a_first_guess_too_high_is_lowered_to_the_smallest(monkeypatch, epsilon, delta, groups):
    """The closed-form guess has not been seen above the answer (20 000 random parameter sets), but float
    error could put it there; the loop that lowers it is exercised by a guess made 5 too high: the
    threshold is still the reference's (down to k = 0 at δ = 0.9)."""
    from types import SimpleNamespace

    from dpch.mechanisms import partition_selection

    expected = LaplacePartitionSelection(epsilon, delta, groups).threshold
    shim = SimpleNamespace(**{name: getattr(math, name) for name in dir(math) if not name.startswith("_")})
    shim.ceil = lambda x: math.ceil(x) + 5
    monkeypatch.setattr(partition_selection, "math", shim)
    assert LaplacePartitionSelection(epsilon, delta, groups).threshold == expected
    assert expected == 1.0 + _reference_k(_p(epsilon, groups), delta / groups)


@pytest.mark.parametrize("keys", [1, 2, 5])
def test_every_key_gets_its_noise_even_alone(keys):
    """One key is noised like many (a mutant that skipped the noise for a single key survived): over 200
    draws each key's noisy count of units moves off its exact value, with the discrete Laplace's spread
    (its standard deviation √(2p)/(1 − p) for the sampled scale, within 25%); no keys, no draws."""
    import numpy as np

    from dpch.mechanisms.sampling import NoiseSource

    selection = LaplacePartitionSelection(1.0, 1e-6, 1)
    source = NoiseSource(seed=31)
    exact = np.full(keys, 7.0)
    draws = np.array([selection.noisy_counts(exact, source) - exact for _ in range(200)])
    p = _p(1.0, 1)
    sd = math.sqrt(2 * p) / (1 - p)
    assert np.all(np.abs(draws.std(axis=0) - sd) < 0.25 * sd), (draws.std(axis=0), sd)
    assert selection.noisy_counts(np.array([]), source).size == 0


def test_the_half_width_defaults_to_95_percent():
    selection = LaplacePartitionSelection(1.0, 1e-6, 3)
    assert selection.half_width() == selection.half_width(0.95) < selection.half_width(0.99)


def test_counts_and_noisy_counts_may_be_plain_lists(source):
    """The selection takes any sequence of counts (a list as well as an array): each key's count plus one
    integer draw, kept where above τ — the same as for the array."""
    selection = LaplacePartitionSelection(1.0, 1e-6, 1)
    tau = selection.threshold
    assert selection.keep([tau - 1.0, tau, tau + 0.5, tau + 7.0]).tolist() == [False, False, True, True]
    noisy = selection.noisy_counts([3, 40, 0], source)
    assert noisy.shape == (3,) and noisy.dtype == float and all(float(v).is_integer() for v in noisy)
    assert selection.noisy_counts([], source).size == 0
