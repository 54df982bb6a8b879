"""Parse + analyze + rewrite time per query over the corpus (issue 5; aim: median under 1 ms).

Run:  python tests/bench/bench_sql.py   or   pytest tests/bench/bench_sql.py -s

Policies are read once (as a session does); the timing covers sqlglot parsing, the analysis
(sensitivities, bounds, grouping) and emitting the ClickHouse SQL — no query runs. The baseline
in the same run is sqlglot alone parsing and re-emitting the same text.
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
import tomllib
from pathlib import Path

os.environ.setdefault("DPCH_ALLOW_FIXED_SEED", "1")

import sqlglot  # noqa: E402

import dpch  # noqa: E402
from dpch.fixtures import tables  # noqa: E402
from dpch.sql.rewrite import emit_sql  # noqa: E402

CORPUS = tomllib.loads((Path(__file__).parents[2] / "dpch" / "fixtures" / "corpus.toml").read_text())


def run(rounds: int = 20) -> str:
    with tempfile.TemporaryDirectory() as tmp:
        session = dpch.connect(f"chdb://{tmp}/store", seed=1)
        tables.load_all(session.engine, people=2000)
        queries = [c["sql"] for c in CORPUS["accepted"]]
        for sql in queries:  # warm the policy cache
            session.plan(sql)
        ours, base = [], []
        for _ in range(rounds):
            for sql in queries:
                started = time.perf_counter()
                plan, _ = session.plan(sql)
                emit_sql(plan, session.engine.database)
                ours.append((time.perf_counter() - started) * 1000)
                started = time.perf_counter()
                sqlglot.parse_one(sql, read="clickhouse").sql("clickhouse")
                base.append((time.perf_counter() - started) * 1000)
        session.close()
    ours.sort()
    base.sort()

    def p99(xs: list[float]) -> float:
        return xs[int(0.99 * (len(xs) - 1))]

    med, b_med = statistics.median(ours), statistics.median(base)
    return "\n".join([
        f"machine: {os.cpu_count()} cores; {len(queries)} corpus queries × {rounds} rounds",
        "| step | median ms | p99 ms |",
        "|---|---|---|",
        f"| dpch parse + analyze + rewrite | {med:.3f} | {p99(ours):.3f} |",
        f"| sqlglot parse + generate only (baseline) | {b_med:.3f} | {p99(base):.3f} |",
        f"ratio (median): {med / b_med:.2f}×",
    ])


def test_bench_sql(capsys):  # pragma: no cover - benchmark
    report = run()
    with capsys.disabled():
        print("\n" + report)


if __name__ == "__main__":
    sys.stdout.write(run() + "\n")
