"""Budgets that renew per UTC period (``dpch budget set --renew daily|weekly|monthly
[--lifetime-epsilon E]``), driven by an injected clock (no sleeps):

- the period windows (UTC calendar days, ISO weeks from Monday, months) and their labels;
- spend exhausts period 1, period 2 admits again; the lifetime cap refuses across periods (with a
  negative control: an accountant that forgets the lifetime filter admits, so the test would catch it);
- a release is charged to the period it was admitted in, even when settled after the boundary;
- a restart mid-period rebuilds exactly the current period's totals and the lifetime's from the ledger;
- 16 threads charging across a boundary never overspend the period filter nor the lifetime filter.
"""

from __future__ import annotations

import math
import threading
from datetime import UTC, datetime, timedelta, timezone

import pytest

from dpch import Budget, BudgetExceeded
from dpch.accounting import state as state_module
from dpch.accounting.accountant import Accountant, forget_cached_state
from dpch.accounting.budget import Renewal
from dpch.accounting.periods import period_of
from dpch.errors import ConfigError
from dpch.privacy.cost import PrivacyCost
from dpch.store.engine import Engine
from tests.accounting.gated_writer import DEADLINE

DAY1 = datetime(2026, 11, 24, 12, 0, tzinfo=UTC)  # a Tuesday
EPS = PrivacyCost(0.25)


class Clock:
    """A wall clock the test moves by hand."""

    def __init__(self, t: datetime) -> None:
        self.t = t

    def __call__(self) -> datetime:
        return self.t


@pytest.fixture
def engine(store_dsn, database, keeper):
    e = Engine(store_dsn, database=database)
    yield e
    e.close()


def _charge(acc: Accountant, cost: PrivacyCost = EPS) -> None:
    acc.charge(cost, query_hash="h", mechanism="laplace")


def _admitted(acc: Accountant, cost: PrivacyCost = EPS) -> bool:
    try:
        _charge(acc, cost)
    except BudgetExceeded:
        return False
    return True


def _ledger_by_period(engine: Engine, analyst: str) -> dict[str, tuple[int, float]]:
    rows = engine.query_rows(f"SELECT period, count(), sum(epsilon) FROM {engine.table('dpch_ledger')} "
                             "WHERE analyst = {a:String} GROUP BY period ORDER BY period", {"a": analyst})
    return {r[0]: (r[1], r[2]) for r in rows}


# -- the periods --------------------------------------------------------------------------------------


@pytest.mark.parametrize(("schedule", "t", "start", "end", "label"), [
    ("daily", datetime(2026, 11, 24, 23, 59, 59, 999999, tzinfo=UTC), datetime(2026, 11, 24),
     datetime(2026, 11, 25), "2026-11-24"),
    ("daily", datetime(2026, 11, 25, tzinfo=UTC), datetime(2026, 11, 25), datetime(2026, 11, 26), "2026-11-25"),
    # ISO weeks start on Monday; 2027-01-01 (a Friday) is still in ISO week 53 of 2026
    ("weekly", datetime(2026, 11, 29, 23, 59, tzinfo=UTC), datetime(2026, 11, 23), datetime(2026, 11, 30),
     "2026-W48"),
    ("weekly", datetime(2026, 11, 30, tzinfo=UTC), datetime(2026, 11, 30), datetime(2026, 12, 7), "2026-W49"),
    ("weekly", datetime(2027, 1, 1, 8, tzinfo=UTC), datetime(2026, 12, 28), datetime(2027, 1, 4), "2026-W53"),
    ("monthly", datetime(2026, 12, 31, 23, 59, tzinfo=UTC), datetime(2026, 12, 1), datetime(2027, 1, 1), "2026-12"),
    ("monthly", datetime(2027, 2, 28, tzinfo=UTC), datetime(2027, 2, 1), datetime(2027, 3, 1), "2027-02"),
    # a clock in another time zone is read in UTC: 01:00 at UTC+2 is 23:00 UTC the day before
    ("daily", datetime(2026, 11, 25, 1, 0, tzinfo=timezone(timedelta(hours=2))), datetime(2026, 11, 24),
     datetime(2026, 11, 25), "2026-11-24"),
])
def test_periods_are_utc_calendar_windows(schedule, t, start, end, label):
    p = period_of(schedule, t)
    assert (p.start, p.end, p.label) == (start.replace(tzinfo=UTC), end.replace(tzinfo=UTC), label)
    assert p.contains(as_utc(t)) and not p.contains(p.end) and p.contains(p.start)


def as_utc(t: datetime) -> datetime:
    return t.astimezone(UTC)


