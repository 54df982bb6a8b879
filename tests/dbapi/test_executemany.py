"""DB-API executemany: each parameter set is a separate release, charged separately."""

from __future__ import annotations

import warnings

import pytest

from dpch import dbapi
from dpch.accounting import Budget
from dpch.fixtures import visits
from dpch.store.engine import Engine

Q = "SELECT count(*) AS n FROM visits WHERE age > %(age)s SETTINGS dp_epsilon = 0.25"


@pytest.fixture
def conn(store_dsn, database, keeper):
    engine = Engine(store_dsn, database=database)
    visits.load(engine, "visits", people=300)
    engine.close()
    connection = dbapi.connect(store_dsn, analyst="many", database=database, seed=11, default_budget=Budget())
    yield connection
    connection.close()


def _ledger(conn) -> int:
    engine = conn.session.engine
    return engine.query_rows(f"SELECT count() FROM {engine.table('dpch_ledger')} WHERE analyst = 'many'")[0][0]


def test_n_parameter_sets_are_n_releases_charged_n_times(conn):
    cur = conn.cursor()
    spent_before, rows_before = conn.session.budget().spent.epsilon, _ledger(conn)
    with pytest.warns(dbapi.SeparateReleasesWarning, match="3 separate private releases"):
        cur.executemany(Q, [{"age": 20}, {"age": 40}, {"age": 60}])
    assert _ledger(conn) - rows_before == 3
    assert conn.session.budget().spent.epsilon - spent_before == pytest.approx(3 * 0.25, abs=1e-12)
    assert len(cur.releases) == 3 and len({r.release_id for r in cur.releases}) == 3
    assert all(r.cost.epsilon == pytest.approx(0.25) for r in cur.releases)
    assert cur.release is cur.releases[-1]
    # negative control: one execute is one charge, not three
    cur.execute(Q, {"age": 20})
    assert _ledger(conn) - rows_before == 4


def test_a_single_parameter_set_does_not_warn(conn):
    cur = conn.cursor()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        cur.executemany(Q, [{"age": 30}])
    assert len(cur.releases) == 1


def test_executemany_stops_at_the_first_error_and_keeps_earlier_charges(conn):
    cur = conn.cursor()
    rows_before = _ledger(conn)
    bad = "SELECT count(*) FROM visits WHERE nosuchcolumn > %(age)s"
    with pytest.warns(dbapi.SeparateReleasesWarning), pytest.raises(dbapi.Error):
        cur.executemany(Q, [{"age": 20}, {"age": "x' OR '1"}, {"age": 60}])
    # the second set binds a string compared with a number: refused before its charge; the third never runs
    assert _ledger(conn) - rows_before == 1 and len(cur.releases) == 1
    with pytest.raises(dbapi.Error):
        cur.execute(bad, {"age": 1})
    assert _ledger(conn) - rows_before == 1
