"""Session: one analyst's private connection — engine, policy, accountant, noise source.

``query(sql)`` plans the query and hands it to its kind of release (:mod:`dpch.pipeline.kinds`), which
runs the pipeline's stages in order (docs/design.md "Data flow"):

plan → calibrate → check → admit → execute → release → postprocess → report
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from typing import Any

from dpch.accounting.accountant import Accountant, BudgetStatus
from dpch.accounting.budget import Budget
from dpch.accounting.watches import WatchState
from dpch.errors import DpchError
from dpch.pipeline import accuracy_first, admit, bucket_store, series
from dpch.pipeline.check import Probe
from dpch.pipeline.context import QueryContext
from dpch.pipeline.kinds import release_kind
from dpch.pipeline.plan import PlanCache, PublicDomains, plan_query
from dpch.pipeline.release import Noise
from dpch.pipeline.report import Explanation, Release, explanation_release
from dpch.pipeline.watch import Watches
from dpch.policy.model import TablePolicy
from dpch.policy.resolve import Policy
from dpch.sql.analyze import QueryPlan
from dpch.sql.parse import ParsedQuery, parse_query
from dpch.sql.series_limit import SeriesLimit, find
from dpch.sql.settings import QueryOptions
from dpch.store.engine import Engine


class Session:
    """A private connection for one analyst. Create it with :func:`dpch.connect`.

    ``ledger_fsync`` (default ``$DPCH_LEDGER_FSYNC``, else the ledger table's current setting):
    whether every ledger INSERT fsyncs, so charges survive power loss (docs/filters-and-ledger.md)."""

    #: queries are planned, charged and noised in this process (:class:`dpch.api.PrivateSession`)
    in_process = True

    def __init__(
        self,
        engine: Engine,
        *,
        analyst: str = "default",
        policy: Policy | None = None,
        defaults: QueryOptions | None = None,
        default_budget: Budget | None = None,
        seed: int | None = None,
        filter: str | None = None,
        filter_options: dict[str, Any] | None = None,
        ledger_fsync: bool | None = None,
    ) -> None:
        self.engine = engine
        self.analyst = analyst
        self.policy = policy or Policy()
        self.defaults = (defaults or QueryOptions()).validated()
        if filter is None and self.policy.privacy.get("filter"):  # the policy file's [privacy] choice
            filter = self.policy.privacy["filter"]
            filter_options = filter_options or self.policy.privacy.get("filter_options")
        self.accountant = Accountant(engine, analyst, default_budget=default_budget, filter=filter,
                                     filter_options=filter_options, ledger_fsync=ledger_fsync)
        self.context = QueryContext(engine, self.accountant, Probe(engine), Noise(seed))
        self.public_domains = PublicDomains(engine, self.table_policy)
        self.plans = PlanCache()
        self.accuracy_runs = accuracy_first.AccuracyRuns()
        self.watch_service = Watches(self.context)  # threshold watches (dpch.pipeline.watch)
        #: seconds since the epoch: when a time bucket is final (the release store, dpch.pipeline.bucket_store);
        #: a test replaces it to move time without sleeping
        self.clock: Callable[[], float] = time.time

    # -- queries ---------------------------------------------------------------------------------

    def plan(self, sql: str, **options: Any) -> tuple[QueryPlan, QueryOptions]:
        """Parses and analyzes ``sql``; reads only the policy (and public tables' key domains).
        A text planned before is reused while its policies and domains are unchanged (:class:`PlanCache`)."""
        limited = _series_limit(sql)
        if limited is not None:  # the plan shown for Superset's series limit: its series query's
            return series.presented_plan(self, *limited, options)
        try:
            key: Any = (sql, frozenset(options.items()))
            hash(key)
        except TypeError:  # an unhashable option value: plan without the cache
            key = None

        def build(table_policy: Any, public_domain: Any) -> tuple[QueryPlan, QueryOptions]:
            return plan_query(sql, defaults=self.defaults, overrides=options, table_policy=table_policy,
                              database=self.engine.database, public_domain=public_domain,
                              constants=self.engine.query_rows, describe=self.engine.describe_types)

        if key is None:
            return build(self.table_policy, self.public_domains)
        return self.plans.plan(key, self.table_policy, self.public_domains, build)

    def explain(self, sql: str, **options: Any) -> Explanation:
        """The emitted SQL, sensitivities, noise and cost of ``sql``, without spending anything."""
        limited = _series_limit(sql)
        if limited is not None:  # two releases: the series query's explanation, with their composed cost
            return series.explanation(self, *limited, options)
        plan, opts = self.plan(sql, **options)
        stored = bucket_store.prepare(self, plan, opts, options)
        if stored is not None:  # what the release store would re-serve and release
            return bucket_store.explanation(self, plan, opts, stored)
        return self.explain_plan(plan, opts)

    def explain_plan(self, plan: QueryPlan, opts: QueryOptions) -> Explanation:
        """:meth:`explain` of an already planned query (its kind's :meth:`~dpch.pipeline.kinds.ReleaseKind.explain`)."""
        return release_kind(plan, opts).explain(self, plan, opts)

    def query(self, sql: str, **options: Any) -> Release:
        """Answers ``sql`` privately. Options (``epsilon``, ``delta``, ``mechanism``,
        ``confidence``) may also be given as ``SETTINGS dp_epsilon = ...`` in the SQL.

        ``EXPLAIN DP`` answers the explanation, free; anything else is answered by its kind of release
        (:func:`dpch.pipeline.kinds.release_kind`): the pipeline's stages in order, the charge durable before
        any noise is drawn."""
        started = time.perf_counter()
        limited = _series_limit(sql)
        if limited is not None:  # Superset's series limit: two releases (dpch.pipeline.series)
            return series.answer(self, *limited, options, started)
        plan, opts = self.plan(sql, **options)
        stored = bucket_store.prepare(self, plan, opts, options)
        if plan.query.explain:
            explained = (self.explain_plan(plan, opts) if stored is None
                         else bucket_store.explanation(self, plan, opts, stored))
            return explanation_release(explained, self.budget(), _ms_since(started))
        if stored is not None:  # time buckets: each released once, re-served from the release store
            return bucket_store.answer(self, plan, opts, stored, started)
        return self.release_plan(plan, opts, started)

    def release_plan(self, plan: QueryPlan, opts: QueryOptions, started: float) -> Release:
        """Releases an already planned query as its kind does (the pipeline's stages, one charge)."""
        return release_kind(plan, opts).answer(self, plan, opts, started)

    def refine(self, release_id: str | None = None, *, accuracy: float | None = None,
               relative_error: float | None = None, max_epsilon: float | None = None) -> Release:
        """A less noisy version of an accuracy-first answer (default: the latest), continuing its
        Brownian path; the target defaults to half the achieved half-width. See
        :func:`dpch.pipeline.accuracy_first.refine`."""
        return accuracy_first.refine(self.context, self.accuracy_runs, release_id, accuracy=accuracy,
                                     relative_error=relative_error, max_epsilon=max_epsilon)

    def datasets(self, plan: QueryPlan) -> tuple[str, ...]:
        """The dataset scopes (``db.table``) ``plan`` is admitted by and charged to (docs/design.md rule 8)."""
        return admit.datasets(self.engine.database, plan)

    # -- threshold watches (dpch.pipeline.watch, docs/watches.md) ------------------------------------

    def watch_create(self, name: str, *, epsilon: float, delta: float, threshold: float, upper: float,
                     tables: tuple[str, ...] | list[str] | str, sensitivity: float | None = None,
                     sigma: float | None = None, instances: int | None = None,
                     lower: float = 0.0) -> WatchState:
        """Registers a threshold watch and reserves its (ε, δ) now (:meth:`Watches.create`)."""
        return self.watch_service.create(name, epsilon=epsilon, delta=delta, threshold=threshold, upper=upper,
                                         tables=(tables,) if isinstance(tables, str) else tuple(tables),
                                         table_policy=self.table_policy, sensitivity=sensitivity, sigma=sigma,
                                         instances=instances, lower=lower)

    def watch_close(self, name: str) -> WatchState:
        """Closes a watch and settles its reservation (:meth:`Watches.close`)."""
        return self.watch_service.close(name)

    def watch_state(self, name: str) -> WatchState:
        """A watch's current state."""
        return self.watch_service.state(name)

    def watches(self) -> list[WatchState]:
        """The analyst's watches (``dpch budget`` lists them)."""
        return self.watch_service.list()

    # -- budget and schema -----------------------------------------------------------------------

    def budget(self) -> BudgetStatus:
        """The analyst's budget, spent, and remaining."""
        return self.accountant.status()

    def table_policy(self, table: str) -> TablePolicy:
        return self.policy.table(self.engine, table)

    def tables(self) -> list[TablePolicy]:
        """Policies of the tables in the database that have one (private or public). A table whose
        annotations are invalid is left out of the list (querying it names what is wrong); anything
        else that fails (the store, the connection) is raised, not hidden."""
        result = []
        for name in self.engine.list_tables():
            if name.startswith("dpch_"):
                continue
            try:
                policy = self.table_policy(name)
            except DpchError:
                continue
            if policy.private or policy.public:
                result.append(policy)
        return result

    def close(self) -> None:
        self.engine.close()

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@functools.lru_cache(maxsize=256)
def _series_limit(sql: str) -> tuple[ParsedQuery, SeriesLimit] | None:
    """``sql`` parsed and split when it is a series limit (a JOIN of a top-N subquery); None for any other
    query, and for text that does not parse (the planner then refuses it in words). Cached by text: plan,
    explain and query each ask, and a refreshed JOIN query would otherwise be parsed again each time (the
    trees are only read and copied, never changed in place)."""
    if "join" not in sql.lower():
        return None
    try:
        parsed = parse_query(sql)
    except DpchError:
        return None
    limit = find(parsed.select)
    return None if limit is None else (parsed, limit)


def _ms_since(started: float) -> float:
    return (time.perf_counter() - started) * 1000.0
