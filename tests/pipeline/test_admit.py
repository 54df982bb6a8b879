"""Stage 4, admit: the scopes a plan is charged to, and an admission check that spends nothing."""

from __future__ import annotations

from dpch.accounting.budget import Budget
from dpch.pipeline import admit
from dpch.privacy.cost import PrivacyCost
from tests.helpers import ledger_rows


def test_each_private_table_is_one_scope_even_in_a_self_join(session):
    plan, _ = session.plan("SELECT count() FROM t AS a JOIN t AS b ON a.uid = b.uid")
    assert admit.datasets(session.engine.database, plan) == (f"{session.engine.database}.t",)
    plan, _ = session.plan("SELECT count() FROM t JOIN dim ON t.region = dim.region")
    assert admit.datasets(session.engine.database, plan) == (f"{session.engine.database}.t",)  # dim is public


def test_admissible_says_why_and_writes_nothing(connect):
    session = connect(analyst="small", default_budget=Budget(1.0, 0.0))
    before = ledger_rows(session)
    ok, reason = admit.admissible(session.accountant, PrivacyCost(0.5), ())
    assert ok and reason == "within budget"
    ok, reason = admit.admissible(session.accountant, PrivacyCost(2.0), ())
    assert not ok and "ε 2" in reason
    assert ledger_rows(session) == before


def test_charge_is_one_durable_row(session):
    plan, opts = session.plan("SELECT count() FROM t")
    before = ledger_rows(session)
    entry = admit.charge(session.accountant, PrivacyCost(0.1), admit.datasets(session.engine.database, plan),
                         plan, opts.resolved_mechanism)
    assert ledger_rows(session) == before + 1
    assert entry.release_id