def test_bad_renewal_settings_are_refused(engine):
    with pytest.raises(ConfigError, match="unknown budget renewal"):
        Renewal("hourly")
    with pytest.raises(ConfigError, match="needs a renewing budget"):
        Renewal("", Budget(5.0, 1e-6))
    acc = Accountant(engine, "ana")
    with pytest.raises(ConfigError, match="smaller than one period"):
        acc.set_budget(Budget(1.0, 1e-6), renewal=Renewal("daily", Budget(0.5, 1e-6)))


@pytest.mark.parametrize("lifetime, accepted", [
    (Budget(1.0, 1e-6), True),  # equal to one period: the boundary, accepted
    (Budget(math.nextafter(1.0, 0.0), 1e-6), False),  # ε one float below
    (Budget(1.0, math.nextafter(1e-6, 0.0)), False),  # δ one float below
], ids=["equal", "epsilon-below", "delta-below"])
def test_a_lifetime_cap_equal_to_one_period_is_the_boundary(engine, lifetime, accepted):
    """The lifetime cap may equal one period's budget (one period then spends all of it) and not be a
    float smaller in ε or in δ: each side of the `or` is reached alone."""
    acc = Accountant(engine, "ana")
    renewal = Renewal("daily", lifetime)
    if accepted:
        acc.set_budget(Budget(1.0, 1e-6), renewal=renewal)
        assert acc.status().budget == Budget(1.0, 1e-6)
    else:
        with pytest.raises(ConfigError, match="the lifetime cap is smaller than one period's budget"):
            acc.set_budget(Budget(1.0, 1e-6), renewal=renewal)


# -- spending across periods -----------------------------------------------------------------------


def test_period_one_exhausts_and_period_two_admits_again(engine):
    clock = Clock(DAY1)
    acc = Accountant(engine, "ana", clock=clock)
    acc.set_budget(Budget(1.0, 1e-6), renewal=Renewal("daily"))
    assert [_admitted(acc) for _ in range(5)] == [True] * 4 + [False]
    with pytest.raises(BudgetExceeded, match=r"this day \(2026-11-24 UTC\)") as refused:
        _charge(acc)
    assert "renews at 2026-11-25 00:00 UTC" in str(refused.value)
    clock.t = datetime(2026, 11, 24, 23, 59, 59, 999999, tzinfo=UTC)  # still day 1
    assert not _admitted(acc)
    clock.t = datetime(2026, 11, 25, tzinfo=UTC)  # the boundary: a fresh period
    status = acc.status()
    assert status.period == "2026-11-25" and status.spent.epsilon == 0 and status.remaining.epsilon == 1.0
    assert status.lifetime is None and "over the lifetime: unbounded" in status.horizon
    assert [_admitted(acc) for _ in range(5)] == [True] * 4 + [False]
    # the ledger keeps every period's rows, each with its period
    assert _ledger_by_period(engine, "ana") == {"2026-11-24": (4, 1.0), "2026-11-25": (4, 1.0)}


def _three_days_under_a_cap(acc: Accountant, clock: Clock) -> list[bool]:
    """ε 1 per day under a lifetime cap of 2.5: two full days, then 0.5 of a third, then more."""
    outcomes = []
    for day in range(3):
        clock.t = DAY1 + timedelta(days=day)
        outcomes += [_admitted(acc, PrivacyCost(0.5)) for _ in range(2)]
    outcomes.append(_admitted(acc, PrivacyCost(0.1)))
    return outcomes


def test_the_lifetime_cap_refuses_across_periods(engine):
    clock = Clock(DAY1)
    acc = Accountant(engine, "ana", clock=clock)
    acc.set_budget(Budget(1.0, 1e-6), renewal=Renewal("daily", Budget(2.5, 1e-6)))
    assert _three_days_under_a_cap(acc, clock) == [True, True, True, True, True, False, False]
    status = acc.status()
    assert status.spent.epsilon == 0.5 and status.lifetime is not None
    assert status.lifetime.spent.epsilon == 2.5 and status.lifetime.releases == 5
    assert status.remaining.epsilon == 0.0, "what is left is the smaller of the period's and the cap's"
    assert "capped at ε 2.5" in status.horizon
    with pytest.raises(BudgetExceeded, match="lifetime budget"):
        _charge(acc, PrivacyCost(0.1))
    clock.t = DAY1 + timedelta(days=30)  # no period ever renews past the cap
    with pytest.raises(BudgetExceeded, match="lifetime budget"):
        _charge(acc, PrivacyCost(0.1))


