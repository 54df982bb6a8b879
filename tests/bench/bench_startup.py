"""Cold start of the CLI: ``dpch --version`` and a one-query ``dpch query`` (issue 14, "small costs").

Run:  python tests/bench/bench_startup.py [--runs 9]

Every row is the median over --runs fresh processes, measured in the same run as its baselines:

1. ``python -c pass`` (the interpreter alone) and ``python -c "import clickhouse_connect"`` (the
   ClickHouse client, which any command that opens a store needs);
2. a raw one-query floor: open the embedded store through clickhouse_connect and run the count,
   with no dpch at all;
3. ``dpch --version`` (aim: under 150 ms) and ``dpch query "SELECT count(*) FROM visits"``
   (aim: under 0.9 s) on a small embedded store (the fixture tables, 2 000 people).

With ``--against DIR`` (another checkout of dpch, e.g. ``git worktree add /tmp/base main``) the two
dpch rows are also measured on that checkout, run by run in turn with this one, so both see the
same machine load; the ratio column is then this checkout's time over that one's.

Then one ``python -X importtime`` run of the query shows what the imports cost (cumulative ms of
the first import of each heavy dependency; one run, so noisier than the medians). No timing is
asserted anywhere: speed is measured here, never in tests (docs/development.md).
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PEOPLE = 2_000
QUERY = "SELECT count(*) FROM visits"
#: the heavy imports to break down (module → its cumulative import time in the query's run)
BREAKDOWN = ("numpy", "scipy.special", "scipy.linalg", "scipy.optimize", "sqlglot", "clickhouse_connect", "chdb",
             "pyarrow", "dpch.accounting", "dpch.pipeline.calibrate", "dpch.connection")
AIMS_MS = {"dpch --version": 150.0, "dpch query (one query)": 900.0}


def _medians_ms(argv: list[str], runs: int, envs: list[dict[str, str]], cwd: str) -> list[float]:
    """The median time of ``argv`` under each environment, the environments taking turns run by run."""
    for env in envs:  # warm the page cache (and write the .pyc files) once
        subprocess.run(argv, env=env, cwd=cwd, check=True, capture_output=True)
    times: list[list[float]] = [[] for _ in envs]
    for _ in range(runs):
        for env, samples in zip(envs, times, strict=True):
            started = time.perf_counter()
            subprocess.run(argv, env=env, cwd=cwd, check=True, capture_output=True)
            samples.append((time.perf_counter() - started) * 1000.0)
    return [statistics.median(samples) for samples in times]


def _median_ms(argv: list[str], runs: int, env: dict[str, str], cwd: str) -> float:
    return _medians_ms(argv, runs, [env], cwd)[0]


def _build_store(path: str, env: dict[str, str]) -> None:
    # in its own process: an embedded store is held by one process at a time
    code = ("import sys\nfrom dpch.store.engine import Engine\nfrom dpch.fixtures import tables\n"
            "from dpch.accounting.budget import Budget, BudgetStore\n"
            f"e = Engine(sys.argv[1])\ntables.load_all(e, people={PEOPLE})\n"
            "BudgetStore(e).set('bench', Budget(3.0, 1e-6))\ne.close()")  # the analyst's budget, as the owner sets it
    subprocess.run([sys.executable, "-c", code, f"chdb://{path}"], env=env, check=True, capture_output=True)


def _import_breakdown(argv: list[str], env: dict[str, str], cwd: str) -> dict[str, float]:
    err = subprocess.run([argv[0], "-X", "importtime", *argv[1:]], env=env, cwd=cwd, check=True,
                         capture_output=True, text=True).stderr
    cumulative: dict[str, float] = {}
    for line in err.splitlines():
        match = re.match(r"import time:\s+\d+ \|\s+(\d+) \| (\s*)(\S+)", line)
        if match and match.group(3) in BREAKDOWN:
            cumulative.setdefault(match.group(3), int(match.group(1)) / 1000.0)
    return cumulative


def _load() -> str:
    try:
        one, five, _ = os.getloadavg()
    except OSError:
        return "load average unknown"
    return f"load average {one:.1f} (1 min), {five:.1f} (5 min)"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--against", type=Path, help="another dpch checkout to time the dpch rows against")
    args = parser.parse_args()
    script = Path(sys.executable).parent / "dpch"
    dpch = [str(script)] if script.exists() else [sys.executable, "-m", "dpch.cli.main"]
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        store = f"{tmp}/store"
        _build_store(store, env)
        query = [*dpch, "--dsn", f"chdb://{store}", "--analyst", "bench", "query", QUERY, "--epsilon", "0.001"]
        floor = ("import sys, clickhouse_connect\nc = clickhouse_connect.get_client(dsn=sys.argv[1])\n"
                 f"c.query({QUERY!r})")
        envs = [env] if args.against is None else [env, {**env, "PYTHONPATH": str(args.against.resolve())}]
        versions = _medians_ms([*dpch, "--version"], args.runs, envs, tmp)
        queries = _medians_ms(query, args.runs, envs, tmp)
        rows = [
            ("python -c pass", _median_ms([sys.executable, "-c", "pass"], args.runs, env, tmp)),
            ("python -c 'import clickhouse_connect'",
             _median_ms([sys.executable, "-c", "import clickhouse_connect"], args.runs, env, tmp)),
            ("raw query: open store + count (no dpch)",
             _median_ms([sys.executable, "-c", floor, f"chdb://{store}"], args.runs, env, tmp)),
            ("dpch --version", versions[0]),
            ("dpch query (one query)", queries[0]),
        ]
        if args.against is not None:
            rows += [(f"dpch --version on {args.against}", versions[1]),
                     (f"dpch query on {args.against}", queries[1])]
        python_query = [sys.executable, "-m", "dpch.cli.main", *query[len(dpch):]]
        breakdown = _import_breakdown(python_query, env, tmp)
    python_ms, floor_ms = rows[0][1], rows[2][1]
    print(f"{os.cpu_count()} cores, {_load()}, median of {args.runs} fresh processes")
    print(f"{'command':<42}{'ms':>8}{'− python':>10}{'/ raw query':>12}{'aim':>14}")
    for name, ms in rows:
        aim = AIMS_MS.get(name)
        verdict = "" if aim is None else f"{'met' if ms < aim else 'missed'} <{aim:.0f}"
        print(f"{name:<42}{ms:>8.0f}{ms - python_ms:>10.0f}{ms / floor_ms:>12.2f}{verdict:>14}")
    if args.against is not None:
        print(f"\nthis checkout / {args.against}: --version {versions[0] / versions[1]:.2f}, "
              f"query {queries[0] / queries[1]:.2f}")
    print("\nimports of the one-query run (cumulative ms, one run with -X importtime):")
    for name in BREAKDOWN:
        if name in breakdown:
            print(f"  {name:<28}{breakdown[name]:>8.0f}")
        else:
            print(f"  {name:<28}{'not loaded':>8}")


if __name__ == "__main__":
    main()
