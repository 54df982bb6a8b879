"""Audit throughput: trials per second of the fast path (exact aggregates once, vectorised
noise) against the full-stack path (one Session.query per trial), measured in the same run.

Run: python tests/bench/bench_audit.py
"""

from __future__ import annotations

import os
import tempfile
import time

os.environ["DPCH_ALLOW_FIXED_SEED"] = "1"

import dpch  # noqa: E402
from dpch.audit import audit_query  # noqa: E402
from dpch.fixtures import visits  # noqa: E402

QUERIES = [
    ("count, Laplace", "SELECT count(*) FROM visits", {"epsilon": 1.0}),
    ("group-by sum, Laplace", "SELECT region, sum(spend) FROM visits GROUP BY region", {"epsilon": 1.0}),
    ("count, Gaussian", "SELECT count(*) FROM visits", {"epsilon": 1.0, "delta": 1e-6}),
]


def main() -> None:
    print(f"cores: {os.cpu_count()}")
    session = dpch.connect(f"chdb://{tempfile.mkdtemp()}", database="bench", seed=1)
    visits.load(session.engine, "visits")
    print("| query | fast: 20 000 trials/side, s | fast trials/s | full: 200 trials/side, s | full trials/s | ratio |")
    print("|---|---|---|---|---|---|")
    for name, sql, options in QUERIES:
        started = time.perf_counter()
        audit_query(session, sql, trials=20_000, seed=2, **options)
        fast = time.perf_counter() - started
        started = time.perf_counter()
        audit_query(session, sql, trials=200, mode="full", seed=2, **options)
        full = time.perf_counter() - started
        fast_rate, full_rate = 40_000 / fast, 400 / full
        print(f"| {name} | {fast:.2f} | {fast_rate:,.0f} | {full:.2f} | {full_rate:,.0f} "
              f"| {fast_rate / full_rate:,.0f}× |")
    session.close()


if __name__ == "__main__":
    main()
