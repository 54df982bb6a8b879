"""The state a store's sessions share in one process (Engine.shared): the accountant's
per-analyst filter states live there, not in a module-level dict."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from dpch.accounting.accountant import Accountant, AnalystStates, forget_cached_state
from dpch.accounting.budget import Budget
from dpch.accounting.ledger import Ledger
from dpch.errors import BudgetExceeded
from dpch.privacy.cost import PrivacyCost
from dpch.store.engine import Engine

ROOT = Path(__file__).resolve().parents[2]


def test_engines_on_one_store_share_the_analysts_states(store_dsn, database, keeper):
    first, second = Engine(store_dsn, database=database), Engine(store_dsn, database=database)
    try:
        assert first.shared is second.shared is keeper.shared
        assert first.shared.get(AnalystStates) is second.shared.get(AnalystStates)
        a = Accountant(first, "ana", default_budget=Budget(1.0, 1e-6))
        b = Accountant(second, "ana", default_budget=Budget(1.0, 1e-6))
        a.charge(PrivacyCost(0.25), dataset=f"{database}.t", query_hash="h", mechanism="laplace")
        # b sees a's charge at once: one admission state per analyst and store, so two sessions
        # cannot jointly overspend
        assert b.status().spent.epsilon == 0.25 and b.status().releases == 1
        # a row written behind the cache's back (as another process would) is seen only after
        # the cache is dropped: what forget_cached_state is for
        Ledger(first).charge(analyst="ana", datasets=(f"{database}.t",), query_hash="h", mechanism="laplace",
                             filter_name="basic", cost=PrivacyCost(0.5))
        assert b.status().spent.epsilon == 0.25
        forget_cached_state(first)
        assert b.status().spent.epsilon == 0.75 and b.status().releases == 2
    finally:
        first.close()
        second.close()


def test_a_reopened_store_starts_from_the_ledger(tmp_path):
    """When the store's last Engine closes its shared state goes with it; reopening re-reads
    the ledger. A fresh process: the test session's store stays open."""
    script = textwrap.dedent(f"""
        from dpch.accounting.accountant import AnalystStates
        from dpch.store.engine import Engine

        dsn = "chdb://{tmp_path / 's'}"
        with Engine(dsn) as engine:
            states = engine.shared.get(AnalystStates)
            with Engine(dsn) as other:
                assert other.shared.get(AnalystStates) is states  # open twice: shared
        with Engine(dsn) as engine:
            assert engine.shared.get(AnalystStates) is not states  # closed, reopened: fresh
        print("ok")
    """)
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().endswith("ok")


def test_connections_to_one_server_share_one_state(ch_server, server_db, monkeypatch):
    """Issue 26's one-process hole: two connections of one process to one server each kept an
    analyst's state, so together they could spend two budgets. Now every Engine on the server shares
    one SharedState (whatever database it names), and so one admission state per analyst — also for
    a server without Keeper, where the process is the ledger's single owner."""
    from dpch.accounting.admission import OwnerAdmission, admission_for

    monkeypatch.setenv("DPCH_ADMISSION", "owner")
    first, second = Engine(ch_server.dsn(server_db)), Engine(ch_server.dsn(server_db))
    other_db = Engine(ch_server.dsn(server_db + "_b"))
    try:
        assert first.shared is second.shared is other_db.shared
        assert isinstance(admission_for(first), OwnerAdmission) and admission_for(first) is admission_for(second)
        a = Accountant(first, "ana", default_budget=Budget(1.0, 1e-6))
        b = Accountant(second, "ana", default_budget=Budget(1.0, 1e-6))
        for _ in range(3):
            a.charge(PrivacyCost(0.25), query_hash="h", mechanism="laplace")
        b.charge(PrivacyCost(0.25), query_hash="h", mechanism="laplace")
        with pytest.raises(BudgetExceeded):  # the fifth charge, whichever connection asks
            a.charge(PrivacyCost(0.25), query_hash="h", mechanism="laplace")
        assert b.status().spent.epsilon == 1.0
    finally:
        other_db.command(f"DROP DATABASE IF EXISTS `{server_db}_b`")
        for engine in (first, second, other_db):
            engine.close()
