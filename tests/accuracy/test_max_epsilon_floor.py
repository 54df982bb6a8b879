"""A ``dp_max_epsilon`` below what any run can spend is refused in words before anything is charged
(issue 24, item 4: ``dp_relative_error`` with ``dp_max_epsilon = 1e-300`` raised ValueError from the
boundary's root finder; 1e-6 raised a BudgetExceeded saying "the budget admits no Brownian noise
reduction" although the budget did admit it — the cap did not).

The least ε of a Brownian run is its noisiest grid point's ψ(t), t ≤ 10¹², at least
Δ2·√(2·log(1/δ)/t) for every boundary (twice that for dp_stop_rule = 'exact'); a Laplace grid ends
no lower than ε 10⁻⁹."""

from __future__ import annotations

import math

import pytest

from dpch import Budget, QueryRejected
from dpch.accuracy import planner
from tests.helpers import ledger_rows, refused_uncharged

COUNT = "SELECT count(*) FROM visits"


@pytest.fixture
def visits(connect, visits_db):
    def make(**kwargs):
        s = connect(**kwargs)
        s.engine.command(f"CREATE TABLE IF NOT EXISTS {s.engine.table('visits')} AS {visits_db}.visits")
        if not s.engine.query_rows(f"SELECT count() FROM {s.engine.table('visits')}")[0][0]:
            s.engine.command(f"INSERT INTO {s.engine.table('visits')} SELECT * FROM {visits_db}.visits LIMIT 20000")
        return s
    return make


@pytest.mark.parametrize("cap", [1e-300, 1e-100, 1e-7])
@pytest.mark.parametrize("stop", ["released", "exact"])
def test_a_cap_below_the_noisiest_step_is_refused_before_the_charge(visits, cap, stop):
    session = visits(analyst="cap", default_budget=Budget(10.0, 1e-5))
    target = "dp_relative_error = 0.1" if stop == "released" else "dp_accuracy = 100, dp_stop_rule = 'exact'"
    sql = f"{COUNT} SETTINGS {target}, dp_max_epsilon = {cap}"
    err = refused_uncharged(session, sql)
    assert f"dp_max_epsilon {cap:g} is below" in err.message and "nothing was spent" in err.message
    assert "raise dp_max_epsilon" in (err.hint or "")
    with pytest.raises(QueryRejected, match="is below"):  # EXPLAIN says the same, and spends nothing either
        session.explain(sql)
    assert ledger_rows(session) == 0


def test_the_least_is_the_noisiest_steps_own_when_the_bound_alone_does_not_refuse(visits):
    """Between the boundary-free bound and the noisiest step's actual ψ, the planner's search finds
    no step within the cap: the same refusal, naming the actual least ε."""
    session = visits(analyst="cap2", default_budget=Budget(10.0, 1e-5))
    delta = 1e-5 * planner.BOUNDARY_DELTA_SHARE
    bound = math.sqrt(2 * math.log(1 / delta) * planner.BROWNIAN_S_MIN)
    err = refused_uncharged(session, f"{COUNT} SETTINGS dp_relative_error = 0.1, dp_max_epsilon = {bound * 1.01}")
    assert "is below ε" in err.message
    least = float(err.message.split("is below ε ")[1].split(",")[0])
    assert least > bound * 1.01


def test_a_tiny_cap_on_a_direct_target_is_refused_naming_the_epsilon_it_needs(visits):
    session = visits(analyst="cap3", default_budget=Budget(10.0, 1e-5))
    err = refused_uncharged(session, f"{COUNT} SETTINGS dp_accuracy = 100, dp_max_epsilon = 1e-300")
    assert "needs ε" in err.message and "above dp_max_epsilon 1e-300" in err.message


def test_a_tiny_cap_under_a_pure_filter_is_refused(visits):
    session = visits(analyst="cap4", filter="pure", default_budget=Budget(10.0, 0.0))
    err = refused_uncharged(session, f"{COUNT} SETTINGS dp_relative_error = 0.1, dp_max_epsilon = 1e-300")
    assert f"below ε {planner.LAPLACE_LEAST_EPSILON:.3g}" in err.message


def test_a_refinement_capped_below_what_its_path_spent_is_refused_before_the_charge(visits):
    session = visits(analyst="cap5", default_budget=Budget(10.0, 1e-5))
    session.query(f"{COUNT} SETTINGS dp_relative_error = 0.1, dp_max_epsilon = 1")
    before = ledger_rows(session)
    for cap in (1e-300, 1e-3):
        with pytest.raises(QueryRejected, match="what the path has already spent"):
            session.refine(max_epsilon=cap)
    assert ledger_rows(session) == before
