"""Threshold watches end to end on real chdb (dpch.pipeline.watch): answers against ClickHouse's exact
counts, what is charged (ledger and the watch's rows), refusals that charge nothing, and adversarial
interleavings — many watches, concurrent callers, a restart mid-instance — each with a deliberately
broken variant the same check catches (negative controls).

Seeds are fixed. The value tests put the exact count ≥ 4.5 standard deviations of the comparison noise
(√(σ_X² + σ_Z²) = 2σ) from the threshold: each answer is wrong with probability < 4e-6."""

from __future__ import annotations

import datetime as dt
import json
import re
import threading
from dataclasses import replace

import pytest

import dpch
from dpch.accounting.filters import FILTERS, make_filter
from dpch.accounting.watches import WatchState, WatchStore, watch_violations
from dpch.errors import AnalystLocked, BudgetExceeded, QueryFailedAfterCharge, QueryRejected
from dpch.mechanisms.selection_bounds import at_epsilon_post
from dpch.pipeline.watch import Watches
from tests.helpers import inject_totality_gap, ledger_rows, make_table, refused_uncharged

HIGH, LOW = dt.date(2026, 1, 1), dt.date(2026, 1, 2)  # 3000 and 100 signups
THRESHOLD, UPPER, SIGMA = 1000.0, 5000.0, 100.0


@pytest.fixture
def open_session(connect):
    """Sessions of one analyst on one database holding ``signups`` (one row per user)."""
    made: list[dpch.Session] = []

    def _open(seed: int = 1, **kwargs) -> dpch.Session:
        kwargs.setdefault("default_budget", dpch.Budget(3.0, 1e-6))
        s = connect(analyst="watcher", seed=seed, **kwargs)
        if not made:
            rows = [(i, HIGH) for i in range(3000)] + [(3000 + i, LOW) for i in range(100)]
            make_table(s, "uid UInt32, day Date, spend Float64 COMMENT 'dp: bounds=[0, 10]'",
                       [(u, d, 1.0) for u, d in rows], ["uid", "day", "spend"], name="signups",
                       comment="dp: privacy_unit=uid, max_rows_per_unit=1")
            make_table(s, "uid UInt32", [(1,)], ["uid"], name="other",
                       comment="dp: privacy_unit=uid, max_rows_per_unit=1")
        made.append(s)
        return s

    return _open


@pytest.fixture
def session(open_session):
    return open_session()


def question(day: dt.date, watch: str = "w", threshold: float | None = THRESHOLD) -> str:
    t = f", dp_threshold = {threshold:g}" if threshold is not None else ""
    return f"SELECT count() FROM signups WHERE day = '{day}' SETTINGS dp_watch = '{watch}'{t}"


def ask(session: dpch.Session, day: dt.date, watch: str = "w") -> str:
    release = session.query(question(day, watch))
    assert release.columns == ["count()"] and len(release.rows) == 1
    return release.rows[0][0]


def create(session: dpch.Session, name: str = "w", **kwargs) -> WatchState:
    kwargs.setdefault("epsilon", 1.0)
    kwargs.setdefault("delta", 1e-7)
    kwargs.setdefault("sigma", SIGMA)
    return session.watch_create(name, threshold=THRESHOLD, upper=UPPER, tables="signups", **kwargs)


def history(session: dpch.Session, name: str = "w"):
    return session.watch_service.store.history(session.analyst, name)


def exact_count(session: dpch.Session, day: dt.date) -> int:
    return session.engine.query_rows(f"SELECT count() FROM {session.engine.table('signups')} WHERE day = '{day}'")[0][0]


# -- values and charges --------------------------------------------------------------------------------


