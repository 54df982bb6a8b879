"""Row cap against the per-group bound (issue 27 item 2): error at equal ε, in one run.

Run:  nice -n 5 python tests/bench/bench_per_group.py [--releases 40]
  or  pytest tests/bench/bench_per_group.py -s

Two tables, each queried under both bounds (``SETTINGS dp_bound = 'rows'`` and ``'groups'``) with the
same ε and δ (Gaussian noise, where the bounds differ in ℓ2):

- ``visits``: the demo's table (20 000 people, a heavy tail of visits over ten months, cap k = 10),
  annotated ``max_rows_per_group = 1``; the query is the monthly count of visits (12 month buckets).
- ``zipf``: 20 000 units whose rows (1 + Zipf(1.6), at most 60) fall on 20 public pages with Zipf(1.1)
  popularity, cap k = 10, ``max_rows_per_group = 2``; the query is the count per page.

For each bound and table, ``--releases`` releases with fresh noise and a fresh cap key. Per group g
with true (unbounded) count t_g: the mean released value m_g, its bias (m_g − t_g) and the RMSE
√mean((r − t_g)²). Reported: the RMSE over groups (√ of the mean squared error over groups and
releases), the mean |bias| ÷ truth, and the noise's σ. The truth is the uncapped count: what an
analyst wants. The per-group bound drops more of a unit's rows where it has many in one group and
fewer where they are spread; its noise is √G times smaller (ℓ2 √G·c against k).
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import tempfile

os.environ.setdefault("DPCH_ALLOW_FIXED_SEED", "1")

import numpy as np  # noqa: E402

import dpch  # noqa: E402
from dpch.accounting.budget import Budget  # noqa: E402
from dpch.fixtures import tables  # noqa: E402
from dpch.pipeline.calibrate import calibrate  # noqa: E402

DELTA = 1e-6
EPSILONS = (0.01, 1.0)
#: the owner's c per table (the row cap's k is 10 on both)
PER_GROUP = {"visits": (1, 3), "zipf": (2, 4)}
MONTHLY = "SELECT toStartOfMonth(visit_date) AS month, count() FROM visits GROUP BY month"
PAGES = "SELECT page, count() FROM zipf GROUP BY page"
PAGE_COUNT = 20


def _zipf(engine) -> None:
    rng = np.random.default_rng(27)
    units = 20_000
    rows = np.minimum(1 + rng.zipf(1.6, units), 60)
    weights = 1.0 / np.arange(1, PAGE_COUNT + 1) ** 1.1
    pages = rng.choice(PAGE_COUNT, int(rows.sum()), p=weights / weights.sum())
    uid = np.repeat(np.arange(units), rows)
    values = ", ".join(f'"p{i:02d}"' for i in range(PAGE_COUNT))
    engine.command(f"CREATE TABLE {engine.table('zipf')} (uid UInt32, page String COMMENT 'dp: public, "
                   f"values=[{values}]') ENGINE = MergeTree ORDER BY uid "
                   "COMMENT 'dp: privacy_unit=uid, max_rows_per_unit=10, max_rows_per_group=2'")
    engine.insert("zipf", [(int(u), f"p{int(p):02d}") for u, p in zip(uid, pages, strict=True)], ["uid", "page"])


def _truth(engine, sql: str) -> dict:
    table = "visits" if "visits" in sql else "zipf"
    key = "toStartOfMonth(visit_date)" if table == "visits" else "page"
    return dict(engine.query_rows(f"SELECT {key}, count() FROM {engine.table(table)} GROUP BY {key}"))


def _measure(session, sql: str, bound: str, releases: int, truth: dict, epsilon: float,
             ) -> tuple[float, float, float, str]:
    text = f"{sql} SETTINGS dp_epsilon = {epsilon}, dp_delta = {DELTA}, dp_bound = '{bound}'"
    explained = session.explain(text)
    sigma = calibrate(explained.plan, explained.options).additive[explained.plan.measures[0].name].sigma
    values: dict = {g: [] for g in truth}
    for _ in range(releases):
        for row in session.query(text).rows:
            if row[0] in values:
                values[row[0]].append(float(row[1]))
    squared = [(v - truth[g]) ** 2 for g, vs in values.items() for v in vs]
    bias = [abs(float(np.mean(vs)) - truth[g]) / truth[g] for g, vs in values.items() if truth[g] > 0]
    return math.sqrt(float(np.mean(squared))), float(np.mean(bias)), sigma, explained.plan.bound.describe()


def run(releases: int, directory: str | None = None) -> str:
    lines = [f"δ {DELTA} (Gaussian), {releases} releases per bound; error against the uncapped truth"]
    with tempfile.TemporaryDirectory(dir=directory) as tmp:
        session = dpch.connect(f"chdb://{tmp}/store", analyst="bench", default_budget=Budget(1e12, 0.9), seed=1)
        try:
            engine = session.engine
            tables.load_all(engine)
            _zipf(engine)
            lines += ["", "| table, query | ε | c | bound | σ | RMSE | mean bias ÷ truth |",
                      "|---|---:|---:|---|---:|---:|---:|"]
            for name, table, unit, sql in (("visits, monthly count", "visits", "user_id", MONTHLY),
                                           ("zipf, count per page", "zipf", "uid", PAGES)):
                truth = _truth(engine, sql)
                for c in PER_GROUP[table]:
                    engine.command(f"ALTER TABLE {engine.table(table)} MODIFY COMMENT "
                                   f"'dp: privacy_unit={unit}, max_rows_per_unit=10, max_rows_per_group={c}'")
                    session.policy.reload()
                    for epsilon in EPSILONS:
                        for bound in ("rows", "groups"):
                            rmse, bias, sigma, how = _measure(session, sql, bound, releases, truth, epsilon)
                            lines.append(f"| {name} | {epsilon:g} | {c if bound == 'groups' else '–'} | "
                                         f"{how.split(',')[0]} | {sigma:.1f} | {rmse:.1f} | {100 * bias:.1f}% |")
        finally:
            session.close()
    return "\n".join(lines)


def test_bench_per_group(capsys):  # pragma: no cover - benchmark
    report = run(releases=20)
    with capsys.disabled():
        print("\n" + report)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--releases", type=int, default=40)
    parser.add_argument("--dir", default=None, help="where the temporary store lives (removed afterwards)")
    args = parser.parse_args()
    sys.stdout.write(run(args.releases, args.dir) + "\n")
