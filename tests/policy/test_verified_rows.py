"""A verified rows-per-unit bound skips the cap only while the data is what was verified (issue 14, part 5).

``verify_rows_per_unit`` records the table's parts (name, checksum) in its COMMENT; a query skips
the ``LIMIT k BY`` cap while the active parts are exactly those, and falls back to the cap after
any INSERT, merge or re-creation. Everything on real chdb.
"""

from __future__ import annotations

import pytest

from dpch import PolicyError
from dpch.pipeline.execute import exact
from dpch.policy.parts import active_parts
from dpch.policy.verify import verify_rows_per_unit
from dpch.sql.rewrite import emit_tree, render

CAP = 3
DDL = ("uid UInt32, seq UInt32, region String COMMENT 'dp: public, values=[\"a\", \"b\"]', "
       "x Int32 COMMENT 'dp: bounds=[0, 100]'")
#: at most CAP rows per unit: the cap changes nothing here, so capped and uncapped agree
ROWS = [(u, s, "ab"[(u + s) % 2], 10 * u + s) for u in range(1, 21) for s in range(1 + u % CAP)]
SUM = "SELECT sum(x), count(*) FROM t"
GROUPED = "SELECT region, avg(x) FROM t GROUP BY region"


def _create(session, rows=ROWS) -> None:
    engine = session.engine
    engine.command(f"CREATE TABLE {engine.table('t')} ({DDL}) ENGINE = MergeTree ORDER BY (uid, seq) "
                   f"COMMENT 'dp: privacy_unit=uid, max_rows_per_unit={CAP}'")
    engine.insert("t", rows, ["uid", "seq", "region", "x"])
    session.policy.reload()


@pytest.fixture
def session(connect):
    s = connect(analyst="verify")
    _create(s)
    return s


def _capped(session, sql: str) -> bool:
    return "LIMIT" in render(emit_tree(session.explain(sql).plan))


def _values(session, sql: str, *, fast_cap: bool = True):
    plan = session.explain(sql).plan
    data = exact(session.engine, plan, render(emit_tree(plan, fast_cap=fast_cap)))
    return {k: tuple(float(data.measures[m][i]) for m in sorted(data.measures)) for i, k in enumerate(data.keys)}


#: queries whose exact values must not change when the cap is skipped (the data is within the bound)
SAME = (SUM, GROUPED, "SELECT count(*) FROM t", "SELECT count() FROM t WHERE x > 50",
        "SELECT region, count(*), sum(x) FROM t WHERE seq > 0 GROUP BY region",
        "SELECT seq, count(*) FROM t GROUP BY seq SETTINGS dp_delta = 1e-6",
        "SELECT avg(y) FROM (SELECT x * 2 AS y FROM t WHERE region = 'a')")


def test_verified_table_skips_the_cap_with_the_same_answer(session):
    reference = {sql: _values(session, sql) for sql in SAME}
    assert _capped(session, SUM)
    parts = verify_rows_per_unit(session.engine, session.policy, "t")
    assert parts == active_parts(session.engine, "t")
    assert "verified_parts" in session.engine.table_comment("t")
    for sql in SAME:
        assert not _capped(session, sql), sql
        assert _values(session, sql) == reference[sql], sql
    release = session.query(SUM)
    assert release.rows  # a full release runs through the verified form (its probe included)


def test_an_insert_after_verification_brings_the_cap_back(session):
    verify_rows_per_unit(session.engine, session.policy, "t")
    assert not _capped(session, SUM)
    # unit 1 gets CAP + 2 rows: uncapped it would contribute too much
    session.engine.insert("t", [(1, 100 + i, "a", 100) for i in range(CAP + 1)], ["uid", "seq", "region", "x"])
    assert _capped(session, SUM), "the stale verification kept skipping the cap"
    counted = _values(session, SUM)
    per_unit = session.engine.query_rows(
        f"SELECT sum(least(c, {CAP})) FROM (SELECT count() AS c FROM {session.engine.table('t')} GROUP BY uid)")
    assert counted[()][1] == per_unit[0][0]
    assert "stale" in session.policy.table(session.engine, "t").describe()


def test_a_query_planned_before_an_insert_reads_only_the_verified_rows(session):
    """The change lands between the lookup and the run: the emitted query (planned as verified)
    reads the verified parts only — the new rows are not read, so no unit passes the bound."""
    verify_rows_per_unit(session.engine, session.policy, "t")
    plan = session.explain(SUM).plan
    sql = render(emit_tree(plan))
    assert "LIMIT" not in sql
    before = exact(session.engine, plan, sql).measures
    session.engine.insert("t", [(1, 100 + i, "a", 100) for i in range(CAP + 1)], ["uid", "seq", "region", "x"])
    after = exact(session.engine, plan, sql).measures
    assert after["m1"][0] <= before["m1"][0], "rows written after the verification were read uncapped"


