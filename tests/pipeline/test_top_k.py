"""Top-k selection (issue 16, part 2) through the whole pipeline, on real chdb.

- Values, not acceptance: at a large ε the selected keys are ClickHouse's own top k (asked
  directly), in order; ASC picks the smallest, including a declared key without rows (the
  candidates are the domain, not the keys present); released values lie near the exact counts.
- The distribution of what is selected is the peeling formula's: the pairs (first, second) drawn by
  the release stage on fixed exact scores match softmax(ε/k · score / Δ) peeled, by χ² (negative
  control: the same draws against the non-monotone factor 2Δ are rejected).
- Cost: the charge equals EXPLAIN's, the ledger names the mechanism, keys-only queries spend the
  whole ε on the selection, a query with values splits it; the cost self-check fails closed on a
  tampered plan (wrong number of rounds, rounds over the wrong number of keys, values not shown).
- Refusals happen before any charge and say what to write instead.
"""

from __future__ import annotations

import dataclasses
import math
from collections import Counter

import numpy as np
import pytest
from scipy.stats import chisquare

from dpch import Budget
from dpch.errors import CostCheckFailed
from dpch.mechanisms.sampling import NoiseSource
from dpch.mechanisms.top_k import gumbel_top_k
from dpch.pipeline.execute import GroupData
from dpch.pipeline.top_k import calibrate_top_k, check_top_k_cost, release_top_k
from tests.helpers import ledger_rows, make_table, refused_uncharged

PAGES = [f"p{i}" for i in range(8)]
#: visits per page: a Zipf-like profile with a tie-free top and one declared page without rows (p7)
VISITS = [400, 200, 133, 100, 80, 66, 12, 0]
COLUMNS = ("uid UInt32, page String COMMENT 'dp: public, values=[" + ", ".join(f'"{p}"' for p in PAGES)
           + "]', spend Float64 COMMENT 'dp: bounds=[0, 10]', city String")
TOP = "SELECT page, count() AS n FROM visits GROUP BY page ORDER BY n DESC LIMIT 3 SETTINGS dp_select = 'top'"


@pytest.fixture
def session(connect):
    s = connect(analyst="topk", default_budget=Budget(1e6, 0.5), seed=11)
    rows, uid = [], 0
    for page, n in zip(PAGES, VISITS, strict=True):
        for j in range(n):
            rows.append((uid, page, float(j % 11), f"c{uid % 5}"))
            uid += 1
    make_table(s, COLUMNS, rows, ["uid", "page", "spend", "city"], name="visits",
               comment="dp: privacy_unit=uid, max_rows_per_unit=1")
    return s


def exact_counts(session) -> dict[str, int]:
    """ClickHouse asked directly (every declared page, 0 where no row has it)."""
    found = dict(session.engine.query_rows(f"SELECT page, count() FROM {session.engine.table('visits')} GROUP BY page"))
    return {p: int(found.get(p, 0)) for p in PAGES}


def test_large_epsilon_selects_clickhouses_top_k_in_order(session):
    exact = exact_counts(session)
    truth = sorted(PAGES, key=lambda p: -exact[p])[:3]
    release = session.query(TOP, epsilon=50.0)
    assert [r[0] for r in release.rows] == truth
    for (page, value), ivs in zip(release.rows, release.intervals, strict=True):
        lo, hi = ivs[1]
        assert lo <= value <= hi and abs(value - exact[page]) <= 3, (page, value, exact[page])
    assert release.mechanism == "top-k (exponential (gumbel))"


def test_ascending_picks_the_smallest_from_the_whole_domain(session):
    release = session.query("SELECT page FROM visits GROUP BY page ORDER BY count() ASC LIMIT 2 "
                            "SETTINGS dp_select = 'top'", epsilon=50.0)
    # p7 has no row: it is a candidate because it is declared, and it has the smallest count
    assert [r[0] for r in release.rows] == ["p7", "p6"]


def test_keys_only_spends_everything_on_the_selection(session):
    sql = "SELECT page FROM visits GROUP BY page ORDER BY count() DESC LIMIT 3 SETTINGS dp_select = 'top'"
    explanation = session.explain(sql, epsilon=0.9)
    before = ledger_rows(session)
    release = session.query(sql, epsilon=0.9)
    assert ledger_rows(session) == before + 1
    assert release.cost.epsilon == pytest.approx(0.9) == explanation.cost.epsilon
    assert [m.name for m in release.measures] == ["top-k"]
    assert release.intervals == [[None]] * 3 and release.columns == ["page"]
    assert explanation.mechanism == release.mechanism


