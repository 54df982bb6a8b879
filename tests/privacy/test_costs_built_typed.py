"""Privacy costs are built typed (issue 25, "Typed costs end to end").

Outside :mod:`dpch.privacy` no code builds a :class:`PrivacyCost` by hand: every record comes from a
constructor of ``PrivacyCost`` that says what it is and why (:meth:`~PrivacyCost.of`,
:meth:`~PrivacyCost.realized`, :meth:`~PrivacyCost.of_release`, :meth:`~PrivacyCost.from_dict`,
:meth:`~PrivacyCost.zero`, :meth:`~PrivacyCost.composed`) or from a method of a record
(:meth:`~PrivacyCost.at_worst`). :func:`test_no_hand_built_cost_outside_privacy` scans the code for
the rest; the tests below it pin every field each constructor sets — ``None`` and ``0.0`` are not the
same (a ρ of ``None`` means "convert my (ε, δ)" to a zCDP filter, 0.0 means "I cost no ρ").

The refactor that introduced them changed no value: the tests of the call sites check the fields the
hand-built records had (the pre-refactor code passes them too), and :meth:`PrivacyCost.at_worst` is
checked against the two functions it replaced (``filters.ex_ante`` and ``ledger.worst_of``, copied
here as they were).
"""

from __future__ import annotations

import ast
import dataclasses
import json
import math
from pathlib import Path

import pytest

from dpch.accounting.budget import Budget
from dpch.accounting.filters import FILTERS, make_filter
from dpch.accounting.ledger import Ledger, LedgerEntry
from dpch.privacy.cost import ZCDP, ApproxDP, ExPost, PrivacyCost, PureDP
from dpch.server.wire import budget_from_wire, cost_from_wire, entry_from_wire
from dpch.store.engine import Engine

ROOT = Path(__file__).resolve().parents[2]
DPCH = ROOT / "dpch"
#: where records may be built field by field: the module that defines them and its package
ALLOWED = DPCH / "privacy"

# ------------------------------------------------------------------ the scan


def hand_built(source: str, filename: str = "<source>") -> list[str]:
    """``file:line`` of every call that constructs a ``PrivacyCost`` directly: a call of the name
    ``PrivacyCost`` (or a name it was imported as), or of an attribute ``.PrivacyCost``
    (``cost.PrivacyCost(...)``). ``PrivacyCost.of(...)`` and the other constructors are calls of an
    attribute *of* it, and pass."""
    tree = ast.parse(source, filename)
    names = {"PrivacyCost"}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            names |= {a.asname for a in node.names if a.name == "PrivacyCost" and a.asname}
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        if (isinstance(f, ast.Name) and f.id in names) or (isinstance(f, ast.Attribute) and f.attr == "PrivacyCost"):
            found.append(f"{filename}:{node.lineno}")
    return found


def _modules() -> list[Path]:
    return sorted(p for p in DPCH.rglob("*.py") if ALLOWED not in p.parents)


def test_no_hand_built_cost_outside_privacy():
    found = [hit for path in _modules() for hit in hand_built(path.read_text(), str(path.relative_to(ROOT)))]
    assert found == [], ("PrivacyCost built by hand outside dpch/privacy/ (use PrivacyCost.of / realized / "
                         "of_release / from_dict / zero, or add a typed constructor): " + ", ".join(found))


def test_the_scan_reads_the_code_it_guards():
    """The scan is not vacuous: it reads the modules that build costs, and they do build them (typed)."""
    paths = {str(p.relative_to(ROOT)) for p in _modules()}
    for module in ("dpch/accounting/filters.py", "dpch/accounting/ledger.py", "dpch/mechanisms/brownian.py",
                   "dpch/accuracy/planner.py", "dpch/server/wire.py"):
        assert module in paths
    assert not any(p.startswith("dpch/privacy/") for p in paths)
    typed = 0
    for path in _modules():
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and isinstance(node.func.value, ast.Name) and node.func.value.id == "PrivacyCost"):
                typed += 1
    assert typed >= 50  # the 62 hand-built records of issue 25, now typed


