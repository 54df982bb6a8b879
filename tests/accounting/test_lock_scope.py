"""Per-analyst locks are held only where the filter state needs them (issue 14, part 4):

- while one release's ledger INSERT is in flight, the same analyst's admission, status and next
  charge go ahead (the lock covers decision + in-memory count, not the write);
- while one analyst's state is being loaded from the ledger, another analyst is served.

Slow steps are gated on events the test opens (real chdb underneath); no timing."""

from __future__ import annotations

import threading

from dpch import Budget
from dpch.accounting.accountant import Accountant, forget_cached_state
from dpch.privacy.cost import PrivacyCost
from dpch.store.engine import Engine
from tests.accounting.gated_writer import DEADLINE, GatedWriter, wait_for

COST = PrivacyCost(0.125)


def test_the_analysts_lock_is_not_held_while_its_row_is_written(store_dsn, database, keeper):
    engine = Engine(store_dsn, database=database)
    try:
        acc = Accountant(engine, "ana", default_budget=Budget(1.0, 1e-6))
        acc.ledger.writer = writer = GatedWriter()
        first = threading.Thread(target=acc.charge, args=(COST,), kwargs={"query_hash": "a", "mechanism": "laplace"})
        first.start()
        assert writer.entered.wait(DEADLINE)  # its INSERT is in flight, held at the gate
        # the same analyst is admitted meanwhile: the in-flight release already counts
        status = acc.status()
        assert status.releases == 1 and status.spent.epsilon == 0.125
        pending = acc.begin_charge(COST, query_hash="b", mechanism="laplace")
        wait_for(lambda: writer.queued == 1, "the second row queued behind the first INSERT")
        assert not pending.durable and acc.status().releases == 2
        writer.gate.set()
        first.join(DEADLINE)
        assert pending.wait().release_id and writer.batches == [1, 1]
    finally:
        engine.close()


def test_loading_one_analysts_state_does_not_hold_up_another(store_dsn, database, keeper):
    engine = Engine(store_dsn, database=database)
    try:
        Accountant(engine, "slow", default_budget=Budget(1.0, 1e-6)).charge(COST, query_hash="h", mechanism="laplace")
        forget_cached_state(engine)  # "slow" is loaded from the ledger on its next use
        slow = Accountant(engine, "slow", default_budget=Budget(1.0, 1e-6))
        entered, gate = threading.Event(), threading.Event()
        real_entries = slow.ledger.entries

        def gated_entries(analyst: str):
            entered.set()
            assert gate.wait(DEADLINE)
            return real_entries(analyst)

        slow.ledger.entries = gated_entries  # type: ignore[method-assign]
        result: dict = {}
        loader = threading.Thread(target=lambda: result.setdefault("status", slow.status()))
        loader.start()
        assert entered.wait(DEADLINE)  # "slow" is loading, held at the gate
        fast = Accountant(engine, "fast", default_budget=Budget(1.0, 1e-6))
        fast.charge(COST, query_hash="h", mechanism="laplace")
        assert fast.status().releases == 1 and loader.is_alive()
        gate.set()
        loader.join(DEADLINE)
        assert result["status"].releases == 1
    finally:
        engine.close()
