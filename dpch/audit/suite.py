"""The fixed audit suite: one query per kind of release, audited on the demo table.

``dpch audit --suite`` loads the demo ``visits`` table (:mod:`sql_fixtures.visits`) into a
scratch database, audits every entry in fast mode, and fails if any entry's ε lower bound
exceeds its claimed ε. Gaussian entries get 10× the trials: (ε, δ) Gaussian noise is only
distinguishable far in its tails.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import Any

from dpch.audit.experiment import AUDIT_ANALYST, AUDIT_BUDGET, AuditResult, audit_query
from dpch.audit.runner import AuditRunner
from dpch.engine import Engine, quote_identifier
from dpch.session import Session
from dpch.sql.settings import QueryOptions


@dataclass(frozen=True)
class SuiteEntry:
    name: str
    sql: str
    options: dict[str, Any]
    trials_factor: int = 1


SUITE: tuple[SuiteEntry, ...] = (
    SuiteEntry("count (Laplace)", "SELECT count(*) FROM visits", {"epsilon": 1.0}),
    SuiteEntry("sum with clamping", "SELECT sum(spend) FROM visits WHERE age > 40", {"epsilon": 1.0}),
    SuiteEntry("avg", "SELECT avg(duration_min) FROM visits", {"epsilon": 1.0}),
    SuiteEntry("group-by count", "SELECT region, count(*) FROM visits GROUP BY region", {"epsilon": 1.0}),
    SuiteEntry("group-by sum (Gaussian)", "SELECT device, sum(pages) FROM visits GROUP BY device",
               {"epsilon": 1.0, "delta": 1e-6}, 10),
    SuiteEntry("count (Gaussian)", "SELECT count(*) FROM visits", {"epsilon": 1.0, "delta": 1e-6}, 10),
)

#: accuracy-first queries join the suite when the session supports them (dp_accuracy)
ACCURACY_FIRST = SuiteEntry(
    "accuracy-first count",
    "SELECT count(*) FROM visits SETTINGS dp_accuracy = 40, dp_confidence = 0.95, dp_max_epsilon = 5", {}, 10,
)


@dataclass
class SuiteOutcome:
    entry: SuiteEntry
    result: AuditResult | None
    note: str = ""

    @property
    def violation(self) -> bool:
        return self.result is not None and self.result.violation


def accuracy_first_available() -> bool:
    """Whether the runner can audit accuracy-first releases (those with a data-independent stop)."""
    return "accuracy" in {f.name for f in fields(QueryOptions)} and AUDITS_EX_POST

#: the fast runner audits accuracy-first releases whose stop is data-independent (absolute targets
#: on counts and sums): the released iterate's marginal and its realized ex-post cost are known
AUDITS_EX_POST = True


def run_suite(
    dsn: str,
    *,
    trials: int = 20_000,
    confidence: float = 0.95,
    seed: int | None = None,
    echo: Callable[[str], None] = lambda _: None,
    runner_class: type[AuditRunner] = AuditRunner,
) -> list[SuiteOutcome]:
    """Audits every :data:`SUITE` entry on a fresh demo table in a scratch database of ``dsn``."""
    from sql_fixtures import visits

    database = f"dpch_audit_suite_{uuid.uuid4().hex[:8]}"
    engine = Engine(dsn, database=database)
    session = Session(engine, analyst=AUDIT_ANALYST, default_budget=AUDIT_BUDGET, seed=seed)
    outcomes = []
    try:
        visits.load(engine, "visits")
        entries = list(SUITE)
        if accuracy_first_available():
            entries.append(ACCURACY_FIRST)
        for i, entry in enumerate(entries):
            result = audit_query(session, entry.sql, trials=trials * entry.trials_factor, confidence=confidence,
                                 seed=None if seed is None else seed + 100 * i,
                                 runner_class=runner_class, **entry.options)
            outcomes.append(SuiteOutcome(entry, result))
            echo(f"{entry.name:<26} claimed ε {result.claimed_epsilon:<5g} ε_lb {result.bound.epsilon_lb:.3f} "
                 f"({result.tightness:4.0%})  {result.verdict}")
        if not accuracy_first_available():
            outcomes.append(SuiteOutcome(ACCURACY_FIRST, None, "skipped: accuracy-first queries are not "
                                         "available in this version"))
            echo(f"{ACCURACY_FIRST.name:<26} skipped (accuracy-first is not available yet)")
    finally:
        engine.command(f"DROP DATABASE IF EXISTS {quote_identifier(database)}")
        session.close()
    return outcomes