def test_the_scan_finds_a_hand_built_record():
    """Negative control: each way of constructing one directly is found, with its line."""
    source = ("from dpch.privacy.cost import PrivacyCost\n"
              "a = PrivacyCost(0.1, 0.0)\n"
              "b = PrivacyCost(0.2, 0.0, ex_post=True, worst_epsilon=1.0)\n")
    assert hand_built(source, "m.py") == ["m.py:2", "m.py:3"]
    assert hand_built("from dpch.privacy import cost\nc = cost.PrivacyCost(0.1)\n", "m.py") == ["m.py:2"]
    assert hand_built("from dpch.privacy.cost import PrivacyCost as PC\n\nc = PC(0.1)\n", "m.py") == ["m.py:3"]
    assert hand_built("x = [PrivacyCost(e) for e in (0.1, 0.2)]\n", "m.py") == ["m.py:1"]


def test_the_scan_passes_typed_construction():
    source = ("from dpch.privacy.cost import ExPost, PrivacyCost, PureDP\n"
              "a = PrivacyCost.of(PureDP(0.1))\n"
              "b = PrivacyCost.realized(ExPost(0.1, 0.0, 1.0))\n"
              "c = PrivacyCost.zero()\n"
              "d = b.at_worst()\n"
              "def f(x: PrivacyCost) -> PrivacyCost: return x\n"
              "e = isinstance(a, PrivacyCost)\n")
    assert hand_built(source) == []


# ------------------------------------------------------------------ every field of each constructor


def _fields(cost: PrivacyCost) -> tuple[object, ...]:
    return dataclasses.astuple(cost)


def _same(cost: PrivacyCost, expected: tuple[object, ...]) -> bool:
    """Field by field, with its type: 0.0 is not None, and False is not 0."""
    got = _fields(cost)
    return got == expected and [type(v) for v in got] == [type(v) for v in expected]


def test_the_field_order_these_tests_read():
    assert [f.name for f in dataclasses.fields(PrivacyCost)] == [
        "epsilon", "delta", "rho", "ex_post", "worst_epsilon", "worst_rho", "rho_delta"]


def test_of_a_fixed_cost():
    assert _same(PrivacyCost.of(PureDP(0.3)), (0.3, 0.0, None, False, None, None, 0.0))
    assert _same(PrivacyCost.of(ApproxDP(0.5, 1e-6)), (0.5, 1e-6, None, False, None, None, 0.0))
    assert _same(PrivacyCost.of(ApproxDP(0.5, 1e-6), ZCDP(0.004)), (0.5, 1e-6, 0.004, False, None, None, 0.0))
    assert _same(PrivacyCost.of(ApproxDP(0.5, 1e-6), ZCDP(0.125, 1e-6)),
                 (0.5, 1e-6, 0.125, False, None, None, 1e-6))


def test_realized_an_ex_post_cost():
    assert _same(PrivacyCost.realized(ExPost(0.2, 1e-6, 1.0)), (0.2, 1e-6, None, True, 1.0, None, 0.0))
    brownian = PrivacyCost.realized(ExPost(0.3, 1e-7, 0.9), rho=0.01, worst_rho=0.05, rho_delta=1e-8)
    assert _same(brownian, (0.3, 1e-7, 0.01, True, 0.9, 0.05, 1e-8))
    # what the call sites built by hand before issue 25
    assert PrivacyCost.realized(ExPost(0.2, 0.0, 1.0)) == PrivacyCost(0.2, 0.0, ex_post=True, worst_epsilon=1.0)
    # a realized E above the worst one is no contradiction (a pure ex-post instance may charge ε_post > ε_max)
    assert PrivacyCost.realized(ExPost(0.16, 0.0, 0.08)).epsilon == 0.16


def test_realized_refuses_a_negative_or_nan_worst_case():
    """A filter admits on the worst ε: a negative one would admit anything. (Before issue 25 such a record
    was made, and raised only when read: its (ε, δ), ex-post and worst-case views, which every filter
    reads, refused it; it is now refused where it is made.)"""
    for bad in (-1.0, math.nan):
        with pytest.raises(ValueError, match="worst_epsilon must be non-negative"):
            PrivacyCost.realized(ExPost(0.1, 0.0, bad))
    with pytest.raises(ValueError, match="rho must be non-negative"):
        PrivacyCost.realized(ExPost(0.1, 0.0, 1.0), rho=-0.5)
    with pytest.raises(ValueError, match="rho_delta must be non-negative"):
        PrivacyCost.realized(ExPost(0.1, 0.0, 1.0), rho=0.5, rho_delta=-1e-9)
    assert PrivacyCost.realized(ExPost(0.0, 0.0, 0.0)).worst_epsilon == 0.0  # the boundary is accepted


