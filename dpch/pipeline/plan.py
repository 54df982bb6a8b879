"""Stage 1, plan: SQL text → (QueryPlan, QueryOptions). Reads only the policy and, for keys
joined from a public table, that table's distinct values (public data: reading it is free).
Nothing private is read and nothing is spent."""

from __future__ import annotations

import dataclasses
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass
from typing import Any

from dpch.errors import QueryRejected
from dpch.pipeline.calibrate import shared_count
from dpch.policy.model import TablePolicy
from dpch.sql.aggregate_kinds import statistic
from dpch.sql.analyze import MAX_GROUPS, QueryPlan, analyze
from dpch.sql.contribution import better
from dpch.sql.expression_types import Describe
from dpch.sql.limits import too_deep
from dpch.sql.parse import parse_query
from dpch.sql.relation import quote
from dpch.sql.settings import QueryOptions, option_overrides
from dpch.sql.time_constants import ConstantQuery
from dpch.store.cancel import check_cancelled
from dpch.store.engine import Engine

#: seconds a public table's key domain is reused before it is read again
PUBLIC_DOMAIN_TTL = 60.0


class PublicDomains:
    """The distinct values of public tables' columns, cached for :data:`PUBLIC_DOMAIN_TTL` seconds."""

    def __init__(self, engine: Engine, table_policy: Callable[[str], TablePolicy]) -> None:
        self.engine = engine
        self.table_policy = table_policy
        self._cache: dict[tuple[str, str], tuple[float, tuple[Any, ...]]] = {}
        self._lock = threading.Lock()

    def __call__(self, table: str, column: str) -> tuple[Any, ...]:
        with self._lock:
            cached = self._cache.get((table, column))
        if cached is not None and time.monotonic() - cached[0] < PUBLIC_DOMAIN_TTL:
            return cached[1]
        if not self.table_policy(table).public:
            raise QueryRejected(f"table {table} is not public")
        rows = self.engine.query_rows(
            f"SELECT DISTINCT {quote(column)} FROM {self.engine.table(table)} ORDER BY 1 LIMIT {MAX_GROUPS + 1}"
        )
        domain = tuple(r[0] for r in rows)
        with self._lock:
            self._cache[(table, column)] = (time.monotonic(), domain)
        return domain


def plan_query(
    sql: str,
    *,
    defaults: QueryOptions,
    overrides: Mapping[str, Any],
    table_policy: Callable[[str], TablePolicy],
    database: str,
    public_domain: Callable[[str, str], tuple[Any, ...]],
    constants: ConstantQuery | None = None,
    describe: Describe | None = None,
) -> tuple[QueryPlan, QueryOptions]:
    """Parses and analyzes ``sql``. Options: the session's ``defaults``, then the caller's
    ``overrides``, then the query's own ``SETTINGS dp_…`` (the last word wins). ``constants`` runs
    SELECTs that read no table (date and time constants, time-bucket domains); ``describe`` types row
    expressions in ClickHouse (the registry's argument rules, :mod:`dpch.sql.functions`)."""
    parsed = parse_query(sql)  # refuses a text past the planner's limits (dpch.sql.limits) before parsing it
    opts = defaults.with_overrides(dict(overrides)).with_overrides(option_overrides(parsed.settings)).validated()
    check_cancelled()  # a request already answered (a gateway timeout) plans no further
    def analyzed(per_group: tuple[int | None, int | None] | None = None) -> QueryPlan:
        try:
            return analyze(parsed, table_policy, database, public_domain, constants, describe, per_group)
        except RecursionError:  # within the limits, analysis fits Python's stack; this is the net under them
            raise too_deep() from None

    plan = analyzed()
    if opts.mechanism is None and plan.partition_selection and shared_count(plan, "laplace") is not None:
        # a private key's count of units: Laplace thresholding releases the selection's own noisy count
        # with the whole ε (one mechanism), where the default Gaussian would split ε and δ between a
        # selection and a separate noisy count (issue 16, part 4; docs/sql-reference.md "Grouping")
        opts = dataclasses.replace(opts, mechanism="laplace")
    return with_bound_report(choose_bound(plan, opts, analyzed), opts), opts


def with_bound_report(plan: QueryPlan, opts: QueryOptions) -> QueryPlan:
    """The plan with ``dp_report_dropped``'s exact inputs emitted beside its measures, when asked; refused, in
    words, where no contribution bound can drop a row (decided from the plan alone, never the data)."""
    if not opts.report_dropped:
        return plan
    if not plan.relation.needs_cap:
        raise QueryRejected("dp_report_dropped: this query's rows are not bounded per unit, so nothing is dropped",
                            hint="drop dp_report_dropped (it reports what a contribution bound drops)")
    return dataclasses.replace(plan, report_dropped=True)


