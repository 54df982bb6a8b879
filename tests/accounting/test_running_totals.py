"""Running totals (issue 14, part 1; issue 25): every filter decides from a running tally only, and its
decide/spent/remaining equal the list-form reference of its theorem (tests/accounting/reference_filters.py,
independent of the tally), bit for bit, on random histories — including tallies where releases were
replaced (a reservation settled, voided or failed removes its old counted cost and adds its new one).
Derandomized hypothesis; exact float equality (the tally's sums are math.fsum-exact, so no tolerance
is needed: a tolerance here would hide a sum that drifts)."""

from __future__ import annotations

import math

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dpch.accounting.budget import Budget
from dpch.accounting.filters import FILTERS, make_filter
from dpch.accounting.tally import ExactSum
from dpch.privacy.cost import ZCDP, ApproxDP, PrivacyCost
from tests.accounting import reference_filters as reference

#: every filter, with the options whose features differ (doubled ε's, Thm 6 printed or not)
CONFIGS: list[tuple[str, dict]] = [
    ("basic", {}), ("pure", {}), ("advanced", {}), ("advanced", {"approx_delta_share": 0.3}),
    ("zcdp", {}), ("zcdp", {"conversion_delta_share": 0.2}), ("zcdp_bm", {}),
    ("zcdp_bm", {"printed_theorem_6": False}), ("ex_post", {}), ("pure_ex_post", {}), ("mixed", {}),
    ("mixed", {"split": 0.3}),
]

_eps = st.floats(0.0, 2.0, allow_nan=False)
_small = st.floats(1e-4, 1.0, allow_nan=False)


@st.composite
def costs(draw) -> PrivacyCost:
    kind = draw(st.sampled_from(["pure", "approx", "rho", "ex_post", "brownian"]))
    eps = draw(_eps)
    if kind == "pure":
        return PrivacyCost(eps)
    if kind == "approx":
        return PrivacyCost(eps, draw(st.sampled_from([0.0, 1e-9, 1e-8, 3e-7])))
    if kind == "rho":
        rho = draw(_small) / 10
        return PrivacyCost(eps, 0.0, rho, rho_delta=draw(st.sampled_from([0.0, 1e-9])))
    worst = eps + draw(_eps)
    if kind == "ex_post":
        return PrivacyCost(eps, 0.0, ex_post=True, worst_epsilon=worst)
    rho = draw(_small) / 10
    return PrivacyCost(eps, 0.0, rho, ex_post=True, worst_epsilon=worst, worst_rho=rho * 2)


def _same(a: PrivacyCost, b: PrivacyCost) -> bool:
    fields = ("epsilon", "delta", "rho")
    return all(getattr(a, f) == getattr(b, f) or (math.isnan(getattr(a, f) or 0) and math.isnan(getattr(b, f) or 0))
               for f in fields)


