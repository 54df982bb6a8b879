"""Coverage of accuracy-first intervals: over many runs at fixed seeds, the stated intervals contain
the true (clamped, capped) answer at the stated confidence.

Runs go through dpch's own planner, noise path, stopping rule and post-processing
(:func:`dpch.pipeline.accuracy_first.iterate` / :func:`result_rows`) on the exact aggregates of the real
table, without the ledger (every run would otherwise need two ledger writes); the grid has 200
points instead of 1000 to keep the test fast (the rule and the bounds do not depend on it).

Tolerances (docs/development.md rule 6): with n = trials × groups interval checks at level 1 − β, the
observed rate must lie in the binomial 99.9% band (±3.29·√(β(1−β)/n)) when the stop is
data-independent (absolute target on counts: exact coverage), and above its lower end when the
stop depends on noisy values (time-uniform bounds, conservative by design). Negative control:
the same relative-error runs reported with *fixed-time* half-widths at half their size cover far
less than 95%.
"""

from __future__ import annotations

import math

import pytest

from dpch import Budget
from dpch.accuracy import planner, rules
from dpch.mechanisms.sampling import NoiseSource
from dpch.pipeline import execute
from dpch.pipeline.accuracy_first import GridRun, iterate, result_rows, start
from dpch.sql.accuracy_target import AccuracyTarget
from dpch.sql.rewrite import emit_sql
from tests.helpers import CAP_KEY

TRIALS = 300
Z999 = 3.29


@pytest.fixture
def session(connect, visits_db, database):
    s = connect(analyst="cov", filter="zcdp_bm", default_budget=Budget(10.0, 1e-6), seed=1)
    s.engine.command(f"CREATE TABLE {s.engine.table('visits')} AS {visits_db}.visits")
    s.engine.command(f"INSERT INTO {s.engine.table('visits')} SELECT * FROM {visits_db}.visits")
    return s


def _runs(session, sql: str, target: AccuracyTarget, *, seed: int, shrink: float = 1.0,
          uniform: bool | None = None) -> tuple[float, int, int]:
    """(coverage rate, checks, runs that met the target) over TRIALS runs of one query."""
    plan, _ = session.plan(sql)
    data = execute.exact(session.engine, plan, emit_sql(plan, session.engine.database), CAP_KEY)
    truth = {}
    for name, stat in plan.stats.items():
        if stat.kind == "avg":
            s, c = data.measures[stat.measures[0]], data.measures[stat.measures[1]]
            truth[name] = stat.interval.mid + s / c
        else:
            truth[name] = data.measures[stat.measures[0]]
    uni = rules.data_dependent(plan, target) if uniform is None else uniform
    # ρ cap ≈ 5.0 of the stacked vector: the path starts well above and ends well below the target
    afplan = planner.plan_accuracy(plan, target, mechanism=None, delta=0.0, filter_name="zcdp_bm",
                                   budget_delta=1e-6, epsilon_hint=10.0,
                                   admits=lambda c: (c.worst_rho or 0.0) <= 5.0, refuse=lambda c: None,
                                   uniform=uni, points=200)
    if shrink != 1.0:
        base = afplan.half_width
        afplan.half_width = lambda step, level: base(step, level) * shrink  # type: ignore[method-assign]
    values = afplan.blocks.stack(data.measures)
    hits = checks = met = 0
    source = NoiseSource(seed)
    for _ in range(TRIALS):
        _, run = start(afplan, values, source)
        assert isinstance(run, GridRun)
        step, noisy, ok, _ = iterate(plan, afplan, target, run, values)
        met += ok
        rows, intervals = result_rows(plan, afplan, step, noisy, data.keys, target.confidence)
        for g in range(len(rows)):
            for j, out in enumerate(plan.outputs):
                if out.is_key:
                    continue
                lo, hi = intervals[g][j]
                true = float(truth[out.stats[0]][g])
                hits += lo <= true <= hi
                checks += 1
    return hits / checks, checks, met


def _band(level: float, n: int) -> float:
    return Z999 * math.sqrt(level * (1 - level) / n)


def test_absolute_target_on_counts_has_exact_coverage(session):
    target = AccuracyTarget(accuracy=150.0, confidence=0.9)
    rate, n, met = _runs(session, "SELECT region, count(*) FROM visits GROUP BY region", target, seed=101)
    assert met == TRIALS
    assert abs(rate - 0.9) <= _band(0.9, n), f"coverage {rate:.4f} outside 0.9 ± {_band(0.9, n):.4f} (n={n})"


def test_relative_target_covers_at_any_stopping_time(session):
    target = AccuracyTarget(relative_error=0.05, confidence=0.9)
    rate, n, met = _runs(session, "SELECT region, count(*) FROM visits GROUP BY region", target, seed=202)
    assert met == TRIALS
    assert rate >= 0.9 - _band(0.9, n), f"coverage {rate:.4f} below 0.9 − {_band(0.9, n):.4f} (n={n})"


def test_avg_target_covers_at_any_stopping_time(session):
    target = AccuracyTarget(accuracy=4.0, confidence=0.9)
    rate, n, met = _runs(session, "SELECT device, avg(duration_min) FROM visits GROUP BY device", target,
                         seed=303)
    assert met == TRIALS
    assert rate >= 0.9 - _band(0.9, n), f"coverage {rate:.4f} below 0.9 − {_band(0.9, n):.4f} (n={n})"


def test_negative_control_halved_fixed_time_intervals_undercover(session):
    target = AccuracyTarget(relative_error=0.05, confidence=0.9)
    rate, n, _ = _runs(session, "SELECT region, count(*) FROM visits GROUP BY region", target, seed=404,
                       shrink=0.5, uniform=False)
    assert rate < 0.9 - _band(0.9, n), f"a halved fixed-time interval covered {rate:.4f}: the test has no power"

