"""A verified rows-per-unit bound: the released value is always the capped aggregate (issue 14, part 5).

``verify_rows_per_unit`` records the table's parts in the dpch-owned table ``dpch_verified``; every
query on the table then reads its rows as ``(uncapped WHERE G AND <recorded parts>) UNION ALL
(capped WHERE NOT G)``, G being "the active parts are now the recorded ones", evaluated inside the
query. Whatever G's value the exact aggregates equal those of the always-capped query
(``emit_tree(plan, fast_cap=False)``): checked while verified, after an INSERT that puts a unit over
the bound (the capped value, not 0, not the uncapped one), and in the check-then-INSERT race.
Negative controls show that each part of the form is needed. Everything on real chdb.
"""

from __future__ import annotations

import json

import pytest
from sqlglot import exp

from dpch import PolicyError
from dpch.pipeline.execute import exact
from dpch.policy.parts import current_parts
from dpch.policy.verified import VERIFIED_TABLE
from dpch.policy.verify import verify_rows_per_unit
from dpch.sql.cap import VERIFIED
from dpch.sql.rewrite import emit_tree, render
from tests.helpers import CAP_KEY, query_keyed

CAP = 3
DDL = ("uid UInt32, seq UInt32, region String COMMENT 'dp: public, values=[\"a\", \"b\"]', "
       "x Int32 COMMENT 'dp: bounds=[0, 100]'")
COLUMNS = ["uid", "seq", "region", "x"]
#: at most CAP rows per unit: the cap changes nothing here, so capped and uncapped agree
ROWS = [(u, s, "ab"[(u + s) % 2], 10 * u + s) for u in range(1, 21) for s in range(1 + u % CAP)]
#: unit 1 gets CAP + 2 more rows: over the bound
HEAVY = [(1, 100 + i, "a", 100) for i in range(CAP + 2)]
SUM = "SELECT sum(x), count(*) FROM t"
GROUPED = "SELECT region, avg(x) FROM t GROUP BY region"
#: queries whose exact values must equal the always-capped ones
SAME = (SUM, GROUPED, "SELECT count(*) FROM t", "SELECT count() FROM t WHERE x > 50",
        "SELECT region, count(*), sum(x) FROM t WHERE seq > 0 GROUP BY region",
        "SELECT seq, count(*) FROM t GROUP BY seq SETTINGS dp_delta = 1e-6",
        "SELECT avg(y) FROM (SELECT x * 2 AS y FROM t WHERE region = 'a')")
COMMENT = f"dp: privacy_unit=uid, max_rows_per_unit={CAP}"


def _create(session, rows=ROWS, comment=COMMENT) -> None:
    engine = session.engine
    engine.command(f"CREATE TABLE {engine.table('t')} ({DDL}) ENGINE = MergeTree ORDER BY (uid, seq) "
                   f"COMMENT '{comment}'")
    engine.insert("t", rows, COLUMNS)
    session.policy.reload()


@pytest.fixture(params=["one stream", "split_cap"])
def session(connect, request):
    s = connect(analyst="verify")
    _create(s, comment=COMMENT + (", split_cap" if request.param == "split_cap" else ""))
    return s


def _insert(session, rows) -> None:
    session.engine.insert("t", rows, COLUMNS)
    session.policy.reload()


def _values(session, plan, tree) -> dict:
    data = exact(session.engine, plan, render(tree), CAP_KEY)
    return {k: tuple(float(data.measures[m][i]) for m in sorted(data.measures)) for i, k in enumerate(data.keys)}


def _emitted_and_capped(session, sql: str, plan=None) -> tuple[dict, dict]:
    plan = plan or session.explain(sql).plan
    reference = emit_tree(plan, fast_cap=False)
    assert VERIFIED not in render(reference) and "LIMIT 3 BY" in render(reference)  # always capped
    return _values(session, plan, emit_tree(plan)), _values(session, plan, reference)


def _guarded(session, sql: str) -> bool:
    return VERIFIED in render(emit_tree(session.explain(sql).plan))


def _uncapped_count(session) -> int:
    return session.engine.query_rows(f"SELECT count() FROM {session.engine.table('t')}")[0][0]


