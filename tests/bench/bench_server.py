"""Throughput and latency of `dpch serve` (issue 9, "Speed").

Run:  python tests/bench/bench_server.py [--seconds 5] [--people 5000]
  or  pytest tests/bench/bench_server.py -s

In one run, on one embedded store owned by this process:
1. the same small aggregates run directly on embedded ClickHouse (clickhouse-connect on chdb),
   one at a time: the baseline latency;
2. the same queries through `dpch serve` (cache off) from 1, 4 and 16 concurrent client
   processes (raw HTTP keep-alive connections, as a BI tool's pool): queries/s, median and p99;
3. 16 clients with the release cache on (a dashboard refreshing the same panels).
The aim of the issue is ≥ 500 queries/s at 16 clients with the cache off.
"""

from __future__ import annotations

import argparse
import base64
import http.client
import multiprocessing
import os
import statistics
import sys
import tempfile
import time

QUERIES = [
    "SELECT count(*) FROM visits",
    "SELECT sum(pages) FROM visits WHERE age > 40",
    "SELECT region, count(*) FROM visits GROUP BY region",
    "SELECT device, avg(spend) FROM visits GROUP BY device",
]
SETTINGS = " SETTINGS dp_epsilon = 0.001 FORMAT TabSeparated"


def _client(args: tuple[int, float, int, int]) -> tuple[int, list[float], int]:
    """One client process: sends queries round-robin for ``seconds``; returns (done, latencies, errors)."""
    port, seconds, offset, tag = args
    auth = "Basic " + base64.b64encode(b"bench:bench-pw").decode()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    latencies, errors, i = [], 0, offset
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        # a distinct comment per client makes no difference to the SQL's fingerprint; the cache
        # (when on) sees the same four queries from every client, like a shared dashboard
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


def run(seconds: float = 5.0, people: int = 5000) -> str:
    os.environ.setdefault("DPCH_ALLOW_FIXED_SEED", "1")
    from dpch.server import ServerConfig, make_server
    from dpch.store.engine import Engine
    from sql_fixtures import visits

    lines = [f"machine: {os.cpu_count()} cores; {seconds:g} s per measurement; queries: small aggregates, "
             f"round-robin over {len(QUERIES)}"]
    with tempfile.TemporaryDirectory() as tmp:
        dsn = f"chdb://{tmp}/store"
        engine = Engine(dsn, database="bench")
        rows = visits.load(engine, "visits", people=people)
        lines.append(f"table: visits, {rows} rows ({people} people), 10 rows per unit cap")

        # 1. baseline: the analyst's SQL run as is on embedded ClickHouse, one at a time
        direct = []
        for q in QUERIES * 50:
            sql = q.replace("FROM visits", f"FROM {engine.table('visits')}")
            started = time.perf_counter()
            engine.query_rows(sql)
            direct.append((time.perf_counter() - started) * 1000.0)
        base_median = statistics.median(direct)

        results = []
        for cache_ttl, clients in ((0, 1), (0, 4), (0, 16), (300, 16)):
            config = ServerConfig.from_mapping({
                "server": {"dsn": dsn, "database": "bench", "cache_ttl": cache_ttl, "access_log": "",
                           "max_concurrent": 32},
                "users": {"bench": {"password": "bench-pw", "epsilon": 1e9, "delta": 1e-6}},
            })
            server = make_server(config, host="127.0.0.1", port=0)
            server.start()
            ctx = multiprocessing.get_context("spawn")
            with ctx.Pool(clients) as pool:
                pool.map(_client, [(server.port, 0.5, k, 0) for k in range(clients)])  # warm up
                started = time.perf_counter()
                out = pool.map(_client, [(server.port, seconds, k, 1) for k in range(clients)])
                wall = time.perf_counter() - started
            server.stop()
            done = sum(o[0] for o in out)
            latencies = [x for o in out for x in o[1]]
            errors = sum(o[2] for o in out)
            results.append((cache_ttl, clients, done / wall, statistics.median(latencies), _pct(latencies, 0.99),
                            errors))
        engine.close()

    lines.append("")
    lines.append(f"embedded ClickHouse directly (same SQL, 1 at a time): median {base_median:.2f} ms, "
                 f"p99 {_pct(direct, 0.99):.2f} ms, {1000.0 / statistics.mean(direct):.0f} queries/s")
    lines.append("")
    lines.append("| cache | clients | queries/s | median ms | p99 ms | median vs direct | errors |")
    lines.append("|---|---|---|---|---|---|---|")
    for cache_ttl, clients, qps, median, p99, errors in results:
        lines.append(f"| {'on' if cache_ttl else 'off'} | {clients} | {qps:.0f} | {median:.2f} | {p99:.2f} | "
                     f"{median / base_median:.1f}x | {errors} |")
    off16 = next(r for r in results if r[0] == 0 and r[1] == 16)
    lines.append("")
    lines.append(f"aim ≥ 500 queries/s at 16 clients, cache off: {'met' if off16[2] >= 500 else 'NOT met'} "
                 f"({off16[2]:.0f} queries/s)")
    return "\n".join(lines)


def test_bench_server() -> None:
    print(run(seconds=3.0))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--people", type=int, default=5000)
    ns = parser.parse_args()
    sys.path.insert(0, os.getcwd())
    print(run(ns.seconds, ns.people))
