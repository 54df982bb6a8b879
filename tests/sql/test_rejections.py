"""Rejections: unsupported queries get a specific error naming the construct; nothing is charged."""

from __future__ import annotations

import pytest

from dpch import DpchError, MissingBoundsError, ParseError, QueryRejected
from tests.helpers import make_table

COLUMNS = (
    "uid UInt64, region String COMMENT 'dp: public, values=[\"a\", \"b\"]', "
    "city String COMMENT 'dp: public', x Float64 COMMENT 'dp: bounds=[0, 10]', "
    "secret Float64, name String, nname Nullable(String)"
)

REJECTED = [
    ("SELECT count(*) FROM t; SELECT 1", QueryRejected, "one statement"),
    ("DROP TABLE t", QueryRejected, "only SELECT"),
    ("INSERT INTO t VALUES (1, 'a', 'b', 1, 1, 'n')", QueryRejected, "only SELECT"),
    ("SELECT count(*) FROM t UNION ALL SELECT count(*) FROM t", QueryRejected, "UNION"),
    ("SELECT count(*) FROM t JOIN t AS u ON t.x = u.x", QueryRejected, "only on their privacy-unit columns"),
    ("SELECT count(*) FROM (SELECT region, count(*) FROM t GROUP BY region)", QueryRejected,
     "GROUP BY inside a subquery"),
    ("SELECT count(*) FROM url('http://example.com/x.csv', CSV)", QueryRejected, "table functions"),
    ("SELECT count(*) FROM system.tables", QueryRejected, "system tables"),
    ("SELECT count(*) FROM nope", DpchError, "does not exist"),
    ("SELECT * FROM t", QueryRejected, "SELECT \\* releases rows"),
    ("SELECT x FROM t", QueryRejected, "not aggregated or grouped"),
    ("SELECT name, count(*) FROM t GROUP BY name", QueryRejected, "needs dp_delta > 0"),
    ("SELECT uid, count(*) FROM t GROUP BY uid", QueryRejected, "one group per person"),
    ("SELECT sum(secret) FROM t", MissingBoundsError, "needs bounds on secret"),
    ("SELECT sum(name) FROM t", QueryRejected, "not numeric"),
    ("SELECT max(x) FROM t", QueryRejected, "aggregate max\\(\\) is not supported"),
    ("SELECT sum(DISTINCT x) FROM t", QueryRejected, "DISTINCT is only supported in count"),
    ("SELECT region, count(*) FROM t GROUP BY region HAVING x > 5", QueryRejected, "used but not aggregated"),
    ("SELECT count(*) FROM t WHERE sleep(1) = 0", QueryRejected, "sleep\\(\\) is not allowed"),
    ("SELECT count(*) FROM t WHERE throwIf(x > 5) = 0", QueryRejected, "throwIf\\(\\) is not allowed"),
    ("SELECT count(*) FROM t WHERE uid IN (SELECT uid FROM t)", QueryRejected, "subqueries in conditions"),
    ("SELECT count(*) FROM t SETTINGS max_threads = 1", QueryRejected, "only dpch's dp_\\* settings"),
    ("SELECT count(*) FROM t SETTINGS dp_epsilonn = 1", QueryRejected, "unknown dpch setting"),
    ("SELECT count(*) FROM t SETTINGS dp_epsilon = -1", QueryRejected, "dp_epsilon must be a positive"),
    ("SELECT count(*) FROM t SETTINGS dp_mechanism = 'gaussian'", QueryRejected, "needs dp_delta"),
    ("SELECT count(*) FROM t FORMAT JSON", QueryRejected, "FORMAT clause"),
    ("SELECT count(*) FROM t INTO OUTFILE 'x.csv'", QueryRejected, "INTO OUTFILE"),
    ("SELEC count(*) FROM t", ParseError, "cannot parse"),
    ("WITH s AS (SELECT region FROM t LIMIT 5) SELECT count(*) FROM s", QueryRejected,
     "LIMIT inside a subquery or CTE"),
    ("SELECT sum(x) OVER () FROM t", QueryRejected, "window functions"),
    ("SELECT count(*) * x FROM t", QueryRejected, "used but not aggregated"),
    ("SELECT DISTINCT ON (region) region FROM t", QueryRejected, "SELECT DISTINCT ON"),
    ("SELECT count(*) FROM t WHERE count(*) > 1", QueryRejected, "aggregate functions are not allowed in WHERE"),
    ("SELECT sum(x / (x - 5)) FROM t", QueryRejected, "include 0, so the quotient is unbounded"),
    ("SELECT count(*) FROM t LIMIT 1 BY region", QueryRejected, "LIMIT BY"),
    ("SELECT count(*) FROM t FINAL", QueryRejected, "FINAL"),
    ("SELECT count(*) FROM t SAMPLE 0.1", QueryRejected, "SAMPLE"),
    ("SELECT count(*) FROM t WHERE nope = 1", QueryRejected, "no column 'nope'"),
    ("", ParseError, "empty"),
    ("SELECT max(x) FROM t GROUP BY region", QueryRejected, "aggregate max\\(\\) is not supported"),
    ("SELECT count(*) FROM t RIGHT JOIN t AS u ON t.uid = u.uid", QueryRejected, "RIGHT JOIN is not supported"),
    ("SELECT count(*) FROM t CROSS JOIN t AS u", QueryRejected, "CROSS JOIN is not supported"),
    ("SELECT sum(log(x)) FROM t", QueryRejected, "needs a positive argument"),
    ("SELECT avg(pow(x, 7)) FROM t", QueryRejected, "whole exponent from 0 to 4"),
    ("SELECT quantile(2)(x) FROM t", QueryRejected, "between 0 and 1"),
    ("SELECT intDiv(x, 2), count(*) FROM t GROUP BY intDiv(x, 2)", QueryRejected, "integer column with bounds"),
    ("SELECT count(*) FROM t WHERE CAST(name AS Int32) = 1", QueryRejected, "CAST is not allowed.*OrNull"),
    ("SELECT count(*) FROM t WHERE toInt64(name) = 1", QueryRejected, "toInt64\\(\\) is not allowed.*toInt64OrNull"),
    ("SELECT count(*) FROM t WHERE uid % 0 = 1", QueryRejected, "the % operator is not allowed"),
    ("SELECT count(*) FROM t WHERE name = 1", QueryRejected, "name = 1 compares String with UInt8"),
    ("SELECT count(*) FROM t WHERE nname = 1", QueryRejected, "nname = 1 compares String with UInt8"),
]


