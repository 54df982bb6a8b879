"""Stage 1, plan: options resolve in one order, public domains are read (and cached) only from
public tables, and planning spends nothing."""

from __future__ import annotations

import pytest

from dpch import QueryRejected
from dpch.pipeline.plan import PublicDomains, plan_query
from dpch.sql.settings import QueryOptions
from tests.helpers import ledger_rows


def _plan(session, sql, **overrides):
    return plan_query(sql, defaults=QueryOptions(epsilon=0.5), overrides=overrides,
                      table_policy=session.table_policy, database=session.engine.database,
                      public_domain=session.public_domains,
                      constants=session.engine.query_rows, describe=session.engine.describe_types)


def test_options_resolve_defaults_then_caller_then_settings(session):
    _, opts = _plan(session, "SELECT count() FROM t")
    assert opts.epsilon == 0.5
    _, opts = _plan(session, "SELECT count() FROM t", epsilon=0.25)
    assert opts.epsilon == 0.25
    _, opts = _plan(session, "SELECT count() FROM t SETTINGS dp_epsilon = 0.125", epsilon=0.25)
    assert opts.epsilon == 0.125


def test_planning_reads_no_private_row_and_spends_nothing(session):
    before = ledger_rows(session), session.budget().spent.epsilon
    plan, _ = _plan(session, "SELECT region, sum(x) FROM t GROUP BY region")
    assert [k.label for k in plan.keys] == ["region"]
    assert plan.group_domain == (("a",), ("b",), ("c",))  # the declared values, not the data's
    assert (ledger_rows(session), session.budget().spent.epsilon) == before


def test_public_domain_is_read_from_public_tables_only(session):
    domains = PublicDomains(session.engine, session.table_policy)
    assert domains("dim", "name") == ("Alpha", "Beta", "Gamma")
    with pytest.raises(QueryRejected, match="not public"):
        domains("t", "region")


def test_public_domain_is_cached(session):
    domains = PublicDomains(session.engine, session.table_policy)
    first = domains("dim", "region")
    session.engine.command(f"INSERT INTO {session.engine.table('dim')} VALUES ('d', 'Delta')")
    assert domains("dim", "region") == first  # within the TTL the cached domain is reused
    assert PublicDomains(session.engine, session.table_policy)("dim", "region") == (*first, "d")
