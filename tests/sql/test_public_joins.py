"""Joins compute what ClickHouse computes, or are refused (issue 12, defect 6).

A public table joins as a many-to-one lookup: every matching private row is kept once, never
multiplied (ClickHouse 26's ``INNER ANY JOIN``, emitted before, matched one-to-one: ~4 rows
instead of ~110 600 on the demo data). The values are compared with ClickHouse asked directly
on the same data, where every unit has at most k rows so the cap changes nothing.
"""

from __future__ import annotations

import pytest

from tests.helpers import make_table, refused_uncharged
from tests.soundness.exact_answers import exact_answer, mismatches, raw_rows

PRIVATE = ("uid UInt32, region String COMMENT 'dp: public, values=[\"a\", \"b\", \"c\", \"z\"]', "
           "x Float64 COMMENT 'dp: bounds=[0, 10]', t UInt32 COMMENT 'dp: bounds=[0, 100]'")
#: at most 3 rows per unit (the cap); region 'z' has no match in the dimension table
ROWS = [(1, "a", 1.0, 5), (1, "a", 2.0, 15), (1, "b", 3.0, 5), (2, "b", 4.0, 25), (3, "c", 5.0, 5),
        (3, "z", 6.0, 5), (4, "a", 7.0, 40), (5, "z", 8.0, 50), (5, "c", 9.0, 60)]
DIM = "region String, name String, t UInt32 COMMENT 'dp: bounds=[0, 100]'"
DIM_ROWS = [("a", "Alpha", 0), ("b", "Beta", 0), ("c", "Gamma", 10)]
TABLES = ("t", "dim", "dim2")


@pytest.fixture
def session(connect):
    s = connect(analyst="joins")
    make_table(s, PRIVATE, ROWS, ["uid", "region", "x", "t"])
    make_table(s, DIM, DIM_ROWS, ["region", "name", "t"], name="dim", comment="dp: public")
    # the same dimension with a repeated key: a JOIN must still keep each private row once
    make_table(s, DIM, DIM_ROWS + [("a", "Alpha bis", 20)], ["region", "name", "t"], name="dim2",
               comment="dp: public")
    return s


def raw(session, sql: str) -> list[tuple]:
    return raw_rows(session.engine, session.engine.database, sql, TABLES)


SAME_AS_CLICKHOUSE = [
    "SELECT count() FROM t JOIN dim ON t.region = dim.region",
    "SELECT count() FROM t INNER JOIN dim AS d ON t.region = d.region",
    "SELECT d.name, count(), sum(t.x) FROM t JOIN dim AS d ON t.region = d.region GROUP BY d.name",
    "SELECT count(), sum(x) FROM t LEFT JOIN dim AS d ON t.region = d.region",
    "SELECT count() FROM t LEFT OUTER JOIN dim AS d ON t.region = d.region",
    "SELECT count() FROM t LEFT ANY JOIN dim AS d ON t.region = d.region",
    "SELECT count(), sum(x) FROM t SEMI JOIN dim AS d ON t.region = d.region",
    "SELECT count(), sum(x) FROM t LEFT SEMI JOIN dim AS d ON t.region = d.region",
    "SELECT count(), sum(x) FROM t ANTI JOIN dim AS d ON t.region = d.region",
    "SELECT count(), sum(d.t) FROM t ASOF JOIN dim AS d ON t.region = d.region AND t.t >= d.t",
    "SELECT count(), sum(d.t) FROM t LEFT ASOF JOIN dim AS d ON t.region = d.region AND t.t >= d.t",
    "SELECT region, count() FROM t JOIN dim AS d USING (region) GROUP BY region",
    "SELECT d.name, count() FROM t JOIN dim AS d ON t.region = d.region AND d.name != 'Beta' GROUP BY d.name",
    # rows without a match form the group of the public column's default value ('' here), as in ClickHouse
    "SELECT d.name, count(), sum(x) FROM t LEFT JOIN dim AS d ON t.region = d.region GROUP BY d.name",
    "SELECT d.t, count() FROM t LEFT JOIN dim AS d ON t.region = d.region GROUP BY d.t",
    "SELECT d.name, count() FROM t ANTI JOIN dim AS d ON t.region = d.region GROUP BY d.name",
    # private ⋈ private on the units, each side capped first (≤ k·k rows per unit)
    "SELECT count(), sum(a.x) FROM t AS a JOIN t AS b ON a.uid = b.uid",
    "SELECT count() FROM t AS a JOIN t AS b USING (uid)",
    "SELECT count() FROM t AS a ALL INNER JOIN t AS b ON a.uid = b.uid",
]


@pytest.mark.parametrize("sql", SAME_AS_CLICKHOUSE)
def test_join_values_equal_clickhouse(session, sql):
    answer = exact_answer(session, sql)
    problems = mismatches(answer.rows, raw(session, sql))
    assert not problems, f"{sql}: {problems}"


