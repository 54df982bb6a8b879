"""The fast forms of the contribution cap keep exactly the rows today's cap keeps (issue 14, part 5).

Today's cap is one ``ORDER BY … LIMIT k BY unit`` stream (``emit_tree(plan, fast_cap=False)``);
the emitted query splits it over two unit ranges of the primary index on tables ordered by their
unit whose owner declared ``split_cap`` (without it the cap stays one stream there), and computes
an ungrouped COUNT elsewhere (unordered, Nullable unit, joins) as Σ least(rows, k) per unit. For every query below, on
real chdb, the exact aggregates (``execute.exact``, the values noise is added to) of the emitted
query equal those of the one-stream cap, on data where many units have more than k rows (so the
cap binds: checked), integer-valued so that sums do not depend on the order of addition. Negative
controls: a split that loses a branch, or the unit at the split point, must be caught.
"""

from __future__ import annotations

import random

import pytest
from sqlglot import exp

from dpch.pipeline.execute import GroupData, exact
from dpch.sql.cap import keyed
from dpch.sql.rewrite import emit_tree, render

CAP = 3
REGIONS = ("a", "b", "c")
LABELS = ("p", "q", "r", "s")

#: table → (unit type, ORDER BY, extra settings, whether the owner declared split_cap)
TABLES = {
    "ordered": ("UInt32", "(uid, seq)", "", True),
    "ordered_str": ("String", "(uid, seq)", "", True),
    "ordered_unit_only": ("UInt64", "uid", "", True),
    # the same table without the owner's opt-in: the cap stays one stream
    "ordered_no_split": ("UInt32", "(uid, seq)", "", False),
    "nullable": ("Nullable(UInt32)", "(uid, seq)", ", allow_nullable_key = 1", True),
    "unordered": ("UInt32", "seq", "", True),
    "pk_prefix": ("UInt32", "(uid, seq) PRIMARY KEY uid", "", True),
    # ordered by the unit, but the primary index does not hold it: no split point to read, no split
    "pk_none": ("UInt32", "(uid, seq) PRIMARY KEY tuple()", "", True),
}


def _splittable(table: str, sql: str) -> bool:
    unit_type, order, _, _ = TABLES[table]
    return order != "seq" and "tuple()" not in order and not unit_type.startswith("Nullable") and "JOIN" not in sql


def _split(table: str, sql: str) -> bool:
    return _splittable(table, sql) and TABLES[table][3]

QUERIES = [
    "SELECT count(*) FROM {t}",
    "SELECT count() FROM {t} WHERE x > 20",
    "SELECT sum(x) FROM {t}",
    "SELECT sum(x), count(*) FROM {t} WHERE label != 'q'",
    "SELECT region, avg(x) FROM {t} GROUP BY region",
    "SELECT region, count(*), sum(x) FROM {t} WHERE x < 80 GROUP BY region",
    "SELECT label, count(*) FROM {t} GROUP BY label SETTINGS dp_delta = 1e-6",
    "SELECT count(*) FROM (SELECT uid, x FROM {t} WHERE x > 10)",
    "SELECT avg(y) FROM (SELECT x + 1 AS y FROM {t} WHERE label IN ('p', 'r'))",
    "SELECT count(*) FROM {t} JOIN dim AS d ON {t}.region = d.region",
    "SELECT d.name, count(*), sum(x) FROM {t} JOIN dim AS d ON {t}.region = d.region GROUP BY d.name",
    "SELECT count(), sum(x) FROM {t} LEFT JOIN dim AS d ON {t}.region = d.region WHERE d.name != 'Beta'",
]


def _rows(unit_type: str, seed: int) -> list[tuple]:
    """Units 1..60 with 0..9 rows each (cap 3), seq distinct within a unit (no ties in the stored
    order), a few NULL-unit rows when the unit is Nullable; shuffled."""
    rng = random.Random(seed)
    rows = []
    seq = 0
    for uid in range(1, 61):
        for _ in range(rng.randrange(10)):
            seq += 1
            unit = f"u{uid:03d}" if unit_type == "String" else uid
            rows.append((unit, seq, rng.choice(REGIONS), rng.randrange(101), rng.choice(LABELS)))
    if unit_type.startswith("Nullable"):
        rows += [(None, 10_000 + i, rng.choice(REGIONS), 100, "p") for i in range(12)]
    rng.shuffle(rows)
    return rows


