"""Rejections no other test reached (issue 31, "Untested rejections"): each is refused in words before any
charge (the session has the tests' default budget, so a refusal cannot be the budget's); and the quantile
forms that are *not* refusals (a level omitted means the median, as in ClickHouse) are pinned by their plan."""

from __future__ import annotations

import re

import pytest

from dpch.sql.grouping import MAX_GROUPS
from tests.helpers import make_table, refused_uncharged

PRIVATE = ("uid UInt64, region String COMMENT 'dp: public, values=[\"a\", \"b\"]', "
           "x Float64 COMMENT 'dp: bounds=[0, 10]', name String, "
           "k Int32 COMMENT 'dp: bounds=[0, 999]', j Int32 COMMENT 'dp: bounds=[0, 99]'")
DIM = "code String, label String"


@pytest.fixture
def session(connect):
    s = connect(analyst="rare")
    make_table(s, PRIVATE, [(1, "a", 5.0, "Zelda", 1, 2)], ["uid", "region", "x", "name", "k", "j"])
    make_table(s, DIM, [("a", "Alpha")], ["code", "label"], name="dim", comment="dp: public")
    make_table(s, "uid UInt64, y Float64 COMMENT 'dp: bounds=[0, 1]'", [(1, 0.5)], ["uid", "y"], name="u")
    return s