def test_zero():
    assert _same(PrivacyCost.zero(), (0.0, 0.0, 0.0, False, None, None, 0.0))
    # a Brownian run before its first release: ex-post, no worst case of its own
    assert _same(PrivacyCost.zero(ex_post=True), (0.0, 0.0, 0.0, True, None, None, 0.0))
    assert PrivacyCost.zero(ex_post=True) == PrivacyCost(0.0, 0.0, 0.0, ex_post=True)
    # zero() has ρ 0.0; a fixed cost of nothing has none
    assert PrivacyCost.zero() != PrivacyCost.of(PureDP(0.0))


GAUSS = PrivacyCost.of(ApproxDP(0.3, 1e-7), ZCDP(0.02, 1e-9))
WORST = PrivacyCost.of(ApproxDP(1.0, 1e-6), ZCDP(0.5))


def test_of_release_takes_the_cost_the_kind_and_the_worst_case_apart():
    assert _same(PrivacyCost.of_release(GAUSS, ex_post=True, worst=WORST), (0.3, 1e-7, 0.02, True, 1.0, 0.5, 1e-9))
    assert _same(PrivacyCost.of_release(GAUSS, ex_post=False, worst=None),
                 (0.3, 1e-7, 0.02, False, None, None, 1e-9))
    # an open reservation of a fixed-cost release is counted with its worst case stated, and stays fixed
    assert _same(PrivacyCost.of_release(WORST, ex_post=False, worst=WORST), (1.0, 1e-6, 0.5, False, 1.0, 0.5, 0.0))
    # a worst case without a ρ states none; the cost's own worst_* are not read
    post = PrivacyCost.realized(ExPost(0.1, 0.0, 0.7), rho=0.01, worst_rho=0.3)
    assert _same(PrivacyCost.of_release(post, ex_post=True, worst=PrivacyCost.of(PureDP(0.8))),
                 (0.1, 0.0, 0.01, True, 0.8, None, 0.0))
    assert _same(PrivacyCost.of_release(post, ex_post=True, worst=None), (0.1, 0.0, 0.01, True, None, None, 0.0))


# ------------------------------------------------------------------ at_worst: ex_ante and worst_of, once


def _ex_ante_before(cost: PrivacyCost) -> PrivacyCost:
    """``dpch.accounting.filters.ex_ante`` as it was before issue 25."""
    if not cost.ex_post:
        return cost
    eps = cost.worst_epsilon if cost.worst_epsilon is not None else cost.epsilon
    rho = cost.worst_rho if cost.worst_rho is not None else cost.rho
    return PrivacyCost(eps, cost.delta, rho, rho_delta=cost.rho_delta if rho is not None else 0.0)


def _worst_of_before(cost: PrivacyCost) -> PrivacyCost:
    """``dpch.accounting.ledger.worst_of`` as it was before issue 25."""
    if not cost.ex_post:
        return PrivacyCost(cost.epsilon, cost.delta, cost.rho, rho_delta=cost.rho_delta)
    eps = cost.worst_epsilon if cost.worst_epsilon is not None else cost.epsilon
    rho = cost.worst_rho if cost.worst_rho is not None else cost.rho
    return PrivacyCost(eps, cost.delta, rho, rho_delta=cost.rho_delta if rho is not None else 0.0)


