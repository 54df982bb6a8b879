"""Top-k in the corpus (issue 16, part 2): each ``[[top_k]]`` entry of dpch/fixtures/corpus.toml runs
on the fixture tables at a large ε, and must release exactly the k keys with the largest (DESC) or
smallest (ASC) exact score, in order — the scores asked from ClickHouse directly with the emitted
SQL (the contribution-capped rows the mechanism sees). Values, where asked, lie in their intervals
around the exact capped values; the charge is EXPLAIN's."""

from __future__ import annotations

import pytest

import dpch
from dpch import Budget
from dpch.pipeline.top_k import calibrate_top_k
from dpch.sql.rewrite import emit_sql
from tests.helpers import CAP_KEY, ledger_rows, run_private_keyed
from tests.sql.test_corpus import CORPUS

CASES = CORPUS["top_k"]


@pytest.fixture(scope="module")
def session(store_dsn, visits_db, keeper):
    s = dpch.connect(store_dsn, database=visits_db, analyst="top-k-corpus", default_budget=Budget(1e6, 0.5), seed=17)
    yield s
    s.close()


@pytest.mark.parametrize("case", CASES, ids=[c["sql"][:70] for c in CASES])
def test_corpus_top_k(session, case, monkeypatch):
    # the release runs under the key the exact values below are asked with: its intervals cover *its*
    # capped values (another key keeps other rows where the cap binds)
    monkeypatch.setattr(session.context.noise, "cap_key", lambda: CAP_KEY)
    plan, opts = session.plan(case["sql"])
    noise = calibrate_top_k(plan, opts)
    nkeys = len(plan.keys)
    column = nkeys + [m.name for m in plan.measures].index(noise.measure.name)
    exact = {tuple(row[:nkeys]): float(row[column])
             for row in run_private_keyed(session.engine, emit_sql(plan, session.engine.database))}
    scores = {tuple(k): exact.get(tuple(k), 0.0) for k in plan.group_domain or ()}
    ranked = sorted(scores, key=lambda k: -scores[k] if noise.descending else scores[k])
    k = plan.limit or 0
    # the corpus picks queries whose k-th and (k+1)-th scores differ: the answer is then unique
    assert scores[ranked[k - 1]] != scores[ranked[k]]
    before = ledger_rows(session)
    release = session.query(case["sql"])
    assert [tuple(r[:nkeys]) for r in release.rows] == ranked[:k]
    assert release.cost == session.explain(case["sql"]).cost and ledger_rows(session) == before + 1
    assert release.mechanism.startswith("top-k")
    noisy = [j for j, out in enumerate(plan.outputs) if not out.is_key]
    assert bool(noisy) == bool(case.get("values"))
    columns = {m.name: nkeys + i for i, m in enumerate(plan.measures)}
    emitted = emit_sql(plan, session.engine.database)
    capped = {tuple(row[:nkeys]): row for row in run_private_keyed(session.engine, emitted)}
    for ivs, row in zip(release.intervals, release.rows, strict=True):
        for j in noisy:
            lo, hi = ivs[j]
            assert lo <= row[j] <= hi
            (stat_name,) = plan.outputs[j].stats
            stat = plan.stats[stat_name]
            if stat.kind in ("count", "sum"):  # the exact capped value, asked from ClickHouse, is inside
                assert lo <= float(capped[tuple(row[:nkeys])][columns[stat.measures[0]]]) <= hi
