"""The durable state of threshold watches (dpch.accounting.watches): the B9 filter's arithmetic
against the paper's numbers, the realized cost the reservation is settled to, the table, and the
replay check :func:`watch_violations` (with hand-made bad histories as its negative controls)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

import numpy as np
import pytest

from dpch.accounting.watches import (
    WatchEvent,
    WatchParams,
    WatchState,
    WatchStore,
    epsilon_max_at,
    instances_for,
    new_watch,
    sigma_for,
    validate_params,
    watch_violations,
)
from dpch.errors import QueryRejected
from dpch.store.engine import Engine

# normalised Δ = 0.001, σ_X = 0.15, ρ = 0.5 (docs/algorithms.md B10): upper 1000, Δ 1, σ 150, threshold 500
B10 = WatchParams("b10", threshold=500.0, upper=1000.0, sensitivity=1.0, sigma=150.0, epsilon=1.0,
                  delta=1e-5 * 4, instances=4, datasets=("db.t",))


def test_instance_matches_the_paper_vectors() -> None:
    """ε_post(t) (Thm 17) and ε_max at δ_j (Thm 7) of the normalised instance: B10's table."""
    for t, want in ((1, 0.0069336), (2, 0.0177944), (5, 0.0354301), (10, 0.0486995)):
        assert B10.epsilon_post(t) == pytest.approx(want, abs=2e-7)
    assert B10.instance_delta == pytest.approx(1e-5)
    assert B10.epsilon_max == pytest.approx(0.0781427, abs=2e-7)


def test_sigma_for_is_the_smallest_that_fits() -> None:
    """n · ε_max(δ/n) ≤ ε at the σ chosen, and not 0.1 % below it (tolerance of the bisection: 1e-6)."""
    for eps, n, thr in ((1.0, 10, 1000.0), (0.3, 3, 50.0), (2.0, 25, 4000.0)):
        sigma = sigma_for(eps, 1e-7, n, thr, 5000.0, 2.0)
        assert n * epsilon_max_at(thr, 5000.0, 2.0, sigma, 1e-7 / n) <= eps
        assert n * epsilon_max_at(thr, 5000.0, 2.0, sigma * 0.999, 1e-7 / n) > eps


def test_instances_for_bounds_what_the_epsilon_check_opens() -> None:
    """With δ split over instances_for(...) instances, ⊤ after ⊤ at position 1 (the cheapest) opens at
    most that many before the ε check halts: δ never halts the watch first; and not many fewer (≥ 95 %)."""
    for sigma, lower in ((200.0, 0.0), (120.0, 500.0), (400.0, 0.0)):
        n = instances_for(1.0, 1e-7, 1000.0, 5000.0, 1.0, sigma, lower)
        params = WatchParams("w", 1000.0, 5000.0, 1.0, sigma, 1.0, 1e-7, n, ("db.t",), lower)
        state = new_watch(params, "r")
        opened = 0
        while state.spent + params.epsilon_max < params.epsilon:  # the ε part of can_open only
            state = _halt(state, 1)
            opened += 1
        assert 0.95 * n <= opened <= n
    assert instances_for(1.0, 1e-7, 1000.0, 5000.0, 1.0, 1.0) == 0  # σ far too small: not one instance


def test_bad_parameters_are_refused() -> None:
    ok = replace(B10, instances=1)
    validate_params(ok)
    for bad in (replace(ok, threshold=-1.0), replace(ok, threshold=2000.0), replace(ok, delta=0.0),
                replace(ok, epsilon=0.0), replace(ok, instances=0), replace(ok, datasets=()),
                replace(ok, name="a b"), replace(ok, sigma=float("nan"))):
        with pytest.raises(QueryRejected):
            validate_params(bad)


def _halt(state: WatchState, t: int) -> WatchState:
    """Opens an instance (as the pipeline does, after can_open) and halts it at position t."""
    opened = replace(state, instances=state.instances + 1, base=state.spent, noisy_threshold=0.5, position=0)
    return replace(opened, noisy_threshold=None, spent=opened.spent + state.params.epsilon_post(t))


def test_realized_cost_never_exceeds_the_reservation() -> None:
    """Module docstring, step 2: whatever the halting positions, E < ε, though B9's ``spent`` may pass ε
    (a late ⊤ costs more than ε_max). Random runs with a fixed seed; the last instance is left open
    or halted."""
    params = WatchParams("w", threshold=100.0, upper=1000.0, sensitivity=1.0, sigma=40.0, epsilon=0.5,
                         delta=1e-6, instances=1000, datasets=("db.t",))
    assert params.epsilon_post(5000) > params.epsilon_max  # else this test shows nothing
    rng = np.random.default_rng(7)
    overspent = 0
    for _ in range(60):
        state = new_watch(params, "r")
        while state.can_open():
            t = int(rng.choice([1, 2, 10, 100, 5000]))
            if rng.random() < 0.15:  # left open at close
                state = replace(state, instances=state.instances + 1, base=state.spent, noisy_threshold=0.5,
                                position=t)
                break
            state = _halt(state, t)
        assert state.realized_epsilon() < params.epsilon
        assert state.delta_used <= params.delta * (1 + 1e-12)
        overspent += state.charged_epsilon > params.epsilon
    assert overspent > 0, "some run's B9 count passes ε: the bound E is what makes settling sound"


