"""``dpch shell`` driven through a pseudo-terminal (pexpect), as an analyst would use it.

One store per module, built in a subprocess (tests/cli/store.py); each test uses its own
analyst (:data:`ANALYSTS`, given their budgets by the store's builder as the data owner would), so
each starts with a fresh budget (ε 3, δ 1e-6). Budgets are checked by reading the
ledger afterwards in a separate process, not only by what the shell prints.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

pexpect = pytest.importorskip("pexpect")

ROOT = Path(__file__).resolve().parents[2]
SLOW_SQL = "SELECT t.country, count(*) FROM visits v JOIN towns t ON v.region = t.region GROUP BY t.country;"
#: the analysts of this module's tests, one each
ANALYSTS = ("multi", "explainer", "careful", "impatient", "piper")


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("shell") / "store"
    subprocess.run([sys.executable, str(ROOT / "tests" / "cli" / "store.py"), str(path), *ANALYSTS], check=True,
                   cwd=ROOT,
                   env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=120)
    return path


def _env(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT), "TERM": "xterm", "PROMPT_TOOLKIT_NO_CPR": "1",
            "DPCH_HISTORY": str(tmp_path / "history"), "LANG": "C.UTF-8"}


def _interruptible() -> None:
    """In the shell's process before it starts: Ctrl-C as a terminal delivers it (default disposition,
    unblocked), whatever the test run inherited. An ignored SIGINT survives exec: a suite started as a
    background job (``cmd &`` in a shell without job control, e.g. a CI script) has it ignored, and these
    tests then failed because the shell never saw Ctrl-C."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


def spawn(store: Path, analyst: str, tmp_path: Path, *args: str):
    child = pexpect.spawn(sys.executable, ["-m", "dpch.cli.main", "--dsn", f"chdb://{store}", "--analyst", analyst,
                                           "shell", *args],
                          env=_env(tmp_path), encoding="utf-8", timeout=30, dimensions=(50, 220), cwd=str(ROOT),
                          preexec_fn=_interruptible)
    child.expect("dpch>")
    return child


def quit_shell(child) -> None:
    child.send("\\q\r")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0


