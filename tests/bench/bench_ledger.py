"""Admission + durable ledger writes per release, against a bare one-row INSERT in the same run.

Run:  python tests/bench/bench_ledger.py [--runs 300]
  or  pytest tests/bench/bench_ledger.py -s

For each filter: a fixed-cost release (admission + ONE ledger INSERT, ``Accountant.charge``) and
an ex-post release (admission + reserve INSERT + settle INSERT, ``Accountant.reserve`` then
``Reservation.settle``), each timed interleaved with a bare one-row INSERT of the same ledger
row shape through the same client, so machine noise hits both alike. Reports median and p99 and
the ratio to 1 (fixed) or 2 (ex-post) bare inserts. The aim (issue 7): within 1.3x.

Then admission at scale (issue 14, part 1): one admission (``Accountant.check``) plus one
``status()`` for an analyst with 100 000 past releases against one with 10, interleaved in the
same run, per filter, with a dataset budget beside the analyst's (two scopes). The histories are
bulk-inserted ledger rows (writing 100 000 releases one by one would take ten minutes); each
analyst's state is then rebuilt from the ledger as when a process opens the store, and that
one-time rebuild is timed too. The aim: the ratio at most 1.2.

Then ledger throughput (issue 14, part 2): fixed-cost releases per second of ONE analyst (the
worst case for its lock) at 1 and 16 threads, with and without ``ledger_fsync``, in three modes
measured interleaved in the same run:

- ``old``: the path before group commit — admission and an ``INSERT … SELECT {params}`` row under
  one lock per analyst (``insert_row`` below, the pre-issue-14 form), one INSERT per release;
- ``group size 1``: today's accountant with grouping off (``GroupCommit.max_batch = 1``): a
  literal-VALUES INSERT per release, outside the analyst's lock;
- ``group commit``: today's accountant as shipped: rows admitted while an INSERT runs share the
  next one.

Run only that part:  python tests/bench/bench_ledger.py --throughput-only
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import tempfile
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime

from dpch.accounting.accountant import Accountant, forget_cached_state
from dpch.accounting.budget import Budget
from dpch.accounting.commit import GroupCommit
from dpch.accounting.filters import make_filter
from dpch.privacy.cost import PrivacyCost
from dpch.store.engine import Engine
from dpch.store.quoting import quote_identifier


def insert_row(engine: Engine, table: str, values: dict[str, tuple[str, object]]) -> None:
    """The ledger's write before issue 14 (one ``INSERT … SELECT {params}`` per row, parameters bound
    by the client), kept here as the benchmark's old path."""
    columns = ", ".join(quote_identifier(c) for c in values)
    params = ", ".join(f"{{p{i}:{t}}}" for i, (t, _) in enumerate(values.values()))
    bound = {f"p{i}": v for i, (_, v) in enumerate(values.values())}
    engine.command(f"INSERT INTO {engine.table(table)} ({columns}) SELECT {params}", bound)


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
                        bare_ms.append(_time(lambda: insert_row(engine, "bare_ledger", _bare_row())))
                    else:
                        dpch_ms.append(_time(lambda acc=acc: acc.reserve(
                            worst, dataset="d.t", query_hash="h", mechanism="brownian").settle(realized)))
                        bare_ms.append(_time(lambda: (insert_row(engine, "bare_ledger", _bare_row()),
                                                      insert_row(engine, "bare_ledger", _bare_row()))))
                med, bmed = statistics.median(dpch_ms), statistics.median(bare_ms)
                lines.append(f"| {name} | {kind} | {med:.2f} | {_p99(dpch_ms):.2f} | {bmed:.2f} | "
                             f"{_p99(bare_ms):.2f} | {med / bmed:.2f}x |")
        acc = Accountant(engine, "bench_zcdp_bm", default_budget=Budget(1e6, 0.1), filter="zcdp_bm")
        status_ms = [_time(acc.status) for _ in range(50)]
        lines.append(f"\nstatus() with {2 * runs} releases in the history (zcdp_bm): median "
                     f"{statistics.median(status_ms):.2f} ms")
        engine.close()
    return "\n".join(lines)


