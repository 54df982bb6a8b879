"""Targeted checks of dpch.accounting.watches that the mutation run (docs/mutation.md, "Watches and
top-k (issue 16)") showed no other test made: the parameter validation at its boundaries, the
search for σ from far outside its usual bracket, the state a new watch starts in, and the replay
check :func:`watch_violations` on histories each broken in one way (negative controls) beside the
same history unbroken. Pure arithmetic, no randomness; tolerances are stated where they apply."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

import pytest

from dpch.accounting.watches import (
    DEFAULT_INSTANCES,
    MAX_INSTANCES,
    WatchEvent,
    WatchParams,
    WatchState,
    WatchStore,
    at_instance,
    epsilon_max_at,
    instances_for,
    new_watch,
    sigma_for,
    validate_params,
    watch_violations,
)
from dpch.errors import QueryRejected
from dpch.store.engine import Engine

# B10's normalised instance (docs/algorithms.md): Δ 1, σ 150, threshold 500 on [0, 1000]; one instance
ONE = WatchParams("w", threshold=500.0, upper=1000.0, sensitivity=1.0, sigma=150.0, epsilon=1.0,
                  delta=1e-5, instances=1, datasets=("db.t",))


# -- parameters ---------------------------------------------------------------------------------------


def _refusal(params: WatchParams) -> str:
    with pytest.raises(QueryRejected) as info:
        validate_params(params)
    return info.value.message


def test_delta_of_one_or_more_is_refused() -> None:
    """δ ≥ 1 bounds nothing (every mechanism is (ε, 1)-DP): refused, with the reason."""
    for delta in (1.0, 1.5):
        assert "delta must be in (0, 1)" in _refusal(replace(ONE, delta=delta))
    validate_params(replace(ONE, delta=0.999))


def test_an_empty_range_is_refused_as_empty() -> None:
    """lower = upper is reported as an empty range (not as a zero width the analyst never wrote)."""
    message = _refusal(replace(ONE, lower=1000.0, threshold=1000.0))
    assert "the range [lower, upper] = [1000.0, 1000.0] is empty" in message


def test_a_threshold_at_either_end_of_the_range_is_valid() -> None:
    """[lower, upper] is closed: ρ = lower and ρ = upper are accepted, and normalise to exactly 0 and 1;
    just outside either end is refused."""
    for threshold, normalised in ((500.0, 0.0), (1500.0, 1.0)):
        params = replace(ONE, lower=500.0, upper=1500.0, threshold=threshold)
        validate_params(params)
        assert params.mechanism.threshold == normalised
    for outside in (499.0, 1501.0):
        assert "the threshold must be in [lower, upper]" in _refusal(
            replace(ONE, lower=500.0, upper=1500.0, threshold=outside))


# -- choosing σ ----------------------------------------------------------------------------------------


def test_sigma_for_searches_down_when_its_first_guess_already_fits() -> None:
    """An ε so large that the search's first lower guess (Δ/1000) already fits: the σ returned is still the
    smallest that fits, to the bisection's 1e-6 (checked at 0.1 % below it)."""
    n, delta = 10, 1e-7
    assert epsilon_max_at(1000.0, 5000.0, 1.0, 1e-3, delta / n) < 1e11 / n  # the first guess fits
    sigma = sigma_for(1e11, delta, n, 1000.0, 5000.0, 1.0)
    assert n * epsilon_max_at(1000.0, 5000.0, 1.0, sigma, delta / n) <= 1e11
    assert n * epsilon_max_at(1000.0, 5000.0, 1.0, sigma * 0.999, delta / n) > 1e11


def test_sigma_for_on_a_range_below_zero() -> None:
    """A range reaching far below zero ([−6000, 5000]): the search starts from its width, not from its ends,
    and returns the smallest σ that fits (checked 0.1 % below)."""
    n, delta = 10, 1e-7
    sigma = sigma_for(1.0, delta, n, 0.0, 5000.0, 1.0, -6000.0)
    assert n * epsilon_max_at(0.0, 5000.0, 1.0, sigma, delta / n, -6000.0) <= 1.0
    assert n * epsilon_max_at(0.0, 5000.0, 1.0, sigma * 0.999, delta / n, -6000.0) > 1.0


def test_instances_for_is_zero_when_one_instance_only_just_does_not_fit() -> None:
    """ε exactly ε_max(δ): B9's check (spent + ε_max < ε, strict) never opens an instance, so the count is 0
    (the watch is refused at registration, not created unable to answer); a hair more ε opens one."""
    e = epsilon_max_at(1000.0, 5000.0, 1.0, 100.0, 1e-7)
    assert instances_for(e, 1e-7, 1000.0, 5000.0, 1.0, 100.0) == 0
    one = WatchParams("w", 1000.0, 5000.0, 1.0, 100.0, e, 1e-7, 1, ("db.t",))
    assert not new_watch(one, "r").can_open()
    assert instances_for(e * (1 + 1e-9), 1e-7, 1000.0, 5000.0, 1.0, 100.0) == 1


