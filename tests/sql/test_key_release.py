"""Key release in SQL (issue 16, part 1): the analysis of a GROUP BY or SELECT DISTINCT without
aggregate, and the corpus's ``[[key_release]]`` entries (dpch/fixtures/corpus.toml) on the fixture
tables: a free release's exact rows, a partition selection's keys ⊆ the data's keys."""

from __future__ import annotations

import pytest

import dpch
from dpch import Budget, QueryRejected
from dpch.sql.rewrite import emit_sql
from tests.helpers import ledger_rows, run_private_keyed
from tests.sql.test_corpus import CORPUS

CASES = CORPUS["key_release"]


@pytest.fixture(scope="module")
def session(store_dsn, visits_db, keeper):
    s = dpch.connect(store_dsn, database=visits_db, analyst="key-release", default_budget=Budget(1e6, 0.5), seed=16)
    yield s
    s.close()


@pytest.mark.parametrize("case", CASES, ids=[c["sql"][:70] for c in CASES])
def test_corpus_key_release(session, case):
    plan, opts = session.plan(case["sql"])
    assert plan.key_release and not plan.measures and plan.free == (not case.get("selection"))
    before = ledger_rows(session)
    release = session.query(case["sql"])
    assert all(iv is None for ivs in release.intervals for iv in ivs), "keys carry no interval"
    if not case.get("selection"):
        assert [list(r) for r in release.rows] == case["rows"]
        assert release.cost.epsilon == 0 and ledger_rows(session) == before
        return
    # partition selection: the released keys are keys of the data, each once, and the charge is the request's
    rows = run_private_keyed(session.engine, emit_sql(plan, session.engine.database))
    exact = {tuple(str(v) for v in row[: len(plan.keys)]) for row in rows}
    keys = [tuple(str(v) for v in row) for row in release.rows]
    assert release.rows and len(set(keys)) == len(keys) and set(keys) <= exact
    assert release.columns == plan.columns and len(release.columns) == len(plan.keys)
    assert release.cost == session.explain(case["sql"]).cost and ledger_rows(session) == before + 1
    assert (release.cost.epsilon, release.cost.delta) == (opts.epsilon, opts.delta), "all of it on the selection"


def test_domains_from_each_source(session):
    origins = {k.label: k.origin for k in session.plan(
        "SELECT DISTINCT region, intDiv(age, 10), toStartOfMonth(visit_date) FROM visits")[0].keys}
    assert origins == {"region": "declared values", "intDiv(age, 10)": "bounds",
                       "toStartOfMonth(visit_date)": "bounds"}
    plan, _ = session.plan("SELECT DISTINCT region, converted FROM visits")
    assert plan.key_release and not plan.free and plan.partition_selection


def test_distinct_is_group_by_of_its_columns(session):
    distinct, _ = session.plan("SELECT DISTINCT region AS r, device FROM visits")
    grouped, _ = session.plan("SELECT region AS r, device FROM visits GROUP BY region, device")
    assert [k.label for k in distinct.keys] == [k.label for k in grouped.keys]
    assert distinct.group_domain == grouped.group_domain and distinct.columns == grouped.columns == ["r", "device"]
    twice, _ = session.plan("SELECT DISTINCT region, region FROM visits")
    assert len(twice.keys) == 1 and twice.columns == ["region", "region"]


def test_a_having_over_keys_is_free_one_over_an_aggregate_is_charged(session):
    free, _ = session.plan("SELECT region FROM visits GROUP BY region HAVING region != 'north'")
    assert free.free
    charged, _ = session.plan("SELECT region FROM visits GROUP BY region HAVING count() > 10")
    assert not charged.key_release and charged.measures
    before = ledger_rows(session)
    release = session.query("SELECT region FROM visits GROUP BY region HAVING count() > 10")
    assert release.cost.epsilon > 0 and ledger_rows(session) == before + 1 and release.columns == ["region"]


@pytest.mark.parametrize("sql, message", [
    ("SELECT 1 FROM visits", "no aggregate"),
    ("SELECT DISTINCT region FROM visits GROUP BY device", "SELECT DISTINCT together with GROUP BY"),
    ("SELECT DISTINCT avg(spend) FROM visits", "SELECT DISTINCT with an aggregate"),
    ("SELECT DISTINCT region FROM visits ORDER BY count() DESC", "SELECT DISTINCT with an aggregate"),
    ("SELECT DISTINCT visits.* FROM visits", "SELECT DISTINCT \\*"),
    ("SELECT count() AS n, count(*) AS n FROM visits", "two different result columns are both named n"),
    ("SELECT region AS n, device AS n FROM visits GROUP BY region, device", "both named n"),
])
def test_refusals(session, sql, message):
    with pytest.raises(QueryRejected, match=message):
        session.plan(sql)


def test_duplicate_names_of_one_expression_are_allowed(session):
    plan, _ = session.plan("SELECT median(age) AS m, median(age) AS m, count() FROM visits")
    assert plan.columns == ["m", "m", "count()"] and len(plan.stats) == 2
    release = session.query("SELECT median(age) AS m, median(age) AS m, count() FROM visits")
    assert release.rows[0][0] == release.rows[0][1]
