"""PrivateSession: policy + engine + filter. ``query(sql)`` returns a :class:`Release`.

One query, in order (DESIGN.md "Data flow"):

1. parse and analyze the SQL against the policy (nothing read, nothing spent);
2. calibrate one mechanism per measure from its sensitivity and its share of ε (and δ);
3. admit the total cost and write the charge to the ledger, durably, under the analyst's lock;
4. run dpch's emitted SQL in ClickHouse (exact aggregates stay in this process);
5. draw the noise, post-process, and return values with intervals and the cost.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from dpch.accounting.accountant import Accountant, BudgetStatus
from dpch.accounting.budget import Budget
from dpch.engine import Engine
from dpch.errors import BudgetExceeded
from dpch.mechanisms.cost import PrivacyCost
from dpch.mechanisms.gaussian import GaussianMechanism
from dpch.mechanisms.laplace import LaplaceMechanism
from dpch.mechanisms.sampling import NoiseSource
from dpch.policy.model import TablePolicy
from dpch.policy.resolve import Policy
from dpch.postprocess import average, count_or_sum, order_and_limit
from dpch.release import MeasureReport, Release
from dpch.sql.analyze import QueryPlan, analyze
from dpch.sql.parse import parse_query
from dpch.sql.rewrite import emit_probe_sql, emit_sql
from dpch.sql.settings import QueryOptions, option_overrides

Mechanism = LaplaceMechanism | GaussianMechanism


@dataclass(frozen=True)
class Explanation:
    """What a query would do and cost, computed without reading data or spending budget."""

    sql: str
    plan: QueryPlan
    options: QueryOptions
    measures: list[MeasureReport]
    cost: PrivacyCost
    admissible: bool
    reason: str

    def describe(self) -> str:
        lines = [f"table {self.plan.table.table} (privacy unit {self.plan.table.privacy_unit}, "
                 f"≤ {self.plan.table.contribution_cap} rows per unit)"]
        if self.plan.keys:
            groups = len(self.plan.group_domain)
            lines.append(f"groups: {groups} (declared keys of {', '.join(k.column for k in self.plan.keys)})")
        lines.append(f"mechanism: {self.options.resolved_mechanism}, "
                     f"{int(self.options.confidence * 100)}% intervals")
        for m in self.measures:
            lines.append(
                f"  {m.name}: {m.expression}\n"
                f"      sensitivity {m.sensitivity:g} ({m.derivation})\n"
                f"      ε {m.epsilon:g}" + (f", δ {m.delta:g}" if m.delta else "")
                + f", noise scale {m.noise_scale:.4g}, ± {m.half_width:.4g}"
            )
        lines.append(f"cost: ε {self.cost.epsilon:g}" + (f", δ {self.cost.delta:g}" if self.cost.delta else ""))
        lines.append(f"budget check: {'admissible' if self.admissible else 'REFUSED — ' + self.reason}")
        lines.append("emitted SQL:")
        lines.append(f"  {self.sql}")
        return "\n".join(lines)


class Session:
    """A private connection for one analyst. Create it with :func:`dpch.connect`."""

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
    ) -> None:
        self.engine = engine
        self.analyst = analyst
        self.policy = policy or Policy()
        self.defaults = (defaults or QueryOptions()).validated()
        self.accountant = Accountant(engine, analyst, default_budget=default_budget, filter=filter,
                                     filter_options=filter_options)
        self._noise = NoiseSource(seed)
        self._noise_lock = threading.Lock()
        self._probed: set[str] = set()

    # -- queries ---------------------------------------------------------------------------------

    def plan(self, sql: str, **options: Any) -> tuple[QueryPlan, QueryOptions]:
        """Parses and analyzes ``sql``; reads only the policy."""
        parsed = parse_query(sql)
        opts = self.defaults.with_overrides(options).with_overrides(option_overrides(parsed.settings))
        opts = opts.validated()
        plan = analyze(parsed, self.table_policy, self.engine.database)
        return plan, opts

    def explain(self, sql: str, **options: Any) -> Explanation:
        """The emitted SQL, sensitivities, noise and cost of ``sql``, without spending anything."""
        plan, opts = self.plan(sql, **options)
        mechanisms = self._mechanisms(plan, opts)
        cost = _total_cost(mechanisms.values())
        try:
            self.accountant.check(cost, dataset=f"{self.engine.database}.{plan.table.table}")
            admissible, reason = True, "within budget"
        except BudgetExceeded as exc:
            admissible, reason = False, exc.message
        return Explanation(
            sql=emit_sql(plan, self.engine.database),
            plan=plan,
            options=opts,
            measures=self._reports(plan, opts, mechanisms),
            cost=cost,
            admissible=admissible,
            reason=reason,
        )

    def query(self, sql: str, **options: Any) -> Release:
        """Answers ``sql`` privately. Options (``epsilon``, ``delta``, ``mechanism``,
        ``confidence``) may also be given as ``SETTINGS dp_epsilon = ...`` in the SQL."""
        started = time.perf_counter()
        plan, opts = self.plan(sql, **options)
        mechanisms = self._mechanisms(plan, opts)
        cost = _total_cost(mechanisms.values())
        emitted = emit_sql(plan, self.engine.database)
        self._probe(plan, emitted)

        # The charge is durable before ClickHouse runs and before any noise is drawn.
        entry = self.accountant.charge(
            cost,
            dataset=f"{self.engine.database}.{plan.table.table}",
            query_hash=plan.query.fingerprint,
            mechanism=opts.resolved_mechanism,
        )
        exact = self._exact_measures(plan, emitted)
        with self._noise_lock:
            noisy = {name: mech.release(exact[name], self._noise) for name, mech in mechanisms.items()}
        rows, intervals = self._rows(plan, opts, mechanisms, noisy)
        rows, intervals = order_and_limit(plan, rows, intervals)
        return Release(
            columns=plan.columns,
            rows=rows,
            intervals=intervals,
            cost=cost,
            confidence=opts.confidence,
            mechanism=opts.resolved_mechanism,
            measures=self._reports(plan, opts, mechanisms),
            budget=self.accountant.status(),
            release_id=entry.release_id,
            elapsed_ms=(time.perf_counter() - started) * 1000.0,
            notes=_notes(plan, mechanisms),
        )

    # -- budget and schema -----------------------------------------------------------------------

    def budget(self) -> BudgetStatus:
        """The analyst's budget, spent, and remaining."""
        return self.accountant.status()

    def table_policy(self, table: str) -> TablePolicy:
        return self.policy.table(self.engine, table)

    def tables(self) -> list[TablePolicy]:
        """Policies of the tables in the database that have one (private or public)."""
        result = []
        for name in self.engine.list_tables():
            if name.startswith("dpch_"):
                continue
            try:
                policy = self.table_policy(name)
            except Exception:
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

    # -- internals -------------------------------------------------------------------------------

    def _mechanisms(self, plan: QueryPlan, opts: QueryOptions) -> dict[str, Mechanism]:
        """One mechanism per measure; ε (and δ) split evenly over the measures."""
        share = len(plan.measures)
        result: dict[str, Mechanism] = {}
        for m in plan.measures:
            if opts.resolved_mechanism == "gaussian":
                result[m.name] = GaussianMechanism(
                    opts.epsilon / share, opts.delta / share, m.sensitivity, integer=m.integer,
                    dimension=len(plan.group_domain),
                )
            else:
                result[m.name] = LaplaceMechanism(opts.epsilon / share, m.sensitivity, integer=m.integer)
        return result

    def _probe(self, plan: QueryPlan, emitted: str) -> None:
        """Type-checks the query on a synthetic row before the charge (cached per emitted SQL)."""
        if emitted in self._probed:
            return
        self.engine.probe(emit_probe_sql(plan, self.engine.database))
        if len(self._probed) > 1024:
            self._probed.clear()
        self._probed.add(emitted)

    def _exact_measures(self, plan: QueryPlan, sql: str) -> dict[str, np.ndarray]:
        """Runs the emitted SQL; returns each measure as a vector over the declared group domain."""
        rows = self.engine.run_private(sql)
        nkeys = len(plan.keys)
        index = {tuple(_key(v) for v in domain_key): i for i, domain_key in enumerate(plan.group_domain)}
        exact = {m.name: np.zeros(len(plan.group_domain)) for m in plan.measures}
        for row in rows:
            position = index.get(tuple(_key(v) for v in row[:nkeys]))
            if position is None:  # cannot happen: the SQL keeps declared keys only
                continue
            for j, m in enumerate(plan.measures):
                value = row[nkeys + j]
                exact[m.name][position] = float(value) if value is not None else 0.0
        return exact

    def _rows(
        self,
        plan: QueryPlan,
        opts: QueryOptions,
        mechanisms: dict[str, Mechanism],
        noisy: dict[str, np.ndarray],
    ) -> tuple[list[tuple[Any, ...]], list[list[tuple[float, float] | None]]]:
        columns: list[list[Any]] = []
        column_intervals: list[list[tuple[float, float] | None]] = []
        groups = len(plan.group_domain)
        half_beta = 1.0 - (1.0 - opts.confidence) / 2.0
        for out in plan.outputs:
            if out.kind == "key":
                assert out.key_index is not None
                columns.append([g[out.key_index] for g in plan.group_domain])
                column_intervals.append([None] * groups)
            elif out.kind in ("count", "sum"):
                assert out.measure is not None
                mech = mechanisms[out.measure]
                values, ivs = count_or_sum(noisy[out.measure], mech.half_width(opts.confidence))
                columns.append(values)
                column_intervals.append(list(ivs))
            else:
                assert out.measure and out.count_measure and out.bounds
                s_mech, c_mech = mechanisms[out.measure], mechanisms[out.count_measure]
                values, ivs = average(
                    noisy[out.measure], noisy[out.count_measure],
                    s_mech.half_width(half_beta), c_mech.half_width(half_beta), out.bounds,
                )
                columns.append(values)
                column_intervals.append(list(ivs))
        rows = [tuple(col[i] for col in columns) for i in range(groups)]
        intervals = [[col[i] for col in column_intervals] for i in range(groups)]
        return rows, intervals

    def _reports(
        self, plan: QueryPlan, opts: QueryOptions, mechanisms: dict[str, Mechanism]
    ) -> list[MeasureReport]:
        reports = []
        for m in plan.measures:
            mech = mechanisms[m.name]
            scale = mech.sigma if isinstance(mech, GaussianMechanism) else mech.scale
            reports.append(
                MeasureReport(
                    name=m.name, expression=m.sql, sensitivity=m.sensitivity,
                    derivation=m.derivation, mechanism=mech.name, epsilon=mech.cost.epsilon,
                    delta=mech.cost.delta, noise_scale=scale,
                    half_width=mech.half_width(opts.confidence),
                )
            )
        return reports


