"""Throughput and latency of `dpch serve` (issues 9 and 14), against a baseline measured in the same run.

Run:  python tests/bench/bench_server.py [--seconds 5] [--people 5000] [--against DIR] [--history 30000]
  or  pytest tests/bench/bench_server.py -s            (a short run, this checkout only)

Each server runs in a process of its own (an embedded store belongs to one process), on a store of
its own holding the visits fixture table, and is driven by client processes over raw HTTP keep-alive
connections (as a BI tool's pool), round-robin over four small aggregates, release cache off:

1. the same SQL run directly on embedded ClickHouse, one at a time: the latency floor;
2. this checkout at 1, 4 and 16 clients, and with ``--against DIR`` (another checkout of dpch,
   e.g. ``git worktree add /tmp/base <commit>``) that checkout too, the two taking turns at each
   client count so machine load hits both alike; the ratio of queries/s is this / that
   (issue 14's aim: at least 2x at 16 clients, and at least 150 queries/s on 2 cores);
3. decay with use: this checkout with ``--history`` past releases already in the bench analyst's
   ledger (bulk-inserted rows, as a gateway after months of use) against a fresh one, interleaved,
   at 16 clients (aim: no decay, a ratio of at least 0.95);
4. 16 clients with the release cache on (a dashboard refreshing the same panels).
No timing is asserted anywhere: speed is measured here, never in tests (docs/development.md).
"""

from __future__ import annotations

import argparse
import base64
import http.client
import multiprocessing
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
QUERIES = [
    "SELECT count(*) FROM visits",
    "SELECT sum(pages) FROM visits WHERE age > 40",
    "SELECT region, count(*) FROM visits GROUP BY region",
    "SELECT device, avg(spend) FROM visits GROUP BY device",
]
SETTINGS = " SETTINGS dp_epsilon = 0.001 FORMAT TabSeparated"
CLIENTS = (1, 4, 16)

#: run in the server's process (with the checkout under test first on sys.path): loads the fixture
#: table, optionally bulk-inserts a history of past releases, serves on a free port and prints it,
#: and stops when its stdin closes
SERVER = r"""
import sys, threading
from dpch.server import ServerConfig, make_server
from dpch.store.engine import Engine
from dpch.fixtures import visits

store, people, cache_ttl, history = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
dsn = f"chdb://{store}"
config = ServerConfig.from_mapping({
    "server": {"dsn": dsn, "database": "bench", "cache_ttl": cache_ttl, "access_log": "", "max_concurrent": 32},
    "users": {"bench": {"password": "bench-pw", "epsilon": 1e9, "delta": 1e-6}},
})
engine = Engine(dsn, database="bench")
visits.load(engine, "visits", people=people)
engine.close()
server = make_server(config, host="127.0.0.1", port=0)
if history:
    from dpch.accounting.accountant import Accountant, forget_cached_state
    engine = Engine(dsn, database="bench")
    Accountant(engine, "bench").status()  # creates the ledger table
    engine.command(
        f"INSERT INTO {engine.table('dpch_ledger')} (release_id, seq, time, analyst, dataset, query_hash, mechanism,"
        " filter, status, epsilon, delta, rho, worst_epsilon, worst_delta, worst_rho, ex_post, datasets)"
        " SELECT generateUUIDv4(number), 1, now64(6) - toIntervalMillisecond(number), 'bench', 'bench.visits',"
        " 'h', 'laplace', 'basic', 'charged', 0.001, 0, NULL, 0.001, 0, NULL, false, ['bench.visits']"
        f" FROM numbers({history})")
    forget_cached_state(engine)
    engine.close()
server.start()
print(server.port, flush=True)
sys.stdin.read()
server.stop()
"""


