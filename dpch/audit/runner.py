"""Run one query many times on D and on D′ and collect what an observer would see.

Two modes:

- **fast** (audit-only): the query is parsed, analyzed and calibrated by the session exactly as
  :meth:`Session.query` does, its emitted SQL runs *once* per side in ClickHouse, and only the
  noise is redrawn, vectorised: ``mechanism.release`` on an (N, groups) array. Observations are
  the noisy measures (the mechanisms' outputs; the released cells are post-processing of them,
  so auditing the measures is at least as strong). Integer measures get exactly the per-query
  distribution; a real-valued (grid) batch shares one grid chosen for N·groups coordinates,
  finer than a single release's, with the same ≤ 2^-12 bound on the scale's inflation:
  indistinguishable at any audit's sample size. Nothing is charged: the fast path reads exact
  aggregates of the scratch copies, which only the data owner running the audit may do.
- **full**: every trial is a real :meth:`Session.query` on each side, through parse, analyze,
  probe, ledger charge, ClickHouse, noise and post-processing; observations are the released
  numeric cells. It catches bugs in the SQL and in the session's wiring, and is charged to a
  dedicated audit analyst whose ledger lives in the scratch databases (never a real analyst's).

:meth:`AuditRunner.calibrate` and :meth:`AuditRunner.emit` are the two seams the fast path uses;
tests subclass the runner to inject broken mechanisms or SQL (never reachable from production).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dpch.audit.profile import ClaimedProfile, claimed_profile
from dpch.errors import QueryRejected
from dpch.mechanisms.gaussian import GaussianMechanism
from dpch.mechanisms.laplace import LaplaceMechanism
from dpch.mechanisms.sampling import NoiseSource
from dpch.pipeline import execute
from dpch.pipeline.calibrate import NoisePlan, calibrate
from dpch.pipeline.execute import GroupData
from dpch.pipeline.kinds import (
    AccuracyFirst,
    Free,
    KeyRelease,
    Ordinary,
    ReleaseKind,
    ThresholdWatch,
    TopK,
    release_kind,
)
from dpch.pipeline.postprocess import grid_utilities
from dpch.pipeline.top_k import TopKNoise, calibrate_top_k, pick_keys, picked_rows
from dpch.privacy.cost import PrivacyCost
from dpch.sql.aggregate_kinds import statistic
from dpch.sql.analyze import QueryPlan
from dpch.sql.rewrite import emit_sql
from dpch.sql.settings import QueryOptions

Mechanism = LaplaceMechanism | GaussianMechanism

#: how the audit observes each kind of release (:mod:`dpch.pipeline.kinds`): ``noise`` — the additive
#: and selection mechanisms' outputs, redrawn on the exact aggregates; ``top_k`` — the picked keys;
#: ``accuracy_first`` — where noise reduction stops and what it releases there
OBSERVED: dict[type[ReleaseKind], str] = {Ordinary: "noise", KeyRelease: "noise", TopK: "top_k",
                                          AccuracyFirst: "accuracy_first"}
#: why the other kinds are not audited here, and what to do (message, hint)
NOT_OBSERVED: dict[type[ReleaseKind], tuple[str, str]] = {
    Free: ("nothing to audit: this query lists keys whose domain is declared, so its answer depends on the "
           "policy alone and costs nothing", "audit a query that releases a noisy value or private keys"),
    ThresholdWatch: ("a threshold watch is audited on its halting positions (dpch audit --query with the "
                     "watch's question), not by this runner", "run dpch audit on the watch's question"),
}


def observed_as(plan: QueryPlan, opts: QueryOptions) -> str:
    """How the audit observes the kind of release ``plan`` asked with ``opts`` is (:data:`OBSERVED`); a
    kind the table does not name is refused in words, never audited as another kind."""
    kind = release_kind(plan, opts)
    observed = OBSERVED.get(type(kind))
    if observed is None:
        message, hint = NOT_OBSERVED.get(type(kind), (f"a {kind.name} release cannot be audited here",
                                                      "audit a query that releases a noisy value"))
        raise QueryRejected(message, hint=hint)
    return observed


@dataclass
class AuditSamples:
    """Observations on D and D′ (one row per trial), and what the query claims to cost."""

    d: np.ndarray
    dprime: np.ndarray
    labels: list[str]
    claimed: PrivacyCost
    mechanism: str
    mode: str
    #: per measure: exact value on D and D′ (fast mode), sensitivity, and the ℓ1 shift
    exact_d: dict[str, np.ndarray] = field(default_factory=dict)
    exact_dprime: dict[str, np.ndarray] = field(default_factory=dict)
    sensitivities: dict[str, float] = field(default_factory=dict)
    #: some coordinates are discrete (quantile indices, released-or-not): estimators add a
    #: likelihood-ratio test over binned outcomes
    discrete: bool = False
    #: the δ(ε) curve a Gaussian release claims (production calibration), else None and why not
    profile: ClaimedProfile | None = None
    profile_note: str = ""

    @property
    def trials(self) -> int:
        return int(self.d.shape[0])

    def shifts(self) -> dict[str, float]:
        """ℓ1 distance between the exact measure vectors of D and D′ (fast mode)."""
        return {k: float(np.abs(self.exact_dprime[k] - self.exact_d[k]).sum()) for k in self.exact_d}


class AuditRunner:
    """Samples a query's releases on two sessions: one on D, one on D′ (same table name)."""

    def __init__(self, session_d: Any, session_dprime: Any, sql: str, *, seed: int | None = None,
                 **options: Any) -> None:
        self.sessions = (session_d, session_dprime)
        self.sql = sql
        self.options = options
        self._noise = NoiseSource(seed)
        # one cap key for both sides: the audit observes the mechanism given its key, on the two
        # neighbours, where every unit both share keeps the same rows (docs/algorithms.md, "Which rows
        # the cap keeps")
        self._cap_key = self._noise.cap_key()

    # -- seams (tests override these to inject broken variants) --------------------------------

    def calibrate(self, plan: QueryPlan, opts: QueryOptions) -> dict[str, Mechanism]:
        """The additive mechanisms the fast path samples: the session's own calibration."""
        return calibrate(plan, opts).additive

    def noise_plan(self, plan: QueryPlan, opts: QueryOptions) -> NoisePlan:
        """The whole noise plan (quantiles' exponential mechanisms, partition selection)."""
        return calibrate(plan, opts)

    def emit(self, plan: QueryPlan, database: str) -> str:
        """The SQL the fast path runs on each side: the session's own rewrite."""
        return emit_sql(plan, database)

    def noise_reduction_scale(self, afplan: Any, step: int) -> float:
        """An accuracy-first release's noise where it stops: time t (Brownian) or Laplace scale b."""
        return afplan.scale(step)

    # -- modes ---------------------------------------------------------------------------------

    def claimed(self) -> tuple[PrivacyCost, str]:
        """What the production path says the query costs (never from the seams above)."""
        session = self.sessions[0]
        plan, opts = session.plan(self.sql, **self.options)
        observed = observed_as(plan, opts)
        if observed == "accuracy_first":
            afplan, step = self._accuracy_plan(session, plan, opts)
            return afplan.cost_at(step), afplan.mechanism
        if observed == "top_k":
            top = calibrate_top_k(plan, opts)
            return top.cost, top.mechanism
        noise = calibrate(plan, opts)
        return noise.cost, opts.resolved_mechanism

    def claimed_profile(self, moved: dict[str, int] | None = None) -> tuple[ClaimedProfile | None, str]:
        """The privacy profile the production calibration claims (Gaussian releases; never from the
        seams above, so an injected mis-calibration is measured against the real claim). ``moved``:
        coordinates of each measure that differ between D and D′ (fast mode)."""
        plan, opts = self.sessions[0].plan(self.sql, **self.options)
        observed = observed_as(plan, opts)
        if observed == "accuracy_first":
            return None, "accuracy-first release: its pure-ε bound is the test"
        if observed == "top_k":
            return None, "top-k selection: a discrete output; its likelihood-ratio and pure-ε bounds are the test"
        noise = calibrate(plan, opts)
        return claimed_profile(noise.additive, other_mechanisms=bool(noise.selectors) or noise.selection is not None,
                               moved=moved)

    def run_fast(self, trials: int) -> AuditSamples:
        """``trials`` releases per side, exact aggregates computed once, noise redrawn.

        Observations per trial, for every group key seen on either side: each additive measure's
        noisy value; each quantile's released grid index (discrete: the exponential mechanism's
        output); and with partition selection, whether the key was released (a measure of an
        unreleased key reads 0, a quantile −1). The quantiles of one query are observed jointly,
        one coordinate each, so that the estimators can combine them.
        """
        claimed, mechanism = self.claimed()
        observed = observed_as(*self.sessions[0].plan(self.sql, **self.options))
        if observed == "accuracy_first":
            return self._run_accuracy_first(trials, claimed, mechanism)
        if observed == "top_k":
            return self._run_top_k(trials, claimed, mechanism)
        prepared = []
        for session in self.sessions:
            plan, opts = session.plan(self.sql, **self.options)
            noise = self.noise_plan(plan, opts)
            noise.additive = self.calibrate(plan, opts)
            data = execute.exact(session.engine, plan, self.emit(plan, session.engine.database), self._cap_key)
            prepared.append((plan, noise, data))
        keys = list(dict.fromkeys([*prepared[0][2].keys, *prepared[1][2].keys]))
        sides: list[np.ndarray] = []
        exact_sides: list[dict[str, np.ndarray]] = []
        labels: list[str] = []
        sensitivities: dict[str, float] = {}
        for plan, noise, data in prepared:
            columns, labels, exact = self._observe(plan, noise, _aligned(data, keys), trials)
            sides.append(np.column_stack(columns))
            exact_sides.append(exact)
            sensitivities = {m.name: m.sensitivity for m in plan.measures if m.kind != "histogram"}
        discrete = bool(prepared[0][1].selectors) or prepared[0][1].selection is not None
        moved = {k: int(np.count_nonzero(exact_sides[1][k] != exact_sides[0][k])) for k in exact_sides[0]}
        profile, note = self.claimed_profile(moved)
        return AuditSamples(sides[0], sides[1], labels, claimed, mechanism, "fast",
                            exact_sides[0], exact_sides[1], sensitivities, discrete=discrete,
                            profile=profile, profile_note=note)

    def _observe(self, plan: QueryPlan, noise: NoisePlan, data: _AlignedData,
                 trials: int) -> tuple[list[np.ndarray], list[str], dict[str, np.ndarray]]:
        """One side's (trials × coordinates) observations, their labels, and its exact measures."""
        groups = [_group_label(k) for k in data.keys]
        shape = (trials, len(data.keys))
        columns: list[np.ndarray] = []
        labels: list[str] = []
        keep = np.ones(shape, dtype=bool)
        if noise.selection is not None:
            counts = noise.selection.noisy_counts(np.broadcast_to(data.units, shape), self._noise)
            keep = noise.selection.keep(counts) & data.present  # a key the SQL does not return is never released
            columns += list(keep.T.astype(float))
            labels += [f"released {g}" for g in groups]
            if noise.shared is not None:  # the released count is the selection's own noisy count
                columns += list(np.where(keep, counts, 0.0).T)
                labels += [f"{noise.shared} {g}".rstrip() for g in groups]
        for name, mech in noise.additive.items():
            noisy = mech.release(np.array(np.broadcast_to(data.measures[name], shape)), self._noise)
            columns += list(np.where(keep, noisy, 0.0).T)
            labels += [f"{name} {g}".rstrip() for g in groups]
        for stat in plan.stats.values():
            if not statistic(stat).selected:
                continue
            selector = noise.selectors[stat.name]
            for g, hist in enumerate(data.histograms[stat.measures[0]]):
                index = selector.select_many(grid_utilities(stat, hist), trials, self._noise).astype(float)
                columns.append(np.where(keep[:, g], index, -1.0))
                labels.append(f"{stat.label} index {groups[g]}".rstrip())
        exact = {name: data.measures[name] for name in [*noise.additive, *filter(None, [noise.shared])]}
        return columns, labels, exact

    # -- top-k selection ----------------------------------------------------------------------

    def top_k_plan(self, plan: QueryPlan, opts: QueryOptions) -> TopKNoise:
        """The top-k mechanisms the fast path samples: the session's own calibration (a seam)."""
        return calibrate_top_k(plan, opts)

    def _run_top_k(self, trials: int, claimed: PrivacyCost, mechanism: str) -> AuditSamples:
        """``trials`` top-k releases per side through the production release stage on exact scores
        computed once. Observations: the key picked in each round (discrete), the whole ordered pick
        as one outcome (the mechanism's output: any event of it is bounded by the claim), and each
        shown value of each key (0 where the key is not picked)."""
        sides, exact_sides = [], []
        labels: list[str] = []
        outcomes: dict[tuple[int, ...], int] = {}
        for session in self.sessions:
            plan, opts = session.plan(self.sql, **self.options)
            top = self.top_k_plan(plan, opts)
            data = execute.exact(session.engine, plan, self.emit(plan, session.engine.database), self._cap_key)
            shown = [j for j, out in enumerate(plan.outputs) if not out.is_key]
            d = len(data.keys)
            rows = []
            for _ in range(trials):
                picked = pick_keys(top, data, self._noise)
                _, released, _ = picked_rows(plan, opts, top, data, picked, self._noise)
                joint = float(outcomes.setdefault(tuple(picked), len(outcomes)))
                values = [0.0] * (d * len(shown))
                for key, row in zip(picked, released, strict=True):
                    for c, j in enumerate(shown):
                        values[c * d + key] = float(row[j]) if row[j] is not None else 0.0
                rows.append([*map(float, picked), joint, *values])
            sides.append(np.array(rows, dtype=float))
            exact_sides.append({top.measure.name: data.measures[top.measure.name]})
            labels = ([f"pick {r + 1}" for r in range(top.top.k)] + ["ordered picks"]
                      + [f"{plan.outputs[j].name} {_group_label(k)}" for j in shown for k in data.keys])
        # the score's ℓ1 sensitivity, the bound the summary's ℓ1 shift D→D′ is compared with (the rounds
        # themselves are calibrated to the per-key ℓ∞ bound, which is never larger)
        sensitivities = {top.measure.name: top.measure.sensitivity}
        return AuditSamples(sides[0], sides[1], labels, claimed, mechanism, "fast", exact_sides[0], exact_sides[1],
                            sensitivities, discrete=True,
                            profile_note="top-k selection: a discrete output; its likelihood-ratio and pure-ε "
                                         "bounds are the test")

    # -- accuracy-first (noise reduction) ------------------------------------------------------

    def _accuracy_plan(self, session: Any, plan: QueryPlan, opts: QueryOptions) -> tuple[Any, int]:
        """The accuracy-first plan the production path would build, and where it stops.

        Audited: absolute targets on counts and sums, whose stop is data-independent, so production
        calibrates ONE Gaussian (variance t) or Laplace (scale b) release to the target
        (:func:`dpch.pipeline.accuracy_first.plan_for`); the fast path draws that noise directly and the
        claim is that release's fixed cost.
        """
        from dpch.accuracy import rules
        from dpch.pipeline.accuracy_first import plan_for
        from dpch.sql.accuracy_target import AccuracyTarget

        target = AccuracyTarget.from_options(opts)
        if target.stop_rule != "released" or rules.data_dependent(plan, target):
            raise QueryRejected(
                "the audit covers accuracy-first queries whose stop does not depend on the data; a noise-reduction "
                "run (a relative target, an average, dp_stop_rule = 'exact') is audited at the mechanism level only",
                hint="audit an absolute dp_accuracy target on counts and sums (docs/audit.md, Accuracy-first releases)")
        afplan = plan_for(session.context, plan, opts)
        return afplan, 0

    def _run_accuracy_first(self, trials: int, claimed: PrivacyCost, mechanism: str) -> AuditSamples:
        sides, exact_sides = [], []
        for session in self.sessions:
            plan, opts = session.plan(self.sql, **self.options)
            afplan, step = self._accuracy_plan(session, plan, opts)
            emitted = self.emit(plan, session.engine.database)
            exact = execute.exact(session.engine, plan, emitted, self._cap_key).measures
            blocks = afplan.blocks
            # observed in units of each measure's sensitivity (a neighbour moves each coordinate by at
            # most 1); the plan's noise on measure j is norm_j × the normalized noise
            sens = afplan.measure_sensitivities()
            values = np.concatenate([np.asarray(exact[n], dtype=float) / d for n, d in zip(blocks.names, sens,
                                                                                            strict=True)])
            factor = np.concatenate([np.full(len(exact[n]), norm / d) for n, norm, d in zip(
                blocks.names, blocks.norms, sens, strict=True)])
            scale = self.noise_reduction_scale(afplan, step)
            shape = (trials, values.size)
            noise = afplan.sample_noise(self._noise.generator, scale, shape)
            sides.append(values + noise * factor)
            exact_sides.append({"normalized": values})
        labels = [f"coordinate {i}" for i in range(sides[0].shape[1])]
        return AuditSamples(sides[0], sides[1], labels, claimed, mechanism, "fast", exact_sides[0], exact_sides[1],
                            {"normalized": 1.0},
                            profile_note="accuracy-first release: its pure-ε bound is the test")

    def run_full(self, trials: int) -> AuditSamples:
        """``trials`` full :meth:`Session.query` calls per side; observations are released cells."""
        claimed, mechanism = self.claimed()
        if observed_as(*self.sessions[0].plan(self.sql, **self.options)) == "top_k":
            raise QueryRejected("the full-stack audit observes released values; a top-k query's output is its "
                                "picked keys, which the fast path observes",
                                hint="audit it without --full-stack")
        sides = []
        labels: list[str] = []
        for session in self.sessions:
            rows = []
            for _ in range(trials):
                release = session.query(self.sql, **self.options)
                cells, labels = _numeric_cells(release)
                rows.append(cells)
            sides.append(np.array(rows, dtype=float))
        # released cells are post-processing of the noisy measures: the claimed profile still bounds them
        profile, note = self.claimed_profile()
        return AuditSamples(sides[0], sides[1], labels, claimed, mechanism, "full", profile=profile,
                            profile_note=note)


