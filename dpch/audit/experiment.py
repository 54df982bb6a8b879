"""One audit: neighbours → samples → ε lower bounds → verdict (the DPCH paper's §1 item 3).

:func:`audit_query` builds D and D′ for a query (:mod:`.neighbours`), samples the query on
both (:mod:`.runner`), and bounds ε from below (:mod:`.estimators`) with a threshold test and a
classifier, each at confidence 1 − α/2 so that their maximum holds at 1 − α (union bound).
The verdict is VIOLATION when ε_lb exceeds the claimed ε: if the mechanism really were
(ε, δ)-DP, that happens with probability at most α.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from dpch.accounting.budget import Budget
from dpch.audit.estimators import (
    EpsilonBound,
    classifier_bound,
    combine,
    likelihood_ratio_bound,
    threshold_bound,
)
from dpch.audit.neighbours import Direction, NeighbourPair, build_neighbours
from dpch.audit.runner import AuditRunner, AuditSamples
from dpch.errors import ConfigError
from dpch.policy.resolve import Policy
from dpch.session import Session
from dpch.store.engine import Engine

#: the analyst the full-stack mode charges, in the scratch databases' own ledgers
AUDIT_ANALYST = "dpch-audit"
#: its budget: large enough for any audit, and real (the filter still runs on every query)
AUDIT_BUDGET = Budget(1e12, 0.5)
#: the default number of trials per side (fast mode)
DEFAULT_TRIALS = 20_000


@dataclass
class AuditResult:
    """What an audit found: the claim, the bounds, the verdict, and the samples behind them."""

    sql: str
    table: str
    neighbours: str
    samples: AuditSamples
    threshold: EpsilonBound
    classifier: EpsilonBound
    bound: EpsilonBound

    @property
    def claimed_epsilon(self) -> float:
        return self.samples.claimed.epsilon

    @property
    def claimed_delta(self) -> float:
        return self.samples.claimed.delta

    @property
    def violation(self) -> bool:
        return self.bound.epsilon_lb > self.claimed_epsilon

    @property
    def verdict(self) -> str:
        return "VIOLATION" if self.violation else "consistent"

    @property
    def tightness(self) -> float:
        """ε_lb / claimed ε: how close the audit gets to the claim (1 = tight)."""
        return self.bound.epsilon_lb / self.claimed_epsilon if self.claimed_epsilon > 0 else float("inf")


def estimate(samples: AuditSamples, confidence: float = 0.95) -> tuple[EpsilonBound, EpsilonBound, EpsilonBound]:
    """(threshold bound, classifier bound, their maximum at ``confidence``)."""
    if not 0.5 <= confidence < 1:
        raise ConfigError(f"audit confidence must be in [0.5, 1), got {confidence!r}")
    # discrete outputs add a third test (likelihood ratio over binned outcomes): union bound over m tests
    m = 3 if samples.discrete else 2
    each = 1.0 - (1.0 - confidence) / m
    delta = samples.claimed.delta
    t = threshold_bound(samples.d, samples.dprime, delta=delta, confidence=each, labels=samples.labels)
    c = classifier_bound(samples.d, samples.dprime, delta=delta, confidence=each)
    tests = [t, c]
    if samples.discrete:
        tests.append(likelihood_ratio_bound(samples.d, samples.dprime, delta=delta, confidence=each))
    return t, c, combine(tests)


def audit_query(
    session: Any,
    sql: str,
    *,
    trials: int = DEFAULT_TRIALS,
    mode: str = "fast",
    confidence: float = 0.95,
    direction: Direction = "add",
    seed: int | None = None,
    runner_class: type[AuditRunner] = AuditRunner,
    keep: bool = False,
    **options: Any,
) -> AuditResult:
    """Audits ``sql`` on neighbours of its table in ``session``'s database.

    ``mode`` is "fast" (exact aggregates once, noise redrawn) or "full" (every trial a real
    query, charged to :data:`AUDIT_ANALYST` in the scratch databases). ``options`` are the
    query's options (``epsilon``, ``delta``, ...). ``seed`` is for tests only (refused in
    production like every fixed seed). The scratch databases are dropped unless ``keep``.
    """
    if mode not in ("fast", "full"):
        raise ConfigError(f"unknown audit mode {mode!r}", hint="use 'fast' or 'full'")
    if trials < 20:
        raise ConfigError(f"an audit needs at least 20 trials per side, got {trials}",
                          hint="use thousands of trials (e.g. --trials 20000)")
    plan, _ = session.plan(sql, **options)
    pair = build_neighbours(session.engine, plan, direction=direction)
    sessions = []
    try:
        sessions = [_audit_session(session, db, None if seed is None else seed + i)
                    for i, db in enumerate((pair.d_database, pair.dprime_database))]
        runner = runner_class(sessions[0], sessions[1], sql, seed=seed, **options)
        samples = runner.run_fast(trials) if mode == "fast" else runner.run_full(trials)
    finally:
        for s in sessions:
            s.close()
        if not keep:
            pair.drop(session.engine)
    t, c, best = estimate(samples, confidence)
    return AuditResult(sql, plan.table.table, _describe(pair), samples, t, c, best)


def _audit_session(session: Any, database: str, seed: int | None) -> Any:
    engine = Engine(session.engine.dsn, database=database)
    try:
        policy = Policy(session.policy.overrides, source=session.policy.source)
        return Session(engine, analyst=AUDIT_ANALYST, policy=policy, defaults=session.defaults,
                       default_budget=AUDIT_BUDGET, seed=seed)
    except Exception:
        engine.close()
        raise


def _describe(pair: NeighbourPair) -> str:
    return pair.description