def test_verified_and_current_gives_the_capped_values(session):
    assert not _guarded(session, SUM)
    result = verify_rows_per_unit(session.engine, session.policy, "t")
    assert (result.bound, result.rows, result.units) == (CAP, len(ROWS), 20)
    assert session.policy.table(session.engine, "t").verified_current
    for sql in SAME:
        assert _guarded(session, sql), sql
        emitted, capped = _emitted_and_capped(session, sql)
        assert emitted == capped, sql
    release = session.query(SUM)
    assert release.rows  # a full release (its probes included) runs through the guarded form


def test_stale_after_an_insert_gives_the_capped_value_not_zero_not_uncapped(session):
    verify_rows_per_unit(session.engine, session.policy, "t")
    planned = session.explain(SUM).plan  # planned while current, run after the change
    _insert(session, HEAVY)
    assert not session.policy.table(session.engine, "t").verified_current
    for plan in (planned, session.explain(SUM).plan):
        emitted, capped = _emitted_and_capped(session, SUM, plan)
        assert emitted == capped
        count = emitted[()][1]
        assert count == len(ROWS) + 1  # unit 1 had 2 rows, capped at 3: one more, not CAP + 2
        assert count not in (0, _uncapped_count(session))
    for sql in SAME:
        emitted, capped = _emitted_and_capped(session, sql)
        assert emitted == capped, sql


def _branches(tree: exp.Expr) -> tuple[exp.Select, list[exp.Select]]:
    """The guarded branch and the capped branch(es) of ``tree``'s rows."""
    selects = [s for s in tree.find_all(exp.Select) if s.args.get("where") is not None
               and any(c.name == VERIFIED for c in s.args["where"].find_all(exp.Column))]
    first = [s for s in selects if not s.args["where"].find(exp.Not)]
    assert len(first) == 1 and len(selects) > 1
    return first[0], [s for s in selects if s is not first[0]]


def _set_guard(select: exp.Select, value: bool) -> None:
    """The branch's guard G replaced by a constant (as if G had been evaluated to ``value``)."""
    for call in list(select.args["where"].find_all(exp.Anonymous)):
        if call.name == "tupleElement" and call.expressions[1].name == "1":
            call.replace(exp.true() if value else exp.false())


def _drop_hint(select: exp.Select) -> None:
    for call in list(select.args["where"].find_all(exp.Anonymous)):
        if call.name == "indexHint":
            call.replace(exp.true())


@pytest.mark.parametrize("hint", [True, False], ids=["recorded parts only", "negative control: no part hint"])
def test_the_check_then_insert_race(session, hint):
    """G is evaluated true, then an INSERT lands before the read: simulated by replacing G by its value
    then (true in branch 1, false in the capped branch). Branch 1 must read only the recorded parts,
    so the value is the capped value of the data as verified; without the hint the new rows are read
    uncapped (so this test can fail)."""
    verify_rows_per_unit(session.engine, session.policy, "t")
    plan = session.explain(SUM).plan
    tree = emit_tree(plan)
    first, rest = _branches(tree)
    _set_guard(first, True)
    for select in rest:
        _set_guard(select, True)  # NOT G: false
    if not hint:
        _drop_hint(first)
    before = _values(session, plan, tree)
    assert before == _emitted_and_capped(session, SUM, plan)[1]
    _insert(session, HEAVY)
    after = _values(session, plan, tree)
    if hint:
        assert after == before, "rows of a part written after the check were read"
    else:
        assert after[()][1] == before[()][1] + len(HEAVY)


def test_negative_control_without_the_capped_branch_the_stale_value_is_wrong(session):
    verify_rows_per_unit(session.engine, session.policy, "t")
    _insert(session, HEAVY)
    plan = session.explain(SUM).plan
    tree = emit_tree(plan)
    union = tree.find(exp.Union)
    union.replace(union.this.copy())  # branch 1 alone
    assert _values(session, plan, tree) == {(): (0.0, 0.0)}
    assert _emitted_and_capped(session, SUM, plan)[1][()][1] == len(ROWS) + 1


