"""Samples per second of dpch's exact samplers against numpy's float samplers, same run.

Run as ``pytest tests/bench/bench_samplers.py -s`` (pytest-benchmark) or as a script
(``python tests/bench/bench_samplers.py``). Prints, per batch size, the median time and
samples/s of each sampler and its slowdown vs numpy's float Laplace/Gaussian, plus the
median and p99 of a 10 000-group release through the mechanisms, with the core count.
Issue 3's aim: exact discrete samplers within 20× of numpy when vectorised.
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable

import numpy as np

os.environ.setdefault("DPCH_ALLOW_FIXED_SEED", "1")

from dpch.mechanisms import GaussianMechanism, LaplaceMechanism, NoiseSource  # noqa: E402
from dpch.mechanisms.exact import (  # noqa: E402
    discrete_gaussian,
    discrete_laplace,
    rational_at_least,
)

BATCHES = (1_000, 10_000, 100_000)
SCALE = 3.0
SIGMA = 3.73


def _samplers(rng: np.random.Generator) -> dict[str, Callable[[int], object]]:
    lap = rational_at_least(SCALE)
    gau = rational_at_least(SIGMA**2)
    big = rational_at_least((2.0**20) ** 2)
    return {
        "numpy laplace (float)": lambda n: rng.laplace(0.0, SCALE, n),
        "numpy normal (float)": lambda n: rng.normal(0.0, SIGMA, n),
        "exact discrete laplace b=3": lambda n: discrete_laplace(rng, lap, n),
        "exact discrete gaussian s=3.73": lambda n: discrete_gaussian(rng, gau, n),
        "exact discrete gaussian s=2^20 (grid)": lambda n: discrete_gaussian(rng, big, n),
    }


def _time(fn: Callable[[], object], repeats: int) -> list[float]:
    fn()  # warm up
    out = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        out.append(time.perf_counter() - start)
    return out


def sampler_table(repeats: int = 15) -> list[tuple[str, int, float, float, float]]:
    """Rows (name, batch, median seconds, samples/s, slowdown vs numpy of the same family)."""
    rng = np.random.default_rng(2024)
    samplers = _samplers(rng)
    rows = []
    for n in BATCHES:
        medians = {}
        for name, f in samplers.items():
            medians[name] = statistics.median(_time(lambda f=f, n=n: f(n), repeats))
        for name, med in medians.items():
            family = "gauss" in name or "normal" in name
            base = medians["numpy normal (float)" if family else "numpy laplace (float)"]
            rows.append((name, n, med, n / med, med / base))
    return rows


def release_table(repeats: int = 30) -> list[tuple[str, float, float]]:
    """Median and p99 ms of a 10 000-group release through each mechanism."""
    source = NoiseSource(7)
    values = np.random.default_rng(1).uniform(0, 1e5, 10_000)
    mechs = {
        "laplace real (grid)": LaplaceMechanism(0.5, 3.0),
        "laplace integer": LaplaceMechanism(0.5, 3.0, integer=True),
        "gaussian real (grid)": GaussianMechanism(0.5, 1e-6, 3.0),
        "gaussian integer": GaussianMechanism(0.5, 1e-6, 3.0, integer=True),
        "numpy float laplace baseline": None,
    }
    rows = []
    for name, mech in mechs.items():
        if mech is None:
            times = _time(lambda: values + source.laplace(6.0, values.shape), repeats)
        else:
            times = _time(lambda m=mech: m.release(values, source), repeats)
        ms = sorted(t * 1e3 for t in times)
        rows.append((name, statistics.median(ms), ms[min(len(ms) - 1, int(0.99 * len(ms)))]))
    return rows


def report() -> str:
    lines = [f"cores: {os.cpu_count()}", ""]
    header = f"{'sampler':40s} {'batch':>7s} {'median ms':>10s} {'samples/s':>12s}"
    lines.append(header + f" {'vs numpy':>9s}")
    for name, n, med, rate, ratio in sampler_table():
        lines.append(f"{name:40s} {n:7d} {med * 1e3:10.3f} {rate:12.3e} {ratio:8.1f}x")
    lines.append("")
    lines.append(f"{'10 000-group release':32s} {'median ms':>10s} {'p99 ms':>8s}")
    for name, med, p99 in release_table():
        lines.append(f"{name:32s} {med:10.2f} {p99:8.2f}")
    return "\n".join(lines)


def test_exact_sampler_throughput(benchmark):
    """pytest-benchmark entry: times the 10k discrete Gaussian and prints the full table."""
    rng = np.random.default_rng(3)
    gau = rational_at_least(SIGMA**2)
    benchmark(lambda: discrete_gaussian(rng, gau, 10_000))
    print("\n" + report())


def test_exact_laplace_benchmark(benchmark):
    rng = np.random.default_rng(4)
    lap = rational_at_least(SCALE)
    benchmark(lambda: discrete_laplace(rng, lap, 10_000))


if __name__ == "__main__":
    print(report())