@pytest.fixture
def session(connect):
    s = connect(analyst="cap")
    engine = s.engine
    for name, (unit_type, order, settings, split) in TABLES.items():
        engine.command(
            f"CREATE TABLE {engine.table(name)} (uid {unit_type}, seq UInt32, "
            "region String COMMENT 'dp: public, values=[\"a\", \"b\", \"c\"]', "
            "x Int32 COMMENT 'dp: bounds=[0, 100]', label String) "
            f"ENGINE = MergeTree ORDER BY {order} SETTINGS index_granularity = 4{settings} "
            f"COMMENT 'dp: privacy_unit=uid, max_rows_per_unit={CAP}{', split_cap' if split else ''}'")
        rows = _rows(unit_type, seed=len(name.removesuffix("_no_split")))  # the same data with and without split_cap
        # three INSERTs: three parts, a unit's rows spread over them (the in-order read merges)
        for i in range(3):
            engine.insert(name, rows[i::3], ["uid", "seq", "region", "x", "label"])
    engine.command(f"CREATE TABLE {engine.table('dim')} (region String, name String) ENGINE = MergeTree "
                   "ORDER BY tuple() COMMENT 'dp: public'")
    engine.insert("dim", [("a", "Alpha"), ("b", "Beta")], ["region", "name"])
    s.policy.reload()
    return s


#: one cap key for both forms compared: the same rows chosen (a fixed key, as a release's would be)
KEY = (0x0123456789ABCDEF, 0xFEDCBA9876543210)


def _exact(session, plan, tree: exp.Expr) -> GroupData:
    return exact(session.engine, plan, render(tree), KEY)


def _by_key(data: GroupData) -> dict[tuple, tuple]:
    """Each group's measures and units, by key (partition selection returns groups in any order)."""
    return {key: (tuple(float(data.measures[m][i]) for m in sorted(data.measures)), float(data.units[i]))
            for i, key in enumerate(data.keys)}


def _same(a: GroupData, b: GroupData) -> bool:
    return len(a.keys) == len(b.keys) and _by_key(a) == _by_key(b)


def _cases():
    return [pytest.param(t, q, id=f"{t}: {q.format(t=t)}") for t in TABLES for q in QUERIES]


@pytest.mark.parametrize(("table", "query"), _cases())
def test_fast_cap_keeps_the_same_rows(session, table, query):
    sql = query.format(t=table)
    plan = session.explain(sql).plan
    fast, reference = emit_tree(plan), emit_tree(plan, fast_cap=False)
    text = render(fast)
    # the rewrite under test is really in the emitted SQL (else the comparison is vacuous)
    single_count = len(plan.measures) == 1 and not plan.keys and plan.measures[0].sql == "count()"
    if _split(table, sql):
        assert "UNION ALL" in text and "mergeTreeIndex" in text
    elif single_count and not _splittable(table, sql):
        assert 'least("__n", 3)' in text
    else:
        assert text == render(reference)
    got, want = _exact(session, plan, fast), _exact(session, plan, reference)
    assert _same(got, want), f"{sql}: {got} != {want}"


def test_the_cap_binds_on_this_data(session):
    """Without the cap the answers differ: the data has units over k rows in every table."""
    for table in TABLES:
        sql = render(emit_tree(session.explain(f"SELECT count(*) FROM {table}").plan))
        capped = session.engine.query_rows(sql, keyed(sql, KEY))
        raw = session.engine.query_rows(f"SELECT count() FROM {session.engine.table(table)} WHERE uid IS NOT NULL")
        per_unit = session.engine.query_rows(
            f"SELECT sum(least(c, {CAP})) FROM (SELECT count() AS c FROM {session.engine.table(table)} "
            "WHERE uid IS NOT NULL GROUP BY uid)")
        assert capped == per_unit and capped[0][0] < raw[0][0], table


def _union(tree: exp.Expr) -> exp.Union:
    union = tree.find(exp.Union)
    assert union is not None
    return union


def test_negative_control_a_lost_branch_is_caught(session):
    plan = session.explain("SELECT sum(x) FROM ordered").plan
    reference = _exact(session, plan, emit_tree(plan, fast_cap=False))
    for keep in ("this", "expression"):
        broken = emit_tree(plan)
        union = _union(broken)
        union.replace(union.args[keep].this.copy())
        assert not _same(_exact(session, plan, broken), reference), f"dropping a branch (kept {keep}) went unnoticed"