def test_values_asked_take_their_own_share(session):
    explanation = session.explain(TOP, epsilon=1.0)
    selection, *values = explanation.measures
    assert selection.epsilon == pytest.approx(0.5) and sum(v.epsilon for v in values) == pytest.approx(0.5)
    assert explanation.cost.epsilon == pytest.approx(1.0)
    assert any("alternative: without dp_select" in n for n in explanation.notes)
    release = session.query(TOP, epsilon=1.0)
    assert release.cost == explanation.cost
    entry = session.accountant.recent(1)[0]
    assert entry.mechanism == release.mechanism and entry.cost.epsilon == pytest.approx(1.0)


def test_a_sum_score_and_other_values(session):
    exact = dict(session.engine.query_rows(
        f"SELECT page, sum(spend) FROM {session.engine.table('visits')} GROUP BY page"))
    truth = sorted(exact, key=lambda p: -exact[p])[:2]
    release = session.query("SELECT page, avg(spend) AS a FROM visits GROUP BY page ORDER BY sum(spend) DESC "
                            "LIMIT 2 SETTINGS dp_select = 'top'", epsilon=200.0)
    assert [r[0] for r in release.rows] == truth
    for page, value in release.rows:
        rows = session.engine.query_rows(
            f"SELECT avg(spend) FROM {session.engine.table('visits')} WHERE page = '{page}'")
        assert value == pytest.approx(rows[0][0], abs=0.5)


def test_gaussian_report_noisy_max(session):
    sql = ("SELECT page FROM visits GROUP BY page ORDER BY count() DESC LIMIT 2 SETTINGS dp_select = 'top', "
           "dp_mechanism = 'gaussian', dp_score_max = 1000")
    explanation = session.explain(sql, epsilon=2.0)
    assert explanation.mechanism == "top-k (gaussian report noisy max)"
    # round 1 over 8 keys costs ε/k; round 2, over 7, less (Thm 8's ε grows with d): total ≤ ε
    assert 1.9 < explanation.cost.epsilon <= 2.0 and explanation.cost.delta == 0
    release = session.query(sql, epsilon=2.0)
    assert release.cost == explanation.cost and len(release.rows) == 2


def test_pure_ex_post_filter_charges_the_pure_cost(connect, session):
    other = connect(analyst="topk-expost", filter="pure_ex_post",
                    default_budget=Budget(3.0, 1e-3))
    release = other.query(TOP, epsilon=1.0)
    assert other.budget().spent.epsilon == pytest.approx(1.0) == release.cost.epsilon


@pytest.mark.parametrize(("sql", "options", "words"), [
    ("SELECT page FROM visits GROUP BY page LIMIT 3 SETTINGS dp_select = 'top'", {}, "by an aggregate in ORDER BY"),
    ("SELECT count() FROM visits SETTINGS dp_select = 'top'", {}, "picks keys of a GROUP BY"),
    ("SELECT page FROM visits GROUP BY page ORDER BY count() DESC SETTINGS dp_select = 'top'", {}, "LIMIT k"),
    ("SELECT page FROM visits GROUP BY page ORDER BY count() DESC LIMIT 8 SETTINGS dp_select = 'top'", {}, "k < 8"),
    ("SELECT page FROM visits GROUP BY page ORDER BY avg(spend) DESC LIMIT 2 SETTINGS dp_select = 'top'", {},
     "one count or sum"),
    ("SELECT page FROM visits GROUP BY page ORDER BY count(), page LIMIT 2 SETTINGS dp_select = 'top'", {},
     "exactly one ORDER BY"),
    ("SELECT city FROM visits GROUP BY city ORDER BY count() DESC LIMIT 2 SETTINGS dp_select = 'top'",
     {"delta": 1e-6}, "no declared domain"),
    ("SELECT page, count() AS n FROM visits GROUP BY page HAVING n > 5 ORDER BY n DESC LIMIT 2 "
     "SETTINGS dp_select = 'top'", {}, "HAVING"),
    ("SELECT page FROM visits GROUP BY page ORDER BY count() DESC LIMIT 2 OFFSET 1 SETTINGS dp_select = 'top'", {},
     "OFFSET"),
    ("SELECT page FROM visits GROUP BY page ORDER BY count() DESC LIMIT 2 SETTINGS dp_select = 'top', "
     "dp_mechanism = 'gaussian'", {}, "dp_score_max"),
    ("SELECT page FROM visits GROUP BY page ORDER BY count() DESC LIMIT 2 SETTINGS dp_select = 'top', "
     "dp_mechanism = 'gaussian', dp_score_max = 1.5", {}, "twice the score's sensitivity"),
    ("SELECT page FROM visits GROUP BY page ORDER BY count() DESC LIMIT 2 SETTINGS dp_select = 'top', "
     "dp_mechanism = 'laplace', dp_delta = 1e-6", {}, "takes no dp_delta"),
    ("SELECT page FROM visits GROUP BY page ORDER BY count() DESC LIMIT 2 SETTINGS dp_select = 'best'", {},
     "dp_select must be one of"),
    # the score range's ends: numbers, the upper above the lower (equal is empty)
    ("SELECT page FROM visits GROUP BY page ORDER BY count() DESC LIMIT 2 SETTINGS dp_select = 'top', "
     "dp_mechanism = 'gaussian', dp_score_min = 'low', dp_score_max = 10", {}, "dp_score_min must be a number"),
    ("SELECT page FROM visits GROUP BY page ORDER BY count() DESC LIMIT 2 SETTINGS dp_select = 'top', "
     "dp_mechanism = 'gaussian', dp_score_min = 10, dp_score_max = 10", {},
     "dp_score_max (10) must be above dp_score_min (10)"),
    ("SELECT page FROM visits GROUP BY page ORDER BY count() DESC LIMIT 2 SETTINGS dp_select = 'top', "
     "dp_accuracy = 5", {}, "do not apply"),
])
def test_refusals_are_free_and_say_what_to_write(session, sql, options, words):
    error = refused_uncharged(session, sql, **options)
    assert words in str(error)


