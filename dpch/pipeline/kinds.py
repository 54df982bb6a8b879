"""Release kinds: every kind of release as one class, and :func:`release_kind`, the one place that tells
them apart by the query's options (issue 25).

A query is one of these kinds, decided from its plan and options alone (never from the data):

- :class:`ThresholdWatch` — a threshold watch's question (``dp_watch`` / ``dp_threshold``): 'above'
  or 'below', answered by the watch's sparse vector (:mod:`.watch`);
- :class:`TopK` — the k keys with the largest score (``dp_select = 'top'``), by report noisy max (:mod:`.top_k`);
- :class:`Free` — keys whose domain is declared: the domain itself, no mechanism, no cost;
- :class:`AccuracyFirst` — ``dp_accuracy`` / ``dp_relative_error``: noise reduction until the target
  is met, charged at its worst case (:mod:`.accuracy_first`);
- :class:`KeyRelease` — private keys released by partition selection, with their noisy measures;
- :class:`Ordinary` — noisy measures over public or no keys.

Each kind implements what differs between kinds: :meth:`ReleaseKind.explain` (plan checks, cost,
admissibility, without spending), :meth:`ReleaseKind.answer` (calibrate → check → admit → execute →
release → report), :meth:`ReleaseKind.column_types` and :attr:`ReleaseKind.cacheable`. The session,
the gateway, the DB-API cursor, the audit and the CLI call these and never branch on release-kind
options themselves (``tests/pipeline/test_release_kinds.py`` fails if one does); what the audit
observes of each kind is a table keyed by these classes (:mod:`dpch.audit.runner`).
"""

from __future__ import annotations

import dataclasses
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import ClassVar, Protocol

from dpch.errors import QueryRejected
from dpch.mechanisms.sampling import NoiseSource
from dpch.pipeline import accuracy_first, admit, bound_report, execute, top_k
from dpch.pipeline.bound_report import DroppedShare
from dpch.pipeline.calibrate import calibrate
from dpch.pipeline.context import QueryContext
from dpch.pipeline.execute import GroupData
from dpch.pipeline.plan import PlanCache
from dpch.pipeline.release import Rows, check_key_release, domain_rows, release_rows
from dpch.pipeline.report import (
    Explanation,
    MeasureReport,
    Release,
    free_explanation,
    free_release,
    measure_reports,
    notes,
)
from dpch.pipeline.watch import Watches
from dpch.privacy.cost import PrivacyCost
from dpch.sql.analyze import QueryPlan
from dpch.sql.result_types import release_types
from dpch.sql.rewrite import emit_sql
from dpch.sql.settings import QueryOptions


class Services(Protocol):
    """What a kind uses of the connection that asks (a :class:`dpch.session.Session`)."""

    @property
    def context(self) -> QueryContext: ...

    @property
    def plans(self) -> PlanCache: ...

    @property
    def accuracy_runs(self) -> accuracy_first.AccuracyRuns: ...

    @property
    def watch_service(self) -> Watches: ...


class ReleaseKind(ABC):
    """One kind of release. Subclasses implement :meth:`explain` and :meth:`answer`."""

    #: the kind's name (EXPLAIN, logs, the audit's messages)
    name: ClassVar[str]
    #: whether a gateway may serve an identical fresh answer from its cache (a watch's question advances
    #: its state: every ask is a new answer)
    cacheable: ClassVar[bool] = True
    #: whether its value columns are noisy estimates, with intervals (a watch's are 'above' or 'below')
    estimates: ClassVar[bool] = True
    #: whether it can also release what the contribution bound dropped (``dp_report_dropped``, one fixed-cost
    #: charge with the answer: :mod:`.bound_report`)
    reports_dropped: ClassVar[bool] = False
    #: whether its cost is known before it runs, so it can be checked and composed with another release
    #: beforehand (a watch's and an accuracy run's are settled after the fact: :mod:`.series`)
    fixed_cost: ClassVar[bool] = True

    @abstractmethod
    def explain(self, services: Services, plan: QueryPlan, opts: QueryOptions) -> Explanation:
        """The emitted SQL, measures, cost and admissibility of the release, without spending anything."""

    @abstractmethod
    def answer(self, services: Services, plan: QueryPlan, opts: QueryOptions, started: float) -> Release:
        """The release, charged before any noise is drawn (``started``: ``time.perf_counter()`` at the ask)."""

    def column_types(self, plan: QueryPlan, opts: QueryOptions) -> list[str]:
        """ClickHouse types of the release's columns (the DB-API cursor's and the gateway's)."""
        return release_types(plan)


