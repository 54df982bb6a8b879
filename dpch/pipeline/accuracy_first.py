"""Running an accuracy-first query, and refining its answer later.

Protocol (DESIGN.md data flow; README "Ledger protocol"):

1. plan the grid from the target, the sensitivities and what the filter admits (no data read);
2. reserve the worst case — the finest grid point — durably in the ledger;
3. run dpch's SQL; the exact aggregates stay in this process;
4. release iterates noisiest first along ONE noise path (Brownian bridge, ALGORITHMS.md A2;
   or the Laplace Markov chain, A1), stop at the first that meets the target (released values only;
   or ReducedAboveThreshold for ``dp_stop_rule = 'exact'``, A3);
5. settle the realized cost of the stopping iterate alone (000 Def 4.2, Thm 6); a run that never
   meets the target settles its worst case and the answer is withheld (:class:`AccuracyNotReached`).

``refine`` continues the Brownian path of an earlier answer: given the iterate at time t0, the
path below t0 is again a Brownian noise reduction whose privacy loss is the increment
L(t) − L(t0) (time inversion makes s·B(1/s) a Brownian motion with independent increments), so it
is charged k/(2t) − k/(2t0) ρ: the whole path costs what its final iterate costs.
"""

from __future__ import annotations

import math
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from dpch.accuracy import planner, rules
from dpch.accuracy.planner import AccuracyPlan
from dpch.errors import AccuracyNotReached, QueryRejected
from dpch.mechanisms.brownian import bridge_step
from dpch.mechanisms.lnr import LaplaceNoiseReduction, snap
from dpch.mechanisms.rat import ReducedAboveThreshold
from dpch.mechanisms.sampling import NoiseSource
from dpch.pipeline import admit, execute
from dpch.pipeline.context import QueryContext
from dpch.pipeline.postprocess import build_rows, having_order_limit, stat_intervals, stat_values
from dpch.pipeline.report import MeasureReport, Release
from dpch.privacy.cost import PrivacyCost
from dpch.sql.accuracy_target import AccuracyTarget
from dpch.sql.analyze import QueryPlan
from dpch.sql.rewrite import emit_sql
from dpch.sql.settings import QueryOptions