def test_store_round_trip_and_secrecy(keeper: Engine, store_dsn: str, database: str) -> None:
    """A row written by one engine is read back by another on the same store, noisy threshold and
    all; the views never carry it."""
    engine = Engine(store_dsn, database=database)
    engine.command(f"CREATE DATABASE IF NOT EXISTS `{database}`")
    store = WatchStore(engine)
    state = store.append("ana", new_watch(B10, "rid"), "create")
    opened = store.append("ana", replace(state, instances=1, noisy_threshold=0.4321, base=0.0), "open")
    other = WatchStore(Engine(store_dsn, database=database))
    back = other.latest("ana", "b10")
    assert back is not None and back.noisy_threshold == 0.4321 and back.seq == opened.seq == 2
    assert back.params == B10
    assert other.latest("bob", "b10") is None
    assert [w.name for w in other.all("ana")] == ["b10"]
    assert "0.4321" not in repr(back) and "noisy" not in str(back.as_dict())
    assert [e.event for e in other.history("ana", "b10")] == ["create", "open"]
    engine.close()


def _event(state: WatchState, event: str, charged: float = 0.0) -> WatchEvent:
    return WatchEvent(event, "", charged, state)


def _good_history() -> list[WatchEvent]:
    p = B10
    s1 = replace(new_watch(p, "r"), seq=1, time=datetime.now(UTC))
    s2 = replace(s1, seq=2, instances=1, noisy_threshold=0.6, base=0.0)
    s3 = replace(s2, seq=3, position=1)
    s4 = replace(s3, seq=4, position=0, noisy_threshold=None, spent=p.epsilon_post(2))
    s5 = replace(s4, seq=5, instances=2, noisy_threshold=0.55, base=s4.spent)
    s6 = replace(s5, seq=6, state="closed", noisy_threshold=None, spent=s5.spent + p.epsilon_max)
    return [_event(s1, "create"), _event(s2, "open"), _event(s3, "below"), _event(s4, "above", p.epsilon_post(2)),
            _event(s5, "open"), _event(s6, "close", p.epsilon_max)]


def test_replay_accepts_a_good_history_and_catches_bad_ones() -> None:
    """The checker itself: a correct history passes; each single corruption is reported."""
    good = _good_history()
    assert watch_violations(good) == []
    wrong_post = list(good)
    wrong_post[3] = WatchEvent("above", "", good[3].charged * 0.5, replace(good[3].state, spent=good[3].charged * 0.5))
    redrawn = list(good)
    redrawn[2] = replace(good[2], state=replace(good[2].state, noisy_threshold=0.7))
    reopened = list(good)
    reopened[3] = _event(replace(good[3].state, noisy_threshold=0.7, spent=0.0, instances=2), "open")
    unpaid_close = list(good)
    unpaid_close[5] = replace(good[5], charged=0.0, state=replace(good[5].state, spent=good[4].state.spent))
    lost_update = [*good[:3], replace(good[3], state=replace(good[3].state, seq=3))]
    for bad, words in ((wrong_post, "ε_post"), (redrawn, "noisy threshold changed"), (reopened, "was open"),
                       (unpaid_close, "ε_max"), (lost_update, "seq 3")):
        found = watch_violations(bad)
        assert any(words in v for v in found), (words, found)


def test_replay_catches_an_instance_opened_without_room() -> None:
    """A second instance after a ⊤ at position 50 does not fit ε = 1.5 ε_max; a history that opens it is reported."""
    tight = replace(B10, epsilon=B10.epsilon_max * 1.5)
    s1 = replace(new_watch(tight, "r"), seq=1)
    s2 = replace(s1, seq=2, instances=1, noisy_threshold=0.6)
    belows = [replace(s2, seq=3 + i, position=i + 1) for i in range(49)]
    s3 = replace(s2, seq=52, noisy_threshold=None, spent=tight.epsilon_post(50), position=0)
    s4 = replace(s3, seq=53, instances=2, noisy_threshold=0.6, base=s3.spent)
    events = [_event(s1, "create"), _event(s2, "open"), *[_event(b, "below") for b in belows],
              _event(s3, "above", tight.epsilon_post(50)), _event(s4, "open")]
    assert not s3.can_open()
    assert watch_violations(events[:-1]) == []
    assert any("≥ ε" in v for v in watch_violations(events))