def test_negative_control_an_accountant_without_the_lifetime_filter_overspends(engine, monkeypatch):
    """The same days with the lifetime filter dropped from admission: the cap is broken, so the
    test above (which asserts the refusals) would catch such a bug."""
    real = Accountant._checks

    def forgetful(self, state, datasets, now):
        return [c for c in real(self, state, datasets, now) if not c.lifetime]

    monkeypatch.setattr(Accountant, "_checks", forgetful)
    clock = Clock(DAY1)
    acc = Accountant(engine, "ana", clock=clock)
    acc.set_budget(Budget(1.0, 1e-6), renewal=Renewal("daily", Budget(2.5, 1e-6)))
    # ε 3 spent under a cap of 2.5 (only the third day's own budget stops the last request)
    assert _three_days_under_a_cap(acc, clock) == [True] * 6 + [False]
    assert sum(n for n, _ in _ledger_by_period(engine, "ana").values()) == 6


def test_a_release_counts_in_the_period_it_was_admitted_in(engine):
    """A reservation admitted before midnight and settled after it is charged to the first day:
    it does not reduce the second day's budget, and counts once in the lifetime cap."""
    clock = Clock(datetime(2026, 11, 24, 23, 59, tzinfo=UTC))
    acc = Accountant(engine, "ana", clock=clock, filter="ex_post")
    acc.set_budget(Budget(1.0, 1e-6), renewal=Renewal("daily", Budget(3.0, 1e-6)))
    res = acc.reserve(PrivacyCost(0.0, 0.0, ex_post=True, worst_epsilon=0.8), query_hash="h", mechanism="brownian")
    clock.t = datetime(2026, 11, 25, 0, 1, tzinfo=UTC)
    assert acc.status().spent.epsilon == 0 and acc.status().remaining.epsilon == 1.0  # day 2 is fresh
    res.settle(PrivacyCost(0.3, 0.0, ex_post=True))
    status = acc.status()
    assert status.releases == 0 and status.lifetime is not None and status.lifetime.spent.epsilon == 0.3
    assert [_admitted(acc, PrivacyCost(0.5)) for _ in range(3)] == [True, True, False]
    forget_cached_state(engine)  # a restart reads the release's admission time from its first row
    again = Accountant(engine, "ana", clock=clock, filter="ex_post").status()
    assert again.spent.epsilon == 1.0 and again.releases == 2 and again.lifetime.spent.epsilon == 1.3
    assert _ledger_by_period(engine, "ana")["2026-11-24"][0] == 2  # reserved + charged rows of day 1


def test_a_restart_mid_period_rebuilds_the_period_and_the_lifetime_from_the_ledger(engine):
    clock = Clock(DAY1)
    acc = Accountant(engine, "ana", clock=clock, filter="zcdp")
    acc.set_budget(Budget(2.0, 2e-6), renewal=Renewal("weekly", Budget(3.0, 2e-6)), dataset="db.t")
    acc.set_budget(Budget(3.0, 2e-6), renewal=Renewal("weekly", Budget(5.0, 2e-6)))
    for _ in range(3):  # ρ 0.02 each (ε²/2)
        acc.charge(PrivacyCost(0.2), datasets=("db.t",), query_hash="h", mechanism="laplace")
    clock.t = DAY1 + timedelta(days=7)  # next week, mid-period
    for _ in range(2):
        acc.charge(PrivacyCost(0.2), datasets=("db.t",), query_hash="h", mechanism="laplace")
    acc.charge(PrivacyCost(0.2), query_hash="h", mechanism="laplace")
    before = acc.status(recent=0).as_dict()
    decisions = [_admitted_check(acc, c, d) for c in (0.2, 0.5, 0.9) for d in ((), ("db.t",))]
    forget_cached_state(engine)  # as after a restart: totals rebuilt from the ledger
    again = Accountant(engine, "ana", clock=clock, filter="zcdp")
    assert again.status(recent=0).as_dict() == before
    assert [_admitted_check(again, c, d) for c in (0.2, 0.5, 0.9) for d in ((), ("db.t",))] == decisions
    assert before["releases"] == 3 and before["lifetime"]["releases"] == 6
    [dataset] = before["datasets"]
    assert dataset["releases"] == 2 and dataset["lifetime"]["releases"] == 5
    assert before["renewal"]["period"] == "2026-W49" and dataset["renewal"]["period"] == "2026-W49"


def _admitted_check(acc: Accountant, epsilon: float, datasets: tuple[str, ...]) -> bool:
    try:
        acc.check(PrivacyCost(epsilon), datasets=datasets)
    except BudgetExceeded:
        return False
    return True


