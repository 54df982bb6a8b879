"""One audit: neighbours → samples → ε lower bounds → verdict (the DPCH paper's §1 item 3).

:func:`audit_query` builds D and D′ for a query (:mod:`.neighbours`), samples the query on
both (:mod:`.runner`), and bounds ε from below (:mod:`.estimators`) with a threshold test and a
classifier (and a likelihood-ratio test for discrete outputs); a Gaussian release also gets a
lower confidence curve on its privacy profile δ(ε) (:mod:`.profile`), compared with the curve
its calibration claims. Each of the m tests runs at confidence 1 − α/m, so together they hold at
1 − α (union bound). The verdict is VIOLATION when ε_lb exceeds the claimed ε or δ_lb(ε) exceeds
the claimed δ(ε) at some ε: if the mechanism really were as claimed, that happens with
probability at most α.
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
from dpch.audit.profile import ProfileBound, profile_bound
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
    #: the privacy-profile test of a Gaussian release (None: not applicable, see ``samples.profile_note``)
    profile: ProfileBound | None = None
    #: the confidence of the verdict (all tests together)
    confidence: float = 0.95

    @property
    def claimed_epsilon(self) -> float:
        return self.samples.claimed.epsilon

    @property
    def claimed_delta(self) -> float:
        return self.samples.claimed.delta

    @property
    def epsilon_violation(self) -> bool:
        return self.bound.epsilon_lb > self.claimed_epsilon

    @property
    def profile_violation(self) -> bool:
        return self.profile is not None and self.profile.violation

    @property
    def violation(self) -> bool:
        return self.epsilon_violation or self.profile_violation

    @property
    def verdict(self) -> str:
        return "VIOLATION" if self.violation else "consistent"

    @property
    def tightness(self) -> float:
        """ε_lb / claimed ε: how close the audit gets to the claim (1 = tight)."""
        return self.bound.epsilon_lb / self.claimed_epsilon if self.claimed_epsilon > 0 else float("inf")


def tests_per_audit(samples: AuditSamples) -> int:
    """How many tests share the audit's α: threshold and classifier, a likelihood-ratio test for
    discrete outputs, the privacy profile for a Gaussian release."""
    return 2 + int(samples.discrete) + int(samples.profile is not None)


def estimate(samples: AuditSamples, confidence: float = 0.95) -> tuple[EpsilonBound, EpsilonBound, EpsilonBound]:
    """(threshold bound, classifier bound, their maximum), each test at 1 − α/m
    (:func:`tests_per_audit`), so that with :func:`estimate_profile` all hold at ``confidence``."""
    if not 0.5 <= confidence < 1:
        raise ConfigError(f"audit confidence must be in [0.5, 1), got {confidence!r}")
    each = 1.0 - (1.0 - confidence) / tests_per_audit(samples)
    delta = samples.claimed.delta
    t = threshold_bound(samples.d, samples.dprime, delta=delta, confidence=each, labels=samples.labels)
    c = classifier_bound(samples.d, samples.dprime, delta=delta, confidence=each)
    tests = [t, c]
    if samples.discrete:
        tests.append(likelihood_ratio_bound(samples.d, samples.dprime, delta=delta, confidence=each))
    return t, c, combine(tests)


def estimate_profile(samples: AuditSamples, confidence: float = 0.95) -> ProfileBound | None:
    """The privacy-profile test at 1 − α/m, or None when the release is not a profiled Gaussian."""
    if samples.profile is None:
        return None
    each = 1.0 - (1.0 - confidence) / tests_per_audit(samples)
    return profile_bound(samples.d, samples.dprime, samples.profile, confidence=each, labels=samples.labels)


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
        sessions = [audit_session(session, db, None if seed is None else seed + i)
                    for i, db in enumerate((pair.d_database, pair.dprime_database))]
        runner = runner_class(sessions[0], sessions[1], sql, seed=seed, **options)
        samples = runner.run_fast(trials) if mode == "fast" else runner.run_full(trials)
    finally:
        for s in sessions:
            s.close()
        if not keep:
            pair.drop(session.engine)
    t, c, best = estimate(samples, confidence)
    return AuditResult(sql, plan.table.table, _describe(pair), samples, t, c, best,
                       estimate_profile(samples, confidence), confidence)


def audit_session(session: Any, database: str, seed: int | None) -> Any:
    """A session of the audit analyst on a scratch database (the neighbours), with ``session``'s policy
    and defaults; the caller closes it."""
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
