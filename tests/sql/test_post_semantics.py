"""HAVING, ORDER BY and select aliases mean what ClickHouse means, or are refused before the charge
(issue 12, defect 6).

- truthiness: a number is true when non-zero (``HAVING married`` on a UInt8 key kept no group,
  because only Python ``True`` passed);
- types: a String key compared with a number is refused (it raised a Python TypeError); a string
  literal compared with a number or a date is read as one, as ClickHouse converts it;
- a select alias reusing a column's name wins over the column in GROUP BY, HAVING and ORDER BY,
  and is refused as ambiguous where dpch would otherwise read the column.

Values are compared with ClickHouse asked directly on the same data (≤ k rows per unit, values
within bounds, so cap and clamps change nothing).
"""

from __future__ import annotations

import pytest

from tests.helpers import make_table, refused_uncharged
from tests.soundness.exact_answers import assert_same_as_clickhouse, exact_answer, raw_rows

COLUMNS = ("uid UInt32, sex String COMMENT 'dp: public, values=[\"f\", \"m\", \"x\"]', "
           "device String COMMENT 'dp: public, values=[\"mobile\", \"desktop\"]', "
           "married UInt8 COMMENT 'dp: bounds=[0, 1]', age UInt8 COMMENT 'dp: bounds=[18, 90]', "
           "spend Float64 COMMENT 'dp: bounds=[0, 100]', "
           "d Date COMMENT 'dp: bounds=[\"2026-01-01\", \"2026-12-31\"]'")
ROWS = [
    (1, "f", "mobile", 1, 30, 10.0, "2026-01-05"), (1, "f", "desktop", 1, 30, 20.0, "2026-02-05"),
    (2, "m", "mobile", 0, 45, 5.5, "2026-03-10"), (3, "m", "mobile", 1, 60, 50.0, "2026-03-11"),
    (3, "m", "desktop", 1, 60, 0.0, "2026-06-30"), (4, "x", "desktop", 0, 22, 99.0, "2026-07-01"),
    (5, "f", "mobile", 0, 88, 1.0, "2026-12-31"), (6, "f", "desktop", 1, 35, 7.25, "2026-07-15"),
]


@pytest.fixture
def session(connect):
    from datetime import date

    s = connect(analyst="post")
    rows = [r[:6] + (date.fromisoformat(r[6]),) for r in ROWS]
    make_table(s, COLUMNS, rows, ["uid", "sex", "device", "married", "age", "spend", "d"])
    return s


def raw(session, sql: str) -> list[tuple]:
    return raw_rows(session.engine, session.engine.database, sql, ("t",))


