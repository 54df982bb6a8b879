"""Release latency against its floor (issue 14): what a release costs beyond its own work.

Run:  python tests/bench/bench_release.py [--rows 1000000] [--runs 200]
  or  pytest tests/bench/bench_release.py -s            (a short run)

The *floor* of a release is the same emitted SQL run raw through clickhouse-connect plus one
literal-VALUES ledger INSERT of the same row shape, one after the other: the two things a release
must do. A release that overlaps its aggregate with its ledger write can cost less than that
sequential floor. Measured, interleaved release by release so machine load hits both alike, on
one embedded store:

- the demo table (visits, ~150 k rows) and a table of --rows rows (10 rows per unit, ORDER BY
  unit), each with a Laplace SUM and a Gaussian SUM (cache-warm: the probe and the policy are
  cached after the first run, as in a session or a gateway);
- aims: release / floor ≤ 0.9 on the demo table and ≤ 1.0 on the large one for Laplace; ≤ 1.0 and
  ≤ 1.05 for Gaussian.
No timing is asserted anywhere: speed is measured here, never in tests (docs/development.md).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

os.environ.setdefault("DPCH_ALLOW_FIXED_SEED", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import dpch  # noqa: E402
from dpch.accounting.budget import Budget  # noqa: E402
from dpch.fixtures import visits  # noqa: E402
from dpch.sql.cap import keyed  # noqa: E402

AIMS = {("demo", "laplace"): 0.9, ("large", "laplace"): 1.0, ("demo", "gaussian"): 1.0, ("large", "gaussian"): 1.05}
QUERIES = {
    "demo": "SELECT sum(pages) FROM visits WHERE age > 30",
    "large": "SELECT sum(x) FROM big WHERE x > 10",
}
MECHANISMS = {
    "laplace": " SETTINGS dp_epsilon = 0.001",
    "gaussian": " SETTINGS dp_epsilon = 0.001, dp_delta = 1e-9, dp_mechanism = 'gaussian'",
}
LEDGER_COLUMNS = ("release_id, seq, time, analyst, dataset, query_hash, mechanism, filter, status, epsilon, delta,"
                  " rho, worst_epsilon, worst_delta, worst_rho, ex_post, datasets, rho_delta")


#: a fixed cap key for the emitted SQL run directly (a release draws its own, dpch.sql.cap.row_order)
CAP_KEY = (0x0123456789ABCDEF, 0xFEDCBA9876543210)


def _ledger_row_sql(table: str) -> str:
    """One literal-VALUES ledger row, as the floor writes it (a fresh id and time each time)."""
    now = datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S.%f")
    return (f"INSERT INTO {table} ({LEDGER_COLUMNS}) VALUES ('{uuid.uuid4()}', 1, '{now}', 'floor', 'b.t', 'h',"
            " 'laplace', 'basic', 'charged', 0.001, 0, NULL, 0.001, 0, NULL, false, ['b.t'], 0)")


def _p99(ms: list[float]) -> float:
    ms = sorted(ms)
    return ms[min(len(ms) - 1, int(round(0.99 * (len(ms) - 1))))]


def run(rows: int, runs: int) -> str:
    lines = [f"machine: {os.cpu_count()} cores; {runs} interleaved runs per row; large table: {rows:,} rows", ""]
    with tempfile.TemporaryDirectory() as tmp:
        session = dpch.connect(f"chdb://{tmp}/store", database="b", analyst="bench",
                               default_budget=Budget(1e12, 0.9), seed=1)
        engine = session.engine
        visits.load(engine, "visits")
        engine.command(f"CREATE TABLE {engine.table('big')} (u UInt64, x Float64 COMMENT 'dp: bounds=[0, 100]')"
                       " ENGINE = MergeTree ORDER BY u COMMENT 'dp: privacy_unit=u, max_rows_per_unit=10'")
        engine.command(f"INSERT INTO {engine.table('big')} SELECT intDiv(number, 10), (number * 7919) % 100"
                       f" FROM numbers({rows})")
        session.query(QUERIES["demo"] + MECHANISMS["laplace"])  # creates the ledger table
        floor_ledger = engine.table("dpch_ledger")
        lines += ["| table | mechanism | release median ms | floor median ms | ratio | release p99 | floor p99 | aim |",
                  "|---|---|---|---|---|---|---|---|"]
        for table, base in QUERIES.items():
            for mechanism, settings in MECHANISMS.items():
                sql = base + settings
                session.query(sql)  # warm: policy, probe
                emitted = session.explain(sql).sql
                release_ms: list[float] = []
                floor_ms: list[float] = []
                for _ in range(runs):
                    started = time.perf_counter()
                    session.query(sql)
                    release_ms.append((time.perf_counter() - started) * 1000.0)
                    insert = _ledger_row_sql(floor_ledger)
                    started = time.perf_counter()
                    engine.query_rows(emitted, keyed(emitted, CAP_KEY))
                    engine.command(insert)
                    floor_ms.append((time.perf_counter() - started) * 1000.0)
                release, floor = statistics.median(release_ms), statistics.median(floor_ms)
                ratio = release / floor
                aim = AIMS[(table, mechanism)]
                lines.append(f"| {table} | {mechanism} | {release:.2f} | {floor:.2f} | {ratio:.2f} | "
                             f"{_p99(release_ms):.2f} | {_p99(floor_ms):.2f} | "
                             f"≤ {aim} {'met' if ratio <= aim else 'NOT met'} |")
        session.close()
    return "\n".join(lines)


def test_bench_release() -> None:
    print(run(rows=200_000, runs=20))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=200)
    ns = parser.parse_args()
    print(run(ns.rows, ns.runs))
