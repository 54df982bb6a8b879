"""A GROUP BY key with bounds clamps its values into the bounds (issue 31, "Privacy-relevant survivors":
dropping the clamp in ``grouping.py`` went unnoticed).

sql/grouping.py's docstring: the domain of a bounded key follows from its bounds, and "values are clamped
into the bounds first". So a row below the bounds counts in the lowest group, a row above in the highest
— for the integer column itself, for ``intDiv(column, n)`` and for a date bucket. (Without the clamp the
rows outside would fall into keys outside the domain, which the emitted SQL or the release then drops:
privacy-safe, but not the documented answer.)

Checked on real chdb: the exact (pre-noise) counts of dpch's emitted SQL (:func:`dpch.pipeline.execute.exact`)
against counts computed here from the rows, and once through ``session.query`` at an ε so large that
the discrete Laplace noise is 0 (P(Z ≠ 0) = 2p/(1+p), p = e^{−ε} < e^{−1000}).
"""

from __future__ import annotations

from collections import Counter
from datetime import date

import pytest

from dpch.accounting.budget import Budget
from dpch.pipeline import execute
from dpch.sql.rewrite import emit_sql
from tests.helpers import CAP_KEY, make_table

COLUMNS = ("uid UInt64, age Int32 COMMENT 'dp: bounds=[18, 90]', "
           "d Date COMMENT 'dp: bounds=[\"2026-01-01\", \"2026-12-31\"]'")
LO, HI = 18, 90
D_LO, D_HI = date(2026, 1, 1), date(2026, 12, 31)
#: ages below, at and inside, and above the bounds; dates before, inside and after theirs
AGES = [5, 5, 17, 18, 18, 40, 89, 90, 91, 120, 120, 120, -2_000_000_000, 2_000_000_000]
DATES = [date(2025, 6, 15), date(2025, 12, 31), date(2026, 1, 1), date(2026, 7, 4), date(2026, 12, 31),
         date(2027, 1, 1), date(2027, 3, 1), date(2099, 1, 1), date(1970, 1, 2)]


@pytest.fixture
def session(connect):
    s = connect(analyst="clamp", default_budget=Budget(1e9, 0.5))
    rows = [(i + 1, AGES[i % len(AGES)], DATES[i % len(DATES)]) for i in range(len(AGES) * len(DATES))]
    make_table(s, COLUMNS, rows, ["uid", "age", "d"], comment="dp: privacy_unit=uid, max_rows_per_unit=1")
    s.rows = rows  # type: ignore[attr-defined]
    return s


def _exact_counts(session, sql: str) -> dict[tuple, float]:
    plan, _ = session.plan(sql)
    data = execute.exact(session.engine, plan, emit_sql(plan, session.engine.database), CAP_KEY)
    (measure,) = plan.measures
    return {tuple(str(v) for v in key): float(value) for key, value in zip(data.keys, data.measures[measure.name],
                                                                          strict=True)}


def _clamp(value, lo, hi):
    return min(max(value, lo), hi)


def test_the_rows_reach_both_sides_of_the_bounds(session):
    """Negative control: there are rows below and above each bound, so an unclamped key would differ."""
    ages = [r[1] for r in session.rows]
    dates = [r[2] for r in session.rows]
    assert min(ages) < LO and max(ages) > HI and min(dates) < D_LO and max(dates) > D_HI


def test_an_integer_key_clamps_into_its_bounds(session):
    expected = Counter(_clamp(r[1], LO, HI) for r in session.rows)
    counts = _exact_counts(session, "SELECT age, count() FROM t GROUP BY age")
    assert len(counts) == HI - LO + 1, "the domain is 18…90, every key once"
    assert counts == {(str(a),): float(expected.get(a, 0)) for a in range(LO, HI + 1)}
    assert counts[(str(LO),)] == sum(1 for r in session.rows if r[1] <= LO)
    assert counts[(str(HI),)] == sum(1 for r in session.rows if r[1] >= HI)


def test_an_intdiv_bucket_clamps_before_dividing(session):
    """intDiv(age, 10) over [18, 90]: buckets 1…9; age 5 is bucket 1 (18 // 10), not 0; 120 is 9, not 12."""
    expected = Counter(_clamp(r[1], LO, HI) // 10 for r in session.rows)
    counts = _exact_counts(session, "SELECT intDiv(age, 10) AS b, count() FROM t GROUP BY b")
    assert counts == {(str(b),): float(expected.get(b, 0)) for b in range(LO // 10, HI // 10 + 1)}


@pytest.mark.parametrize(("sql", "bucket"), [
    ("SELECT toStartOfMonth(d) AS m, count() FROM t GROUP BY m", lambda x: x.replace(day=1)),
    ("SELECT d, count() FROM t GROUP BY d", lambda x: x),
])
def test_a_date_key_clamps_into_its_bounds(session, sql, bucket):
    expected = Counter(str(bucket(_clamp(r[2], D_LO, D_HI))) for r in session.rows)
    counts = _exact_counts(session, sql)
    assert {k: v for k, v in counts.items() if v} == {(k,): float(v) for k, v in expected.items()}
    assert counts[(str(bucket(D_LO)),)] == sum(1 for r in session.rows if r[2] <= D_LO)
    assert counts[(str(bucket(D_HI)),)] == sum(1 for r in session.rows if r[2] >= D_HI)


def test_the_release_counts_the_clamped_rows_in_the_edge_groups(session):
    expected = Counter(_clamp(r[1], LO, HI) for r in session.rows)
    release = session.query("SELECT age, count() AS n FROM t GROUP BY age", epsilon=1000.0)
    got = {int(age): n for age, n in release.rows}
    assert set(got) == set(range(LO, HI + 1))
    assert got == {a: expected.get(a, 0) for a in range(LO, HI + 1)}, "noise is 0 at ε = 1000 per count"
