"""Budget and ledger: refusal at the right query, no ledger row for a refusal, durable charges
visible to a new connection, and the charge written before any noise is drawn."""

from __future__ import annotations

import threading

import clickhouse_connect
import pytest

from dpch import Budget, BudgetExceeded
from dpch.mechanisms.laplace import LaplaceMechanism
from tests.helpers import make_table

COLUMNS = "uid UInt64, x Float64 COMMENT 'dp: bounds=[0, 1]'"


def _ledger_rows(session) -> int:
    return session.engine.query_rows(f"SELECT count() FROM {session.engine.table('dpch_ledger')}")[0][0]


@pytest.fixture
def session(connect):
    s = connect(analyst="ana", default_budget=Budget(1.0, 1e-6))
    make_table(s, COLUMNS, [(i, i / 10) for i in range(10)], ["uid", "x"])
    return s


def test_refused_at_the_right_query_with_amounts_and_no_ledger_row(session):
    for _ in range(3):
        session.query("SELECT count(*) FROM t", epsilon=0.3)
    assert _ledger_rows(session) == 3
    with pytest.raises(BudgetExceeded) as info:
        session.query("SELECT count(*) FROM t", epsilon=0.3)
    message = str(info.value)
    assert "ε 0.3" in message and "0.1" in message and "of 1" in message, message
    assert _ledger_rows(session) == 3, "a refused query must leave no ledger row"
    release = session.query("SELECT count(*) FROM t", epsilon=0.1)  # exactly what is left
    assert release.budget.remaining.epsilon == pytest.approx(0.0, abs=1e-12)
    with pytest.raises(BudgetExceeded):
        session.query("SELECT count(*) FROM t", epsilon=1e-6)


def test_delta_budget_is_enforced(session):
    session.query("SELECT count(*) FROM t SETTINGS dp_epsilon = 0.1, dp_delta = 6e-7")
    with pytest.raises(BudgetExceeded, match="δ"):
        session.query("SELECT count(*) FROM t SETTINGS dp_epsilon = 0.1, dp_delta = 6e-7")


def test_ten_tenths_fit_a_budget_of_one(session):
    for _ in range(10):
        session.query("SELECT count(*) FROM t", epsilon=0.1)
    assert session.budget().releases == 10


def test_new_connection_sees_the_same_spend(session, connect, keeper, store_dsn):
    session.query("SELECT count(*) FROM t", epsilon=0.25)
    session.query("SELECT sum(x) FROM t", epsilon=0.25)
    other = connect(analyst="ana", default_budget=Budget(1.0, 1e-6))
    assert other.budget().spent.epsilon == pytest.approx(0.5)
    # a raw client that shares nothing with dpch sees both charges as well
    raw = clickhouse_connect.get_client(dsn=store_dsn)
    try:
        rows = raw.query(
            f"SELECT count(), sum(epsilon) FROM {session.engine.table('dpch_ledger')} "
            "WHERE analyst = 'ana' AND status = 'charged'"
        ).result_rows
    finally:
        raw.close()
    assert rows[0][0] == 2 and rows[0][1] == pytest.approx(0.5)


def test_restart_rebuilds_the_filter_from_the_ledger(store_dsn, database, keeper):
    """Close every engine on the store (the client really closes), reopen: spend is remembered."""
    import dpch

    keeper.close()  # the session fixture's long-lived engine: release it so the store closes
    try:
        s = dpch.connect(store_dsn, database=database, analyst="bob", default_budget=Budget(1.0, 1e-6), seed=1)
        make_table(s, COLUMNS, [(1, 0.5)], ["uid", "x"])
        s.query("SELECT count(*) FROM t", epsilon=0.7)
        s.close()
        s = dpch.connect(store_dsn, database=database, analyst="bob", default_budget=Budget(1.0, 1e-6), seed=2)
        assert s.budget().spent.epsilon == pytest.approx(0.7)
        with pytest.raises(BudgetExceeded):
            s.query("SELECT count(*) FROM t", epsilon=0.7)
        s.query("SELECT count(*) FROM t", epsilon=0.3)
        s.close()
    finally:
        keeper.__init__(store_dsn)  # reopen for the rest of the session


def test_budget_set_by_owner_applies(session):
    session.accountant.set_budget(Budget(0.2, 0.0))
    with pytest.raises(BudgetExceeded):
        session.query("SELECT count(*) FROM t", epsilon=0.3)
    assert session.budget().budget == Budget(0.2, 0.0)


def test_charge_is_durable_before_noise_is_drawn(session, store_dsn, monkeypatch):
    """The ledger row exists (for an independent client) at the moment noise is drawn."""
    seen: list[int] = []
    table = session.engine.table("dpch_ledger")
    original = LaplaceMechanism.release

    def spying_release(self, values, source):
        raw = clickhouse_connect.get_client(dsn=store_dsn)
        try:
            seen.append(raw.query(f"SELECT count() FROM {table}").result_rows[0][0])
        finally:
            raw.close()
        return original(self, values, source)

    monkeypatch.setattr(LaplaceMechanism, "release", spying_release)
    session.query("SELECT count(*) FROM t", epsilon=0.1)
    session.query("SELECT sum(x) FROM t", epsilon=0.1)
    assert seen and seen[0] >= 1 and seen[-1] >= 2, seen


def test_threads_cannot_jointly_overspend(session):
    errors: list[Exception] = []
    done: list[float] = []

    def worker() -> None:
        for _ in range(5):
            try:
                done.append(session.query("SELECT count(*) FROM t", epsilon=0.07).cost.epsilon)
            except BudgetExceeded:
                pass
            except Exception as exc:  # pragma: no cover - reported below
                errors.append(exc)

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert len(done) == 14  # floor(1.0 / 0.07)
    assert session.budget().spent.epsilon <= 1.0 + 1e-9
    assert _ledger_rows(session) == 14