def test_sigma_for_searches_up_past_the_width() -> None:
    """A small ε needs σ above the range's width (the search's first upper guess): still the smallest that fits."""
    n, delta = 10, 1e-7
    sigma = sigma_for(0.01, delta, n, 1000.0, 5000.0, 1.0)
    assert sigma > 2 * 5000.0
    assert n * epsilon_max_at(1000.0, 5000.0, 1.0, sigma, delta / n) <= 0.01
    assert n * epsilon_max_at(1000.0, 5000.0, 1.0, sigma * 0.999, delta / n) > 0.01


def test_epsilon_max_at_is_the_instances_epsilon_max() -> None:
    """The function σ and n are chosen with computes the same ε_max as the instance the watch runs (σ_Z = √3 σ_X),
    on [0, upper] and on a shifted range."""
    for lower, threshold in ((0.0, 500.0), (200.0, 500.0)):
        params = replace(ONE, lower=lower, threshold=threshold)
        want = params.epsilon_max
        assert epsilon_max_at(threshold, 1000.0, 1.0, 150.0, 1e-5, lower) == pytest.approx(want, rel=1e-12)
    assert ONE.mechanism.sigma_z == pytest.approx(3**0.5 * 150.0 / 1000.0, rel=1e-12)


def test_at_instance_defaults_to_a_range_from_zero() -> None:
    default = at_instance(500.0, 1000.0, 1.0, 150.0, 1e-5)
    explicit = at_instance(500.0, 1000.0, 1.0, 150.0, 1e-5, 0.0)
    assert (default.threshold, default.epsilon_max) == (explicit.threshold, explicit.epsilon_max)
    assert (default.threshold, default.epsilon_max) == (0.5, ONE.epsilon_max)


def test_instances_for_is_capped() -> None:
    """ε far above ε_post(1): the count stops at MAX_INSTANCES (10⁶), however many could open."""
    uncapped = (1e3 - epsilon_max_at(1000.0, 5000.0, 1.0, 5000.0, 1e-7)) / at_instance(
        1000.0, 5000.0, 1.0, 5000.0, 1e-7).epsilon_post(1)
    assert uncapped > 2 * MAX_INSTANCES and MAX_INSTANCES == 1_000_000
    assert instances_for(1e3, 1e-7, 1000.0, 5000.0, 1.0, 5000.0) == 1_000_000


def test_default_instances_is_ten() -> None:
    """docs/watches.md: without --sigma, σ is chosen so that 10 instances each fit ε/10."""
    assert DEFAULT_INSTANCES == 10


# -- a new watch -------------------------------------------------------------------------------------------


def test_a_new_watch_has_nothing_open_and_nothing_spent() -> None:
    """The ``create`` row's state: position 0 and no noisy threshold (no instance open), no instance, nothing spent."""
    state = new_watch(ONE, "rid")
    assert (state.seq, state.state, state.instances, state.position, state.noisy_threshold) == (0, "active", 0, 0, None)
    assert (state.spent, state.base, state.release_id) == (0.0, 0.0, "rid")
    assert state.as_dict()["position"] is None and state.charged_epsilon == 0.0


def test_an_open_instance_counts_at_its_epsilon_max() -> None:
    """B9's count and the realized E: an open instance adds ε_max to what halted instances spent; with nothing
    opened, E is 0; one instance halted at t costs min(ε_post(t), ε_max) — never nothing."""
    fresh = new_watch(replace(ONE, instances=4, epsilon=1.0), "r")
    assert fresh.realized_epsilon() == 0.0 and fresh.charged_epsilon == 0.0
    p = fresh.params
    halted = replace(fresh, instances=1, spent=p.epsilon_post(3), base=0.0)
    assert halted.charged_epsilon == pytest.approx(p.epsilon_post(3), rel=1e-12)
    assert halted.realized_epsilon() == pytest.approx(min(p.epsilon_post(3), p.epsilon_max), rel=1e-12)
    opened = replace(halted, instances=2, base=halted.spent, noisy_threshold=0.5, position=2)
    assert opened.charged_epsilon == pytest.approx(p.epsilon_post(3) + p.epsilon_max, rel=1e-12)
    assert opened.realized_epsilon() == pytest.approx(p.epsilon_post(3) + p.epsilon_max, rel=1e-12)
    assert opened.as_dict()["spent"] == pytest.approx(p.epsilon_post(3) + p.epsilon_max, rel=1e-12)


# -- the replay check ----------------------------------------------------------------------------------------


def _event(state: WatchState, event: str, charged: float = 0.0) -> WatchEvent:
    return WatchEvent(event, "", charged, state)


def _created(params: WatchParams) -> WatchState:
    return replace(new_watch(params, "r"), seq=1, time=datetime.now(UTC))


