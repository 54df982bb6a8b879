"""Auditing a threshold watch (issue 16): the ex-post loss of its halting position on neighbouring tables.

A watch answers ⊤/⊥ by Gaussian Above Threshold instances (Lebensold et al. 2024, Alg 1/3;
docs/algorithms.md B8) and charges each ⊤ at position t its ex-post ε_post(t) (Thm 17). The claim is
outcome-dependent, so :func:`audit_watch` tests it outcome by outcome (:mod:`.ex_post`):

1. D and D′ differ in one worst-case unit (:func:`~dpch.audit.neighbours.build_neighbours`), and the
   watched question's exact value is computed on each (the emitted SQL, as the watch runs it);
2. ``trials`` fresh instances per side, each asked the question up to ``questions`` times through the
   watch's own mechanism (:meth:`GaussianAboveThreshold.start` — a fresh noisy threshold, then the
   same value each time); observed: the halting position t, or ``questions + 1`` if no ⊤ came;
3. :func:`~dpch.audit.ex_post.ex_post_bound` against ε(t) = ε_post(t) (an instance still open has no
   ex-post claim — it is charged ε_max when closed — and is never chosen). VIOLATION when one
   outcome's loss lower bound exceeds its claim.

Asking the same value repeatedly is the analyst's natural use; Thm 17's worst case varies the values
between positions, so for t ≥ 2 the measured loss is below the claim even for a correct watch, while
t = 1 reaches it when the data puts the question at the range's lower end (a count of 0 on D, the
added unit's rows on D′). A watch whose noise is smaller than it claims (:meth:`WatchAuditor.mechanism`,
the seam a negative control overrides) is caught there.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from dpch.accounting.watches import WatchParams
from dpch.audit.ex_post import ExPostBound, claimed_outcomes, ex_post_bound
from dpch.audit.experiment import audit_session
from dpch.audit.neighbours import Direction, build_neighbours
from dpch.errors import ConfigError, QueryRejected
from dpch.mechanisms.sampling import NoiseSource
from dpch.mechanisms.selection import GaussianAboveThreshold
from dpch.pipeline import execute
from dpch.pipeline.kinds import ThresholdWatch, release_kind
from dpch.pipeline.watch import question_measure
from dpch.sql.rewrite import emit_sql


@dataclass(frozen=True)
class WatchAudit:
    """The verdict on one watched question: the outcome whose loss came closest to (or over) its claim."""

    sql: str
    watch: str
    neighbours: str
    #: the question's exact value on D and on D′ (query units, before the watch's clamp)
    values: tuple[float, float]
    #: None: no instance halted within the questions asked on either side, so no outcome has an
    #: ex-post claim to test (an open instance is charged ε_max at close, ex ante)
    bound: ExPostBound | None
    trials: int
    questions: int

    @property
    def violation(self) -> bool:
        return self.bound is not None and self.bound.violation

    def summary(self) -> str:
        """What the audit found, in the lines ``dpch audit`` prints."""
        head = (f"watch {self.watch}: {self.sql}\nneighbours: {self.neighbours}\n"
                f"exact values: D {self.values[0]:g}, D′ {self.values[1]:g}; {self.trials} instances per side, "
                f"up to {self.questions} questions each\n")
        b = self.bound
        if b is None:
            return head + (f"no instance answered ⊤ within {self.questions} questions on either side: no outcome "
                           "has an ex-post claim to test (an open instance is charged ε_max when closed) → "
                           "consistent; audit a value nearer the threshold")
        verdict = "VIOLATION" if self.violation else "consistent"
        return head + (f"outcome ⊤ at position {b.outcome:g} ({b.order}): loss ≥ {b.loss_lb:.4g} with "
                       f"{b.confidence:.0%} confidence, claimed ε_post {b.claimed:.4g} → {verdict}")


class WatchAuditor:
    """Samples a watch's halting positions on the two sides; :meth:`mechanism` is the seam tests override."""

    def __init__(self, params: WatchParams, seed: int | None = None) -> None:
        self.params = params
        self._noise = NoiseSource(seed)

    def mechanism(self) -> GaussianAboveThreshold:
        """The instance the watch runs (normalised to [0, 1])."""
        return self.params.mechanism

    def halting_positions(self, value: float, trials: int, questions: int) -> np.ndarray:
        """``trials`` instances asked ``value`` up to ``questions`` times: each one's ⊤ position, or
        ``questions + 1`` when none came."""
        mech = self.mechanism()
        normalised = (value - self.params.lower) / self.params.width  # the watch's own scaling
        out = np.full(trials, questions + 1, dtype=float)
        for i in range(trials):
            run = mech.start(self._noise)
            for t in range(1, questions + 1):
                if run.test(normalised):
                    out[i] = t
                    break
        return out


def audit_watch(session: Any, sql: str, *, trials: int = 20_000, questions: int = 10, confidence: float = 0.95,
                direction: Direction = "add", seed: int | None = None,
                auditor_class: type[WatchAuditor] = WatchAuditor, **options: Any) -> WatchAudit:
    """Audits the watched question ``sql`` (``SETTINGS dp_watch = '...'``) of ``session``'s analyst on
    neighbours of its table; spends nothing (the neighbours are scratch tables, the noise is drawn
    here). The watch must exist; its parameters are read, its state is not touched."""
    if trials < 20 or questions < 1:
        raise ConfigError("a watch audit needs at least 20 trials per side and one question",
                          hint="e.g. trials=20000, questions=10")
    plan, opts = session.plan(sql, **options)
    if not isinstance(release_kind(plan, opts), ThresholdWatch):
        raise QueryRejected("this query asks no watch", hint="add SETTINGS dp_watch = 'name', or audit it as a query")
    question = question_measure(plan, opts)
    params = session.watch_state(question.watch).params
    pair = build_neighbours(session.engine, plan, direction=direction)
    sessions = []
    values = []
    key = NoiseSource(seed).cap_key()  # one key for both sides, as in the query audit
    try:
        for i, database in enumerate((pair.d_database, pair.dprime_database)):
            side = audit_session(session, database, None if seed is None else seed + i)
            sessions.append(side)
            side_plan, _ = side.plan(sql, **options)
            data = execute.exact(side.engine, side_plan, emit_sql(side_plan, side.engine.database), key)
            values.append(float(data.measures[question.measure][0]))
    finally:
        for s in sessions:
            s.close()
        pair.drop(session.engine)
    auditor = auditor_class(params, seed)
    on_d = auditor.halting_positions(values[0], trials, questions)
    on_dprime = auditor.halting_positions(values[1], trials, questions)

    def claimed(t: float) -> float:  # an open instance is charged ε_max at close: no ex-post claim
        return params.epsilon_post(int(t)) if t <= questions else math.inf

    testable = claimed_outcomes(on_d, on_dprime, claimed)
    bound = ex_post_bound(on_d, on_dprime, claimed, confidence=confidence) if testable else None
    return WatchAudit(sql, question.watch, pair.description, (values[0], values[1]), bound, trials, questions)
