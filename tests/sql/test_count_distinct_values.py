"""``count(DISTINCT x)`` of a column that is not the unit: its sensitivity, checked on neighbours in chdb
(issue 31: the new coverage map showed no test reaching this measure, although the refusals of
``uniq``/``uniqExact`` point analysts to it).

Claim (docs/algorithms.md, part C): one unit keeps at most k rows after the cap, so adding or removing it
moves the number of distinct values by at most k (its rows can add at most k values no one else has, and
removing it can take away at most k): ℓ1 = k under the row cap. Checked as a value on real data: the
exact capped answer (the emitted SQL, run without noise) on a table and on the table without one unit
whose 6 rows all hold values no one else has differs by exactly k = 3 — the bound is met, not loose — and
the plan claims 3. Two expressions in one DISTINCT are refused in words.
"""

from __future__ import annotations

import pytest

from dpch.sql.rewrite import emit_sql
from tests.helpers import make_table, refused_uncharged, run_private_keyed

K = 3
COMMENT = f"dp: privacy_unit=uid, max_rows_per_unit={K}"
# unit 1 holds six values of its own; units 2–4 share three others
ROWS = [(1, f"own{i}") for i in range(6)] + [(u, f"shared{u % 3}") for u in (2, 3, 4) for _ in range(2)]


@pytest.fixture
def session(connect):
    s = connect(analyst="distinct")
    make_table(s, "uid UInt64, region String", ROWS, ["uid", "region"], comment=COMMENT)
    make_table(s, "uid UInt64, region String", [r for r in ROWS if r[0] != 1], ["uid", "region"],
               name="without_one", comment=COMMENT)
    return s


def exact(session, table: str) -> float:
    plan, _ = session.plan(f"SELECT count(DISTINCT region) FROM {table}")
    (row,) = run_private_keyed(session.engine, emit_sql(plan, session.engine.database))
    return float(row[0])


def test_the_plan_claims_k_and_one_unit_moves_the_answer_by_exactly_k(session):
    plan, _ = session.plan("SELECT count(DISTINCT region) FROM t")
    (measure,) = plan.measures
    assert (measure.kind, measure.sensitivity, measure.integer) == ("distinct", float(K), True)
    with_unit, without = exact(session, "t"), exact(session, "without_one")
    assert (with_unit, without) == (3.0 + K, 3.0)  # the capped unit 1 keeps 3 of its 6 own values
    assert with_unit - without <= measure.sensitivity


def test_two_expressions_in_one_distinct_are_refused_in_words(session):
    error = refused_uncharged(session, "SELECT count(DISTINCT region, uid) FROM t")
    assert "count(DISTINCT ...) takes one expression" in str(error)
