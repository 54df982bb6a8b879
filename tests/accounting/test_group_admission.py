"""Group admission (issue 26): changes of one analyst queued in a process while its shared-state write
is in flight are decided together and written as one value, so a 20-panel dashboard costs about one
Keeper write, not 20 (nor 20 lost races). The first write is held on a gate while the other 19
changes queue (observed, not timed); then they go in one write. Negative control: one change per
write (``max_batch = 1``) takes 20 writes for the same burst."""

from __future__ import annotations

import threading

import pytest

from dpch.accounting.accountant import Accountant
from dpch.accounting.budget import Budget
from dpch.privacy.cost import PrivacyCost
from dpch.store.engine import Engine
from dpch.store.keeper import VersionedMap
from tests.accounting.gated_writer import DEADLINE, wait_for

PANELS = 20


@pytest.mark.parametrize("max_batch", [256, 1], ids=["grouped", "negative-control-one-per-write"])
def test_a_dashboard_burst_is_two_writes(ch_server, server_db, monkeypatch, max_batch):
    with Engine(ch_server.dsn(server_db)) as engine:
        acc = Accountant(engine, "dash", default_budget=Budget(10.0, 1e-6))
        acc.charge(PrivacyCost(0.1), query_hash="earlier", mechanism="laplace")  # the analyst's state exists
        admission = acc.admission
        monkeypatch.setattr(admission, "max_batch", max_batch)
        gate, entered = threading.Event(), threading.Event()
        real = VersionedMap.advance
        held: list[int] = []

        def advance(self, key, version, value, token):
            if not held:
                held.append(version)
                entered.set()
                assert gate.wait(DEADLINE), "the test never opened the gate"
            return real(self, key, version, value, token)

        monkeypatch.setattr(VersionedMap, "advance", advance)
        before = admission.committed
        errors: list[BaseException] = []

        def panel(i: int) -> None:
            try:
                acc.charge(PrivacyCost(0.1), query_hash=f"panel{i}", mechanism="laplace")
            except BaseException as exc:  # the assertion below names it
                errors.append(exc)

        threads = [threading.Thread(target=panel, args=(i,)) for i in range(PANELS)]
        threads[0].start()
        assert entered.wait(DEADLINE)  # the first panel's write is in flight
        for t in threads[1:]:
            t.start()
        wait_for(lambda: admission.queued("dash") == PANELS - 1, "the other panels to queue")
        gate.set()
        for t in threads:
            t.join(DEADLINE)
        assert not errors, errors
        writes = admission.committed - before
        assert writes == (2 if max_batch > 1 else PANELS), writes
        assert acc.status().spent.epsilon == pytest.approx((PANELS + 1) * 0.1)
