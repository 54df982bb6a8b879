"""``dpch budget [--analyst A] [--json]`` and ``dpch budget set --dataset/--filter``, and the same
data from ``Session.budget()``; the ``filter=`` connect option end to end through a query."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from dpch import Budget, BudgetExceeded
from dpch.cli.main import cli
from dpch.privacy.cost import PrivacyCost
from tests.helpers import make_table

COLUMNS = "uid UInt64, x Float64 COMMENT 'dp: bounds=[0, 1]'"


def run(store_dsn, database, *args):
    result = CliRunner().invoke(cli, ["--dsn", store_dsn, "--database", database, *args])
    assert result.exit_code == 0, result.output
    return result.output


def test_budget_command_shows_spent_reserved_remaining_and_releases(connect, store_dsn, database):
    s = connect(analyst="ana", filter="zcdp", default_budget=Budget(2.0, 2e-6))
    make_table(s, COLUMNS, [(i, i / 10) for i in range(10)], ["uid", "x"])
    run(store_dsn, database, "budget", "set", "--analyst", "ana", "--epsilon", "2", "--delta", "2e-6",
        "--filter", "zcdp")
    run(store_dsn, database, "budget", "set", "--analyst", "ana", "--epsilon", "1.5", "--delta", "2e-6",
        "--dataset", "t")
    s.query("SELECT count(*) FROM t", epsilon=0.2)
    s.accountant.reserve(PrivacyCost(0.0, 0.0, 0.0, ex_post=True, worst_epsilon=0.3, worst_rho=0.01),
                         dataset=f"{database}.t", query_hash="h", mechanism="brownian")
    data = json.loads(run(store_dsn, database, "--analyst", "ana", "budget", "--json"))
    assert data == s.budget().as_dict() | {"recent": data["recent"]}
    assert data["filter"] == "zcdp" and "Rogers et al. 2023, Thm 2" in data["guarantee"]
    assert data["spent"]["rho"] == pytest.approx(0.02)  # Laplace ε 0.2 enters as ε²/2
    assert data["reserved"]["rho"] == pytest.approx(0.01)
    assert [r["status"] for r in data["recent"]] == ["charged", "reserved"]
    assert data["datasets"][0]["dataset"] == f"{database}.t"
    text = run(store_dsn, database, "budget", "--analyst", "ana")
    assert "remaining" in text and "reserved" in text and "zCDP filter" in text
    assert f"dataset {database}.t" in text and "last releases:" in text and "brownian" in text
    # another analyst, seen by the data owner: one the data owner never gave a budget is named as such
    nobody = CliRunner().invoke(cli, ["--dsn", store_dsn, "--database", database, "budget", "--analyst", "nobody"])
    assert nobody.exit_code == 1 and "analyst 'nobody' has no budget" in nobody.output
    assert "dpch budget set --analyst nobody --epsilon" in nobody.output


def test_connect_filter_option_drives_queries(connect):
    s = connect(analyst="zed", filter="advanced", default_budget=Budget(1.0, 1e-6))
    make_table(s, COLUMNS, [(i, i / 10) for i in range(10)], ["uid", "x"])
    for _ in range(3):
        s.query("SELECT count(*) FROM t", epsilon=0.01)
    status = s.budget()
    assert status.filter == "advanced"
    # odometer min(basic, Thm 6.5) = 0.03 here; remaining is the largest ε Thm 5.1 still admits
    assert status.spent.epsilon == pytest.approx(0.03)
    with pytest.raises(BudgetExceeded, match="advanced-composition bound"):
        s.query("SELECT count(*) FROM t", epsilon=status.remaining.epsilon * 1.01)
    assert s.explain("SELECT count(*) FROM t", epsilon=0.01).admissible