def test_answers_above_far_above_and_below_far_below(session) -> None:
    high, low = exact_count(session, HIGH), exact_count(session, LOW)
    assert high - THRESHOLD >= 10 * 2 * SIGMA and THRESHOLD - low >= 4.5 * 2 * SIGMA
    create(session, instances=4)
    answers = [(ask(session, LOW), ask(session, HIGH)) for _ in range(3)]
    assert answers == [("below", "above")] * 3
    state = session.watch_state("w")
    assert state.instances == 3 and not state.open


def test_every_charge_is_explained(session) -> None:
    """Ledger: one reservation of the watch's (ε, δ); the watch's rows: each ⊤ charged ε_post(t) as
    selection_bounds computes it on the normalised scale; Σ charges = spent; the replay finds nothing."""
    before = ledger_rows(session)
    create(session, instances=4)
    assert ledger_rows(session) == before + 1
    status = session.budget()
    assert status.reserved.epsilon == pytest.approx(1.0) and status.reserved.delta == pytest.approx(1e-7)
    positions = []
    for n_below in (0, 1, 3):
        for _ in range(n_below):
            assert ask(session, LOW) == "below"
        assert ask(session, HIGH) == "above"
        positions.append(n_below + 1)
    assert ledger_rows(session) == before + 1, "questions charge the analyst's filter nothing more"
    events = history(session)
    charged = [e.charged for e in events if e.event == "above"]
    sx = SIGMA / UPPER
    expected = [at_epsilon_post(t, 1 / UPPER, sx, 3**0.5 * sx, THRESHOLD / UPPER, 0.0, 1.0) for t in positions]
    assert charged == pytest.approx(expected, rel=1e-12)
    assert sum(charged) == pytest.approx(session.watch_state("w").spent, rel=1e-12)
    assert [e.event for e in events].count("open") == 3
    assert watch_violations(events) == []
    assert session.budget().spent.epsilon + session.budget().reserved.epsilon <= 3.0


def test_a_narrow_public_range(session) -> None:
    """Values clamped to [lower, upper] = [500, 1500] and normalised by its width: the answers are the
    same, a ⊤ is charged ε_post of the shifted instance (ρ − lower)/w, and it costs less than on [0, 5000]."""
    narrow = session.watch_create("n", epsilon=1.0, delta=1e-7, threshold=THRESHOLD, lower=500.0, upper=1500.0,
                                  tables="signups", sigma=SIGMA, instances=4)
    wide = create(session, instances=4)
    assert (ask(session, LOW, "n"), ask(session, HIGH, "n")) == ("below", "above")
    sx = SIGMA / 1000.0
    want = at_epsilon_post(2, 1 / 1000.0, sx, 3**0.5 * sx, 0.5, 0.0, 1.0)
    assert [e.charged for e in history(session, "n") if e.event == "above"] == pytest.approx([want], rel=1e-12)
    assert narrow.params.epsilon_post(2) < wide.params.epsilon_post(2)
    assert narrow.params.epsilon_max < wide.params.epsilon_max
    assert watch_violations(history(session, "n")) == []


@pytest.mark.parametrize("flt, refunded", [("basic", False), ("ex_post", True), ("mixed", True)])
def test_close_settles_within_the_reservation(open_session, flt: str, refunded: bool) -> None:
    """Closing settles the reservation to E < ε under a filter that charges realized ex-post costs,
    and to the worst case (ε, δ) under one that does not; never above the reservation."""
    session = open_session(filter=flt)
    create(session, instances=4)
    assert ask(session, HIGH) == "above"
    assert ask(session, LOW) == "below"  # the second instance is still open at close
    state = session.watch_close("w")
    realized = state.realized_epsilon()
    assert state.state == "closed" and realized < 1.0
    assert realized == pytest.approx(state.params.epsilon_post(1) + state.params.epsilon_max, rel=1e-12)
    status = session.budget()
    assert status.reserved.epsilon == 0.0
    assert status.spent.epsilon == pytest.approx(realized if refunded else 1.0, rel=1e-9)
    assert status.spent.delta == pytest.approx(1e-7)
    assert watch_violations(history(session)) == []
    entry = status.recent[-1]
    assert entry.mechanism == "watch" and entry.status == "charged" and entry.worst.epsilon == 1.0


