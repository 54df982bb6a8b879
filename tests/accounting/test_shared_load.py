"""Loading an analyst from the shared state reads its one Keeper value, not its history (issue 26:
100 k past releases took 15 s and ~113 MiB per process to replay). An analyst whose releases predate
the shared state is bootstrapped from the ledger once, and from then on loads in O(1).

Negative control: the in-process owner loads the same analyst by reading its whole ledger."""

from __future__ import annotations

import pytest

from dpch.accounting.accountant import Accountant, forget_cached_state
from dpch.accounting.admission import InProcessAdmission
from dpch.accounting.budget import Budget
from dpch.accounting.chain import KEEP
from dpch.accounting.ledger import Ledger
from dpch.privacy.cost import PrivacyCost
from dpch.store.engine import Engine


@pytest.fixture
def engine(ch_server, server_db):
    with Engine(ch_server.dsn(server_db)) as engine:
        yield engine


@pytest.fixture
def ledger_reads(monkeypatch):
    """Counts reads of an analyst's ledger history (Ledger.entries)."""
    calls: list[int | None] = []
    real = Ledger.entries

    def counting(self, analyst, limit=None, **kwargs):
        calls.append(limit)
        return real(self, analyst, limit, **kwargs)

    monkeypatch.setattr(Ledger, "entries", counting)
    return calls


def _history(acc: Accountant, n: int) -> None:
    for i in range(n):
        if i % 3:
            acc.charge(PrivacyCost(0.01), dataset="db.t", query_hash=str(i), mechanism="laplace")
        else:
            acc.reserve(PrivacyCost(0.02), dataset="db.t", query_hash=str(i), mechanism="m").settle(PrivacyCost(0.01))


def test_loading_reads_the_shared_value_not_the_history(engine, ledger_reads):
    acc = Accountant(engine, "ana", default_budget=Budget(10.0, 1e-6))
    _history(acc, KEEP + 14)
    forget_cached_state(engine)  # as a process that never saw the analyst
    ledger_reads.clear()
    status = Accountant(engine, "ana", default_budget=Budget(10.0, 1e-6)).status(recent=5)
    assert ledger_reads == []  # the budget, the totals and the latest releases come from the value
    assert status.spent.epsilon == pytest.approx((KEEP + 14) * 0.01) and status.releases == KEEP + 14
    assert [e.query_hash for e in status.recent] == [str(i) for i in range(KEEP + 9, KEEP + 14)]
    # more releases than the state keeps: the ledger is read for them, and only for them
    assert len(Accountant(engine, "ana", default_budget=Budget(10.0, 1e-6)).recent(KEEP + 5)) == KEEP + 5
    assert ledger_reads == [KEEP + 5]


def test_negative_control_the_in_process_owner_replays_the_history(engine, ledger_reads):
    own = InProcessAdmission()
    acc = Accountant(engine, "bob", default_budget=Budget(10.0, 1e-6), admission=own)
    _history(acc, 10)
    forget_cached_state(engine)
    ledger_reads.clear()
    Accountant(engine, "bob", default_budget=Budget(10.0, 1e-6), admission=own).status(recent=5)
    assert ledger_reads == [None]  # every release of the analyst, read to build its state


def test_an_analyst_from_before_the_shared_state_is_bootstrapped_from_the_ledger_once(engine, ledger_reads):
    old = Ledger(engine)
    for i in range(5):  # rows written before any shared state existed for the analyst
        old.charge(analyst="carol", datasets=("db.t",), query_hash=str(i), mechanism="laplace", filter_name="basic",
                   cost=PrivacyCost(0.1))
    acc = Accountant(engine, "carol", default_budget=Budget(1.0, 1e-6))
    acc.charge(PrivacyCost(0.3), query_hash="new", mechanism="laplace")  # bootstraps, then admits
    with pytest.raises(Exception, match="exhausted"):
        acc.charge(PrivacyCost(0.3), query_hash="over", mechanism="laplace")
    forget_cached_state(engine)
    ledger_reads.clear()
    assert Accountant(engine, "carol", default_budget=Budget(1.0, 1e-6)).status().spent.epsilon == pytest.approx(0.8)
    assert ledger_reads == []
