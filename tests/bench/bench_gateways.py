"""N gateways, one ledger (issue 26): admission shared through ClickHouse Keeper, against today's single
owner measured in the same run.

Run:  nice -n 5 python tests/bench/bench_gateways.py [--seconds 5] [--history 100000]

One ClickHouse endpoint (tests/chendpoint.py: one chdb store with ClickHouse's test Keeper, the
stand-in for a server) and N ∈ {1, 2, 4} `dpch serve` gateway processes on it, driven by client
processes over raw HTTP keep-alive connections, round-robin over the gateways, release cache off:

1. **release latency, one client**: today's single owner (``admission = owner``: the state in the
   gateway's memory) against one gateway deciding through Keeper, interleaved, sequential releases
   (aim: Keeper ≤ 1.3× the owner's median release latency);
2. **many analysts** (8 clients, each its own analyst): queries/s and admission latency p50/p99
   (the time inside ``begin_charge``, measured in the gateway) for the owner and N = 1, 2, 4
   (aim: throughput grows with N — on 2 cores shared with the endpoint it cannot grow much);
3. **one hot analyst** (8 clients, one analyst, a budget that runs out mid-run): the same, plus
   retries per admission (Keeper writes lost to another gateway) and Keeper writes per admission;
   safety: what the ledger admitted never exceeds the budget;
4. **a dashboard burst**: 20 panels at once on one gateway: Keeper writes for the 20 admissions
   (group admission);
5. **loading an analyst with a long history**: ``--history`` past releases in the ledger; the time and
   the memory (tracemalloc peak) of a fresh process's first ``status()``: from Keeper (one value)
   against the in-process owner (a replay of the ledger) (aim: ≤ 100 ms and O(1) memory).

Numbers depend on the machine's load: read the ratios. No timing is asserted anywhere.
"""

from __future__ import annotations

import argparse
import base64
import http.client
import json
import multiprocessing
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests.chendpoint import start  # noqa: E402

QUERIES = ["SELECT count(*) FROM visits", "SELECT sum(pages) FROM visits WHERE age > 40",
           "SELECT region, count(*) FROM visits GROUP BY region",
           "SELECT device, avg(spend) FROM visits GROUP BY device"]
SETTINGS = " SETTINGS dp_epsilon = 0.001 FORMAT TabSeparated"
CLIENTS = 8
PANELS = 20
ANALYSTS = [f"a{i}" for i in range(CLIENTS)]

#: a gateway process: times every admission (begin_charge) and reports it with the Keeper counters. Today's
#: single owner is ``admission = owner`` without its claim and its re-read of the owner's rows: what a
#: gateway on a server did before (the state in its memory, nothing else)
GATEWAY = textwrap.dedent("""
    import json, sys, time
    from dpch.accounting.admission import InProcessAdmission, OwnerAdmission
    from dpch.pipeline import admit
    from dpch.server import ServerConfig, make_server

    config = json.loads(sys.argv[1])
    if config["server"]["admission"] == "owner":
        OwnerAdmission.claim = lambda self: None
        OwnerAdmission.run = InProcessAdmission.run

    times = []
    real = admit.begin_charge

    def timed(*args, **kwargs):
        started = time.perf_counter()
        try:
            return real(*args, **kwargs)
        finally:
            times.append((time.perf_counter() - started) * 1000.0)

    admit.begin_charge = timed
    server = make_server(ServerConfig.from_mapping(config), host="127.0.0.1", port=0)
    server.start()
    print(server.port, flush=True)
    for line in sys.stdin:
        if line.strip() == "STATS":
            from dpch.accounting.admission import admission_for
            engine = server.gateway.engine(None)
            adm = admission_for(engine)
            counters = {k: getattr(adm, k, 0) for k in ("writes", "committed", "retries", "changes", "batches")}
            print(json.dumps({"admission_ms": times, **counters}), flush=True)
            times.clear()
    server.stop()
""")


