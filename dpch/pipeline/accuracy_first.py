"""Running an accuracy-first query, explaining it, and refining its answer later.

Two strategies, chosen before any data is read (:func:`plan_for`):

- **Direct** (an absolute ``dp_accuracy`` on counts and sums, default stopping rule): the half-widths
  depend on the noise scale alone, so the stopping point is data-independent. The planner
  calibrates ONE Gaussian or Laplace release to the target (:func:`dpch.accuracy.planner.plan_direct`):
  an ordinary fixed-cost release — its exact cost is shown by EXPLAIN, admitted or refused before
  anything runs (under every filter), charged once, and reported as charged.
- **Noise reduction** (relative targets, avg/var, ``dp_stop_rule = 'exact'``: data-dependent stops):

  1. plan the grid from the target, the sensitivities and what the filter admits (no data read);
  2. reserve the worst case — the finest grid point — durably in the ledger;
  3. run dpch's SQL; the exact aggregates stay in this process;
  4. release iterates noisiest first along ONE noise path — the Brownian mechanism of
     :mod:`dpch.mechanisms.brownian` (bridge steps, docs/algorithms.md A2) or the Laplace noise reduction
     of :mod:`dpch.mechanisms.lnr` (A1) — and stop at the first that meets the target (released
     values only; or ReducedAboveThreshold, :mod:`dpch.mechanisms.rat`, for ``dp_stop_rule = 'exact'``, A3);
  5. settle: the realized cost of the stopping iterate alone (Rogers et al. 2023, Def 4.2, Thm 6) under filters that
     charge realized costs, the worst case (as a fixed cost) under the others; a run that never meets
     the target settles its worst case and the answer is withheld (:class:`AccuracyNotReached`).

The cost a release reports is always the cost its ledger row charges.

``refine`` continues the Brownian path of an earlier answer: given the iterate at time t0, the
path below t0 is again a Brownian noise reduction whose privacy loss is the increment
L(t) − L(t0) (time inversion makes s·B(1/s) a Brownian motion with independent increments), so it
is charged k/(2t) − k/(2t0) ρ: the whole path costs what its final iterate costs. A direct Gaussian
release is the path's first iterate (its noise is B_t), so it can be refined too.
"""

from __future__ import annotations

import math
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from dpch.accounting.filters import FILTERS
from dpch.accuracy import planner, rules
from dpch.accuracy.planner import AccuracyPlan, NoiseRun
from dpch.errors import AccuracyNotReached, BudgetExceeded, QueryRejected
from dpch.mechanisms.brownian import BrownianRun
from dpch.mechanisms.rat import ReducedAboveThreshold
from dpch.mechanisms.sampling import NoiseSource
from dpch.pipeline import admit, cost_audit, execute
from dpch.pipeline.context import QueryContext
from dpch.pipeline.postprocess import build_rows, having_order_limit
from dpch.pipeline.report import Explanation, MeasureReport, Release
from dpch.privacy.cost import PrivacyCost, PureDP
from dpch.sql.accuracy_target import AccuracyTarget
from dpch.sql.aggregate_kinds import stat_intervals, stat_values
from dpch.sql.analyze import QueryPlan
from dpch.sql.rewrite import emit_sql
from dpch.sql.settings import QueryOptions

#: answers kept per session for ``refine`` (their exact aggregates stay in this process only)
KEEP_RUNS = 16

Interval = tuple[float, float]
HalfWidth = Callable[[str, float], float]


