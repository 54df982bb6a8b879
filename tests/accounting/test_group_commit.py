"""Group commit of ledger rows (issue 14, part 2) on the real embedded engine.

- Releases admitted while an INSERT runs share the next one, and each caller returns only once
  its own row is durable.
- A failed INSERT fails every release of its batch with one fixed, data-independent error; they
  stay counted in memory (the safe direction) and a reload gives that budget back.
- Many threads charging one analyst with a shared dataset budget never overspend, and the ledger
  equals the in-memory totals after a reload.
- ``ledger_fsync`` sets (and clears) the table's fsync settings.

Slow writes come from :class:`GatedWriter`: the INSERT waits for the test, then runs in chdb.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace

import pytest

from dpch import Budget, BudgetExceeded
from dpch.accounting.accountant import Accountant, forget_cached_state
from dpch.accounting.commit import GroupCommit
from dpch.accounting.ledger import FSYNC_ENV, Ledger
from dpch.errors import ConfigError, LedgerWriteFailed
from dpch.privacy.cost import PrivacyCost
from dpch.store.engine import Engine
from tests.accounting.gated_writer import DEADLINE, GatedWriter, wait_for

COST = PrivacyCost(0.015625)  # 2**-6: exactly 64 fit in ε = 1, with no rounding at the boundary


@pytest.fixture
def engine(store_dsn, database, keeper):
    e = Engine(store_dsn, database=database)
    yield e
    e.close()


def _durable(engine: Engine, release_id: str) -> int:
    return engine.query_rows(f"SELECT count() FROM {engine.table('dpch_ledger')} "
                             "WHERE release_id = toUUID({r:String})", {"r": release_id})[0][0]


def _rows(engine: Engine) -> int:
    return engine.query_rows(f"SELECT count() FROM {engine.table('dpch_ledger')}")[0][0]


def _charge_all(acc: Accountant, writer: GatedWriter, followers: int) -> list[object]:
    """One charge whose INSERT blocks at the gate, then ``followers`` more queued behind it; opens
    the gate once all are queued. Returns what each call returned or raised, and whether its row
    was durable the moment it returned."""
    results: list[object] = [None] * (1 + followers)

    def one(i: int) -> None:
        try:
            entry = acc.charge(COST, dataset="d.t", query_hash=f"h{i}", mechanism="laplace")
            results[i] = (entry, _durable(acc.engine, entry.release_id))
        except Exception as exc:
            results[i] = exc

    first = threading.Thread(target=one, args=(0,))
    first.start()
    assert writer.entered.wait(DEADLINE)  # the first INSERT is running (held at the gate)
    rest = [threading.Thread(target=one, args=(i,)) for i in range(1, 1 + followers)]
    for t in rest:
        t.start()
    wait_for(lambda: writer.queued == followers, f"{followers} rows queued behind the running INSERT")
    writer.gate.set()
    for t in [first, *rest]:
        t.join(DEADLINE)
        assert not t.is_alive()
    return results


def test_rows_admitted_during_an_insert_share_the_next_one_and_each_caller_waits_for_its_own(engine):
    acc = Accountant(engine, "ana", default_budget=Budget(10.0, 1e-6))
    acc.ledger.writer = writer = GatedWriter()
    results = _charge_all(acc, writer, followers=8)
    assert writer.batches == [1, 8], "the 8 rows queued during the first INSERT are written as one"
    for result in results:
        assert isinstance(result, tuple), result
        _entry, durable = result
        assert durable == 1, "charge() returned before its row was in ClickHouse"
    assert _rows(engine) == 9
    assert acc.status().releases == 9


def test_group_size_one_writes_one_insert_per_release(engine):
    """The pre-group-commit behaviour, kept for the benchmark (``max_batch = 1``)."""
    acc = Accountant(engine, "ana", default_budget=Budget(10.0, 1e-6))
    acc.ledger.writer = writer = GatedWriter()
    writer.max_batch = 1
    results = _charge_all(acc, writer, followers=5)
    assert writer.batches == [1] * 6
    assert all(isinstance(r, tuple) and r[1] == 1 for r in results)
    assert _rows(engine) == 6


def test_a_failed_insert_fails_every_release_of_its_batch_and_they_stay_counted(engine):
    acc = Accountant(engine, "ana", default_budget=Budget(10.0, 1e-6))
    acc.set_budget(Budget(1.0, 1e-6), dataset="d.t")
    acc.ledger.writer = writer = GatedWriter(fail=True)
    results = _charge_all(acc, writer, followers=4)
    assert writer.batches == [1, 4]
    for result in results:
        assert isinstance(result, LedgerWriteFailed), result
        # one fixed sentence, nothing of ClickHouse's text, nothing chained
        assert str(result) == str(LedgerWriteFailed()) and "dpch_ledger_missing" not in str(result)
        assert result.__cause__ is None and result.__suppress_context__
    assert _rows(engine) == 0
    # counted in memory: no admission can spend the budget these releases might have used
    status = acc.status()
    assert status.releases == 5 and status.spent.epsilon == 5 * COST.epsilon
    assert status.datasets[0].spent.epsilon == 5 * COST.epsilon
    # a reload (as after a restart) reads the ledger, which has none of them
    forget_cached_state(engine)
    fresh = Accountant(engine, "ana", default_budget=Budget(10.0, 1e-6))
    assert fresh.status().releases == 0
    fresh.charge(COST, dataset="d.t", query_hash="h", mechanism="laplace")  # the store's own writer
    assert _rows(engine) == 1


@pytest.mark.parametrize("filter_name", ["basic", "zcdp_bm"])
def test_many_threads_on_one_analyst_and_dataset_budget_never_overspend(engine, filter_name):
    """16 threads, 160 attempts on a dataset budget that fits exactly 64 (half through begin_charge,
    whose callers wait later); the analyst's budget is larger. Exactly 64 are admitted, each with one
    durable row, and the ledger read back after a reload gives the same totals as memory."""
    acc = Accountant(engine, "ana", default_budget=Budget(5.0, 1e-6), filter=filter_name)
    acc.set_budget(Budget(1.0, 1e-6), dataset="d.t")
    cost = COST if filter_name == "basic" else PrivacyCost(COST.epsilon, 0.0, COST.epsilon ** 2 / 2)
    start = threading.Barrier(16)

    def worker(k: int) -> tuple[int, int]:
        admitted = refused = 0
        start.wait(DEADLINE)
        for i in range(10):
            try:
                if (k + i) % 2:
                    acc.begin_charge(cost, dataset="d.t", query_hash=f"{k}.{i}", mechanism="laplace").wait()
                else:
                    acc.charge(cost, dataset="d.t", query_hash=f"{k}.{i}", mechanism="laplace")
                admitted += 1
            except BudgetExceeded:
                refused += 1
        return admitted, refused

    with ThreadPoolExecutor(16) as pool:
        outcomes = list(pool.map(worker, range(16)))
    admitted = sum(a for a, _ in outcomes)
    before = acc.status()
    if filter_name == "basic":
        assert admitted == 64, f"exactly 64 releases of ε 2^-6 fit in ε 1; admitted {admitted}"
    else:
        assert 0 < admitted < 160  # zCDP's ε(ρ, δ) bound binds somewhere in between
    assert sum(r for _, r in outcomes) == 160 - admitted
    assert _rows(engine) == admitted == before.releases
    ds = before.datasets[0]
    assert ds.dataset == "d.t" and ds.releases == admitted
    if filter_name == "basic":
        assert ds.spent.epsilon == 1.0 and ds.remaining.epsilon == 0.0
    # the ledger, read back as after a restart, holds exactly what memory counted
    forget_cached_state(engine)
    after = Accountant(engine, "ana", default_budget=Budget(5.0, 1e-6), filter=filter_name).status()
    assert after.releases == before.releases
    for got, want in [(after, before), (after.datasets[0], before.datasets[0])]:
        assert (got.spent, got.remaining, got.reserved) == (want.spent, want.remaining, want.reserved)
    with pytest.raises(BudgetExceeded):
        acc.charge(cost, dataset="d.t", query_hash="one more", mechanism="laplace")


def _fsync_settings(engine: Engine) -> str:
    return engine.query_rows("SELECT engine_full FROM system.tables WHERE database = {d:String} "
                             "AND name = 'dpch_ledger'", {"d": engine.database})[0][0]


def test_ledger_fsync_sets_the_tables_fsync_settings_and_none_keeps_them(engine, monkeypatch):
    monkeypatch.delenv(FSYNC_ENV, raising=False)
    assert not Ledger(engine).fsync
    acc = Accountant(engine, "ana", default_budget=Budget(1.0, 1e-6), ledger_fsync=True)
    assert acc.ledger.fsync
    assert "fsync_after_insert = 1" in _fsync_settings(engine) and "fsync_part_directory = 1" in _fsync_settings(engine)
    acc.charge(COST, query_hash="h", mechanism="laplace")
    assert _rows(engine) == 1
    assert Ledger(engine).fsync, "no choice given: the table keeps its setting"
    assert not Ledger(engine, fsync=False).fsync
    monkeypatch.setenv(FSYNC_ENV, "1")
    assert Ledger(engine).fsync
    monkeypatch.setenv(FSYNC_ENV, "off")
    assert not Ledger(engine).fsync
    monkeypatch.setenv(FSYNC_ENV, "maybe")
    with pytest.raises(ConfigError, match=FSYNC_ENV):
        Ledger(engine)


def test_the_store_has_one_writer_and_a_lone_release_needs_no_thread(engine):
    acc = Accountant(engine, "ana", default_budget=Budget(1.0, 1e-6))
    assert acc.ledger.writer is engine.shared.get(GroupCommit) is Accountant(engine, "bo").ledger.writer
    threads = threading.active_count()
    inserts = acc.ledger.writer.inserts
    acc.charge(COST, query_hash="h", mechanism="laplace")
    assert acc.ledger.writer.inserts == inserts + 1 and threading.active_count() == threads


def test_a_value_that_cannot_be_written_fails_its_own_caller_only(engine):
    """Rows are rendered in the caller's thread, before they join a batch: a non-finite cost (which
    no filter admits) is refused to its caller and cannot fail other releases' INSERT."""
    acc = Accountant(engine, "ana", default_budget=Budget(10.0, 1e-6))
    entry = acc.ledger.new_entry("charged", analyst="ana", datasets=(), query_hash="h", mechanism="laplace",
                                 filter_name="basic", cost=PrivacyCost(0.1))
    bad = replace(entry, cost=replace(entry.cost, epsilon=float("inf")))
    queued = acc.ledger.writer.queued
    with pytest.raises(ValueError, match="finite"):
        acc.ledger.write(bad, 1)
    assert acc.ledger.writer.queued == queued and _rows(engine) == 0
    acc.ledger.write(entry, 1).wait()
    assert _rows(engine) == 1


