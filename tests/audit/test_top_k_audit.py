"""``dpch audit`` of top-k queries (issue 16): the fast path runs the production top-k release stage on
the two neighbouring tables' exact scores and observes the picks (each round's key and the ordered
picks as one outcome) and the values shown.

Data: three keys with equal counts (20 units each, one row per unit), so a unit added to one key moves
the selection as much as it can. Measured at 20 000 trials per side, seed 5 (95% confidence):
exponential top-1 at ε 1 gives ε_lb 0.49; the same with noise for 3ε (an under-charged variant,
the negative control) 1.95. With values (top-2 and its counts): 0.53 vs 1.74. Gaussian report noisy
max stays far below its claim here (ε_lb 0.05 of 1): Thm 8 bounds the case where every score moves at
once, which one unit cannot do to counts of different keys, so an end-to-end audit cannot catch its
mis-calibration; tests/audit/test_selection_audit.py audits it at B7's worst case instead.
"""

from __future__ import annotations

import dataclasses

import pytest

from dpch.audit import audit_query
from dpch.audit.report import summary
from dpch.audit.runner import AuditRunner
from dpch.errors import QueryRejected
from dpch.pipeline.top_k import calibrate_top_k
from tests.helpers import make_table

TRIALS = 20_000
TOP_1 = "SELECT g FROM t GROUP BY g ORDER BY count() DESC LIMIT 1 SETTINGS dp_select = 'top'"
TOP_2_VALUES = "SELECT g, count() AS n FROM t GROUP BY g ORDER BY n DESC LIMIT 2 SETTINGS dp_select = 'top'"


class TopKAtThriceEpsilon(AuditRunner):
    """Negative control: the selection (and values) calibrated for 3ε while ε is claimed."""

    def top_k_plan(self, plan, opts):
        return calibrate_top_k(plan, dataclasses.replace(opts, epsilon=opts.epsilon * 3))


@pytest.fixture
def session(connect):
    s = connect(analyst="top-k-audit", seed=3)
    make_table(s, "uid UInt32, g String COMMENT 'dp: public, values=[\"a\", \"b\", \"c\"]'",
               [(u, "abc"[u % 3]) for u in range(60)], ["uid", "g"], name="t",
               comment="dp: privacy_unit=uid, unique_units")
    return s


@pytest.mark.parametrize(("sql", "trials"), [(TOP_1, TRIALS), (TOP_2_VALUES, TRIALS // 2)])
def test_top_k_passes_and_an_under_charged_variant_is_caught(session, sql, trials):
    honest = audit_query(session, sql, trials=trials, seed=5, epsilon=1.0)
    broken = audit_query(session, sql, trials=trials, seed=5, runner_class=TopKAtThriceEpsilon, epsilon=1.0)
    assert honest.samples.discrete and honest.samples.labels[0] == "pick 1"
    assert honest.claimed_epsilon == pytest.approx(1.0) and honest.samples.mechanism.startswith("top-k")
    assert not honest.violation, summary(honest)
    assert broken.violation, summary(broken)


def test_gaussian_top_k_is_audited_against_its_pure_claim(session):
    sql = TOP_1.replace("'top'", "'top', dp_mechanism = 'gaussian', dp_score_max = 40")
    result = audit_query(session, sql, trials=TRIALS, seed=5, epsilon=1.0)
    assert result.claimed_delta == 0 and result.samples.mechanism == "top-k (gaussian report noisy max)"
    assert not result.violation, summary(result)


def test_full_stack_mode_refuses_top_k_clearly(session):
    with pytest.raises(QueryRejected, match="fast path") as info:
        audit_query(session, TOP_1, trials=20, mode="full", seed=5, epsilon=1.0)
    assert "--full-stack" in (info.value.hint or "")


def test_a_top_k_query_that_shows_values_but_not_its_keys_is_audited(session):
    """The observations are the picked keys' positions, not keys read back from the rows: a SELECT list
    without the key (the values of the top 2, unlabelled) is audited like any other."""
    sql = "SELECT count() AS n FROM t GROUP BY g ORDER BY n DESC LIMIT 2 SETTINGS dp_select = 'top'"
    result = audit_query(session, sql, trials=2_000, seed=5, epsilon=1.0)
    assert result.samples.labels[:3] == ["pick 1", "pick 2", "ordered picks"]
    assert not result.violation, summary(result)
