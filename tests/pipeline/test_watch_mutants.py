"""Targeted checks of dpch.pipeline.watch that the mutation run (docs/mutation.md, "Watches and top-k
(issue 16)") showed no other test made: what is refused (HAVING, an explicit instance count below 1, a
sensitivity above the watch's), the default σ, the values each row and release carries (the answer
recorded, the position after a ⊤, the exhausted note, the elapsed time) and that the reservation is
read from the ledger once. Real chdb, fixed seeds; the data sit far from the threshold as in
tests/pipeline/test_watch.py (each answer wrong with probability < 4e-6)."""

from __future__ import annotations

import time
from dataclasses import replace

import pytest

import dpch
from dpch.accounting.watches import DEFAULT_INSTANCES, WatchParams, epsilon_max_at
from dpch.errors import QueryRejected
from dpch.pipeline.watch import Question, check_question
from dpch.sql.settings import QueryOptions
from tests.helpers import make_table, refused_uncharged
from tests.pipeline import test_watch as base
from tests.pipeline.test_watch import HIGH, LOW, SIGMA, THRESHOLD, UPPER, ask, create, history, question

open_session = base.open_session  # the same table and analyst as tests/pipeline/test_watch.py


@pytest.fixture
def session(open_session) -> dpch.Session:
    return open_session()


def test_having_is_refused_and_leaves_the_watch_as_it_was(session: dpch.Session) -> None:
    create(session, instances=4)
    rows = len(history(session))
    error = refused_uncharged(session, "SELECT count() FROM signups HAVING count() > 5 SETTINGS dp_watch = 'w'")
    assert "dp_watch takes no HAVING" in error.message
    assert len(history(session)) == rows and session.watch_state("w").instances == 0


def test_an_explicit_instance_count_below_one_is_refused_as_such(session: dpch.Session) -> None:
    """--instances 0 or -1 is the analyst's mistake, said as such (not blamed on σ), before anything is reserved."""
    for bad in (0, -1):
        with pytest.raises(QueryRejected) as info:
            create(session, instances=bad)
        assert f"instances must be at least 1, got {bad}" in info.value.message
    assert session.budget().reserved.epsilon == 0.0 and session.watches() == []


def test_default_sigma_fits_ten_instances(session: dpch.Session) -> None:
    """Without σ: the smallest σ with which 10 instances each fit ε/10 at δ/10 (to the search's 1e-6;
    checked 0.1 % below)."""
    state = session.watch_create("d", epsilon=1.0, delta=1e-7, threshold=THRESHOLD, upper=UPPER, tables="signups",
                                 instances=4)
    sigma, n = state.params.sigma, 10
    assert DEFAULT_INSTANCES == n
    assert n * epsilon_max_at(THRESHOLD, UPPER, 1.0, sigma, 1e-7 / n) <= 1.0
    assert n * epsilon_max_at(THRESHOLD, UPPER, 1.0, sigma * 0.999, 1e-7 / n) > 1.0


def test_a_sensitivity_above_the_watchs_is_refused_within_rounding_only() -> None:
    """check_question's tolerance is 1e-12 relative (rounding of a derived sensitivity): Δ(1 + 1e-12) is
    accepted, Δ(1 + 1e-9) refused."""
    params = WatchParams("w", THRESHOLD, UPPER, 2.0, SIGMA, 1.0, 1e-7, 4, ("db.signups",))
    opts = QueryOptions()
    check_question(Question("w", "count()", "m", 2.0 * (1 + 1e-12)), params, opts, ("db.signups",))
    with pytest.raises(QueryRejected) as info:
        check_question(Question("w", "count()", "m", 2.0 * (1 + 1e-9)), params, opts, ("db.signups",))
    assert "above watch w's 2" in info.value.message


def test_rows_record_the_answers_and_a_halted_instance_has_position_zero(session: dpch.Session) -> None:
    """Each row's ``answer`` is what was returned; after a ⊤ no instance is open and the position is 0
    (after a ⊥ it is the number of questions asked of the open instance)."""
    create(session, instances=4)
    assert ask(session, LOW) == "below"
    assert session.watch_state("w").position == 1
    assert ask(session, HIGH) == "above"
    events = history(session)
    assert [(e.event, e.answer) for e in events] == [("create", ""), ("open", ""), ("below", "below"),
                                                     ("above", "above")]
    assert [e.state.position for e in events] == [0, 0, 1, 0]
    state = session.watch_state("w")
    assert not state.open and state.position == 0