def _history(engine: Engine, analyst: str, filter_name: str, n: int) -> None:
    """``n`` past releases of ``analyst`` (alternately fixed-cost and settled ex-post) as ledger rows."""
    start = datetime(2026, 1, 1, tzinfo=UTC).timestamp()
    rows = []
    for i in range(n):
        ex_post = i % 2 == 1
        eps = 1e-7 * (1 + i % 7)
        rho = eps * eps / 2
        worst = 2 * eps if ex_post else eps
        worst_rho = worst * worst / 2 if ex_post else rho
        rows.append([str(uuid.uuid4()), 1, datetime.fromtimestamp(start + i * 1e-3, UTC), analyst, "d.t", "h",
                     "gaussian", filter_name, "charged", eps, 0.0, rho, worst, 0.0, worst_rho, ex_post, ["d.t"], 0.0])
    engine.insert("dpch_ledger", rows, ["release_id", "seq", "time", "analyst", "dataset", "query_hash", "mechanism",
                                        "filter", "status", "epsilon", "delta", "rho", "worst_epsilon", "worst_delta",
                                        "worst_rho", "ex_post", "datasets", "rho_delta"])


def run_scale(big: int = 100_000, small: int = 10, runs: int = 300) -> str:
    """Admission + status at ``big`` past releases over at ``small``, interleaved (issue 14, part 1)."""
    lines = [f"machine: {os.cpu_count()} cores, shared with other jobs; {runs} interleaved rounds of "
             f"check() + status() per filter", "",
             f"| filter | {small} past: median ms | {big:,} past: median ms | ratio | p99 ratio | "
             f"rebuild from the ledger at {big:,}, s | history-based reference at {big:,}, ms |",
             "|---|---|---|---|---|---|---|"]
    with tempfile.TemporaryDirectory() as tmp:
        engine = Engine(f"chdb://{tmp}/store")
        request = PrivacyCost(0.001, 0.0, 5e-7)
        for name in ("basic", "advanced", "zcdp_bm", "mixed"):
            accs = {}
            for n in (small, big):
                analyst = f"scale_{name}_{n}"
                acc = Accountant(engine, analyst, default_budget=Budget(1e3, 0.1), filter=name)
                acc.set_budget(Budget(1e3, 0.1), dataset="d.t")
                _history(engine, analyst, name, n)
                accs[n] = acc
            forget_cached_state(engine)
            started = time.perf_counter()
            accs[big].status()  # the one O(history) step: the ledger read and the totals built
            rebuild = time.perf_counter() - started
            accs[small].status()
            ms: dict[int, list[float]] = {small: [], big: []}
            for i in range(runs):
                for n in ((small, big) if i % 2 == 0 else (big, small)):
                    ms[n].append(_time(lambda acc=accs[n]: (acc.check(request, datasets=["d.t"]), acc.status())))
            med = {n: statistics.median(v) for n, v in ms.items()}
            # the same answers recomputed from the whole history (the filters' reference methods; what
            # admission and status cost before the running totals), for scale
            flt = make_filter(name, Budget(1e3, 0.1))
            history = [e.counted for e in accs[big].recent(big)]
            old_ms = statistics.median(_time(lambda flt=flt, history=history: [
                (flt.decide(history, request), flt.spent(history), flt.remaining(history)) for _scope in ("", "d.t")])
                for _ in range(5))
            assert accs[big].status().releases == big and not math.isnan(med[big])
            lines.append(f"| {name} | {med[small]:.3f} | {med[big]:.3f} | {med[big] / med[small]:.2f}x | "
                         f"{_p99(ms[big]) / _p99(ms[small]):.2f}x | {rebuild:.2f} | {old_ms:.1f} |")
        engine.close()
    return "\n".join(lines)


THROUGHPUT_MODES = ("old", "group size 1", "group commit")


