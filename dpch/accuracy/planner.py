"""The planner: from a target and the measures' sensitivities to one calibrated release or a
noise-reduction grid.

The query's additive measures are stacked into ONE normalized vector: measure j (a vector over
the groups) is divided by its sensitivity, so the stack has ℓ2 sensitivity √k (Brownian) or ℓ1
sensitivity k (Laplace) for k measures, and one noise path serves the whole query (issue 4,
part 3: one Brownian motion per query vector). Measure j's noise is then its sensitivity times
the path's — the even split of an ordinary query (:mod:`dpch.pipeline.calibrate`).

- Brownian (docs/algorithms.md A2, A5): times t_1 > … > t_K, charge k/(2t) ρ (Rogers et al. 2023, Thm 6) and report
  the ex-post ε ψ(t) of a mixture δ-boundary (Whitehouse et al. 2022, Thm 3.6, Cor 3.7). The finest point t_K is the
  smallest t whose *worst case* the filter still admits (Rogers et al. 2023, Thm 6 condition 4, A7 pitfall 3) and
  whose ψ(t) ≤ ``dp_max_epsilon``. The grid is geometric in s = 1/t over six decades (1000
  points, ratio 1.014: a stop overshoots the needed ρ by at most 1.4%); ``grid="linear"`` is the
  paper's equally spaced ε² (used by the §7 benchmark).
- Laplace noise reduction (A1) for pure-ε filters: ε_1 < … < ε_K geometric over three decades
  (64 points), ε_K the largest the filter admits; the run costs ε_N ex post (Whitehouse et al. 2022, Prop 4.2).

- Direct calibration (:func:`plan_direct`): an absolute target on counts and sums only has
  half-widths fixed by the noise scale, so a noise-reduction run would stop at a point known before
  any data is read. dpch then skips the walk and calibrates ONE Gaussian or Laplace release: each
  measure is normalized by the data-unit noise its own target allows (norm_j = h/unit half-width at
  its level), so at normalized scale 1 every measure is exactly as noisy as its target permits. An
  ordinary fixed-cost release whose exact cost is known in advance, shown by EXPLAIN and charged by
  every filter: Gaussian ρ = Σ_j (Δ2_j/norm_j)²/2 and the analytic-Gaussian ε at the boundary δ
  (Balle & Wang 2018, Thm 8); Laplace ε = Σ_j Δ1_j/norm_j. Under zCDP filters the cheaper in ρ is
  used, under the others the cheaper in ε.

Everything here is computed before any data is read, from the plan, the target and the ledger.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np

from dpch.accounting.filters import FILTERS
from dpch.accuracy import bounds, rules
from dpch.errors import BudgetExceeded, QueryRejected
from dpch.mechanisms.boundaries import MixtureBoundary
from dpch.mechanisms.brownian import BrownianMechanism, BrownianRun
from dpch.mechanisms.calibration import analytic_gaussian_sigma
from dpch.mechanisms.lnr import LaplaceNoiseReduction, LNRRun
from dpch.mechanisms.normal import log_ndtr, ndtri
from dpch.mechanisms.rat import halting_margins
from dpch.mechanisms.sampling import NoiseSource
from dpch.privacy.cost import ZCDP, ApproxDP, ExPost, PrivacyCost, PureDP
from dpch.sql.accuracy_target import AccuracyTarget
from dpch.sql.aggregate_kinds import statistic
from dpch.sql.analyze import QueryPlan

#: a run of a plan's mechanism: one Brownian path or one Laplace noise-reduction chain
NoiseRun = BrownianRun | LNRRun

#: δ of the Brownian privacy boundary when neither the query nor the budget names one
DEFAULT_BOUNDARY_DELTA = 1e-6
#: without dp_delta, the boundary takes this share of the budget's δ (ex-post filters charge it per query)
BOUNDARY_DELTA_SHARE = 0.01
BROWNIAN_POINTS = 1000
BROWNIAN_DECADES = 6.0
LAPLACE_POINTS = 64
LAPLACE_DECADES = 3.0
#: the noisiest point a Brownian grid may start from, in s = 1/t (t ≤ 10¹²)
BROWNIAN_S_MIN = 1e-12
#: the least ε a Laplace noise-reduction grid may end at
LAPLACE_LEAST_EPSILON = 1e-9
RAT_POINTS = 200

Admits = Callable[[PrivacyCost], bool]


@dataclass(frozen=True)
class Blocks:
    """The stacked, normalized query vector: measure j over the groups, divided by ``norms[j]``."""

    names: tuple[str, ...]
    norms: tuple[float, ...]
    l1: tuple[float, ...]
    l2: tuple[float, ...]

    @property
    def k(self) -> int:
        return len(self.names)

    def stack_l2_squared(self) -> float:
        """Squared ℓ2 sensitivity of the normalized stack: Σ_j (Δ2_j/norm_j)² (= k when norms are the ℓ2
        sensitivities; a direct plan's norms put each measure's noise where its target needs it)."""
        return math.fsum((d / n) ** 2 for d, n in zip(self.l2, self.norms, strict=True))

    def stack_l1(self) -> float:
        """ℓ1 sensitivity of the normalized stack: Σ_j Δ1_j/norm_j."""
        return math.fsum(d / n for d, n in zip(self.l1, self.norms, strict=True))

    def stack(self, measures: dict[str, np.ndarray]) -> np.ndarray:
        return np.concatenate([np.asarray(measures[n], dtype=float) / d for n, d in zip(self.names, self.norms,
                                                                                         strict=True)])

    def unstack(self, vector: np.ndarray) -> dict[str, np.ndarray]:
        parts = np.split(vector, self.k)
        return {n: p * d for n, p, d in zip(self.names, parts, self.norms, strict=True)}


@dataclass
class AccuracyPlan:
    """A grid and its costs: :class:`BrownianPlan` (``grid`` holds times, decreasing) or
    :class:`LaplacePlan` (ε's, increasing). What differs between the two is in the two classes; the
    code that runs, reports or audits a plan asks the plan (never its kind's name)."""

    #: the family's name (EXPLAIN and reports); behaviour is the subclass's, never a branch on this
    kind: ClassVar[str]
    #: the ℓ2 (Gaussian noise) or ℓ1 (Laplace noise) sensitivity normalizes each measure
    uses_l2: ClassVar[bool]
    blocks: Blocks
    grid: np.ndarray
    target: AccuracyTarget
    uniform: bool
    delta: float = 0.0
    boundary: MixtureBoundary | None = None
    mixture_r: float = 1.0
    #: a refinement continues a path stopped at ``base_time``: costs are increments over it
    base_time: float | None = None
    notes: list[str] = field(default_factory=list)
    #: one fixed-cost release calibrated to the target (:func:`plan_direct`), not a noise-reduction walk
    direct: bool = False
    #: a refinement of a direct release: the base was charged a fixed (ε, δ), not ψ(base_time), so the
    #: refinement is charged the path's whole ψ(t) and the boundary's δ (conservative)
    base_direct: bool = False

    @property
    def sensitivity(self) -> float:
        """Sensitivity of the normalized stack: ℓ2 (Brownian) or ℓ1 (Laplace); √k or k for k measures
        normalized by their own sensitivities."""
        raise NotImplementedError

    @property
    def points(self) -> int:
        return int(self.grid.size)

    @property
    def mechanism(self) -> str:
        raise NotImplementedError

    def scale(self, step: int) -> float:
        """Normalized noise: the time t (Brownian) or the Laplace scale b."""
        raise NotImplementedError

    def noise_scale(self, step: int) -> float:
        """The normalized noise's scale parameter at ``step``: a standard deviation √t (Brownian) or b."""
        raise NotImplementedError

    def half_width(self, step: int, level: float) -> float:
        """Per-coordinate half-width of iterate ``step`` in normalized units (× sensitivity = data units)."""
        raise NotImplementedError

    def measure_sensitivities(self) -> tuple[float, ...]:
        """Each measure's sensitivity in the norm this plan's noise is calibrated to (ℓ2 or ℓ1)."""
        return self.blocks.l2 if self.uses_l2 else self.blocks.l1

    def cost_parts(self) -> list[float]:
        """Each measure's part of the cost: its part of the squared ℓ2 (Gaussian: its share of ρ) or of
        the ℓ1 (Laplace: exact, ε adds up), before normalizing to shares."""
        raise NotImplementedError

    def start(self, values: np.ndarray, source: NoiseSource) -> NoiseRun:
        """A run of this plan's mechanism on the normalized ``values``."""
        raise NotImplementedError

    def sample_noise(self, generator: np.random.Generator, scale: float, shape: tuple[int, ...]) -> np.ndarray:
        """Independent draws of the normalized noise at the normalized scale ``scale`` (:meth:`scale`: a time
        t or a Laplace scale b), for the audit's fast path."""
        raise NotImplementedError

    @property
    def ex_post_delta(self) -> float:
        """The δ of the run's ex-post ε (the Brownian boundary's; Laplace noise reduction has none)."""
        return 0.0

    def rat_schedule(self) -> tuple[tuple[float, ...], tuple[float, ...]]:
        """``dp_stop_rule = 'exact'``: ReducedAboveThreshold's privacy schedule E_n = ψ(t_n) over the
        grid (Cor 5.2) and its per-round threshold margins at β = 1 − confidence
        (:func:`dpch.mechanisms.rat.halting_margins`), so that a halt means every true error is ≤ h
        with the stated confidence."""
        epsilons = tuple(self._psi(float(t)) for t in self.grid)
        return epsilons, halting_margins(epsilons, 1.0, 1.0 - self.target.confidence)

    def _psi(self, t: float) -> float:
        assert self.boundary is not None
        return self.boundary(t)

    def cost_at(self, step: int) -> PrivacyCost:
        """Realized cost of a run stopped at ``step`` (an increment for a refinement)."""
        raise NotImplementedError

    def _direct_cost(self) -> PrivacyCost:
        raise NotImplementedError

    @property
    def worst_cost(self) -> PrivacyCost:
        return self.cost_at(self.points - 1)

    def total_epsilon(self, step: int) -> float:
        """Ex-post ε of the whole path up to ``step`` (a refinement includes what came before)."""
        raise NotImplementedError

    def total_rho(self, step: int) -> float | None:
        raise NotImplementedError

    def fixed_costs(self, step: int, confidence: float, delta: float) -> dict[str, float]:
        """What a fixed-ε query with the same per-measure half-widths would cost (issue 4 part 4).

        Laplace: ε = Σ_j Δ1_j·ln(1/β)/h_j; Gaussian: ρ = Σ_j Δ2_j²·z²/(2h_j²), and the (ε, δ) of
        dpch's analytic-Gaussian query (ε and δ split evenly over the k measures) with σ_j ≤ h_j/z.
        """
        beta = 1.0 - confidence
        z = float(ndtri(1.0 - beta / 2.0))
        hw = self.half_width(step, confidence)
        h = [n * hw for n in self.blocks.norms]
        lap = math.fsum(d1 * math.log(1.0 / beta) / hj for d1, hj in zip(self.blocks.l1, h, strict=True))
        rho = math.fsum(d2 * d2 * z * z / (2 * hj * hj) for d2, hj in zip(self.blocks.l2, h, strict=True))
        sigma_unit = min(hj / (z * d2) for d2, hj in zip(self.blocks.l2, h, strict=True))
        k = self.blocks.k
        lo, hi = 1e-9, 1e4
        if analytic_gaussian_sigma(hi / k, delta / k) > sigma_unit:
            gauss = math.inf
        else:
            for _ in range(80):  # bisection in log ε: σ(ε) decreases in ε
                mid = math.sqrt(lo * hi)
                if analytic_gaussian_sigma(mid / k, delta / k) > sigma_unit:
                    lo = mid
                else:
                    hi = mid
            gauss = hi
        return {"laplace_epsilon": lap, "gaussian_epsilon": gauss, "gaussian_delta": delta, "gaussian_rho": rho}


@dataclass
class BrownianPlan(AccuracyPlan):
    """The Brownian mechanism over a grid of times (Whitehouse et al. 2022; Rogers et al. 2023, Thm 6), or a
    direct Gaussian release (:func:`plan_direct`)."""

    kind = "brownian"
    uses_l2 = True

    @property
    def sensitivity(self) -> float:
        return math.sqrt(self.blocks.stack_l2_squared())

    @property
    def mechanism(self) -> str:
        if self.direct:
            return "gaussian"
        return "brownian+rat" if self.target.stop_rule == "exact" else "brownian"

    def scale(self, step: int) -> float:
        return float(self.grid[step])

    def noise_scale(self, step: int) -> float:
        return math.sqrt(self.scale(step))

    def half_width(self, step: int, level: float) -> float:
        t = self.scale(step)
        if self.uniform:
            return bounds.gaussian_uniform(t, level, self.mixture_r)
        return bounds.gaussian_fixed(t, level)

    def cost_parts(self) -> list[float]:
        return [(d / n) ** 2 for d, n in zip(self.blocks.l2, self.blocks.norms, strict=True)]

    def brownian(self) -> BrownianMechanism:
        """The Brownian mechanism over this grid: a new run starts on it, a refinement continues a path on it."""
        assert self.boundary is not None
        return BrownianMechanism(self.sensitivity, self.grid, self.boundary)

    def start(self, values: np.ndarray, source: NoiseSource) -> NoiseRun:
        return self.brownian().start(values, source)

    def sample_noise(self, generator: np.random.Generator, scale: float, shape: tuple[int, ...]) -> np.ndarray:
        return generator.normal(0.0, math.sqrt(scale), shape)

    @property
    def ex_post_delta(self) -> float:
        return self.delta

    def cost_at(self, step: int) -> PrivacyCost:
        if self.direct:
            return self._direct_cost()
        last = self.points - 1
        t, t_k, k = self.scale(step), self.scale(last), self.blocks.stack_l2_squared()
        if self.target.stop_rule == "exact":  # Whitehouse et al. 2022, Cor 5.2: (2ψ(T_N), δ); no zCDP view
            return PrivacyCost.realized(ExPost(2 * self._psi(t), self.delta, 2 * self._psi(t_k)))
        if self.base_time is None:
            return PrivacyCost.realized(ExPost(self._psi(t), self.delta, self._psi(t_k)),
                                        rho=k / (2 * t), worst_rho=k / (2 * t_k))
        t0 = self.base_time
        paid = 0.0 if self.base_direct else self._psi(t0)
        return PrivacyCost.realized(
            ExPost(max(0.0, self._psi(t) - paid), self.delta if self.base_direct else 0.0,
                   max(0.0, self._psi(t_k) - paid)),
            rho=k / (2 * t) - k / (2 * t0), worst_rho=k / (2 * t_k) - k / (2 * t0))

    def _direct_cost(self) -> PrivacyCost:
        """Gaussian N(0, t) per normalized coordinate: k/(2t)-zCDP and (analytic-Gaussian ε, δ)-DP."""
        g = float(self.grid[0])
        k = self.blocks.stack_l2_squared()
        return PrivacyCost.of(ApproxDP(analytic_gaussian_epsilon(math.sqrt(g), self.delta, math.sqrt(k)), self.delta),
                              ZCDP(k / (2 * g)))

    def total_epsilon(self, step: int) -> float:
        if self.direct:
            return self._direct_cost().epsilon
        factor = 2.0 if self.target.stop_rule == "exact" else 1.0
        return factor * self._psi(self.scale(step))

    def total_rho(self, step: int) -> float | None:
        if self.direct:
            return self._direct_cost().rho
        if self.target.stop_rule == "exact":
            return None
        return self.blocks.stack_l2_squared() / (2 * self.scale(step))


@dataclass
class LaplacePlan(AccuracyPlan):
    """Laplace noise reduction over a grid of ε's (Koufogiannis et al.; Whitehouse et al. 2022, Prop 4.2), or
    a direct Laplace release (:func:`plan_direct`)."""

    kind = "laplace"
    uses_l2 = False

    @property
    def sensitivity(self) -> float:
        return self.blocks.stack_l1()

    @property
    def mechanism(self) -> str:
        return "laplace" if self.direct else "laplace-noise-reduction"

    def scale(self, step: int) -> float:
        return self.sensitivity / float(self.grid[step])

    def noise_scale(self, step: int) -> float:
        return self.scale(step)

    def half_width(self, step: int, level: float) -> float:
        b = self.scale(step)
        return bounds.laplace_uniform(b, level, self.points) if self.uniform else bounds.laplace_fixed(b, level)

    def cost_parts(self) -> list[float]:
        return [d / n for d, n in zip(self.blocks.l1, self.blocks.norms, strict=True)]

    def start(self, values: np.ndarray, source: NoiseSource) -> NoiseRun:
        return LaplaceNoiseReduction(self.sensitivity, self.grid).start(values, source)

    def sample_noise(self, generator: np.random.Generator, scale: float, shape: tuple[int, ...]) -> np.ndarray:
        return generator.laplace(0.0, scale, shape)

    def cost_at(self, step: int) -> PrivacyCost:
        if self.direct:
            return self._direct_cost()
        eps, worst = float(self.grid[step]), float(self.grid[self.points - 1])
        return PrivacyCost.realized(ExPost(eps, 0.0, worst))

    def _direct_cost(self) -> PrivacyCost:
        """Laplace at ε is ε-DP (k/b)."""
        return PrivacyCost.of(PureDP(float(self.grid[0])))

    def total_epsilon(self, step: int) -> float:
        if self.direct:
            return self._direct_cost().epsilon
        return float(self.grid[step])

    def total_rho(self, step: int) -> float | None:
        return self._direct_cost().rho if self.direct else None


#: the plan family of each kind's name (:func:`choose_kind`)
PLANS: dict[str, type[AccuracyPlan]] = {"brownian": BrownianPlan, "laplace": LaplacePlan}


def blocks_for(plan: QueryPlan, kind: str) -> Blocks:
    measures = [m for m in plan.measures if m.kind != "histogram"]
    norms = tuple(float(m.l2_sensitivity if PLANS[kind].uses_l2 else m.sensitivity) for m in measures)
    return Blocks(tuple(m.name for m in measures), norms, tuple(float(m.sensitivity) for m in measures),
                  tuple(float(m.l2_sensitivity) for m in measures))


def choose_kind(mechanism: str | None, filter_name: str, budget_delta: float) -> str:
    """Brownian unless the deployment is pure ε (a pure filter or a budget with δ = 0)."""
    if mechanism == "gaussian":
        return "brownian"
    if mechanism == "laplace":
        return "laplace"
    return "laplace" if FILTERS[filter_name].pure_only or budget_delta == 0 else "brownian"


def _largest(ok: Callable[[float], bool], lo: float, hi: float) -> float | None:
    """Largest x in [lo, hi] with ok(x), ok monotone (true below a threshold); bisection in log x."""
    if not ok(lo):
        return None
    if ok(hi):
        return hi
    a, b = math.log(lo), math.log(hi)
    for _ in range(100):
        mid = (a + b) / 2
        if ok(math.exp(mid)):
            a = mid
        else:
            b = mid
    return math.exp(a)


def _refuse_unsupported(plan: QueryPlan, target: AccuracyTarget) -> None:
    if plan.partition_selection:
        raise QueryRejected("accuracy-first queries need declared group keys (GROUP BY a public column with "
                            "values); partition selection is not supported with dp_accuracy",
                            hint="group by a public column, or use dp_epsilon")
    if any(m.kind == "histogram" for m in plan.measures):
        raise QueryRejected("quantiles have a rank error, not an interval: they cannot be run accuracy-first",
                            hint="drop dp_accuracy/dp_relative_error, or drop the quantile")
    if not any(m.kind != "histogram" for m in plan.measures):
        raise QueryRejected("the query has no noisy aggregate to make accurate")
    if target.stop_rule == "exact" and any(not statistic(s).additive for s in plan.stats.values()):
        raise QueryRejected("dp_stop_rule = 'exact' supports count and sum aggregates only",
                            hint="use the default dp_stop_rule = 'released'")


def _s_grid(s_top: float, points: int, grid: str) -> np.ndarray:
    if grid == "linear":  # Rogers et al. 2023, §7: ε² equally spaced; s is proportional to ε²
        return np.linspace(s_top * 1e-6, s_top, points)
    return np.geomspace(s_top * 10.0**-BROWNIAN_DECADES, s_top, points)


def plan_accuracy(plan: QueryPlan, target: AccuracyTarget, *, mechanism: str | None, delta: float,
                  filter_name: str, budget_delta: float, epsilon_hint: float, admits: Admits,
                  refuse: Callable[[PrivacyCost], None], uniform: bool, grid: str = "geometric",
                  points: int | None = None) -> AccuracyPlan:
    """The grid of a new accuracy-first run (no data read). ``admits(worst)`` asks the filter;
    ``refuse(worst)`` raises its BudgetExceeded; ``epsilon_hint`` (the budget left) tunes the boundary."""
    _refuse_unsupported(plan, target)
    kind = choose_kind(mechanism, filter_name, budget_delta)
    if target.stop_rule == "exact" and kind != "brownian":
        raise QueryRejected("dp_stop_rule = 'exact' runs ReducedAboveThreshold over the Brownian mechanism, "
                            "which needs δ > 0", hint="use the default dp_stop_rule = 'released'")
    blocks = blocks_for(plan, kind)
    cap = target.max_epsilon
    if cap is None and not FILTERS[filter_name].charges_realized:
        raise QueryRejected(
            f"under the {filter_name} filter an accuracy-first query is charged its worst case, so it needs a cap",
            hint="add dp_max_epsilon (what you are willing to spend), or ask the data owner for a filter that "
                 "charges the realized cost: zcdp_bm, ex_post, mixed")
    if kind == "laplace":
        def lap_cost(eps: float) -> PrivacyCost:
            return PrivacyCost.realized(ExPost(eps, 0.0, eps))

        if cap is not None and cap < LAPLACE_LEAST_EPSILON:
            raise _cap_below_least(cap, LAPLACE_LEAST_EPSILON)
        top = _largest(lambda e: (cap is None or e <= cap) and admits(lap_cost(e)), LAPLACE_LEAST_EPSILON,
                       cap or 1e6)
        if top is None:
            refuse(lap_cost(LAPLACE_LEAST_EPSILON))
            raise BudgetExceeded("the budget admits no Laplace noise reduction")  # pragma: no cover
        epsilons = np.geomspace(top * 10.0**-LAPLACE_DECADES, top, points or LAPLACE_POINTS)
        return LaplacePlan(blocks, epsilons, target, uniform)

    bdelta = delta if delta > 0 else (budget_delta * BOUNDARY_DELTA_SHARE if budget_delta > 0
                                      else DEFAULT_BOUNDARY_DELTA)
    sens = math.sqrt(blocks.k)
    factor = 2.0 if target.stop_rule == "exact" else 1.0  # ReducedAboveThreshold costs 2ψ (Cor 5.2)
    if cap is not None:
        # ψ^M_ρ(t) ≥ (Δ2/t)·√(2t·log(1/δ)) for every ρ: no step of the grid (t ≤ 1/s_min) costs less
        least = factor * sens * math.sqrt(2.0 * math.log(1.0 / bdelta) * BROWNIAN_S_MIN)
        if cap < least:
            raise _cap_below_least(cap, least)
    ref = cap if cap is not None else max(epsilon_hint, 1e-6)
    boundary = MixtureBoundary.optimal(ref, bdelta, sens)
    if points is None:
        points = RAT_POINTS if target.stop_rule == "exact" else BROWNIAN_POINTS
    probe = BrownianPlan(blocks, np.array([1.0]), target, uniform, bdelta, boundary)

    def cost_at_time(t: float) -> PrivacyCost:
        probe.grid = np.array([t])
        return probe.cost_at(0)

    def fits(s: float) -> bool:
        c = cost_at_time(1.0 / s)
        return (cap is None or probe.total_epsilon(0) <= cap * (1 + 1e-12)) and admits(c)

    s_top = _largest(fits, BROWNIAN_S_MIN, 1.0 / BROWNIAN_S_MIN)
    if s_top is None:
        coarsest = cost_at_time(1.0 / BROWNIAN_S_MIN)
        if cap is not None and probe.total_epsilon(0) > cap * (1 + 1e-12):  # the cap, not the budget
            raise _cap_below_least(cap, probe.total_epsilon(0))
        refuse(coarsest)
        raise BudgetExceeded("the budget admits no Brownian noise reduction")  # pragma: no cover
    s = _s_grid(s_top, points, grid)
    result = BrownianPlan(blocks, 1.0 / s, target, uniform, bdelta, boundary)
    result.mixture_r = _mixture_r(result, s)
    if target.stop_rule == "exact":
        _refuse_unreachable_exact(result)
    return result


#: the median of |N(0, 1)|: half of an iterate's errors at time t are below this × √t
_MEDIAN_ABS_NORMAL = 0.6744897501960817


def _refuse_unreachable_exact(plan: AccuracyPlan) -> None:
    """Refuses, before anything is charged, a ``dp_stop_rule = 'exact'`` run that would more likely
    than not end withheld: one whose finest step's test margin, plus the median error of that step's
    iterate, already exceeds what the target allows (in normalized units, h over the largest norm).
    The ε it would need is estimated from the margin's 1/ε scale and the boundary's time for ε."""
    assert plan.target.accuracy is not None and plan.boundary is not None
    boundary = plan.boundary
    allowed = plan.target.accuracy / max(plan.blocks.norms)
    epsilons, margins = plan.rat_schedule()
    t_last = float(plan.grid[-1])
    if margins[-1] + _MEDIAN_ABS_NORMAL * math.sqrt(t_last) <= allowed:
        return
    scale = margins[-1] * epsilons[-1]  # margin × ε is fixed for a round's share of β

    def short(eps: float) -> bool:
        return scale / eps + _MEDIAN_ABS_NORMAL * math.sqrt(boundary.time_for(eps)) > allowed

    lo, hi = epsilons[-1], epsilons[-1] * 1e6
    needed = "far more"
    if not short(hi):
        for _ in range(60):
            mid = math.sqrt(lo * hi)
            lo, hi = (mid, hi) if short(mid) else (lo, mid)
        needed = f"about {2 * hi:.3g}"
    raise QueryRejected(
        f"dp_stop_rule = 'exact' cannot meet {plan.target.describe()} within what dp_max_epsilon and the "
        f"budget allow (ε {2 * epsilons[-1]:.3g} at its finest step): its private test of the true error "
        f"would more likely than not fail even there, and the answer be withheld after the charge. It would "
        f"need ε {needed}; nothing was spent",
        hint="raise dp_max_epsilon (or ask for more budget), widen dp_accuracy, or use the default "
             "dp_stop_rule = 'released', which tests the released values and costs far less")


def _cap_below_least(cap: float, least: float) -> QueryRejected:
    """The refusal of a ``dp_max_epsilon`` below what the noisiest step of any run would cost."""
    return QueryRejected(
        f"dp_max_epsilon {cap:g} is below ε {least:.3g}, the least a noise-reduction run of this query can "
        "spend (its noisiest step); nothing was spent",
        hint=f"raise dp_max_epsilon to at least {least:.2g}, or use dp_epsilon for a fixed-cost query")


def analytic_gaussian_epsilon(sigma: float, delta: float, sensitivity: float) -> float:
    """The smallest ε for which N(0, σ²) on a query of ℓ2 sensitivity Δ is (ε, δ)-DP: the root in ε
    of Φ(Δ/(2σ) − εσ/Δ) − e^ε·Φ(−Δ/(2σ) − εσ/Δ) = δ (Balle & Wang 2018, Thm 8; the left side
    decreases in ε), in log space."""
    # start-up: scipy.optimize takes 0.1–0.5 s to import; load it when a root or minimum is first needed
    from scipy.optimize import brentq

    a = sensitivity / (2.0 * sigma)

    def excess(eps: float) -> float:
        b = eps * sigma / sensitivity
        return math.exp(float(log_ndtr(a - b))) - math.exp(eps + float(log_ndtr(-a - b))) - delta

    if excess(0.0) <= 0:
        return 0.0
    hi = 1.0
    while excess(hi) > 0:
        hi *= 2.0
    return float(brentq(excess, 0.0, hi, xtol=1e-15, rtol=1e-13, maxiter=500))


def direct_applies(plan: QueryPlan, target: AccuracyTarget) -> bool:
    """Whether ``target`` has a data-independent stopping point: an absolute target on counts and
    sums with the default stopping rule (their half-widths depend on the noise scale alone)."""
    return target.stop_rule == "released" and not rules.data_dependent(plan, target)


def _direct_blocks(plan: QueryPlan, target: AccuracyTarget, kind: str, unit: Callable[[float], float]) -> Blocks:
    """Blocks whose norms put each measure's noise exactly where its target needs it at normalized
    scale 1: norm_j = h/unit(level_j), ``unit(level)`` being the half-width of unit noise at the level
    the measure's column reports. Each measure is then noised no more than its own target allows —
    the cheapest calibration: ρ = Σ_j (Δ2_j/norm_j)²/2, ε = Σ_j Δ1_j/norm_j."""
    assert target.accuracy is not None
    levels: dict[str, float] = {}
    for name, level in rules.checked_stats(plan, target.confidence).items():
        measure = plan.stats[name].measures[0]
        levels[measure] = max(levels.get(measure, 0.0), level)
    base = blocks_for(plan, kind)
    # one part in 10^12 below the target, so the reported half-width is ≤ h after rounding
    norms = tuple(target.accuracy * (1.0 - 1e-12) / unit(levels.get(name, target.confidence))
                  for name in base.names)
    return Blocks(base.names, norms, base.l1, base.l2)


def plan_direct(plan: QueryPlan, target: AccuracyTarget, *, mechanism: str | None, delta: float,
                budget_delta: float, pure_only: bool, prefer_rho: bool, epsilon_hint: float,
                admits: Admits) -> AccuracyPlan:
    """ONE release calibrated to an absolute target on counts and sums (no data read).

    Candidates: Laplace (scale 1 on the normalized stack, ε = its ℓ1 sensitivity) and, unless the filter
    is pure-only or no δ is available, Gaussian (variance 1, ρ = ℓ2²/2, analytic-Gaussian ε at δ =
    ``dp_delta`` or 1% of the budget's δ). ``mechanism`` forces one; else the cheaper in the filter's
    currency (ρ when ``prefer_rho``, else ε), preferring one the filter admits. A cost above
    ``dp_max_epsilon`` is refused here, before anything is spent."""
    _refuse_unsupported(plan, target)
    bdelta = delta if delta > 0 else (budget_delta * BOUNDARY_DELTA_SHARE if budget_delta > 0 else 0.0)
    kinds = {"gaussian": ["brownian"], "laplace": ["laplace"]}.get(mechanism or "", [])
    if not kinds:
        kinds = ["laplace"] + (["brownian"] if not pure_only and bdelta > 0 else [])
    if "brownian" in kinds and bdelta <= 0:
        raise QueryRejected("the Gaussian mechanism needs dp_delta > 0 (or a budget with δ > 0)",
                            hint="add e.g. dp_delta = 1e-6, or use dp_mechanism = 'laplace'")
    candidates = []
    for kind in kinds:
        draft: AccuracyPlan
        if kind == "brownian":  # variance 1 on the normalized stack
            blocks = _direct_blocks(plan, target, kind, lambda level: bounds.gaussian_fixed(1.0, level))
            draft = BrownianPlan(blocks, np.array([1.0]), target, False, bdelta, direct=True)
        else:  # Laplace scale 1: ε = the stack's ℓ1 sensitivity
            blocks = _direct_blocks(plan, target, kind, lambda level: bounds.laplace_fixed(1.0, level))
            draft = LaplacePlan(blocks, np.array([blocks.stack_l1()]), target, False, direct=True)
        candidates.append(draft)

    def price(p: AccuracyPlan) -> tuple[bool, float]:
        c = p.worst_cost
        value = (c.rho if c.rho is not None else c.epsilon ** 2 / 2) if prefer_rho else c.epsilon
        return (not admits(c), value)

    chosen = min(candidates, key=price)
    cap = target.max_epsilon
    cost = chosen.worst_cost
    if cap is not None and cost.epsilon > cap * (1 + 1e-12):
        raise QueryRejected(
            f"the target {target.describe()} needs ε {cost.epsilon:.6g} ({chosen.mechanism}), above "
            f"dp_max_epsilon {cap:g}; nothing was spent",
            hint="raise dp_max_epsilon or widen dp_accuracy")
    if isinstance(chosen, BrownianPlan):
        # the boundary serves a later refinement of this release (its ψ, Whitehouse et al. 2022, Thm 3.6);
        # set after the cap is checked, and tuned no lower than ε 1e-6 (any ρ gives a valid boundary)
        chosen.boundary = MixtureBoundary.optimal(max(cap or epsilon_hint, 1e-6), bdelta, chosen.sensitivity)
    return chosen


def plan_refinement(previous: AccuracyPlan, base_time: float, target: AccuracyTarget, *, admits: Admits,
                    refuse: Callable[[PrivacyCost], None]) -> BrownianPlan:
    """The grid that continues a Brownian path stopped at ``base_time`` (cost: the increments)."""
    cap = target.max_epsilon
    base_direct = previous.direct  # a later refinement continues from a ψ already charged
    probe = BrownianPlan(previous.blocks, np.array([base_time]), target, previous.uniform,
                         previous.delta, previous.boundary, previous.mixture_r, base_time=base_time,
                         base_direct=base_direct)

    def cost_at_time(t: float) -> PrivacyCost:
        probe.grid = np.array([t])
        return probe.cost_at(0)

    s0 = 1.0 / base_time

    def fits(s: float) -> bool:
        c = cost_at_time(1.0 / s)
        return (cap is None or probe.total_epsilon(0) <= cap * (1 + 1e-12)) and admits(c)

    s_top = _largest(fits, s0 * (1 + 1e-9), s0 * 1e12)
    if s_top is None:
        nearest = cost_at_time(1.0 / (s0 * (1 + 1e-9)))
        if cap is not None and probe.total_epsilon(0) > cap * (1 + 1e-12):  # the cap, not the budget
            raise QueryRejected(
                f"max_epsilon {cap:g} is below ε {probe.total_epsilon(0):.3g}, what the path has already "
                "spent; a refinement can only add to it, so nothing was spent",
                hint="raise max_epsilon above the path's ε so far, or leave it out")
        refuse(nearest)
        raise BudgetExceeded("the budget admits no further refinement")  # pragma: no cover
    s = np.geomspace(s0, s_top, BROWNIAN_POINTS + 1)[1:]
    return BrownianPlan(previous.blocks, 1.0 / s, target, previous.uniform, previous.delta,
                        previous.boundary, previous.mixture_r, base_time=base_time, base_direct=base_direct)


def _mixture_r(plan: AccuracyPlan, s: np.ndarray) -> float:
    """r of the uniform bound, tightest where an absolute target is expected to stop (else mid-grid)."""
    level = plan.target.confidence
    s_ref = math.sqrt(float(s[0]) * float(s[-1]))
    if plan.target.accuracy is not None:
        z = float(ndtri(1.0 - (1.0 - level) / 2.0))
        s_ref = min(float(s[-1]), max(float(s[0]), (z * plan.sensitivity / plan.target.accuracy) ** 2
                                      * max(plan.blocks.norms) ** 2 / plan.sensitivity ** 2))
    return bounds.best_mixture_r(s_ref, level)
