"""Laplace noise reduction (A1) and the Brownian mechanism (A2): marginals, covariance,
noise reduction, the boundaries' test vectors, and a broken fresh-noise control."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from dpch.mechanisms.boundaries import LinearBoundary, MixtureBoundary
from dpch.mechanisms.brownian import (
    BrownianMechanism,
    BrownianRun,
    accuracy_first_times,
    simulated_path,
)
from dpch.mechanisms.lnr import LaplaceNoiseReduction, LaplacePath, markov_laplace_path
from tests.mechanisms.fresh_noise import FreshNoiseRun

N = 100_000
P_CRIT = 1e-4

# ------------------------------------------------------------------ boundaries (A2 numbers)


def test_linear_optimum_a2():
    """A2 [derived]: ε=0.3, δ=1e-6, Δ2=1 → a*=0.149194, b*=46.30036, T*=310.336."""
    lb = LinearBoundary.optimal(0.3, 1e-6)
    assert lb.a == pytest.approx(0.149194, rel=1e-5)
    assert lb.b == pytest.approx(46.30036, rel=1e-6)
    assert lb.time_for(0.3) == pytest.approx(310.336, rel=1e-5)
    assert 2 * lb.a * lb.b == pytest.approx(np.log(1e6))


def test_mixture_optimum_a2():
    """A2 [derived]: mixture optimum at the same target ρ* ≈ 11.58, T* ≈ 360.0 (4 s.f.)."""
    mb = MixtureBoundary.optimal(0.3, 1e-6)
    assert mb.rho == pytest.approx(11.58, rel=5e-4)
    assert mb.time_for(0.3) == pytest.approx(360.0, rel=5e-4)


@pytest.mark.parametrize(
    ("t", "lin", "mix"),
    [(100, 0.61720, 0.58256), (1000, 0.19599, 0.18070), (10000, 0.15387, 0.05873)],
)
def test_boundary_table_a2(t, lin, mix):
    """A2 test-vector table (Δ2 = 1, δ = 1e-6, a*, b*, ρ* for ε = 0.3), 4 significant digits."""
    assert LinearBoundary.optimal(0.3, 1e-6)(t) == pytest.approx(lin, rel=1e-4)
    assert MixtureBoundary.optimal(0.3, 1e-6)(t) == pytest.approx(mix, rel=1e-4)


def test_boundary_inversion_is_smallest_time():
    """T = smallest t with ψ(t) ≤ ε (A2 notes 002 prints the infimum backwards)."""
    for b in (LinearBoundary.optimal(0.5, 1e-6, 2.0), MixtureBoundary(5.0, 1e-6, 2.0)):
        t = b.time_for(0.5)
        assert b(t) <= 0.5 + 1e-9 and b(t * 0.999) > 0.5


def test_linear_floor_unreachable():
    lb = LinearBoundary(0.2, 1e-6)
    with pytest.raises(ValueError):
        lb.time_for(0.2)


# ------------------------------------------------------------------ LNR (A1)


def test_markov_lnr_marginals_are_laplace(rng):
    """Whitehouse et al. 2022, eq. 5: every ζ_n ~ Lap(t_n) (KS, p = 1e-4, 10^5 paths)."""
    scales = [1.0, 1.5, 3.0, 10.0]
    path = markov_laplace_path(scales, N, rng)
    for n, t in enumerate(scales):
        p = stats.kstest(path[n], stats.laplace(scale=t).cdf).pvalue
        assert p > P_CRIT, f"ζ_{n + 1} vs Lap({t}): KS p={p:.2e}"


def test_markov_lnr_stay_probability(rng):
    """P(ζ_n = ζ_{n−1}) = (t_{n−1}/t_n)², within 4.5 binomial standard errors."""
    scales = [2.0, 3.0, 6.0]
    path = markov_laplace_path(scales, N, rng)
    for n in (1, 2):
        want = (scales[n - 1] / scales[n]) ** 2
        got = float(np.mean(path[n] == path[n - 1]))
        se = np.sqrt(want * (1 - want) / N)
        assert abs(got - want) < 4.5 * se, f"stay rate {got:.4f} vs {want:.4f} ± 4.5·se"


def test_broken_lnr_is_detected(rng):
    """Negative control: stay probability t_{n−1}/t_n (no square) breaks the marginal."""
    t0, t1 = 1.0, 3.0
    z0 = rng.laplace(0, t0, N)
    stay = rng.random(N) < t0 / t1
    z1 = np.where(stay, z0, z0 + rng.laplace(0, t1, N))
    p = stats.kstest(z1, stats.laplace(scale=t1).cdf).pvalue
    assert p < P_CRIT, f"the broken chain should fail the marginal test, p={p:.2e}"


def test_lnr_run_releases_noisiest_first_and_costs_last_epsilon(source):
    mech = LaplaceNoiseReduction(sensitivity=1.0, epsilons=[0.1, 0.2, 0.5, 1.0])
    run = mech.start(np.zeros(N), source)
    assert run.cost.epsilon == 0.0
    spreads = []
    for k in range(2):
        spreads.append(np.std(run.next()))
        assert run.cost.epsilon == pytest.approx(mech.epsilons[k])  # Whitehouse et al. 2022, Prop 4.2: Δ1/t_N
    assert run.cost.ex_post and run.cost.worst_epsilon == pytest.approx(1.0)
    assert spreads[0] > spreads[1], "iterates must get less noisy"
    # released marginals: iterate 2 ~ Lap(Δ1/ε_2)
    assert np.std(run.next()) == pytest.approx(np.sqrt(2) * 2.0, rel=0.03)


def test_continuous_laplace_path(rng):
    """Whitehouse et al. 2022, eq. 6 / Thm D.1: Z_t ~ Lap(t); flat on [4, 8] with probability (4/8)² (A1 [derived])."""
    path = LaplacePath(floor=0.5, rng=rng, size=N)
    z4 = path.value(4.0)
    z8 = path.value(8.0)  # lazily extended beyond the first horizon
    for t, z in ((4.0, z4), (8.0, z8), (0.5, path.value(0.5))):
        p = stats.kstest(z, stats.laplace(scale=t).cdf).pvalue
        assert p > P_CRIT, f"Z_{t} vs Lap({t}): KS p={p:.2e}"
    flat = float(np.mean(z4 == z8))
    se = np.sqrt(0.25 * 0.75 / N)
    assert abs(flat - 0.25) < 4.5 * se, f"P(flat 4→8) = {flat:.4f} vs 0.25 ± 4.5·se"


# ------------------------------------------------------------------ Brownian (A2)

TIMES = [100.0, 40.0, 10.0, 2.0]


def _noise_paths(run_cls, source, n=N):
    mech = BrownianMechanism(1.0, TIMES, LinearBoundary.optimal(1.0, 1e-6))
    values = np.zeros(n)
    run = run_cls(mech, values, source.generator)
    return np.stack([run.next() for _ in TIMES])


def test_bm_marginals_and_covariance(source):
    """Var B_T = T and Cov(B_s, B_t) = min(s, t), within 4.5 standard errors (10^5 paths)."""
    paths = _noise_paths(BrownianRun, source)
    for i, s in enumerate(TIMES):
        var = paths[i].var()
        se = s * np.sqrt(2 / N)
        assert abs(var - s) < 4.5 * se, f"Var B_{s} = {var:.3f} vs {s} ± {4.5 * se:.3f}"
        p = stats.kstest(paths[i], stats.norm(scale=np.sqrt(s)).cdf).pvalue
        assert p > P_CRIT, f"B_{s} vs N(0, {s}): KS p={p:.2e}"
        for j in range(i + 1, len(TIMES)):
            t = TIMES[j]
            cov = float(np.mean(paths[i] * paths[j]))
            se = np.sqrt((s * t + min(s, t) ** 2) / N)
            assert abs(cov - min(s, t)) < 4.5 * se, f"Cov(B_{s}, B_{t}) = {cov:.3f} vs {min(s, t)}"


def test_bm_noise_really_reduces(source):
    """Along one path the last iterate's error has variance T_K (a single Gaussian at T_K),
    not the sum of the steps' variances, and its law is N(0, T_K)."""
    paths = _noise_paths(BrownianRun, source)
    final = paths[-1]
    se = TIMES[-1] * np.sqrt(2 / N)
    assert abs(final.var() - TIMES[-1]) < 4.5 * se
    assert final.var() < 0.1 * sum(TIMES), "final error must not accumulate the steps"