def test_negative_control_a_gap_at_the_split_point_is_caught(session):
    """``u > p`` instead of ``NOT (u < p)`` loses the unit at the split point (a unit of the table)."""
    plan = session.explain("SELECT sum(x) FROM ordered").plan
    reference = _exact(session, plan, emit_tree(plan, fast_cap=False))
    broken = emit_tree(plan)
    negation = _union(broken).expression.find(exp.Not)
    below = negation.this.this
    negation.replace(exp.GT(this=below.this.copy(), expression=below.expression.copy()))
    assert not _same(_exact(session, plan, broken), reference)


def test_negative_control_count_without_least_is_caught(session):
    plan = session.explain("SELECT count(*) FROM unordered").plan
    reference = _exact(session, plan, emit_tree(plan, fast_cap=False))
    broken = emit_tree(plan)
    least = broken.find(exp.Least)
    least.replace(least.this.copy())
    assert not _same(_exact(session, plan, broken), reference)


def test_split_point_is_inside_the_unit_range(session):
    """The split point read from the primary index cuts the units into two non-empty halves (the
    split is used, not merely harmless)."""
    plan = session.explain("SELECT sum(x) FROM ordered").plan
    point = _union(emit_tree(plan)).this.find(exp.LT).expression
    value = session.engine.query_rows(render(point.this))[0][0]
    units = [r[0] for r in session.engine.query_rows(f"SELECT DISTINCT uid FROM {session.engine.table('ordered')}")]
    assert min(units) < value <= max(units)


def test_an_empty_ordered_table_runs(session):
    """The split point of an empty table is the type's default (one row from the aggregate): the
    query runs and counts nothing (the emitted SQL must not raise on any data, rule 5)."""
    engine = session.engine
    engine.command(f"CREATE TABLE {engine.table('empty')} (uid UInt32, x Int32 COMMENT 'dp: bounds=[0, 100]') "
                   "ENGINE = MergeTree ORDER BY uid "
                   f"COMMENT 'dp: privacy_unit=uid, max_rows_per_unit={CAP}, split_cap'")
    session.policy.reload()
    plan = session.explain("SELECT sum(x), count(*) FROM empty").plan
    assert "UNION ALL" in render(emit_tree(plan))
    assert _by_key(_exact(session, plan, emit_tree(plan))) == {(): ((0.0, 0.0), 0.0)}


def test_split_cap_is_the_owners_choice(session):
    """The same table with and without ``split_cap``: split only with it, the same values both ways,
    and the policy says which."""
    for sql in ("SELECT sum(x) FROM {t}", "SELECT count(*) FROM {t}", "SELECT region, avg(x) FROM {t} GROUP BY region"):
        split, plain = (session.explain(sql.format(t=t)).plan for t in ("ordered", "ordered_no_split"))
        assert "mergeTreeIndex" in render(emit_tree(split))
        assert render(emit_tree(plain)) == render(emit_tree(plain, fast_cap=False))
        assert "LIMIT 3 BY" in render(emit_tree(plain))
        assert _same(_exact(session, split, emit_tree(split)), _exact(session, plain, emit_tree(plain)))
    assert "split cap: the cap runs in two parallel branches" in session.table_policy("ordered").describe()
    assert "split cap" not in session.table_policy("ordered_no_split").describe()
    assert "runs in one stream" in session.table_policy("unordered").describe()
    assert session.table_policy("ordered").as_dict()["split_cap"] is True


def test_split_cap_needs_a_privacy_unit(connect):
    from dpch import PolicyError

    s = connect(analyst="cap")
    s.engine.command(f"CREATE TABLE {s.engine.table('pub')} (a UInt32) ENGINE = MergeTree ORDER BY a "
                     "COMMENT 'dp: public, split_cap'")
    s.policy.reload()
    with pytest.raises(PolicyError, match="split_cap needs a privacy_unit"):
        s.table_policy("pub")


def test_the_split_points_index_source_is_recognised_and_nothing_else():
    """The probe swaps a split point's ``mergeTreeIndex(db, table)`` source for its synthetic row: it must
    find that source by its function name, and no other table function or table."""
    from dpch.sql.cap import split_index_table

    def source(name: str) -> exp.Table:
        return exp.Table(this=exp.Anonymous(this=name, expressions=[exp.Literal.string("db"),
                                                                    exp.Literal.string("t")]))

    assert split_index_table(source("mergeTreeIndex")) == ("db", "t")
    assert split_index_table(source("numbers")) is None
    assert split_index_table(exp.Table(this=exp.to_identifier("mergeTreeIndex"))) is None
