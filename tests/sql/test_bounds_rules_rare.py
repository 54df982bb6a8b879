"""Value rules of the analysis no other test reached (issue 24's registry sample: survivors in
``sql/bounds.py``), each checked by the sensitivity it gives or the refusal's words.

The table's cap is 3 rows per unit (tests.helpers.make_table), x has bounds [2, 10]:
- ``sum(true)`` adds 1 per row: Δ = 3 · 1 (a Boolean literal is the number 1, not 2);
- ``CASE WHEN x > 5 THEN x END`` without ELSE is 0 where no branch matches (dpch reads it as
  ``ELSE 0``), so its interval is [0, 10]: avg's centred sum has Δ = 3 · (10 − 0)/2 = 15, where an
  ELSE of 1 would give [1, 10] and 13.5.
"""

from __future__ import annotations

import re

import pytest

from tests.helpers import make_table, refused_uncharged

COLUMNS = "uid UInt64, x Float64 COMMENT 'dp: bounds=[2, 10]', d Date, m UInt8"


@pytest.fixture
def session(connect):
    s = connect(analyst="rules")
    make_table(s, COLUMNS, [(1, 5.0)], ["uid", "x"])  # d and m default
    return s


def _sensitivities(session, sql: str) -> list[float]:
    return sorted(m.sensitivity for m in session.explain(sql).measures)


def test_a_boolean_literal_is_one(session):
    assert _sensitivities(session, "SELECT sum(true) FROM t") == [3.0]


def test_a_case_without_else_is_zero_where_no_branch_matches(session):
    sens = _sensitivities(session, "SELECT avg(CASE WHEN x > 5 THEN x END) FROM t")
    assert 15.0 in sens and 13.5 not in sens, sens


@pytest.mark.parametrize("sql, words", [
    ("SELECT sum(x + 'a') FROM t", "a string literal is not a number"),
    ("SELECT count(*) FROM t WHERE row_number() OVER () > 1", r"window functions \(OVER\) are not supported"),
    # a mode or a zone chosen by the row could make ClickHouse raise on that row: constants only (the
    # registry's per-argument rule, at the argument's own position)
    ("SELECT count(*) FROM t WHERE toDayOfWeek(d, m) = 1", "constant"),
    ("SELECT count(*) FROM t WHERE toDayOfWeek(d, 0, toString(m)) = 1", "constant"),
])
def test_refused_in_words(session, sql, words):
    error = refused_uncharged(session, sql)
    assert re.search(words, str(error)), str(error)
