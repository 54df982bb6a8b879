"""The tripwire (docs/design.md rule 5): a release that fails after its charge gets one fixed message,
its ledger row is marked failed (and still counted), and the analyst is locked, durably, until
the data owner runs ``dpch budget unlock``.

Fault injection, the database stays real (:func:`tests.helpers.inject_totality_gap`): the
emitted SQL still runs in ClickHouse, wrapped so that ClickHouse itself raises exactly when the
query's first aggregate is non-zero — the shape of issue 12's regex oracle.
"""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from dpch import Budget
from dpch.accounting.accountant import forget_cached_state
from dpch.cli.main import cli
from dpch.errors import AnalystLocked, BudgetExceeded, QueryFailedAfterCharge, QueryRejected
from tests.helpers import inject_totality_gap, make_table

PEOPLE = "uid UInt64, income Float64 COMMENT 'dp: bounds=[0, 100000]'"
SECRET_UID, SECRET_INCOME = 1234, 41234.56


@pytest.fixture
def totality_gap(monkeypatch):
    inject_totality_gap(monkeypatch)
    return monkeypatch


def _people(session) -> None:
    rows = [(u, float(u % 997) * 10.0) for u in range(1, 400)] + [(SECRET_UID, SECRET_INCOME)]
    make_table(session, PEOPLE, rows, ["uid", "income"], name="people",
               comment="dp: privacy_unit=uid, max_rows_per_unit=1")


def _cli(store_dsn, database, *args):
    result = CliRunner().invoke(cli, ["--dsn", store_dsn, "--database", database, *args])
    assert result.exit_code == 0, result.output
    return result.output


def _oracle(threshold: float) -> str:
    return f"SELECT count() FROM people WHERE uid = {SECRET_UID} AND income > {threshold}"


def test_failure_after_charge_is_one_fixed_message_a_failed_row_and_a_durable_lock(
        connect, totality_gap, store_dsn, database):
    s = connect(analyst="eve")
    s.accountant.set_budget(Budget(1.0, 1e-6))  # set by the data owner: `dpch budget --analyst eve` reads it
    _people(s)
    with pytest.raises(QueryFailedAfterCharge) as caught:
        s.query(_oracle(30000), epsilon=0.1)
    # one fixed sentence: no ClickHouse text, no code, nothing chained for a traceback to show
    assert str(caught.value) == QueryFailedAfterCharge.MESSAGE
    assert caught.value.__cause__ is None and caught.value.__suppress_context__
    # the ledger row is failed and still counts its full charge
    [entry] = s.accountant.ledger.entries("eve")
    assert entry.status == "failed" and entry.cost.epsilon == pytest.approx(0.1)
    status = s.budget()
    assert status.spent.epsilon == pytest.approx(0.1) and status.releases == 1
    assert status.locked is not None and status.locked.release_id == entry.release_id
    assert status.locked.reason == "ClickHouse FUNCTION_THROW_IF_VALUE_IS_NON_ZERO"
    assert "reason" not in status.as_dict()["locked"]  # what the gateway sends the analyst
    totality_gap.undo()  # the query itself would now run fine: the lock, not the data, refuses it

    # refused before anything runs or is charged, in this session, in a fresh one, after a restart
    with pytest.raises(AnalystLocked, match="analyst eve is locked") as locked:
        s.query(_oracle(30000), epsilon=0.1)
    assert "dpch budget unlock --analyst eve" in str(locked.value)
    assert isinstance(locked.value, BudgetExceeded)
    assert "REFUSED" in s.explain(_oracle(0)).describe() and "is locked" in s.explain(_oracle(0)).reason
    forget_cached_state()
    fresh = connect(analyst="eve", default_budget=Budget(1.0, 1e-6))
    with pytest.raises(AnalystLocked):
        fresh.query("SELECT count() FROM people", epsilon=0.01)
    with pytest.raises(AnalystLocked):  # accuracy-first is admitted by the same filter
        fresh.query("SELECT count() FROM people SETTINGS dp_accuracy = 50, dp_max_epsilon = 0.2")
    assert len(fresh.accountant.ledger.entries("eve")) == 1  # no partial charge for refused queries
    assert fresh.budget().spent.epsilon == pytest.approx(0.1)

    # the data owner sees the lock and why, and clears it
    text = _cli(store_dsn, database, "budget", "--analyst", "eve")
    assert "LOCKED" in text and "FUNCTION_THROW_IF_VALUE_IS_NON_ZERO" in text and "failed" in text
    data = json.loads(_cli(store_dsn, database, "budget", "--analyst", "eve", "--json"))
    assert data["locked"]["reason"] == "ClickHouse FUNCTION_THROW_IF_VALUE_IS_NON_ZERO"
    assert data["recent"][0]["status"] == "failed"
    assert "locked: eve" in _cli(store_dsn, database, "budget", "list")
    assert "analyst eve unlocked" in _cli(store_dsn, database, "budget", "unlock", "--analyst", "eve")
    assert "was not locked" in _cli(store_dsn, database, "budget", "unlock", "--analyst", "eve")
    assert "LOCKED" not in _cli(store_dsn, database, "budget", "--analyst", "eve")

    release = fresh.query("SELECT count() FROM people", epsilon=0.2)
    assert release.budget.locked is None
    assert fresh.budget().spent.epsilon == pytest.approx(0.3)  # the failed release still counts


