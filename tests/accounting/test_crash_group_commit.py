"""Crash safety under group commit: a process charging from 8 threads (rows sharing INSERTs, half of
them through ``begin_charge``) is SIGKILLed mid-stream. Every release whose call had returned
("durable") before the kill is in the ledger after a restart, and the restarted filter state counts
exactly the ledger's rows: a crash loses budget, never privacy (docs/design.md rule 2)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap

from tests.helpers import child_env

CHILD = textwrap.dedent("""
    import sys, threading
    from dpch.accounting.accountant import Accountant
    from dpch.accounting.budget import Budget
    from dpch.privacy.cost import PrivacyCost
    from dpch.store.engine import Engine
    engine = Engine("chdb://" + sys.argv[1])
    acc = Accountant(engine, "ana", default_budget=Budget(1e6, 0.5))
    out = threading.Lock()

    def worker(k):
        i = 0
        while True:
            i += 1
            if (k + i) % 2:
                entry = acc.begin_charge(PrivacyCost(0.001), query_hash=f"{k}.{i}", mechanism="laplace").wait()
            else:
                entry = acc.charge(PrivacyCost(0.001), query_hash=f"{k}.{i}", mechanism="laplace")
            with out:  # one write per line: threads never interleave within a line
                sys.stdout.write("DURABLE " + entry.release_id + "\\n")
                sys.stdout.flush()

    for k in range(8):
        threading.Thread(target=worker, args=(k,), daemon=True).start()
    threading.Event().wait()
""")

READER = textwrap.dedent("""
    import json, sys
    from dpch.accounting.accountant import Accountant
    from dpch.accounting.budget import Budget
    from dpch.store.engine import Engine
    engine = Engine("chdb://" + sys.argv[1])
    acc = Accountant(engine, "ana", default_budget=Budget(1e6, 0.5))
    ids = [r[0] for r in engine.query_rows("SELECT toString(release_id) FROM dpch_ledger")]
    print(json.dumps({"ids": ids, "releases": acc.status().releases}))
""")


def test_sigkill_during_group_commits_loses_no_returned_charge(tmp_path):
    store = str(tmp_path / "store")
    child = subprocess.Popen([sys.executable, "-c", CHILD, store], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, env=child_env())
    durable: list[str] = []
    try:
        while len(durable) < 150:
            line = child.stdout.readline()
            assert line.startswith("DURABLE"), (line, child.stderr.read() if child.poll() is not None else "")
            durable.append(line.split()[1])
    finally:
        child.send_signal(signal.SIGKILL)
        rest, _ = child.communicate(timeout=60)  # lines written before the kill, still in the pipe
    assert child.returncode == -signal.SIGKILL
    durable += [line.split()[1] for line in rest.splitlines() if line.startswith("DURABLE")]

    out = subprocess.run([sys.executable, "-c", READER, store], capture_output=True, text=True, env=child_env(),
                         timeout=120)
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    missing = set(durable) - set(data["ids"])
    assert not missing, f"{len(missing)} releases returned as charged are not in the ledger"
    assert len(data["ids"]) == len(set(data["ids"])) >= len(durable)
    assert data["releases"] == len(data["ids"]), "the restarted filter state counts exactly the ledger's rows"