class Server:
    """A `dpch serve` of one checkout in a process of its own."""

    def __init__(self, checkout: Path, store: str, people: int, cache_ttl: int = 0, history: int = 0) -> None:
        env = {**os.environ, "PYTHONPATH": f"{checkout}{os.pathsep}{ROOT}", "DPCH_ALLOW_FIXED_SEED": "1"}
        self.process = subprocess.Popen(
            [sys.executable, "-c", SERVER, store, str(people), str(cache_ttl), str(history)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, text=True)
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line.strip().isdigit():
            raise RuntimeError(f"the server on {checkout} did not start")
        self.port = int(line)

    def stop(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait(timeout=120)


def _client(args: tuple[int, float, int]) -> tuple[int, list[float], int]:
    """One client process: sends queries round-robin for ``seconds``; returns (done, latencies, errors)."""
    port, seconds, offset = args
    auth = "Basic " + base64.b64encode(b"bench:bench-pw").decode()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    latencies, errors, i = [], 0, offset
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        sql = QUERIES[i % len(QUERIES)] + SETTINGS
        i += 1
        started = time.perf_counter()
        conn.request("POST", "/", body=sql.encode(), headers={"Authorization": auth})
        response = conn.getresponse()
        response.read()
        latencies.append((time.perf_counter() - started) * 1000.0)
        if response.status != 200:
            errors += 1
    conn.close()
    return len(latencies), latencies, errors


def _pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def _drive(pool: multiprocessing.pool.Pool, port: int, clients: int, seconds: float) -> tuple[float, float, float, int]:
    """(queries/s, median ms, p99 ms, errors) of ``clients`` concurrent clients for ``seconds``."""
    pool.map(_client, [(port, 0.5, k) for k in range(clients)])  # warm up (connections, caches)
    started = time.perf_counter()
    out = pool.map(_client, [(port, seconds, k) for k in range(clients)])
    wall = time.perf_counter() - started
    latencies = [x for o in out for x in o[1]]
    return sum(o[0] for o in out) / wall, statistics.median(latencies), _pct(latencies, 0.99), sum(o[2] for o in out)


def _floor(people: int) -> tuple[float, float]:
    """Median and p99 ms of the queries run directly on embedded ClickHouse, one at a time."""
    code = (
        "import sys, time, statistics\nfrom dpch.store.engine import Engine\nfrom dpch.fixtures import visits\n"
        f"e = Engine(f'chdb://{{sys.argv[1]}}', database='bench')\nvisits.load(e, 'visits', people={people})\n"
        f"qs = {QUERIES!r}\nms = []\n"
        "for q in qs * 50:\n    t = time.perf_counter(); e.query_rows(q.replace('FROM visits', 'FROM bench.visits'))\n"
        "    ms.append((time.perf_counter() - t) * 1000)\nms.sort()\n"
        "print(statistics.median(ms), ms[int(0.99 * (len(ms) - 1))])\ne.close()")
    with tempfile.TemporaryDirectory() as tmp:
        out = subprocess.run([sys.executable, "-c", code, f"{tmp}/store"], capture_output=True, text=True, check=True,
                             env={**os.environ, "PYTHONPATH": str(ROOT)}).stdout.split()
    return float(out[0]), float(out[1])


def run(seconds: float = 5.0, people: int = 5000, against: Path | None = None, history: int = 30_000,
        rounds: int = 1, decay_only: bool = False) -> str:
    floor_median, floor_p99 = _floor(people)
    lines = [f"machine: {os.cpu_count()} cores; {seconds:g} s per measurement, {rounds} round(s); "
             f"queries: small aggregates, round-robin over {len(QUERIES)}, release cache off unless stated",
             f"table: visits ({people} people); embedded ClickHouse directly, 1 at a time: median "
             f"{floor_median:.2f} ms, p99 {floor_p99:.2f} ms", ""]
    variants = {"this": ROOT} | ({str(against): against} if against is not None else {})
    measured: dict[tuple[str, int], list[tuple[float, float, float, int]]] = {}
    ctx = multiprocessing.get_context("spawn")
    with tempfile.TemporaryDirectory() as tmp, ctx.Pool(max(CLIENTS)) as pool:
        servers = {name: Server(path, f"{tmp}/{i}", people) for i, (name, path) in enumerate(variants.items())}
        try:
            for _ in range(0 if decay_only else rounds):
                for clients in CLIENTS:
                    for name, server in servers.items():
                        measured.setdefault((name, clients), []).append(_drive(pool, server.port, clients, seconds))
        finally:
            for server in servers.values():
                server.stop()
        lines += ["| checkout | clients | queries/s | median ms | p99 ms | errors |", "|---|---|---|---|---|---|"]
        best = {key: max(runs, key=lambda r: r[0]) for key, runs in measured.items()}
        for (name, clients), (qps, median, p99, errors) in sorted(best.items(), key=lambda kv: (kv[0][1], kv[0][0])):
            lines.append(f"| {name} | {clients} | {qps:.0f} | {median:.2f} | {p99:.2f} | {errors} |")
        this16 = best[("this", 16)][0] if best else 0.0
        lines.append("")
        if best:
            lines.append(f"aim ≥ 150 queries/s at 16 clients: {'met' if this16 >= 150 else 'NOT met'} ({this16:.0f})")
        if against is not None and best:
            ratio = this16 / best[(str(against), 16)][0]
            verdict = "met" if ratio >= 2 else "NOT met"
            lines.append(f"this / {against} at 16 clients: {ratio:.2f}x (aim ≥ 2x: {verdict})")

        # decay with use: a history of past releases against none, interleaved
        if history:
            aged = Server(ROOT, f"{tmp}/aged", people, history=history)
            fresh = Server(ROOT, f"{tmp}/fresh", people)
            try:
                pairs = []
                for k in range(rounds):  # each goes first in turn, so an order effect cancels out
                    if k % 2:
                        aged_qps = _drive(pool, aged.port, 16, seconds)[0]
                        pairs.append((_drive(pool, fresh.port, 16, seconds)[0], aged_qps))
                    else:
                        fresh_qps = _drive(pool, fresh.port, 16, seconds)[0]
                        pairs.append((fresh_qps, _drive(pool, aged.port, 16, seconds)[0]))
            finally:
                aged.stop()
                fresh.stop()
            fresh_qps = statistics.median(p[0] for p in pairs)
            aged_qps = statistics.median(p[1] for p in pairs)
            ratio = aged_qps / fresh_qps
            lines.append(f"decay: {history} past releases {aged_qps:.0f} queries/s vs fresh {fresh_qps:.0f}: "
                         f"{ratio:.2f}x (aim ≥ 0.95: {'met' if ratio >= 0.95 else 'NOT met'})")

        cached = Server(ROOT, f"{tmp}/cached", people, cache_ttl=300)
        try:
            qps, median, p99, errors = _drive(pool, cached.port, 16, seconds)
        finally:
            cached.stop()
        lines.append(f"release cache on, 16 clients: {qps:.0f} queries/s, median {median:.2f} ms, p99 {p99:.2f} ms, "
                     f"{errors} errors")
    return "\n".join(lines)


def test_bench_server() -> None:
    print(run(seconds=2.0, people=2000, history=2000))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--people", type=int, default=5000)
    parser.add_argument("--against", type=Path, help="another dpch checkout to measure in the same run")
    parser.add_argument("--history", type=int, default=30_000, help="past releases for the decay measurement")
    parser.add_argument("--rounds", type=int, default=1, help="interleaved rounds (the best of each is reported)")
    parser.add_argument("--decay-only", action="store_true", help="only the decay measurement")
    ns = parser.parse_args()
    print(run(ns.seconds, ns.people, ns.against.resolve() if ns.against else None, ns.history, ns.rounds,
              ns.decay_only))