def test_only_the_failing_analyst_is_locked(connect, totality_gap):
    eve, bob = connect(analyst="eve"), connect(analyst="bob")
    _people(eve)
    with pytest.raises(QueryFailedAfterCharge):
        eve.query(_oracle(0), epsilon=0.1)
    totality_gap.undo()
    assert bob.query("SELECT count() FROM people", epsilon=0.1).rows
    assert bob.budget().locked is None and eve.budget().locked is not None


def test_errors_before_the_charge_do_not_lock(connect, totality_gap):
    """Negative control: a refusal before the charge is not data-dependent and trips nothing."""
    s = connect(analyst="eve", default_budget=Budget(0.5, 1e-6))
    _people(s)
    with pytest.raises(QueryRejected):
        s.query("SELECT count() FROM people WHERE nope > 1", epsilon=0.1)
    with pytest.raises(BudgetExceeded):
        s.query(_oracle(0), epsilon=0.6)
    # and a post-charge run that does not fail (m0 = 0: no row satisfies the condition) is a release
    release = s.query(_oracle(SECRET_INCOME + 1), epsilon=0.1)
    assert release.rows and s.budget().locked is None and s.budget().releases == 1


def test_accuracy_first_failure_after_reservation_trips_at_the_worst_case(connect, totality_gap):
    s = connect(analyst="eve")
    _people(s)
    with pytest.raises(QueryFailedAfterCharge):
        s.query("SELECT count() FROM people SETTINGS dp_accuracy = 50, dp_max_epsilon = 0.4")
    [entry] = s.accountant.ledger.entries("eve")
    assert entry.status == "failed"
    assert entry.cost.epsilon == pytest.approx(entry.worst.epsilon) and entry.worst.epsilon > 0
    assert s.budget().spent.epsilon == pytest.approx(entry.worst.epsilon)  # the reservation's worst case
    assert s.budget().locked is not None


def test_binary_search_oracle_attacker_is_stopped_at_its_first_failure(connect, totality_gap):
    """Issue 12's attack replayed through the Python API: a binary search on a person's income
    with one query per bit. Without the tripwire it recovers the income to the cent; with it the
    first failure ends the attack, every later query is refused before it is charged, and the
    attacker is left with an interval thousands of units wide."""
    s = connect(analyst="mallory", default_budget=Budget(1.0, 1e-6))
    _people(s)
    lo, hi = 0.0, 100000.0
    outcomes = []
    for _ in range(40):  # 40 halvings would pin the income far below a cent
        mid = (lo + hi) / 2
        try:
            s.query(_oracle(mid), epsilon=1e-3)
            outcomes.append("ok")
            hi = mid  # no row above mid, or the query would have failed
        except QueryFailedAfterCharge:
            outcomes.append("failed")
            lo = mid
        except AnalystLocked:
            outcomes.append("locked")
    assert outcomes.count("failed") == 1
    first = outcomes.index("failed")
    assert set(outcomes[first + 1:]) == {"locked"}  # nothing after the first failure answers
    assert lo < SECRET_INCOME <= hi and hi - lo >= 10000  # here: (25000, 50000]
    assert len(s.accountant.ledger.entries("mallory")) == first + 1  # refused queries charged nothing
