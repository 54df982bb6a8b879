"""The tripwire's lock records (``dpch_locks``, :class:`dpch.accounting.locks.LockStore`) read back field by
field: a lock's release id, reason and analyst, the latest row winning, an unlock ending it."""

from __future__ import annotations

from dpch.accounting.locks import LockStore
from dpch.store.engine import Engine


def test_a_lock_reads_back_each_of_its_fields(store_dsn, database, keeper):
    engine = Engine(store_dsn, database=database)
    try:
        store = LockStore(engine)
        store.lock("ana", release_id="r-ana", reason="ana's reason")
        store.lock("bob", release_id="r-bob", reason="bob's reason")
        store.lock("bob", release_id="r-bob-2", reason="bob again")  # the latest row wins
        found = {lock.analyst: (lock.release_id, lock.reason) for lock in store.all()}
        assert found == {"ana": ("r-ana", "ana's reason"), "bob": ("r-bob-2", "bob again")}
        got = store.get("ana")
        assert got is not None and (got.analyst, got.release_id, got.reason) == ("ana", "r-ana", "ana's reason")
        store.unlock("ana")
        assert store.get("ana") is None and [lock.analyst for lock in store.all()] == ["bob"]
    finally:
        engine.close()