def _peeling_pair_probabilities(scores: np.ndarray, logit_per_unit: float) -> dict[tuple[int, int], float]:
    """P(first = i, second = j) of two exponential-mechanism rounds: softmax, then softmax without i."""
    weights = np.exp(logit_per_unit * (scores - scores.max()))
    out = {}
    for i in range(scores.size):
        p_i = weights[i] / weights.sum()
        rest = weights.sum() - weights[i]
        for j in range(scores.size):
            if j != i:
                out[(i, j)] = p_i * weights[j] / rest
    return out


def test_selected_pairs_follow_the_peeling_formula(session):
    """Draws through :func:`release_top_k` on fixed exact scores; χ² against the formula with the
    monotone logit ε/k·score/Δ (ε = 2, k = 2, Δ = 1). Negative control: the formula with 2Δ."""
    sql = "SELECT page FROM visits GROUP BY page ORDER BY count() DESC LIMIT 2 SETTINGS dp_select = 'top'"
    plan, opts = session.plan(sql, epsilon=2.0)
    noise = calibrate_top_k(plan, opts)
    scores = np.array([6.0, 5.0, 4.0, 2.0, 0.0, 0.0, 0.0, 0.0])
    data = GroupData(keys=[(p,) for p in PAGES], measures={noise.measure.name: scores}, histograms={},
                     units=np.zeros(len(PAGES)))
    source = NoiseSource(2024)
    draws = 20_000
    counts = Counter()
    for _ in range(draws):
        _, rows, _ = release_top_k(plan, opts, noise, data, source)
        counts[(PAGES.index(rows[0][0]), PAGES.index(rows[1][0]))] += 1

    def p_value(logit_per_unit: float) -> float:
        probs = _peeling_pair_probabilities(scores, logit_per_unit)
        pairs = sorted(probs)
        expected = np.array([probs[p] * draws for p in pairs])
        observed = np.array([counts[p] for p in pairs], dtype=float)
        # pool the cells expected below 5 (χ² needs them), keeping the totals equal
        small = expected < 5
        if small.any():
            expected = np.append(expected[~small], expected[small].sum())
            observed = np.append(observed[~small], observed[small].sum())
        return float(chisquare(observed, expected).pvalue)

    assert p_value(1.0) > 1e-3  # ε/k = 1 per round, monotone counts: logit = 1·score/Δ
    assert p_value(0.5) < 1e-6  # the non-monotone calibration would be a different distribution


