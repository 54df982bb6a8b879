"""Filters declare what they accept and how they charge; the zCDP view of a record survives the ledger.

A composite fixed-cost release (a Gaussian measure beside partition selection) is ρ-zCDP for its
Gaussian part and δ-approximate ε²/2-zCDP for the selection (Rogers et al. 2023, Lemma 2.3): the
zCDP filter must count the selection's δ against its δ budget, also after the record was read
back from the ledger (``rho_delta`` column).
"""

from __future__ import annotations

import pytest

from dpch.accounting.accountant import Accountant
from dpch.accounting.budget import Budget
from dpch.accounting.filters import FILTERS, kinds, make_filter
from dpch.mechanisms.gaussian import GaussianMechanism
from dpch.mechanisms.partition_selection import LaplacePartitionSelection
from dpch.privacy.cost import CostKind, PrivacyCost
from dpch.store.engine import Engine


def test_every_filter_declares_its_kinds():
    for cls in FILTERS.values():
        assert isinstance(cls.composes, CostKind), cls.name
        assert cls.accepts and cls.accepts <= frozenset(CostKind), cls.name
    assert FILTERS["pure"].accepts == frozenset({CostKind.PURE})
    assert FILTERS["zcdp"].composes is CostKind.ZCDP and FILTERS["zcdp_bm"].composes is CostKind.ZCDP
    assert FILTERS["basic"].composes is CostKind.APPROX
    assert FILTERS["ex_post"].composes is CostKind.EX_POST


def test_which_filters_are_pure_only_and_which_charge_realized_costs():
    """Two facts each filter's theorem fixes, pinned per filter: only pure ε releases (noise reduction then
    runs Laplace), and whether an ex-post release is charged its realized cost. A basic or zCDP filter
    charging realized ε would admit past its theorem: Rogers et al. 2016's composition counts each
    release at its worst case; only the ex-post filters (Rogers et al. 2023, Lemma 5.2; Thm 3's ex-post
    side; Thm 6's Brownian ρ) charge what was realized."""
    assert {name for name, cls in FILTERS.items() if cls.pure_only} == {"pure", "advanced", "pure_ex_post"}
    assert {name for name, cls in FILTERS.items() if cls.charges_realized} == {"zcdp_bm", "ex_post", "pure_ex_post",
                                                                               "mixed"}


def test_a_filter_that_tallies_each_side_has_no_features_of_its_own():
    """The mixed filter sums one tally per side (its sides' features), never features of its own."""
    with pytest.raises(NotImplementedError):
        make_filter("mixed", Budget(1.0, 1e-6)).features(PrivacyCost(0.1))


def test_the_pure_filter_refuses_by_kind():
    gauss = GaussianMechanism(0.5, 1e-6, 1.0).cost
    assert CostKind.PURE not in kinds(gauss)
    flt = make_filter("pure", Budget(1.0, 0.0))
    decision = flt.decide([], gauss)
    assert not decision.admitted and "δ 1e-06" in decision.reason
    assert flt.decide([], PrivacyCost(0.5, 0.0)).admitted  # negative control: pure ε is admitted


def _composite() -> PrivacyCost:
    return PrivacyCost.composed([GaussianMechanism(0.25, 5e-7, 1.0).cost,
                                 LaplacePartitionSelection(0.25, 5e-7, 1).cost])


def test_zcdp_filter_counts_the_selection_delta():
    cost = _composite()
    assert cost.rho_delta == pytest.approx(5e-7, rel=1e-12)
    flt = make_filter("zcdp", Budget(3.0, 2e-6))  # δ for releases: 1e-6 (half goes to the conversion)
    rho, delta = flt.totals([cost])
    assert delta == pytest.approx(5e-7, rel=1e-12)
    assert rho == pytest.approx(cost.rho, rel=1e-12)
    assert flt.decide([cost], cost).admitted  # 2 × 5e-7 fits 1e-6
    refused = flt.decide([cost, cost], cost)  # a third would need 1.5e-6
    assert not refused.admitted and "δ" in refused.reason


def test_the_zcdp_view_survives_the_ledger(store_dsn, database, keeper):
    engine = Engine(store_dsn, database=database)
    try:
        acc = Accountant(engine, "kinds", default_budget=Budget(3.0, 2e-6), filter="zcdp")
        cost = _composite()
        acc.charge(cost, query_hash="q", mechanism="gaussian")
        again = Accountant(engine, "kinds", default_budget=Budget(3.0, 2e-6), filter="zcdp")
        stored = again.ledger.entries("kinds")[0].cost
    finally:
        engine.close()
    assert stored.rho == pytest.approx(cost.rho, rel=1e-12)
    assert stored.rho_delta == pytest.approx(5e-7, rel=1e-12)
    assert stored.zcdp() == cost.zcdp()
