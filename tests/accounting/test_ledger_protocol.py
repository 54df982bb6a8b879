"""Ledger protocol on the real embedded engine: one row per fixed-cost release, two per ex-post
release, reservations counted at their worst case, per-dataset budgets, filter choice, many
threads on one budget, and restart."""

from __future__ import annotations

import random
import threading

import pytest

from dpch import Budget, BudgetExceeded
from dpch.accounting.accountant import Accountant, forget_cached_state
from dpch.errors import ConfigError, ReservationClosed
from dpch.privacy.cost import PrivacyCost
from dpch.store.engine import Engine


@pytest.fixture
def engine(store_dsn, database, keeper):
    e = Engine(store_dsn, database=database)
    yield e
    e.close()


def _rows(engine: Engine) -> list[tuple]:
    return engine.query_rows(f"SELECT toString(release_id), seq, status, epsilon, worst_epsilon FROM "
                             f"{engine.table('dpch_ledger')} ORDER BY time, seq")


def _post(eps: float, worst: float, rho: float | None = None, worst_rho: float | None = None) -> PrivacyCost:
    return PrivacyCost(eps, 0.0, rho, ex_post=True, worst_epsilon=worst, worst_rho=worst_rho)


def test_fixed_cost_is_one_row_and_ex_post_two(engine):
    acc = Accountant(engine, "ana", default_budget=Budget(1.0, 1e-6), filter="ex_post")
    acc.charge(PrivacyCost(0.1), dataset="d.t", query_hash="h", mechanism="laplace")
    assert len(_rows(engine)) == 1
    res = acc.reserve(_post(0.0, 0.5), dataset="d.t", query_hash="h2", mechanism="lnr")
    rows = _rows(engine)
    assert len(rows) == 2 and rows[-1][2] == "reserved" and rows[-1][4] == 0.5
    status = acc.status()
    assert status.reserved.epsilon == pytest.approx(0.5)
    assert status.remaining.epsilon == pytest.approx(0.4)  # the reservation counts at its worst
    assert status.spent.epsilon == pytest.approx(0.1)
    res.settle(_post(0.2, 0.5))
    rows = _rows(engine)
    assert len(rows) == 3 and [r[2] for r in rows if r[0] == res.release_id] == ["reserved", "charged"]
    status = acc.status()
    assert status.spent.epsilon == pytest.approx(0.3) and status.reserved.epsilon == 0
    assert status.remaining.epsilon == pytest.approx(0.7)
    with pytest.raises(ReservationClosed):
        res.settle(_post(0.1, 0.5))
    # a new state read from the ledger agrees with the in-process one
    forget_cached_state()
    again = Accountant(engine, "ana", default_budget=Budget(1.0, 1e-6), filter="ex_post").status()
    assert again.spent == status.spent and again.remaining == status.remaining


def test_refused_reservation_writes_nothing_and_void_frees_it(engine):
    acc = Accountant(engine, "bo", default_budget=Budget(1.0, 1e-6), filter="ex_post")
    with pytest.raises(BudgetExceeded, match="at worst ε 1.5"):
        acc.reserve(_post(0.0, 1.5), dataset="d.t", query_hash="h", mechanism="lnr")
    assert _rows(engine) == []
    res = acc.reserve(_post(0.0, 0.9), dataset="d.t", query_hash="h", mechanism="lnr")
    with pytest.raises(BudgetExceeded):
        acc.charge(PrivacyCost(0.2), dataset="d.t", query_hash="h", mechanism="laplace")
    res.void()
    acc.charge(PrivacyCost(0.2), dataset="d.t", query_hash="h", mechanism="laplace")
    assert [r[2] for r in _rows(engine)] == ["reserved", "voided", "charged"]


def test_failure_inside_a_reservation_charges_the_worst_case(engine):
    acc = Accountant(engine, "cy", default_budget=Budget(1.0, 1e-6), filter="ex_post")
    with pytest.raises(RuntimeError), acc.reserve(_post(0.0, 0.4), dataset="d.t", query_hash="h", mechanism="bm"):
        raise RuntimeError("the computation failed half-way")
    assert acc.status().spent.epsilon == pytest.approx(0.4)
    with pytest.raises(ConfigError, match="reserve"):
        acc.charge(_post(0.1, 0.2), dataset="d.t", query_hash="h", mechanism="bm")


