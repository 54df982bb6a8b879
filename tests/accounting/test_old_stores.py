"""A store written by an older dpch: its ledger and budget tables lack columns added since. Opening
it adds them (once: a current store is only read, never altered), and its rows still count."""

from __future__ import annotations

import pytest

from dpch.accounting.accountant import Accountant, forget_cached_state
from dpch.accounting.budget import Budget
from dpch.privacy.cost import PrivacyCost
from dpch.store.engine import Engine

OLD_LEDGER = ("release_id UUID, seq UInt8, time DateTime64(6, 'UTC'), analyst String, dataset String, "
              "query_hash String, mechanism LowCardinality(String), filter LowCardinality(String), "
              "status LowCardinality(String), epsilon Float64, delta Float64, rho Nullable(Float64), "
              "worst_epsilon Float64, worst_delta Float64")
OLD_BUDGETS = "analyst String, epsilon Float64, delta Float64, set_at DateTime64(6, 'UTC'), set_by String"


@pytest.fixture
def engine(store_dsn, database, keeper):
    e = Engine(store_dsn, database=database)
    yield e
    e.close()


def _columns(engine: Engine, table: str) -> set[str]:
    return {c.name for c in engine.columns(table)}


def _metadata_changes(engine: Engine) -> int:
    """How often the tables' metadata was modified (an ALTER moves it even when it adds nothing)."""
    rows = engine.query_rows("SELECT sum(toUnixTimestamp(metadata_modification_time)) FROM system.tables "
                             "WHERE database = {d:String} AND name IN ('dpch_ledger', 'dpch_budgets')",
                             {"d": engine.database})
    return int(rows[0][0])


def test_an_old_store_gains_the_new_columns_and_keeps_counting(engine):
    engine.command(f"CREATE TABLE {engine.table('dpch_ledger')} ({OLD_LEDGER}) ENGINE = MergeTree "
                   "ORDER BY (analyst, time, release_id, seq)")
    engine.command(f"CREATE TABLE {engine.table('dpch_budgets')} ({OLD_BUDGETS}) ENGINE = MergeTree "
                   "ORDER BY (analyst, set_at)")
    engine.command(f"INSERT INTO {engine.table('dpch_ledger')} VALUES (generateUUIDv4(), 1, now64(6), 'ana', "
                   "'db.t', 'h', 'laplace', 'basic', 'charged', 0.25, 0, NULL, 0.25, 0)")
    acc = Accountant(engine, "ana", default_budget=Budget(1.0, 1e-6))
    assert {"worst_rho", "ex_post", "datasets", "rho_delta"} <= _columns(engine, "dpch_ledger")
    assert {"dataset", "filter", "filter_options"} <= _columns(engine, "dpch_budgets")
    assert acc.status().spent.epsilon == pytest.approx(0.25)  # the old row counts
    acc.charge(PrivacyCost(0.5, 0.0), query_hash="h2", mechanism="laplace")
    forget_cached_state(engine)
    assert Accountant(engine, "ana", default_budget=Budget(1.0, 1e-6)).status().spent.epsilon == pytest.approx(0.75)


def test_a_current_store_is_not_altered_when_opened(engine):
    Accountant(engine, "ana", default_budget=Budget(1.0, 1e-6)).status()
    before = _metadata_changes(engine)
    columns = _columns(engine, "dpch_ledger"), _columns(engine, "dpch_budgets")
    for _ in range(3):
        Accountant(engine, "ana")
    assert (_columns(engine, "dpch_ledger"), _columns(engine, "dpch_budgets")) == columns
    assert _metadata_changes(engine) == before
