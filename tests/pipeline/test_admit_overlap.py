"""The aggregate overlaps the ledger write (issue 14, part 3), and the order that matters still holds.

A release is admitted and counted, its ledger row is being written, and the emitted aggregate runs
meanwhile; but no noise is drawn, and no failure of the aggregate is acted on (the tripwire), before
the INSERT has returned (docs/design.md rules 2 and 5). If the INSERT fails, the release fails with
the ledger's fixed error whatever the aggregate did: no noise, no trip, no lock.

The ledger write is slowed by :class:`GatedWriter` (the INSERT waits for the test, then runs in
chdb); the aggregate is observed by wrapping :meth:`Engine.run_private` (it still runs in chdb);
noise is observed at :meth:`Noise.drawing`. Order is checked, never speed or time.
"""

from __future__ import annotations

import threading
from contextlib import contextmanager

import pytest

from dpch import Budget
from dpch.errors import AnalystLocked, LedgerWriteFailed, QueryFailedAfterCharge
from dpch.store.engine import Engine
from tests.accounting.gated_writer import DEADLINE, GatedWriter
from tests.helpers import inject_totality_gap, ledger_rows

SQL = "SELECT region, count() AS n FROM t GROUP BY region"


class Observed:
    """What happened, in order: the aggregate's end, the INSERT's return, the noise."""

    def __init__(self, session, writer: GatedWriter, monkeypatch) -> None:
        self.events: list[str] = []
        self.aggregate_done = threading.Event()
        self.writer = writer
        real_run = Engine.run_private

        def run_private(engine: Engine, sql: str, parameters: dict | None = None) -> list[tuple]:
            try:
                return real_run(engine, sql, parameters)
            finally:
                self.events.append("aggregate")
                self.aggregate_done.set()

        monkeypatch.setattr(Engine, "run_private", run_private)
        real_drawing = session.context.noise.drawing

        @contextmanager
        def drawing():
            self.events.append("noise" if writer.returned.is_set() else "noise BEFORE the write returned")
            with real_drawing() as source:
                yield source

        session.context.noise.drawing = drawing
        real_insert = writer.insert

        def insert(engine: Engine, sql: str) -> None:
            try:
                real_insert(engine, sql)
            finally:
                self.events.append("write returned")

        writer.insert = insert  # type: ignore[method-assign]


def _run_query(session) -> tuple[threading.Thread, dict]:
    outcome: dict = {}

    def run() -> None:
        try:
            outcome["release"] = session.query(SQL, epsilon=0.1)
        except Exception as exc:
            outcome["error"] = exc

    thread = threading.Thread(target=run)
    thread.start()
    return thread, outcome


def _gated(session, monkeypatch, *, fail: bool = False) -> tuple[GatedWriter, Observed]:
    writer = GatedWriter(fail=fail)
    session.accountant.ledger.writer = writer
    return writer, Observed(session, writer, monkeypatch)


def test_the_aggregate_runs_while_the_row_is_written_and_noise_waits_for_it(session, monkeypatch):
    writer, seen = _gated(session, monkeypatch)
    thread, outcome = _run_query(session)
    # the row's INSERT is in flight (held at the gate) and the aggregate has finished meanwhile
    assert writer.entered.wait(DEADLINE) and seen.aggregate_done.wait(DEADLINE)
    assert seen.events == ["aggregate"], "nothing after the aggregate may happen before the write returns"
    assert thread.is_alive() and ledger_rows(session) == 0
    writer.gate.set()
    thread.join(DEADLINE)
    assert "error" not in outcome, outcome
    assert seen.events == ["aggregate", "write returned", "noise"]
    assert ledger_rows(session) == 1 and outcome["release"].release_id


def test_an_aggregate_error_trips_only_after_the_write_returned(session, monkeypatch):
    writer, seen = _gated(session, monkeypatch)
    inject_totality_gap(monkeypatch)  # ClickHouse raises inside the aggregate (count > 0)
    thread, outcome = _run_query(session)
    assert writer.entered.wait(DEADLINE) and seen.aggregate_done.wait(DEADLINE)
    # the aggregate has failed, yet the release waits: no lock, no failed row, nothing returned
    assert thread.is_alive() and session.budget().locked is None and ledger_rows(session) == 0
    writer.gate.set()
    thread.join(DEADLINE)
    assert isinstance(outcome.get("error"), QueryFailedAfterCharge), outcome
    assert seen.events == ["aggregate", "write returned", "write returned"]  # the charge, then the failed row
    assert [e.status for e in session.accountant.ledger.entries("stages")] == ["failed"]
    assert session.budget().locked is not None
    with pytest.raises(AnalystLocked):
        session.query(SQL, epsilon=0.1)


@pytest.mark.parametrize("aggregate_fails", [False, True])
def test_a_failed_write_fails_the_release_without_noise_or_trip_whatever_the_aggregate_did(
        session, monkeypatch, aggregate_fails):
    """The analyst sees the same fixed ledger error whether or not the aggregate failed, and is not
    locked: a lock here would tell whether the data made the aggregate fail."""
    writer, seen = _gated(session, monkeypatch, fail=True)
    if aggregate_fails:
        inject_totality_gap(monkeypatch)
    session.accountant.set_budget(Budget(1.0, 1e-6))
    thread, outcome = _run_query(session)
    assert writer.entered.wait(DEADLINE) and seen.aggregate_done.wait(DEADLINE)
    writer.gate.set()
    thread.join(DEADLINE)
    error = outcome.get("error")
    assert isinstance(error, LedgerWriteFailed) and not isinstance(error, QueryFailedAfterCharge), outcome
    assert str(error) == str(LedgerWriteFailed())
    assert error.__cause__ is None and error.__suppress_context__  # nothing of the aggregate's error
    assert seen.events == ["aggregate", "write returned"], "no noise, no failed row after a failed write"
    assert ledger_rows(session) == 0
    status = session.budget()
    assert status.locked is None
    assert status.spent.epsilon == pytest.approx(0.1), "still counted in memory (the safe direction)"
