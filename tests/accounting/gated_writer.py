"""A group-commit writer whose INSERTs wait for the test: a slow ledger write on demand.

The database stays real: once opened, the gate runs the same INSERT through chdb; a failing gate
sends it to a table that does not exist, so ClickHouse itself refuses it."""

from __future__ import annotations

import threading

from dpch.accounting.commit import GroupCommit
from dpch.store.engine import Engine

#: generous bound on any wait in these tests (a loaded 2-core machine); never a sleep
DEADLINE = 60.0


class GatedWriter(GroupCommit):
    """Each INSERT announces itself (``entered``), waits for ``gate``, runs, then sets ``returned``.

    ``fail``: the INSERT goes to a missing table (a real ClickHouse error). ``batches`` records the
    number of rows of every INSERT, in order."""

    def __init__(self, *, fail: bool = False) -> None:
        super().__init__()
        self.fail = fail
        self.gate = threading.Event()
        self.entered = threading.Event()
        self.returned = threading.Event()
        self.batches: list[int] = []

    def insert(self, engine: Engine, sql: str) -> None:
        self.entered.set()
        assert self.gate.wait(DEADLINE), "the test never opened the gate"
        try:
            self.batches.append(sql.count("), (") + 1)
            if self.fail:
                engine.command(sql.replace("`dpch_ledger`", "`dpch_ledger_missing`", 1))
            else:
                super().insert(engine, sql)
        finally:
            self.returned.set()


def wait_for(condition, what: str) -> None:
    """Polls ``condition`` until true (generous deadline, no fixed sleep in the logic)."""
    done = threading.Event()
    for _ in range(int(DEADLINE * 1000)):
        if condition():
            return
        done.wait(0.001)
    raise AssertionError(f"timed out waiting for {what}")
