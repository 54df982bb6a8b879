"""Partition selection through the full stack: a key held by a single unit is released with
probability ≤ δ/G (here measured against the exact probability of the sampled threshold test),
keys held by many units are released, and the released keys' counts carry intervals."""

from __future__ import annotations

import math

import pytest

from dpch import Budget
from dpch.mechanisms.partition_selection import LaplacePartitionSelection
from tests.helpers import make_table

SINGLE = 50      # keys held by exactly one unit
RUNS = 100       # queries: 5 000 single-unit key trials
DELTA = 0.2


@pytest.fixture
def session(connect):
    s = connect(analyst="selection", default_budget=Budget(1e9, 0.9), seed=99)
    rows = [(u, f"solo{u:03d}") for u in range(SINGLE)]
    rows += [(1000 + u, "common") for u in range(300)]
    make_table(s, "uid UInt64, name String", rows, ["uid", "name"],
               comment="dp: privacy_unit=uid, max_rows_per_unit=1")
    return s


def test_single_unit_keys_are_released_at_most_with_probability_delta(session, connect):
    sql = (f"SELECT name, count(*) AS n FROM t GROUP BY name "
           f"SETTINGS dp_epsilon = 1, dp_delta = {DELTA}, dp_mechanism = 'laplace'")
    # one row per unit: count(*) is the count of units, so the selection's noisy count is released and
    # the selection takes the whole ε (issue 16, part 4); G = 1
    selection = LaplacePartitionSelection(1.0, DELTA, 1)
    p = selection.single_unit_release_probability()
    assert p <= DELTA / 1
    solo_released = common_released = 0
    analysts = []
    for run in range(RUNS):
        if run % 4 == 0:  # a δ budget is below 1, so each analyst pays for 4 runs (δ 0.8)
            analysts.append(connect(analyst=f"selection{run}", default_budget=Budget(1e9, 0.9), seed=run))
        release = analysts[-1].query(sql)
        names = [row[0] for row in release.rows]
        solo_released += sum(name.startswith("solo") for name in names)
        common_released += "common" in names
        for row, ivs in zip(release.rows, release.intervals, strict=True):
            assert ivs[0] is None and ivs[1][0] <= row[1] <= ivs[1][1]
    trials = SINGLE * RUNS
    rate = solo_released / trials
    band = 3.29 * math.sqrt(p * (1 - p) / trials)
    assert rate <= DELTA + band, f"single-unit keys released at rate {rate:.4f} > δ = {DELTA}"
    assert abs(rate - p) <= band, f"rate {rate:.4f} vs exact {p:.4f} ± {band:.4f}"
    assert common_released == RUNS, "a key with 300 units must always clear the threshold"


def test_partition_selection_needs_delta(session):
    from dpch import QueryRejected

    with pytest.raises(QueryRejected, match="dp_delta > 0"):
        session.query("SELECT name, count(*) FROM t GROUP BY name")