@pytest.fixture
def session(connect):
    s = connect(analyst="rejections")
    make_table(s, COLUMNS, [(1, "a", "paris", 5.0, 3.0, "Zelda")], ["uid", "region", "city", "x", "secret", "name"])
    return s


@pytest.mark.parametrize("sql, error, message", REJECTED, ids=[r[0][:50] for r in REJECTED])
def test_rejected_with_specific_message_and_no_charge(session, sql, error, message):
    before = session.budget()
    with pytest.raises(error, match=message) as info:
        session.query(sql)
    assert "Traceback" not in str(info.value)
    assert "Zelda" not in str(info.value)  # no private value in any error
    after = session.budget()
    assert after.releases == before.releases == 0
    rows = session.engine.query_rows(f"SELECT count() FROM {session.engine.table('dpch_ledger')}")
    assert rows[0][0] == 0, "a rejected query must leave no ledger row"


def test_there_are_at_least_fifteen_distinct_rejections():
    assert len({r[2] for r in REJECTED}) >= 15


def test_public_table_is_not_a_private_aggregate(connect):
    s = connect()
    make_table(s, "k String", [("a",)], ["k"], comment="dp: public")
    with pytest.raises(QueryRejected, match="public table"):
        s.query("SELECT count(*) FROM t")


def test_table_without_policy(connect):
    s = connect()
    make_table(s, "k String", [("a",)], ["k"], comment="nothing here")
    with pytest.raises(QueryRejected, match="has no privacy policy"):
        s.query("SELECT count(*) FROM t")