#: per filter: the watch's reservation (ε 1, δ 1e-7) in the filter's units — ρ where its budget is in ρ.
#: ``zcdp``/``zcdp_bm`` count a release without a ρ of its own as δ-approximate ε²/2-zCDP (Rogers et al.
#: 2023, Lemma 2.3): ρ 0.5; ``mixed`` routes an ex-post release to its ex-post side (ε, no ρ); the
#: others compose no ρ. ``pure`` and ``advanced`` (pure ε rounds) refuse the watch, whose δ is > 0.
RESERVED_RHO: dict[str, float | None] = {"basic": None, "ex_post": None, "pure_ex_post": None,
                                         "zcdp": 0.5, "zcdp_bm": 0.5, "mixed": 0.0}


@pytest.mark.parametrize("flt", sorted(FILTERS))
def test_an_open_watch_shows_reserved_in_the_filters_units(open_session, flt: str) -> None:
    """Issue 24 item 6: under the zCDP filters an open watch's reservation showed ρ 0 in ``budget()``,
    while admission counted it at ε²/2. The status now shows what admission counts, per filter: the
    remaining budget is the budget less exactly the reserved amount, in the filter's units."""
    session = open_session(filter=flt, default_budget=dpch.Budget(10.0, 1e-5))
    if flt in ("pure", "advanced"):
        with pytest.raises(BudgetExceeded, match="δ"):
            create(session)
        return
    create(session)
    status = session.budget()
    assert (status.reserved.epsilon, status.reserved.delta) == (1.0, pytest.approx(1e-7))
    assert status.reserved.rho == (None if RESERVED_RHO[flt] is None else pytest.approx(RESERVED_RHO[flt]))
    if flt in ("zcdp", "zcdp_bm"):
        rho_budget = make_filter(flt, status.budget).remaining([]).rho
        assert status.remaining.rho == pytest.approx(rho_budget - status.reserved.rho, rel=1e-12)
        assert status.as_dict()["reserved"]["rho"] == pytest.approx(0.5)
    elif flt != "mixed":  # the ε filters: the budget less the reserved ε
        assert status.remaining.epsilon == pytest.approx(10.0 - status.reserved.epsilon, rel=1e-12)
    assert status.spent.epsilon == 0.0


def test_a_watch_never_asked_is_voided(session) -> None:
    create(session)
    session.watch_close("w")
    assert session.budget().spent.epsilon == 0.0 and session.budget().reserved.epsilon == 0.0


# -- refusals charge nothing ----------------------------------------------------------------------------


def _unchanged(session: dpch.Session, sql: str, words: str, name: str = "w") -> None:
    rows = len(history(session, name)) if session.watch_service.store.latest(session.analyst, name) else 0
    error = refused_uncharged(session, sql)
    assert words in error.message, error.message
    if rows:
        assert len(history(session, name)) == rows, "a refused question leaves the watch as it was"


def test_refusals_before_anything_runs(session) -> None:
    create(session, instances=4)
    base = "FROM signups SETTINGS dp_watch = 'w'"
    _unchanged(session, question(HIGH, threshold=999), "threshold 1000, not 999")
    _unchanged(session, f"SELECT count(), sum(spend) {base}", "2 columns")
    _unchanged(session, "SELECT day, count() FROM signups GROUP BY day SETTINGS dp_watch = 'w'", "GROUP BY")
    _unchanged(session, f"SELECT avg(spend) {base}", "count or a sum")
    _unchanged(session, f"SELECT count() * 2 {base}", "computes with it")
    _unchanged(session, "SELECT count() FROM other SETTINGS dp_watch = 'w'", "may read")
    _unchanged(session, "SELECT count() FROM signups SETTINGS dp_watch = 'nope'", "no watch named", name="nope")
    _unchanged(session, "SELECT count() FROM signups SETTINGS dp_threshold = 1000", "name the watch too")
    assert session.watch_state("w").instances == 0
    assert session.explain(question(HIGH)).admissible  # EXPLAIN spends nothing
    assert session.watch_state("w").instances == 0


