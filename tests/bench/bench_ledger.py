"""Admission + durable ledger writes per release, against a bare one-row INSERT in the same run.

Run:  python tests/bench/bench_ledger.py [--runs 300]
  or  pytest tests/bench/bench_ledger.py -s

For each filter: a fixed-cost release (admission + ONE ledger INSERT, ``Accountant.charge``) and
an ex-post release (admission + reserve INSERT + settle INSERT, ``Accountant.reserve`` then
``Reservation.settle``), each timed interleaved with a bare one-row INSERT of the same ledger
row shape through the same client, so machine noise hits both alike. Reports median and p99 and
the ratio to 1 (fixed) or 2 (ex-post) bare inserts. The aim (issue 7): within 1.3x.
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

from dpch.accounting.accountant import Accountant
from dpch.accounting.budget import Budget
from dpch.privacy.cost import PrivacyCost
from dpch.store.engine import Engine


def _p99(ms: list[float]) -> float:
    ms = sorted(ms)
    return ms[min(len(ms) - 1, int(round(0.99 * (len(ms) - 1))))]


def _bare_row() -> dict[str, tuple[str, object]]:
    now = datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S.%f")
    return {
        "release_id": ("UUID", str(uuid.uuid4())), "seq": ("UInt8", 1), "time": ("DateTime64(6, 'UTC')", now),
        "analyst": ("String", "bare"), "dataset": ("String", "d.t"), "query_hash": ("String", "h"),
        "mechanism": ("String", "laplace"), "filter": ("String", "basic"), "status": ("String", "charged"),
        "epsilon": ("Float64", 0.001), "delta": ("Float64", 0.0), "rho": ("Nullable(Float64)", None),
        "worst_epsilon": ("Float64", 0.001), "worst_delta": ("Float64", 0.0),
        "worst_rho": ("Nullable(Float64)", None), "ex_post": ("Bool", False),
    }


def _time(fn) -> float:
    started = time.perf_counter()
    fn()
    return (time.perf_counter() - started) * 1000.0


def run(runs: int) -> str:
    lines = [f"machine: {os.cpu_count()} cores; {runs} releases per row, interleaved with bare INSERTs", "",
             "| filter | release | dpch median ms | dpch p99 ms | bare INSERT median ms | bare p99 ms | ratio |",
             "|---|---|---|---|---|---|---|"]
    with tempfile.TemporaryDirectory() as tmp:
        engine = Engine(f"chdb://{tmp}/store")
        Accountant(engine, "warm")  # creates the tables
        engine.command(f"CREATE TABLE {engine.table('bare_ledger')} AS {engine.table('dpch_ledger')}")
        fixed = PrivacyCost(0.001, 0.0, 5e-7)
        worst = PrivacyCost(0.0, 0.0, 0.0, ex_post=True, worst_epsilon=0.002, worst_rho=2e-6)
        realized = PrivacyCost(0.001, 0.0, 1e-6, ex_post=True)
        for name in ("basic", "advanced", "zcdp_bm", "ex_post"):
            acc = Accountant(engine, f"bench_{name}", default_budget=Budget(1e6, 0.1), filter=name)
            for kind in ("fixed", "ex-post"):
                dpch_ms, bare_ms = [], []
                for _ in range(runs):
                    if kind == "fixed":
                        dpch_ms.append(_time(lambda acc=acc: acc.charge(
                            fixed, dataset="d.t", query_hash="h", mechanism="laplace")))
                        bare_ms.append(_time(lambda: engine.insert_row("bare_ledger", _bare_row())))
                    else:
                        dpch_ms.append(_time(lambda acc=acc: acc.reserve(
                            worst, dataset="d.t", query_hash="h", mechanism="brownian").settle(realized)))
                        bare_ms.append(_time(lambda: (engine.insert_row("bare_ledger", _bare_row()),
                                                      engine.insert_row("bare_ledger", _bare_row()))))
                med, bmed = statistics.median(dpch_ms), statistics.median(bare_ms)
                lines.append(f"| {name} | {kind} | {med:.2f} | {_p99(dpch_ms):.2f} | {bmed:.2f} | "
                             f"{_p99(bare_ms):.2f} | {med / bmed:.2f}x |")
        acc = Accountant(engine, "bench_zcdp_bm", filter="zcdp_bm")
        status_ms = [_time(acc.status) for _ in range(50)]
        lines.append(f"\nstatus() with {2 * runs} releases in the history (zcdp_bm): median "
                     f"{statistics.median(status_ms):.2f} ms")
        engine.close()
    return "\n".join(lines)


def test_bench_ledger() -> None:
    print(run(200))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=300)
    print(run(parser.parse_args().runs))
    sys.exit(0)