def test_cost_self_check_fails_closed(session):
    plan, opts = session.plan(TOP, epsilon=1.0)
    noise = calibrate_top_k(plan, opts)
    check_top_k_cost(plan, opts, noise)
    tampered = [
        (dataclasses.replace(noise, top=gumbel_top_k(0.5, 2, 1.0, 8, monotonic=True)), "selection rounds"),
        (dataclasses.replace(noise, top=gumbel_top_k(0.5, 3, 1.0, 9, monotonic=True)), "selection rounds"),
        (dataclasses.replace(noise, values=None), "released statistics"),
        (dataclasses.replace(noise, top=gumbel_top_k(0.9, 3, 1.0, 8, monotonic=True)), "exceeds the request"),
    ]
    for bad, words in tampered:
        with pytest.raises(CostCheckFailed) as info:
            check_top_k_cost(plan, opts, bad)
        assert words in info.value.detail
    assert math.isclose(noise.cost.epsilon, 1.0)


def test_scores_use_their_per_key_sensitivity(connect):
    """A count of distinct units moves each key by at most 1 when a unit is removed (ℓ∞ = 1) even
    though it moves several keys (ℓ1 = keys touched): checked on the data by removing the unit that
    touches most keys, with ClickHouse computing both sides. Report noisy max takes Δ = 1 for it and
    the ℓ1 sensitivity (the cap) for count()."""
    s = connect(analyst="topk-linf", default_budget=Budget(100, 1e-3))
    rows = [(u, PAGES[(u + j) % len(PAGES)], 1.0, "c") for u in range(30) for j in range(u % 4)]
    make_table(s, COLUMNS, rows, ["uid", "page", "spend", "city"], name="visits",
               comment="dp: privacy_unit=uid, max_rows_per_unit=3")
    table = s.engine.table("visits")
    busiest = 3  # uid 3 visits 3 pages (u % 4 = 3)

    def per_page(where: str) -> dict[str, int]:
        return dict(s.engine.query_rows(f"SELECT page, count(DISTINCT uid) FROM {table} {where} GROUP BY page"))

    full, without = per_page(""), per_page(f"WHERE uid != {busiest}")
    changes = [full.get(p, 0) - without.get(p, 0) for p in PAGES]
    assert max(changes) == 1 and sum(changes) == 3
    distinct = s.explain("SELECT page FROM visits GROUP BY page ORDER BY count(DISTINCT uid) DESC LIMIT 2 "
                         "SETTINGS dp_select = 'top'")
    rows_count = s.explain("SELECT page FROM visits GROUP BY page ORDER BY count() DESC LIMIT 2 "
                           "SETTINGS dp_select = 'top'")
    assert distinct.measures[0].sensitivity == 1.0
    assert rows_count.measures[0].sensitivity == 3.0
    # the report says where the bound comes from
    assert "distinct units by at most 1" in distinct.measures[0].derivation
    assert rows_count.measures[0].derivation.startswith("count()")


@pytest.mark.parametrize("gaussian", [False, True])
def test_score_gap_holds_at_its_confidence(gaussian):
    """Every round's pick scores within ``score_gap()`` (default 95%) of the best score left in that
    round, in at least 95% of fixed-seed runs (a union bound: the true rate is higher)."""
    from dpch.mechanisms.top_k import gaussian_top_k

    scores = np.array([50.0, 48.0, 45.0, 40.0, 40.0, 30.0, 20.0, 10.0, 5.0, 0.0])
    top = (gaussian_top_k(2.0, 3, 1.0, 0.0, 60.0, scores.size) if gaussian
           else gumbel_top_k(2.0, 3, 1.0, scores.size, monotonic=True))
    gap = top.score_gap()
    assert math.isfinite(gap) and 0 < gap == top.score_gap(0.95) < top.score_gap(0.99)
    source = NoiseSource(7)
    runs, within = 2000, 0
    for _ in range(runs):
        picked, left, ok = top.select(scores, source), list(range(scores.size)), True
        for index in picked:
            ok &= scores[left].max() - scores[index] <= gap
            left.remove(index)
        within += ok
    assert within / runs >= 0.95


def test_gumbel_top_k_needs_a_positive_epsilon():
    with pytest.raises(ValueError, match="positive"):
        gumbel_top_k(0.0, 2, 1.0, 5, monotonic=True)


def test_a_gaussian_range_of_exactly_twice_the_sensitivity_is_accepted(session):
    """Thm 8 needs 2Δ ≤ b − a: the edge itself is allowed (Δ = 1 for a count, one row per unit)."""
    sql = ("SELECT page FROM visits GROUP BY page ORDER BY count() DESC LIMIT 2 SETTINGS dp_select = 'top', "
           "dp_mechanism = 'gaussian', dp_score_max = 2")
    assert session.explain(sql).cost.epsilon <= 0.5
