"""The cap's row order (issue 27 item 1): keyed random rows against the stored order, in one run.

Run:  nice -n 5 python tests/bench/bench_cap_order.py [--rows 30000000] [--runs 5]
  or  pytest tests/bench/bench_cap_order.py -s        (1 M rows; DPCH_BENCH_ROWS overrides)

Two tables of --rows rows, 40 rows per unit, cap 10 (the cap binds for every unit):

- ``timed``: ``ORDER BY (user_id, ts)``, stored in time order within each unit (the shape that bent
  every time series, issue 27);
- ``shuffled``: ``ORDER BY tuple()``, no unit order.

For SUM and AVG GROUP BY a public key it times, interleaved (one run of each variant per round, after
a warm-up round; medians over the rounds), the emitted SQL alone through clickhouse-connect:

- ``random``: the emitted cap, ``ORDER BY unit, sipHash64Keyed(key, row number) LIMIT k BY unit``;
- ``before``: the same tree with the order dpch emitted before issue 27: the stored order on
  ``timed`` (a streamed ``LIMIT BY``, no sort), ``unit, cityHash64(<the selected values>)`` on
  ``shuffled``;
- ``raw``: the same clamped aggregate without any cap — the floor.

Ratios are against ``before`` and ``raw`` measured in the same run (never a timed test). The machine's
load average is printed: on a shared machine the absolute times move, the ratios less.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

os.environ.setdefault("DPCH_ALLOW_FIXED_SEED", "1")

from bench_scale import interleaved  # noqa: E402 — one timing loop for the benchmarks (run as scripts)
from sqlglot import exp  # noqa: E402

import dpch  # noqa: E402
from dpch.accounting.budget import Budget  # noqa: E402
from dpch.sql.cap import keyed  # noqa: E402
from dpch.sql.nodes import call, column  # noqa: E402
from dpch.sql.rewrite import emit_tree, render  # noqa: E402

KEY = (0x0123456789ABCDEF, 0xFEDCBA9876543210)
CLAMPED = "least(greatest(ifNotFinite(toFloat64(spend), 0.0), 0.0), 1000.0)"
QUERIES = (
    ("SUM", "SELECT sum(spend) FROM {t}", "SELECT sum({c}) FROM {t}"),
    ("AVG GROUP BY region", "SELECT region, avg(spend) FROM {t} GROUP BY region",
     "SELECT region, sum({c}), count() FROM {t} GROUP BY region"),
)


def _load(engine, rows: int) -> float:
    started = time.perf_counter()
    for name, order in (("timed", "(user_id, ts)"), ("shuffled", "tuple()")):
        engine.command(
            f"CREATE TABLE {engine.table(name)} (user_id UInt64, ts DateTime, "
            "region LowCardinality(String) COMMENT 'dp: public, values=[\"north\", \"south\", \"east\", \"west\"]', "
            f"spend Float64 COMMENT 'dp: bounds=[0, 1000]') ENGINE = MergeTree ORDER BY {order} "
            "COMMENT 'dp: privacy_unit=user_id, max_rows_per_unit=10'")
        unit = "intDiv(number, 40)" if name == "timed" else f"cityHash64(number) % {max(rows // 40, 1)}"
        engine.command(
            f"INSERT INTO {engine.table(name)} SELECT {unit}, "
            "toDateTime('2025-01-01 00:00:00') + number % 40 * 7 * 86400, "
            "['north', 'south', 'east', 'west'][cityHash64(number) % 4 + 1], (cityHash64(number) % 100000) / 100.0 "
            f"FROM numbers({rows})")
        engine.command(f"OPTIMIZE TABLE {engine.table(name)} FINAL")
    return time.perf_counter() - started


def before_issue_27(tree: exp.Expr, stored: list[str] | None) -> exp.Expr:
    """``tree`` with the cap's order as dpch emitted it before issue 27: the stored columns, or (no unit
    order) the unit and a hash of the selected values."""
    order = next(o for o in tree.find_all(exp.Order) if o.find(exp.Placeholder) is not None)
    unit = order.expressions[0].this
    if stored is not None:
        keys = [column(c, unit.table) for c in stored]
    else:
        select = order.parent
        assert isinstance(select, exp.Select)
        values = [column(e.alias) for e in select.expressions if e.alias.startswith("c")]
        keys = [column("__unit"), call("cityHash64", *values)]
    order.set("expressions", [exp.Ordered(this=k) for k in keys])
    return tree


def run(rows: int, runs: int, directory: str | None = None) -> str:
    lines = [f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f} at start; "
             f"{rows:,} rows per table, 40 rows per unit, cap 10; medians of {runs} interleaved rounds"]
    with tempfile.TemporaryDirectory(dir=directory) as tmp:
        session = dpch.connect(f"chdb://{tmp}/store", analyst="bench", default_budget=Budget(1e12, 0.9), seed=1)
        try:
            engine = session.engine
            lines.append(f"load: {_load(engine, rows):.1f} s")
            session.policy.reload()
            lines += ["", "| table | query | random ms | before ms | raw ms | random / before | random / raw | "
                      "before / raw |", "|---|---|---|---|---|---|---|---|"]
            for table, stored in (("timed", ["user_id", "ts"]), ("shuffled", None)):
                for name, sql, raw_template in QUERIES:
                    plan = session.explain(sql.format(t=table)).plan
                    emitted = render(emit_tree(plan))
                    before = render(before_issue_27(emit_tree(plan), stored))
                    raw = raw_template.format(c=CLAMPED, t=engine.table(table))
                    ms = interleaved({
                        "random": lambda q=emitted: engine.query_rows(q, keyed(q, KEY)),
                        "before": lambda q=before: engine.query_rows(q),
                        "raw": lambda q=raw: engine.query_rows(q),
                    }, runs)
                    lines.append(f"| {table} | {name} | {ms['random']:.0f} | {ms['before']:.0f} | {ms['raw']:.0f} | "
                                 f"{ms['random'] / ms['before']:.2f} | {ms['random'] / ms['raw']:.2f} | "
                                 f"{ms['before'] / ms['raw']:.2f} |")
        finally:
            session.close()
    lines.append(f"\nload average at end: {os.getloadavg()[0]:.2f}")
    return "\n".join(lines)


def test_bench_cap_order(capsys):  # pragma: no cover - benchmark
    report = run(rows=int(os.environ.get("DPCH_BENCH_ROWS", "1000000")), runs=5)
    with capsys.disabled():
        print("\n" + report)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=30_000_000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--dir", default=None, help="where the temporary store lives (removed afterwards)")
    args = parser.parse_args()
    sys.stdout.write(run(args.rows, args.runs, args.dir) + "\n")