#: every shape a record takes: fixed with and without ρ (and a ρ's δ without a ρ), ex-post with and
#: without each worst case, and fixed records carrying worst_* (an open reservation counted)
RECORDS = [
    PrivacyCost(0.3, 1e-7), PrivacyCost(0.3, 1e-7, 0.01), PrivacyCost(0.3, 1e-7, 0.01, rho_delta=1e-9),
    PrivacyCost(0.3, 1e-7, None, rho_delta=1e-9),
    PrivacyCost(0.3, 1e-7, 0.01, worst_epsilon=0.9, worst_rho=0.05, rho_delta=1e-9),
    PrivacyCost(0.3, 1e-7, None, worst_epsilon=0.9, rho_delta=1e-9),
    PrivacyCost(0.3, 1e-7, 0.01, worst_rho=0.05),
    PrivacyCost(0.2, 1e-6, ex_post=True, worst_epsilon=1.0),
    PrivacyCost(0.2, 1e-6, 0.01, ex_post=True, worst_epsilon=1.0, worst_rho=0.05, rho_delta=1e-8),
    PrivacyCost(0.2, 1e-6, 0.01, ex_post=True, worst_epsilon=1.0, rho_delta=1e-8),
    PrivacyCost(0.2, 1e-6, None, ex_post=True, worst_epsilon=1.0, worst_rho=0.05, rho_delta=1e-8),
    PrivacyCost(0.2, 1e-6, None, ex_post=True, worst_epsilon=1.0, rho_delta=1e-8),
    PrivacyCost(0.4, 0.0, ex_post=True), PrivacyCost(0.0, 0.0, 0.0, ex_post=True),
]


@pytest.mark.parametrize("cost", RECORDS, ids=[repr(_fields(c)) for c in RECORDS])
def test_at_worst_is_what_worst_of_stored_and_what_ex_ante_counted(cost):
    worst = cost.at_worst()
    assert _same(worst, _fields(_worst_of_before(cost)))
    before = _ex_ante_before(cost)
    # the filters read ε, δ and the zCDP view of it: unchanged for every record
    assert (worst.epsilon, worst.delta, worst.rho, worst.rho_delta, worst.zcdp(), worst.approx_dp()) == (
        before.epsilon, before.delta, before.rho, before.rho_delta, before.zcdp(), before.approx_dp())
    if cost.worst_epsilon is None and cost.worst_rho is None or cost.ex_post:
        assert _same(worst, _fields(before))


def test_at_worst_values():
    brownian = PrivacyCost.realized(ExPost(0.2, 1e-6, 1.0), rho=0.01, worst_rho=0.05, rho_delta=1e-8)
    assert _same(brownian.at_worst(), (1.0, 1e-6, 0.05, False, None, None, 1e-8))
    # an ex-post record with no ρ of its own has no ρ's δ at its worst either
    no_rho = PrivacyCost(0.2, 1e-6, None, ex_post=True, worst_epsilon=1.0, rho_delta=1e-8)
    assert _same(no_rho.at_worst(), (1.0, 1e-6, None, False, None, None, 0.0))
    # without a stated worst case an ex-post record counts at what it says
    assert _same(PrivacyCost(0.4, 1e-6, 0.01, ex_post=True).at_worst(), (0.4, 1e-6, 0.01, False, None, None, 0.0))
    # a fixed cost is its own worst case, the very record; one carrying worst_* loses them, nothing else
    fixed = PrivacyCost.of(ApproxDP(0.3, 1e-7), ZCDP(0.01))
    assert fixed.at_worst() is fixed
    for counted in (PrivacyCost(0.3, 1e-7, None, worst_epsilon=0.3, rho_delta=1e-9),
                    PrivacyCost(0.3, 1e-7, None, worst_rho=0.01, rho_delta=1e-9)):
        assert _same(counted.at_worst(), (0.3, 1e-7, None, False, None, None, 1e-9))


# ------------------------------------------------------------------ from_dict


def test_from_dict_reads_back_what_asdict_wrote():
    for cost in [*RECORDS, PrivacyCost.zero(), PrivacyCost(1, 0)]:
        data = json.loads(json.dumps(dataclasses.asdict(cost)))
        assert _same(PrivacyCost.from_dict(data), _fields(cost))


def test_from_dict_fills_what_is_not_given():
    assert _same(PrivacyCost.from_dict({"epsilon": 0.5, "delta": 1e-6, "rho": None}),
                 (0.5, 1e-6, None, False, None, None, 0.0))
    assert _same(PrivacyCost.from_dict({"epsilon": 0.5}), (0.5, 0.0, None, False, None, None, 0.0))
    assert _same(PrivacyCost.from_dict({"epsilon": 0.5, "delta": 1e-6, "rho": 0.1, "ex_post": True}),
                 (0.5, 1e-6, 0.1, True, None, None, 0.0))


