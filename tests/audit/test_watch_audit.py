"""``dpch audit`` of a threshold watch (issue 16): halting positions on neighbouring tables against the
watch's ex-post claim ε_post(t) (dpch/audit/watch.py).

Data: 20 units in group b, one row per unit; the watch clamps to [20, 24] with its threshold at 22 and
σ_X 0.6 (query units), so on D the question sits at the range's lower end and the added unit moves it
by Δ — Thm 17's worst case for ⊤ at position 1, whose claim is ε_post(1) = 1.443. Measured at 20 000
instances per side, seed 3, 95% confidence: the watch's own mechanism gives loss ≥ 1.30 (90% of the
claim); the same watch drawing noise at 0.6 σ (the negative control: smaller noise than claimed) gives
loss ≥ 3.14, a violation.
"""

from __future__ import annotations

import dataclasses

import pytest

from dpch import Budget
from dpch.audit.watch import WatchAuditor, audit_watch
from dpch.errors import QueryRejected
from tests.helpers import ledger_rows, make_table

SQL = "SELECT count() FROM t WHERE g = 'b' SETTINGS dp_watch = 'w'"


class ThinNoise(WatchAuditor):
    """Negative control: the instance draws 0.6× the noise the watch's claim is computed for."""

    def mechanism(self):
        m = self.params.mechanism
        return dataclasses.replace(m, sigma_x=0.6 * m.sigma_x, sigma_z=0.6 * m.sigma_z)


@pytest.fixture
def session(connect):
    s = connect(analyst="watch-audit", default_budget=Budget(100, 1e-3))
    make_table(s, "uid UInt32, g String COMMENT 'dp: public, values=[\"a\", \"b\"]'",
               [(u, "ab"[u % 2]) for u in range(40)], ["uid", "g"], name="t",
               comment="dp: privacy_unit=uid, unique_units")
    s.watch_create("w", epsilon=40, delta=1e-6, threshold=22, lower=20, upper=24, sigma=0.6, tables="t")
    return s


def test_the_watch_is_consistent_and_thinner_noise_is_caught(session):
    before = ledger_rows(session), session.watch_state("w")
    honest = audit_watch(session, SQL, trials=20_000, seed=3)
    thin = audit_watch(session, SQL, trials=20_000, seed=3, auditor_class=ThinNoise)
    assert honest.values == (20.0, 21.0)
    assert honest.bound.outcome == 1 and honest.bound.claimed == pytest.approx(1.443, abs=1e-3)
    assert not honest.violation and honest.bound.tightness > 0.8, honest.summary()
    assert thin.violation, thin.summary()
    assert (ledger_rows(session), session.watch_state("w")) == before, "an audit spends nothing and asks nothing"


def test_cli_routes_a_watched_query_to_the_watch_audit(session, store_dsn):
    from click.testing import CliRunner

    from dpch.cli.main import cli

    out = CliRunner().invoke(cli, ["--dsn", store_dsn, "--database", session.engine.database, "--analyst",
                                   "watch-audit", "audit", "--query", SQL, "--trials", "4000", "--seed", "3"])
    assert out.exit_code == 0, out.output
    assert "watch w:" in out.output and "claimed ε_post" in out.output and "consistent" in out.output
    with pytest.raises(QueryRejected, match="asks no watch"):
        audit_watch(session, SQL.replace(" SETTINGS dp_watch = 'w'", ""), trials=100)