@dataclass(frozen=True)
class AccuracyReport:
    """What an accuracy-first answer reached and cost (issue 4, part 4)."""

    target: str
    accuracy: float | None
    relative_error: float | None
    confidence: float
    met: bool
    achieved_half_width: float
    achieved_relative_error: float | None
    mechanism: str
    steps: int
    grid_points: int
    noise_scale: float
    ex_post_epsilon: float
    delta: float
    rho: float | None
    charged: PrivacyCost
    reserved: PrivacyCost
    fixed: dict[str, float]
    uniform_intervals: bool
    refinements: int = 0
    #: calibrated directly to the target (one fixed-cost release), not a noise-reduction walk
    direct: bool = False

    def describe(self) -> str:
        if self.direct:
            head = (f"target {self.target}: met by one {self.mechanism} release calibrated to it "
                    "(data-independent stop: cost known in advance)")
        else:
            head = (f"target {self.target}: {'met' if self.met else 'NOT met (answer withheld)'} after "
                    f"{self.steps} of {self.grid_points} iterates ({self.mechanism})")
        lines = [head,
                 f"achieved half-width ±{self.achieved_half_width:.4g}"
                 + (f", relative error ≤ {self.achieved_relative_error:.4g}"
                    if self.achieved_relative_error is not None else ""),
                 ("ε" if self.direct else "ex-post ε") + f" {self.ex_post_epsilon:.4g}"
                 + (f" (δ {self.delta:g})" if self.delta else "")
                 + (f", ρ {self.rho:.4g}" if self.rho is not None else ""),
                 f"charged ε {self.charged.epsilon:.4g}" + (f", δ {self.charged.delta:g}" if self.charged.delta else "")
                 + (f", ρ {self.charged.rho:.4g}" if self.charged.rho else "")
                 + ("" if self.direct else f" (reserved at worst ε {self.reserved.epsilon:.4g}"
                    + (f", ρ {self.reserved.rho:.4g}" if self.reserved.rho else "") + ")"),
                 f"a fixed-ε query with these half-widths: Laplace ε {self.fixed['laplace_epsilon']:.4g}; "
                 f"Gaussian ε {self.fixed['gaussian_epsilon']:.4g} (δ {self.fixed['gaussian_delta']:g}), "
                 f"ρ {self.fixed['gaussian_rho']:.4g}"]
        if self.uniform_intervals:
            lines.append("the stop depended on noisy values, so intervals hold at any stopping time "
                         "(time-uniform bound)")
        return "\n".join(lines)

    def as_dict(self) -> dict[str, Any]:
        d = {k: v for k, v in self.__dict__.items() if k not in ("charged", "reserved")}
        d["charged"] = {"epsilon": self.charged.epsilon, "delta": self.charged.delta, "rho": self.charged.rho}
        d["reserved"] = {"epsilon": self.reserved.epsilon, "delta": self.reserved.delta, "rho": self.reserved.rho}
        return d



class GridRun:
    """Iterates of a plan's grid, noisiest first (``next``), drawn by the tested mechanisms of
    :mod:`dpch.mechanisms` (one noise path), with the realized cost (``cost``)."""

    def __init__(self, plan: AccuracyPlan, path: NoiseRun, source: NoiseSource) -> None:
        self.plan, self.path, self.source, self.step = plan, path, source, -1

    def next(self) -> np.ndarray:
        self.step += 1
        return self.path.next()

    @property
    def cost(self) -> PrivacyCost:
        return self.plan.cost_at(max(self.step, 0))


class _Path:
    """The latest Brownian run of one answer and its refinements (shared: a path is never branched)."""

    def __init__(self, run: BrownianRun) -> None:
        self.run = run


@dataclass
class _Stored:
    plan: QueryPlan
    opts: QueryOptions
    afplan: AccuracyPlan
    path: _Path | None
    keys: list[tuple[Any, ...]]
    datasets: tuple[str, ...]
    report: AccuracyReport
    lock: threading.Lock


class AccuracyRuns:
    """A session's last :data:`KEEP_RUNS` accuracy-first answers, kept for ``refine`` (their exact
    aggregates stay in this process only)."""

    def __init__(self) -> None:
        self._runs: OrderedDict[str, _Stored] = OrderedDict()
        self._lock = threading.Lock()

    def remember(self, release_id: str, stored: _Stored) -> None:
        with self._lock:
            self._runs[release_id] = stored
            self._runs.move_to_end(release_id)
            while len(self._runs) > KEEP_RUNS:
                self._runs.popitem(last=False)

    def find(self, release_id: str | None) -> _Stored:
        """The stored run of ``release_id`` (default: the latest), or a clear refusal."""
        with self._lock:
            if release_id is None:
                if not self._runs:
                    raise QueryRejected("there is no accuracy-first answer to refine in this session",
                                        hint="run a query with SETTINGS dp_accuracy = … first")
                release_id = next(reversed(self._runs))
            stored = self._runs.get(release_id)
        if stored is None:
            raise QueryRejected(f"release {release_id} cannot be refined: it is not one of this session's last "
                                f"{KEEP_RUNS} accuracy-first answers",
                                hint="re-run the query with a tighter dp_accuracy")
        return stored


def admission(ctx: QueryContext, datasets: tuple[str, ...]) -> tuple[planner.Admits,
                                                                     Callable[[PrivacyCost], None]]:
    """(admits, refuse) for the planner: the filter's decision now, and its refusal as an exception."""
    def admits(cost: PrivacyCost) -> bool:
        return admit.admissible(ctx.accountant, cost, datasets)[0]

    def refuse(cost: PrivacyCost) -> None:
        ctx.accountant.check(cost, datasets=datasets)

    return admits, refuse


