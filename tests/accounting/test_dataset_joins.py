"""Dataset budgets through joins (docs/design.md rule 8, issue 12 defect 5): every private table a query
reads admits and is charged the release in its own dataset scope, so neither a self-join nor a join
with another private table spends past ``dpch budget set --dataset``."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from dpch import Budget, BudgetExceeded
from dpch.accounting.accountant import forget_cached_state
from dpch.cli.main import cli
from tests.helpers import make_table

SELF_JOIN = "SELECT count() FROM visits a JOIN visits b ON a.uid = b.uid"
JOIN = "SELECT count() FROM visits v JOIN people p ON v.uid = p.uid"


def _tables(session) -> None:
    make_table(session, "uid UInt64, x Float64 COMMENT 'dp: bounds=[0, 1]'",
               [(u % 40, 0.5) for u in range(120)], ["uid", "x"], name="visits")
    make_table(session, "uid UInt64, income Float64 COMMENT 'dp: bounds=[0, 1000]'",
               [(u, 10.0 * u) for u in range(40)], ["uid", "income"], name="people",
               comment="dp: privacy_unit=uid, max_rows_per_unit=1")
    make_table(session, "uid UInt64, y Float64 COMMENT 'dp: bounds=[0, 1]'",
               [(u, 0.5) for u in range(40)], ["uid", "y"], name="other")


def _set_dataset_budget(store_dsn, database, analyst, table, epsilon):
    result = CliRunner().invoke(cli, ["--dsn", store_dsn, "--database", database, "budget", "set",
                                      "--analyst", analyst, "--epsilon", str(epsilon), "--dataset", table])
    assert result.exit_code == 0, result.output


def _refresh(session):
    forget_cached_state()  # the CLI wrote the budget through its own accountant: re-read the store
    return session


def test_self_join_cannot_spend_past_the_dataset_budget(connect, store_dsn, database):
    s = connect(analyst="ana", default_budget=Budget(5.0, 1e-6))
    _tables(s)
    _set_dataset_budget(store_dsn, database, "ana", "visits", 0.3)
    _refresh(s)
    release = s.query(SELF_JOIN, epsilon=0.2)
    entry = s.accountant.ledger.entries("ana")[-1]
    assert entry.datasets == (f"{database}.visits",)  # a self-join reads one dataset, counted once
    assert release.budget.datasets[0].spent.epsilon == pytest.approx(0.2)
    explanation = s.explain(SELF_JOIN, epsilon=0.2)
    assert not explanation.admissible and f"on dataset {database}.visits" in explanation.reason
    with pytest.raises(BudgetExceeded, match=f"on dataset {database}.visits"):
        s.query(SELF_JOIN, epsilon=0.2)
    with pytest.raises(BudgetExceeded, match=f"on dataset {database}.visits"):
        s.query("SELECT count() FROM visits", epsilon=0.2)
    # negative control: a table without a dataset budget is limited by the analyst's budget only
    assert s.query("SELECT count() FROM other", epsilon=0.2).rows
    assert len(s.accountant.ledger.entries("ana")) == 2


@pytest.mark.parametrize("limited", ["visits", "people"])
def test_join_is_admitted_and_charged_by_each_table(connect, store_dsn, database, limited):
    s = connect(analyst="bo", default_budget=Budget(5.0, 1e-6))
    _tables(s)
    _set_dataset_budget(store_dsn, database, "bo", limited, 0.3)
    _refresh(s)
    s.query(JOIN, epsilon=0.2)
    entry = s.accountant.ledger.entries("bo")[-1]
    assert set(entry.datasets) == {f"{database}.visits", f"{database}.people"}
    [scope] = s.budget().datasets
    assert scope.dataset == f"{database}.{limited}" and scope.spent.epsilon == pytest.approx(0.2)
    assert scope.releases == 1
    assert not s.explain(JOIN, epsilon=0.2).admissible
    with pytest.raises(BudgetExceeded, match=f"on dataset {database}.{limited}"):
        s.query(JOIN, epsilon=0.2)
    with pytest.raises(BudgetExceeded, match=f"on dataset {database}.{limited}"):
        s.query(f"SELECT count() FROM {limited}", epsilon=0.2)
    assert s.query(f"SELECT count() FROM {limited}", epsilon=0.1).rows  # exactly what is left


def test_accuracy_first_join_reserves_in_each_dataset(connect, store_dsn, database):
    s = connect(analyst="cy", default_budget=Budget(5.0, 1e-6))
    _tables(s)
    _set_dataset_budget(store_dsn, database, "cy", "people", 0.3)
    _refresh(s)
    s.query(JOIN + " SETTINGS dp_accuracy = 1000, dp_max_epsilon = 0.25")
    entry = s.accountant.ledger.entries("cy")[-1]
    assert set(entry.datasets) == {f"{database}.visits", f"{database}.people"}
    status = s.budget()
    [scope] = status.datasets
    assert scope.spent.epsilon == pytest.approx(status.spent.epsilon) and scope.releases == 1


def test_ledger_rows_from_before_the_datasets_column_count_for_their_dataset(connect, store_dsn, database):
    s = connect(analyst="old", default_budget=Budget(5.0, 1e-6))
    _tables(s)
    _set_dataset_budget(store_dsn, database, "old", "visits", 0.3)
    # a row as an older dpch wrote it: one dataset string, no datasets list
    s.engine.command(
        f"INSERT INTO {s.engine.table('dpch_ledger')} (release_id, seq, time, analyst, dataset, query_hash,"
        " mechanism, filter, status, epsilon, delta, worst_epsilon, worst_delta) VALUES (generateUUIDv4(), 1,"
        f" now64(6), 'old', '{database}.visits', 'h', 'laplace', 'basic', 'charged', 0.25, 0, 0.25, 0)")
    _refresh(s)
    [scope] = s.budget().datasets
    assert scope.spent.epsilon == pytest.approx(0.25)
    with pytest.raises(BudgetExceeded, match=f"on dataset {database}.visits"):
        s.query(SELF_JOIN, epsilon=0.1)