def test_the_reservation_is_read_from_the_ledger_once(session: dpch.Session, monkeypatch) -> None:
    """The ledger's entries are read on the first question only (O(history) each time otherwise)."""
    create(session, instances=4)
    ledger = session.accountant.ledger
    reads: list[str] = []
    entries = ledger.entries

    def counting(analyst: str, *args, **kwargs):
        reads.append(analyst)
        return entries(analyst, *args, **kwargs)

    monkeypatch.setattr(ledger, "entries", counting)
    assert [ask(session, LOW) for _ in range(3)] == ["below"] * 3
    assert reads == [session.analyst]


def test_the_exhausting_answer_says_so(session: dpch.Session) -> None:
    """A watch whose ε fits one instance: its ⊤ is released with the note that it is now exhausted; a ⊥
    before it is not."""
    session.watch_create("one", epsilon=0.3, delta=1e-7, threshold=THRESHOLD, upper=UPPER, tables="signups",
                         sigma=SIGMA, instances=1)
    below = session.query(question(LOW, "one"))
    above = session.query(question(HIGH, "one"))
    assert (below.rows, above.rows) == ([("below",)], [("above",)])
    assert not below.notes[0].endswith("now exhausted")
    assert above.notes[0].endswith("; the watch is now exhausted")
    assert session.watch_state("one").state == "exhausted"


def test_elapsed_time_is_in_milliseconds(session: dpch.Session) -> None:
    """``elapsed_ms`` is the time since ``started`` in ms: started 1000 s ago gives 1 000 000 ms plus the
    answer's own time (under a second, so a factor off by 1e-3 would add ≥ 1000 ms and be seen)."""
    create(session, instances=4)
    plan, opts = session.plan(question(LOW))
    before = time.perf_counter()
    release = session.watch_service.answer(plan, opts, before - 1000.0)
    took_ms = (time.perf_counter() - before) * 1000.0
    assert release.rows == [("below",)]
    assert took_ms < 1000.0
    assert 1_000_000.0 <= release.elapsed_ms <= 1_000_000.0 + took_ms


def test_a_question_costs_its_epsilon_and_no_delta(session: dpch.Session) -> None:
    """A release's cost: a ⊥ costs nothing, a ⊤ at position 2 ε_post(2), and δ 0 either way (the watch's δ
    was reserved at registration)."""
    state = create(session, instances=4)
    below = session.query(question(LOW))
    above = session.query(question(HIGH))
    assert (below.rows, above.rows) == ([("below",)], [("above",)])
    assert (below.cost.epsilon, below.cost.delta) == (0.0, 0.0)
    assert above.cost.epsilon == pytest.approx(state.params.epsilon_post(2), rel=1e-12) and above.cost.delta == 0.0


def test_a_watch_whose_reservation_is_missing_answers_nothing(session: dpch.Session) -> None:
    """A watch whose latest row names a release the ledger does not hold (a damaged store) is refused
    before any instance opens: no threshold drawn, no data read, no row written."""
    state = create(session, instances=4)
    store = session.watch_service.store
    with store.locked(session.analyst, "w"):
        store.append(session.analyst, replace(state, release_id="missing"), "create")
    rows = len(history(session))
    error = refused_uncharged(session, question(HIGH))
    assert "watch w has no reservation in the ledger" in error.message
    assert len(history(session)) == rows and session.watch_state("w").instances == 0


def test_values_are_normalised_by_the_ranges_width(open_session) -> None:
    """On [500, 1500] a count of 1250 is (1250 − 500)/1000 = 0.75 of the range, 0.25 above the threshold's 0.5:
    'above' (10 standard deviations of the comparison noise 2σ/w = 0.024 away; dividing by the wrong width,
    e.g. upper + lower = 2000, would put it 5 below)."""
    session = open_session(default_budget=dpch.Budget(20.0, 1e-6))
    session.watch_create("n", epsilon=10.0, delta=1e-7, threshold=THRESHOLD, lower=500.0, upper=1500.0,
                         tables="signups", sigma=12.0, instances=1)
    sql = f"SELECT count() FROM signups WHERE uid < 1250 SETTINGS dp_watch = 'n', dp_threshold = {THRESHOLD:g}"
    assert session.query(sql).rows == [("above",)]