def plan_for(ctx: QueryContext, plan: QueryPlan, opts: QueryOptions) -> AccuracyPlan:
    """The accuracy-first plan of ``plan`` under ``opts`` (no data read): a direct calibration when the
    stop is data-independent, else a noise-reduction grid bounded by what the filter admits."""
    target = AccuracyTarget.from_options(opts)
    datasets = admit.datasets(ctx.database, plan)
    status = ctx.accountant.status(recent=0)
    admits, refuse = admission(ctx, datasets)
    flt = FILTERS[status.filter]
    if planner.direct_applies(plan, target):
        return planner.plan_direct(plan, target, mechanism=opts.mechanism, delta=opts.delta,
                                   budget_delta=status.budget.delta, pure_only=flt.pure_only,
                                   prefer_rho=status.remaining.rho is not None,
                                   epsilon_hint=status.remaining.epsilon, admits=admits)
    uniform = target.stop_rule == "exact" or rules.data_dependent(plan, target)
    return planner.plan_accuracy(
        plan, target, mechanism=opts.mechanism, delta=opts.delta, filter_name=status.filter,
        budget_delta=status.budget.delta, epsilon_hint=status.remaining.epsilon, admits=admits, refuse=refuse,
        uniform=uniform)


def _charges_realized(ctx: QueryContext) -> bool:
    """Whether the analyst's filter charges a noise-reduction run its realized cost (else its worst
    case, which it counts anyway: the ledger then records that worst case as a fixed cost)."""
    return FILTERS[ctx.accountant.status(recent=0).filter].charges_realized


def _as_charged(realized: PrivacyCost, charges_realized: bool) -> PrivacyCost:
    return realized if charges_realized else realized.at_worst()


def answer(ctx: QueryContext, runs: AccuracyRuns, plan: QueryPlan, opts: QueryOptions, started: float) -> Release:
    """Runs ``plan`` accuracy-first under ``opts`` (``dp_accuracy`` / ``dp_relative_error``)."""
    target = AccuracyTarget.from_options(opts)
    datasets = admit.datasets(ctx.database, plan)
    afplan = plan_for(ctx, plan, opts)
    # the independent cost check (docs/design.md rule 7) of every cost the plan can charge, before
    # anything is reserved
    cost_audit.require(cost_audit.accuracy_plan_problems(afplan))
    emitted = emit_sql(plan, ctx.database)
    ctx.probe.check(plan, emitted)
    if afplan.direct:
        return _answer_direct(ctx, runs, plan, opts, afplan, emitted, datasets, started)
    realized_counts = _charges_realized(ctx)  # the filter is fixed for the analyst's ledger
    # durable reservation at the worst case before ClickHouse runs and before any noise is drawn
    reservation = admit.reserve(ctx.accountant, afplan.worst_cost, datasets, plan.query.fingerprint,
                                afplan.mechanism)
    # any failure from here on may depend on the data: the tripwire (docs/design.md rule 5)
    with reservation, ctx.accountant.tripwire(reservation):
        data = execute.exact(ctx.engine, plan, emitted, ctx.noise.cap_key())
        values = afplan.blocks.stack(data.measures)
        with ctx.noise.drawing() as source:
            path, run = start(afplan, values, source)
            step, noisy, met, chk = iterate(plan, afplan, target, run, values)
        realized = afplan.cost_at(step) if met else afplan.worst_cost
        charged = _as_charged(realized, realized_counts)
        entry = reservation.settle(charged)
    report = _report(afplan, target, step, met, chk, charged, refinements=0)
    keep = _Path(path) if isinstance(path, BrownianRun) and target.stop_rule == "released" else None
    stored = _Stored(plan, opts, afplan, keep, data.keys, datasets, report, threading.Lock())
    runs.remember(entry.release_id, stored)
    if not met:
        raise AccuracyNotReached(entry.release_id, charged, report)
    return _release(ctx, stored, noisy, step, charged, entry.release_id, started)


