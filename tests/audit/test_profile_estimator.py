"""The privacy-profile estimator (dpch.audit.profile) on samples with known privacy (numpy and
dpch's exact discrete Gaussian sampler; no database).

Statistics: every sample has a fixed seed. The DKW bands hold with probability ≥ 1 − α for
every ε and threshold at once, so a correctly calibrated Gaussian is flagged with probability
≤ α; the false-violation test runs 40 replicates at α = 0.05 and allows 6 (binomial(40, 0.05)
exceeds 6 with probability 0.8%; DKW is conservative, so the real rate is far lower). Power:
a count's claim (Δ 10, σ 42.25 — ε 1, δ 1e-6) has total variation 0.094 at ε 0; σ 30% smaller
has 0.134, and the slack λ(1 + e^0) is 0.017 at 50 000 samples per side, so the excess (≈ 0.02)
is caught; the pure-ε threshold bound on the same samples stays near 0.6 of the claim.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpch.audit.estimators import threshold_bound
from dpch.audit.profile import ClaimedProfile, claimed_profile, dkw_slack, empirical_profile, profile_bound
from dpch.mechanisms.calibration import analytic_gaussian_delta, analytic_gaussian_sigma
from dpch.mechanisms.discrete import discrete_gaussian_delta
from dpch.mechanisms.gaussian import GaussianMechanism
from dpch.mechanisms.laplace import LaplaceMechanism
from dpch.mechanisms.sampling import NoiseSource

#: a Gaussian count at ε 1, δ 1e-6 with contribution cap 10 (the audit suite's count)
SENSITIVITY = 10.0
SIGMA = analytic_gaussian_sigma(1.0, 1e-6, SENSITIVITY)
N = 50_000


def _gaussian_pair(rng: np.random.Generator, sigma: float, n: int = N) -> tuple[np.ndarray, np.ndarray]:
    return rng.normal(0.0, sigma, n), rng.normal(SENSITIVITY, sigma, n)


def test_claimed_gaussian_profile_is_balle_wang_and_meets_the_calibration():
    claim = ClaimedProfile("gaussian", mu=SENSITIVITY / SIGMA)
    eps = np.array([0.0, 0.3, 1.0])
    want = [analytic_gaussian_delta(SIGMA, e, SENSITIVITY) for e in eps]
    assert claim.delta(eps) == pytest.approx(want, rel=1e-12)
    assert claim.delta([1.0])[0] == pytest.approx(1e-6, rel=1e-6), "σ is calibrated for (1, 1e-6)"
    # at ε 0 the profile is the total variation distance 2Φ(μ/2) − 1
    assert claim.delta([0.0])[0] == pytest.approx(math.erf(SENSITIVITY / SIGMA / (2 * math.sqrt(2))), rel=1e-9)
    grid = claim.epsilon_grid()
    assert grid[0] == 0.0 and claim.delta([grid[-1]])[0] <= 1e-9 < claim.delta([grid[-1] / 2])[0]


def test_claimed_discrete_profile_is_cks_theorem_7():
    claim = ClaimedProfile("discrete gaussian", sigma=42.0, shift=10)
    assert claim.delta([0.5])[0] == pytest.approx(discrete_gaussian_delta(0.5, 42.0, 10), rel=1e-12)


def test_which_releases_have_a_claimed_profile():
    cont = GaussianMechanism(1.0, 1e-6, 5.0)
    other = GaussianMechanism(0.5, 1e-6, 3.0)
    count = GaussianMechanism(1.0, 1e-6, 10.0, integer=True)
    profile, _ = claimed_profile({"m0": cont, "m1": other})
    assert profile is not None and profile.kind == "gaussian"
    assert profile.mu == pytest.approx(math.hypot(5.0 / cont.sigma, 3.0 / other.sigma)), "one μ for the composition"
    profile, _ = claimed_profile({"m0": count})
    assert profile is not None and profile.kind == "discrete gaussian" and profile.shift == 10
    assert profile.sigma == count.sigma
    vector = GaussianMechanism(1.0, 1e-6, 10.0, integer=True, dimension=3)
    for mechanisms, other_mechanisms, moved, reason in [
        ({"m0": LaplaceMechanism(1.0, 1.0)}, False, None, "not a Gaussian release"),
        ({"m0": cont}, True, None, "quantiles or partition selection"),
        ({"m0": count, "m1": cont}, False, None, "integer Gaussian noise on several"),
        ({"m0": count, "m1": cont}, False, {"m0": 1, "m1": 1}, "integer Gaussian noise on several"),
        ({"m0": vector}, False, None, "integer Gaussian noise on several"),
        ({"m0": vector}, False, {"m0": 2}, "integer Gaussian noise on several"),
    ]:
        profile, note = claimed_profile(mechanisms, other_mechanisms=other_mechanisms, moved=moved)
        assert profile is None and reason in note
    # an integer vector whose audited pair moves one coordinate: the scalar discrete Gaussian at ⌈Δ2⌉
    profile, _ = claimed_profile({"m0": vector}, moved={"m0": 1})
    assert profile is not None and profile.kind == "discrete gaussian"
    assert profile.sigma == vector.sigma and profile.shift == 10 and "one coordinate moves" in profile.description


def test_dkw_slack_meets_massarts_bound():
    lam = dkw_slack(10_000, 0.01)
    assert 2 * math.exp(-2 * 10_000 * lam**2) == pytest.approx(0.01)


def test_point_estimate_recovers_the_exact_profile():
    """Without slack, the empirical profile is within 4 standard errors of the exact curve at ε 0
    (se of a difference of two proportions ≈ √(2·0.25/n)) and at ε 0.3 (the curve is nearly
    attained by the likelihood-ratio half-line)."""
    rng = np.random.default_rng(3)
    x0, x1 = _gaussian_pair(rng, SIGMA)
    eps = np.array([0.0, 0.3])
    got = empirical_profile(x0, x1, eps)
    want = ClaimedProfile("gaussian", mu=SENSITIVITY / SIGMA).delta(eps)
    se = math.sqrt(2 * 0.25 / N)
    assert np.all(np.abs(got - want) < 4 * se), f"{got} vs {want} (4 se = {4 * se:.4f})"


def test_a_calibrated_gaussian_is_not_a_violation_beyond_alpha():
    rng = np.random.default_rng(5)
    claim = ClaimedProfile("gaussian", mu=SENSITIVITY / SIGMA)
    violations = 0
    for _ in range(40):
        x0, x1 = _gaussian_pair(rng, SIGMA, 20_000)
        violations += profile_bound(x0, x1, claim, confidence=0.95).violation
    assert violations <= 6, f"{violations}/40 false violations at α = 0.05"


@pytest.mark.parametrize("factor", [1.0, 0.7])
def test_sigma_thirty_percent_too_small_is_caught_where_the_pure_epsilon_bound_is_not(factor: float):
    rng = np.random.default_rng(7)
    claim = ClaimedProfile("gaussian", mu=SENSITIVITY / SIGMA)
    x0, x1 = _gaussian_pair(rng, factor * SIGMA)
    profile = profile_bound(x0, x1, claim, confidence=0.975)
    eps_lb = threshold_bound(x0, x1, delta=1e-6, confidence=0.975).epsilon_lb
    assert eps_lb < 1.0, f"the pure-ε bound {eps_lb:.3f} stays under the claimed ε 1 (σ × {factor})"
    if factor == 1.0:
        assert not profile.violation, f"calibrated: excess {profile.excess:.4f} must be ≤ 0"
        assert profile.tightness > 0.75, f"δ_lb(0) is {profile.tightness:.0%} of the claimed TV"
    else:
        assert profile.violation, f"σ × {factor}: excess {profile.excess:.4f} must be > 0"
        assert profile.delta_lower[0] > profile.claimed[0], "seen already at ε 0 (total variation)"


def test_several_coordinates_choose_the_moving_one_on_the_first_half():
    """Five released coordinates (groups), the unit moves one: the statistic chosen on the first
    half is that coordinate (or the discriminant), and σ × 0.7 is caught on the second half."""
    rng = np.random.default_rng(9)
    claim = ClaimedProfile("gaussian", mu=SENSITIVITY / SIGMA)
    for factor, caught in ((1.0, False), (0.7, True)):
        sigma = factor * SIGMA
        x0 = rng.normal(0.0, sigma, (2 * N, 5))
        x1 = rng.normal(0.0, sigma, (2 * N, 5))
        x1[:, 2] += SENSITIVITY
        labels = [f"m0 [g{j}]" for j in range(5)]
        bound = profile_bound(x0, x1, claim, confidence=0.95, labels=labels)
        assert bound.statistic in ("m0 [g2]", "linear discriminant")
        assert bound.n_d == N, "measured on the second half"
        assert bound.violation == caught, f"σ × {factor}: excess {bound.excess:.4f}"


@pytest.mark.parametrize(("factor", "caught"), [(1.0, False), (0.7, True)])
def test_discrete_gaussian_count(factor: float, caught: bool, monkeypatch: pytest.MonkeyPatch):
    """An integer count released with dpch's exact discrete Gaussian, against CKS Thm 7's curve at
    the calibrated σ."""
    monkeypatch.setenv("DPCH_ALLOW_FIXED_SEED", "1")
    mech = GaussianMechanism(1.0, 1e-6, SENSITIVITY, integer=True)
    claim, _ = claimed_profile({"m0": mech})
    assert claim is not None
    source = NoiseSource(seed=11)
    sigma = factor * mech.sigma
    x0 = 1000 + source.discrete_gaussian(sigma, N).astype(float)
    x1 = 1010 + source.discrete_gaussian(sigma, N).astype(float)
    bound = profile_bound(x0, x1, claim, confidence=0.95)
    assert bound.violation == caught, f"σ × {factor}: excess {bound.excess:.4f}"