def test_settings_a_watch_cannot_take_are_refused_in_words(session: dpch.Session) -> None:
    """An empty watch name, a threshold that is not a number, and dp_accuracy beside a watch: each refused
    with its own reason, before anything runs."""
    create(session, instances=4)
    for sql, words in (
        ("SELECT count() FROM signups SETTINGS dp_watch = ''", "dp_watch must name a watch"),
        ("SELECT count() FROM signups SETTINGS dp_watch = 'w', dp_threshold = 'many'", "dp_threshold must be a number"),
        ("SELECT count() FROM signups SETTINGS dp_watch = 'w', dp_accuracy = 10",
         "a watched query cannot also set dp_accuracy"),
    ):
        assert words in refused_uncharged(session, sql).message, sql
    assert session.watch_state("w").instances == 0


def test_create_defaults_and_refusals(session: dpch.Session) -> None:
    """Without ``lower`` the range starts at 0; without ``sensitivity`` it is the largest contribution cap of
    the tables read (here 1 and 3); a public table is refused."""
    make_table(session, "uid UInt32", [(1,)], ["uid"], name="capped",
               comment="dp: privacy_unit=uid, max_rows_per_unit=3")
    make_table(session, "k String", [("a",)], ["k"], name="open_data", comment="dp: public")
    state = session.watch_service.create("d", epsilon=1.0, delta=1e-7, threshold=THRESHOLD, upper=UPPER,
                                         tables=("signups", "capped"), table_policy=session.table_policy,
                                         sigma=SIGMA, instances=4)
    assert (state.params.lower, state.params.sensitivity) == (0.0, 3.0)
    with pytest.raises(QueryRejected) as info:
        session.watch_create("p", epsilon=1.0, delta=1e-7, threshold=THRESHOLD, upper=UPPER, tables="open_data",
                             sigma=SIGMA, instances=4)
    assert "watch p: table open_data is not private" in info.value.message


def test_closing_with_no_instance_open_charges_nothing_more(open_session) -> None:
    """After a ⊤ no instance is open: the ``close`` row charges 0 (ε_max only for an open one), keeps position 0,
    and the reservation settles to ε_post(1) under the ex-post filter; closing again is refused."""
    session = open_session(filter="ex_post")
    create(session, instances=4)
    assert ask(session, HIGH) == "above"
    state = session.watch_close("w")
    close = history(session)[-1]
    assert (close.event, close.charged, close.state.position, close.state.state) == ("close", 0.0, 0, "closed")
    assert state.spent == pytest.approx(state.params.epsilon_post(1), rel=1e-12)
    assert session.budget().spent.epsilon == pytest.approx(state.params.epsilon_post(1), rel=1e-9)
    with pytest.raises(QueryRejected) as info:
        session.watch_close("w")
    assert "watch w is already closed" in info.value.message
    assert len(history(session)) == 4


def test_explain_prices_the_next_question(session: dpch.Session) -> None:
    """EXPLAIN says what an 'above' would cost now: ε_post(1) with no instance open, ε_post(2) after one ⊥ of
    the open instance (and changes nothing)."""
    state = create(session, instances=4)
    p = state.params
    for t in (1, 2):
        notes = " ".join(session.explain(question(HIGH)).notes)
        assert f"(question {t} of its instance) costs the watch ε {p.epsilon_post(t):.4g}" in notes, notes
        if t == 1:
            assert ask(session, LOW) == "below"
    assert session.watch_state("w").position == 1


def test_an_active_watch_without_room_refuses_before_opening(session: dpch.Session) -> None:
    """B9's check before an instance, on its own: a watch whose latest row is still active but whose spent
    leaves no room for ε_max (written so by hand here; the pipeline marks it exhausted at the ⊤ that fills
    it) is refused, marked exhausted, and no threshold is drawn nor data read."""
    state = create(session, instances=4)
    store = session.watch_service.store
    full = state.params.epsilon - 0.5 * state.params.epsilon_max
    with store.locked(session.analyst, "w"):
        store.append(session.analyst, replace(state, spent=full, base=full), "above")
    rows = len(history(session))
    error = refused_uncharged(session, question(HIGH))
    assert "another instance would not fit" in error.message
    events = history(session)
    assert len(events) == rows + 1 and events[-1].event == "exhausted"
    assert events[-1].state.instances == 0 and not events[-1].state.open
    assert session.watch_state("w").state == "exhausted"