def _answer_direct(ctx: QueryContext, runs: AccuracyRuns, plan: QueryPlan, opts: QueryOptions,
                   afplan: AccuracyPlan, emitted: str, datasets: tuple[str, ...], started: float) -> Release:
    """One fixed-cost release calibrated to the target: charged (durably) before ClickHouse runs."""
    target = AccuracyTarget.from_options(opts)
    cost = afplan.worst_cost
    entry = admit.charge(ctx.accountant, cost, datasets, plan, afplan.mechanism)
    with ctx.accountant.tripwire(entry):
        data = execute.exact(ctx.engine, plan, emitted, ctx.noise.cap_key())
        values = afplan.blocks.stack(data.measures)
        with ctx.noise.drawing() as source:
            path, run = start(afplan, values, source)
            noisy = afplan.blocks.unstack(run.next())
        hw = _half_widths(afplan, 0)
        chk = rules.check(plan, target, noisy, hw)
    report = _report(afplan, target, 0, True, chk, cost, refinements=0)
    keep = _Path(path) if isinstance(path, BrownianRun) else None
    stored = _Stored(plan, opts, afplan, keep, data.keys, datasets, report, threading.Lock())
    runs.remember(entry.release_id, stored)
    return _release(ctx, stored, noisy, 0, cost, entry.release_id, started)


def explain(ctx: QueryContext, plan: QueryPlan, opts: QueryOptions) -> Explanation:
    """EXPLAIN of an accuracy-first query: the plan's mechanism, per-measure noise and the cost it
    will be charged (direct: exactly; noise reduction: its worst case), without spending anything."""
    sql = emit_sql(plan, ctx.database)
    try:
        afplan = plan_for(ctx, plan, opts)
    except BudgetExceeded as exc:
        return Explanation(sql=sql, plan=plan, options=opts, measures=[], cost=PrivacyCost.of(PureDP(0.0)),
                           admissible=False, reason=exc.message,
                           notes=["the budget admits no noise-reduction run for this target"])
    if afplan.direct:
        cost = afplan.worst_cost
        step = 0
        notes = [f"accuracy-first: the target {afplan.target.describe()} has a data-independent stop, so one "
                 f"{afplan.mechanism} release is calibrated to it; this is the exact cost charged"]
    else:
        cost = _as_charged(afplan.worst_cost, _charges_realized(ctx))
        step = afplan.points - 1
        notes = [f"accuracy-first by {afplan.mechanism} over {afplan.points} iterates; the cost shown is the "
                 "worst case (the finest iterate), reserved before the run"
                 + (", and the realized cost of the stopping iterate is charged" if cost.ex_post
                    else "; this filter charges that worst case")]
    admissible, reason = admit.admissible(ctx.accountant, afplan.worst_cost, admit.datasets(ctx.database, plan))
    return Explanation(sql=sql, plan=plan, options=replace(opts, mechanism=afplan.mechanism), measures=
                       _measure_reports(plan, afplan, step, cost, opts.confidence), cost=cost,
                       admissible=admissible, reason=reason, notes=notes)


def start(afplan: AccuracyPlan, values: np.ndarray, source: NoiseSource) -> tuple[NoiseRun, GridRun]:
    """A run of ``afplan``'s mechanism on the normalized ``values``: the Brownian mechanism (one path,
    bridge steps) or Laplace noise reduction (the Markov chain), both from :mod:`dpch.mechanisms`."""
    path = afplan.start(values, source)
    return path, GridRun(afplan, path, source)


def _half_widths(afplan: AccuracyPlan, step: int) -> HalfWidth:
    """Data-unit half-width of each measure at iterate ``step``: the normalized one × its norm."""
    cache: dict[float, float] = {}

    def hw(name: str, level: float) -> float:
        if level not in cache:
            cache[level] = afplan.half_width(step, level)
        return cache[level] * afplan.blocks.norms[afplan.blocks.names.index(name)]
    return hw


def iterate(plan: QueryPlan, afplan: AccuracyPlan, target: AccuracyTarget, run: GridRun,
            values: np.ndarray) -> tuple[int, dict[str, np.ndarray], bool, rules.Check]:
    """Walks the grid; returns (stopping step, its noisy measures, met, the last check)."""
    if target.stop_rule == "exact":
        return iterate_rat(plan, afplan, target, run, values)
    chk = rules.Check(False, math.inf, math.inf)
    noisy: dict[str, np.ndarray] = {}
    for step in range(afplan.points):
        noisy = afplan.blocks.unstack(run.next())
        hw = _half_widths(afplan, step)
        chk = rules.check(plan, target, noisy, hw)
        if chk.met:
            return step, noisy, True, chk
    return afplan.points - 1, noisy, False, chk


