"""Threshold watches: register one, ask it ⊤/⊥ questions in SQL, close it (docs/watches.md).

    SELECT count() FROM signups WHERE day = today()
    SETTINGS dp_watch = 'daily_signups', dp_threshold = 1000

answers one row, one column named as the statistic, holding the string ``'above'`` or ``'below'``:
whether the clamped value plus Gaussian noise reached the watch's noisy threshold (Lebensold et al.
2024, Alg 1/3). Nothing else is released — no noisy value (B11 pitfall 3).

The privacy accounting and the durable state are :mod:`dpch.accounting.watches` (its docstring
says why the watch's reservation may be settled to its realized cost). This module is the pipeline
of one question:

plan (as every query) → :func:`question_measure` (a single additive scalar statistic, tables and
sensitivity within the watch's, threshold equal to the watch's: refusals before anything runs, from
the plan and the watch's public parameters only) → under the watch's lock: read the latest state;
refuse if closed or exhausted; if no instance is open, B9's check, then draw ρ̂ and write it
durably (``open``) → run the emitted aggregate (inside the accountant's tripwire: a failure now may
depend on the data) → clamp to [0, upper], compare q/upper + N(0, σ_Z²) with ρ̂ → write the answer
durably (``below``/``above`` with ε_post(t)) → return it.

The watch's whole (ε, δ) was reserved in the analyst's filter at :meth:`Watches.create`, durably and
before any noise is drawn (docs/design.md rule 2); a question charges the filter nothing more.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, replace
from typing import Any

from dpch.accounting.accountant import Accountant, Reservation, qualified_datasets
from dpch.accounting.ledger import LedgerEntry
from dpch.accounting.watches import (
    DEFAULT_INSTANCES,
    WatchMoved,
    WatchParams,
    WatchState,
    WatchStore,
    instances_for,
    new_watch,
    sigma_for,
    validate_params,
)
from dpch.errors import AnalystLocked, QueryRejected
from dpch.mechanisms.selection import AboveThresholdRun
from dpch.pipeline import admit, cost_audit, execute
from dpch.pipeline.context import QueryContext
from dpch.pipeline.report import Explanation, Release
from dpch.policy.model import TablePolicy
from dpch.privacy.cost import ApproxDP, ExPost, PrivacyCost
from dpch.sql import outputs
from dpch.sql.aggregate_kinds import statistic
from dpch.sql.analyze import QueryPlan
from dpch.sql.rewrite import emit_sql
from dpch.sql.settings import QueryOptions

ABOVE, BELOW = "above", "below"
#: the ledger's mechanism name for a watch's reservation
MECHANISM = "watch"
_ADDITIVE = {"count", "sum", "distinct"}


@dataclass(frozen=True)
class Question:
    """A watched query, checked: the measure to compare and the watch it asks."""

    watch: str
    column: str
    measure: str
    sensitivity: float


def question_measure(plan: QueryPlan, opts: QueryOptions) -> Question:
    """The single additive statistic ``plan`` releases, or a refusal in words (from the plan alone)."""
    name = opts.watch
    if name is None:
        raise QueryRejected("dp_threshold is the threshold of a watch: name the watch too",
                            hint="e.g. SETTINGS dp_watch = 'daily_signups', dp_threshold = 1000")
    if not isinstance(name, str) or not name:
        raise QueryRejected(f"dp_watch must name a watch, got {name!r}",
                            hint="e.g. SETTINGS dp_watch = 'daily_signups'")
    if opts.threshold is not None and not (isinstance(opts.threshold, int | float)
                                           and math.isfinite(opts.threshold)):
        raise QueryRejected(f"dp_threshold must be a number, got {opts.threshold!r}",
                            hint="the watch's threshold, e.g. SETTINGS dp_threshold = 1000")
    hint = "ask one count() or sum(...) without GROUP BY, e.g. SELECT count() FROM t WHERE ... SETTINGS dp_watch = 'w'"
    if opts.accuracy_first:
        raise QueryRejected("a watched query cannot also set dp_accuracy / dp_relative_error",
                            hint="drop them: a watch answers only above or below")
    if plan.keys or len(plan.outputs) != 1:
        raise QueryRejected(f"dp_watch answers one scalar statistic; this query has "
                            f"{'a GROUP BY' if plan.keys else f'{len(plan.outputs)} columns'}", hint=hint)
    out = plan.outputs[0]
    stats = tuple(dict.fromkeys(out.stats))
    if len(stats) != 1 or out.expr != outputs.placeholder(stats[0]):
        raise QueryRejected(f"dp_watch compares one statistic as it is; {out.name} computes with it",
                            hint=hint + " (arithmetic on the statistic changes its threshold: change the threshold)")
    stat = plan.stats[stats[0]]
    measures = [m for m in plan.measures if m.name in stat.measures]
    if not statistic(stat).additive or len(measures) != 1 or measures[0].kind not in _ADDITIVE:
        raise QueryRejected(f"dp_watch needs a count or a sum; {out.name} is {stat.kind}",
                            hint=hint + " (an average is two measures: watch its sum, or its count)")
    if plan.having is not None:
        raise QueryRejected("dp_watch takes no HAVING", hint=hint)
    return Question(name, out.name, measures[0].name, measures[0].sensitivity)


def check_question(question: Question, params: WatchParams, opts: QueryOptions, datasets: tuple[str, ...]) -> None:
    """Refuses a question the watch's fixed parameters do not cover (public facts only)."""
    w = params.name
    if opts.threshold is not None and not math.isclose(float(opts.threshold), params.threshold, rel_tol=1e-12):
        raise QueryRejected(f"watch {w} has threshold {params.threshold:g}, not {opts.threshold:g}",
                            hint=f"write dp_threshold = {params.threshold:g} (or leave it out), or create "
                            "another watch for another threshold")
    outside = [d for d in datasets if d not in params.datasets]
    if outside:
        raise QueryRejected(f"watch {w} may read {', '.join(params.datasets)}; this query reads {', '.join(outside)}",
                            hint="create a watch with --table for each table its questions read")
    if question.sensitivity > params.sensitivity * (1 + 1e-12):
        raise QueryRejected(f"{question.column} has sensitivity {question.sensitivity:g}, above watch {w}'s "
                            f"{params.sensitivity:g}",
                            hint=f"create a watch with sensitivity {question.sensitivity:g} for this statistic")