SAME_AS_CLICKHOUSE = [
    # truthiness
    "SELECT married, count() FROM t GROUP BY married HAVING married",
    "SELECT married, count() FROM t GROUP BY married HAVING NOT married",
    "SELECT married, count() FROM t GROUP BY married HAVING married AND count() > 0",
    "SELECT married, count() FROM t GROUP BY married HAVING married OR count() > 3",
    "SELECT sex, count() FROM t GROUP BY sex HAVING count() - 1",
    "SELECT sex, count() FROM t GROUP BY sex HAVING sum(spend) / 0",
    # comparisons as ClickHouse types them
    "SELECT sex, count() FROM t GROUP BY sex HAVING sex > 'f'",
    "SELECT sex, count() FROM t GROUP BY sex HAVING sex IN ('m', 'x')",
    "SELECT sex, count() FROM t GROUP BY sex HAVING sex BETWEEN 'a' AND 'g'",
    "SELECT sex, count() AS n FROM t GROUP BY sex HAVING n > '2'",
    "SELECT married, count() FROM t GROUP BY married HAVING married = '1'",
    "SELECT toStartOfMonth(d) AS month, count() FROM t GROUP BY month HAVING month >= '2026-06-01'",
    "SELECT d, count() FROM t GROUP BY d HAVING d BETWEEN '2026-03-01' AND '2026-07-01'",
    # aliases that reuse a column's name: the alias, as in ClickHouse
    "SELECT sum(spend) AS spend, count() FROM t HAVING spend > 3",
    "SELECT sum(spend) AS spend, count() FROM t HAVING spend > 1000",
    "SELECT sex AS device, count() FROM t GROUP BY device",
    "SELECT device AS sex, count() AS n FROM t GROUP BY sex HAVING sex = 'mobile'",
    "SELECT sex, sum(spend) AS age FROM t GROUP BY sex ORDER BY age DESC LIMIT 2",
    "SELECT sex, round(avg(age), 1) AS age FROM t GROUP BY sex HAVING age > 40",
    "SELECT sex, avg(t.age) AS age FROM t GROUP BY sex HAVING avg(t.age) > 40",
    # casts tools write (issue 28): sqlglot writes T-SQL's CAST(x AS int) as Nullable(Int32)
    "SELECT sex, CAST(count() AS Nullable(Int32)) AS n FROM t GROUP BY sex ORDER BY sex",
    "SELECT sex, avg(age)::Nullable(Float64) AS a, CAST(sum(spend) AS Nullable(UInt8)) FROM t GROUP BY sex "
    "ORDER BY sex",
    # CASE/if over released values (issue 28): Metabase's count-where, as the ClickHouse Metabase driver writes
    # it (namespace metabase.driver.clickhouse-qp, src/metabase/driver/clickhouse_qp.clj, :count-where):
    # CASE WHEN count() > 0 THEN sum(CASE WHEN <pred> THEN 1 ELSE 0 END) ELSE NULL END
    "SELECT sex, CASE WHEN count() > 0 THEN sum(CASE WHEN device = 'mobile' THEN 1 ELSE 0 END) ELSE NULL END AS m "
    "FROM t GROUP BY sex ORDER BY sex",
    "SELECT sex, if(count() > 2, avg(age), NULL) AS a FROM t GROUP BY sex ORDER BY sex",
    "SELECT sex, CASE WHEN avg(age) > 40 THEN 1 WHEN avg(age) > 30 THEN 2 ELSE 3 END AS band FROM t GROUP BY sex "
    "ORDER BY sex",
    "SELECT sex, count() FROM t GROUP BY sex HAVING CASE WHEN sex = 'f' THEN count() > 1 ELSE 1 END ORDER BY sex",
    # a simple CASE compares its subject with each WHEN value
    "SELECT sex, CASE count() WHEN 3 THEN 100 WHEN 4 THEN 200 ELSE 7 END AS c FROM t GROUP BY sex ORDER BY sex",
    "SELECT sex, CASE sex WHEN 'f' THEN avg(age) ELSE 0 END AS a FROM t GROUP BY sex ORDER BY sex",
    # an outer SELECT that only post-processes one aggregate (issue 28): ibis's SELECT * FROM (…) ORDER BY,
    # Metabase's nested question SELECT source.x … FROM (…) AS source LIMIT 2000
    "SELECT * FROM (SELECT sex, count() AS n, avg(age) AS a FROM t GROUP BY sex) AS t1 ORDER BY t1.sex DESC",
    "SELECT source.sex AS sex, source.n AS n FROM (SELECT sex, count() AS n FROM t GROUP BY sex) AS source "
    "ORDER BY sex LIMIT 2000",
    "SELECT * FROM (SELECT sex, avg(age) AS a FROM t GROUP BY sex) WHERE a > 40 AND sex != 'x' ORDER BY sex",
    "SELECT sex, n * 2 AS twice FROM (SELECT sex, count() AS n FROM t GROUP BY sex HAVING n > 1) ORDER BY sex",
    # the outer list drops a key the inner GROUP BY names by its alias: the inner GROUP BY reads the alias as the
    # expression it names, as ClickHouse does (Superset's and Metabase's nested queries list only measures)
    "SELECT n FROM (SELECT intDiv(age, 30) AS band, count() AS n FROM t GROUP BY band ORDER BY band)",
    "SELECT n, a FROM (SELECT device AS dev, sex AS s, count() AS n, avg(age) AS a FROM t GROUP BY dev, s "
    "ORDER BY dev, s) WHERE n > 0",
    # String casts of keys and released values in ORDER BY and HAVING sort and compare ClickHouse's text
    # (issue 28: '18.5' < '9.5625', '10' < '7'; dpch.sql.text_form)
    "SELECT sex, count() AS n FROM t GROUP BY sex ORDER BY CAST(sex AS String) DESC",
    "SELECT sex, avg(spend) AS a FROM t GROUP BY sex ORDER BY toString(a)",
    "SELECT sex, avg(spend) AS a FROM t GROUP BY sex ORDER BY CAST(avg(spend) AS String) DESC",
    "SELECT intDiv(age, 3) AS b, count() AS n FROM t GROUP BY b ORDER BY toString(b)",
    "SELECT d, count() AS n FROM t GROUP BY d HAVING toString(d) >= '2026-07-01' ORDER BY toString(d)",
    "SELECT married, count() AS n FROM t GROUP BY married HAVING toString(married) = '1'",
    "SELECT sex, count() AS n FROM t GROUP BY sex HAVING CAST(sex AS Nullable(String)) IN ('f', 'x') ORDER BY sex",
    # a select alias in WHERE reads as its definition, as in ClickHouse (issue 28: Grafana's builder)
    "SELECT sex AS s, count() FROM t WHERE s = 'f' GROUP BY s",
    "SELECT device AS dev, sex, count() FROM t WHERE dev = 'mobile' AND sex != 'x' GROUP BY dev, sex "
    "ORDER BY dev, sex",
    "SELECT toStartOfMonth(d) AS month, count() FROM t WHERE month >= toDate('2026-03-01') "
    "AND month <= toDate('2026-07-01') GROUP BY month ORDER BY month",
]


