"""The query corpus (dpch/fixtures/corpus.toml) against the demo table on embedded chdb."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

import dpch
from dpch import Budget, DpchError

CORPUS = tomllib.loads((Path(__file__).parents[2] / "dpch" / "fixtures" / "corpus.toml").read_text())


@pytest.fixture(scope="module")
def session(store_dsn, visits_db, keeper):
    s = dpch.connect(store_dsn, database=visits_db, analyst="corpus", default_budget=Budget(1e6, 0.5), seed=3)
    yield s
    s.close()


@pytest.mark.parametrize("case", CORPUS["accepted"], ids=[c["sql"][:60] for c in CORPUS["accepted"]])
def test_accepted(session, case):
    release = session.query(case["sql"])
    assert release.rows, "every accepted query releases at least one row"
    quantile = "quantile" in case["sql"] or "median" in case["sql"]
    with_interval = 0
    for row, intervals in zip(release.rows, release.intervals, strict=True):
        for value, interval in zip(row, intervals, strict=True):
            if interval is not None:
                lo, hi = interval
                assert lo <= hi and isinstance(value, float)
                with_interval += 1
    assert with_interval > 0 or quantile, "statistics carry intervals (quantiles state a rank error instead)"
    if quantile:
        assert any("rank is within" in n for n in release.notes)
    expected = session.explain(case["sql"]).cost
    assert release.cost == expected and 0 < release.cost.epsilon


@pytest.mark.parametrize("case", CORPUS["rejected"], ids=[c["sql"][:60] for c in CORPUS["rejected"]])
def test_rejected(session, case):
    ledger = session.engine.table("dpch_ledger")
    before = session.engine.query_rows(f"SELECT count() FROM {ledger}")[0][0]
    with pytest.raises(DpchError) as info:
        session.query(case["sql"])
    assert info.value.kind == case["kind"], str(info.value)
    assert case["reason"] in str(info.value)
    after = session.engine.query_rows(f"SELECT count() FROM {ledger}")[0][0]
    assert after == before, "a rejected query must leave no ledger row"


def test_corpus_size():
    """Issue 5: at least 120 accepted and 60 rejected queries over three tables."""
    assert len(CORPUS["accepted"]) >= 120 and len(CORPUS["rejected"]) >= 60
    tables = {t for c in CORPUS["accepted"] for t in ("visits", "people", "regions") if t in c["sql"]}
    assert tables == {"visits", "people", "regions"}