def test_fresh_noise_variant_is_detected(source):
    """Negative control (A7 pitfall 1): fresh noise per step has the right marginals but
    Cov(B_100, B_2) ≈ 0 instead of 2 — the covariance test above catches it."""
    paths = _noise_paths(FreshNoiseRun, source)
    cov = float(np.mean(paths[0] * paths[-1]))
    se = np.sqrt((100.0 * 2.0 + 4.0) / N)
    assert abs(cov - 2.0) > 4.5 * se, f"fresh noise covariance {cov:.3f} not distinguishable"


def test_bm_cost_at_stop(source):
    """Whitehouse et al. 2022, Cor 3.7 ex-post ψ(T_N) and Rogers et al. 2023, Thm 6 charge Δ2²/(2T_N) at the stop."""
    mech = BrownianMechanism.for_target(0.3, 1e-6, sensitivity=2.0, kind="mixture", steps=5)
    run = mech.start(np.zeros(3), source)
    run.next()
    run.next()
    t = run.time
    assert run.cost.epsilon == pytest.approx(mech.boundary(t))
    assert run.cost.rho == pytest.approx(4.0 / (2 * t))
    assert run.cost.delta == 1e-6 and run.cost.ex_post
    assert mech.worst_cost.epsilon == pytest.approx(0.3, rel=1e-9)
    with pytest.raises(ValueError):
        run.refine(t * 2)  # time can only decrease


