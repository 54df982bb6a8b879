"""Top-k selection against releasing every noisy count and sorting (issue 16, part 2 benchmark).

Run:  python tests/bench/bench_top_k.py [--people 20000] [--runs 200]
  or  pytest tests/bench/bench_top_k.py -s        (a short run)

Two Zipf-distributed tables (s = 1.1) over 1 000 declared keys: ``hits``, one page per person, scored
by ``count()``; ``views``, up to 10 distinct pages per person, scored by unique visitors
``count(DISTINCT pid)``. At equal total ε, for k = 1, 5 and 10, the precision@k
(|picked ∩ true top k| / k) of

- **top-k, Gumbel**: ``ORDER BY count() DESC LIMIT k SETTINGS dp_select = 'top'`` (keys only: the
  whole ε on k peeled exponential mechanisms, ε/k each, monotone counts);
- **top-k, Gaussian RNM**: the same with ``dp_mechanism = 'gaussian', dp_score_max = <people>``
  (Lebensold et al. 2024, Thm 8; the public range is the number of people);
- **all counts, sorted**: the ordinary ``GROUP BY`` release of every key's Laplace count at ε,
  sorted by its noisy value (free post-processing).

The exact aggregate runs once per method; each run redraws only the noise through the production
release stages with a fixed seed. Nothing is asserted: this is a measurement (docs/development.md).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

import numpy as np

os.environ.setdefault("DPCH_ALLOW_FIXED_SEED", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import dpch  # noqa: E402
from dpch.accounting.budget import Budget  # noqa: E402
from dpch.mechanisms.sampling import NoiseSource  # noqa: E402
from dpch.pipeline import execute  # noqa: E402
from dpch.pipeline.calibrate import calibrate  # noqa: E402
from dpch.pipeline.release import release_rows  # noqa: E402
from dpch.pipeline.top_k import calibrate_top_k, release_top_k  # noqa: E402
from dpch.sql.rewrite import emit_sql  # noqa: E402

KEYS = 1000
KS = (1, 5, 10)
EPSILONS = (0.005, 0.02, 0.1)


#: the two scenarios: (table, rows per person, score) — one page per person (a unit moves one key's
#: count by 1: ℓ1 = ℓ∞ = 1), or up to 10 distinct pages per person scored by unique visitors (a unit
#: moves up to 10 keys by 1 each: ℓ1 = 10 for the released counts, ℓ∞ = 1 for report noisy max)
SCENARIOS = (("hits", 1, "count()"), ("views", 10, "count(DISTINCT pid)"))


#: a fixed cap key (a release draws its own)
CAP_KEY = (0x0123456789ABCDEF, 0xFEDCBA9876543210)


def load(session: dpch.Session, table: str, people: int, pages_each: int, seed: int = 1) -> dict[int, int]:
    """``people`` persons, each visiting ``pages_each`` distinct pages of 0…999 drawn with Zipf(1.1)
    popularity (fewer where the draw repeats); returns each page's exact number of visitors."""
    rng = np.random.default_rng(seed)
    weights = 1.0 / np.arange(1, KEYS + 1) ** 1.1
    draws = rng.choice(KEYS, size=(people, pages_each), p=weights / weights.sum())
    rows = sorted({(i, int(p)) for i in range(people) for p in draws[i]})
    engine = session.engine
    cap = "unique_units" if pages_each == 1 else f"max_rows_per_unit={pages_each}"
    engine.command(f"CREATE TABLE {engine.table(table)} (pid UInt32, page UInt16 COMMENT 'dp: bounds=[0, {KEYS - 1}]')"
                   f" ENGINE = MergeTree ORDER BY pid COMMENT 'dp: privacy_unit=pid, {cap}'")
    engine.insert(table, rows, ["pid", "page"])
    session.policy.reload()
    pages = np.array([p for _, p in rows])
    return {int(p): int(n) for p, n in zip(*np.unique(pages, return_counts=True), strict=True)}