def test_negative_control_without_the_guard_branch_1_reads_uncapped_rows(session):
    """Stale, with branch 1's guard dropped (its part hint kept): the rows of the recorded parts are
    read uncapped beside the capped rows, and the count is wrong."""
    verify_rows_per_unit(session.engine, session.policy, "t")
    _insert(session, HEAVY)
    plan = session.explain(SUM).plan
    tree = emit_tree(plan)
    first, _ = _branches(tree)
    _set_guard(first, True)
    assert _values(session, plan, tree)[()][1] == 2 * len(ROWS) + 1


def test_when_verified_the_capped_branch_reads_no_row(session):
    """G true: branch 2's WHERE is constant false and ClickHouse reads no part for it; G false: branch 1
    reads none. ``max_rows_to_read`` = the table's rows plus a few (the primary index's marks, which
    the split point reads, and the record's row) fails the query if both branches read the table."""
    verify_rows_per_unit(session.engine, session.policy, "t")
    plan = session.explain(SUM).plan
    sql = render(emit_tree(plan))
    marks = session.engine.query_rows(
        f"SELECT sum(marks) FROM system.parts WHERE database = '{session.engine.database}' AND table = 't' AND active")
    limit = f" , max_rows_to_read = {len(ROWS) + int(marks[0][0]) + 5}, read_overflow_mode = 'throw'"
    query_keyed(session.engine, sql + limit)
    with pytest.raises(Exception, match="(?i)limit"):  # the control: both branches over the limit
        tree = emit_tree(plan)
        first, rest = _branches(tree)
        for select in rest:
            _set_guard(select, True)
            select.args["where"].find(exp.Not).replace(exp.true())
        query_keyed(session.engine, render(tree) + limit)


def test_a_merge_makes_the_verification_stale(session):
    _insert(session, [(21, 1, "a", 5)])  # a second part
    verify_rows_per_unit(session.engine, session.policy, "t")
    session.engine.command(f"OPTIMIZE TABLE {session.engine.table('t')} FINAL")
    session.policy.reload()
    assert not session.policy.table(session.engine, "t").verified_current
    emitted, capped = _emitted_and_capped(session, SUM)
    assert emitted == capped


def test_a_recreated_table_with_the_same_part_names_is_not_verified(session):
    """Dropping the table and creating it again restarts part names at all_1_1_0: the checksums tell
    the new data apart, and the query caps."""
    verify_rows_per_unit(session.engine, session.policy, "t")
    old = current_parts(session.engine, "t")
    comment = session.engine.table_comment("t")
    session.engine.command(f"DROP TABLE {session.engine.table('t')}")
    _create(session, ROWS + HEAVY, comment=comment)
    new = current_parts(session.engine, "t")
    assert new.split(":")[0] == old.split(":")[0] and new != old, "the control needs colliding part names"
    assert not session.policy.table(session.engine, "t").verified_current
    emitted, capped = _emitted_and_capped(session, SUM)
    assert emitted == capped and emitted[()][1] == len(ROWS) + 1


def test_a_lower_bound_than_verified_is_not_trusted(session):
    """Verified at CAP, the owner lowers max_rows_per_unit to 1: the record proves nothing about 1."""
    verify_rows_per_unit(session.engine, session.policy, "t")
    session.engine.command(f"ALTER TABLE {session.engine.table('t')} MODIFY COMMENT "
                           "'dp: privacy_unit=uid, max_rows_per_unit=1'")
    session.policy.reload()
    assert not session.policy.table(session.engine, "t").verified
    plan = session.explain(SUM).plan
    tree = emit_tree(plan)
    assert VERIFIED not in render(tree)
    assert _values(session, plan, tree)[()][1] == 20


def test_verification_refuses_a_table_over_the_bound(connect):
    s = connect(analyst="verify")
    _create(s, ROWS + HEAVY)
    with pytest.raises(PolicyError, match="more than max_rows_per_unit"):
        verify_rows_per_unit(s.engine, s.policy, "t")
    assert not s.policy.table(s.engine, "t").verified
    assert not _guarded(s, SUM)


def _checksums(session) -> list[str]:
    rows = session.engine.query_rows("SELECT hash_of_all_files FROM system.parts WHERE database = {db:String} "
                                     "AND table = 't'", {"db": session.engine.database})
    return [str(r[0]) for r in rows]


