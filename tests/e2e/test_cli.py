"""End to end through the CLI, each command a new process on its own embedded store:
load, query, budget, restart (a new process), query again; the demo; errors; the store lock."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest


def dpch(store, *args, check=True):
    env = {k: v for k, v in os.environ.items() if k != "DPCH_ALLOW_FIXED_SEED"}
    proc = subprocess.run(
        [sys.executable, "-m", "dpch.cli.main", "--dsn", f"chdb://{store}", *args],
        capture_output=True, text=True, env=env, timeout=120,
    )
    if check:
        assert proc.returncode == 0, proc.stderr
    return proc


@pytest.fixture
def store(tmp_path):
    csv = tmp_path / "people.csv"
    lines = ["uid,grp,x,secret_name"]
    for i in range(300):
        for j in range(1 + i % 4):
            lines.append(f"{i},{'ab'[i % 2]},{(i * 7 + j) % 13},Person{i}")
    csv.write_text("\n".join(lines) + "\n")
    path = tmp_path / "store"
    out = dpch(path, "load", str(csv), "--table", "people", "--privacy-unit", "uid",
               "--max-rows-per-unit", "2", "--bounds", "x=0:10", "--public", "grp=a,b")
    assert "loaded 750 rows" in out.stdout
    assert "bounds=[0, 10]" in out.stdout and "values=['a', 'b']" in out.stdout
    # the data owner gives the (default) analyst a budget: without one every query is refused
    dpch(path, "budget", "set", "--analyst", "default", "--epsilon", "3", "--delta", "1e-6")
    return path


def test_load_query_budget_restart_query(store):
    dpch(store, "budget", "set", "--analyst", "default", "--epsilon", "2", "--delta", "1e-6")
    out = dpch(store, "query", "SELECT grp, count(*) AS n, avg(x) AS ax FROM people GROUP BY grp ORDER BY grp",
               "--format", "json", "--epsilon", "0.5")
    data = json.loads(out.stdout)
    assert data["columns"] == ["grp", "n", "ax"]
    assert [row[0] for row in data["rows"]] == ["a", "b"]
    assert data["intervals"][0][0] is None and len(data["intervals"][0][1]) == 2
    assert data["cost"] == {"epsilon": 0.5, "delta": 0.0}
    assert data["budget"]["spent"]["epsilon"] == pytest.approx(0.5)
    assert data["budget"]["remaining"]["epsilon"] == pytest.approx(1.5)
    # capped at 2 rows per unit, group a holds 75 units with 1 row and 75 with 3 (kept: 2): 225 rows;
    # the noise is unseeded here (a CLI process), so allow 10 half-widths (P(miss) < e^-25)
    lo, hi = data["intervals"][0][1]
    assert abs(data["rows"][0][1] - 225) < 10 * (hi - lo) / 2

    budget = json.loads(dpch(store, "budget", "--json").stdout)  # a new process: a restart
    assert budget["spent"]["epsilon"] == pytest.approx(0.5) and budget["releases"] == 1

    csv_out = dpch(store, "query", "SELECT sum(x) AS total FROM people SETTINGS dp_epsilon = 1", "--format", "csv")
    assert csv_out.stdout.splitlines()[0] == "total,total_lo,total_hi"
    table = dpch(store, "query", "SELECT count(*) FROM people", "--epsilon", "0.5")
    assert "±" in table.stdout and "budget left ε 0" in table.stdout

    refused = dpch(store, "query", "SELECT count(*) FROM people", "--epsilon", "0.1", check=False)
    assert refused.returncode == 1
    assert "budget exhausted" in refused.stderr and "Traceback" not in refused.stderr
    assert json.loads(dpch(store, "budget", "--json").stdout)["releases"] == 3


def test_errors_are_one_line_without_traceback_or_data(store):
    for sql in ["SELECT * FROM people", "SELECT secret_name, count(*) FROM people GROUP BY secret_name",
                "SELECT count(*) FROM people WHERE secret_name = 1", "DROP TABLE people"]:
        proc = dpch(store, "query", sql, check=False)
        assert proc.returncode == 1, sql
        assert proc.stderr.startswith("error: "), proc.stderr
        assert "Traceback" not in proc.stderr and "Person" not in proc.stderr
    budget = json.loads(dpch(store, "budget", "--json").stdout)
    assert budget["releases"] == 0


def test_sqlglot_prints_nothing_on_stderr(store):
    """sqlglot's own warnings (``Unsupported logarithm with base 5``, logged while dpch renders the
    query) reached the user's stderr around dpch's answer (issue 24, item 4): stderr holds dpch's
    one-line refusal and nothing else."""
    proc = dpch(store, "query", "SELECT count(*) FROM people WHERE log(3, 5) > 0", check=False)
    assert proc.returncode == 1
    assert proc.stderr.startswith("error: ") and proc.stderr.count("\n") == 1, proc.stderr
    assert "Unsupported" not in proc.stderr and "logarithm" not in proc.stderr


def test_explain_spends_nothing_and_policy_show(store):
    out = dpch(store, "explain", "SELECT grp, sum(x) FROM people GROUP BY grp")
    assert "sensitivity 20" in out.stdout and "LIMIT 2 BY" in out.stdout
    assert json.loads(dpch(store, "budget", "--json").stdout)["releases"] == 0
    shown = dpch(store, "policy", "show", "people")
    assert "privacy unit: uid" in shown.stdout


def test_shell_script_mode(store):
    proc = subprocess.run(
        [sys.executable, "-m", "dpch.cli.main", "--dsn", f"chdb://{store}", "shell"],
        input="\\budget\nSELECT count(*)\n FROM people;\nSELECT * FROM people;\nSELECT 1 FROM people;\n",
        capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 1
    assert "±" in proc.stdout and "ε 0 of 3 spent" in proc.stdout
    assert "SELECT * releases rows" in proc.stderr


def test_locked_store_names_the_lock(store):
    holder = subprocess.Popen(
        [sys.executable, "-c",
         f"import dpch, sys, time; s = dpch.connect('chdb://{store}'); print('ready', flush=True); time.sleep(60)"],
        stdout=subprocess.PIPE, text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "ready"
        proc = dpch(store, "budget", check=False)
        assert proc.returncode == 1
        assert "in use by another process" in proc.stderr and "dpch serve" in proc.stderr
    finally:
        holder.kill()
        holder.wait()


def test_demo_runs_and_reuses_its_store(tmp_path):
    out = subprocess.run([sys.executable, "-m", "dpch.cli.main", "demo"], cwd=tmp_path,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert (tmp_path / "dpch-data").is_dir()
    assert out.stdout.count("±") >= 3 and "cost ε 0.5" in out.stdout and "budget left" in out.stdout
    again = subprocess.run([sys.executable, "-m", "dpch.cli.main", "demo"], cwd=tmp_path,
                           capture_output=True, text=True, timeout=120)
    assert again.returncode == 0 and "ε 2 of 5 spent" in again.stdout  # reuses the store and ledger