class _InterruptedOnce(GatedWriter):
    """The first INSERT is interrupted (KeyboardInterrupt, a BaseException: Ctrl-C arriving while it
    runs) after the gate opens; every later one runs in chdb."""

    def __init__(self) -> None:
        super().__init__()
        self.interrupted = False

    def insert(self, engine: Engine, sql: str) -> None:
        if not self.interrupted:
            self.interrupted = True
            self.entered.set()
            assert self.gate.wait(DEADLINE), "the test never opened the gate"
            raise KeyboardInterrupt
        super().insert(engine, sql)


def _pending(engine: Engine, x: int):
    from dpch.accounting.commit import PendingWrite

    return PendingWrite(engine, engine.table("gc"), [("x", "UInt8")], [x])


@pytest.mark.parametrize("background", [False, True])
def test_an_interrupted_insert_fails_its_rows_reraises_and_strands_nothing(engine, background):
    """A BaseException during an INSERT (``_write``): every row of its batch fails (its waiter wakes
    with LedgerWriteFailed, reason KeyboardInterrupt), the interrupt is re-raised in the writing thread
    (the caller's for ``background=False``; for the flusher thread, its task), and a row queued behind it
    is still written by the next flusher: the queue is never stranded with no flusher."""
    engine.command(f"CREATE TABLE {engine.table('gc')} (x UInt8) ENGINE = MergeTree ORDER BY x")
    writer = _InterruptedOnce()
    writer.gate.set()
    first = _pending(engine, 1)
    if background:
        writer.gate.clear()
        writer.submit(first, background=True)
        assert writer.entered.wait(DEADLINE)
        behind = writer.submit(_pending(engine, 2))  # queued while the flusher thread is in the INSERT
        writer.gate.set()
    else:
        with pytest.raises(KeyboardInterrupt):
            writer.submit(first)
        behind = writer.submit(_pending(engine, 2))
    with pytest.raises(LedgerWriteFailed):
        first.wait()
    assert first.reason == "KeyboardInterrupt"
    wait_for(lambda: behind.done, "the row queued behind the interrupted INSERT")  # a stranded queue: never
    behind.wait()  # durable: raises if it failed
    assert engine.query_rows(f"SELECT x FROM {engine.table('gc')} ORDER BY x") == [(2,)]
    assert writer.queued == 0 and writer.inserts == 2 and writer.rows == 1
