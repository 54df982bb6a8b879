"""Each unit's G groups in one read (issue 29): the (unit, group) pairs form against the IN form it replaced.

Run:  nice -n 5 python tests/bench/bench_group_pairs.py [--rows 2000000] [--runs 5]

A table of --rows rows, 10 rows per unit (cap 10), ``max_groups_per_unit=3``, a private String key with
10, 1 000 or 100 000 values. For ``SELECT key, count(), sum(x) … GROUP BY key`` (partition selection:
the units per key too) it times, interleaved (medians over the rounds, after a warm-up round), the
emitted SQL alone through clickhouse-connect under one cap key:

- ``pairs``: today's form, one read of the kept rows as (unit, group) pairs of partial states;
- ``in``: the form before (``emit_tree(plan, fast_cap=False)``: the kept rows read twice, a set of
  (unit, group) tuples);
- ``raw``: ``SELECT key, count(), sum(x), uniqExact(unit) … GROUP BY key`` without any bound.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile

os.environ.setdefault("DPCH_ALLOW_FIXED_SEED", "1")

from bench_scale import interleaved  # noqa: E402 — one timing loop for the benchmarks (run as scripts)

import dpch  # noqa: E402
from dpch.accounting.budget import Budget  # noqa: E402
from dpch.sql.cap import keyed  # noqa: E402
from dpch.sql.rewrite import emit_tree, render  # noqa: E402

KEY = (0x0123456789ABCDEF, 0xFEDCBA9876543210)


def run(rows: int, runs: int) -> str:
    lines = [f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f}; {rows:,} rows, 10 per unit, "
             f"G = 3; medians of {runs} interleaved rounds", "",
             "| keys | pairs ms | in ms | raw ms | in / pairs | pairs / raw |", "|---|---|---|---|---|---|"]
    with tempfile.TemporaryDirectory() as tmp:
        session = dpch.connect(f"chdb://{tmp}/store", analyst="bench", default_budget=Budget(1e12, 0.9), seed=1)
        engine = session.engine
        for values in (10, 1000, 100_000):
            table = f"t{values}"
            engine.command(f"CREATE TABLE {engine.table(table)} (uid UInt64, k String, x Float64 COMMENT "
                           "'dp: bounds=[0, 100]') ENGINE = MergeTree ORDER BY uid "
                           "COMMENT 'dp: privacy_unit=uid, max_rows_per_unit=10, max_groups_per_unit=3'")
            engine.command(f"INSERT INTO {engine.table(table)} SELECT intDiv(number, 10), "
                           f"toString(cityHash64(number) % {values}), number % 100 FROM numbers({rows})")
            session.policy.reload()
            plan = session.explain(f"SELECT k, count(), sum(x) FROM {table} GROUP BY k SETTINGS dp_delta = 1e-6").plan
            pairs, in_set = render(emit_tree(plan)), render(emit_tree(plan, fast_cap=False))
            raw = f"SELECT k, count(), sum(x), uniqExact(uid) FROM {engine.table(table)} GROUP BY k"
            ms = interleaved({"pairs": lambda q=pairs: engine.query_rows(q, keyed(q, KEY)),
                              "in": lambda q=in_set: engine.query_rows(q, keyed(q, KEY)),
                              "raw": lambda q=raw: engine.query_rows(q)}, runs)
            lines.append(f"| {values:,} | {ms['pairs']:.0f} | {ms['in']:.0f} | {ms['raw']:.0f} | "
                         f"{ms['in'] / ms['pairs']:.2f} | {ms['pairs'] / ms['raw']:.2f} |")
        session.close()
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    print(run(args.rows, args.runs))


if __name__ == "__main__":
    sys.exit(main())
