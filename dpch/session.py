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
from dataclasses import dataclass
from typing import Any

import numpy as np

from dpch.accounting.accountant import Accountant, BudgetStatus, qualified_datasets
from dpch.accounting.budget import Budget
from dpch.errors import BudgetExceeded, QueryRejected
from dpch.mechanisms.gaussian import GaussianMechanism
from dpch.mechanisms.sampling import NoiseSource
from dpch.pipeline.calibrate import NoisePlan, calibrate
from dpch.pipeline.postprocess import (
    GroupData,
    build_rows,
    pick_quantiles,
    post_order,
    rank_error,
    stat_intervals,
    stat_values,
)
from dpch.pipeline.report import MeasureReport, Release
from dpch.policy.model import TablePolicy
from dpch.policy.resolve import Policy
from dpch.privacy.cost import PrivacyCost
from dpch.sql.analyze import MAX_GROUPS, QueryPlan, analyze
from dpch.sql.parse import parse_query
from dpch.sql.relation import quote
from dpch.sql.rewrite import emit_probe_sqls, emit_sql
from dpch.sql.settings import QueryOptions, given_options, option_overrides
from dpch.store.engine import Engine, default_dsn


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
    notes: list[str]

    def describe(self) -> str:
        relation = self.plan.relation
        tables = ", ".join(
            f"{t.table} (unit {t.privacy_unit}, ≤ {t.contribution_cap} rows per unit)" if t.private
            else f"{t.table} (public)"
            for t in relation.tables
        )
        lines = [f"tables: {tables}", f"contribution cap: ≤ {relation.cap} rows per unit"]
        if self.plan.keys:
            origins = "; ".join(f"{k.label}: {k.origin}" for k in self.plan.keys)
            groups = ("chosen by partition selection" if self.plan.partition_selection
                      else str(len(self.plan.group_domain)))
            lines.append(f"groups: {groups} ({origins})")
        lines.append(f"mechanism: {self.options.resolved_mechanism}, {self.options.confidence:.0%} intervals")
        for m in self.measures:
            lines.append(
                f"  {m.name}: {m.expression}\n"
                f"      sensitivity {m.sensitivity:g} ({m.derivation})\n"
                f"      {m.mechanism}: ε {m.epsilon:g}" + (f", δ {m.delta:g}" if m.delta else "")
                + (f", noise scale {m.noise_scale:.4g}, ± {m.half_width:.4g}" if m.noise_scale else "")
            )
        lines.append(f"cost: ε {self.cost.epsilon:g}" + (f", δ {self.cost.delta:g}" if self.cost.delta else ""))
        lines.extend(f"note: {n}" for n in self.notes)
        lines.append(f"budget check: {'admissible' if self.admissible else 'REFUSED — ' + self.reason}")
        lines.append("emitted SQL:")
        lines.append(f"  {self.sql}")
        return "\n".join(lines)


