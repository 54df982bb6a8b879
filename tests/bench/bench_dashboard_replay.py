"""A 6-panel Grafana dashboard refreshing every 30 s for 24 h, with and without the release store (issue 28).

Run:  nice -n 5 python tests/bench/bench_dashboard_replay.py [--hours 24] [--refresh 30] [--before-hours 2]

The panels, their macros and the data arriving are tests/pipeline/grafana_replay.py's: "Last 24 hours",
hourly buckets (the panels' Min interval), ε 0.05 per panel query, rows arriving a minute after their time,
``final_after=300``. It reports the ε spent over the day with the store (every refresh asked), the ε of
the same refreshes released as written (replayed for ``--before-hours`` and scaled to the day: each refresh
is one release, as tests/pipeline/test_dashboard_replay.py checks), what releasing each panel's buckets once
costs, and the store's size per 1 000 released buckets.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

os.environ.setdefault("DPCH_ALLOW_FIXED_SEED", "1")
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))

import dpch  # noqa: E402
from dpch.accounting.budget import Budget  # noqa: E402
from dpch.store import release_store  # noqa: E402
from tests.helpers import make_table  # noqa: E402
from tests.pipeline.grafana_replay import COMMENT, DDL, LATE, PANELS, replay, rows  # noqa: E402

START = 1_772_323_200 + 10 * 86400 + 1234  # 2026-03-11 00:20:34 UTC
EPSILON = 0.05


def _session(tmp: str, analyst: str) -> dpch.Session:
    session = dpch.connect(f"chdb://{tmp}/store", analyst=analyst, default_budget=Budget(1e9, 0.5), seed=1)
    if not session.engine.table_exists("events"):
        make_table(session, DDL, rows(START - 2 * 86400, START - LATE), ["uid", "ts", "region", "amount"],
                   name="events", comment=COMMENT)
    session.policy.reload()
    return session


def run(hours: int, refresh: int, before_hours: int) -> str:
    lines = [f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f}; {len(PANELS)} panels, "
             f"refresh {refresh} s, ε {EPSILON} per panel query"]
    with tempfile.TemporaryDirectory() as tmp:
        session = _session(tmp, "with_store")
        started = time.perf_counter()
        steps = hours * 3600 // refresh

        def progress(step: int) -> None:
            if step % max(steps // 20, 1) == 0:
                print(f"  {step}/{steps} refreshes, {time.perf_counter() - started:.0f} s", file=sys.stderr)

        day = replay(session, start=START, hours=hours, refresh_s=refresh, epsilon=EPSILON, progress=progress)
        took = time.perf_counter() - started
        stored_rows, stored_bytes = release_store.size(session.engine)
        store = session.engine.table(release_store.STORE_TABLE)
        buckets = session.engine.query_rows(f"SELECT count() FROM {store}")[0][0]
        session.close()
        before_session = _session(tmp, "as_written")
        before = replay(before_session, start=START, hours=before_hours, refresh_s=refresh, epsilon=EPSILON,
                        settings=" SETTINGS dp_store = 'off'")
        before_session.close()
    scale = hours / before_hours
    lines += [
        "",
        "| | queries | releases | ε spent | ÷ each bucket once |",
        "|---|---:|---:|---:|---:|",
        f"| released as written ({before_hours} h measured, × {scale:g}) | {before.queries * scale:,.0f} | "
        f"{before.releases * scale:,.0f} | {before.epsilon * scale:.1f} | {before.epsilon * scale / day.once:.1f}× |",
        f"| release store ({hours} h) | {day.queries:,} | {day.releases:,} | {day.epsilon:.2f} | {day.ratio:.2f}× |",
        f"| each panel's buckets once | | {len(PANELS) * hours} | {day.once:.2f} | 1.00× |",
        "",
        f"store: {buckets} bucket rows ({stored_rows} in active parts), {stored_bytes:,} bytes on disk: "
        f"{stored_bytes / max(buckets, 1) * 1000 / 1024:.0f} KiB per 1 000 released buckets",
        f"replay with the store: {took:.0f} s for {day.queries:,} queries ({took / day.queries * 1000:.1f} ms each)",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hours", type=int, default=24)
    parser.add_argument("--refresh", type=int, default=30)
    parser.add_argument("--before-hours", type=int, default=2)
    args = parser.parse_args()
    print(run(args.hours, args.refresh, args.before_hours))


if __name__ == "__main__":
    main()
