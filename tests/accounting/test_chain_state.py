"""The shared admission state (dpch/accounting/chain.py) counts exactly what the in-process owner counts.

Random sequences of releases — charges, reservations settled, voided or failed, under every filter —
are applied to an in-process :class:`AnalystState` and to a :class:`ChainState` that goes through
its JSON form (what Keeper holds) after every change. Their running totals must be equal bit for
bit (exact sums survive JSON), and so must every decision. A settle applied twice (another process,
or a change re-run after a lost race) changes nothing the second time; a state rebuilt from the
ledger and the unconfirmed rows equals the one kept incrementally. Derandomized hypothesis, no engine.
"""

from __future__ import annotations

from dataclasses import replace

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dpch.accounting.budget import Budget, BudgetSetting
from dpch.accounting.chain import KEEP, ChainState
from dpch.accounting.ledger import FAILED_SEQ, Ledger, LedgerEntry
from dpch.accounting.state import AnalystState
from dpch.privacy.cost import PrivacyCost
from tests.accounting.test_running_totals import CONFIGS, costs

_SETTLE = st.sampled_from(["charge", "reserve", "settle", "void", "fail", "rebuild"])


def _new(status: str, cost: PrivacyCost, i: int, flt: str) -> LedgerEntry:
    from datetime import UTC, datetime, timedelta

    entry = Ledger.__new__(Ledger).new_entry(status, analyst="ana", datasets=("db.t",), query_hash=str(i),
                                             mechanism="m", filter_name=flt, cost=cost)
    return replace(entry, time=datetime(2026, 1, 1, tzinfo=UTC) + timedelta(seconds=i))


def _sums(tally) -> list:
    """A tally's exact sums (their correctly rounded values: two partial lists can hold one sum)."""
    if hasattr(tally, "fixed"):
        return [_sums(tally.fixed), _sums(tally.post)]
    return [[s.value() for s in tally.sums], tally.count]


def _totals(state, flt):
    t = state.scope_totals("", flt, None)
    return _sums(t.counted), _sums(t.settled), [s.value() for s in t.reserved], t.releases


@settings(max_examples=150, derandomize=True, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(config=st.sampled_from(CONFIGS), ops=st.lists(st.tuples(_SETTLE, costs(), costs()), max_size=30),
       requests=st.lists(costs(), min_size=1, max_size=3))
def test_chain_state_counts_what_the_owner_counts(config, ops, requests):
    name, options = config
    settings_ = {"": BudgetSetting(Budget(5.0, 1e-5), filter=name, options=options)}
    owner = AnalystState([], settings_)
    ledger: dict[str, LedgerEntry] = {}  # what the ledger holds (every row is durable at once here)

    def history() -> list[LedgerEntry]:
        return sorted(ledger.values(), key=lambda e: (e.time, e.release_id))

    chain = ChainState(settings_, history=history, recent=lambda n: history()[-n:])
    budget = Budget(5.0, 1e-5)
    flt_owner = owner.filter(name, options, budget)
    flt_chain = chain.filter(name, options, budget)
    open_: list[LedgerEntry] = []
    for i, (op, cost, realized) in enumerate(ops):
        if op == "rebuild":  # the totals dropped and built again from the ledger (a new process, a new key)
            chain.totals.clear()
        elif op in ("charge", "reserve"):
            worst = cost if op == "charge" else cost
            entry = _new("charged" if op == "charge" else "reserved", worst, i, name)
            owner.put(entry)
            chain.put(entry, 1)
            ledger[entry.release_id] = entry
            if op == "reserve":
                open_.append(entry)
        elif open_:
            entry = open_.pop(0)
            if op == "fail":
                final, seq = Ledger.failed(entry), FAILED_SEQ
            else:
                final, seq = Ledger.settled(entry, realized if op == "settle" else None), 2
            final = replace(final, time=entry.time)
            owner.put(final)
            chain.put(final, seq)
            chain.put(final, seq)  # applied twice: the second changes nothing
            ledger[entry.release_id] = final
        # through JSON, as Keeper holds it, after every change
        chain = ChainState.loads(chain.dumps(), history=history, recent=lambda n: history()[-n:])
        flt_chain = chain.filter(name, options, budget)
        assert _totals(chain, flt_chain) == _totals(owner, flt_owner), (i, op)
    for request in requests:
        assert (flt_chain.decide_from(chain.scope_totals("", flt_chain).counted, request)
                == flt_owner.decide_from(owner.scope_totals("", flt_owner).counted, request))
    assert set(chain.open) == {e.release_id for e in open_}
    assert [e.release_id for e in chain.recent(KEEP)] == [e.release_id for e in owner.recent(KEEP)]


def test_a_first_row_counted_twice_counts_once():
    settings_ = {"": BudgetSetting(Budget(1.0, 1e-6))}
    chain = ChainState(settings_, history=list, recent=lambda n: [])
    flt = chain.filter("basic", None, Budget(1.0, 1e-6))
    entry = _new("charged", PrivacyCost(0.25), 0, "basic")
    chain.put(entry, 1)
    chain.put(entry, 1)
    assert chain.scope_totals("", flt).counted.total(0) == 0.25
    # negative control: the in-process owner's put is not idempotent by release (it needs no such
    # guard: one process, one lock) — a fixed-cost release counted twice there would count twice
    owner = AnalystState([], settings_)
    f2 = owner.filter("basic", None, Budget(1.0, 1e-6))
    owner.put(entry)
    owner.put(replace(entry, release_id="other"))
    assert owner.scope_totals("", f2).counted.total(0) == 0.5


def test_confirmed_rows_leave_the_state_and_unconfirmed_ones_survive_json():
    settings_ = {"": BudgetSetting(Budget(1.0, 1e-6))}
    chain = ChainState(settings_, history=list, recent=lambda n: [])
    a, b = _new("charged", PrivacyCost(0.1), 0, "basic"), _new("reserved", PrivacyCost(0.2), 1, "basic")
    chain.put(a, 1)
    chain.put(b, 1)
    chain.confirm({(a.release_id, 1)})
    again = ChainState.loads(chain.dumps(), history=list, recent=lambda n: [])
    assert set(again.rows) == {(b.release_id, 1)} and set(again.open) == {b.release_id}
    assert again.row((b.release_id, 1)) == b