@pytest.mark.parametrize(("data", "words"), [
    ({"epsilon": 0.5, "eps": 0.5}, "no field 'eps'"),
    ({"delta": 1e-6}, "needs its epsilon"),
    ({"epsilon": "0.5"}, "epsilon must be a number"),
    ({"epsilon": True}, "epsilon must be a number"),
    ({"epsilon": 0.5, "delta": None}, "delta must be a number"),
    ({"epsilon": 0.5, "rho_delta": None}, "rho_delta must be a number"),
    ({"epsilon": 0.5, "rho": "0.1"}, "rho must be a number"),
    ({"epsilon": 0.5, "ex_post": 1}, "ex_post must be a bool"),
    ({"epsilon": 0.5, "ex_post": None}, "ex_post must be a bool"),
    ({"epsilon": 0.5, "ex_post": True, "worst_epsilon": -1.0}, "worst_epsilon must be non-negative"),
    ({"epsilon": 0.5, "ex_post": True, "worst_epsilon": math.nan}, "worst_epsilon must be non-negative"),
    ({"epsilon": 0.5, "ex_post": True, "worst_rho": -1e-12}, "worst_rho must be non-negative"),
    ({"epsilon": 0.5, "rho": -0.1}, "rho must be non-negative"),
    ({"epsilon": -0.5}, "privacy cost must be non-negative"),
    ({"epsilon": 0.5, "rho_delta": -1e-9}, "rho_delta must be non-negative"),
])
def test_from_dict_refuses_what_is_not_a_record(data, words):
    with pytest.raises(ValueError, match=words):
        PrivacyCost.from_dict(data)


def test_from_dict_accepts_the_boundaries():
    assert _same(PrivacyCost.from_dict({"epsilon": 0, "delta": 0.0, "rho": 0.0, "ex_post": True, "worst_epsilon": 0.0,
                                        "worst_rho": 0.0, "rho_delta": 0.0}), (0, 0.0, 0.0, True, 0.0, 0.0, 0.0))
    assert PrivacyCost.from_dict({"epsilon": math.inf}).epsilon == math.inf


# ------------------------------------------------------------------ the call sites keep their fields
# (these use only what existed before issue 25, so the pre-refactor code passes them too)

FIXED_ONLY = ("basic", "pure", "advanced", "ex_post", "pure_ex_post")
WITH_RHO = ("zcdp", "zcdp_bm", "mixed")


def test_every_filter_is_in_one_group():
    assert sorted(FIXED_ONLY + WITH_RHO) == sorted(FILTERS)


HISTORY = [PrivacyCost(0.1, 1e-8), PrivacyCost(0.2, 0.0, ex_post=True, worst_epsilon=0.3)]


@pytest.mark.parametrize("name", FIXED_ONLY + WITH_RHO)
def test_filter_amounts_state_rho_only_where_the_filter_composes_in_rho(name):
    """spent/remaining (and their running-total twins): ρ ``None`` under a filter with no ρ budget (not
    0.0, which would read as "no ρ left"), a ρ with δ 0 under the zCDP ones."""
    options = {"approx_delta_share": 0.5} if name == "advanced" else None
    flt = make_filter(name, Budget(2.0, 1e-6), options)
    history = [c for c in HISTORY if c.delta == 0] if flt.pure_only else HISTORY
    for past in ([], history):
        tally = flt.tally(past)
        for amount in (flt.spent(past), flt.remaining(past), flt.spent_from(tally), flt.remaining_from(tally)):
            assert not amount.ex_post and amount.worst_epsilon is None and amount.worst_rho is None
            assert amount.rho_delta == 0.0
            if name in WITH_RHO:
                assert amount.rho is not None and amount.rho >= 0
            else:
                assert amount.rho is None
            assert type(amount.epsilon) is float and type(amount.delta) is float