def ledger(store: Path, analyst: str) -> dict:
    """The analyst's budget as `dpch budget --json` reads it from the store (a new process)."""
    out = subprocess.run([sys.executable, "-m", "dpch.cli.main", "--dsn", f"chdb://{store}", "--analyst", analyst,
                          "budget", "--json"], capture_output=True, text=True, cwd=ROOT, timeout=60,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_multiline_query_with_a_completed_column_and_persisted_history(store, tmp_path):
    child = spawn(store, "multi", tmp_path)
    child.send("SELECT avg(sp")
    child.send("\t")  # the only completion of "sp" among visits' columns and functions is "spend"
    child.expect("end")
    child.send(")\r")
    child.expect("->")  # no ';' yet: Enter continues the statement on a new line
    child.send("FROM visits;\r")
    child.expect(r"avg\(spend\)")  # the column name came from the completion, not from what was typed
    child.expect(r"±|\[")
    child.expect(r"cost ε 0\.5 \(laplace, 95% intervals\)\s+budget left ε 2\.5")
    child.expect("dpch>")
    quit_shell(child)
    history = (tmp_path / "history").read_text()
    assert "SELECT avg(spend)\n+FROM visits;" in history, history
    assert oct((tmp_path / "history").stat().st_mode & 0o777) == "0o600"
    assert ledger(store, "multi")["spent"]["epsilon"] == pytest.approx(0.5)


def test_budget_and_explain_spend_nothing(store, tmp_path):
    child = spawn(store, "explainer", tmp_path)
    child.send("\\explain SELECT region, sum(spend) FROM visits GROUP BY region\r")
    child.expect(r"sensitivity 5000 ")  # 10 rows per unit × max(|0|, |500|)
    child.expect(r"cost: ε 0\.5")
    child.expect("budget check: admissible")
    child.expect("dpch>")
    child.send("EXPLAIN DP SELECT count(*) FROM visits;\r")
    child.expect("EXPLAIN DP spends nothing")
    child.expect("dpch>")
    child.send("\\budget\r")
    child.expect(r"ε 0 of 3 spent")
    child.expect(r"budget\s+spent\s+reserved\s+remaining")
    child.expect(r"ε\s+3\s+0\s+0\s+3")
    child.expect("dpch>")
    child.send("\\history\r")
    child.expect("no releases yet")
    child.expect("dpch>")
    quit_shell(child)
    data = ledger(store, "explainer")
    assert data["releases"] == 0 and data["spent"]["epsilon"] == 0


def test_confirmation_before_an_expensive_query(store, tmp_path):
    child = spawn(store, "careful", tmp_path)
    child.send("SELECT count(*) FROM visits SETTINGS dp_epsilon = 1;\r")  # 1/3 of what is left > 25%
    child.expect(r"this query costs ε 1, 33% of your remaining ε 3; run it\? \[y/N\]")
    child.send("n\r")
    child.expect("not run; nothing was charged")
    child.expect("dpch>")
    child.send("SELECT count(*) FROM visits SETTINGS dp_epsilon = 0.5;\r")  # 17%: no question
    child.expect(r"cost ε 0\.5 ")
    child.expect("dpch>")
    child.send("SELECT count(*) FROM visits SETTINGS dp_epsilon = 1;\r")
    child.expect(r"run it\? \[y/N\]")
    child.send("y\r")
    child.expect(r"cost ε 1 .*budget left ε 1\.5")
    child.expect("dpch>")
    child.send("\\history\r")
    child.expect(r"ε 1 +charged +SELECT count\(\*\) FROM visits SETTINGS dp_epsilon = 1")
    child.expect("dpch>")
    quit_shell(child)
    assert ledger(store, "careful")["spent"]["epsilon"] == pytest.approx(1.5)


def test_ctrl_c_during_a_slow_query_leaves_the_budget_unchanged(store, tmp_path):
    """Planning this GROUP BY reads the key domain of `towns` (1.5 M rows, computed on read:
    ~2 s) before the charge. Ctrl-C then stops the query at the checkpoint before the ledger
    write. --yes skips the confirmation's dry run, so the interrupted call is Session.query
    itself. Negative control: the same query without Ctrl-C is charged."""
    child = spawn(store, "impatient", tmp_path, "--yes")
    child.send(SLOW_SQL + "\r")
    child.expect(r"running \d\.\d s +\(Ctrl-C cancels\)")  # the spinner: the query is slow
    child.sendintr()
    child.expect("cancelled before the charge: nothing was spent")
    child.expect("dpch>")  # still in the shell
    child.send("\\budget\r")  # waits for the cancelled worker to stop at the checkpoint first
    child.expect(r"analyst impatient — 0 releases")
    child.expect("dpch>")
    child.send(SLOW_SQL + "\r")
    child.expect(r"cost ε 0\.5 .*budget left ε 2\.5", timeout=60)
    child.expect("dpch>")
    quit_shell(child)
    data = ledger(store, "impatient")
    assert data["releases"] == 1 and data["spent"]["epsilon"] == pytest.approx(0.5)


def test_piped_budget_exceeding_query_fails_without_charging(store, tmp_path):
    base = [sys.executable, "-m", "dpch.cli.main", "--dsn", f"chdb://{store}", "--analyst", "piper", "shell"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    script = "SELECT count(*) FROM visits SETTINGS dp_epsilon = 5;\nSELECT count(*) FROM visits;\n"
    out = subprocess.run(base, input=script, capture_output=True, text=True, env=env, cwd=ROOT, timeout=60)
    assert out.returncode == 1
    assert out.stderr.startswith("error: budget exhausted for analyst piper") and out.stderr.count("\n") == 1
    assert "Traceback" not in out.stderr and out.stdout == ""  # stopped at the first error
    # an admissible but expensive query is not asked about in a pipe: it fails instead
    out = subprocess.run(base, input="SELECT count(*) FROM visits SETTINGS dp_epsilon = 1;\n", capture_output=True,
                         text=True, env=env, cwd=ROOT, timeout=60)
    assert out.returncode == 1 and "above the 25% confirmation threshold" in out.stderr and "--yes" in out.stderr
    assert ledger(store, "piper")["releases"] == 0