@settings(max_examples=300, derandomize=True, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(config=st.sampled_from(CONFIGS), budget=st.floats(0.05, 20.0), history=st.lists(costs(), max_size=25),
       replaced=st.lists(costs(), max_size=5), requests=st.lists(costs(), min_size=1, max_size=4))
def test_tally_equals_history_for_every_filter(config, budget, history, replaced, requests):
    name, options = config
    flt = make_filter(name, Budget(budget, 1e-5), options)
    # a tally that also saw releases later replaced (a reservation's worst case, then settled/voided)
    tally = flt.tally()
    for cost in replaced:
        tally.add(cost)
    for cost in history:
        tally.add(cost)
    for cost in replaced:
        tally.remove(cost)
    fresh = flt.tally(history)
    for t in (tally, fresh):
        assert t.count == len(history)
        assert _same(flt.spent_from(t), _record(reference.spent(flt, history)))
        assert _same(flt.remaining_from(t), _record(reference.remaining(flt, history)))
        for request in requests:
            decision = flt.decide_from(t, request)
            assert decision.admitted == reference.admits(flt, history, request)
            assert decision == flt.decide(history, request)  # the history form is the tally's rule


def _record(terms: tuple[float, float, float | None]) -> PrivacyCost:
    """The reference's (ε, δ, ρ) as a record compared field by field (:func:`_same`)."""
    eps, delta, rho = terms
    return PrivacyCost.of(ApproxDP(eps, delta), None if rho is None else ZCDP(rho))


def test_every_filter_is_covered():
    assert {name for name, _ in CONFIGS} == set(FILTERS)


@settings(max_examples=200, derandomize=True, deadline=None)
@given(st.lists(st.floats(-1e6, 1e6, allow_nan=False), max_size=60), st.data())
def test_exact_sum_is_fsum_after_removals(terms, data):
    # negative control for the exactness claim: a plain running float sum differs from fsum here
    s = ExactSum()
    removed = data.draw(st.lists(st.floats(-1e20, 1e20, allow_nan=False), max_size=10))
    for x in removed + terms:
        s.add(x)
    for x in removed:
        s.add(x, -1)
    assert s.value() == math.fsum(terms)
    assert s.value(0.5) == math.fsum([*terms, 0.5])


def test_naive_running_sum_would_drift():
    # why ExactSum: ten 0.1's then removing a 1e16 term is off by ~2 with a plain float sum
    naive, exact = 0.0, ExactSum()
    for x in [1e16] + [0.1] * 10:
        naive += x
        exact.add(x)
    naive -= 1e16
    exact.add(1e16, -1)
    assert naive != math.fsum([0.1] * 10)
    assert exact.value() == math.fsum([0.1] * 10)


def test_infinite_lemma_term_counts_and_uncounts():
    s = ExactSum()
    s.add(math.inf)
    s.add(1.0)
    assert s.value() == math.inf
    s.add(math.inf, -1)
    assert s.value() == 1.0


# -- the accountant on the real embedded engine: status and admission from the running totals ----------

import random  # noqa: E402

import pytest  # noqa: E402

from dpch import BudgetExceeded  # noqa: E402
from dpch.accounting.accountant import Accountant, forget_cached_state  # noqa: E402
from dpch.errors import AnalystLocked  # noqa: E402
from dpch.store.engine import Engine  # noqa: E402

DATASETS = ("db.a", "db.b")


@pytest.fixture
def engine(store_dsn, database, keeper):
    e = Engine(store_dsn, database=database)
    yield e
    e.close()


def _reference(acc: Accountant, options: dict, scope: str) -> dict:
    """A scope's status recomputed from the whole history with the history-based filter methods."""
    status = acc.status(recent=0)
    if scope:
        status = next(d for d in status.datasets if d.dataset == scope)
    flt = make_filter(status.filter, status.budget, options)
    entries = [e for e in acc.recent(10**9) if not scope or scope in e.scopes]
    pending = [flt.reserved_terms(e.counted) for e in entries if e.status == "reserved"]
    return {
        "status": status, "filter": flt, "history": [e.counted for e in entries],
        "spent": flt.spent([e.counted for e in entries if e.status != "reserved"]),
        "remaining": flt.remaining([e.counted for e in entries]),
        "releases": sum(1 for e in entries if e.status != "voided"),
        "reserved": (math.fsum(t[0] for t in pending), math.fsum(t[1] for t in pending),
                     math.fsum(t[2] for t in pending) if flt.counts_rho else None),
    }


def _assert_matches_reference(acc: Accountant, options: dict, rng: random.Random) -> None:
    for scope in ("", *DATASETS):
        ref = _reference(acc, options, scope)
        status = ref["status"]
        assert _same(status.spent, ref["spent"]), scope
        assert _same(status.remaining, ref["remaining"]), scope
        assert status.releases == ref["releases"]
        assert (status.reserved.epsilon, status.reserved.delta, status.reserved.rho) == ref["reserved"]
    # admission: the accountant admits exactly when every scope's reference filter admits
    for _ in range(3):
        request, names = _request(rng), _datasets(rng)
        refs = [_reference(acc, options, s) for s in ("", *names)]
        expected = all(r["filter"].decide(r["history"], request).admitted for r in refs)
        try:
            acc.check(request, datasets=names)
            admitted = True
        except BudgetExceeded:
            admitted = False
        assert admitted == expected, (request, names)


def _request(rng: random.Random) -> PrivacyCost:
    eps = rng.choice([0.0, rng.uniform(0.01, 0.6)])
    if rng.random() < 0.5:
        return PrivacyCost(eps, 0.0, eps * eps / 2)
    worst = eps + rng.uniform(0.01, 0.3)
    return PrivacyCost(0.0, 0.0, 0.0, ex_post=True, worst_epsilon=worst, worst_rho=worst * worst / 2)


def _datasets(rng: random.Random) -> tuple[str, ...]:
    return rng.choice([(), ("db.a",), ("db.b",), DATASETS])


@pytest.mark.parametrize(("filter_name", "options"), [
    ("basic", {}), ("advanced", {"approx_delta_share": 0.3}), ("zcdp_bm", {}), ("ex_post", {}), ("mixed", {}),
])
def test_status_and_admission_match_the_history_after_random_releases(engine, filter_name, options):
    """Random fixed-cost charges, reservations settled, voided, failed (tripwire, then unlock) or left
    open, over the analyst's and two dataset budgets: status and admission equal the history-based
    reference after every step, and again after the state is rebuilt from the ledger."""
    rng = random.Random(14)  # fixed seed (docs/testing.md)
    analyst = f"rt_{filter_name}"

    def open_accountant() -> Accountant:
        return Accountant(engine, analyst, default_budget=Budget(4.0, 1e-5), filter=filter_name,
                          filter_options=options)

    acc = open_accountant()
    acc.set_budget(Budget(2.0, 1e-5), dataset="db.a")
    acc.set_budget(Budget(1.5, 1e-5), dataset="db.b")
    open_reservations = []
    for step in range(30):
        names = _datasets(rng)
        request = _request(rng)
        op = rng.choice(["charge", "settle", "void", "open", "fail", "close"])
        try:
            if op == "charge" and not request.ex_post:
                acc.charge(request, datasets=names, query_hash=f"q{step}", mechanism="gaussian")
            elif op == "close" and open_reservations:
                res = open_reservations.pop(rng.randrange(len(open_reservations)))
                res.settle(PrivacyCost(res.worst.epsilon * rng.random(), 0.0, ex_post=True))
            elif op != "charge":
                res = acc.reserve(request, datasets=names, query_hash=f"q{step}", mechanism="brownian")
                if op == "settle":
                    frac = rng.random()
                    res.settle(PrivacyCost(frac * res.worst.epsilon, 0.0, (res.worst.rho or 0.0) * frac,
                                           ex_post=True))
                elif op == "void":
                    res.void()
                elif op == "fail":
                    res.trip("TEST_FAILURE")
                    with pytest.raises(AnalystLocked):
                        acc.check(PrivacyCost(0.0))
                    assert acc.unlock()
                else:
                    open_reservations.append(res)
        except BudgetExceeded:
            pass
        _assert_matches_reference(acc, options, rng)
    before = acc.status(recent=0).as_dict()
    forget_cached_state(engine)  # as after a restart: the totals are rebuilt from the ledger
    again = open_accountant()
    assert again.status(recent=0).as_dict() == before
    _assert_matches_reference(again, options, rng)