def iterate_rat(plan: QueryPlan, afplan: AccuracyPlan, target: AccuracyTarget, run: GridRun,
                values: np.ndarray) -> tuple[int, dict[str, np.ndarray], bool, rules.Check]:
    """ReducedAboveThreshold (Whitehouse et al. 2022, Alg 1) on u = min over coordinates of
    (h/Δ_j − |ŷ − y|) (normalized: sensitivity 1, threshold 0 plus each round's margin): halts only
    when the *true* error is ≤ h, except with probability 1 − confidence (Prop C.1)."""
    assert target.accuracy is not None
    blocks = afplan.blocks
    sizes = np.split(np.arange(values.size), blocks.k)
    allowed = np.concatenate([np.full(idx.size, target.accuracy / d) for idx, d in zip(sizes, blocks.norms,
                                                                                          strict=True)])

    def utility(iterate: np.ndarray) -> float:
        return float(np.min(allowed - np.abs(iterate - values)))

    # threshold 0 plus a margin per round (AccuracyPlan.rat_schedule): a halt while some true error is
    # above h needs that round's test noise past its margin, at most 1 − confidence over the whole run
    epsilons, margins = afplan.rat_schedule()
    rat = ReducedAboveThreshold(1.0, epsilons[-1], 0.0, epsilons, margins)
    result = rat.run(run, utility, run.source)
    step = run.step
    noisy = blocks.unstack(result.iterate)
    hw = _half_widths(afplan, step)
    chk = rules.check(plan, replace(target, accuracy=None, relative_error=None), noisy, hw)
    met = result.halted_at is not None
    return step, noisy, met, rules.Check(met, chk.half_width, chk.relative)


def _report(afplan: AccuracyPlan, target: AccuracyTarget, step: int, met: bool, chk: rules.Check,
            charged: PrivacyCost, refinements: int) -> AccuracyReport:
    delta = afplan.delta if afplan.delta > 0 else planner.DEFAULT_BOUNDARY_DELTA
    return AccuracyReport(
        target=target.describe(), accuracy=target.accuracy, relative_error=target.relative_error,
        confidence=target.confidence, met=met, achieved_half_width=chk.half_width,
        achieved_relative_error=chk.relative if target.relative_error is not None else None,
        mechanism=afplan.mechanism, steps=step + 1, grid_points=afplan.points, noise_scale=afplan.scale(step),
        ex_post_epsilon=afplan.total_epsilon(step), delta=afplan.ex_post_delta,
        rho=afplan.total_rho(step), charged=charged, reserved=charged if afplan.direct else afplan.worst_cost,
        fixed=afplan.fixed_costs(step, target.confidence, delta), uniform_intervals=afplan.uniform,
        refinements=refinements, direct=afplan.direct)


def result_rows(plan: QueryPlan, afplan: AccuracyPlan, step: int, noisy: dict[str, np.ndarray],
                keys: list[tuple[Any, ...]], confidence: float
                ) -> tuple[list[tuple[Any, ...]], list[list[Interval | None]]]:
    """Rows and intervals of iterate ``step`` (post-processing: HAVING/ORDER BY/LIMIT on noisy values)."""
    half_width = _half_widths(afplan, step)
    values = {name: stat_values(stat, noisy, {}) for name, stat in plan.stats.items()}

    def intervals_for(out: Any) -> dict[str, Any] | None:
        level = 1.0 - (1.0 - confidence) / max(1, len(set(out.stats)))
        ivs = {name: stat_intervals(plan.stats[name], noisy, half_width, level) for name in set(out.stats)}
        return None if any(v is None for v in ivs.values()) else ivs

    rows, intervals = build_rows(plan.outputs, keys, values, intervals_for)
    result: tuple[list[tuple[Any, ...]], list[list[Interval | None]]] = having_order_limit(
        plan, keys, values, rows, intervals)
    return result


def _measure_reports(plan: QueryPlan, afplan: AccuracyPlan, step: int, cost: PrivacyCost,
                     confidence: float) -> list[MeasureReport]:
    """Each measure's sensitivity, noise and half-width at iterate ``step``, and its share of the cost:
    its part of the stack's ℓ1 (Laplace: exact, ε adds up) or squared ℓ2 (Gaussian: its share of ρ)."""
    hw = _half_widths(afplan, step)
    measures = [m for m in plan.measures if m.kind != "histogram"]
    sensitivities = afplan.measure_sensitivities()
    parts = afplan.cost_parts()
    shares = [p / math.fsum(parts) for p in parts]
    return [MeasureReport(
        name=m.name, expression=m.sql, sensitivity=sensitivities[j], derivation=m.derivation,
        mechanism=afplan.mechanism, epsilon=cost.epsilon * shares[j], delta=cost.delta * shares[j],
        noise_scale=afplan.blocks.norms[j] * afplan.noise_scale(step),
        half_width=hw(m.name, confidence)) for j, m in enumerate(measures)]