class ThresholdWatch(ReleaseKind):
    name = "threshold watch"
    cacheable = False
    estimates = False
    fixed_cost = False

    def explain(self, services: Services, plan: QueryPlan, opts: QueryOptions) -> Explanation:
        return services.watch_service.explain(plan, opts)

    def answer(self, services: Services, plan: QueryPlan, opts: QueryOptions, started: float) -> Release:
        return services.watch_service.answer(plan, opts, started)

    def column_types(self, plan: QueryPlan, opts: QueryOptions) -> list[str]:
        return ["String"] * len(plan.outputs)  # 'above' or 'below' (a watched question has no key)


class TopK(ReleaseKind):
    name = "top-k selection"

    def explain(self, services: Services, plan: QueryPlan, opts: QueryOptions) -> Explanation:
        top = top_k.calibrate_top_k(plan, opts)
        context = services.context
        admissible, reason = admit.admissible(context.accountant, top.cost, _datasets(context, plan))
        return Explanation(sql=emit_sql(plan, context.engine.database), plan=plan, options=opts,
                           measures=top_k.top_k_reports(plan, opts, top), cost=top.cost, admissible=admissible,
                           reason=reason, notes=top_k.top_k_notes(plan, opts, top), selector=top.mechanism)

    def answer(self, services: Services, plan: QueryPlan, opts: QueryOptions, started: float) -> Release:
        top = top_k.calibrate_top_k(plan, opts)
        return charged(services, plan, opts, top.cost, top.mechanism, started,
                       lambda data, source: top_k.release_top_k(plan, opts, top, data, source),
                       top_k.top_k_reports(plan, opts, top), top_k.top_k_notes(plan, opts, top))


class Free(ReleaseKind):
    name = "declared key domain"

    def explain(self, services: Services, plan: QueryPlan, opts: QueryOptions) -> Explanation:
        return free_explanation(plan, opts)

    def answer(self, services: Services, plan: QueryPlan, opts: QueryOptions, started: float) -> Release:
        # the declared domain: nothing private read, no noise, no ledger row (the probe still runs the
        # emitted SQL on a synthetic row, so a query that cannot run is refused here as anywhere)
        context = services.context
        context.probe.check(plan, services.plans.emitted(plan, lambda p: emit_sql(p, context.engine.database)))
        columns, rows, intervals = domain_rows(plan)
        return free_release(opts, columns, rows, intervals, context.accountant.status(), _ms_since(started))


class AccuracyFirst(ReleaseKind):
    name = "accuracy-first"
    fixed_cost = False

    def explain(self, services: Services, plan: QueryPlan, opts: QueryOptions) -> Explanation:
        check_key_release(plan, opts)
        return accuracy_first.explain(services.context, plan, opts)

    def answer(self, services: Services, plan: QueryPlan, opts: QueryOptions, started: float) -> Release:
        check_key_release(plan, opts)
        return accuracy_first.answer(services.context, services.accuracy_runs, plan, opts, started)