def test_unified_filter_charges_realized_brownian_cost(engine):
    acc = Accountant(engine, "bm", default_budget=Budget(1.0, 2e-6), filter="zcdp_bm")
    rho_budget = acc.status().remaining.rho
    worst = _post(0.0, 0.9, rho=0.0, worst_rho=rho_budget * 0.9)
    res = acc.reserve(worst, dataset="d.t", query_hash="h", mechanism="brownian")
    with pytest.raises(BudgetExceeded, match="ρ"):
        acc.reserve(worst, dataset="d.t", query_hash="h", mechanism="brownian")
    res.settle(_post(0.3, 0.9, rho=rho_budget * 0.05, worst_rho=rho_budget * 0.9))
    status = acc.status()
    assert status.spent.rho == pytest.approx(rho_budget * 0.05)
    assert status.remaining.rho == pytest.approx(rho_budget * 0.95)
    acc.reserve(worst, dataset="d.t", query_hash="h", mechanism="brownian").settle(
        _post(0.3, 0.9, rho=rho_budget * 0.05, worst_rho=rho_budget * 0.9))


def test_dataset_budget_and_analyst_budget_must_both_admit(engine):
    acc = Accountant(engine, "di", default_budget=Budget(1.0, 1e-6))
    acc.set_budget(Budget(0.3, 1e-6), dataset="db.small")
    acc.charge(PrivacyCost(0.2), dataset="db.small", query_hash="h", mechanism="laplace")
    with pytest.raises(BudgetExceeded, match="on dataset db.small"):
        acc.charge(PrivacyCost(0.2), dataset="db.small", query_hash="h", mechanism="laplace")
    acc.charge(PrivacyCost(0.75), dataset="db.other", query_hash="h", mechanism="laplace")
    with pytest.raises(BudgetExceeded, match="analyst di:"):
        acc.charge(PrivacyCost(0.1), dataset="db.small", query_hash="h", mechanism="laplace")
    status = acc.status()
    assert status.spent.epsilon == pytest.approx(0.95)
    (small,) = status.datasets
    assert small.dataset == "db.small" and small.spent.epsilon == pytest.approx(0.2)
    assert small.remaining.epsilon == pytest.approx(0.1)
    assert status.as_dict()["datasets"][0]["budget"]["epsilon"] == 0.3


def test_filter_is_configuration_and_cannot_silently_switch(engine):
    acc = Accountant(engine, "fi", default_budget=Budget(1.0, 2e-6), filter="zcdp")
    assert acc.status().filter == "zcdp"
    acc.charge(PrivacyCost(0.1), dataset="d.t", query_hash="h", mechanism="laplace")
    # a connection that names no filter continues under the ledger's
    assert Accountant(engine, "fi", default_budget=Budget(1.0, 2e-6)).status().filter == "zcdp"
    other = Accountant(engine, "fi", default_budget=Budget(1.0, 2e-6), filter="basic")
    with pytest.raises(BudgetExceeded, match="written under the zcdp filter"):
        other.charge(PrivacyCost(0.1), dataset="d.t", query_hash="h", mechanism="laplace")
    # the data owner's choice in dpch_budgets wins over the connection's
    other.set_budget(Budget(1.0, 2e-6), filter="zcdp", filter_options={"conversion_delta_share": 0.5})
    other.charge(PrivacyCost(0.1), dataset="d.t", query_hash="h", mechanism="laplace")
    assert other.status().filter == "zcdp"
    other.set_budget(Budget(2.0, 2e-6))  # changing the amounts keeps the owner's filter
    assert other.status().filter == "zcdp" and other.status().budget == Budget(2.0, 2e-6)
    with pytest.raises(ConfigError, match="unknown privacy filter"):
        Accountant(engine, "fi", filter="nope")


