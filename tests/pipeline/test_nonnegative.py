"""Non-negative by construction (issue 27, item 4): a count, and a sum of values bounded below by 0, is
never released below 0, and its interval is clipped to match; a sum that can be negative is not.

The released value is max(v, 0) of the noisy value v (the projection onto the values the truth can take:
post-processing, never farther from the truth). Its interval [max(lo, 0), max(hi, 0)] holds a truth ≥ 0
exactly when [lo, hi] does, so coverage is unchanged: tested on groups whose truth is 0 or small, where
the clipping acts in about half of the releases. Tolerance: the binomial 99.9% band (3.29 σ) around the
95% level over ``RELEASES`` × ``GROUPS`` draws, each a fixed-seed release.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpch import Budget
from tests.helpers import make_table

GROUPS = [f"g{i}" for i in range(20)]
RELEASES = 100


@pytest.fixture
def session(connect):
    s = connect(analyst="nonneg", default_budget=Budget(1e9, 0.5), seed=27)
    values = ", ".join(f'\\"{g}\\"' for g in GROUPS)
    # groups g0…g9 hold one row each (truth 1), g10…g19 none (truth 0)
    rows = [(i, GROUPS[i], 3.0, -2.0) for i in range(10)]
    make_table(s, f"uid UInt64, g String COMMENT 'dp: public, values=[{values}]', "
               "x Float64 COMMENT 'dp: bounds=[0, 10]', y Float64 COMMENT 'dp: bounds=[-5, 10]'",
               rows, ["uid", "g", "x", "y"], comment="dp: privacy_unit=uid, max_rows_per_unit=1")
    return s


def _releases(session, settings: str) -> list:
    return [session.query(f"SELECT g, count(*), sum(x), sum(y) FROM t GROUP BY g ORDER BY g {settings}")
            for _ in range(RELEASES)]


@pytest.mark.parametrize("settings", ["SETTINGS dp_epsilon = 1", "SETTINGS dp_epsilon = 1, dp_delta = 1e-6"],
                         ids=["laplace", "gaussian"])
def test_counts_and_nonnegative_sums_are_never_below_zero(session, settings):
    results = _releases(session, settings)
    truth = {g: (1, 3.0, -2.0) if i < 10 else (0, 0.0, 0.0) for i, g in enumerate(GROUPS)}
    counts = np.array([row[1] for r in results for row in r.rows])
    sums_x = np.array([row[2] for r in results for row in r.rows])
    sums_y = np.array([row[3] for r in results for row in r.rows])
    assert counts.min() == 0 and sums_x.min() == 0.0  # clipped, and the clipping acted
    assert (counts == 0).mean() > 0.2 and (sums_x == 0).mean() > 0.2
    assert sums_y.min() < 0  # negative control: y's bounds allow a negative sum, which is shown as drawn
    covered = {1: [], 2: [], 3: []}
    for r in results:
        for row, ivs in zip(r.rows, r.intervals, strict=True):
            for col in (1, 2):
                lo, hi = ivs[col]
                assert 0.0 <= lo <= row[col] <= hi, (row, ivs)  # the interval is clipped with its value
            for col in (1, 2, 3):
                lo, hi = ivs[col]
                covered[col].append(lo <= truth[row[0]][col - 1] <= hi)
    band = 3.29 * math.sqrt(0.95 * 0.05 / (RELEASES * len(GROUPS)))
    for col, hits in covered.items():
        assert np.mean(hits) >= 0.95 - band, (col, np.mean(hits))


def test_explain_says_so(session):
    """The statistic carries the flag: counts and x's sum (bounds [0, 10]) are non-negative, y's not."""
    plan = session.explain("SELECT g, count(*), sum(x), sum(y) FROM t GROUP BY g").plan
    flags = [s.nonnegative for s in plan.stats.values()]
    assert flags == [True, True, False]