def test_accuracy_first_grid():
    """A5: ε² equally spaced from 1e-4 to 2ρ_rem; the finest point costs ρ_rem."""
    times = accuracy_first_times(0.0174689, points=1000)
    assert times[0] == pytest.approx(1e4) and np.all(np.diff(times) < 0)
    assert 1.0 / (2 * times[-1]) == pytest.approx(0.0174689)


def test_bm_time_for_half_width():
    t = BrownianMechanism.time_for_half_width(5.0, 0.9)
    assert BrownianMechanism.half_width(t, 0.9) == pytest.approx(5.0, rel=1e-9)


def test_a_continued_run_is_the_same_brownian_path(source):
    """refine() continues a stopped run over a finer grid (BrownianRun.continued): the joint law is
    still one Brownian path, Cov(B_s, B_t) = min(s, t) across the two runs (4.5 standard errors),
    and a continuation may not go back up in time."""
    boundary = LinearBoundary.optimal(1.0, 1e-6)
    first = BrownianMechanism(1.0, TIMES[:2], boundary).start(np.zeros(N), source)
    head = [first.next() for _ in TIMES[:2]]
    rest = first.continued(BrownianMechanism(1.0, TIMES[2:], boundary))
    paths = np.stack(head + [rest.next() for _ in TIMES[2:]])
    for i, s in enumerate(TIMES):
        assert abs(paths[i].var() - s) < 4.5 * s * np.sqrt(2 / N)
        for j in range(i + 1, len(TIMES)):
            t = TIMES[j]
            cov = float(np.mean(paths[i] * paths[j]))
            assert abs(cov - t) < 4.5 * np.sqrt((s * t + t * t) / N), f"Cov(B_{s}, B_{t}) = {cov:.3f} vs {t}"
    assert rest.cost.rho == pytest.approx(1 / (2 * TIMES[-1]))
    with pytest.raises(ValueError, match="must not exceed"):
        rest.continued(BrownianMechanism(1.0, [50.0], boundary))


def test_the_simulated_path_has_the_bridge_s_law(source):
    """The vectorised forward path the benchmarks use (simulated_path) has the same law as the bridge a
    release walks: Var B_t = t, Cov(B_s, B_t) = min(s, t) (4.5 standard errors, 10^5 paths); KS against
    N(0, t) for the last time."""
    paths = simulated_path(TIMES, source.generator, size=N).T
    bridge = _noise_paths(BrownianRun, source)
    for i, s in enumerate(TIMES):
        assert abs(paths[i].var() - s) < 4.5 * s * np.sqrt(2 / N)
        for j in range(i + 1, len(TIMES)):
            t = TIMES[j]
            for p in (paths, bridge):
                assert abs(float(np.mean(p[i] * p[j])) - t) < 4.5 * np.sqrt((s * t + t * t) / N)
    assert stats.kstest(paths[-1], stats.norm(scale=np.sqrt(TIMES[-1])).cdf).pvalue > P_CRIT
    with pytest.raises(ValueError, match="non-increasing"):
        simulated_path([1.0, 2.0], source.generator)