RARE = [
    ("WITH RECURSIVE r AS (SELECT 1 AS n UNION ALL SELECT n + 1 FROM r WHERE n < 3) SELECT count(*) FROM t",
     "WITH RECURSIVE is not supported"),
    # region exists on the private side only, code on the public side only
    ("SELECT count(*) FROM t JOIN dim USING (region)", r"USING \(region\): the column must exist once on each side"),
    ("SELECT count(*) FROM t JOIN dim USING (code)", r"USING \(code\): the column must exist once on each side"),
    ("SELECT sum(log(2, x)) FROM t", r"write log\(x\), ln\(x\), log2\(x\) or log10\(x\)"),
    ("SELECT quantile(name)(x) FROM t", "expected a number"),
    ("SELECT quantiles(0.5)(x) FROM t", r"quantiles\(\) is not supported.*quantile\(p\)\(x\)"),
    # clauses the analysis refuses by name (the ladder over the SELECT's arguments)
    ("SELECT count(*) FROM t QUALIFY 1", "QUALIFY is not supported"),
    ("SELECT count(*) FROM t PREWHERE x > 0", "PREWHERE is not supported"),
    ("SELECT count(*) FROM t WINDOW w AS (PARTITION BY x)", "WINDOW is not supported"),
    ("SELECT region, count(*) FROM t GROUP BY region WITH TOTALS", "GROUP BY TOTALS is not supported"),
    ("SELECT count(*) FROM t ORDER BY 1 WITH FILL", r"ORDER BY \.\.\. WITH FILL is not supported"),
    # an aggregate under DISTINCT, alone or inside an expression
    ("SELECT DISTINCT count(*) FROM t", "SELECT DISTINCT with an aggregate is not supported"),
    ("SELECT DISTINCT count(*) + 1 FROM t", "SELECT DISTINCT with an aggregate is not supported"),
    # positions past the SELECT list (or 0), found unreached by the campaign's coverage map (issue 31)
    ("SELECT region, count(*) FROM t GROUP BY 3", "GROUP BY 3 is out of range"),
    ("SELECT region, count(*) FROM t GROUP BY 0", "GROUP BY 0 is out of range"),
    ("SELECT region, count(*) FROM t GROUP BY region ORDER BY 3", "ORDER BY 3 is out of range"),
    ("SELECT count(*) FILTER (WHERE x > 1) FROM t", r"FILTER \(WHERE …\) clause is not supported"),
    ("SELECT count(*) + (SELECT 1) FROM t", "subqueries are not supported"),
    ("SELECT region, count(*) FROM t GROUP BY region ORDER BY count(*) DESC LIMIT 'a'",
     "LIMIT must be a whole number literal"),
    ("SELECT region, count(*) FROM t GROUP BY region ORDER BY count(*) DESC LIMIT 1.5",
     "LIMIT must be a whole number literal"),
    # FROM and WITH forms, and joins of private tables, the map showed unreached
    ("WITH c AS (SELECT 1 UNION ALL SELECT 2) SELECT count(*) FROM t", "CTE c: only a SELECT can be used in WITH"),
    ("SELECT count(*) FROM (SELECT uid FROM t UNION ALL SELECT uid FROM t) AS s",
     "only a SELECT can be used as a subquery in FROM"),
    ("SELECT count(*) FROM (SELECT count(*) AS n FROM t) AS s",
     "(aggregates or window functions inside a subquery|GROUP BY inside a subquery) (are|is) not supported"),
    ("SELECT count(*) FROM (SELECT uid, x AS a, k AS a FROM t) AS s", "a subquery has two columns with the same name"),
    ("WITH c AS (SELECT uid FROM t) SELECT count(*) FROM t JOIN c ON t.uid = c.uid", "joining a CTE is not supported"),
    ("SELECT count(*) FROM t JOIN u ON t.uid = u.uid JOIN u AS u2 ON t.uid = u2.uid",
     "only two private tables can be joined"),
    ("SELECT count(*) FROM t LEFT JOIN u ON t.uid = u.uid", "LEFT JOIN of two private tables is not supported"),
    # values inside aggregates, named as written (toString, not tostring; no parser class names)
    ("SELECT count(*) FROM t WHERE x > avg(x) OVER ()", r"window functions \(OVER\) are not supported"),
    ("SELECT sum(name) FROM t", r"sum\(name\): column name is not numeric \(type String\)"),
    ("SELECT sum(uid) FROM t", "the privacy unit column cannot be aggregated as a value"),
    ("SELECT sum(toString(x)) FROM t", r"function toString\(\) is not supported inside aggregates"),
    ("SELECT sum([x, 1][1]) FROM t", r"an array subscript \[ \] is not supported inside aggregates"),
    # a simple CASE, bounds that overflow a float, and accuracy-first settings out of range
    ("SELECT sum(CASE k WHEN 1 THEN x ELSE 0 END) FROM t", r"write CASE WHEN condition THEN \.\.\. \(simple CASE"),
    ("SELECT sum(x * 1e308 * 1e308) FROM t", "an expression's bounds overflow"),
    ("SELECT region, count(*) FROM t GROUP BY region SETTINGS dp_accuracy = 5, dp_max_epsilon = 0",
     "dp_max_epsilon must be a positive number, got 0"),
    ("SELECT region, count(*) FROM t GROUP BY region SETTINGS dp_accuracy = 5, dp_stop_rule = 'soon'",
     "dp_stop_rule must be one of"),
    ("SELECT region, count(*) FROM t GROUP BY region SETTINGS dp_relative_error = 0.1, dp_stop_rule = 'exact'",
     r"dp_stop_rule = 'exact' needs dp_accuracy"),
    # a per-group bound over a key whose domain is the data's, with no G from the owner or the analyst
    ("SELECT name, count(*) FROM t GROUP BY name SETTINGS dp_bound = 'groups', dp_max_rows_per_group = 1",
     "a per-group bound needs the groups a unit may touch"),
    # 1000 × 100 = 100 000 groups is the limit; one more key value on either side is past it
    ("SELECT k, j, region, count(*) FROM t GROUP BY k, j, region",
     f"would release 200000 groups, more than the limit of {MAX_GROUPS}"),
]


@pytest.mark.parametrize("sql, message", RARE, ids=[r[0][:40] for r in RARE])
def test_refused_in_words_before_any_charge(session, sql, message):
    error = refused_uncharged(session, sql)
    assert re.search(message, str(error)), str(error)
    assert "Zelda" not in str(error) and "Traceback" not in str(error)


def test_the_group_limit_is_a_product_of_key_domains_and_its_boundary_passes(session):
    assert MAX_GROUPS == 100_000
    plan = session.explain("SELECT k, j, count(*) FROM t GROUP BY k, j")  # 1000 × 100: exactly the limit
    assert plan.sql


@pytest.mark.parametrize("sql", ["SELECT quantile(x) FROM t", "SELECT median(x) FROM t",
                                 "SELECT quantile(0.5)(x) FROM t"])
def test_a_quantile_without_a_level_is_the_median(session, sql):
    (stat,) = session.explain(sql).plan.stats.values()
    assert stat.kind == "quantile" and stat.quantile == 0.5


def test_a_quantile_level_is_kept(session):
    (stat,) = session.explain("SELECT quantile(0.9)(x) FROM t").plan.stats.values()
    assert stat.quantile == 0.9
