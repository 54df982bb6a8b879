"""The cap's key (issue 27 item 1): fresh for each release, fixed wherever a release continues on the
same exact value, and never shown.

Which rows each unit keeps is decided by a 128-bit key drawn for the release
(:meth:`dpch.mechanisms.sampling.NoiseSource.cap_key`), bound as query parameters. Checked here:

- every private aggregate runs with a key, and two releases run with two different keys;
- the measures of one release come from the same kept rows (``x`` and its copy ``y`` sum alike, also
  where the capped rows are read twice: the per-unit group limit);
- an accuracy-first answer reads the exact value once (its noise-reduction steps continue on it), and
  ``refine`` reads nothing: the choice of rows cannot change along a Brownian path;
- the key is in no SQL text dpch runs or shows (EXPLAIN shows the placeholders), in no message, and in
  no ledger row.
"""

from __future__ import annotations

import pytest

from dpch import Budget
from dpch.sql.cap import CAP_KEY_PARAMETERS
from dpch.store.engine import Engine

CAP = 2


@pytest.fixture
def session(connect):
    s = connect(analyst="capkey", filter="zcdp_bm", default_budget=Budget(50.0, 1e-6))
    engine = s.engine
    engine.command(
        f"CREATE TABLE {engine.table('t')} (uid UInt32, region String COMMENT 'dp: public, values=[\"a\", \"b\", "
        "\"c\"]', page String, x UInt8 COMMENT 'dp: bounds=[0, 10]', y UInt8 COMMENT 'dp: bounds=[0, 10]', seq UInt32) "
        f"ENGINE = MergeTree ORDER BY (uid, seq) "
        f"COMMENT 'dp: privacy_unit=uid, max_rows_per_unit={CAP}, max_groups_per_unit=1'")
    rows = [(u, "abc"[(u + i) % 3], f"p{i % 4}", (u * 7 + i * 3) % 11, (u * 7 + i * 3) % 11, i)
            for u in range(60) for i in range(9)]
    engine.insert("t", rows, ["uid", "region", "page", "x", "y", "seq"])
    s.policy.reload()
    return s


@pytest.fixture
def runs(monkeypatch):
    """Every private aggregate run: (sql, parameters)."""
    seen: list[tuple[str, dict]] = []
    real = Engine.run_private

    def run_private(self: Engine, sql: str, parameters: dict | None = None) -> list[tuple]:
        seen.append((sql, dict(parameters or {})))
        return real(self, sql, parameters)

    monkeypatch.setattr(Engine, "run_private", run_private)
    return seen


def _key(parameters: dict) -> tuple[int, int]:
    assert set(parameters) == set(CAP_KEY_PARAMETERS), parameters
    return parameters[CAP_KEY_PARAMETERS[0]], parameters[CAP_KEY_PARAMETERS[1]]


def test_each_release_has_a_fresh_key(session, runs):
    session.query("SELECT sum(x) FROM t", epsilon=0.5)
    session.query("SELECT sum(x) FROM t", epsilon=0.5)
    keys = [_key(p) for _, p in runs]
    assert len(keys) == 2 and keys[0] != keys[1]
    assert all("{dpch_cap_key0: UInt64}" in sql for sql, _ in runs)


@pytest.mark.parametrize("sql", ["SELECT sum(x), sum(y) FROM t",
                                 "SELECT region, sum(x), sum(y) FROM t GROUP BY region",
                                 # keys without a declared domain, max_groups_per_unit = 1 < cap: the query
                                 # reads the capped rows twice (each unit's groups, then the rows in them)
                                 "SELECT page, sum(x), sum(y) FROM t GROUP BY page SETTINGS dp_delta = 1e-7"])
def test_measures_of_one_release_share_the_rows(session, sql):
    """x and y are equal in every row: from the same kept rows their exact sums are equal, under any
    key; rows chosen apart for each measure would differ (each unit's 9 rows hold several values)."""
    from dpch.pipeline.execute import exact
    from dpch.sql.rewrite import emit_sql

    plan = session.explain(sql).plan
    assert plan.restrict_groups == ("page" in sql)
    emitted = emit_sql(plan, session.engine.database)
    for key in [(k, k * 31 + 7) for k in range(1, 9)]:
        data = exact(session.engine, plan, emitted, key)
        assert list(data.measures["m0"]) == list(data.measures["m1"]), key