#: seconds a public table's key domain is reused before it is read again
PUBLIC_DOMAIN_TTL = 60.0


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
        if filter is None and self.policy.privacy.get("filter"):  # the policy file's [privacy] choice
            filter = self.policy.privacy["filter"]
            filter_options = filter_options or self.policy.privacy.get("filter_options")
        self.accountant = Accountant(engine, analyst, default_budget=default_budget, filter=filter,
                                     filter_options=filter_options)
        self._noise = NoiseSource(seed)
        self._noise_lock = threading.Lock()
        self._probed: set[str] = set()
        self._domains: dict[tuple[str, str], tuple[float, tuple]] = {}

    # -- queries ---------------------------------------------------------------------------------

    def plan(self, sql: str, **options: Any) -> tuple[QueryPlan, QueryOptions]:
        """Parses and analyzes ``sql``; reads only the policy (and public tables' key domains)."""
        parsed = parse_query(sql)
        opts = self.defaults.with_overrides(options).with_overrides(option_overrides(parsed.settings))
        opts = opts.validated()
        plan = analyze(parsed, self.table_policy, self.engine.database, self._public_domain)
        return plan, opts

    def explain(self, sql: str, **options: Any) -> Explanation:
        """The emitted SQL, sensitivities, noise and cost of ``sql``, without spending anything."""
        plan, opts = self.plan(sql, **options)
        return self._explanation(plan, opts)

    def _explanation(self, plan: QueryPlan, opts: QueryOptions) -> Explanation:
        noise = calibrate(plan, opts)
        try:
            self.accountant.check(noise.cost, datasets=self.datasets(plan))
            admissible, reason = True, "within budget"
        except BudgetExceeded as exc:
            admissible, reason = False, exc.message
        return Explanation(
            sql=emit_sql(plan, self.engine.database),
            plan=plan,
            options=opts,
            measures=self._reports(plan, opts, noise),
            cost=noise.cost,
            admissible=admissible,
            reason=reason,
            notes=_notes(plan, noise, opts),
        )

    def query(self, sql: str, **options: Any) -> Release:
        """Answers ``sql`` privately. Options (``epsilon``, ``delta``, ``mechanism``,
        ``confidence``) may also be given as ``SETTINGS dp_epsilon = ...`` in the SQL."""
        started = time.perf_counter()
        plan, opts = self.plan(sql, **options)
        if plan.query.explain:
            return self._explain_release(plan, opts, started)
        if opts.accuracy_first:  # dp_accuracy / dp_relative_error: noise reduction (dpch.accuracy)
            from dpch.accuracy import run

            return run.answer(self, plan, opts, started)
        noise = calibrate(plan, opts)
        emitted = emit_sql(plan, self.engine.database)
        self._probe(plan, emitted)

        # The charge is durable before ClickHouse runs and before any noise is drawn.
        entry = self.accountant.charge(
            noise.cost,
            datasets=self.datasets(plan),
            query_hash=plan.query.fingerprint,
            mechanism=opts.resolved_mechanism,
        )
        # From here on any failure may depend on the data: the tripwire (DESIGN.md rule 5).
        with self.accountant.tripwire(entry):
            data = self._exact(plan, emitted)
            with self._noise_lock:
                columns, rows, intervals = self.release_rows(plan, opts, noise, data, self._noise)
        return Release(
            columns=columns,
            rows=rows,
            intervals=intervals,
            cost=noise.cost,
            confidence=opts.confidence,
            mechanism=opts.resolved_mechanism,
            measures=self._reports(plan, opts, noise),
            budget=self.accountant.status(),
            release_id=entry.release_id,
            elapsed_ms=(time.perf_counter() - started) * 1000.0,
            notes=_notes(plan, noise, opts),
        )

    def refine(self, release_id: str | None = None, *, accuracy: float | None = None,
               relative_error: float | None = None, max_epsilon: float | None = None) -> Release:
        """A less noisy version of an accuracy-first answer (default: the latest), continuing its
        Brownian path; the target defaults to half the achieved half-width. See :func:`dpch.accuracy.run.refine`."""
        from dpch.accuracy import run

        return run.refine(self, release_id, accuracy=accuracy, relative_error=relative_error,
                          max_epsilon=max_epsilon)

    def _explain_release(self, plan: QueryPlan, opts: QueryOptions, started: float) -> Release:
        """``EXPLAIN DP SELECT ...`` as a one-column result (so every client can show it); free."""
        explanation = self._explanation(plan, opts)
        lines = explanation.describe().splitlines()
        return Release(
            columns=["explain"], rows=[(line,) for line in lines], intervals=[[None] for _ in lines],
            cost=PrivacyCost(0.0, 0.0), confidence=opts.confidence, mechanism="none",
            measures=explanation.measures, budget=self.accountant.status(), release_id="",
            elapsed_ms=(time.perf_counter() - started) * 1000.0,
            notes=[f"EXPLAIN DP spends nothing; running the query would cost ε {explanation.cost.epsilon:g}"
                   + (f", δ {explanation.cost.delta:g}" if explanation.cost.delta else "")],
        )

    def release_rows(
        self, plan: QueryPlan, opts: QueryOptions, noise: NoisePlan, data: GroupData, source: NoiseSource
    ) -> tuple[list[str], list[tuple], list[list[tuple[float, float] | None]]]:
        """Draws the noise for ``data`` and post-processes it into result rows.

        Internal (the audit reuses it to redraw noise on fixed exact inputs); callers must
        have charged ``noise.cost`` first.
        """
        keys, measures, histograms = data.keys, data.measures, data.histograms
        if noise.selection is not None:
            keep = noise.selection.select(data.units, source)
            keys = [k for k, kept in zip(keys, keep, strict=True) if kept]
            measures = {name: arr[keep] for name, arr in measures.items()}
            histograms = {name: [h for h, kept in zip(hs, keep, strict=True) if kept]
                          for name, hs in histograms.items()}
        noisy = {name: mech.release(measures[name], source) for name, mech in noise.additive.items()}
        quantiles = {
            stat.name: pick_quantiles(stat, histograms[stat.measures[0]], noise, source)
            for stat in plan.stats.values() if stat.kind == "quantile"
        }
        values = {name: stat_values(stat, noisy, quantiles) for name, stat in plan.stats.items()}

        def intervals_for(out):
            level = 1.0 - (1.0 - opts.confidence) / max(1, len(set(out.stats)))
            ivs = {name: stat_intervals(plan.stats[name], noisy, noise, level) for name in set(out.stats)}
            return None if any(v is None for v in ivs.values()) else ivs

        rows, intervals = build_rows(plan.outputs, keys, values, intervals_for)
        rows, intervals = _having_order_limit(plan, keys, values, rows, intervals)
        return plan.columns, rows, intervals

    def datasets(self, plan: QueryPlan) -> tuple[str, ...]:
        """The dataset scopes (``db.table``) ``plan`` is admitted by and charged to: each private
        table it reads, once (DESIGN.md rule 8)."""
        return qualified_datasets(self.engine.database, plan.relation.datasets)

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

    def _public_domain(self, table: str, column: str) -> tuple:
        """The distinct values of a column of a *public* table (public data, so reading it is free)."""
        cached = self._domains.get((table, column))
        if cached is not None and time.monotonic() - cached[0] < PUBLIC_DOMAIN_TTL:
            return cached[1]
        policy = self.table_policy(table)
        if not policy.public:
            raise QueryRejected(f"table {table} is not public")
        rows = self.engine.query_rows(
            f"SELECT DISTINCT {quote(column)} FROM {self.engine.table(table)} ORDER BY 1 LIMIT {MAX_GROUPS + 1}"
        )
        domain = tuple(r[0] for r in rows)
        self._domains[(table, column)] = (time.monotonic(), domain)
        return domain

    def _probe(self, plan: QueryPlan, emitted: str) -> None:
        """Type-checks the query on a synthetic row before the charge (cached per emitted SQL)."""
        if emitted in self._probed:
            return
        for probe in emit_probe_sqls(plan, self.engine.database):
            self.engine.probe(probe)
        if len(self._probed) > 1024:
            self._probed.clear()
        self._probed.add(emitted)

    def _exact(self, plan: QueryPlan, sql: str) -> GroupData:
        """Runs the emitted SQL; returns the exact inputs of every group (never leaves dpch)."""
        rows = self.engine.run_private(sql)
        nkeys = len(plan.keys)
        additive = [m for m in plan.measures if m.kind != "histogram"]
        hists = [m for m in plan.measures if m.kind == "histogram"]
        columns = {m.name: nkeys + j for j, m in enumerate(plan.measures)}
        if plan.group_domain is not None:
            keys = list(plan.group_domain)
            index = {tuple(_key(v) for v in k): i for i, k in enumerate(keys)}
            positions = []
            for row in rows:
                position = index.get(tuple(_key(v) for v in row[:nkeys]))
                if position is not None:  # the SQL keeps declared keys only
                    positions.append((position, row))
        else:
            keys = [tuple(row[:nkeys]) for row in rows]
            positions = list(enumerate(rows))
        measures = {m.name: np.zeros(len(keys)) for m in additive}
        histograms: dict[str, list[dict[int, int]]] = {m.name: [{} for _ in keys] for m in hists}
        units = np.zeros(len(keys))
        for position, row in positions:
            for m in additive:
                value = row[columns[m.name]]
                measures[m.name][position] = float(value) if value is not None else 0.0
            for m in hists:
                bins, counts = row[columns[m.name]]
                histograms[m.name][position] = dict(zip(bins, counts, strict=True))
            if plan.partition_selection:
                units[position] = float(row[-1])
        return GroupData(keys=keys, measures=measures, histograms=histograms, units=units)

    def _exact_measures(self, plan: QueryPlan, sql: str) -> dict[str, np.ndarray]:
        """The exact additive measures per group (tests of sensitivity use it)."""
        return self._exact(plan, sql).measures

    def _reports(self, plan: QueryPlan, opts: QueryOptions, noise: NoisePlan) -> list[MeasureReport]:
        reports = []
        for m in plan.measures:
            if m.name in noise.additive:
                mech = noise.additive[m.name]
                scale = mech.sigma if isinstance(mech, GaussianMechanism) else mech.scale
                reports.append(MeasureReport(
                    name=m.name, expression=m.sql, sensitivity=m.l2_sensitivity if mech.name == "gaussian"
                    else m.sensitivity, derivation=m.derivation, mechanism=mech.name,
                    epsilon=mech.cost.epsilon, delta=mech.cost.delta, noise_scale=scale,
                    half_width=mech.half_width(opts.confidence)))
        measures = {m.name: m for m in plan.measures}
        for stat_name, em in noise.selectors.items():  # one exponential mechanism per quantile
            stat = plan.stats[stat_name]
            m = measures[stat.measures[0]]
            reports.append(MeasureReport(
                name=f"{m.name}:{stat_name}", expression=f"{stat.label} over {m.sql}", sensitivity=m.sensitivity,
                derivation=m.derivation, mechanism="exponential", epsilon=em.epsilon, delta=0.0, noise_scale=0.0,
                half_width=0.0))
        if noise.selection is not None:
            sel = noise.selection
            reports.append(MeasureReport(
                name="units", expression=f"uniqExact({plan.relation.unit_name}) per key", sensitivity=float(
                    plan.groups_per_unit), derivation=f"one unit touches at most {plan.groups_per_unit} keys",
                mechanism="partition selection", epsilon=sel.epsilon, delta=sel.delta,
                noise_scale=float(sel.scale), half_width=0.0))
        return reports


