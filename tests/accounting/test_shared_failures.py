"""Failures of processes that share one budget through ClickHouse Keeper (issue 26; docs/TESTING.md
"Many processes"). Every dpch process here is a real process on the test HTTP endpoint (one chdb
store, ClickHouse's test Keeper); each says what it reached on stdout and waits for the test's word
on stdin, and a signal is sent only after the child said it is ready. Each test has a negative
control: the same steps with what processes did before (each its own state), or with the fence taken
away, go wrong in the way the test would see.

- SIGSTOP a process mid-admission (its decision made, its write not yet sent), spend elsewhere,
  SIGCONT: its write is refused and it decides again (refused); unfenced: it overspends.
- kill -9 between the admission and the ledger row: the row is only in the shared state; a gateway
  starting up (the reconciler) writes it; before that the ledger misses a counted release.
- a skewed clock across a period boundary: a process whose clock is behind cannot admit into a day
  that has ended elsewhere (the shared clock is monotone); with its own state it spends a second
  day's budget.
- the owner's changes and a trip reach a process with a state loaded before them at its next
  admission (gateways and the CLI: tests/server/test_gateways_share_budget.py).
"""

from __future__ import annotations

import json
import signal
import textwrap
from datetime import UTC, datetime

import pytest

from dpch.accounting.accountant import Accountant
from dpch.accounting.budget import Budget, Renewal
from dpch.accounting.ledger import Ledger
from dpch.privacy.cost import PrivacyCost
from dpch.store.engine import Engine
from tests.multiproc import Child

PAUSING = textwrap.dedent("""
    import json, sys
    from dpch.accounting.accountant import Accountant
    from dpch.errors import BudgetExceeded
    from dpch.privacy.cost import PrivacyCost
    from dpch.store.engine import Engine
    from dpch.store.keeper import VersionedMap
    from dpch.store.quoting import quote_string

    spec = json.loads(sys.argv[1])
    real = VersionedMap.advance
    paused = []

    def advance(self, key, version, value, token):
        if not paused:  # the first write: the decision is made, the write not yet sent
            paused.append(version)
            print("DECIDED", version, flush=True)
            assert sys.stdin.readline().strip() == "CONTINUE"
        if spec["unfenced"]:  # negative control: a write that does not check the version (a lease's)
            self.engine.command(f"ALTER TABLE {self.table} UPDATE version = version + 1, value = {quote_string(value)}"
                                f" WHERE key = {quote_string(key)} SETTINGS keeper_map_strict_mode = 0")
            return True
        return real(self, key, version, value, token)

    VersionedMap.advance = advance
    acc = Accountant(Engine(spec["dsn"]), "ana")
    acc.status()
    print("READY", flush=True)
    assert sys.stdin.readline().strip() == "GO"
    try:
        acc.charge(PrivacyCost(0.6), query_hash="a", mechanism="laplace")
        out = {"admitted": True}
    except BudgetExceeded as exc:
        out = {"admitted": False, "error": str(exc)}
    print("RESULT" + json.dumps(out), flush=True)
""")


@pytest.mark.parametrize("unfenced", [False, True], ids=["fenced", "negative-control-unfenced"])
def test_a_process_stopped_mid_admission_cannot_commit_from_stale_state(ch_server, server_db, unfenced):
    dsn = ch_server.dsn(server_db)
    with Engine(dsn) as engine:
        here = Accountant(engine, "ana")
        here.set_budget(Budget(1.0, 1e-6))
        child = Child(PAUSING, json.dumps({"dsn": dsn, "unfenced": unfenced}))
        try:
            child.expect("READY")
            child.send("GO")
            child.expect("DECIDED")  # it read the state (nothing spent) and admitted 0.6 in memory
            child.process.send_signal(signal.SIGSTOP)
            child.send("CONTINUE")  # waits in the pipe until the process runs again
            here.charge(PrivacyCost(0.6), query_hash="b", mechanism="laplace")  # spent elsewhere meanwhile
            child.process.send_signal(signal.SIGCONT)
            result = child.result()
        finally:
            child.kill()
        spent = sum(e.counted.epsilon for e in Ledger(engine).entries("ana"))
    if unfenced:  # a write that does not check the version commits from the stale state: 1.2 of 1
        assert result["admitted"] and spent == pytest.approx(1.2)
    else:
        assert not result["admitted"], result
        assert "exhausted" in result["error"]
        assert spent == pytest.approx(0.6)


KILLED = textwrap.dedent("""
    import json, sys
    from dpch.accounting.accountant import Accountant
    from dpch.privacy.cost import PrivacyCost
    from dpch.store.engine import Engine
    from tests.accounting.gated_writer import GatedWriter

    acc = Accountant(Engine(sys.argv[1]), "ana")
    acc.ledger.writer = writer = GatedWriter()  # its INSERT waits for a gate nobody opens
    pending = acc.begin_charge(PrivacyCost(0.25), query_hash="q", mechanism="laplace")
    assert writer.entered.wait(120)  # admitted in Keeper; the ledger INSERT is about to be sent
    print("ADMITTED", pending.release_id, flush=True)
    sys.stdin.readline()
""")