def test_closed_and_exhausted_watches_refuse(session) -> None:
    """A watch whose ε fits one instance: after its ⊤ it is exhausted (said at once), and every further
    question is refused, free; once closed too."""
    one = session.watch_create("one", epsilon=0.3, delta=1e-7, threshold=THRESHOLD, upper=UPPER, tables="signups",
                               sigma=SIGMA, instances=1)
    assert ask(session, HIGH, "one") == "above"
    state = session.watch_state("one")
    assert state.state == "exhausted" and not state.can_open()
    _unchanged(session, question(HIGH, "one"), "exhausted", name="one")
    _unchanged(session, question(LOW, "one"), "exhausted", name="one")
    session.watch_close("one")
    _unchanged(session, question(LOW, "one"), "closed", name="one")
    assert one.params.epsilon_max < 0.3 < 2 * one.params.epsilon_max


# -- adversarial interleavings -------------------------------------------------------------------------------


def test_many_watches_never_overspend_the_filter(session) -> None:
    """Each watch reserves its whole (ε, δ) at registration: the filter refuses the one that does not
    fit (nothing written), and reserved + spent never exceeds the budget."""
    for i in range(5):
        create(session, f"w{i}", epsilon=0.55)
    before = ledger_rows(session)
    with pytest.raises(BudgetExceeded):
        create(session, "w5", epsilon=0.55)
    assert ledger_rows(session) == before
    assert session.watch_service.store.latest(session.analyst, "w5") is None
    for i in range(5):
        ask(session, HIGH, f"w{i}")
        ask(session, LOW, f"w{(i + 1) % 5}")
    status = session.budget()
    assert status.spent.epsilon + status.reserved.epsilon <= 3.0 * (1 + 1e-9)
    for i in range(5):
        assert watch_violations(history(session, f"w{i}")) == []