def choose_bound(plan: QueryPlan, opts: QueryOptions,
                 analyzed: Callable[[tuple[int | None, int | None]], QueryPlan]) -> QueryPlan:
    """The plan under the contribution bound the query gets (:mod:`dpch.sql.contribution`), from the plan
    and the options alone (never the data): the per-group bound where the analyst asked for it
    (``dp_bound = 'groups'``, ``dp_max_groups``, ``dp_max_rows_per_group``; refused, saying why, where it
    cannot apply); else, where the owner annotated ``max_rows_per_group`` and ``dp_bound`` is not
    ``'rows'``, whichever bound gives less noise (:func:`dpch.sql.contribution.better`); else the row cap.
    ``analyzed`` re-analyses the query under a per-group bound (G, c; None: the owner's)."""
    asked = (opts.max_groups, opts.max_rows_per_group)
    if opts.bound == "groups" or asked != (None, None):
        return analyzed(asked)
    if opts.bound == "rows" or not plan.keys or plan.relation.max_rows_per_group is None or not plan.measures \
            or any(statistic(stat).selected for stat in plan.stats.values()):
        return plan
    try:
        candidate = analyzed((None, None))
    except QueryRejected:  # not applicable to this query (the reason is the analyst's only if asked for)
        return plan
    groups = (candidate.groups_per_unit, plan.groups_per_unit) if plan.partition_selection else None
    new = [(m.sensitivity, m.l2_sensitivity) for m in candidate.measures]
    old = [(m.sensitivity, m.l2_sensitivity) for m in plan.measures]
    return candidate if better(new, old, opts.resolved_mechanism, groups) else plan


@dataclass(frozen=True)
class _Planned:
    plan: QueryPlan
    opts: QueryOptions
    #: what the plan was built from: each table's policy and each public key domain it read
    policies: tuple[tuple[str, TablePolicy], ...]
    domains: tuple[tuple[tuple[str, str], tuple[Any, ...]], ...]


class PlanCache:
    """Plans of recently planned query texts, reused while everything they were built from is unchanged.

    Planning is a pure function of the text, the options, the policies of the tables it names and the
    public key domains it reads (nothing private). A dashboard repeats the same texts, and parsing,
    analysing and rendering cost ~3 ms a query, a fifth of a small release's CPU; so a plan is kept
    with the policies and domains it read, and reused only if looking them up again gives equal
    ones (a changed annotation, a policy re-read after its TTL with different content, a verification
    gone stale, new values in a public table: each plans afresh). A plan is never modified by the
    stages that use it, so it can be shared by the queries of one session.
    """

    def __init__(self, size: int = 256) -> None:
        self.size = size
        self._entries: OrderedDict[Hashable, _Planned] = OrderedDict()
        #: the emitted SQL of cached plans, by the plan's identity (the plan is kept, so its id is not reused)
        self._emitted: OrderedDict[int, tuple[QueryPlan, str]] = OrderedDict()
        self._lock = threading.Lock()
        #: lookups answered from the cache / planned afresh (tests and benchmarks read them)
        self.hits = 0
        self.misses = 0

    def plan(self, key: Hashable, table_policy: Callable[[str], TablePolicy],
             public_domain: Callable[[str, str], tuple[Any, ...]],
             build: Callable[[Callable[[str], TablePolicy], Callable[[str, str], tuple[Any, ...]]],
                             tuple[QueryPlan, QueryOptions]]) -> tuple[QueryPlan, QueryOptions]:
        """The plan for ``key`` (the text and options): cached if still valid, else ``build``'s,
        which gets recording versions of ``table_policy`` and ``public_domain``."""
        with self._lock:
            entry = self._entries.get(key)
        if entry is not None and self._valid(entry, table_policy, public_domain):
            with self._lock:
                self.hits += 1
                if key in self._entries:
                    self._entries.move_to_end(key)
            return entry.plan, entry.opts
        policies: dict[str, TablePolicy] = {}
        domains: dict[tuple[str, str], tuple[Any, ...]] = {}

        def recording_policy(table: str) -> TablePolicy:
            policies[table] = policy = table_policy(table)
            return policy

        def recording_domain(table: str, column: str) -> tuple[Any, ...]:
            domains[(table, column)] = domain = public_domain(table, column)
            return domain

        plan, opts = build(recording_policy, recording_domain)  # a refusal is raised, never cached
        with self._lock:
            self.misses += 1
            if plan.volatile:  # it holds the value now() or today() had when it was planned
                return plan, opts
            self._entries[key] = _Planned(plan, opts, tuple(policies.items()), tuple(domains.items()))
            self._entries.move_to_end(key)
            while len(self._entries) > self.size:
                self._entries.popitem(last=False)
        return plan, opts

    def emitted(self, plan: QueryPlan, render: Callable[[QueryPlan], str]) -> str:
        """``render(plan)`` (the emitted SQL, a pure function of the plan), rendered once per plan."""
        with self._lock:
            found = self._emitted.get(id(plan))
        if found is not None and found[0] is plan:
            return found[1]
        text = render(plan)
        with self._lock:
            self._emitted[id(plan)] = (plan, text)
            while len(self._emitted) > self.size:
                self._emitted.popitem(last=False)
        return text

    @staticmethod
    def _valid(entry: _Planned, table_policy: Callable[[str], TablePolicy],
               public_domain: Callable[[str, str], tuple[Any, ...]]) -> bool:
        for table, policy in entry.policies:
            now = table_policy(table)
            if now is not policy and now != policy:
                return False
        for (table, column), domain in entry.domains:
            now_domain = public_domain(table, column)
            if now_domain is not domain and now_domain != domain:
                return False
        return True
