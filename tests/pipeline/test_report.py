"""Stage 8, report: the explanation is structured data and free; describe() only renders it."""

from __future__ import annotations

from dpch.pipeline.report import explanation_release
from tests.helpers import ledger_rows


def test_explanation_states_cost_and_admissibility(session):
    explanation = session.explain("SELECT region, count(), avg(x) FROM t GROUP BY region SETTINGS dp_epsilon = 0.6")
    assert abs(explanation.cost.epsilon - 0.6) < 1e-12
    assert explanation.admissible
    assert {m.mechanism for m in explanation.measures} == {"laplace"}
    assert abs(sum(m.epsilon for m in explanation.measures) - 0.6) < 1e-12
    text = explanation.describe()
    assert "cost: ε 0.6" in text and "budget check: admissible" in text
    # count() and avg's count share one measure: two noisy parts (the count, the centred sum)
    assert any("budget split evenly over 2 noisy parts: m0 ε 0.3, m1 ε 0.3" in n for n in explanation.notes)


def test_explain_release_is_free(session):
    before = ledger_rows(session), session.budget().spent.epsilon
    explanation = session.explain("SELECT count() FROM t")
    release = explanation_release(explanation, session.budget(), 1.0)
    assert release.cost.epsilon == 0.0 and release.release_id == ""
    assert release.columns == ["explain"] and len(release.rows) == len(explanation.describe().splitlines())
    via_sql = session.query("EXPLAIN DP SELECT count() FROM t")
    assert via_sql.rows == release.rows
    assert (ledger_rows(session), session.budget().spent.epsilon) == before
