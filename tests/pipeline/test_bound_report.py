"""``SETTINGS dp_report_dropped = 1`` (issue 27, item 3): a noisy share of each unit's rows the contribution
bound dropped, charged within the query's ε.

Checked by value: at a huge ε the released share is the truth computed here from the rows (row cap and
per-group bound); the two exact inputs move by at most 1 between neighbouring tables (their declared
sensitivity), on real chdb under one cap key; the charge is the ε asked, of which the report's two
mechanisms take the stated share; the interval covers the truth at its level; and every query that
cannot carry a report is refused in words, uncharged.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import dpch
from dpch.errors import CostCheckFailed
from dpch.mechanisms.sampling import NoiseSource
from dpch.pipeline import bound_report
from dpch.pipeline.calibrate import calibrate, check_cost
from dpch.pipeline.execute import exact
from dpch.sql.rewrite import emit_sql
from tests.helpers import CAP_KEY, make_kinds_table, make_table, refused_uncharged

COLUMNS = ("uid UInt32, g String COMMENT 'dp: public, values=[\"a\", \"b\", \"c\"]', "
           "x Float64 COMMENT 'dp: bounds=[0, 10]'")
#: unit u has 1 + u % 10 rows, all in group "abc"[u % 3]; the cap is 3 rows per unit
ROWS = [(u, "abc"[u % 3], float(i % 10)) for u in range(200) for i in range(1 + u % 10)]
SIZES = [1 + u % 10 for u in range(200)]


def _dropped(kept_per_unit) -> float:
    """The truth: 1 − the mean over units of kept rows ÷ rows."""
    return 1.0 - float(np.mean([kept_per_unit(n) / n for n in SIZES]))


@pytest.fixture
def session(connect):
    s = connect(analyst="report", default_budget=dpch.Budget(1e9, 1e-6))
    make_table(s, COLUMNS, ROWS, ["uid", "g", "x"])
    return s


@pytest.mark.parametrize(("sql", "kept"), [
    ("SELECT count() FROM t", lambda n: min(n, 3)),
    ("SELECT g, sum(x) FROM t GROUP BY g", lambda n: min(n, 3)),
    ("SELECT g, avg(x) FROM t WHERE x >= 0 GROUP BY g", lambda n: min(n, 3)),
    # every unit's rows lie in one group: the per-group bound keeps min(n, c) of them
    ("SELECT g, count() FROM t GROUP BY g SETTINGS dp_max_groups = 1, dp_max_rows_per_group = 2",
     lambda n: min(n, 2)),
])
def test_the_released_share_is_the_truth_at_a_huge_epsilon(session, sql, kept):
    sep = " , " if "SETTINGS" in sql else " SETTINGS "
    release = session.query(sql + sep + "dp_report_dropped = 1, dp_epsilon = 1e6")
    truth = _dropped(kept)
    assert release.dropped.share == pytest.approx(truth, abs=1e-4)
    lo, hi = release.dropped.interval
    assert lo <= truth <= hi and hi - lo < 1e-3
    assert release.notes[-1] == release.dropped.describe() and f"{truth:.1%}" in release.notes[-1]


def test_nothing_dropped_when_every_unit_fits_and_no_rows_means_no_units(session):
    small = session.query("SELECT count() FROM t WHERE x < 3 SETTINGS dp_report_dropped = 1, dp_epsilon = 1e6")
    assert small.dropped.share == pytest.approx(0.0, abs=1e-4)  # at most 3 rows per unit pass: all kept
    none = session.query("SELECT g, count() FROM t WHERE x > 100 GROUP BY g SETTINGS dp_report_dropped = 1, "
                         "dp_epsilon = 1e6")
    # no row passes: K = U = 0 exactly (the measures' result has no row to carry them), so nothing to divide by
    assert (none.dropped.share, none.dropped.interval) == (0.0, (0.0, 1.0))


def test_the_charge_is_the_asked_epsilon_and_the_report_takes_its_share(session):
    plan, opts = session.plan("SELECT g, sum(x), count() FROM t GROUP BY g SETTINGS dp_report_dropped = 1, "
                              "dp_epsilon = 1")
    noise = calibrate(plan, opts)
    assert set(noise.dropped) == {bound_report.KEPT_MASS, bound_report.UNITS}
    assert sum(m.cost.epsilon for m in noise.dropped.values()) == pytest.approx(bound_report.REPORT_SHARE)
    assert [m.cost.epsilon for m in noise.additive.values()] == pytest.approx([0.45, 0.45])
    assert noise.cost.epsilon == pytest.approx(1.0)
    release = session.query("SELECT g, sum(x), count() FROM t GROUP BY g SETTINGS dp_report_dropped = 1, "
                            "dp_epsilon = 1")
    assert release.cost.epsilon == pytest.approx(1.0)
    # negative control: a noise plan without the report's mechanisms, or with them unasked, fails the cost check
    with pytest.raises(CostCheckFailed) as missing:
        check_cost(plan, opts, dataclasses.replace(noise, dropped={}))
    assert "dropped-report" in missing.value.detail
    plain, plain_opts = session.plan("SELECT g, sum(x), count() FROM t GROUP BY g SETTINGS dp_epsilon = 1")
    with pytest.raises(CostCheckFailed) as unasked:
        check_cost(plain, plain_opts, dataclasses.replace(calibrate(plain, plain_opts), dropped=noise.dropped))
    assert "dropped-report" in unasked.value.detail


@pytest.mark.parametrize("settings", ["", ", dp_max_groups = 1, dp_max_rows_per_group = 2"])
def test_each_exact_input_moves_by_at_most_one_between_neighbours(session, settings):
    """One unit added with many rows in every group, or the largest unit removed: K and U each move by
    at most 1 (the sensitivity the two Laplace mechanisms are calibrated to), on chdb under one cap key."""
    sql = f"SELECT g, count() FROM t GROUP BY g SETTINGS dp_report_dropped = 1{settings}"
    plan, _ = session.plan(sql)
    emitted = emit_sql(plan, session.engine.database)
    table = session.engine.table("t")
    count_dropped = f"SELECT sum(greatest(n - 3, 0)) FROM (SELECT uid, count() AS n FROM {table} GROUP BY uid)"
    rows_dropped = [session.engine.query_rows(count_dropped)[0][0]]
    base = exact(session.engine, plan, emitted, CAP_KEY).bound_report
    session.engine.insert("t", [(10_000, "abc"[i % 3], 1.0) for i in range(500)], ["uid", "g", "x"])
    rows_dropped.append(session.engine.query_rows(count_dropped)[0][0])
    added = exact(session.engine, plan, emitted, CAP_KEY).bound_report
    session.engine.command(f"DELETE FROM {session.engine.table('t')} WHERE uid IN (9, 10000)")
    removed = exact(session.engine, plan, emitted, CAP_KEY).bound_report
    assert base is not None and added is not None and removed is not None
    assert added[1] - base[1] == 1 and base[1] - removed[1] == 1  # U
    assert 0 < added[0] - base[0] <= 1 and 0 < base[0] - removed[0] <= 1  # K: the unit's kept ÷ rows
    # negative control: the count of dropped *rows* (what a row share would release) moves by hundreds
    assert rows_dropped[1] - rows_dropped[0] > 100


def test_explain_says_what_the_report_costs(session):
    explanation = session.explain("SELECT g, count() FROM t GROUP BY g SETTINGS dp_report_dropped = 1, dp_epsilon = 2")
    note = next(n for n in explanation.notes if n.startswith("dp_report_dropped"))
    assert "ε 0.2 (10% of the query's)" in note
    assert "__bound_report" in explanation.sql and explanation.cost.epsilon == pytest.approx(2.0)


def test_the_interval_covers_the_truth_at_its_level():
    """2 000 draws of the report at ε 0.05 from fixed exact inputs: coverage of the true share ≥ 95% (less 3
    standard errors); negative control: a quarter of the half-width covers far less often."""
    source = NoiseSource(7)
    noise = bound_report.mechanisms(0.5)
    units, kept = 400.0, 250.0
    truth = 1.0 - kept / units
    draws = [bound_report.release(noise, (kept, units), source, 0.95) for _ in range(2000)]
    covered = np.mean([d.interval[0] <= truth <= d.interval[1] for d in draws])
    assert covered >= 0.95 - 3 * np.sqrt(0.95 * 0.05 / 2000)
    narrow = np.mean([abs(d.share - truth) <= (d.interval[1] - d.interval[0]) / 8 for d in draws])
    assert narrow < 0.8


@pytest.mark.parametrize(("sql", "words"), [
    ("SELECT count() FROM t SETTINGS dp_report_dropped = 2", "must be 0 or 1"),
    ("SELECT g, count() AS n FROM t GROUP BY g ORDER BY n DESC LIMIT 1 SETTINGS dp_select = 'top', "
     "dp_report_dropped = 1", "top-k"),
    ("SELECT count() FROM t SETTINGS dp_accuracy = 50, dp_report_dropped = 1", "accuracy-first"),
])
def test_refused_in_words_uncharged(session, sql, words):
    refusal = refused_uncharged(session, sql)
    assert words in str(refusal)


def test_refused_where_nothing_is_bounded(connect):
    s = connect(analyst="report")
    make_kinds_table(s)  # one row per unit: the rows are not capped
    refusal = refused_uncharged(s, "SELECT g, count() FROM t GROUP BY g SETTINGS dp_report_dropped = 1")
    assert "nothing is dropped" in str(refusal)


def test_each_count_gets_laplace_noise_of_sensitivity_one():
    """The two mechanisms are Laplace of sensitivity 1 at half the report's ε each (dimension 1), and the
    released share spreads as 1 − (K + Z1)/(U + Z2) with Z1, Z2 ~ Laplace(2/(0.1·ε)) does: the spread of 4 000
    draws against a simulation with numpy's Laplace, within 10% (a missing or doubled noise is 30%+ off)."""
    epsilon, kept, units = 2.0, 600.0, 1000.0
    noise = bound_report.mechanisms(epsilon)
    for name, integer in ((bound_report.KEPT_MASS, False), (bound_report.UNITS, True)):
        m = noise[name]
        assert (m.sensitivity, m.cost.epsilon, m.integer) == (1.0, pytest.approx(epsilon * 0.1 / 2), integer)
    source = NoiseSource(11)
    shares = np.array([bound_report.release(noise, (kept, units), source, 0.95).share for _ in range(4000)])
    rng = np.random.default_rng(3)
    scale = 2.0 / (epsilon * bound_report.REPORT_SHARE)
    reference = 1.0 - (kept + rng.laplace(0, scale, 4000)) / (units + rng.laplace(0, scale, 4000))
    assert np.std(shares) == pytest.approx(np.std(reference), rel=0.1)
    assert np.mean(shares) == pytest.approx(1.0 - kept / units, abs=0.01)


def test_the_interval_is_the_box_of_the_two_half_widths():
    """Each count within its half-width at 1 − β/2 (a union bound), and 1 − K/U over that box, computed here
    from the mechanisms' own half-widths."""
    noise = bound_report.mechanisms(1.0)
    source = NoiseSource(2)
    out = bound_report.release(noise, (300.0, 900.0), source, 0.9)
    level = 1.0 - (1.0 - 0.9) / 2
    hk, hu = noise[bound_report.KEPT_MASS].half_width(level), noise[bound_report.UNITS].half_width(level)
    # the noisy counts, recovered from the released share's draw: replay the same source
    replay = NoiseSource(2)
    k = float(noise[bound_report.KEPT_MASS].release(np.array([300.0]), replay)[0])
    u = float(noise[bound_report.UNITS].release(np.array([900.0]), replay)[0])
    assert out.share == pytest.approx(1.0 - k / u)
    assert out.interval == pytest.approx((1.0 - (k + hk) / (u - hu), 1.0 - (k - hk) / (u + hu)))
    assert out.epsilon == pytest.approx(0.1)