def test_an_empty_history_spends_nothing_with_no_rho():
    for name in FIXED_ONLY:
        flt = make_filter(name, Budget(2.0, 1e-6), None)
        assert _same(flt.spent([]), (0.0, 0.0, None, False, None, None, 0.0))
    z = make_filter("zcdp", Budget(2.0, 1e-6), None)
    assert _same(z.spent([]), (0.0, 0.0, 0.0, False, None, None, 0.0))


def _entry(status: str, cost: PrivacyCost, worst: PrivacyCost) -> LedgerEntry:
    from datetime import UTC, datetime

    return LedgerEntry(release_id="r", time=datetime(2024, 1, 1, tzinfo=UTC), analyst="a", dataset="d.t",
                       query_hash="h", mechanism="m", status=status, cost=cost, worst=worst)


def test_a_reservation_counts_at_its_worst_case_as_its_kind():
    post_worst = PrivacyCost(1.0, 1e-6, 0.05, rho_delta=1e-9)
    post = _entry("reserved", PrivacyCost(1.0, 1e-6, 0.05, ex_post=True, worst_epsilon=1.0, worst_rho=0.05),
                  post_worst)
    assert _same(post.counted, (1.0, 1e-6, 0.05, True, 1.0, 0.05, 1e-9))
    fixed_worst = PrivacyCost(0.6, 1e-6)
    fixed = _entry("reserved", fixed_worst, fixed_worst)
    assert _same(fixed.counted, (0.6, 1e-6, None, False, 0.6, None, 0.0))
    assert _same(_entry("voided", fixed_worst, fixed_worst).counted, (0.0, 0.0, 0.0, False, None, None, 0.0))
    charged = PrivacyCost(0.2, 0.0, ex_post=True, worst_epsilon=0.8)
    assert _entry("charged", charged, PrivacyCost(0.8, 0.0)).counted is charged


def test_a_settled_reservation_keeps_its_kind_and_worst_case():
    worst = PrivacyCost(1.0, 1e-6, 0.05)
    post = _entry("reserved", PrivacyCost(1.0, 1e-6, 0.05, ex_post=True, worst_epsilon=1.0, worst_rho=0.05), worst)
    realized = PrivacyCost(0.4, 1e-6, 0.02, ex_post=True, worst_epsilon=9.0, worst_rho=9.0, rho_delta=1e-9)
    assert _same(Ledger.settled(post, realized).cost, (0.4, 1e-6, 0.02, True, 1.0, 0.05, 1e-9))
    fixed = _entry("reserved", PrivacyCost(0.6, 1e-6), PrivacyCost(0.6, 1e-6))
    assert _same(Ledger.settled(fixed, realized).cost, (0.4, 1e-6, 0.02, False, None, None, 1e-9))
    assert Ledger.settled(post, None).status == "voided"


def test_the_wire_reads_costs_back_as_it_did():
    assert _same(cost_from_wire({"epsilon": 0.5, "delta": 1e-6}), (0.5, 1e-6, None, False, None, None, 0.0))
    assert _same(cost_from_wire({"epsilon": 0.5, "delta": 1e-6, "rho": 0.1}), (0.5, 1e-6, 0.1, False, None, None, 0.0))
    with pytest.raises(KeyError):
        cost_from_wire({"epsilon": 0.5})
    e = {"release_id": "r", "time": "2024-01-01T00:00:00+00:00", "dataset": "d.t", "mechanism": "m",
         "status": "charged", "epsilon": 0.2, "delta": 1e-6, "rho": 0.01}
    plain = entry_from_wire(e, "a")
    assert _same(plain.cost, (0.2, 1e-6, 0.01, False, None, None, 0.0))
    assert _same(plain.worst, (0.2, 1e-6, None, False, None, None, 0.0))
    post = entry_from_wire({**e, "worst_epsilon": 0.9}, "a")
    assert _same(post.cost, (0.2, 1e-6, 0.01, True, None, None, 0.0))
    assert _same(post.worst, (0.9, 1e-6, None, False, None, None, 0.0))