#: answers kept per session for ``refine`` (their exact aggregates stay in this process only)
KEEP_RUNS = 16


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

    def describe(self) -> str:
        lines = [f"target {self.target}: {'met' if self.met else 'NOT met (answer withheld)'} after "
                 f"{self.steps} of {self.grid_points} iterates ({self.mechanism})",
                 f"achieved half-width ±{self.achieved_half_width:.4g}"
                 + (f", relative error ≤ {self.achieved_relative_error:.4g}"
                    if self.achieved_relative_error is not None else ""),
                 f"ex-post ε {self.ex_post_epsilon:.4g}" + (f" (δ {self.delta:g})" if self.delta else "")
                 + (f", ρ {self.rho:.4g}" if self.rho is not None else ""),
                 f"charged ε {self.charged.epsilon:.4g}" + (f", ρ {self.charged.rho:.4g}" if self.charged.rho else "")
                 + f" (reserved at worst ε {self.reserved.epsilon:.4g}"
                 + (f", ρ {self.reserved.rho:.4g}" if self.reserved.rho else "") + ")",
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


class _BrownianPath:
    """One Brownian path over the normalized stack; only the current noise is kept (002 App. E)."""

    def __init__(self, values: np.ndarray, rng: np.random.Generator) -> None:
        self.values, self.rng = values, rng
        self.noise: np.ndarray | None = None
        self.time: float | None = None

    def at(self, t: float) -> np.ndarray:
        if self.noise is None:
            self.noise = self.rng.normal(0.0, math.sqrt(t), self.values.shape)
        else:
            assert self.time is not None
            self.noise = bridge_step(self.noise, self.time, t, self.rng)
        self.time = t
        return snap(self.values + self.noise, math.sqrt(t))


class GridRun:
    """Iterates of a plan's grid, noisiest first (``next``), with the realized cost (``cost``)."""

    def __init__(self, plan: AccuracyPlan, path: Any) -> None:
        self.plan, self.path, self.step = plan, path, -1

    def next(self) -> np.ndarray:
        self.step += 1
        if self.plan.kind == "brownian":
            return self.path.at(float(self.plan.grid[self.step]))
        return self.path.next()

    @property
    def cost(self) -> PrivacyCost:
        return self.plan.cost_at(max(self.step, 0))


@dataclass
class _Stored:
    plan: QueryPlan
    opts: QueryOptions
    afplan: AccuracyPlan
    path: _BrownianPath | None
    keys: list[tuple]
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


def admission(ctx: QueryContext, datasets: tuple[str, ...]) -> tuple[Any, Any]:
    def admits(cost: PrivacyCost) -> bool:
        return admit.admissible(ctx.accountant, cost, datasets)[0]

    def refuse(cost: PrivacyCost) -> None:
        ctx.accountant.check(cost, datasets=datasets)

    return admits, refuse


def answer(ctx: QueryContext, runs: AccuracyRuns, plan: QueryPlan, opts: QueryOptions, started: float) -> Release:
    """Runs ``plan`` accuracy-first under ``opts`` (``dp_accuracy`` / ``dp_relative_error``)."""
    target = AccuracyTarget.from_options(opts)
    datasets = admit.datasets(ctx.database, plan)
    status = ctx.accountant.status(recent=0)
    admits, refuse = admission(ctx, datasets)
    uniform = target.stop_rule == "exact" or rules.data_dependent(plan, target)
    afplan = planner.plan_accuracy(
        plan, target, mechanism=opts.mechanism, delta=opts.delta, filter_name=status.filter,
        budget_delta=status.budget.delta, epsilon_hint=status.remaining.epsilon, admits=admits, refuse=refuse,
        uniform=uniform)
    emitted = emit_sql(plan, ctx.database)
    ctx.probe.check(plan, emitted)
    # durable reservation at the worst case before ClickHouse runs and before any noise is drawn
    reservation = admit.reserve(ctx.accountant, afplan.worst_cost, datasets, plan.query.fingerprint,
                                afplan.mechanism)
    # any failure from here on may depend on the data: the tripwire (DESIGN.md rule 5)
    with reservation, ctx.accountant.tripwire(reservation):
        data = execute.exact(ctx.engine, plan, emitted)
        values = afplan.blocks.stack(data.measures)
        with ctx.noise.drawing() as source:
            path, run = start(afplan, values, source)
            step, noisy, met, chk = iterate(plan, afplan, target, run, values)
        realized = afplan.cost_at(step) if met else afplan.worst_cost
        entry = reservation.settle(realized)
    report = _report(afplan, target, step, met, chk, realized, opts, refinements=0)
    stored = _Stored(plan, opts, afplan, path if afplan.kind == "brownian" and target.stop_rule == "released"
                     else None, data.keys, datasets, report, threading.Lock())
    runs.remember(entry.release_id, stored)
    if not met:
        raise AccuracyNotReached(entry.release_id, realized, report)
    return _release(ctx, stored, noisy, step, realized, entry.release_id, started)


def start(afplan: AccuracyPlan, values: np.ndarray, source: NoiseSource) -> tuple[Any, GridRun]:
    if afplan.kind == "brownian":
        path: Any = _BrownianPath(values, source.generator)
    else:
        path = LaplaceNoiseReduction(afplan.sensitivity, afplan.grid).start(values, source)
    return path, GridRun(afplan, path)


def iterate(plan: QueryPlan, afplan: AccuracyPlan, target: AccuracyTarget, run: GridRun,
             values: np.ndarray) -> tuple[int, dict[str, np.ndarray], bool, rules.Check]:
    """Walks the grid; returns (stopping step, its noisy measures, met, the last check)."""
    view_hw: dict[str, float] = {}

    def half_width_for(step: int):
        def hw(name: str, level: float) -> float:
            key = f"{level!r}"
            if key not in view_hw:
                view_hw[key] = afplan.half_width(step, level)
            return view_hw[key] * afplan.blocks.norms[afplan.blocks.names.index(name)]
        return hw

    if target.stop_rule == "exact":
        return iterate_rat(plan, afplan, target, run, values, half_width_for)
    chk = rules.Check(False, math.inf, math.inf)
    noisy: dict[str, np.ndarray] = {}
    for step in range(afplan.points):
        view_hw.clear()
        noisy = afplan.blocks.unstack(run.next())
        hw = half_width_for(step)
        chk = rules.check(plan, target, noisy, hw, rules.noise_view(plan, hw))
        if chk.met:
            return step, noisy, True, chk
    return afplan.points - 1, noisy, False, chk


def iterate_rat(plan, afplan, target, run, values, half_width_for):
    """ReducedAboveThreshold (002 Alg 1) on u = min over coordinates of (h/Δ_j − |ŷ − y|) (normalized:
    sensitivity 1, threshold 0): halts when the *true* error is ≤ h, noisily."""
    blocks = afplan.blocks
    sizes = np.split(np.arange(values.size), blocks.k)
    allowed = np.concatenate([np.full(idx.size, target.accuracy / d) for idx, d in zip(sizes, blocks.norms,
                                                                                          strict=True)])

    def utility(iterate: np.ndarray) -> float:
        return float(np.min(allowed - np.abs(iterate - values)))

    epsilons = tuple(afplan.boundary(float(t)) for t in afplan.grid)
    rat = ReducedAboveThreshold(1.0, epsilons[-1], 0.0, epsilons)
    holder: dict[str, Any] = {}

    class _Inner:
        def next(self) -> np.ndarray:
            holder["it"] = run.next()
            return holder["it"]

        @property
        def cost(self) -> PrivacyCost:
            c = afplan.boundary(float(afplan.grid[run.step]))
            return PrivacyCost(c, afplan.delta, ex_post=True, worst_epsilon=epsilons[-1])

    result = rat.run(_Inner(), utility, _SourceOf(run))
    step = run.step
    noisy = blocks.unstack(holder["it"])
    hw = half_width_for(step)
    chk = rules.check(plan, replace(target, accuracy=None, relative_error=None), noisy, hw,
                      rules.noise_view(plan, hw))
    return step, noisy, result.halted_at is not None, rules.Check(result.halted_at is not None, chk.half_width,
                                                                  chk.relative)


class _SourceOf:
    """The RAT's randomness comes from the same generator as the path."""

    def __init__(self, run: GridRun) -> None:
        self.generator = run.path.rng


def _report(afplan: AccuracyPlan, target: AccuracyTarget, step: int, met: bool, chk: rules.Check,
            charged: PrivacyCost, opts: QueryOptions, refinements: int) -> AccuracyReport:
    delta = afplan.delta if afplan.delta > 0 else planner.DEFAULT_BOUNDARY_DELTA
    return AccuracyReport(
        target=target.describe(), accuracy=target.accuracy, relative_error=target.relative_error,
        confidence=target.confidence, met=met, achieved_half_width=chk.half_width,
        achieved_relative_error=chk.relative if target.relative_error is not None else None,
        mechanism=afplan.mechanism, steps=step + 1, grid_points=afplan.points, noise_scale=afplan.scale(step),
        ex_post_epsilon=afplan.total_epsilon(step), delta=afplan.delta if afplan.kind == "brownian" else 0.0,
        rho=afplan.total_rho(step), charged=charged, reserved=afplan.worst_cost,
        fixed=afplan.fixed_costs(step, target.confidence, delta), uniform_intervals=afplan.uniform,
        refinements=refinements)


def result_rows(plan: QueryPlan, afplan: AccuracyPlan, step: int, noisy: dict[str, np.ndarray], keys: list[tuple],
                confidence: float) -> tuple[list[tuple], list[list[tuple[float, float] | None]]]:
    """Rows and intervals of iterate ``step`` (post-processing: HAVING/ORDER BY/LIMIT on noisy values)."""
    def hw(name: str, level: float) -> float:
        return afplan.half_width(step, level) * afplan.blocks.norms[afplan.blocks.names.index(name)]

    view = rules.noise_view(plan, hw)
    values = {name: stat_values(stat, noisy, {}) for name, stat in plan.stats.items()}

    def intervals_for(out):
        level = 1.0 - (1.0 - confidence) / max(1, len(set(out.stats)))
        ivs = {name: stat_intervals(plan.stats[name], noisy, view, level) for name in set(out.stats)}
        return None if any(v is None for v in ivs.values()) else ivs

    rows, intervals = build_rows(plan.outputs, keys, values, intervals_for)
    return having_order_limit(plan, keys, values, rows, intervals)


def _release(ctx: QueryContext, stored: _Stored, noisy: dict[str, np.ndarray], step: int, charged: PrivacyCost,
             release_id: str, started: float) -> Release:
    plan, afplan, conf = stored.plan, stored.afplan, stored.opts.confidence
    rows, intervals = result_rows(plan, afplan, step, noisy, stored.keys, conf)

    def hw(name: str, level: float) -> float:
        return afplan.half_width(step, level) * afplan.blocks.norms[afplan.blocks.names.index(name)]

    report = stored.report
    measures = [MeasureReport(
        name=m.name, expression=m.sql, sensitivity=afplan.blocks.norms[j], derivation=m.derivation,
        mechanism=afplan.mechanism, epsilon=report.ex_post_epsilon / afplan.blocks.k, delta=report.delta,
        noise_scale=afplan.blocks.norms[j] * (math.sqrt(afplan.scale(step)) if afplan.kind == "brownian"
                                               else afplan.scale(step)),
        half_width=hw(m.name, conf)) for j, m in enumerate(m for m in plan.measures if m.kind != "histogram")]
    notes = [report.describe()]
    if afplan.kind == "brownian" and report.rho is not None:
        notes.append("under the zcdp_bm filter the charge is ρ (000 Thm 6); ex-post filters charge ε (002 Cor 3.7)")
    return Release(columns=plan.columns, rows=rows, intervals=intervals, cost=charged, confidence=conf,
                   mechanism=afplan.mechanism, measures=measures, budget=ctx.accountant.status(),
                   release_id=release_id, elapsed_ms=(time.perf_counter() - started) * 1000.0, notes=notes,
                   accuracy=report)


def refine(ctx: QueryContext, runs: AccuracyRuns, release_id: str | None = None, *, accuracy: float | None = None,
           relative_error: float | None = None, max_epsilon: float | None = None) -> Release:
    """A less noisy version of an earlier accuracy-first answer, continuing its Brownian path.

    ``release_id`` defaults to the session's latest accuracy-first answer. The new target defaults to
    half the achieved half-width (twice as accurate). Charged: the increment from the earlier
    iterate to the new one, so the path in total costs what its final iterate costs. A target not met
    within what the filter admits (or ``max_epsilon``, on the path's total ex-post ε) withholds the
    refinement and charges the increment's worst case.
    """
    started = time.perf_counter()
    stored = runs.find(release_id)
    if stored.path is None:
        raise QueryRejected("only answers of the Brownian mechanism with the default stopping rule can be refined",
                            hint="Laplace noise reduction cannot continue below its last scale; re-run the query")
    with stored.lock:
        old = stored.report
        if accuracy is None and relative_error is None:
            accuracy = old.achieved_half_width / 2.0
        opts = replace(stored.opts, accuracy=accuracy, relative_error=relative_error,
                       max_epsilon=max_epsilon).validated()
        target = AccuracyTarget.from_options(opts)
        admits, refuse = admission(ctx, stored.datasets)
        path = stored.path
        assert path.time is not None
        afplan = planner.plan_refinement(stored.afplan, path.time, target, admits=admits, refuse=refuse)
        reservation = admit.reserve(ctx.accountant, afplan.worst_cost, stored.datasets,
                                    stored.plan.query.fingerprint, "brownian-refine")
        with reservation, ctx.accountant.tripwire(reservation):
            with ctx.noise.drawing():
                run = GridRun(afplan, path)
                step, noisy, met, chk = iterate(stored.plan, afplan, target, run, path.values)
            realized = afplan.cost_at(step) if met else afplan.worst_cost
            entry = reservation.settle(realized)
        report = _report(afplan, target, step, met, chk, realized, opts, refinements=old.refinements + 1)
        new = _Stored(stored.plan, opts, afplan, path, stored.keys, stored.datasets, report, stored.lock)
        runs.remember(entry.release_id, new)
        if not met:
            raise AccuracyNotReached(entry.release_id, realized, report)
        return _release(ctx, new, noisy, step, realized, entry.release_id, started)