def _release(ctx: QueryContext, stored: _Stored, noisy: dict[str, np.ndarray], step: int, charged: PrivacyCost,
             release_id: str, started: float) -> Release:
    """The Release of iterate ``step``; ``cost`` is what the ledger charged."""
    plan, afplan, conf = stored.plan, stored.afplan, stored.opts.confidence
    rows, intervals = result_rows(plan, afplan, step, noisy, stored.keys, conf)
    report = stored.report
    notes = [report.describe()]
    if not afplan.direct and report.rho is not None:  # a Brownian run (Laplace noise reduction has no ρ)
        notes.append("under the zcdp_bm filter the charge is ρ (Rogers et al. 2023, Thm 6); ex-post filters "
                     "charge ε (Whitehouse et al. 2022, Cor 3.7)")
    return Release(columns=plan.columns, rows=rows, intervals=intervals, cost=charged, confidence=conf,
                   mechanism=afplan.mechanism, measures=_measure_reports(plan, afplan, step, charged, conf),
                   budget=ctx.accountant.status(fresh=False), release_id=release_id,
                   elapsed_ms=(time.perf_counter() - started) * 1000.0, notes=notes, accuracy=report)


def refine(ctx: QueryContext, runs: AccuracyRuns, release_id: str | None = None, *, accuracy: float | None = None,
           relative_error: float | None = None, max_epsilon: float | None = None) -> Release:
    """A less noisy version of an earlier accuracy-first answer, continuing its Brownian path.

    ``release_id`` defaults to the session's latest accuracy-first answer. The new target defaults to
    half the achieved half-width (twice as accurate). Charged: the increment from the earlier
    iterate to the new one, so the path in total costs what its final iterate costs (after a direct
    release, whose fixed (ε, δ) is not a ψ, the path's whole ψ(t) and δ). A target not met within
    what the filter admits (or ``max_epsilon``, on the path's total ex-post ε) withholds the
    refinement and charges the increment's worst case.
    """
    started = time.perf_counter()
    stored = runs.find(release_id)
    if stored.path is None:
        raise QueryRejected("only answers of the Brownian (Gaussian) mechanism with the default stopping rule "
                            "can be refined",
                            hint="Laplace noise cannot continue below its last scale; re-run the query")
    with stored.lock:
        old = stored.report
        if accuracy is None and relative_error is None:
            accuracy = old.achieved_half_width / 2.0
        opts = replace(stored.opts, accuracy=accuracy, relative_error=relative_error,
                       max_epsilon=max_epsilon).validated()
        target = AccuracyTarget.from_options(opts)
        admits, refuse = admission(ctx, stored.datasets)
        holder = stored.path
        base_time = holder.run.time
        assert base_time is not None
        afplan = planner.plan_refinement(stored.afplan, base_time, target, admits=admits, refuse=refuse)
        assert afplan.boundary is not None
        realized_counts = _charges_realized(ctx)
        reservation = admit.reserve(ctx.accountant, afplan.worst_cost, stored.datasets,
                                    stored.plan.query.fingerprint, "brownian-refine")
        with reservation, ctx.accountant.tripwire(reservation):
            with ctx.noise.drawing() as source:
                path = holder.run.continued(afplan.brownian())
                holder.run = path  # the one path goes on from here, whatever this refinement reaches
                run = GridRun(afplan, path, source)
                step, noisy, met, chk = iterate(stored.plan, afplan, target, run, path.values)
            realized = afplan.cost_at(step) if met else afplan.worst_cost
            charged = _as_charged(realized, realized_counts)
            entry = reservation.settle(charged)
        report = _report(afplan, target, step, met, chk, charged, refinements=old.refinements + 1)
        new = _Stored(stored.plan, opts, afplan, holder, stored.keys, stored.datasets, report, stored.lock)
        runs.remember(entry.release_id, new)
        if not met:
            raise AccuracyNotReached(entry.release_id, charged, report)
        return _release(ctx, new, noisy, step, charged, entry.release_id, started)
