"""Query latency and overhead against raw ClickHouse (issue: foundation, "Speed").

Run:  python tests/bench/bench_query.py [--rows 10000000] [--runs 50]
  or  pytest tests/bench/bench_query.py -s

Reports, in one run on one embedded store:
1. median and p99 latency of the demo's queries through dpch (table of ~150k rows), with the
   share spent in parse+analyze+rewrite and in the ledger write;
2. on a table of --rows rows ordered by its unit, dpch's query time against the same aggregate
   run raw through clickhouse-connect (the ratio), with and without the contribution cap.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

os.environ.setdefault("DPCH_ALLOW_FIXED_SEED", "1")

import dpch  # noqa: E402
from dpch.accounting.budget import Budget  # noqa: E402
from dpch.cli.demo import DEMO_QUERIES  # noqa: E402
from dpch.fixtures import visits  # noqa: E402
from dpch.sql.cap import keyed  # noqa: E402

#: a fixed cap key for the emitted SQL run directly (a release draws its own, dpch.sql.cap.row_order)
CAP_KEY = (0x0123456789ABCDEF, 0xFEDCBA9876543210)


def _timed(fn, runs: int) -> list[float]:
    out = []
    for _ in range(runs):
        started = time.perf_counter()
        fn()
        out.append((time.perf_counter() - started) * 1000.0)
    return out


def _stats(ms: list[float]) -> tuple[float, float]:
    ms = sorted(ms)
    return statistics.median(ms), ms[min(len(ms) - 1, int(round(0.99 * (len(ms) - 1))))]


def run(rows: int, runs: int) -> str:
    lines = [f"machine: {os.cpu_count()} cores; runs per query: {runs}", ""]
    with tempfile.TemporaryDirectory() as tmp:
        session = dpch.connect(f"chdb://{tmp}/store", analyst="bench", default_budget=Budget(1e12, 0.9), seed=1)
        engine = session.engine
        visits.load(engine, "visits")
        raw = engine  # the same store, the emitted SQL run directly

        lines.append("demo queries (visits, ~150k rows, 10 rows per unit cap)")
        lines.append("| query | dpch median ms | dpch p99 ms | parse+analyze+rewrite ms | raw CH same SQL ms |")
        lines.append("|---|---|---|---|---|")
        for title, sql in DEMO_QUERIES:
            session.query(sql)  # warm the probe cache and the policy
            total = _timed(lambda sql=sql: session.query(sql), runs)
            plan_ms = _timed(lambda sql=sql: session.plan(sql), runs)
            emitted = session.explain(sql).sql
            raw_ms = _timed(lambda emitted=emitted: raw.query_rows(emitted, keyed(emitted, CAP_KEY)), runs)
            med, p99 = _stats(total)
            lines.append(f"| {title} | {med:.2f} | {p99:.2f} | {statistics.median(plan_ms):.3f} | "
                         f"{statistics.median(raw_ms):.2f} |")
        engine.command(f"CREATE TABLE {engine.table('bench_insert')} (x UInt8) ENGINE = MergeTree ORDER BY x")
        insert_ms = _timed(lambda: engine.command(f"INSERT INTO {engine.table('bench_insert')} VALUES (1)"), runs)
        lines.append(f"\nbare one-row INSERT (the ledger write's floor): median {statistics.median(insert_ms):.2f} ms")

        lines.append(f"\nlarge table: {rows:,} rows, ORDER BY unit")
        for name, comment in (("big", "max_rows_per_unit=10"), ("big_unique", "unique_units")):
            engine.command(
                f"CREATE TABLE {engine.table(name)} (user_id UInt64, region LowCardinality(String) "
                "COMMENT 'dp: public, values=[\"north\", \"south\", \"east\", \"west\"]', "
                "spend Float64 COMMENT 'dp: bounds=[0, 1000]') ENGINE = MergeTree ORDER BY user_id "
                f"COMMENT 'dp: privacy_unit=user_id, {comment}'"
            )
            divisor = 8 if name == "big" else 1
            engine.command(
                f"INSERT INTO {engine.table(name)} SELECT intDiv(number, {divisor}), "
                "['north','south','east','west'][number % 4 + 1], (cityHash64(number) % 100000) / 100.0 "
                f"FROM numbers({rows})"
            )
            engine.command(f"OPTIMIZE TABLE {engine.table(name)} FINAL")
        session.policy.reload()
        lines.append("| table | query | dpch median ms | raw median ms | ratio |")
        lines.append("|---|---|---|---|---|")
        for name in ("big", "big_unique"):
            for sql_t, raw_t in (
                ("SELECT count(*) FROM {t}", "SELECT count() FROM {t}"),
                ("SELECT region, count(*), sum(spend) FROM {t} GROUP BY region",
                 "SELECT region, count(), sum(spend) FROM {t} GROUP BY region"),
            ):
                sql = sql_t.format(t=name)
                raw_sql = raw_t.format(t=engine.table(name))
                session.query(sql)
                big_runs = max(5, runs // 10)
                d = statistics.median(_timed(lambda sql=sql: session.query(sql), big_runs))
                r = statistics.median(_timed(lambda raw_sql=raw_sql: raw.query_rows(raw_sql), big_runs))
                lines.append(f"| {name} | {sql} | {d:.1f} | {r:.1f} | {d / r:.2f} |")
        session.close()
    return "\n".join(lines)


def test_bench_query(capsys):  # pragma: no cover - benchmark
    report = run(rows=int(os.environ.get("DPCH_BENCH_ROWS", "10000000")), runs=30)
    with capsys.disabled():
        print("\n" + report)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--runs", type=int, default=50)
    args = parser.parse_args()
    sys.stdout.write(run(args.rows, args.runs) + "\n")