def _releases_per_second(engine: Engine, acc: Accountant, mode: str, threads: int, n: int) -> tuple[float, float]:
    """``n`` fixed-cost releases of ``acc``'s analyst from ``threads`` threads; (releases/s, rows per INSERT)."""
    cost = PrivacyCost(1e-6)
    writer = GroupCommit()
    writer.max_batch = 1 if mode == "group size 1" else GroupCommit.max_batch
    acc.ledger.writer = writer
    analyst_lock = threading.Lock()

    def old_release() -> None:  # what Accountant.charge did before group commit
        with analyst_lock:
            acc.check(cost, dataset="d.t")
            insert_row(engine, "dpch_ledger", _bare_row())

    def release() -> None:
        acc.charge(cost, dataset="d.t", query_hash="h", mechanism="laplace")

    one = old_release if mode == "old" else release
    start = threading.Barrier(threads + 1)

    def worker(count: int) -> None:
        start.wait()
        for _ in range(count):
            one()

    with ThreadPoolExecutor(threads) as pool:
        futures = [pool.submit(worker, n // threads) for _ in range(threads)]
        start.wait()
        started = time.perf_counter()
        for f in futures:
            f.result()
        elapsed = time.perf_counter() - started
    done = (n // threads) * threads
    rows_per_insert = writer.rows / writer.inserts if writer.inserts else 1.0
    return done / elapsed, rows_per_insert


def run_throughput(releases: int = 480, rounds: int = 3, thread_counts: tuple[int, ...] = (1, 16)) -> str:
    """Ledger throughput by mode, thread count and ledger_fsync, interleaved rounds; medians."""
    lines = [f"machine: {os.cpu_count()} cores, shared with other jobs; {releases} releases of one analyst "
             f"per cell, {rounds} interleaved rounds, median releases/s (rows per INSERT)", "",
             "| ledger_fsync | threads | " + " | ".join(THROUGHPUT_MODES) + " | group commit / old |",
             "|---|---|" + "---|" * (len(THROUGHPUT_MODES) + 1)]
    with tempfile.TemporaryDirectory() as tmp:
        engines = {fsync: Engine(f"chdb://{tmp}/store", database=f"bench_fsync_{int(fsync)}")
                   for fsync in (False, True)}
        accs = {fsync: Accountant(e, "bench", default_budget=Budget(1e9, 0.5), ledger_fsync=fsync)
                for fsync, e in engines.items()}
        for fsync, acc in accs.items():
            assert acc.ledger.fsync is fsync
        results: dict[tuple[bool, int, str], list[tuple[float, float]]] = {}
        for _ in range(rounds):
            for fsync, acc in accs.items():
                for threads in thread_counts:
                    for mode in THROUGHPUT_MODES:
                        results.setdefault((fsync, threads, mode), []).append(
                            _releases_per_second(engines[fsync], acc, mode, threads, releases))
        for fsync in (False, True):
            for threads in thread_counts:
                cells, rates = [], {}
                for mode in THROUGHPUT_MODES:
                    rs = results[(fsync, threads, mode)]
                    rates[mode] = statistics.median(r for r, _ in rs)
                    size = statistics.median(g for _, g in rs)
                    cells.append(f"{rates[mode]:.0f}" + (f" ({size:.1f})" if mode != "old" else ""))
                lines.append(f"| {'on' if fsync else 'off'} | {threads} | " + " | ".join(cells)
                             + f" | {rates['group commit'] / rates['old']:.2f}x |")
        for e in engines.values():
            e.close()
    return "\n".join(lines)


def test_bench_ledger() -> None:
    print(run(200))


def test_bench_admission_at_scale() -> None:
    print(run_scale(big=20_000, runs=100))


def test_bench_ledger_throughput() -> None:
    print(run_throughput(releases=320, rounds=2))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=300)
    parser.add_argument("--scale-only", action="store_true", help="only admission + status at 100 k past releases")
    parser.add_argument("--throughput-only", action="store_true",
                        help="only ledger throughput (group commit, ledger_fsync) at 1 and 16 threads")
    parser.add_argument("--releases", type=int, default=480, help="releases per throughput cell")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds of the throughput table")
    args = parser.parse_args()
    if args.throughput_only:
        print(run_throughput(args.releases, args.rounds))
        sys.exit(0)
    if not args.scale_only:
        print(run(args.runs))
    print(run_scale(runs=args.runs))
    print(run_throughput(args.releases, args.rounds))
    sys.exit(0)