@dataclass
class _AlignedData(GroupData):
    #: whether this side's SQL returned the key at all
    present: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=bool))


def _aligned(data: GroupData, keys: list[tuple]) -> _AlignedData:
    """``data`` over ``keys`` (both sides' keys, in one order): absent keys have no rows."""
    where = {k: i for i, k in enumerate(data.keys)}
    idx = [where.get(k) for k in keys]
    present = np.array([i is not None for i in idx], dtype=bool)

    def pick(values: np.ndarray) -> np.ndarray:
        return np.array([values[i] if i is not None else 0.0 for i in idx], dtype=float)

    return _AlignedData(
        keys=keys,
        measures={name: pick(v) for name, v in data.measures.items()},
        histograms={name: [h[i] if i is not None else {} for i in idx] for name, h in data.histograms.items()},
        units=pick(data.units),
        present=present,
    )


def _group_label(group: tuple[Any, ...]) -> str:
    return f"[{', '.join(str(v) for v in group)}]" if group else ""


def _numeric_cells(release: Any) -> tuple[list[float], list[str]]:
    """The noisy cells of a release in a fixed order (by group key, then column), so that an
    ORDER BY on noisy values does not permute the observations. Key columns (public, exact)
    are skipped."""
    cells: list[tuple[str, str, float]] = []
    for i, row in enumerate(release.rows):
        key = ", ".join(str(row[j]) for j in range(len(row)) if release.intervals[i][j] is None)
        for j, column in enumerate(release.columns):
            if release.intervals[i][j] is None:
                continue
            value = row[j]
            cells.append((key, column, float(value) if value is not None else float("nan")))
    cells.sort(key=lambda c: (c[0], c[1]))
    return [c[2] for c in cells], [f"{c[1]} [{c[0]}]" if c[0] else c[1] for c in cells]
