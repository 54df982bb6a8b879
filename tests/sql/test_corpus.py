"""The query corpus (sql_fixtures/corpus.toml) against the demo table on embedded chdb."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

import dpch
from dpch import Budget, DpchError

CORPUS = tomllib.loads((Path(__file__).parents[2] / "sql_fixtures" / "corpus.toml").read_text())


@pytest.fixture(scope="module")
def session(store_dsn, visits_db, keeper):
    s = dpch.connect(store_dsn, database=visits_db, analyst="corpus", default_budget=Budget(1e6, 0.5), seed=3)
    yield s
    s.close()


@pytest.mark.parametrize("case", CORPUS["accepted"], ids=[c["sql"][:60] for c in CORPUS["accepted"]])
def test_accepted(session, case):
    release = session.query(case["sql"])
    assert release.rows, "every accepted query releases at least one row"
    for row, intervals in zip(release.rows, release.intervals, strict=True):
        for value, interval in zip(row, intervals, strict=True):
            if interval is not None:
                lo, hi = interval
                assert lo <= hi and isinstance(value, float)
    assert release.cost.epsilon > 0


@pytest.mark.parametrize("case", CORPUS["rejected"], ids=[c["sql"][:60] for c in CORPUS["rejected"]])
def test_rejected(session, case):
    before = session.budget().releases
    with pytest.raises(DpchError) as info:
        session.query(case["sql"])
    assert info.value.kind == case["kind"], str(info.value)
    assert case["reason"] in str(info.value)
    assert session.budget().releases == before
