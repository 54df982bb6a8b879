"""The zCDP filters charge a query's real ρ (issue 13): the composition of its mechanisms' ρ's.

Before issue 13 the noise plan summed only ε and δ, so the zCDP filter (Rogers et al. 2023, Thm 2)
converted the query's total ε back to ρ = ε²/2 (Lemma 2.3): a Gaussian query at ε 0.5, δ 1e-6 was
charged ρ = 0.125 instead of its two Gaussian measures' ρ ≈ 0.0039, and the status showed ε 2.60 of
3 spent instead of about 0.44.

Numbers (stated here, computed in the tests): budget (ε, δ) = (3, 1e-5) under ``zcdp`` with the
default conversion share 1/2, so δ'' = 5e-6 and the odometer is ρ + 2√(ρ·log(1/δ'')) (Bun & Steinke
2016, Prop 1.3). ρ = 0.125 gives 2.5954; ρ = 0.0039014 gives 0.44035.
"""

from __future__ import annotations

import math

import pytest

import dpch
from dpch import Budget
from dpch.accounting.accountant import Accountant
from dpch.privacy.cost import PrivacyCost
from dpch.store.engine import Engine

BUDGET = Budget(3.0, 1e-5)
SQL = ("SELECT count(*), sum(spend) FROM visits "
       "SETTINGS dp_mechanism = 'gaussian', dp_epsilon = 0.5, dp_delta = 1e-6")
DELTA_CONVERSION = BUDGET.delta / 2  # the zcdp filter's default conversion_delta_share = 0.5


def _odometer(rho: float) -> float:
    """Bun & Steinke 2016, Prop 1.3, written out again: ρ + 2√(ρ log(1/δ''))."""
    return rho + 2 * math.sqrt(rho * math.log(1 / DELTA_CONVERSION))


@pytest.fixture
def session(store_dsn, visits_db, keeper, request):
    s = dpch.connect(store_dsn, database=visits_db, analyst=f"zcdp-charge-{request.node.name}",
                     filter="zcdp", default_budget=BUDGET, seed=11)
    yield s
    s.close()


def test_a_gaussian_query_is_charged_its_mechanisms_rho(session):
    release = session.query(SQL)
    gaussians = [m for m in release.measures if m.mechanism == "gaussian"]
    assert len(gaussians) == 2
    # each Gaussian measure is Δ2²/(2σ²)-zCDP (Bun & Steinke 2016, Prop 1.6); ρ's add (Lemma 1.7)
    rho = math.fsum(m.sensitivity**2 / (2 * m.noise_scale**2) for m in gaussians)
    assert rho == pytest.approx(0.0039, rel=0.01)
    assert release.cost.rho == pytest.approx(rho, rel=1e-9)
    spent = session.budget().spent
    assert spent.rho == pytest.approx(rho, rel=1e-9)
    assert spent.epsilon == pytest.approx(_odometer(rho), rel=1e-9)
    assert spent.epsilon == pytest.approx(0.44, abs=0.005)  # the old code showed 2.60 here
    # the (ε, δ) view is unchanged: basic composition of the two measures' (ε/2, δ/2)
    assert (release.cost.epsilon, release.cost.delta) == pytest.approx((0.5, 1e-6), rel=1e-12)


def test_negative_control_the_hand_summed_charge_reads_as_2_60(store_dsn, database, keeper):
    """The old charge — the summed (ε, δ) with no ρ — under the same filter and budget shows 2.60,
    so the bound above tells the two apart."""
    engine = Engine(store_dsn, database=database)
    try:
        acc = Accountant(engine, "old-bag", default_budget=BUDGET, filter="zcdp")
        acc.charge(PrivacyCost(0.5, 1e-6), query_hash="old", mechanism="gaussian")
        spent = acc.status().spent
    finally:
        engine.close()
    assert spent.rho == pytest.approx(0.125, rel=1e-12)
    assert spent.epsilon == pytest.approx(_odometer(0.125), rel=1e-9)
    assert spent.epsilon == pytest.approx(2.60, abs=0.005)
    assert spent.epsilon > 5 * 0.44