def test_the_wire_reads_a_budget_status_back_as_it_did():
    data = {"analyst": "a", "filter": "zcdp", "budget": {"epsilon": 1.0, "delta": 1e-6},
            "spent": {"epsilon": 0.3, "delta": 1e-7, "rho": 0.01}, "remaining": {"epsilon": -1e-12, "delta": 1e-7},
            "releases": 1}
    status = budget_from_wire(data)
    assert _same(status.spent, (0.3, 1e-7, 0.01, False, None, None, 0.0))
    assert _same(status.remaining, (0.0, 1e-7, None, False, None, None, 0.0))  # floored at 0
    assert _same(status.reserved, (0.0, 0.0, 0.0, False, None, None, 0.0))  # none sent: zero()


# ------------------------------------------------------------------ the ledger's rows read back


@pytest.fixture
def ledger(store_dsn, database, keeper):
    engine = Engine(store_dsn, database=database)
    yield Ledger(engine)
    engine.close()


def test_ledger_rows_read_back_with_the_fields_they_had(ledger):
    """Each shape of release written and read back (:meth:`Ledger.entries`): ρ ``None`` stays ``None``,
    a ρ's δ is read only where the cost has a ρ, worst_* only on an ex-post release."""
    args = {"analyst": "ana", "datasets": ("d.t",), "query_hash": "h", "mechanism": "m", "filter_name": "basic"}
    ledger.charge(**args, cost=PrivacyCost(0.3, 0.0))
    ledger.charge(**args, cost=PrivacyCost(0.5, 1e-6, 0.125, rho_delta=1e-6))

    def reserve(worst: PrivacyCost) -> LedgerEntry:
        entry = ledger.new_entry("reserved", **args, cost=worst)
        ledger.write(entry, 1).wait()
        return entry

    brownian = reserve(PrivacyCost(1.0, 1e-6, 0.05, ex_post=True, worst_epsilon=1.0, worst_rho=0.05))
    ledger.settle(brownian, PrivacyCost(0.4, 1e-6, 0.02, ex_post=True, worst_epsilon=1.0, worst_rho=0.05))
    lnr = reserve(PrivacyCost(0.8, 0.0, ex_post=True, worst_epsilon=0.8))
    # realized without a ρ but with a ρ's δ: the δ is not read back (it has no ρ to qualify)
    ledger.settle(lnr, PrivacyCost(0.2, 0.0, None, ex_post=True, worst_epsilon=0.8, rho_delta=1e-9))
    reserve(PrivacyCost(0.7, 0.0, 0.03, ex_post=True, worst_epsilon=0.7, worst_rho=0.03))  # left open
    reserve(PrivacyCost(0.6, 1e-6, 0.02))  # a direct release's reservation, left open
    got = [(e.status, _fields(e.cost), _fields(e.worst), _fields(e.counted)) for e in ledger.entries("ana")]
    assert got == [
        ("charged", (0.3, 0.0, None, False, None, None, 0.0), (0.3, 0.0, None, False, None, None, 0.0),
         (0.3, 0.0, None, False, None, None, 0.0)),
        ("charged", (0.5, 1e-6, 0.125, False, None, None, 1e-6), (0.5, 1e-6, 0.125, False, None, None, 1e-6),
         (0.5, 1e-6, 0.125, False, None, None, 1e-6)),
        ("charged", (0.4, 1e-6, 0.02, True, 1.0, 0.05, 0.0), (1.0, 1e-6, 0.05, False, None, None, 0.0),
         (0.4, 1e-6, 0.02, True, 1.0, 0.05, 0.0)),
        ("charged", (0.2, 0.0, None, True, 0.8, None, 0.0), (0.8, 0.0, None, False, None, None, 0.0),
         (0.2, 0.0, None, True, 0.8, None, 0.0)),
        ("reserved", (0.7, 0.0, 0.03, True, 0.7, 0.03, 0.0), (0.7, 0.0, 0.03, False, None, None, 0.0),
         (0.7, 0.0, 0.03, True, 0.7, 0.03, 0.0)),
        ("reserved", (0.6, 1e-6, 0.02, False, None, None, 0.0), (0.6, 1e-6, 0.02, False, None, None, 0.0),
         (0.6, 1e-6, 0.02, False, 0.6, 0.02, 0.0)),
    ]
    # None is not 0.0 (tuples compare 0.0 == 0 but never None == 0.0); ex_post is a bool
    for e in ledger.entries("ana"):
        assert type(e.cost.ex_post) is bool and type(e.worst.ex_post) is bool