def _without_the_parts_check(tree):
    """``tree`` as if the parts check had passed just before the change: its conjunct replaced by 1."""
    from sqlglot import exp

    for eq in list(tree.find_all(exp.EQ)):
        if isinstance(eq.this, exp.Subquery) and "system" in eq.this.sql():
            eq.replace(exp.true())
    return tree


@pytest.mark.parametrize("guard", [True, False], ids=["verified parts only", "negative control: no part guard"])
def test_the_part_guard_alone_keeps_new_rows_out(session, guard):
    """The race the guard exists for: the parts check passes, then an INSERT lands before the read.
    Simulated by dropping the check's conjunct: the verified-parts guard (pruning by ``_part``) must
    keep the new part out; without the guard the new rows are read (so this test can fail)."""
    from sqlglot import exp

    verify_rows_per_unit(session.engine, session.policy, "t")
    plan = session.explain(SUM).plan
    tree = _without_the_parts_check(emit_tree(plan))
    if not guard:
        for hint in list(tree.find_all(exp.Anonymous)):
            if hint.name == "indexHint":
                hint.replace(exp.true())
    before = exact(session.engine, plan, render(tree)).measures["m1"][0]
    session.engine.insert("t", [(1, 100 + i, "a", 100) for i in range(CAP + 1)], ["uid", "seq", "region", "x"])
    after = exact(session.engine, plan, render(tree)).measures["m1"][0]
    if guard:
        assert after == before, "rows of a part written after the check were read"
    else:
        assert after == before + CAP + 1


def test_a_merge_makes_the_verification_stale(session):
    session.engine.insert("t", [(21, 1, "a", 5)], ["uid", "seq", "region", "x"])  # a second part
    verify_rows_per_unit(session.engine, session.policy, "t")
    assert not _capped(session, SUM)
    session.engine.command(f"OPTIMIZE TABLE {session.engine.table('t')} FINAL")
    assert _capped(session, SUM)


def test_a_recreated_table_with_the_same_part_names_is_not_verified(session):
    """Dropping the table and creating it again restarts part names at all_1_1_0: the checksum
    tells the new data apart (a record of part names alone would be fooled: the negative control)."""
    verify_rows_per_unit(session.engine, session.policy, "t")
    comment = session.engine.table_comment("t")
    old = active_parts(session.engine, "t")
    planned = session.explain(SUM).plan  # planned while verified, run after the re-creation
    planned_sql = render(emit_tree(planned))
    session.engine.command(f"DROP TABLE {session.engine.table('t')}")
    heavy = ROWS + [(1, 100 + i, "a", 100) for i in range(CAP + 1)]
    _create(session, heavy)
    session.engine.command(f"ALTER TABLE {session.engine.table('t')} MODIFY COMMENT "
                           f"'{comment.replace(chr(39), '')}'")  # the old record, copied over
    session.policy.reload()
    new = active_parts(session.engine, "t")
    assert [n for n, _ in new] == [n for n, _ in old], "the control needs colliding part names"
    assert new != old
    # inside the query: the part names match, the checksums do not, so nothing is read
    assert exact(session.engine, planned, planned_sql).measures["m1"][0] == 0
    assert _capped(session, SUM)
    assert _values(session, SUM) == _values(session, SUM, fast_cap=False)


def test_verification_refuses_a_table_over_the_bound(connect):
    s = connect(analyst="verify")
    _create(s, ROWS + [(1, 100 + i, "a", 100) for i in range(CAP + 1)])
    with pytest.raises(PolicyError, match="more than max_rows_per_unit"):
        verify_rows_per_unit(s.engine, s.policy, "t")
    assert "verified_parts" not in s.engine.table_comment("t")
    assert _capped(s, SUM)


def test_a_malformed_record_is_refused(connect):
    s = connect(analyst="verify")
    _create(s)
    s.engine.command(f"ALTER TABLE {s.engine.table('t')} MODIFY COMMENT "
                     f"'dp: privacy_unit=uid, max_rows_per_unit={CAP}, verified_parts=[\"all_1_1_0\"]'")
    s.policy.reload()
    with pytest.raises(PolicyError, match="verified_parts"):
        s.policy.table(s.engine, "t")


def test_with_item_replaces_the_key_and_keeps_the_rest():
    from dpch.policy.annotations import parse_annotation, with_item

    comment = 'dp: privacy_unit=uid, max_rows_per_unit=3, verified_parts=[["a", "b"]], note="x, y"'
    updated = with_item(comment, "verified_parts", [["c", "d"]])
    assert parse_annotation(updated, where="t") == {"privacy_unit": "uid", "max_rows_per_unit": 3,
                                                    "verified_parts": [["c", "d"]], "note": "x, y"}
    assert parse_annotation(with_item("an ordinary comment", "k", 1), where="t") == {"k": 1}
