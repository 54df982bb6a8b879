"""Crash safety: a process that owns the store is SIGKILLed after reserving and before charging;
a new process opens the store, the reservation counts at its worst case, the ledger is consistent.
While the first process lives, a second one is refused with the store-lock error."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap

from tests.helpers import child_env

CHILD = textwrap.dedent("""
    import sys, time
    from dpch.accounting.accountant import Accountant
    from dpch.accounting.budget import Budget
    from dpch.store.engine import Engine
    from dpch.privacy.cost import PrivacyCost
    engine = Engine("chdb://" + sys.argv[1])
    acc = Accountant(engine, "ana", default_budget=Budget(10.0, 2e-6), filter="zcdp_bm")
    acc.charge(PrivacyCost(0.1, 0.0, 0.005), dataset="d.t", query_hash="h", mechanism="gaussian")
    worst = PrivacyCost(0.0, 0.0, 0.0, ex_post=True, worst_epsilon=0.5, worst_rho=0.02)
    r = acc.reserve(worst, dataset="d.t", query_hash="h", mechanism="brownian")
    print("RESERVED", r.release_id, flush=True)
    time.sleep(120)   # "computing": killed here, before the charge
    r.settle(PrivacyCost(0.1, 0.0, 0.001, ex_post=True))
""")

READER = textwrap.dedent("""
    import json, sys
    from dpch.accounting.accountant import Accountant
    from dpch.accounting.budget import Budget
    from dpch.store.engine import Engine
    engine = Engine("chdb://" + sys.argv[1])
    acc = Accountant(engine, "ana", default_budget=Budget(10.0, 2e-6), filter="zcdp_bm")
    rows = engine.query_rows("SELECT toString(release_id), seq, status FROM dpch_ledger ORDER BY time, seq")
    print(json.dumps({"status": acc.status().as_dict(), "rows": rows}))
""")


def test_sigkill_between_reserve_and_charge(tmp_path):
    store = str(tmp_path / "store")
    child = subprocess.Popen([sys.executable, "-c", CHILD, store], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, env=child_env())
    try:
        line = child.stdout.readline()
        assert line.startswith("RESERVED"), (line, child.stderr.read() if child.poll() is not None else "")
        release_id = line.split()[1]
        # the store is held: another process is refused with the lock error and a way out
        locked = subprocess.run([sys.executable, "-m", "dpch.cli.main", "--dsn", f"chdb://{store}", "budget"],
                                capture_output=True, text=True, env=child_env(), timeout=60)
        assert locked.returncode == 1 and "in use by another process" in locked.stderr, locked.stderr
        assert "dpch serve" in locked.stderr
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=30)
    assert child.returncode == -signal.SIGKILL

    out = subprocess.run([sys.executable, "-c", READER, store], capture_output=True, text=True, env=child_env(),
                         timeout=60)
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    rows = data["rows"]
    assert [r[2] for r in rows] == ["charged", "reserved"], rows
    assert rows[1][0] == release_id and rows[1][1] == 1
    status = data["status"]
    assert status["reserved"]["rho"] == 0.02  # the unsettled reservation counts at its worst case
    assert status["spent"]["rho"] == 0.005
    from dpch.mechanisms.zcdp import rho_max

    assert abs(status["remaining"]["rho"] - (rho_max(10.0, 1e-6, printed_theorem_6=True) - 0.025)) < 1e-12