GATEWAY = textwrap.dedent("""
    import json, sys
    from dpch.server import ServerConfig, make_server

    spec = json.loads(sys.argv[1])
    server = make_server(ServerConfig.from_mapping(spec), host="127.0.0.1", port=0)
    server.start()
    print("READY", server.port, flush=True)
    sys.stdin.readline()
    server.stop()
""")


def test_kill_between_admission_and_ledger_row_is_restored_by_the_reconciler(ch_server, server_db):
    dsn = ch_server.dsn(server_db)
    with Engine(dsn) as engine:
        Accountant(engine, "ana").set_budget(Budget(1.0, 1e-6))
        child = Child(KILLED, dsn)
        try:
            release_id = child.expect("ADMITTED").split()[1]
            child.process.send_signal(signal.SIGKILL)
            child.process.wait(timeout=60)
        finally:
            child.kill()
        # without the reconciler: the shared state counts the release, the ledger (the audit log) misses it
        assert release_id not in {e.release_id for e in Ledger(engine).entries("ana")}
        assert Accountant(engine, "ana").status().spent.epsilon == 0.25
        gateway = Child(GATEWAY, json.dumps({"server": {"dsn": dsn, "database": server_db, "access_log": "",
                                                        "reconcile_grace": 0},
                                             "users": {"ana": {"password": "pw"}}}))
        try:
            gateway.expect("READY")  # the reconciler ran at start-up, before the gateway answered
        finally:
            gateway.send("STOP")
            gateway.kill()
        entries = Ledger(engine).entries("ana")
        assert [(e.release_id, e.status, e.cost.epsilon) for e in entries] == [(release_id, "charged", 0.25)]
        status = Accountant(engine, "ana").status()
        assert status.spent.epsilon == 0.25 and status.releases == 1


SKEWED = textwrap.dedent("""
    import json, sys
    from datetime import datetime
    from dpch.accounting.accountant import Accountant
    from dpch.accounting.admission import InProcessAdmission
    from dpch.errors import BudgetExceeded
    from dpch.privacy.cost import PrivacyCost
    from dpch.store.engine import Engine

    spec = json.loads(sys.argv[1])
    behind = datetime.fromisoformat(spec["clock"])  # this machine's clock is behind the other's
    acc = Accountant(Engine(spec["dsn"]), "ana", clock=lambda: behind,
                     admission=InProcessAdmission() if spec["own_state"] else None)
    acc.status()
    print("READY", flush=True)
    assert sys.stdin.readline().strip() == "GO"
    try:
        entry = acc.charge(PrivacyCost(0.5), query_hash="late", mechanism="laplace")
        out = {"admitted": True, "period": entry.period}
    except BudgetExceeded as exc:
        out = {"admitted": False, "error": str(exc)}
    print("RESULT" + json.dumps(out), flush=True)
""")


@pytest.mark.parametrize("own_state", [False, True], ids=["shared", "negative-control-own-state"])
def test_a_skewed_clock_cannot_reopen_a_day_that_ended_elsewhere(ch_server, server_db, own_state):
    """Daily budget ε 1. The other process's clock says 00:00:01 on the 25th and spends the whole day;
    this one's says 23:59:59 on the 24th, where ε 1 is left. Shared: the admission clock is the
    latest admission's time, so its release would count on the 25th — refused. Its own state and
    clock: admitted on the 24th, a second day's budget spent within two seconds."""
    dsn = ch_server.dsn(server_db)
    ahead = datetime(2026, 11, 25, 0, 0, 1, tzinfo=UTC)
    with Engine(dsn) as engine:
        Accountant(engine, "ana").set_budget(Budget(1.0, 1e-6), renewal=Renewal("daily"))
        child = Child(SKEWED, json.dumps({"dsn": dsn, "clock": "2026-11-24T23:59:59+00:00", "own_state": own_state}))
        try:
            child.expect("READY")
            Accountant(engine, "ana", clock=lambda: ahead).charge(PrivacyCost(1.0), query_hash="early",
                                                                   mechanism="laplace")
            child.send("GO")
            result = child.result()
        finally:
            child.kill()
        periods = sorted(e.period for e in Ledger(engine).entries("ana"))
    if own_state:
        assert result["admitted"] and result["period"] == "2026-11-24" and periods == ["2026-11-24", "2026-11-25"]
    else:
        assert not result["admitted"] and "2026-11-25" in result["error"], result
        assert periods == ["2026-11-25"]