@pytest.mark.parametrize("filter_name", ["basic", "zcdp_bm", "ex_post"])
def test_threads_hammer_one_budget(engine, filter_name):
    """8 threads, random fixed and ex-post requests: the filter's inequality holds on the ledger,
    and every release has exactly one final row (charged or voided)."""
    budget = Budget(2.0, 2e-6)
    acc = Accountant(engine, f"th_{filter_name}", default_budget=budget, filter=filter_name)
    errors: list[Exception] = []

    def worker(seed: int) -> None:
        rng = random.Random(seed)
        for _ in range(12):
            try:
                eps = rng.uniform(0.01, 0.3)
                if rng.random() < 0.5:
                    acc.charge(PrivacyCost(eps, 0.0, eps * eps / 2), dataset="d.t", query_hash="h", mechanism="g")
                else:
                    worst = _post(0.0, eps, rho=0.0, worst_rho=eps * eps / 2)
                    res = acc.reserve(worst, dataset="d.t", query_hash="h", mechanism="bm")
                    if rng.random() < 0.2:
                        res.void()
                    else:
                        f = rng.random()
                        res.settle(_post(f * eps, eps, rho=f * eps * eps / 2, worst_rho=eps * eps / 2))
            except BudgetExceeded:
                pass
            except Exception as exc:  # pragma: no cover - reported below
                errors.append(exc)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    rows = engine.query_rows(
        f"SELECT toString(release_id), groupArray(status), argMax(epsilon, seq), argMax(rho, seq), "
        f"argMax(status, seq) FROM {engine.table('dpch_ledger')} WHERE analyst = {{a:String}} GROUP BY release_id",
        {"a": f"th_{filter_name}"},
    )
    assert rows
    for _, statuses, *_ in rows:
        finals = [s for s in statuses if s in ("charged", "voided")]
        assert len(finals) == 1, statuses
    charged = [r for r in rows if r[4] == "charged"]
    if filter_name == "zcdp_bm":
        from dpch.mechanisms.zcdp import rho_max
        assert sum(r[3] for r in charged) <= rho_max(2.0, 1e-6, printed_theorem_6=True) * (1 + 1e-9)
    else:
        assert sum(r[2] for r in charged) <= 2.0 * (1 + 1e-9)


def test_restart_continues_where_it_was(store_dsn, database, keeper):
    """Spend, close every engine (the store really closes), reopen, spend: the filter continues."""
    keeper.close()
    try:
        e = Engine(store_dsn, database=database)
        acc = Accountant(e, "re", default_budget=Budget(1.0, 2e-6), filter="zcdp")
        acc.charge(PrivacyCost(0.05), dataset="d.t", query_hash="h", mechanism="laplace")
        acc.reserve(_post(0.0, 0.04), dataset="d.t", query_hash="h", mechanism="lnr")  # never settled
        before = acc.status()
        e.close()
        e = Engine(store_dsn, database=database)
        acc = Accountant(e, "re", default_budget=Budget(1.0, 2e-6), filter="zcdp")
        after = acc.status()
        assert after.spent == before.spent and after.reserved == before.reserved
        assert after.remaining == before.remaining
        left = after.remaining.epsilon
        with pytest.raises(BudgetExceeded):
            acc.charge(PrivacyCost(left * 1.01), dataset="d.t", query_hash="h", mechanism="laplace")
        acc.charge(PrivacyCost(left * 0.99), dataset="d.t", query_hash="h", mechanism="laplace")
        e.close()
    finally:
        keeper.__init__(store_dsn)


def test_present_names_exactly_the_rows_the_ledger_holds(engine):
    """``Ledger.present`` (the reconciler's question: which of a state's rows did a killed process
    write?) on values: a charged fixed-cost release holds seq 1, a reservation seq 1 and, once settled,
    seq 2; a row never written and an unknown release are absent; no keys ask nothing."""
    from dpch.accounting.ledger import Ledger

    acc = Accountant(engine, "ana", default_budget=Budget(1.0, 1e-6), filter="ex_post")
    fixed = acc.charge(PrivacyCost(0.1), dataset="d.t", query_hash="h", mechanism="laplace").release_id
    res = acc.reserve(_post(0.0, 0.5), dataset="d.t", query_hash="h2", mechanism="lnr")
    ledger = Ledger(engine)
    unknown = "00000000-0000-4000-8000-000000000000"
    keys = [(fixed, 1), (fixed, 2), (res.release_id, 1), (res.release_id, 2), (unknown, 1)]
    assert ledger.present(keys) == {(fixed, 1), (res.release_id, 1)}
    res.settle(_post(0.2, 0.5))
    assert ledger.present(keys) == {(fixed, 1), (res.release_id, 1), (res.release_id, 2)}
    assert ledger.present([]) == set()