class Gateway:
    def __init__(self, config: dict) -> None:
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        self.process = subprocess.Popen([sys.executable, "-c", GATEWAY, json.dumps(config)], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, env=env, text=True)
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line.strip().isdigit():
            raise RuntimeError("a gateway did not start")
        self.port = int(line)

    def stats(self) -> dict:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write("STATS\n")
        self.process.stdin.flush()
        return json.loads(self.process.stdout.readline())

    def stop(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait(timeout=120)


def _client(args: tuple[list[int], str, float, int]) -> tuple[int, list[float], int, int]:
    """One client: queries round-robin over the gateways for ``seconds`` as ``analyst``; returns
    (answered, latencies ms, refused by the budget, other errors)."""
    ports, analyst, seconds, offset = args
    auth = "Basic " + base64.b64encode(f"{analyst}:pw".encode()).decode()
    conns = [http.client.HTTPConnection("127.0.0.1", p, timeout=120) for p in ports]
    latencies, refused, errors, i = [], 0, 0, offset
    deadline = time.perf_counter() + seconds
    while not latencies or time.perf_counter() < deadline:  # at least one request (a burst sends one each)
        conn = conns[i % len(conns)]
        sql = QUERIES[i % len(QUERIES)]
        i += 1
        started = time.perf_counter()
        conn.request("POST", "/", body=(sql + SETTINGS).encode(), headers={"Authorization": auth})
        response = conn.getresponse()
        response.read()
        latencies.append((time.perf_counter() - started) * 1000.0)
        if response.status == 403:
            refused += 1
        elif response.status != 200:
            errors += 1
    for conn in conns:
        conn.close()
    return len(latencies), latencies, refused, errors


def _burst(args: tuple[int, str, int]) -> float:
    """``panels`` requests at once (a dashboard's refresh: one thread and connection each, released
    together by a barrier); returns the wall time in ms until the last answer."""
    import threading

    port, analyst, panels = args
    auth = "Basic " + base64.b64encode(f"{analyst}:pw".encode()).decode()
    conns = [http.client.HTTPConnection("127.0.0.1", port, timeout=120) for _ in range(panels)]
    barrier = threading.Barrier(panels + 1)

    def panel(k: int) -> None:
        barrier.wait()
        conns[k].request("POST", "/", body=(QUERIES[k % len(QUERIES)] + SETTINGS).encode(),
                         headers={"Authorization": auth})
        conns[k].getresponse().read()

    threads = [threading.Thread(target=panel, args=(k,)) for k in range(panels)]
    for t in threads:
        t.start()
    barrier.wait()
    started = time.perf_counter()
    for t in threads:
        t.join()
    return (time.perf_counter() - started) * 1000.0


def _pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def _delta(now: dict, before: dict) -> dict:
    """The counters of a gateway since ``before`` (its admission times are per call already)."""
    return {k: (v if k == "admission_ms" else v - before[k]) for k, v in now.items()}


def _config(dsn: str, database: str, mode: str, budget: float) -> dict:
    users = {a: {"password": "pw", "epsilon": budget} for a in [*ANALYSTS, "hot", "dash"]}
    return {"server": {"dsn": dsn, "database": database, "access_log": "", "cache_ttl": 0, "admission": mode,
                       "max_concurrent": 64}, "users": users}


def _prepare(dsn: str, database: str) -> None:
    from dpch.fixtures import visits
    from dpch.store.engine import Engine

    with Engine(dsn, database=database) as engine:
        visits.load(engine, "visits", people=2000)


def _spent(dsn: str, database: str, analyst: str) -> float:
    from dpch.accounting.ledger import Ledger
    from dpch.store.engine import Engine

    with Engine(dsn, database=database) as engine:
        return sum(e.counted.epsilon for e in Ledger(engine).entries(analyst))


def _run(pool, ports: list[int], analysts: list[str], seconds: float) -> tuple[float, list[float], int, int]:
    pool.map(_client, [(ports, analysts[k % len(analysts)], 0.5, k) for k in range(CLIENTS)])  # warm up
    started = time.perf_counter()
    out = pool.map(_client, [(ports, analysts[k % len(analysts)], seconds, k) for k in range(CLIENTS)])
    wall = time.perf_counter() - started
    answered = sum(o[0] - o[2] - o[3] for o in out)
    return answered / wall, [x for o in out for x in o[1]], sum(o[2] for o in out), sum(o[3] for o in out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--history", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    lines = [f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}; {args.seconds:g} s per "
             f"measurement; queries: small aggregates, cache off; one ClickHouse endpoint (chdb + test Keeper)", ""]
    ctx = multiprocessing.get_context("spawn")
    with tempfile.TemporaryDirectory() as tmp, start(Path(tmp) / "store", keeper=True) as endpoint, \
            ctx.Pool(CLIENTS) as pool:
        dsn = endpoint.dsn()
        run_id = [0]

        def fresh_db() -> str:
            run_id[0] += 1
            name = f"bench{run_id[0]}"
            _prepare(dsn, name)
            return name

        # 1. release latency, one client, interleaved rounds
        lat: dict[str, list[float]] = {"owner": [], "keeper": []}
        for _ in range(args.rounds):
            for mode in ("owner", "keeper"):
                db = fresh_db()
                gw = Gateway(_config(dsn, db, mode, 1e9))
                try:
                    lat[mode] += pool.map(_client, [([gw.port], "a0", args.seconds, 0)])[0][1]
                finally:
                    gw.stop()
        owner_p50, keeper_p50 = statistics.median(lat["owner"]), statistics.median(lat["keeper"])
        lines += ["### release latency, 1 client, sequential", "",
                  "| admission | releases | p50 ms | p99 ms |", "|---|---|---|---|",
                  f"| single owner (today) | {len(lat['owner'])} | {owner_p50:.1f} | {_pct(lat['owner'], 0.99):.1f} |",
                  f"| Keeper, 1 gateway | {len(lat['keeper'])} | {keeper_p50:.1f} | {_pct(lat['keeper'], 0.99):.1f} |",
                  "", f"Keeper / owner, p50: {keeper_p50 / owner_p50:.2f}x (aim ≤ 1.3x)", ""]

        # 2 and 3. many analysts and one hot analyst, N gateways
        for workload, analysts, budget in (("many analysts", ANALYSTS, 1e9), ("one hot analyst", ["hot"], 0.1)):
            note = " (budget ε 0.1 at ε 0.001 a query: runs out mid-run)" if budget < 1e6 else ""
            lines += [f"### {workload}, {CLIENTS} clients{note}",
                      "", "| admission | gateways | answered/s | release p50 ms | release p99 ms | admission p50 ms "
                      "| admission p99 ms | Keeper writes / admission | retries / admission | refused | safe |",
                      "|---|---|---|---|---|---|---|---|---|---|---|"]
            for mode, n in (("owner", 1), ("keeper", 1), ("keeper", 2), ("keeper", 4)):
                db = fresh_db()
                gateways = [Gateway(_config(dsn, db, mode, budget)) for _ in range(n)]
                try:
                    base = [g.stats() for g in gateways]  # the counters so far (start-up's budget writes)
                    qps, latencies, refused, errors = _run(pool, [g.port for g in gateways], analysts, args.seconds)
                    stats = [_delta(g.stats(), b) for g, b in zip(gateways, base, strict=True)]
                finally:
                    for g in gateways:
                        g.stop()
                adm = [x for s in stats for x in s["admission_ms"]]
                changes = sum(s["changes"] for s in stats) or 1
                writes = sum(s["writes"] for s in stats) / changes if mode == "keeper" else float("nan")
                retries = sum(s["retries"] for s in stats) / changes if mode == "keeper" else float("nan")
                safe = all(_spent(dsn, db, a) <= budget * (1 + 1e-9) for a in analysts)
                lines.append(f"| {'single owner (today)' if mode == 'owner' else 'Keeper'} | {n} | {qps:.0f} | "
                             f"{statistics.median(latencies):.1f} | {_pct(latencies, 0.99):.1f} | "
                             f"{statistics.median(adm) if adm else float('nan'):.1f} | {_pct(adm, 0.99):.1f} | "
                             f"{writes:.2f} | {retries:.2f} | {refused} | {'yes' if safe else 'NO'}"
                             + (f" ({errors} errors)" if errors else "") + " |")
            lines.append("")

        # 4. a dashboard burst on one gateway
        db = fresh_db()
        gw = Gateway(_config(dsn, db, "keeper", 1e9))
        try:
            pool.map(_client, [([gw.port], "dash", 0.3, 0)])  # warm: the analyst's state and session exist
            base = gw.stats()
            wall = pool.map(_burst, [(gw.port, "dash", PANELS)])[0]
            stats = _delta(gw.stats(), base)
        finally:
            gw.stop()
        lines += [f"### a dashboard burst ({PANELS} panels at once, one analyst, one gateway)", "",
                  f"{stats['changes']} admissions in {wall:.0f} ms: {stats['committed']} Keeper writes in "
                  f"{stats['batches']} batches, {stats['retries']} lost races", ""]

        # 5. loading an analyst with a long history
        lines += _load(dsn, fresh_db(), args.history)
    print("\n".join(lines))


LOAD = textwrap.dedent("""
    import json, sys, time, tracemalloc
    from dpch.accounting.accountant import Accountant
    from dpch.accounting.admission import InProcessAdmission
    from dpch.store.engine import Engine

    dsn, database, mode = sys.argv[1], sys.argv[2], sys.argv[3]
    engine = Engine(dsn, database=database)
    acc = Accountant(engine, "old", admission=InProcessAdmission() if mode == "owner" else None)
    tracemalloc.start()
    started = time.perf_counter()
    status = acc.status()
    ms = (time.perf_counter() - started) * 1000.0
    peak = tracemalloc.get_traced_memory()[1]
    print(json.dumps({"ms": ms, "peak_mib": peak / 2**20, "releases": status.releases}))
""")


def _load(dsn: str, database: str, history: int) -> list[str]:
    from dpch.accounting.accountant import Accountant, forget_cached_state
    from dpch.accounting.budget import Budget
    from dpch.privacy.cost import PrivacyCost
    from dpch.store.engine import Engine

    with Engine(dsn, database=database) as engine:
        acc = Accountant(engine, "old")
        acc.set_budget(Budget(1e9, 1e-6))
        engine.command(
            f"INSERT INTO {engine.table('dpch_ledger')} (release_id, seq, time, analyst, dataset, query_hash,"
            " mechanism, filter, status, epsilon, delta, rho, worst_epsilon, worst_delta, worst_rho, ex_post, datasets)"
            " SELECT generateUUIDv4(number), 1, now64(6) - toIntervalMillisecond(number), 'old', '', 'h', 'laplace',"
            f" 'basic', 'charged', 0.001, 0, NULL, 0.001, 0, NULL, false, [] FROM numbers({history})")
        forget_cached_state(engine)
        started = time.perf_counter()
        acc.charge(PrivacyCost(0.001), query_hash="x", mechanism="laplace")  # the one bootstrap from the ledger
        bootstrap = (time.perf_counter() - started) * 1000.0
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = {}
    for mode in ("keeper", "owner"):
        done = subprocess.run([sys.executable, "-c", LOAD, dsn, database, mode], capture_output=True, text=True,
                              env=env, check=True)
        out[mode] = json.loads(done.stdout)
    return ["### loading an analyst with a long history", "",
            f"{history} past releases; the shared state was built from the ledger once ({bootstrap:.0f} ms)", "",
            "| admission | first status() ms | memory peak MiB | releases |", "|---|---|---|---|",
            f"| Keeper (one value) | {out['keeper']['ms']:.1f} | {out['keeper']['peak_mib']:.2f} | "
            f"{out['keeper']['releases']} |",
            f"| single owner (replays the ledger) | {out['owner']['ms']:.1f} | {out['owner']['peak_mib']:.2f} | "
            f"{out['owner']['releases']} |", ""]


if __name__ == "__main__":
    main()
