"""The audit's power on quantiles (issue 24 item 6): a quantile drawn with half its noise.

A quantile is the exponential mechanism over a public grid with the rank utility −|#{x ≤ c} − q·n|,
normalised by 2Δ with Δ = k (the rows one unit may add). Adding k rows moves the utility by q·k when
they go above every candidate and by (1 − q)·k below, so the mechanism's loss under add/remove is at
most ε·max(q, 1 − q), and with half its noise (the mechanism at 2ε) at most 2ε·max(q, 1 − q). Hence:

- a **median** drawn with half its noise is still within its claim (loss ≤ ε): no audit can flag it,
  and none should. On the audit's own pair (the ≈ 250 capped rows of the over-80s, the unit's 10 rows
  beyond the bounds) its largest loss is 0.595 (computed exactly below, under the audit's cap key); the audit measures
  0.53–0.56 (seeds 1, 2, 3; 20 000 trials);
- a **0.9-quantile** drawn with half its noise loses up to 1.8 > 1: caught (ε_lb 1.38–1.45 at 20 000
  trials, 1.26–1.46 at 50 000, seeds 1, 2, 3; the pair's largest loss is 1.607), while the correct one
  gives 0.55–0.73;
- a **0.1-quantile** moves most with the unit's rows *below* every candidate, which the neighbours now
  build (before, the rows went above the bounds, where they move its utility by 0.1·k: ε_lb 0.06 for
  the correct quantile, 0.12 at most for half its noise, never caught). Now the correct one gives
  0.39–0.44 and half its noise 0.98–1.03 against a pair maximum of 1.10: caught at 4 of 6 runs
  (seeds 1–3 at 20 000 and 50 000 trials) — at the edge of what this data allows.
"""

from __future__ import annotations

import numpy as np
import pytest

import dpch
from dpch.audit import audit_query, build_neighbours
from dpch.audit.experiment import audit_session
from dpch.audit.neighbours import quantile_sides
from dpch.audit.report import summary
from dpch.audit.runner import AuditRunner
from dpch.mechanisms.exponential import ExponentialMechanism
from dpch.mechanisms.sampling import NoiseSource
from dpch.pipeline import execute
from dpch.pipeline.calibrate import calibrate
from dpch.pipeline.postprocess import grid_utilities
from dpch.sql.rewrite import emit_sql

TRIALS = 20_000


def quantile_query(q: float) -> str:
    return f"SELECT quantile({q:g})(duration_min) FROM visits WHERE age >= 80"


class QuantileWithHalfNoise(AuditRunner):
    """Negative control: each quantile's exponential mechanism at twice its ε (half its Gumbel noise)
    while the production claim is kept."""

    def noise_plan(self, plan, opts):
        noise = super().noise_plan(plan, opts)
        noise.selectors = {name: ExponentialMechanism(2 * m.epsilon, m.sensitivity, m.monotonic)
                           for name, m in noise.selectors.items()}
        return noise


@pytest.fixture
def session(store_dsn, visits_db):
    s = dpch.connect(store_dsn, database=visits_db, analyst="real-analyst", default_budget=dpch.Budget(), seed=99)
    yield s
    s.close()


def test_a_quantile_far_from_the_median_drawn_with_half_its_noise_is_caught(session):
    honest = audit_query(session, quantile_query(0.9), trials=TRIALS, seed=1, epsilon=1.0)
    broken = audit_query(session, quantile_query(0.9), trials=TRIALS, seed=1, runner_class=QuantileWithHalfNoise,
                         epsilon=1.0)
    assert not honest.violation, summary(honest)
    assert broken.violation and broken.bound.epsilon_lb > 1.2, summary(broken)


