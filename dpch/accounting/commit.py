"""Group commit: ledger rows of releases admitted close together share one INSERT.

A release's charge must be durable (ClickHouse has the row) before its noise is drawn
(docs/design.md rule 2), and one ledger INSERT costs about a millisecond whether it carries one row
or a hundred. So rows are queued, and whoever flushes takes every row queued so far and writes them
as ONE literal ``INSERT … VALUES`` statement (:func:`dpch.store.quoting.insert_statement`; one part,
all rows or none). Each caller still waits for the INSERT that carries its own row
(:meth:`PendingWrite.wait`) before it draws noise. No timer: a batch is simply what queued up while
the previous INSERT ran, so a lone release is written at once, and under load the batches grow
by themselves.

Who flushes (one flusher at a time, :class:`GroupCommit`):

- an idle writer and a caller that will wait right away (``background=False``): the caller writes
  its batch itself (no thread hop), then hands what queued meanwhile to the flusher thread;
- a caller that wants its row written *while it does something else* (``background=True``, the
  overlap of the aggregate with the ledger write) hands it to the flusher thread;
- the flusher thread (one per store, long-lived) drains the queue, batch after batch, until it is
  empty, and then waits for the next hand-off.

A failed INSERT fails every row of its batch: each waiter gets :class:`LedgerWriteFailed`, one
fixed, data-independent sentence (the rows hold only costs and names, and the caller has drawn no
noise yet). The accountant counted those releases in memory before queueing them, and leaves them
counted: the safe direction (a restart re-reads the ledger and gives that budget back).

``max_batch = 1`` turns grouping off (one INSERT per row, the pre-group-commit behaviour; the
benchmark compares the two).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from dpch.errors import LedgerWriteFailed
from dpch.store.engine import Engine
from dpch.store.quoting import insert_statement, values_tuple


class PendingWrite:
    """One ledger row queued for a group INSERT; :meth:`wait` returns once ClickHouse has it."""

    def __init__(self, engine: Engine, table: str, columns: Sequence[tuple[str, str]], row: Sequence[Any]) -> None:
        self.engine = engine
        self.table = table
        self.columns = columns
        #: rendered here, in the caller's thread: a value that cannot be written fails its own
        #: caller (ValueError), never the other releases of a batch
        self.values = values_tuple(columns, row)
        self._done = threading.Event()
        self._failed = False
        self._callbacks: list[Callable[[bool], None]] = []
        self._callback_lock = threading.Lock()
        #: the failure's class name (internal, for the data owner; never shown to an analyst)
        self.reason = ""

    @property
    def done(self) -> bool:
        """Whether the INSERT carrying this row has returned (successfully or not)."""
        return self._done.is_set()

    def wait(self) -> None:
        """Blocks until the row's INSERT returned; raises :class:`LedgerWriteFailed` if it failed."""
        self._done.wait()
        if self._failed:
            error = LedgerWriteFailed()
            error.reason = self.reason
            raise error from None  # never chained: the caller may be handling an error that quotes data

    def add_done_callback(self, callback: Callable[[bool], None]) -> None:
        """Calls ``callback(durable)`` once the row's INSERT has returned (at once if it has)."""
        with self._callback_lock:
            if not self._done.is_set():
                self._callbacks.append(callback)
                return
        callback(not self._failed)

    def _finish(self, error: BaseException | None) -> None:
        if error is not None:
            self._failed = True
            self.reason = type(error).__name__
        with self._callback_lock:
            self._done.set()
            callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            callback(error is None)


class GroupCommit:
    """The store's ledger writer (one per opening of a store: ``engine.shared.get(GroupCommit)``).

    :meth:`submit` queues a row and makes sure a flusher is running; rows for different tables
    (the ledgers of different databases on one store) go in separate INSERTs of the same batch."""

    #: most rows in one INSERT (a bound on one statement's size; 1 = no grouping)
    max_batch: int = 1024

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._queue: list[PendingWrite] = []
        # invariant: the queue is non-empty only while a flusher is running (or about to)
        self._flushing = False
        # one long-lived flusher thread, started on first use: handing a batch to it costs far less
        # than starting a thread per release (~2 ms on a loaded 2-core machine). Its thread is joined
        # at interpreter exit (concurrent.futures does so), so a write in flight completes before
        # ClickHouse is shut down
        self._flusher = ThreadPoolExecutor(max_workers=1, thread_name_prefix="dpch-ledger-commit")
        #: INSERT statements and rows written so far (the benchmark's group sizes)
        self.inserts = 0
        self.rows = 0

    def submit(self, pending: PendingWrite, *, background: bool = False) -> PendingWrite:
        """Queues ``pending``; written by the running flusher, else by this thread
        (``background=False``) or the flusher thread (``background=True``)."""
        with self._lock:
            self._queue.append(pending)
            if self._flushing:
                return pending  # the running flusher takes it in its next batch
            self._flushing = True
        if background:
            self._start_flusher()
            return pending
        try:
            self._write(self._take())  # this caller's row is first: the queue was empty
        finally:
            self._hand_off()  # rows queued while this thread wrote are not this caller's to wait for
        return pending

    @property
    def queued(self) -> int:
        """Rows waiting for the next INSERT (not counting one being written)."""
        with self._lock:
            return len(self._queue)

    def insert(self, engine: Engine, sql: str) -> None:
        """Runs one INSERT statement (a seam for tests that delay the write)."""
        engine.command(sql)

    # -- flushing ------------------------------------------------------------------------------------

    def _take(self) -> list[PendingWrite]:
        with self._lock:
            batch = self._queue[:self.max_batch]
            del self._queue[:len(batch)]
            return batch

    def _start_flusher(self) -> None:
        self._flusher.submit(self._drain)

    def _hand_off(self) -> None:
        """Ends this thread's turn as the flusher: idle if nothing is queued, else the flusher thread's."""
        with self._lock:
            if not self._queue:
                self._flushing = False
                return
        self._start_flusher()

    def _drain(self) -> None:
        try:
            while True:
                with self._lock:
                    if not self._queue:
                        self._flushing = False
                        return
                self._write(self._take())
        except BaseException:  # only a BaseException escapes _write; the queue must not be stranded
            self._hand_off()
            raise

    def _write(self, batch: list[PendingWrite]) -> None:
        by_table: dict[str, list[PendingWrite]] = {}
        for pending in batch:
            by_table.setdefault(pending.table, []).append(pending)
        fatal: BaseException | None = None
        for table, rows in by_table.items():
            error: BaseException | None = None
            try:
                engine = rows[0].engine
                self.insert(engine, insert_statement(table, rows[0].columns, [p.values for p in rows],
                                                     engine.write_settings()))
            except BaseException as exc:  # every waiter must wake, whatever went wrong
                error = exc
                if not isinstance(exc, Exception):
                    fatal = fatal or exc
            with self._lock:
                self.inserts += 1
                self.rows += len(rows) if error is None else 0
            for pending in rows:
                pending._finish(error)
        if fatal is not None:  # KeyboardInterrupt and the like, after every waiter was woken
            raise fatal