def test_totals_restart_at_the_boundary_without_rescanning_the_history(engine, monkeypatch):
    """The period switch is O(1): the new period's totals start empty, the history is not read."""
    clock = Clock(DAY1)
    acc = Accountant(engine, "ana", clock=clock)
    acc.set_budget(Budget(100.0, 1e-6), renewal=Renewal("daily", Budget(1000.0, 1e-6)))
    for _ in range(20):
        _charge(acc)
    scanned = []
    real_extend = state_module.ScopeTotals.extend

    def counting_extend(self, entries):
        scanned.append(len(entries))
        return real_extend(self, entries)

    monkeypatch.setattr(state_module.ScopeTotals, "extend", counting_extend)
    clock.t = DAY1 + timedelta(days=1)
    _charge(acc)
    assert scanned == [] and acc.status().releases == 1 and acc.status().lifetime.releases == 21


# -- concurrency ------------------------------------------------------------------------------------


class SwitchingClock:
    """Day 1 for the first ``switch_after`` readings, then day 2: the boundary falls among
    concurrent admissions (readings happen under the analyst's lock)."""

    def __init__(self, switch_after: int) -> None:
        self.calls = 0
        self.switch_after = switch_after
        self._lock = threading.Lock()

    def __call__(self) -> datetime:
        with self._lock:
            self.calls += 1
            return DAY1 if self.calls <= self.switch_after else DAY1 + timedelta(days=1)


def test_sixteen_threads_across_a_boundary_never_overspend_either_filter(engine):
    """ε 1 per day (8 releases of 0.125) under a lifetime cap of 1.5 (12 releases): 16 threads make
    6 attempts each, released together by a barrier, with the day changing after 40 admissions.
    Day 1 admits exactly 8, day 2 exactly the 4 the cap leaves."""
    clock = SwitchingClock(switch_after=40)
    Accountant(engine, "ana").set_budget(Budget(1.0, 1e-6), renewal=Renewal("daily", Budget(1.5, 1e-6)))
    barrier = threading.Barrier(16)
    outcomes: list[bool] = []
    errors: list[BaseException] = []
    lock = threading.Lock()

    def worker() -> None:
        acc = Accountant(engine, "ana", clock=clock)
        try:
            barrier.wait(DEADLINE)
            for _ in range(6):
                ok = _admitted(acc, PrivacyCost(0.125))
                with lock:
                    outcomes.append(ok)
        except BaseException as exc:  # reported below: a thread's failure must fail the test
            errors.append(exc)

    threads = [threading.Thread(target=worker) for _ in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(DEADLINE)
    assert not errors and len(outcomes) == 96
    assert sum(outcomes) == 12
    assert _ledger_by_period(engine, "ana") == {"2026-11-24": (8, 1.0), "2026-11-25": (4, 0.5)}
    forget_cached_state(engine)
    status = Accountant(engine, "ana", clock=lambda: DAY1 + timedelta(days=1)).status()
    assert status.spent.epsilon == 0.5 and status.lifetime is not None and status.lifetime.spent.epsilon == 1.5


def test_a_release_admitted_exactly_at_midnight_counts_after_a_restart(engine):
    """The rebuild's boundary: a release admitted at 00:00:00.000000 belongs to the new day."""
    clock = Clock(DAY1)
    acc = Accountant(engine, "ana", clock=clock)
    acc.set_budget(Budget(1.0, 1e-6), renewal=Renewal("daily"))
    _charge(acc)
    clock.t = datetime(2026, 11, 25, tzinfo=UTC)
    _charge(acc, PrivacyCost(0.5))
    forget_cached_state(engine)
    status = Accountant(engine, "ana", clock=clock).status()
    assert status.period == "2026-11-25" and status.spent.epsilon == 0.5 and status.releases == 1


def test_a_clock_stepping_back_never_reopens_an_earlier_period(engine):
    """Monotone admission time: after day 2 has begun, a clock set back to day 1 admits into day 2
    (at the last admission's time), so day 1's spent budget is not given back."""
    clock = Clock(DAY1)
    acc = Accountant(engine, "ana", clock=clock)
    acc.set_budget(Budget(1.0, 1e-6), renewal=Renewal("daily"))
    assert [_admitted(acc, PrivacyCost(0.5)) for _ in range(2)] == [True, True]
    clock.t = DAY1 + timedelta(days=1)
    assert _admitted(acc, PrivacyCost(0.5))
    clock.t = DAY1  # the system clock steps back a day
    assert acc.status().period == "2026-11-25"
    assert [_admitted(acc, PrivacyCost(0.5)) for _ in range(2)] == [True, False]
    assert _ledger_by_period(engine, "ana") == {"2026-11-24": (2, 1.0), "2026-11-25": (2, 1.0)}