def _one_above(params: WatchParams) -> list[WatchEvent]:
    """create, open, ⊤ at position 1 (charged ε_post(1)): a correct history."""
    s1 = _created(params)
    s2 = replace(s1, seq=2, instances=1, noisy_threshold=0.6)
    s3 = replace(s2, seq=3, noisy_threshold=None, spent=params.epsilon_post(1))
    return [_event(s1, "create"), _event(s2, "open"), _event(s3, "above", params.epsilon_post(1))]


def test_replay_counts_delta_exactly() -> None:
    """n = 1 instance: opening a second one uses Σ δ_j = 2δ > δ and is reported, though ε has room."""
    roomy = replace(ONE, epsilon=100.0)
    good = _one_above(roomy)
    assert watch_violations(good) == []
    s3 = good[-1].state
    second = _event(replace(s3, seq=4, instances=2, noisy_threshold=0.6, base=s3.spent), "open")
    assert watch_violations([*good, second]) == ["row 4 (open): Σ δ_j = 2e-05 > δ 1e-05"]


def test_replay_checks_the_rows_spent_against_the_charges() -> None:
    """A ⊤ charged ε_post(1) whose row still says spent 0 (the charge not recorded) is reported; so is a row
    that says 0.5 more than was charged."""
    good = _one_above(ONE)
    for wrong in (0.0, ONE.epsilon_post(1) + 0.5):
        bad = [*good[:2], replace(good[2], state=replace(good[2].state, spent=wrong))]
        found = watch_violations(bad)
        assert len(found) == 1 and found[0].startswith("row 3 (above): the row says spent"), found


def test_replay_reports_questions_on_an_exhausted_or_closed_watch_but_not_closing_it() -> None:
    """After the watch is exhausted, closing it is fine (no violation), a question is not; after close,
    a question is not."""
    good = _one_above(ONE)
    s3 = good[-1].state
    exhausted = _event(replace(s3, seq=4, state="exhausted"), "exhausted")
    closed = _event(replace(s3, seq=5, state="closed"), "close")
    assert watch_violations([*good, exhausted, closed]) == []
    asked = _event(replace(s3, seq=5, state="exhausted", instances=2, noisy_threshold=0.6), "open")
    assert "row 5 (open): a question on a exhausted watch" in watch_violations([*good, exhausted, asked])
    after_close = _event(replace(s3, seq=6, state="closed", position=1), "below")
    assert "row 6 (below): a question on a closed watch" in watch_violations([*good, exhausted, closed, after_close])


def test_replay_wants_the_create_row_and_counts_instances_from_zero() -> None:
    """A history cut before its ``create`` row is reported as such, and only as such: the replay's counters
    start empty, so the first instance is counted as the first and a second as the second."""
    good = _one_above(replace(ONE, instances=2, epsilon=100.0))
    s3 = good[-1].state
    second = _event(replace(s3, seq=4, instances=2, noisy_threshold=0.6, base=s3.spent), "open")
    assert watch_violations([*good, second]) == []
    headless = [replace(e, state=replace(e.state, seq=e.state.seq - 1)) for e in [*good[1:], second]]
    assert watch_violations(headless) == ["row 1 (open): the history does not begin with the watch's create row"]


def test_replay_allows_a_new_watch_only_over_a_closed_one() -> None:
    """A name may be reused once its watch is closed (no violation); a ``create`` over an active watch is reported."""
    good = _one_above(ONE)
    s3 = good[-1].state
    closed = _event(replace(s3, seq=4, state="closed"), "close")
    again = _event(replace(_created(ONE), seq=5), "create")
    assert watch_violations([*good, closed, again]) == []
    over = _event(replace(_created(ONE), seq=4), "create")
    assert watch_violations([*good, over]) == ["row 4 (create): created over a watch that was active"]


def test_store_reads_back_the_time_written(keeper: Engine, store_dsn: str, database: str) -> None:
    """The row's time comes back as the UTC instant written (to the column's microsecond), time-zone aware."""
    engine = Engine(store_dsn, database=database)
    engine.command(f"CREATE DATABASE IF NOT EXISTS `{database}`")
    store = WatchStore(engine)
    written = store.append("ana", new_watch(ONE, "rid"), "create")
    back = store.latest("ana", "w")
    assert back is not None and back.time.tzinfo is not None
    assert back.time == written.time
    assert [e.state.time for e in store.history("ana", "w")] == [written.time]
    engine.close()


def test_replay_reports_an_instance_opened_with_exactly_no_room() -> None:
    """B9's check is strict (spent + ε_max < ε): with ε exactly ε_max no instance may open, and a history
    that opens one is reported."""
    exact = replace(ONE, epsilon=ONE.epsilon_max)
    s1 = _created(exact)
    assert not s1.can_open()
    s2 = replace(s1, seq=2, instances=1, noisy_threshold=0.6)
    found = watch_violations([_event(s1, "create"), _event(s2, "open")])
    assert len(found) == 1 and "≥ ε" in found[0], found