def true_top(counts: dict[int, int], k: int) -> set[int]:
    return set(sorted(range(KEYS), key=lambda p: (-counts.get(p, 0), p))[:k])


def precision_top_k(session: dpch.Session, sql: str, counts: dict[int, int], k: int, runs: int) -> float:
    plan, opts = session.plan(sql)
    noise = calibrate_top_k(plan, opts)
    data = execute.exact(session.engine, plan, emit_sql(plan, session.engine.database), CAP_KEY)
    truth = true_top(counts, k)
    hits = [len({row[0] for row in release_top_k(plan, opts, noise, data, NoiseSource(seed))[1]} & truth)
            for seed in range(runs)]
    return float(np.mean(hits)) / k


def precision_sorted(session: dpch.Session, sql: str, counts: dict[int, int], runs: int) -> dict[int, float]:
    plan, opts = session.plan(sql)
    noise = calibrate(plan, opts)
    data = execute.exact(session.engine, plan, emit_sql(plan, session.engine.database), CAP_KEY)
    hits: dict[int, list[int]] = {k: [] for k in KS}
    truth = {k: true_top(counts, k) for k in KS}
    for seed in range(runs):
        _, rows, _ = release_rows(plan, opts, noise, data, NoiseSource(seed))
        ranked = [row[0] for row in sorted(rows, key=lambda r: -r[1])]
        for k in KS:
            hits[k].append(len(set(ranked[:k]) & truth[k]))
    return {k: float(np.mean(h)) / k for k, h in hits.items()}


def main(argv: list[str] | None = None) -> dict[tuple[str, float, int], dict[str, float]]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--people", type=int, default=20_000)
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--epsilons", type=float, nargs="*", default=list(EPSILONS))
    args = parser.parse_args(argv)
    results: dict[tuple[str, float, int], dict[str, float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        session = dpch.connect(f"chdb://{tmp}", database="bench", default_budget=Budget(1e9, 0.9), seed=1)
        for table, pages_each, score in SCENARIOS:
            counts = load(session, table, args.people, pages_each)
            ranked = sorted(counts.values(), reverse=True)
            print(f"{table}: {args.people} people, {pages_each} page(s) each, score {score}; top scores "
                  f"{ranked[:3]}, 10th {ranked[9]}, 11th {ranked[10]}")
            for eps in args.epsilons:
                sorted_all = precision_sorted(
                    session, f"SELECT page, {score} AS n FROM {table} GROUP BY page SETTINGS dp_epsilon = {eps}",
                    counts, args.runs)
                for k in KS:
                    top = (f"SELECT page FROM {table} GROUP BY page ORDER BY {score} DESC LIMIT {k} "
                           f"SETTINGS dp_epsilon = {eps}, dp_select = 'top'")
                    results[(table, eps, k)] = {
                        "top-k, Gumbel": precision_top_k(session, top, counts, k, args.runs),
                        "top-k, Gaussian RNM": precision_top_k(
                            session, top + f", dp_mechanism = 'gaussian', dp_score_max = {args.people}", counts,
                            k, args.runs),
                        "all counts, sorted": sorted_all[k],
                    }
        session.close()
    methods = ("top-k, Gumbel", "top-k, Gaussian RNM", "all counts, sorted")
    print(f"precision@k over {args.runs} draws each, equal total ε")
    print(f"{'table':<6} {'ε':>6} {'k':>3} " + " ".join(f"{m:>20}" for m in methods))
    for (table, eps, k), row in results.items():
        print(f"{table:<6} {eps:>6g} {k:>3} " + " ".join(f"{row[m]:>20.3f}" for m in methods))
    return results


def test_short_run() -> None:
    """A short run (not a test of the aims; the measurement is the script's)."""
    results = main(["--people", "3000", "--runs", "5", "--epsilons", "1"])
    assert {k for _, _, k in results} == set(KS)


if __name__ == "__main__":
    main()
