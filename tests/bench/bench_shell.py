"""Start-up time of ``dpch shell`` against the other CLI commands (issue 8: "fast to start").

Run:  python tests/bench/bench_shell.py [--runs 7]

Reports medians over --runs fresh processes on one embedded store (the demo table):
1. ``python -c pass`` (the interpreter alone) and ``dpch --version`` (the CLI's imports);
2. ``dpch budget`` (imports + opening the store + reading the ledger): the baseline;
3. ``dpch shell -c '\\q'`` (the same plus the shell) and ``dpch shell -c 'SELECT ...'``;
4. the first prompt of an interactive shell through a pseudo-terminal (pexpect), which adds
   prompt_toolkit, the banner and the budget read.
Ratios are against ``dpch budget`` measured in the same run.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _median_ms(argv: list[str], runs: int, env: dict[str, str], cwd: str) -> float:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run(argv, env=env, cwd=cwd, check=True, capture_output=True)
        times.append((time.perf_counter() - started) * 1000.0)
    return statistics.median(times)


def _first_prompt_ms(base: list[str], runs: int, env: dict[str, str], cwd: str) -> float:
    import pexpect

    times = []
    for _ in range(runs):
        started = time.perf_counter()
        child = pexpect.spawn(base[0], [*base[1:], "shell"], env={**env, "PROMPT_TOOLKIT_NO_CPR": "1",
                                                                   "TERM": "xterm"}, cwd=cwd, timeout=60)
        child.expect("dpch>")
        times.append((time.perf_counter() - started) * 1000.0)
        child.sendline("\\q")
        child.expect(pexpect.EOF)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "PYTHONPATH": str(ROOT), "DPCH_HISTORY": str(Path(tmp) / "history")}
        base = [sys.executable, "-m", "dpch.cli.main", "--dsn", f"chdb://{tmp}/store", "--analyst", "bench"]
        subprocess.run([*base, "demo"], env=env, cwd=tmp, check=True, capture_output=True)
        subprocess.run([*base, "budget", "set", "--analyst", "bench", "--epsilon", "3"], env=env, cwd=tmp, check=True,
                       capture_output=True)  # the data owner's step: an analyst without a budget is refused
        rows = [
            ("python -c pass", _median_ms([sys.executable, "-c", "pass"], args.runs, env, tmp)),
            ("dpch --version", _median_ms([*base, "--version"], args.runs, env, tmp)),
            ("dpch budget (baseline)", _median_ms([*base, "budget"], args.runs, env, tmp)),
            ("dpch shell -c '\\q'", _median_ms([*base, "shell", "-c", "\\q"], args.runs, env, tmp)),
            ("dpch shell -c 'SELECT count(*) ...'",
             _median_ms([*base, "shell", "--yes", "-c", "SELECT count(*) FROM visits"], args.runs, env, tmp)),
            ("interactive: first prompt", _first_prompt_ms(base, args.runs, env, tmp)),
        ]
    baseline = rows[2][1]
    print(f"{os.cpu_count()} cores, median of {args.runs} fresh processes")
    print(f"{'command':<40}{'ms':>8}{'ratio':>8}")
    for name, ms in rows:
        print(f"{name:<40}{ms:>8.0f}{ms / baseline:>8.2f}")


if __name__ == "__main__":
    main()