def _total_cost(mechanisms: Sequence[Mechanism] | Any) -> PrivacyCost:
    total = PrivacyCost.zero()
    for mech in mechanisms:
        total = total + mech.cost
    return total


def _key(value: Any) -> str:
    return str(value)


def _notes(plan: QueryPlan, mechanisms: dict[str, Mechanism]) -> list[str]:
    notes = []
    if len(mechanisms) > 1:
        shares = ", ".join(f"{name} ε {mech.cost.epsilon:g}" for name, mech in mechanisms.items())
        notes.append(f"budget split evenly over {len(mechanisms)} noisy measures: {shares}")
    if any(o.kind == "avg" for o in plan.outputs):
        notes.append("avg = mid + noisy centred sum / noisy count, clipped to the column bounds; "
                     "its interval is conservative (union bound)")
    return notes


def connect(
    dsn: str | None = None,
    *,
    analyst: str = "default",
    policy: Policy | str | None = None,
    database: str | None = None,
    epsilon: float | None = None,
    delta: float | None = None,
    confidence: float | None = None,
    default_budget: Budget | None = None,
    seed: int | None = None,
    filter: str | None = None,
    filter_options: dict[str, Any] | None = None,
) -> Session:
    """Opens a private session.

    ``dsn``: ``chdb:///path`` (embedded; default ``$DPCH_DSN`` or ``./dpch-data``) or
    ``http://user:pass@host:8123/db``. ``policy``: a :class:`Policy` or a path to a policy TOML
    that overrides the tables' ``dp:`` annotations. ``epsilon``/``delta``/``confidence`` set
    this session's per-query defaults. ``seed`` fixes the noise for tests only (refused unless
    ``DPCH_ALLOW_FIXED_SEED=1``). ``filter``/``filter_options`` choose the privacy filter
    (see :mod:`dpch.accounting.filters`; default ``$DPCH_FILTER`` or ``basic``; a filter the data
    owner set with ``dpch budget set --filter`` wins).
    """
    if isinstance(policy, str):
        policy = Policy.from_toml(policy)
    overrides: dict[str, Any] = {}
    if epsilon is not None:
        overrides["epsilon"] = epsilon
    if delta is not None:
        overrides["delta"] = delta
    if confidence is not None:
        overrides["confidence"] = confidence
    defaults = QueryOptions().with_overrides(overrides)
    if seed is not None:
        NoiseSource(seed)  # raises before the store is opened if seeds are not allowed
    engine = Engine(dsn, database=database)
    try:
        return Session(
            engine, analyst=analyst, policy=policy, defaults=defaults,
            default_budget=default_budget, seed=seed, filter=filter, filter_options=filter_options,
        )
    except Exception:
        engine.close()
        raise