def test_concurrent_registrations(open_session) -> None:
    """Six threads register the same name (one wins; the others are refused before anything is reserved)
    and six register different names at ε 0.7 on a budget of 3 (four fit): the filter is never overspent
    and every reservation belongs to a watch."""
    sessions = [open_session(seed=s) for s in range(3)]
    outcomes: list[str] = []

    def register(k: int, name: str) -> None:
        try:
            create(sessions[k % 3], name, epsilon=0.7)
            outcomes.append("ok")
        except QueryRejected as exc:
            outcomes.append("exists" if "already exists" in exc.message else exc.message)
        except BudgetExceeded:
            outcomes.append("budget")

    for names in (["same"] * 6, [f"n{k}" for k in range(6)]):
        threads = [threading.Thread(target=register, args=(k, n)) for k, n in enumerate(names)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert sorted(outcomes[:6]) == ["exists"] * 5 + ["ok"]
    assert sorted(outcomes[6:]) == ["budget"] * 3 + ["ok"] * 3
    status = sessions[0].budget()
    assert status.reserved.epsilon == pytest.approx(0.7 * 4) and status.reserved.epsilon <= 3.0
    watches = sessions[1].watches()
    assert len(watches) == 4 == len({w.release_id for w in watches}) == status.releases


def _hammer(sessions: list[dpch.Session], names: list[str], per_thread: int) -> tuple[list[Exception], int]:
    """Six threads asking ``per_thread`` questions each; the errors other than "exhausted", and the
    number of answers returned."""
    errors: list[Exception] = []
    answers: list[str] = []

    def run(k: int) -> None:
        s = sessions[k % len(sessions)]
        for j in range(per_thread):
            try:
                answers.append(ask(s, HIGH if (j + k) % 3 == 0 else LOW, names[(j + k) % len(names)]))
            except QueryRejected as exc:  # exhausted: refused, free
                if "exhausted" not in exc.message:
                    errors.append(exc)
            except Exception as exc:  # noqa: BLE001 — reported to the test thread
                errors.append(exc)

    threads = [threading.Thread(target=run, args=(k,)) for k in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return errors, len(answers)


def test_concurrent_callers_on_one_and_several_watches(open_session) -> None:
    """Six threads, three sessions (own noise seeds), two watches: every answer returned is a row of its
    watch, rows are numbered without gaps (no two writers from one state), the replay finds nothing,
    Σδ_j ≤ δ, and the filter is never overspent."""
    sessions = [open_session(seed=s) for s in (1, 2, 3)]
    create(sessions[0], "a", instances=6)
    create(sessions[0], "b", instances=6)
    errors, returned = _hammer(sessions, ["a", "b"], per_thread=5)
    assert errors == []
    rows = 0
    for name in ("a", "b"):
        events = history(sessions[0], name)
        assert watch_violations(events) == []
        state = sessions[1].watch_state(name)
        assert state.delta_used <= state.params.delta * (1 + 1e-12)
        rows += sum(e.event in ("above", "below") for e in events)
    assert rows == returned > 0
    status = sessions[2].budget()
    assert status.spent.epsilon + status.reserved.epsilon <= 3.0 * (1 + 1e-9)


class _UnlockedStore(WatchStore):
    """Broken on purpose: no per-watch lock, and every read waits until two callers have read, so two
    questions always start from the same state (a deterministic race)."""

    def __init__(self, engine, barrier: threading.Barrier) -> None:
        super().__init__(engine)
        self.barrier = barrier

    def locked(self, analyst: str, name: str):  # type: ignore[override]
        import contextlib

        return contextlib.nullcontext()

    def latest(self, analyst: str, name: str):  # type: ignore[override]
        state = super().latest(analyst, name)
        self.barrier.wait(timeout=30)
        return state


def test_negative_control_without_the_lock_two_callers_race(open_session) -> None:
    """Without the per-watch lock two callers answer from one state: the replay reports the lost update."""
    sessions = [open_session(seed=s) for s in (1, 2)]
    create(sessions[0], "r", instances=6)
    ask(sessions[0], LOW, "r")  # an instance is open: each racing question only appends its answer
    barrier = threading.Barrier(2)
    for s in sessions:
        s.watch_service = Watches(s.context, store=_UnlockedStore(s.engine, barrier))
    threads = [threading.Thread(target=ask, args=(s, LOW, "r")) for s in sessions]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert any("seq" in v for v in watch_violations(history(sessions[0], "r")))


def test_restart_mid_instance_continues_the_same_threshold(open_session) -> None:
    """A new session on the same store (its filter state dropped, as after a restart) continues the open
    instance: same noisy threshold, position counting on, no new instance."""
    first = open_session(seed=1)
    create(first, instances=4)
    assert ask(first, LOW) == "below"
    before = first.watch_state("w")
    assert before.open and before.position == 1
    dpch.accounting.accountant.forget_cached_state(first.engine)
    second = open_session(seed=99)
    after = second.watch_state("w")
    assert after.noisy_threshold == before.noisy_threshold and after.position == 1
    assert ask(second, LOW) == "below"
    now = second.watch_state("w")
    assert now.noisy_threshold == before.noisy_threshold and now.position == 2 and now.instances == 1
    assert watch_violations(history(second)) == []


class _ForgetfulStore(WatchStore):
    """Broken on purpose: loses the open instance's noisy threshold when read (as if it were kept in
    memory only), so a restarted session draws a new one."""

    def latest(self, analyst: str, name: str):  # type: ignore[override]
        state = super().latest(analyst, name)
        return None if state is None else replace(state, noisy_threshold=None, position=0)


def test_negative_control_redrawing_the_threshold_on_restart_is_caught(open_session) -> None:
    first = open_session(seed=1)
    create(first, instances=4)
    ask(first, LOW)
    rho = first.watch_state("w").noisy_threshold
    second = open_session(seed=99)
    second.watch_service = Watches(second.context, store=_ForgetfulStore(second.engine))
    ask(second, LOW)
    assert WatchStore(second.engine).latest(second.analyst, "w").noisy_threshold != rho
    assert any("was open" in v for v in watch_violations(history(first)))


class _UncheckedState(WatchState):
    """Broken on purpose: opens an instance without B9's check."""

    def can_open(self) -> bool:
        return True


class _UncheckedStore(WatchStore):
    def latest(self, analyst: str, name: str):  # type: ignore[override]
        state = super().latest(analyst, name)
        return None if state is None else _UncheckedState(**{f: getattr(state, f) for f in state.__dataclass_fields__})


@pytest.mark.parametrize("broken", [False, True])
@pytest.mark.parametrize("epsilon, instances, fit, words", [(0.3, 10, 4, "≥ ε"), (0.5, 2, 2, "> δ")])
def test_negative_control_opening_without_the_b9_check(session, broken: bool, epsilon: float, instances: int,
                                                       fit: int, words: str) -> None:
    """⊤ after ⊤ (each at position 1, ε_post(1) ≈ 0.026; ε_max ≈ 0.22): the real watch refuses once
    spent + ε_max would reach ε (first case: after 4) or Σδ_j would pass δ (second: after 2); a variant
    without the check keeps answering, and the replay reports the instance opened without room."""
    create(session, epsilon=epsilon, instances=instances)
    if broken:
        session.watch_service = Watches(session.context, store=_UncheckedStore(session.engine))
    answered = 0
    for _ in range(6):
        try:
            assert ask(session, HIGH) == "above"
            answered += 1
        except QueryRejected as exc:
            assert "exhausted" in exc.message
    found = watch_violations(history(session))
    if broken:
        assert answered == 6 and any(words in v for v in found), found
    else:
        assert answered == fit and found == []
        assert session.watch_state("w").realized_epsilon() < epsilon


def test_a_failure_after_the_data_is_read_trips(session, monkeypatch) -> None:
    """Rule 5: an error inside ClickHouse after the watch reserved its budget locks the analyst (the
    reservation stays counted at its worst case); later questions are refused."""
    create(session, instances=4)
    inject_totality_gap(monkeypatch)
    with pytest.raises(QueryFailedAfterCharge):
        ask(session, HIGH)
    monkeypatch.undo()
    with pytest.raises(AnalystLocked):
        ask(session, LOW)
    assert session.budget().spent.epsilon + session.budget().reserved.epsilon == pytest.approx(1.0)


# -- views: the CLI, `dpch budget`, and the noisy threshold never shown ----------------------------------------


def _cli(store_dsn: str, database: str, *args: str) -> str:
    from click.testing import CliRunner

    from dpch.cli.main import cli

    result = CliRunner().invoke(cli, ["--dsn", store_dsn, "--database", database, "--analyst", "watcher", *args])
    assert result.exit_code == 0, result.output
    return result.output


def test_cli_create_list_budget_close(session, store_dsn: str, database: str) -> None:
    """`dpch watch create|list|close` and `dpch budget` (text and JSON) on the store: the watch's
    threshold, spent of ε, δ used, open instance and state — and nowhere its noisy threshold."""
    _cli(store_dsn, database, "budget", "set", "--analyst", "watcher", "--epsilon", "3", "--delta", "1e-6")
    out = _cli(store_dsn, database, "watch", "create", "cli", "--epsilon", "1", "--threshold", "1000",
               "--lower", "500", "--upper", "1500", "--table", "signups", "--sigma", "100")
    assert "watch cli: threshold 1000 on [500, 1500]" in out and "active" in out
    assert ask(session, LOW, "cli") == "below"
    state = session.watch_state("cli")
    rho = state.noisy_threshold
    assert rho is not None
    listed = _cli(store_dsn, database, "watch", "list")
    budget = _cli(store_dsn, database, "budget")
    data = json.loads(_cli(store_dsn, database, "budget", "--json"))
    assert "cli" in listed and "instance 1 at question 1" in budget and "active" in budget
    assert data["watches"][0]["position"] == 1 and data["watches"][0]["spent"] == pytest.approx(state.charged_epsilon)
    explained = session.explain(question(LOW, "cli")).describe()
    shown = [listed, budget, str(data), explained, repr(state), *session.query(question(LOW, "cli")).notes]
    # compared as whole numbers in the text, not as substrings (a time such as 23:54:30.538369 holds "0.538"),
    # and leaving out the watch's public numbers (a noisy threshold near 1000 rounds to the threshold itself)
    public = {"1000", "500", "1500", "1", "100"}
    secret = {f"{rho:.3g}", f"{rho:.4g}", repr(rho), f"{rho * 1000 + 500:.4g}", f"{rho * 1000 + 500:.0f}"} - public
    for text in shown:
        numbers = set(re.findall(r"\d+(?:\.\d+)?(?:e[-+]?\d+)?", text))
        assert not numbers & secret, text
    with pytest.raises(QueryRejected, match="no privacy policy"):
        session.query("SELECT sum(noisy_threshold) FROM dpch_watches")
    closed = _cli(store_dsn, database, "watch", "close", "cli")
    assert "closed" in closed


# -- a real restart: the process is killed mid-instance --------------------------------------------------------

_CHILD = """
import datetime as dt, sys, time
import dpch
s = dpch.connect("chdb://" + sys.argv[1], database="w", analyst="watcher", default_budget=dpch.Budget(3.0, 1e-6),
                 seed=int(sys.argv[2]))
if sys.argv[3] == "first":
    s.engine.command("CREATE TABLE w.signups (uid UInt32, day Date) ENGINE = MergeTree ORDER BY uid "
                     "COMMENT 'dp: privacy_unit=uid, max_rows_per_unit=1'")
    s.engine.insert("signups", [(i, dt.date(2026, 1, 2)) for i in range(100)], ["uid", "day"])
    s.policy.reload()
    s.watch_create("w", epsilon=1.0, delta=1e-7, threshold=1000, upper=5000, tables="signups", sigma=100.0,
                   instances=4)
sql = "SELECT count() FROM signups WHERE day = '2026-01-02' SETTINGS dp_watch = 'w'"
answer = s.query(sql).rows[0][0]
state = s.watch_state("w")
print(answer, state.instances, state.position, repr(state.noisy_threshold), flush=True)
if sys.argv[3] == "first":
    time.sleep(120)  # killed here, mid-instance
"""


def test_killed_mid_instance_the_next_process_continues(tmp_path) -> None:
    """SIGKILL after a 'below' (an instance open at question 1): a new process on the store continues that
    instance with the same noisy threshold (question 2), and the rows replay cleanly."""
    import signal
    import subprocess
    import sys

    from tests.helpers import child_env

    store = str(tmp_path / "store")
    env = child_env() | {"DPCH_ALLOW_FIXED_SEED": "1"}
    first = subprocess.Popen([sys.executable, "-c", _CHILD, store, "1", "first"], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, env=env)
    try:
        line = first.stdout.readline().split()
        assert line[:3] == ["below", "1", "1"], (line, first.stderr.read() if first.poll() is not None else "")
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait(timeout=30)
    second = subprocess.run([sys.executable, "-c", _CHILD, store, "2", "second"], capture_output=True, text=True,
                            env=env, timeout=120)
    assert second.returncode == 0, second.stderr
    again = second.stdout.split()
    assert again == ["below", "1", "2", line[3]], (line, again)  # same instance, same ρ̂, next question