def test_no_checksum_is_shown(connect):
    """Neither ``dpch policy show`` (text or JSON), the COMMENT, nor EXPLAIN's SQL holds a checksum or
    the part list: they identify the data."""
    s = connect(analyst="verify")
    _create(s)
    verify_rows_per_unit(s.engine, s.policy, "t")
    checksums = _checksums(s)
    assert checksums and all(len(c) >= 16 for c in checksums)
    policy = s.table_policy("t")
    shown = [policy.describe(), json.dumps(policy.as_dict()), s.engine.table_comment("t"), s.explain(SUM).sql,
             s.explain(GROUPED).sql]
    assert "rows per unit verified (current" in shown[0]
    for text in shown:
        assert not any(c in text for c in checksums), text
        assert "all_1_1_0" not in text
    assert any(c in current_parts(s.engine, "t") for c in checksums)  # the control: the record has them


def test_a_legacy_comment_record_is_ignored_and_removed(connect):
    """A COMMENT written by the older verification (``verified_parts=[[name, checksum]]``) still parses;
    it skips nothing, and verifying again removes it."""
    s = connect(analyst="verify")
    _create(s)
    legacy = f'{COMMENT}, verified_parts=[["all_1_1_0", "0123456789abcdef0123456789abcdef"]]'
    s.engine.command(f"ALTER TABLE {s.engine.table('t')} MODIFY COMMENT '{legacy}'")
    s.policy.reload()
    assert not s.policy.table(s.engine, "t").verified
    assert not _guarded(s, SUM)
    verify_rows_per_unit(s.engine, s.policy, "t")
    assert "verified_parts" not in s.engine.table_comment("t")
    assert s.engine.table_comment("t").startswith("dp: privacy_unit=uid")
    assert _guarded(s, SUM)


def test_the_record_lives_in_dpch_verified_and_is_not_queryable(connect):
    s = connect(analyst="verify")
    _create(s)
    verify_rows_per_unit(s.engine, s.policy, "t")
    assert s.engine.table_exists(VERIFIED_TABLE)
    assert VERIFIED_TABLE not in [p.table for p in s.tables()]
    with pytest.raises(Exception, match="no privacy policy"):
        s.query(f"SELECT count(*) FROM {VERIFIED_TABLE}")


def test_the_guard_lists_the_parts_as_the_verification_does(connect):
    """The emitted guard and ``PARTS_SQL`` compute the part list with the same expression."""
    from dpch.sql.cap import current_parts as current_parts_tree

    s = connect(analyst="verify")
    _create(s)
    _insert(s, HEAVY)
    tree = current_parts_tree(s.engine.database, "t")
    assert s.engine.query_rows(render(tree.this))[0][0] == current_parts(s.engine, "t")
    assert current_parts(s.engine, "t").count(",") == 1


def test_without_item_removes_the_key_and_keeps_the_rest():
    from dpch.policy.annotations import parse_annotation, without_item

    comment = 'dp: privacy_unit=uid, verified_parts=[["a", "b"]], max_rows_per_unit=3, note="x, y"'
    assert parse_annotation(without_item(comment, "verified_parts"), where="t") == {
        "privacy_unit": "uid", "max_rows_per_unit": 3, "note": "x, y"}


def test_past_the_part_limit_both_lists_are_empty_not_null(connect, monkeypatch):
    """A table with more active parts than the limit reads as the empty list ('') in the emitted guard and
    in the verification alike, never NULL (a NULL guard would make both branches read nothing). Checked
    with the limit lowered to 1 and two parts; the guard at the real limit is the test above."""
    import dpch.policy.parts
    import dpch.sql.cap
    from dpch.sql.cap import current_parts as current_parts_tree

    s = connect(analyst="verify")
    _create(s)
    _insert(s, HEAVY)
    monkeypatch.setattr(dpch.policy.parts, "MAX_PARTS", 1)
    monkeypatch.setattr(dpch.sql.cap, "MAX_PARTS", 1)
    value = s.engine.query_rows(render(current_parts_tree(s.engine.database, "t").this))[0][0]
    assert value == "" and current_parts(s.engine, "t") == ""
    monkeypatch.setattr(dpch.sql.cap, "MAX_PARTS", 2)  # negative control: within the limit, the list
    assert s.engine.query_rows(render(current_parts_tree(s.engine.database, "t").this))[0][0].count(",") == 1
