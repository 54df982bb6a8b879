"""Stage 6, release: noise drawn on exact inputs; post-processing sees only noisy values."""

from __future__ import annotations

import numpy as np

from dpch.mechanisms.sampling import NoiseSource
from dpch.pipeline import execute
from dpch.pipeline.calibrate import calibrate
from dpch.pipeline.release import Noise, release_rows
from dpch.sql.rewrite import emit_sql
from tests.helpers import CAP_KEY


def _inputs(session, sql):
    plan, opts = session.plan(sql)
    data = execute.exact(session.engine, plan, emit_sql(plan, session.engine.database), CAP_KEY)
    return plan, opts, calibrate(plan, opts), data


def test_same_seed_same_rows_and_the_noise_is_there(session):
    plan, opts, noise, data = _inputs(session, "SELECT region, count() FROM t GROUP BY region")
    first = release_rows(plan, opts, noise, data, NoiseSource(7))
    assert first == release_rows(plan, opts, noise, data, NoiseSource(7))
    other = release_rows(plan, opts, noise, data, NoiseSource(8))
    assert first[1] != other[1]  # a different seed draws different noise
    exact = data.measures[plan.measures[0].name]
    released = np.array([row[1] for row in first[1]], dtype=float)
    assert not np.array_equal(released, exact)  # negative control: the exact counts are not released


def test_having_filters_noisy_values(session):
    plan, opts, noise, data = _inputs(
        session, "SELECT region, count() AS n FROM t GROUP BY region HAVING n > 1e9 SETTINGS dp_epsilon = 1")
    columns, rows, intervals = release_rows(plan, opts, noise, data, NoiseSource(1))
    assert columns == ["region", "n"] and rows == [] and intervals == []


def test_a_session_draws_from_one_source_one_release_at_a_time():
    noise = Noise(3)
    with noise.drawing() as first:
        pass
    with noise.drawing() as second:  # released after the first release's draws: not a deadlock
        pass
    assert first is second is noise.source
