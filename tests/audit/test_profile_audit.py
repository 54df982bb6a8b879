"""`dpch audit`'s privacy-profile test end to end on the fixture tables (embedded ClickHouse):
a calibrated Gaussian count and sum pass, and a variant whose σ is 30% too small — caught by the
profile test, missed by the pure-ε bound — is flagged (issue 16).

Sample size and tolerances: 100 000 trials per side (fast mode, ≈ 1 s each). The claimed total
variation (δ at ε 0) of a Gaussian at (ε 1, δ 1e-6) is 0.094; σ × 0.7 has 0.134. At 100 000
trials the DKW slack on each side is 0.0052 (α/3 = 0.0167 shared by the two sides). Measured over
seeds 101, 1, 2, 3 for both queries: the broken variant's δ_lb(0) is 0.120–0.128 (excess over the
claim 0.026–0.034), its pure-ε lower bound 0.00–0.74 (never above the claimed ε 1); the calibrated
release's δ_lb(0) is 0.080–0.087 (85–92% of the claim) and nowhere above the claimed curve. The
group-by sum over three devices (claimed TV 0.088), seeds 109, 1, 2: broken δ_lb(0) 0.109–0.115
(excess 0.023–0.028), ε_lb 0.50–0.61; calibrated δ_lb(0) 0.075–0.078 (85–89%).
"""

from __future__ import annotations

import pytest

import dpch
from dpch.audit import audit_query
from dpch.audit.report import summary, write_report
from dpch.audit.runner import AuditRunner
from dpch.mechanisms.gaussian import GaussianMechanism

TRIALS = 100_000
#: the injected mis-calibration: σ from 0.7 × the sensitivity, i.e. σ ≈ 0.7 × the claimed σ
FACTOR = 0.7


class GaussianSigmaTooSmall(AuditRunner):
    """Noise calibrated for 0.7 × the derived sensitivity: σ 30% smaller than the σ the production
    path claims (the claimed cost and profile still come from the production calibration)."""

    def calibrate(self, plan, opts):
        return {name: GaussianMechanism(m.epsilon, m.delta, FACTOR * m.sensitivity, integer=m.integer,
                                        dimension=m.dimension, unit_coordinates=m.unit_coordinates)
                for name, m in super().calibrate(plan, opts).items()}


@pytest.fixture
def session(store_dsn, visits_db):
    s = dpch.connect(store_dsn, database=visits_db, analyst="real-analyst", default_budget=dpch.Budget(), seed=99)
    yield s
    s.close()


@pytest.mark.parametrize(("sql", "kind", "seen"), [
    ("SELECT count(*) FROM visits", "discrete gaussian", 0.8),
    ("SELECT sum(spend) FROM visits", "gaussian", 0.8),
    # an integer vector (one unit may reach every device, σ from the vector's zCDP); the audited pair
    # moves one group, so the claim is the scalar discrete Gaussian there. Three coordinates: the
    # statistic is chosen on half the samples, so the measuring half has 50 000 (slack ±0.0074)
    ("SELECT device, sum(pages) FROM visits GROUP BY device", "discrete gaussian", 0.7),
])
def test_calibrated_gaussian_passes_and_sigma_thirty_percent_small_is_caught_only_by_the_profile(
        session, sql, kind, seen):
    honest = audit_query(session, sql, trials=TRIALS, seed=101, epsilon=1.0, delta=1e-6)
    assert honest.profile is not None and honest.profile.claim.kind == kind
    assert not honest.violation, summary(honest)
    assert honest.profile.tightness > seen, f"δ_lb(0) is {honest.profile.tightness:.0%} of the claim\n{summary(honest)}"

    broken = audit_query(session, sql, trials=TRIALS, seed=101, runner_class=GaussianSigmaTooSmall,
                         epsilon=1.0, delta=1e-6)
    if sql == "SELECT count(*) FROM visits":  # what was injected, stated: σ is 0.70 ± 0.01 of the claim
        injected = GaussianMechanism(1.0, 1e-6, FACTOR * 10.0, integer=True).sigma
        assert injected / honest.profile.claim.sigma == pytest.approx(FACTOR, abs=0.01)
    assert broken.claimed_epsilon == honest.claimed_epsilon, "the claim is the production path's"
    assert not broken.epsilon_violation, f"the pure-ε bound should miss it here\n{summary(broken)}"
    assert broken.bound.epsilon_lb < 1.0
    assert broken.profile_violation and broken.violation, summary(broken)
    assert broken.verdict == "VIOLATION"
    assert broken.profile is not None and broken.profile.delta_lower[0] > broken.profile.claimed[0]


def test_summary_and_report_show_the_profile(session, tmp_path):
    result = audit_query(session, "SELECT count(*) FROM visits", trials=20_000, seed=103, epsilon=1.0, delta=1e-6)
    text = summary(result)
    assert "profile:" in text and "discrete Gaussian" in text and "DKW slack" in text
    assert "all tests together at 95% confidence" in text
    # three tests share α: threshold, classifier, profile
    assert result.profile is not None and result.profile.confidence == pytest.approx(1 - 0.05 / 3)
    page = write_report(result, tmp_path / "a.html").read_text(encoding="utf-8")
    assert "privacy profile on" in page and "claimed δ(ε)" in page


@pytest.mark.parametrize(("sql", "options", "reason"), [
    ("SELECT count(*) FROM visits", {"epsilon": 1.0}, "not a Gaussian release"),
    ("SELECT avg(duration_min) FROM visits", {"epsilon": 1.0, "delta": 1e-6},
     "integer Gaussian noise on several coordinates or measures, and the audited pair moves more than one"),
])
def test_releases_without_a_profile_say_why(session, sql, options, reason):
    result = audit_query(session, sql, trials=2000, seed=107, **options)
    assert result.profile is None and reason in result.samples.profile_note
    assert f"profile:    not estimated ({reason}" in summary(result)
    assert result.bound.confidence == pytest.approx(0.95), "no profile test: the ε tests keep the whole α"