@pytest.mark.parametrize("sql", SAME_AS_CLICKHOUSE)
def test_post_processing_equals_clickhouse(session, sql):
    assert_same_as_clickhouse(session, sql, raw(session, sql))


def test_having_a_uint8_key_keeps_its_true_groups(session):
    """The regression itself: married = 1 holds 5 rows."""
    assert exact_answer(session, "SELECT married, count() FROM t GROUP BY married HAVING married").rows == [(1, 5.0)]


def test_order_by_puts_nulls_last_both_ways(session):
    from sqlglot import exp

    from dpch.sql import outputs

    expr = outputs.placeholder("s0")
    envs = [{"s0": 2.0}, {"s0": None}, {"s0": 5.0}]
    assert outputs.arrange(None, [(expr, False)], None, 0, envs) == [0, 2, 1]
    assert outputs.arrange(None, [(expr, True)], None, 0, envs) == [2, 0, 1]
    assert outputs.arrange(exp.Null(), [], None, 0, envs) == [], "HAVING NULL keeps nothing"


REFUSED = [
    ("SELECT CAST(sex AS String) AS s, count() FROM t GROUP BY sex", "not as a result column"),
    ("SELECT sex, toString(count()) AS n FROM t GROUP BY sex", "not as a result column"),
    ("SELECT sex, count() FROM t GROUP BY sex HAVING toString(sex, 'UTC') = 'f'", "takes one argument"),
    ("SELECT sex, count() FROM t GROUP BY sex HAVING toString(sex) = 2", "cannot compare"),
    ("SELECT sex, count() FROM t GROUP BY sex ORDER BY CAST(sex AS FixedString(1))", "is not supported"),
    # on a key, the refusal does not say "aggregates" (issue 28)
    ("SELECT sex, count() FROM t GROUP BY sex HAVING lower(sex) = 'f'", "LOWER is not supported on released values "
     "and keys"),
    ("SELECT sex, count() FROM t GROUP BY sex HAVING sex > 2", "cannot compare sex (a String) with 2"),
    ("SELECT sex, count() FROM t GROUP BY sex HAVING sex = 2", "cannot compare"),
    ("SELECT sex, count() FROM t GROUP BY sex HAVING sex IN ('f', 1)", "cannot compare"),
    ("SELECT sex, count() FROM t GROUP BY sex HAVING sex", "is not a condition"),
    ("SELECT sex, count() FROM t GROUP BY sex HAVING sex AND count() > 1", "is not a condition"),
    ("SELECT sex, count() + sex FROM t GROUP BY sex", "arithmetic on sex"),
    ("SELECT sex, count() AS n FROM t GROUP BY sex HAVING n = 'abc'", "is not one"),
    ("SELECT toStartOfMonth(d) AS month, count() FROM t GROUP BY month HAVING month > 5", "cannot compare"),
    ("SELECT toStartOfMonth(d) AS month, count() FROM t GROUP BY month HAVING month > 'soon'", "not one"),
    ("SELECT sex, count() FROM t GROUP BY sex ORDER BY sex + 1", "arithmetic on sex"),
    # aliases reusing a column name where ClickHouse reads the alias and dpch would read the column
    ("SELECT sex, CASE WHEN count() > 2 THEN 'many' ELSE 'few' END FROM t GROUP BY sex",
     "a CASE over released values gives 'many'"),
    # a LIMIT inside picks rows before the outer ORDER BY: not post-processing of one release's rows
    ("SELECT * FROM (SELECT sex, count() AS n FROM t GROUP BY sex ORDER BY n LIMIT 1) ORDER BY sex",
     "inside a subquery or CTE is not supported"),
    ("SELECT sum(spend) AS spend, avg(spend) FROM t", "both a column and the alias"),
    ("SELECT sum(spend) AS spend FROM t WHERE spend > 3", "both a column and the alias"),
    ("SELECT intDiv(age, 10) AS age, count() FROM t WHERE age > 50 GROUP BY age", "both a column and the alias"),
    ("SELECT sex, round(avg(age), 1) AS age FROM t GROUP BY sex HAVING avg(age) > 40", "both a column"),
    ("SELECT count() FROM (SELECT age * 2 AS age FROM t WHERE age > 50)", "both a column and the alias"),
    ("SELECT intDiv(age, 10) AS AGE, count() FROM t WHERE AGE > 5 GROUP BY AGE", "both a column and the alias"),
    ("SELECT sum(spend) AS spend, count() FROM t GROUP BY spend", "GROUP BY an aggregate"),
    ("SELECT device AS sex, count() FROM t GROUP BY device, sex", "GROUP BY device is listed twice"),
]


@pytest.mark.parametrize(("sql", "reason"), REFUSED)
def test_refused_before_the_charge(session, sql, reason):
    refusal = refused_uncharged(session, sql, epsilon=1.0)
    assert reason in str(refusal), str(refusal)