#: how often a question (or a close) is asked again after another process changed the watch first
_ATTEMPTS = 50


def _busy(name: str) -> QueryRejected:
    return QueryRejected(f"watch {name} kept changing in other sessions; nothing was released",
                         hint="ask again in a moment")


class _ReservationCache(dict[str, LedgerEntry]):
    """Watches' reservation entries by release id, per opening of a store (``engine.shared``)."""


class Watches:
    """An analyst's watches on one store: create, answer, explain, close, list.

    ``store``: where the state lives (a test may pass a deliberately broken one as a negative
    control of :func:`dpch.accounting.watches.watch_violations`)."""

    def __init__(self, ctx: QueryContext, store: WatchStore | None = None) -> None:
        self.ctx = ctx
        self.store = store if store is not None else WatchStore(ctx.engine)

    @property
    def accountant(self) -> Accountant:
        return self.ctx.accountant

    @property
    def analyst(self) -> str:
        return self.ctx.accountant.analyst

    # -- registration and closing --------------------------------------------------------------------

    def create(self, name: str, *, epsilon: float, delta: float, threshold: float, upper: float,
               tables: tuple[str, ...] | list[str], table_policy: Any, sensitivity: float | None = None,
               sigma: float | None = None, instances: int | None = None, lower: float = 0.0) -> WatchState:
        """Registers a watch and reserves its whole (ε, δ) in the analyst's filter (and each table's
        dataset budget), durably, before any noise is drawn; raises BudgetExceeded if the filter refuses.

        ``sensitivity`` defaults to the largest contribution cap of ``tables`` (a count's); ``sigma``
        (σ_X, query units) to the smallest with which 10 instances each fit ε/10 at their ex-ante bound
        (at δ/10); ``instances``, the number δ is split over (δ_j = δ/n), to the most instances B9's ε
        check can ever open (:func:`~dpch.accounting.watches.instances_for`), so δ never halts it first."""
        if isinstance(tables, str):
            tables = (tables,)
        policies: list[TablePolicy] = [table_policy(t) for t in tables]
        for t, pol in zip(tables, policies, strict=True):
            if not pol.private:
                raise QueryRejected(f"watch {name}: table {t} is not private", hint="name the private tables it reads")
        if sensitivity is None:
            sensitivity = float(max((p.contribution_cap for p in policies), default=1))
        datasets = qualified_datasets(self.ctx.database, [p.table for p in policies])
        if instances is not None and instances < 1:  # said as such: validate_params would blame σ for it
            raise QueryRejected(f"watch {name}: instances must be at least 1, got {instances!r}",
                                hint="the number of instances δ is split over; leave it out to derive it")
        # the probe checks every other parameter before σ and n are derived from them: without a σ it gets
        # a placeholder nothing reads (validate_params only needs it positive; n ≥ 1 here), so any value does
        placeholder = float(sigma or 1.0)  # pragma: no mutate (equivalent for any positive constant)
        probe = WatchParams(name, float(threshold), float(upper), float(sensitivity), placeholder,
                            float(epsilon), float(delta), int(instances or DEFAULT_INSTANCES), datasets, float(lower))
        validate_params(probe)
        if sigma is None:
            sigma = sigma_for(epsilon, delta, DEFAULT_INSTANCES, threshold, upper, sensitivity, lower)
        if instances is None:
            instances = instances_for(epsilon, delta, threshold, upper, sensitivity, sigma, lower)
        params = replace(probe, sigma=float(sigma), instances=int(instances))
        validate_params(params)
        with self.store.locked(self.analyst, name):
            old = self.store.latest(self.analyst, name)
            if old is not None and old.state != "closed":
                raise QueryRejected(f"watch {name} already exists ({old.state})",
                                    hint=f"close it first (dpch watch close {name}) or choose another name")
            worst = PrivacyCost.realized(ExPost(params.epsilon, params.delta, params.epsilon))
            # the independent cost check (docs/design.md rule 7), before anything is reserved
            cost_audit.require(cost_audit.watch_reservation_problems(params, worst))
            reservation = admit.reserve(self.accountant, worst, datasets, f"watch:{name}", MECHANISM)
            state = new_watch(params, reservation.release_id)
            if old is not None:
                state = replace(state, seq=old.seq)
            try:
                return self.store.append(self.analyst, state, "create")
            except WatchMoved:  # another process created a watch of this name meanwhile: no noise drawn
                reservation.void()
                raise QueryRejected(f"watch {name} was just created by another session",
                                    hint=f"ask it (SETTINGS dp_watch = '{name}'), or choose another name") from None

    def close(self, name: str) -> WatchState:
        """Closes a watch: no more questions; an open instance is charged its ε_max (B9). The ``close``
        row is written first, then the reservation is settled to the realized ex-post ε and the
        watch's δ (voided if no instance was ever opened): a crash between the two leaves the watch
        closed and the reservation counted at its worst case (closing again settles it)."""
        for _ in range(_ATTEMPTS):
            try:
                return self._close(name)
            except WatchMoved:  # another process changed the watch: close it from its new state
                continue
        raise _busy(name)

    def _close(self, name: str) -> WatchState:
        with self.store.locked(self.analyst, name):
            state = self._existing(name)
            entry = self._reservation(state)
            unsettled = entry is not None and entry.status == "reserved"
            if state.state == "closed" and not unsettled:
                raise QueryRejected(f"watch {name} is already closed", hint="dpch watch list shows every watch")
            if state.state != "closed":
                p = state.params
                last = p.epsilon_max if state.open else 0.0
                state = self.store.append(self.analyst, replace(
                    state, state="closed", noisy_threshold=None, position=0, spent=state.spent + last), "close",
                    charged=last)
            if entry is not None and unsettled:
                reservation = Reservation(self.accountant, entry)
                if state.instances == 0:  # no data read, no noise drawn
                    reservation.void()
                else:
                    p = state.params
                    realized = PrivacyCost.realized(ExPost(state.realized_epsilon(), p.delta, p.epsilon))
                    # E recomputed from the watch's rows by the independent check; a mismatch leaves the
                    # reservation counted at its worst case (closing again retries the settle)
                    cost_audit.require(cost_audit.watch_settle_problems(self.store.history(self.analyst, name),
                                                                        realized))
                    reservation.settle(realized)
            return state

    def list(self) -> list[WatchState]:
        """Every watch of the analyst at its latest state."""
        return self.store.all(self.analyst)

    def state(self, name: str) -> WatchState:
        """The watch's current state (raises QueryRejected if there is none)."""
        return self._existing(name)

    def _existing(self, name: str) -> WatchState:
        state = self.store.latest(self.analyst, name)
        if state is None:
            raise QueryRejected(f"no watch named {name!r}",
                                hint=f"create it first: dpch watch create {name} --epsilon ... --threshold ... "
                                "--upper ... --table ...")
        return state

    def _reservation(self, state: WatchState) -> LedgerEntry | None:
        """The watch's reservation as the ledger holds it now (reads the analyst's ledger: O(history))."""
        for entry in self.accountant.ledger.entries(self.analyst):
            if entry.release_id == state.release_id:
                return entry
        return None

    # -- questions -------------------------------------------------------------------------------------

    def explain(self, plan: QueryPlan, opts: QueryOptions) -> Explanation:
        """What a watched question would do, without running it or changing the watch."""
        question = question_measure(plan, opts)
        state = self._existing(question.watch)
        check_question(question, state.params, opts, admit.datasets(self.ctx.database, plan))
        p = state.params
        t = state.position + 1 if state.open else 1
        admissible, reason = self._answerable(state)
        notes = [f"watch {p.name}: Gaussian sparse vector (Lebensold et al. 2024, Alg 2/4), threshold {p.threshold:g}, "
                 f"values clamped to [{p.lower:g}, {p.upper:g}], σ_X {p.sigma:.4g}, σ_Z {p.sigma * math.sqrt(3):.4g}",
                 f"answers only 'above' or 'below'; an 'above' now (question {t} of its instance) costs the "
                 f"watch ε {p.epsilon_post(t):.4g}, a 'below' nothing; the watch's (ε {p.epsilon:g}, δ {p.delta:g}) "
                 "was reserved from your budget when it was created",
                 f"watch spent ε {state.charged_epsilon:.4g} of {p.epsilon:g}, δ {state.delta_used:.3g} of {p.delta:g}"]
        return Explanation(sql=emit_sql(plan, self.ctx.database), plan=plan, options=replace(
            opts, mechanism="gaussian sparse vector"), measures=[], cost=PrivacyCost.zero(), admissible=admissible,
            reason=reason, notes=notes)

    def _answerable(self, state: WatchState) -> tuple[bool, str]:
        if state.state != "active":
            return False, f"watch {state.name} is {state.state}"
        if not state.open and not state.can_open():
            return False, f"watch {state.name} is exhausted"
        return True, "within the watch's budget"

    def answer(self, plan: QueryPlan, opts: QueryOptions, started: float, emitted: str | None = None) -> Release:
        """Answers a watched query 'above' or 'below' (module docstring for the steps)."""
        question = question_measure(plan, opts)
        datasets = admit.datasets(self.ctx.database, plan)
        emitted = emitted if emitted is not None else emit_sql(plan, self.ctx.database)
        self.ctx.probe.check(plan, emitted)  # type errors cost nothing
        for _ in range(_ATTEMPTS):
            with self.store.locked(self.analyst, question.watch):
                state = self._existing(question.watch)
                check_question(question, state.params, opts, datasets)
                if self.accountant.lock_info() is not None:
                    raise AnalystLocked.of(self.analyst)
                entry = self._reservation_entry(state)
                try:
                    state = self._ready(state)
                except WatchMoved:  # another process opened (or closed) the instance: use its state
                    continue
                moved = False
                with self.accountant.tripwire(entry):  # from here on a failure may depend on the data (rule 5)
                    data = execute.exact(self.ctx.engine, plan, emitted, self.ctx.noise.cap_key())
                    value = float(data.measures[question.measure][0])
                    try:
                        state, top, charged = self._step(state, value)
                    except WatchMoved:
                        # another process answered first: this comparison is dropped unreleased (a race
                        # between processes, not the data: no trip), and the question is asked again
                        moved = True
                if not moved:
                    return self._release(question, state, top, charged, started, opts.confidence)
        raise _busy(question.watch)

    def _ready(self, state: WatchState) -> WatchState:
        """The state with an instance open: refuses a closed or exhausted watch; else opens an
        instance if none is (B9's check, then ρ̂ drawn and written durably before any use)."""
        p = state.params
        if state.state == "closed":
            raise QueryRejected(f"watch {p.name} is closed", hint="create a new watch to ask more questions")
        if state.state == "exhausted":
            raise QueryRejected(f"watch {p.name} is exhausted: it spent ε {state.charged_epsilon:.4g} of "
                                f"{p.epsilon:g} and cannot open another instance",
                                hint=f"close it (dpch watch close {p.name}) and create a new one")
        if state.open:
            return state
        if not state.can_open():
            self.store.append(self.analyst, replace(state, state="exhausted"), "exhausted")
            raise QueryRejected(f"watch {p.name} is exhausted: another instance would not fit its ε {p.epsilon:g} "
                                f"(spent {state.spent:.4g}, ε_max {p.epsilon_max:.4g}) or its δ",
                                hint=f"close it (dpch watch close {p.name}) and create a new one")
        with self.ctx.noise.drawing() as source:
            # Alg 1: ρ̂ = ρ + N(0, σ_X²), on the normalised scale
            mech = p.mechanism
            rho_hat = mech.threshold + float(source.normal(mech.sigma_x))
        opened = replace(state, instances=state.instances + 1, position=0, noisy_threshold=rho_hat, base=state.spent)
        return self.store.append(self.analyst, opened, "open")

    def _step(self, state: WatchState, value: float) -> tuple[WatchState, bool, float]:
        """One question of the open instance; the new state is durable when this returns."""
        p = state.params
        assert state.noisy_threshold is not None
        with self.ctx.noise.drawing() as source:
            run = AboveThresholdRun(p.mechanism, state.noisy_threshold, source)
            run.count = state.position
            top = run.test((value - p.lower) / p.width)  # clamped to [0, 1] by the instance
        if not top:
            return self.store.append(self.analyst, replace(state, position=run.count), BELOW, answer=BELOW), False, 0.0
        charged = p.epsilon_post(run.count)
        halted = replace(state, position=0, noisy_threshold=None, spent=state.spent + charged)
        if not halted.can_open():  # B9: no further instance fits; said now, so `dpch budget` shows it
            halted = replace(halted, state="exhausted")
        return self.store.append(self.analyst, halted, ABOVE, answer=ABOVE, charged=charged), True, charged

    def _reservation_entry(self, state: WatchState) -> LedgerEntry:
        """The reservation a failure after the data is read trips (read from the ledger once per watch
        and store opening; the tripwire only needs its release id and worst case)."""
        cache = self.ctx.engine.shared.get(_ReservationCache)
        entry = cache.get(state.release_id)
        if entry is None:
            entry = self._reservation(state)
            if entry is not None:
                cache[state.release_id] = entry
        if entry is None:  # the ledger lost the reservation: never answer without it
            raise QueryRejected(f"watch {state.name} has no reservation in the ledger",
                                hint="the data owner should look at the store")
        return entry

    def _release(self, question: Question, state: WatchState, top: bool, charged: float, started: float,
                 confidence: float) -> Release:
        p = state.params
        note = (f"watch {p.name}: '{ABOVE if top else BELOW}' at threshold {p.threshold:g} "
                f"(Gaussian sparse vector; the watch spent ε {state.charged_epsilon:.4g} of {p.epsilon:g}, "
                f"δ {state.delta_used:.3g} of {p.delta:g}, reserved from your budget at registration)")
        if state.state == "exhausted":
            note += "; the watch is now exhausted"
        return Release(columns=[question.column], rows=[(ABOVE if top else BELOW,)], intervals=[[None]],
                       cost=PrivacyCost.of(ApproxDP(charged, 0.0)), confidence=confidence,
                       mechanism=f"{MECHANISM} {p.name}", measures=[], budget=self.accountant.status(fresh=False),
                       release_id=state.release_id, elapsed_ms=(time.perf_counter() - started) * 1000.0,
                       notes=[note])
