"""Partition selection that does not pay twice (issue 16, part 4): when the released statistic is the
count of distinct units per private key, the selection's own noisy count is the answer — one Laplace
mechanism with the whole ε and δ — instead of a selection and a separate noisy count splitting them."""

from __future__ import annotations

import numpy as np
import pytest

from dpch.mechanisms.discrete import discrete_laplace_half_width
from dpch.mechanisms.sampling import NoiseSource
from dpch.pipeline import execute, release
from dpch.pipeline.calibrate import NoisePlan, calibrate, shared_count
from dpch.pipeline.execute import GroupData
from dpch.sql.rewrite import emit_sql
from tests.helpers import CAP_KEY, make_table

ONE_ROW = "SELECT city, count(*) AS n FROM residents GROUP BY city SETTINGS dp_epsilon = 1, dp_delta = 1e-6"


@pytest.fixture
def session(connect):
    s = connect(analyst="shared")
    rows = [(i, f"c{i % 7 if i % 50 else 99}") for i in range(1, 2001)]
    make_table(s, "pid UInt32, city String", rows, ["pid", "city"], name="residents",
               comment="dp: privacy_unit=pid, unique_units")
    visits = [(i % 300, f"c{i % 5}") for i in range(1500)]
    make_table(s, "uid UInt32, city String", visits, ["uid", "city"], name="trips",
               comment="dp: privacy_unit=uid, max_rows_per_unit=5")
    return s


@pytest.mark.parametrize("sql", [
    ONE_ROW,
    "SELECT city, count(DISTINCT pid) AS n FROM residents GROUP BY city SETTINGS dp_delta = 1e-6",
    "SELECT city, count(DISTINCT uid) FROM trips GROUP BY city SETTINGS dp_delta = 1e-6",
])
def test_a_count_of_units_is_one_mechanism_with_the_whole_budget(session, sql):
    plan, opts = session.plan(sql)
    noise = calibrate(plan, opts)
    assert noise.shared is not None and not noise.additive
    assert noise.selection is not None and noise.selection.epsilon == opts.epsilon
    assert noise.selection.delta == opts.delta
    assert (noise.cost.epsilon, noise.cost.delta) == (opts.epsilon, opts.delta)
    assert opts.resolved_mechanism == "laplace"
    report = session.explain(sql).measures
    assert [m.mechanism for m in report] == ["partition selection (noisy count released)"]


@pytest.mark.parametrize("sql", [
    "SELECT city, count(*) FROM trips GROUP BY city SETTINGS dp_delta = 1e-6",  # 5 rows a unit: rows ≠ units
    "SELECT city, countIf(pid > 10) FROM residents GROUP BY city SETTINGS dp_delta = 1e-6",
    ONE_ROW + ", dp_mechanism = 'gaussian'",  # asked for: kept
])
def test_other_counts_split_the_budget_as_before(session, sql):
    plan, opts = session.plan(sql)
    assert shared_count(plan, opts.resolved_mechanism) is None
    noise = calibrate(plan, opts)
    assert noise.shared is None and noise.additive and noise.selection is not None


@pytest.mark.parametrize(("sql", "others"), [
    ("SELECT city, count(*), count(DISTINCT pid) FROM residents GROUP BY city SETTINGS dp_delta = 1e-6", 1),
    ("SELECT city, count(*) AS n, sum(pid) AS s, avg(pid) FROM residents GROUP BY city "
     "SETTINGS dp_delta = 1e-6", 2),
    ("SELECT city, count(DISTINCT uid), count(*) FROM trips GROUP BY city "
     "SETTINGS dp_epsilon = 2.5, dp_delta = 1e-6", 1),
])
def test_beside_other_measures_the_count_of_units_shares_the_selection(session, sql, others):
    """The count of units still is the selection's noisy count; the other measures keep their own
    mechanisms, and ε is split over them and the one selection — one share fewer than before."""
    make_table(session, "pid UInt32 COMMENT 'dp: bounds=[0, 3000]', city String",
               [(i, f"c{i % 7}") for i in range(1, 2001)], ["pid", "city"], name="residents_b",
               comment="dp: privacy_unit=pid, unique_units")
    plan, opts = session.plan(sql.replace("FROM residents", "FROM residents_b"))
    noise = calibrate(plan, opts)
    assert noise.shared is not None and len(noise.additive) == others and noise.shared not in noise.additive
    assert opts.resolved_mechanism == "laplace"
    share = opts.epsilon / (others + 1)
    assert noise.selection is not None and noise.selection.epsilon == pytest.approx(share)
    assert all(m.cost.epsilon == pytest.approx(share) for m in noise.additive.values())
    assert (noise.cost.epsilon, noise.cost.delta) == pytest.approx((opts.epsilon, opts.delta))
    assert noise.half_width(noise.shared, 0.95) == noise.selection.half_width(0.95)
    release_ = session.query(sql.replace("FROM residents", "FROM residents_b"))
    assert release_.cost == noise.cost


def _draws(plan, opts, noise: NoisePlan, data: GroupData, trials: int):
    """(released keys, their values) of ``trials`` releases with fixed seeds."""
    out = []
    for seed in range(trials):
        _, rows, _ = release.release_rows(plan, opts, noise, data, NoiseSource(seed))
        out.append({row[0]: row[1] for row in rows})
    return out


def test_the_released_count_is_the_noisy_count_that_was_selected(session):
    """Every released value clears the threshold (it is the value that selected the key), its error
    is the selection's discrete Laplace, and the interval holds at its stated confidence."""
    plan, opts = session.plan(ONE_ROW)
    noise = calibrate(plan, opts)
    data = execute.exact(session.engine, plan, emit_sql(plan, session.engine.database), CAP_KEY)
    exact = {k[0]: u for k, u in zip(data.keys, data.units, strict=True)}
    assert exact["c99"] == 40 and len(exact) == 8
    errors = []
    for released in _draws(plan, opts, noise, data, 400):
        assert all(value > noise.selection.threshold for value in released.values())
        errors += [value - exact[key] for key, value in released.items() if key != "c99"]
    errors = np.array(errors)
    scale = float(noise.selection.scale)
    assert abs(errors.mean()) < 4 * np.sqrt(2) * scale / np.sqrt(len(errors))  # unbiased, 4 σ of the mean
    half = discrete_laplace_half_width(scale, opts.confidence)
    assert noise.half_width("m0", opts.confidence) == half
    covered = float(np.mean(np.abs(errors) <= half))
    assert covered >= opts.confidence - 3 * np.sqrt(opts.confidence * (1 - opts.confidence) / len(errors))


def test_an_independent_draw_for_the_value_is_caught(session, monkeypatch):
    """Negative control: a variant that selects with one draw and releases another releases values at
    or below the threshold (the check above fails on it)."""
    plan, opts = session.plan(ONE_ROW.replace("dp_epsilon = 1", "dp_epsilon = 0.05"))
    noise = calibrate(plan, opts)
    data = execute.exact(session.engine, plan, emit_sql(plan, session.engine.database), CAP_KEY)
    low = GroupData(keys=data.keys, measures=data.measures, histograms=data.histograms,
                    units=np.where(np.array([k[0] for k in data.keys]) == "c99", noise.selection.threshold,
                                   data.units))
    sel = noise.selection
    monkeypatch.setattr(type(sel), "keep", lambda self, noisy: np.asarray(noisy) + np.random.default_rng(
        0).laplace(0, float(self.scale), np.shape(noisy)) > self.threshold)
    below = [v for released in _draws(plan, opts, noise, low, 200) for v in released.values()
             if v <= sel.threshold]
    assert below
