"""Benchmark: Rogers et al. 2023, §7.2's synthetic relative-error experiment, Brownian noise reduction vs doubling.

Zipf a = 0.75 over 300 items (ℓ∞ sensitivity 1), top remaining item by the exponential mechanism
(ε_EM = 0.1, ε_EM²/8 zCDP), relative error α = 10%, budget (ε, δ'') = (10, 1e-6) → ρ = 1.353015
(Σε² = 2.706), (ε^(1))² = 1e-4, 1000 grid points, n ∈ {8 000 … 128 000}. All methods see the
same data sets in one run. ``brownian-geometric`` is dpch's SQL grid (ε² geometric) for comparison.

    python tests/bench/bench_accuracy_first.py [--trials 1000] [--seed 1]
"""

from __future__ import annotations

import argparse
import os
import time

from dpch.accuracy.doubling import METHODS, relative_error_experiment

SIZES = (8_000, 16_000, 32_000, 64_000, 128_000)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--trials", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    print(f"# {args.trials} trials per n, seed {args.seed}, {os.cpu_count()} cores")
    print("| n | Brownian: returned (min) | precision (min) | doubling: returned (min) | precision (min) "
          "| ratio returned | Δ precision (points) | Brownian, geometric grid: returned | precision |")
    print("|---|---|---|---|---|---|---|---|---|")
    started = time.perf_counter()
    for n in SIZES:
        r = relative_error_experiment(n, args.trials, args.seed + n, methods=METHODS)
        b, d, g = r["brownian"], r["doubling"], r["brownian-geometric"]
        print(f"| {n} | {b['returned_mean']:.1f} ({b['returned_min']:.0f}) | {b['precision_mean']:.1%} "
              f"({b['precision_min']:.1%}) | {d['returned_mean']:.1f} ({d['returned_min']:.0f}) | "
              f"{d['precision_mean']:.1%} ({d['precision_min']:.1%}) | {b['returned_mean'] / d['returned_mean']:.2f}× "
              f"| {100 * (b['precision_mean'] - d['precision_mean']):+.1f} | {g['returned_mean']:.1f} | "
              f"{g['precision_mean']:.1%} |", flush=True)
    print(f"# {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