class Ordinary(ReleaseKind):
    """Noisy measures, calibrated to the options' ε (and δ), charged once."""

    name = "ordinary"
    reports_dropped = True
    #: the ledger's name of the release's mechanism (None: the options' resolved mechanism)
    mechanism: ClassVar[str | None] = None

    def explain(self, services: Services, plan: QueryPlan, opts: QueryOptions) -> Explanation:
        check_key_release(plan, opts)
        noise = calibrate(plan, opts)
        context = services.context
        admissible, reason = admit.admissible(context.accountant, noise.cost, _datasets(context, plan))
        return Explanation(sql=emit_sql(plan, context.engine.database), plan=plan, options=opts,
                           measures=measure_reports(plan, opts, noise), cost=noise.cost,
                           admissible=admissible, reason=reason, notes=notes(plan, noise, opts))

    def answer(self, services: Services, plan: QueryPlan, opts: QueryOptions, started: float) -> Release:
        check_key_release(plan, opts)
        noise = calibrate(plan, opts)
        dropped: list[DroppedShare] = []

        def draw(data: GroupData, source: NoiseSource) -> Rows:
            rows = release_rows(plan, opts, noise, data, source)
            if noise.dropped:  # drawn after the answer's noise, from the same source, once the charge is durable
                assert data.bound_report is not None
                dropped.append(bound_report.release(noise.dropped, data.bound_report, source, opts.confidence))
            return rows

        release = charged(services, plan, opts, noise.cost, self.mechanism or opts.resolved_mechanism, started,
                          draw, measure_reports(plan, opts, noise), notes(plan, noise, opts))
        if dropped:
            release = dataclasses.replace(release, dropped=dropped[0], notes=[*release.notes, dropped[0].describe()])
        return release


class KeyRelease(Ordinary):
    """Private keys chosen by partition selection, with their noisy measures (one charge for both)."""

    name = "key release"
    mechanism = "partition selection"


def release_kind(plan: QueryPlan, opts: QueryOptions) -> ReleaseKind:
    """The kind of release ``plan`` asked with ``opts`` is: the one place that reads the release-kind
    options. The order is the precedence: a watch's question and a top-k selection are decided by
    their options whatever the keys; a declared key domain is free; then accuracy-first; then
    private keys or not."""
    kind = _kind_of(plan, opts)
    if plan.report_dropped and not kind.reports_dropped:
        raise QueryRejected(f"dp_report_dropped reports with a fixed-cost answer; a {kind.name} cannot carry it",
                            hint="drop dp_report_dropped, or ask the same query without it as an ordinary release")
    return kind


def _kind_of(plan: QueryPlan, opts: QueryOptions) -> ReleaseKind:
    if opts.watch is not None or opts.threshold is not None:
        return ThresholdWatch()
    if opts.select == "top":
        return TopK()
    if plan.free:
        return Free()
    if opts.accuracy_first:
        return AccuracyFirst()
    return KeyRelease() if plan.key_release else Ordinary()


def charged(services: Services, plan: QueryPlan, opts: QueryOptions, cost: PrivacyCost, mechanism: str,
            started: float, draw: Callable[[GroupData, NoiseSource], Rows], reports: list[MeasureReport],
            release_notes: list[str]) -> Release:
    """Stages 3–7 of a fixed-cost release: probe, admit and charge, execute, then ``draw`` the noise on
    the exact data once the charge is durable."""
    context = services.context
    accountant = context.accountant
    emitted = services.plans.emitted(plan, lambda p: emit_sql(p, context.engine.database))
    context.probe.check(plan, emitted)
    # admitted and counted now; the ledger row is written while the aggregate runs
    pending = admit.begin_charge(accountant, cost, _datasets(context, plan), plan, mechanism)
    with accountant.tripwire(pending):  # any failure from here on may depend on the data (rule 5);
        data = execute.exact(context.engine, plan, emitted, context.noise.cap_key())  # acted on once durable
        entry = pending.wait()  # durable before any noise is drawn (docs/design.md rule 2)
        with context.noise.drawing() as source:
            columns, rows, intervals = draw(data, source)
    return Release(
        columns=columns, rows=rows, intervals=intervals, cost=cost, confidence=opts.confidence,
        mechanism=mechanism, measures=reports, budget=accountant.status(fresh=False),
        release_id=entry.release_id, elapsed_ms=_ms_since(started), notes=release_notes,
    )


def _datasets(context: QueryContext, plan: QueryPlan) -> tuple[str, ...]:
    return admit.datasets(context.engine.database, plan)


def _ms_since(started: float) -> float:
    return (time.perf_counter() - started) * 1000.0