def _largest_loss(session, sql: str, factor: float) -> float:
    """max_j |log P_D(j)/P_D′(j)| of the quantile's pick on the audit's own pair, exactly (softmax of the
    exponential mechanism's logits on both sides' histograms), with the mechanism at ``factor``·ε, under
    the cap key the audit with seed 1 uses (its pair keeps those rows)."""
    key = NoiseSource(1).cap_key()
    plan, _ = session.plan(sql, epsilon=1.0)
    pair = build_neighbours(session.engine, plan)
    sides = []
    try:
        for db in (pair.d_database, pair.dprime_database):
            side = audit_session(session, db, 1)
            try:
                p, o = side.plan(sql, epsilon=1.0)
                stat = next(s for s in p.stats.values() if s.kind == "quantile")
                selector = calibrate(p, o).selectors[stat.name]
                mech = ExponentialMechanism(factor * selector.epsilon, selector.sensitivity, selector.monotonic)
                data = execute.exact(side.engine, p, emit_sql(p, side.engine.database), key)
                logits = mech.logits(grid_utilities(stat, data.histograms[stat.measures[0]][0]))
                sides.append(logits - np.logaddexp.reduce(logits))
            finally:
                side.close()
    finally:
        pair.drop(session.engine)
    return float(np.max(np.abs(sides[0] - sides[1])))


def test_a_median_drawn_with_half_its_noise_is_within_its_claim(session):
    """Not an audit miss: under add/remove a median's rank utility moves by k/2 of its declared k, so the
    mechanism at 2ε still loses at most ε. On the audit's pair exactly, under its cap key: 0.595 (half
    noise), 0.334 (correct) — 0.604 and 0.335 with the stored-order cap before issue 27; the audit's
    bound stays below that ceiling, as any sound lower bound must."""
    sql = quantile_query(0.5)
    ceiling = _largest_loss(session, sql, 2.0)
    assert ceiling == pytest.approx(0.595, abs=1e-3) and ceiling <= 1.0
    assert _largest_loss(session, sql, 1.0) == pytest.approx(0.334, abs=1e-3)
    broken = audit_query(session, sql, trials=TRIALS, seed=1, runner_class=QuantileWithHalfNoise, epsilon=1.0)
    assert 0.45 <= broken.bound.epsilon_lb <= ceiling and not broken.violation, summary(broken)


def test_the_neighbour_puts_a_low_quantiles_rows_below_the_bounds(session):
    """A quantile below the median is moved most by rows below every candidate (its utility by
    (1 − q)·k instead of q·k): the added unit's values go below the lower bound, above it for one above
    the median, and for several quantiles of one column to the side of the most extreme."""
    plan, _ = session.plan(quantile_query(0.1))
    assert quantile_sides(plan) == {"duration_min": "low"}
    assert quantile_sides(session.plan(quantile_query(0.9))[0]) == {"duration_min": "high"}
    three = "SELECT quantile(0.05)(duration_min), quantile(0.5)(duration_min), quantile(0.9)(duration_min) FROM visits"
    assert quantile_sides(session.plan(three)[0]) == {"duration_min": "low"}
    pair = build_neighbours(session.engine, plan, scratch="dpch_audit_q10")
    try:
        values = session.engine.query_rows(
            f"SELECT DISTINCT duration_min FROM dpch_audit_q10_dprime.visits WHERE user_id = {pair.unit}")
        assert values == [(-120.0,)], values  # bounds [0, 120]: one width below the lower bound
    finally:
        pair.drop(session.engine)
    assert _largest_loss(session, quantile_query(0.1), 2.0) > 1.05  # with rows above: 0.12


def test_a_low_quantile_is_audited_near_its_pairs_ceiling(session):
    """The correct 0.1-quantile's bound on the new pair (rows below) is 0.39–0.44 (seeds 1–3), against
    0.06 with the rows above the bounds."""
    honest = audit_query(session, quantile_query(0.1), trials=TRIALS, seed=2, epsilon=1.0)
    assert 0.3 <= honest.bound.epsilon_lb <= 1.0 and not honest.violation, summary(honest)