def test_the_choice_changes_with_the_key(session):
    """Negative control for the test above: the kept rows do depend on the key (the cap binds)."""
    from dpch.pipeline.execute import exact
    from dpch.sql.rewrite import emit_sql

    plan = session.explain("SELECT sum(x) FROM t").plan
    emitted = emit_sql(plan, session.engine.database)
    sums = {float(exact(session.engine, plan, emitted, (k, k + 1)).measures["m0"][0]) for k in range(8)}
    assert len(sums) > 1


def test_accuracy_first_reads_the_exact_value_once_and_refine_never(session, runs):
    release = session.query("SELECT count(*) FROM t SETTINGS dp_relative_error = 0.05")
    assert release.accuracy.met and release.accuracy.steps >= 1
    assert len(runs) == 1, "the noise-reduction steps continue on one exact value, read once"
    _key(runs[0][1])
    grouped = session.query("SELECT region, count(*) FROM t GROUP BY region", accuracy=20.0)
    assert len(runs) == 2
    refined = session.refine(grouped.release_id)
    assert refined.accuracy.refinements == 1
    assert len(runs) == 2, "refine continues the stored path: it reads nothing, so its rows cannot change"


def _texts(session) -> str:
    """Every ledger row of the session's store, as text."""
    rows = session.engine.query_rows(f"SELECT * FROM {session.engine.table('dpch_ledger')}")
    return repr(rows)


def test_the_key_is_never_shown(session, runs):
    sql = "SELECT region, sum(x) FROM t GROUP BY region"
    explained = session.explain(sql)
    assert "{dpch_cap_key0: UInt64}" in explained.sql and "{dpch_cap_key1: UInt64}" in explained.sql
    release = session.query(sql, epsilon=0.5)
    bad = session.query("SELECT sum(x) FROM t", epsilon=0.5)
    key = _key(runs[-1][1])
    assert len(runs) == 2
    forms = [str(k) for k in key] + [f"{k:x}" for k in key] + [f"{k:X}" for k in key]
    texts = [explained.sql, repr(explained), repr(release), repr(bad), _texts(session)]
    texts += [sql for sql, _ in runs]
    for i, text in enumerate(texts):
        for form in forms:
            assert form not in text, f"the key is in text {i}"
    # an execution error's message (the tripwire's) names no key either
    from tests.helpers import inject_totality_gap

    with pytest.MonkeyPatch.context() as patch:
        inject_totality_gap(patch)
        with pytest.raises(Exception) as failed:
            session.query("SELECT sum(x) FROM t", epsilon=0.5)
    failed_key = _key(runs[-1][1])
    for form in [str(k) for k in failed_key] + [f"{k:x}" for k in failed_key]:
        assert form not in str(failed.value) and form not in repr(failed.value) and form not in _texts(session)


def test_row_identity_per_engine():
    """MergeTree: the row number; Distributed: the shard too (each shard numbers its own rows); an
    engine without these virtual columns: no identity, and the order is rand64()."""
    from dpch.sql.cap import row_identity, row_order
    from dpch.sql.nodes import render

    assert [render(e) for e in row_identity("ReplacingMergeTree", "t0")] == \
        ["t0._part_starting_offset + t0._part_offset"]
    assert [render(e) for e in row_identity("Distributed", "t0")] == \
        ["t0._shard_num", "t0._part_starting_offset + t0._part_offset"]
    assert row_identity("Memory", "t0") is None
    assert render(row_order(None)) == "rand64()"


def test_a_table_without_row_numbers_is_capped_at_random(connect):
    """A Memory table has no _part_offset: its rows are ordered by rand64() (uniform; not repeatable,
    and read once per release)."""
    s = connect(analyst="memory")
    s.engine.command(f"CREATE TABLE {s.engine.table('m')} (uid UInt32, x UInt8 COMMENT 'dp: bounds=[0, 10]') "
                     "ENGINE = Memory COMMENT 'dp: privacy_unit=uid, max_rows_per_unit=2'")
    s.engine.insert("m", [(u, 10 if i == 0 else 0) for u in range(50) for i in range(10)], ["uid", "x"])
    s.policy.reload()
    assert "rand64()" in s.explain("SELECT sum(x) FROM m").sql
    release = s.query("SELECT sum(x) FROM m", epsilon=1.0)
    assert release.rows
