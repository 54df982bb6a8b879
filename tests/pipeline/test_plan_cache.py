"""The plan cache: a repeated text is planned once, and only while every policy and public domain it
was built from is unchanged; a cached plan gives exactly what planning afresh gives."""

from __future__ import annotations

import pytest

import dpch
from dpch import Budget, QueryRejected
from dpch.pipeline.plan import PlanCache, plan_query
from dpch.sql.rewrite import emit_sql
from dpch.sql.settings import QueryOptions
from tests.sql.test_corpus import CORPUS


def _fresh(session, sql):
    return plan_query(sql, defaults=session.defaults, overrides={}, table_policy=session.table_policy,
                      database=session.engine.database, public_domain=session.public_domains,
                      constants=session.engine.query_rows, describe=session.engine.describe_types)


def test_a_repeated_text_is_planned_once_and_gives_the_same_answer(session):
    sql = "SELECT region, sum(x) FROM t WHERE x > 2 GROUP BY region"
    first = session.plan(sql)
    misses = session.plans.misses
    second = session.plan(sql)
    assert second[0] is first[0] and session.plans.misses == misses and session.plans.hits >= 1
    fresh, _ = _fresh(session, sql)
    db = session.engine.database
    assert emit_sql(second[0], db) == emit_sql(fresh, db)
    # options are part of the key
    _, opts = session.plan(sql, epsilon=0.125)
    assert opts.epsilon == 0.125 and session.plans.misses == misses + 1


def test_a_changed_annotation_plans_afresh(session):
    sql = "SELECT sum(x) FROM t"
    plan, _ = session.plan(sql)
    assert "10.0" in emit_sql(plan, session.engine.database)  # bounds=[0, 10]
    session.engine.command(f"ALTER TABLE {session.engine.table('t')} COMMENT COLUMN x 'dp: bounds=[0, 7]'")
    session.policy.reload()  # as after the policy's TTL
    again, _ = session.plan(sql)
    assert again is not plan
    emitted = emit_sql(again, session.engine.database)
    assert "7.0" in emitted and "10.0" not in emitted  # negative control: the stale plan had 10


def test_a_refusal_is_not_cached(session):
    with pytest.raises(QueryRejected):
        session.plan("SELECT sum(name) FROM dim")  # a public table's text column: nothing to release
    with pytest.raises(QueryRejected):
        session.plan("SELECT sum(name) FROM dim")
    assert session.plans.hits == 0


class _StandInPlan:
    """A plan as the cache sees it: compared by identity, and not volatile."""

    volatile = False


def test_a_changed_public_domain_plans_afresh():
    """The cache with recording lookups: a domain read while planning is checked again on reuse."""
    domain = {"v": ("a", "b")}
    policy = object()
    built = []

    def build(table_policy, public_domain):
        table_policy("t")
        built.append(public_domain("dim", "k"))
        return _StandInPlan(), QueryOptions()

    cache = PlanCache()
    lookups = (lambda table: policy, lambda table, column: domain["v"])
    first = cache.plan("q", *lookups, build)
    assert cache.plan("q", *lookups, build) == first and len(built) == 1
    domain["v"] = ("a", "b", "c")  # the public table gained a value
    assert cache.plan("q", *lookups, build) != first and built[-1] == ("a", "b", "c")
    policy = object()  # a different policy object, unequal: planned again
    cache.plan("q", lambda table: policy, lookups[1], build)
    assert len(built) == 3


def test_emitted_sql_is_rendered_once_per_plan(session):
    plan, _ = session.plan("SELECT count() FROM t")
    calls = []

    def render(p):
        calls.append(p)
        return emit_sql(p, session.engine.database)

    assert session.plans.emitted(plan, render) == session.plans.emitted(plan, render) == render(plan)
    assert len(calls) == 2  # once by the cache, once by the comparison


def test_every_corpus_query_planned_from_the_cache_emits_what_a_fresh_plan_emits(store_dsn, visits_db):
    """The stages never modify a plan: after a full release from a cached plan (probe, charge,
    execute, noise, report), planning again hits the cache and still emits what a fresh plan emits."""
    session = dpch.connect(store_dsn, database=visits_db, analyst="plan-cache", default_budget=Budget(1e6, 0.5),
                           seed=3)
    try:
        for case in CORPUS["accepted"][::4]:  # a quarter of the corpus: every construct, a fraction of the time
            sql = case["sql"]
            session.query(sql)
            hits = session.plans.hits
            cached, _ = session.plan(sql)
            assert session.plans.hits == hits + 1, sql
            fresh, _ = _fresh(session, sql)
            assert emit_sql(cached, visits_db) == emit_sql(fresh, visits_db), sql
    finally:
        session.close()