def _having_order_limit(plan: QueryPlan, keys: list[tuple], values: dict[str, np.ndarray],
                        rows: list[tuple], intervals: list[list]) -> tuple[list[tuple], list[list]]:
    """HAVING, ORDER BY and LIMIT/OFFSET on the noisy values (post-processing)."""
    order = post_order(plan, keys, values)
    return [rows[g] for g in order], [intervals[g] for g in order]


def _key(value: Any) -> str:
    return str(value)


def _notes(plan: QueryPlan, noise: NoisePlan, opts: QueryOptions) -> list[str]:
    notes = []
    parts = noise.parts
    if len(parts) > 1:
        shares = ", ".join(f"{name} ε {cost.epsilon:.4g}" + (f" δ {cost.delta:.2g}" if cost.delta else "")
                           for name, cost in parts)
        notes.append(f"budget split evenly over {len(parts)} noisy parts: {shares}")
    kinds = {s.kind for s in plan.stats.values()}
    if kinds & {"avg", "var"}:
        notes.append("avg/var/stddev are computed from noisy sums and counts, clipped to the value bounds; "
                     "their intervals are conservative (union bound)")
    for stat in plan.stats.values():
        if stat.kind == "quantile":
            notes.append(f"{stat.label}: exponential mechanism on a grid of {stat.grid[2]} points; with "
                         f"{opts.confidence:.0%} confidence its rank is within "
                         f"{rank_error(stat, noise, opts.confidence):.0f} rows of the exact quantile's")
    if noise.selection is not None:
        notes.append(f"keys released by partition selection: a key appears only if its noisy count of distinct "
                     f"units exceeds {noise.selection.threshold:g}")
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
    password: str | None = None,
    filter: str | None = None,
    filter_options: dict[str, Any] | None = None,
) -> Session:
    """Opens a private session.

    ``dsn``: ``chdb:///path`` (embedded; default ``$DPCH_DSN`` or ``./dpch-data``) or
    ``http://user:pass@host:8123/db``. ``policy``: a :class:`Policy` or a path to a policy TOML
    that overrides the tables' ``dp:`` annotations. ``epsilon``/``delta``/``confidence`` set
    this session's per-query defaults. ``seed`` fixes the noise for tests only (refused unless
    ``DPCH_ALLOW_FIXED_SEED=1``).

    ``dpch://host:port[/db]`` opens a remote session on a ``dpch serve`` gateway instead
    (``analyst`` and ``password`` are the gateway user's; see :mod:`dpch.server.client`).
    ``DPCH_ALLOW_FIXED_SEED=1``). ``filter``/``filter_options`` choose the privacy filter
    (see :mod:`dpch.accounting.filters`; default ``$DPCH_FILTER`` or ``basic``; a filter the data
    owner set with ``dpch budget set --filter`` wins).
    """
    if isinstance(policy, str):
        policy = Policy.from_toml(policy)
    overrides = given_options(epsilon=epsilon, delta=delta, confidence=confidence)
    defaults = QueryOptions().with_overrides(overrides)
    if (dsn or default_dsn()).startswith(("dpch://", "dpchs://")):
        from dpch.server.client import connect_remote

        return connect_remote(dsn or default_dsn(), analyst=analyst, password=password,  # type: ignore[return-value]
                              database=database, options=overrides)
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
