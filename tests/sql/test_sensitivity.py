"""Sensitivity soundness: one added or removed unit moves the exact (pre-noise) aggregates by at
most the derived sensitivity, whatever its rows look like (far outside the bounds, more rows
than the cap, spread over groups, NULLs)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dpch.pipeline import execute
from dpch.sql.rewrite import emit_sql
from tests.helpers import CAP_KEY, make_table

CAP = 3
COLUMNS = (
    "uid UInt64, region String COMMENT 'dp: public, values=[\"a\", \"b\", \"c\"]', "
    "x Float64 COMMENT 'dp: bounds=[-5, 10]', n Int32 COMMENT 'dp: bounds=[0, 100]', "
    "y Nullable(Float64) COMMENT 'dp: bounds=[2, 4]'"
)
NAMES = ["uid", "region", "x", "n", "y"]
QUERIES = [
    "SELECT count(*) FROM {t}",
    "SELECT count(y) FROM {t}",
    "SELECT sum(x) FROM {t}",
    "SELECT sum(n) FROM {t} WHERE x > 0",
    "SELECT avg(x), avg(y) FROM {t}",
    "SELECT region, count(*), sum(x), sum(n) FROM {t} GROUP BY region",
    "SELECT region, avg(n), count(y) FROM {t} WHERE n < 50 OR y IS NULL GROUP BY region",
]


def _base_rows(seed: int = 7, units: int = 25) -> list[tuple]:
    rng = np.random.default_rng(seed)
    rows = []
    for uid in range(1, units + 1):
        for _ in range(int(rng.integers(1, 6))):
            rows.append((
                uid, ["a", "b", "c", "z"][int(rng.integers(0, 4))], float(rng.normal(3, 6)),
                int(rng.integers(-20, 130)), None if rng.random() < 0.2 else float(rng.uniform(0, 6)),
            ))
    return rows


row_strategy = st.tuples(
    st.sampled_from(["a", "b", "c", "z"]),
    st.floats(-1e6, 1e6, allow_nan=False),
    st.integers(-(2**31), 2**31 - 1),
    st.none() | st.floats(-1e6, 1e6, allow_nan=False),
)


@pytest.fixture
def base(connect):
    session = connect(analyst="sensitivity")
    comment = f"dp: privacy_unit=uid, max_rows_per_unit={CAP}"
    rows = _base_rows()
    make_table(session, COLUMNS, rows, NAMES, name="d", comment=comment)
    make_table(session, COLUMNS, [], NAMES, name="d2", comment=comment)
    return session, rows


def _exact(session, sql: str) -> dict[str, tuple[float, np.ndarray]]:
    plan, _ = session.plan(sql)
    values = execute.exact(session.engine, plan, emit_sql(plan, session.engine.database), CAP_KEY).measures
    return {m.name: (m.sensitivity, values[m.name]) for m in plan.measures}


def _check_neighbours(session, rows_d2: list[tuple], removed: int | None = None) -> None:
    """d2 = ``rows_d2`` (minus unit ``removed``'s rows, by a lightweight DELETE) against d, both capped
    under one key. The rows of every other unit keep their row numbers in d2 (appended rows come after
    them; a lightweight DELETE only masks rows), so they keep the same rows under the key: the coupling
    the cap's privacy argument uses (docs/algorithms.md, C3a). Re-inserting d without the unit would
    renumber the rows after it, and under one *fixed* key other units could keep other rows — a
    difference the key's randomness, not the sensitivity, accounts for."""
    engine = session.engine
    engine.command(f"TRUNCATE TABLE {engine.table('d2')}")
    if rows_d2:
        engine.insert("d2", rows_d2, NAMES)
    if removed is not None:
        engine.command(f"DELETE FROM {engine.table('d2')} WHERE uid = {int(removed)}")
    for template in QUERIES:
        a = _exact(session, template.format(t="d"))
        b = _exact(session, template.format(t="d2"))
        for name, (sens, va) in a.items():
            vb = b[name][1]
            l1 = float(np.abs(va - vb).sum())
            l2 = float(np.sqrt(((va - vb) ** 2).sum()))
            tol = 1e-9 * max(1.0, sens)
            assert l1 <= sens + tol, f"{template} {name}: ℓ1 change {l1} > sensitivity {sens}"
            assert l2 <= sens + tol, f"{template} {name}: ℓ2 change {l2} > sensitivity {sens}"


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(extra=st.lists(row_strategy, min_size=1, max_size=3 * CAP + 4))
def test_adding_one_extreme_unit_stays_within_sensitivity(base, extra):
    session, rows = base
    new_unit = [(999, *r) for r in extra]
    _check_neighbours(session, rows + new_unit)


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(victim=st.integers(1, 25))
def test_removing_one_unit_stays_within_sensitivity(base, victim):
    session, rows = base
    _check_neighbours(session, rows, removed=victim)


def test_worst_case_unit_reaches_the_count_bound(base):
    """Tightness: a unit with more rows than the cap moves count(*) by exactly the cap."""
    session, rows = base
    extra = [(999, "a", 1e9, 10**9, 1e9)] * (CAP + 5)
    _check_neighbours(session, rows + extra)
    a = _exact(session, "SELECT count(*), sum(x) FROM d")
    b = _exact(session, "SELECT count(*), sum(x) FROM d2")
    assert b["m0"][1][0] - a["m0"][1][0] == CAP
    assert b["m1"][1][0] - a["m1"][1][0] == pytest.approx(CAP * 10.0)