def test_public_join_is_not_one_to_one(session):
    """The regression itself: 7 of the 9 private rows have a region in dim (ANY INNER gave 3)."""
    answer = exact_answer(session, "SELECT count() FROM t JOIN dim ON t.region = dim.region")
    assert answer.rows == [(7.0,)]


def test_a_repeated_public_key_never_multiplies_a_private_row(session):
    """dim2 repeats 'a': ClickHouse's JOIN would count the three 'a' rows twice; the lookup keeps
    each private row once, so the rows per unit stay ≤ k (the same count as a semi-join)."""
    lookup = exact_answer(session, "SELECT count(), sum(x) FROM t JOIN dim2 ON t.region = dim2.region").rows
    semi = raw(session, "SELECT count(), sum(x) FROM t WHERE region IN (SELECT region FROM dim2)")
    assert not mismatches(lookup, semi), (lookup, semi)
    left = exact_answer(session, "SELECT count() FROM t LEFT JOIN dim2 ON t.region = dim2.region").rows
    assert left == [(float(len(ROWS)),)]
    per_unit = exact_answer(session, "SELECT count() FROM t LEFT JOIN dim2 ON t.region = dim2.region "
                                     "WHERE t.uid = 1").rows
    assert per_unit == [(3.0,)], "unit 1 has 3 rows, two of them in region 'a'"


REFUSED = [
    ("SELECT count() FROM t ALL JOIN dim AS d ON t.region = d.region", "ALL JOIN"),
    ("SELECT count() FROM t ALL LEFT JOIN dim AS d ON t.region = d.region", "ALL"),
    ("SELECT count() FROM t ANY JOIN dim AS d ON t.region = d.region", "one-to-one"),
    ("SELECT count() FROM t ANY INNER JOIN dim AS d ON t.region = d.region", "one-to-one"),
    ("SELECT count() FROM t INNER ANY JOIN dim AS d ON t.region = d.region", "one-to-one"),
    ("SELECT count() FROM t JOIN dim AS d ON 1 = 1", "needs an ON equality"),
    ("SELECT count() FROM t JOIN dim AS d ON t.t > d.t", "needs an ON equality"),
    ("SELECT count() FROM t JOIN dim AS d ON t.region = d.region OR t.t = d.t", "needs an ON equality"),
    ("SELECT count() FROM t JOIN dim AS d ON t.region = t.region", "needs an ON equality"),
    ("SELECT count() FROM t ASOF JOIN dim AS d ON t.region = d.region", "exactly one inequality"),
    ("SELECT count() FROM t ASOF JOIN dim AS d USING (region, t)", "ASOF JOIN ... USING"),
    ("SELECT count() FROM t GLOBAL JOIN dim AS d ON t.region = d.region", "is not supported"),
    ("SELECT count() FROM t PASTE JOIN dim AS d ON t.region = d.region", "PASTE JOIN"),
    ("SELECT count() FROM t FULL JOIN dim AS d ON t.region = d.region", "FULL JOIN"),
    ("SELECT count() FROM t AS a ANY JOIN t AS b ON a.uid = b.uid", "of two private tables"),
    ("SELECT count() FROM t AS a SEMI JOIN t AS b ON a.uid = b.uid", "of two private tables"),
    ("SELECT count() FROM t AS a ASOF JOIN t AS b ON a.uid = b.uid AND a.t >= b.t", "of two private tables"),
    ("SELECT count() FROM t AS a JOIN t AS b ON 1 = 1", "only on their privacy-unit columns"),
    ("SELECT count() FROM t AS a JOIN t AS b ON a.uid = b.uid AND a.t = b.t", "only on their privacy-unit"),
    ("SELECT count() FROM t AS a JOIN t AS b USING (region)", "only on their privacy-unit columns"),
    ("SELECT count() FROM (SELECT x FROM t) AS a JOIN t AS b ON a.x = b.uid", "does not select its unit"),
]


@pytest.mark.parametrize(("sql", "reason"), REFUSED)
def test_join_forms_that_would_change_the_numbers_are_refused(session, sql, reason):
    refusal = refused_uncharged(session, sql)  # a refused join is never charged
    assert reason in str(refusal), str(refusal)


def test_using_column_means_the_private_side(session):
    """With USING (region), an unqualified region is the private table's column (as in ClickHouse)."""
    sql = "SELECT region, count() FROM t LEFT JOIN dim AS d USING (region) GROUP BY region"
    answer = exact_answer(session, sql)
    assert not mismatches(answer.rows, raw(session, sql))
    assert ("z", 2.0) in answer.rows, "the unmatched region keeps its private value"
