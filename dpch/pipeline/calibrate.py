"""Calibration: one mechanism per noisy part of a plan, and the query's exact total cost.

A query's ε is split evenly over its noisy parts — each additive measure, each quantile
*statistic*'s exponential mechanism (two quantiles of one column share a histogram but run two
mechanisms, so they take two shares), and partition selection when a GROUP BY key is private —
and the split is reported. δ goes to the Gaussian measures and to partition selection (evenly);
a pure-ε (Laplace) query with partition selection spends all of its δ on the selection.
Nothing costs more than the ε and δ asked for (basic composition of the parts).

:func:`check_cost` is the cost self-check (docs/design.md rule 7): from the plan alone it counts the
mechanisms the release will run and fails closed, before anything is charged, unless the noise
plan has exactly those mechanisms and their cost, recomputed from the noise they draw and composed
by :mod:`.cost_audit` (independently of :mod:`dpch.privacy.cost`), is what will be charged.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from sqlglot import exp

from dpch.errors import CostCheckFailed, QueryRejected
from dpch.mechanisms.exponential import ExponentialMechanism
from dpch.mechanisms.gaussian import GaussianMechanism
from dpch.mechanisms.laplace import LaplaceMechanism
from dpch.mechanisms.partition_selection import LaplacePartitionSelection
from dpch.pipeline import bound_report, cost_audit
from dpch.privacy.cost import PrivacyCost
from dpch.sql.aggregate_kinds import statistic
from dpch.sql.aggregates import Measure, Stat
from dpch.sql.analyze import MAX_GROUPS, UNIT_COLUMN, QueryPlan
from dpch.sql.settings import QueryOptions

Additive = LaplaceMechanism | GaussianMechanism
Mechanism = Additive | ExponentialMechanism | LaplacePartitionSelection


@dataclass
class NoisePlan:
    """The mechanisms of one query and what they cost together."""

    additive: dict[str, Additive] = field(default_factory=dict)
    #: one exponential mechanism per quantile statistic (keyed by the statistic's name)
    selectors: dict[str, ExponentialMechanism] = field(default_factory=dict)
    selection: LaplacePartitionSelection | None = None
    mechanism: str = "laplace"
    #: the measure whose released value is the selection's own noisy count of units (one mechanism
    #: for both: :func:`shared_count`); it has no additive mechanism of its own
    shared: str | None = None
    #: ``dp_report_dropped``'s two mechanisms (:mod:`.bound_report`), empty unless it was asked
    dropped: dict[str, LaplaceMechanism] = field(default_factory=dict)

    def half_width(self, measure: str, level: float) -> float:
        """The half-width of ``measure``'s noise at confidence ``level``."""
        if measure == self.shared and self.selection is not None:
            return self.selection.half_width(level)
        return self.additive[measure].half_width(level)

    @property
    def mechanisms(self) -> list[Mechanism]:
        """Every mechanism that will draw noise for the release (what the cost check recomputes)."""
        out: list[Mechanism] = [*self.additive.values(), *self.selectors.values()]
        return out + ([self.selection] if self.selection is not None else []) + list(self.dropped.values())

    @property
    def parts(self) -> list[tuple[str, PrivacyCost]]:
        parts = [(name, m.cost) for name, m in self.additive.items()]
        parts += [(name, m.cost) for name, m in self.selectors.items()]
        if self.selection is not None:
            parts.append(("partition selection", self.selection.cost))
        return parts + [(name, m.cost) for name, m in self.dropped.items()]

    @property
    def cost(self) -> PrivacyCost:
        """The charge: the composition of every mechanism's typed cost (:meth:`PrivacyCost.composed`).

        Its (ε, δ) is the basic composition of the parts' (ε, δ); its ρ the zCDP composition of
        each part's own ρ (Gaussian Δ2²/(2σ²), exponential mechanism ε²/8) or of its (ε, δ)
        converted (Bun & Steinke 2016, Prop 1.4; Rogers et al. 2023, Lemma 2.3), so a zCDP filter
        charges the mechanisms' real ρ.
        """
        return PrivacyCost.composed([cost for _, cost in self.parts])


def calibrate(plan: QueryPlan, opts: QueryOptions) -> NoisePlan:
    """Chooses and calibrates every mechanism of ``plan`` under ``opts``."""
    mechanism = opts.resolved_mechanism
    selection = plan.partition_selection
    if mechanism == "gaussian" and opts.delta <= 0:
        raise QueryRejected("the Gaussian mechanism needs dp_delta > 0",
                            hint="add e.g. dp_delta = 1e-6, or use dp_mechanism = 'laplace'")
    if selection and opts.delta <= 0:
        raise QueryRejected(
            "GROUP BY on a private column needs dp_delta > 0: keys are released by partition selection",
            hint="add e.g. SETTINGS dp_delta = 1e-6, or group by a public column with declared values")
    if mechanism == "laplace" and opts.delta > 0 and not selection:
        raise QueryRejected("the Laplace mechanism is pure ε-DP and takes no dp_delta",
                            hint="drop dp_delta, or use dp_mechanism = 'gaussian'")
    # the measure whose noisy value is the selection's own noisy count of units: one mechanism for both,
    # so one share of ε fewer (the whole ε and δ when it is the only measure)
    shared = shared_count(plan, mechanism) if selection else None
    additive = [m for m in plan.measures if m.kind != "histogram" and m.name != shared]
    quantiles = quantile_stats(plan)
    parts = len(additive) + len(quantiles) + (1 if selection else 0)
    # dp_report_dropped takes its stated share of ε first; the answer's parts split the rest evenly
    answer_epsilon = opts.epsilon * (1.0 - bound_report.REPORT_SHARE) if plan.report_dropped else opts.epsilon
    eps = answer_epsilon / parts
    delta_parts = (len(additive) if mechanism == "gaussian" else 0) + (1 if selection else 0)
    delta = opts.delta / delta_parts if delta_parts else 0.0
    dimension = len(plan.group_domain) if plan.group_domain is not None else 2
    noise = NoisePlan(mechanism=mechanism, shared=shared)
    for m in additive:
        if mechanism == "gaussian":
            # a unit moves at most groups_per_unit coordinates: at 1 the scalar calibration is exact
            noise.additive[m.name] = GaussianMechanism(eps, delta, m.l2_sensitivity, integer=m.integer,
                                                       dimension=dimension, unit_coordinates=plan.groups_per_unit)
        else:
            # the representability check (dpch.mechanisms.representable) needs every coordinate that
            # will be released: the declared groups, or at most MAX_GROUPS keys under partition selection
            noise.additive[m.name] = LaplaceMechanism(eps, m.sensitivity, integer=m.integer,
                                                      dimension=len(plan.group_domain) if plan.group_domain
                                                      is not None else MAX_GROUPS)
    measures = {m.name: m for m in plan.measures}
    for stat in quantiles:
        # one mechanism per quantile: each draws its own noise, so each takes its own share. Within
        # one quantile the rank utility moves by at most k over all groups together (a unit's k rows
        # are split among them), so one ε covers every group's run
        noise.selectors[stat.name] = ExponentialMechanism(eps, measures[stat.measures[0]].sensitivity)
    if selection:
        noise.selection = LaplacePartitionSelection(eps, delta, plan.groups_per_unit)
    if plan.report_dropped:
        noise.dropped = bound_report.mechanisms(opts.epsilon)
    check_cost(plan, opts, noise)
    return noise


def shared_count(plan: QueryPlan, mechanism: str) -> str | None:
    """The measure whose per-key value *is* the count of distinct units partition selection
    thresholds, so the selection's noisy count can be released as its value (Laplace queries;
    :mod:`dpch.mechanisms.partition_selection`): ``count(DISTINCT unit)``, or ``count(*)`` over one
    table (no join) that holds at most one row per unit, whose unit is never NULL. Other measures of
    the query (a sum beside the count, an avg's count) keep their own mechanisms. Decided from the
    plan alone, never from the data. None otherwise: the selection is a mechanism of its own."""
    if mechanism != "laplace":
        return None
    for m in plan.measures:
        one_row_each = (m.kind == "count" and _call_name(m.node) == "count" and not m.node.expressions
                        and m.node.this is None and plan.relation.cap == 1 and not plan.relation.joins
                        and len(plan.relation.tables) == 1 and not plan.table.nullable_unit)
        if (counts_distinct_units(m) or one_row_each) and m.sensitivity <= plan.groups_per_unit:
            return m.name
    return None


def counts_distinct_units(measure: Measure) -> bool:
    """Whether ``measure`` is ``count(DISTINCT unit)``: per key, the number of distinct privacy units
    (one unit moves it by at most 1 in each key it touches)."""
    node = measure.node
    args = list(node.expressions) if isinstance(node, exp.Anonymous) else []
    return (measure.kind == "distinct" and _call_name(node) == "uniqexact" and len(args) == 1
            and isinstance(args[0], exp.Column) and args[0].name == UNIT_COLUMN)


def _call_name(node: exp.Expr) -> str:
    if isinstance(node, exp.Anonymous):
        return str(node.this).lower()
    return node.sql_name().lower() if isinstance(node, exp.Func) else ""


def quantile_stats(plan: QueryPlan) -> list[Stat]:
    """The plan's quantile statistics: each runs one exponential mechanism."""
    return [s for s in plan.stats.values() if statistic(s).selected]


#: relative slack for float rounding when comparing composed costs with the request
_ROUNDING = 1e-9


def check_cost(plan: QueryPlan, opts: QueryOptions, noise: NoisePlan) -> None:
    """The cost self-check (docs/design.md rule 7), before the charge; raises :class:`CostCheckFailed`.

    Counted from the plan: one additive mechanism per non-histogram measure, one exponential
    mechanism per quantile statistic, one partition selection when a key is private. The noise
    plan must hold exactly those mechanisms; the cost charged, :attr:`NoisePlan.cost`, must be the
    composition of the costs of every mechanism that will draw noise, recomputed and composed
    independently of :mod:`dpch.privacy.cost` (:func:`composition_problems`), in each view a filter
    may read — (ε, δ) by basic composition (Dwork & Roth 2014, Thm 3.16), ρ by zCDP composition (Bun &
    Steinke 2016, Lemma 1.7; Rogers et al. 2023, Lemma 2.4) — and its (ε, δ) must not exceed the ε and
    δ asked for.
    """
    expected_additive = {m.name for m in plan.measures if m.kind != "histogram"} - {noise.shared}
    if noise.shared is not None and (noise.selection is None or noise.shared != shared_count(plan, noise.mechanism)):
        problems_shared = ["a measure shares the selection's noise without being its count of units"]
    else:
        problems_shared = []
    expected_selectors = {s.name for s in quantile_stats(plan)}
    problems = problems_shared
    if set(noise.additive) != expected_additive:
        problems.append(f"additive mechanisms {sorted(noise.additive)} ≠ measures {sorted(expected_additive)}")
    if set(noise.selectors) != expected_selectors:
        problems.append(f"exponential mechanisms {sorted(noise.selectors)} ≠ quantiles {sorted(expected_selectors)}")
    if (noise.selection is not None) != plan.partition_selection:
        problems.append("partition selection does not match the plan's keys")
    expected_report = {bound_report.KEPT_MASS, bound_report.UNITS} if plan.report_dropped else set()
    if set(noise.dropped) != expected_report:
        problems.append(f"dropped-report mechanisms {sorted(noise.dropped)} ≠ {sorted(expected_report)}")
    problems += composition_problems(noise.cost, noise.mechanisms, opts)
    if problems:
        raise CostCheckFailed("; ".join(problems))


def composition_problems(charged: PrivacyCost, mechanisms: Sequence[object], opts: QueryOptions) -> list[str]:
    """The half of the cost self-check every fixed-cost release shares: ``charged`` must be the
    composition of the costs of the ``mechanisms`` that will draw noise, recomputed from the noise
    they draw and composed independently of :mod:`dpch.privacy.cost` (:mod:`.cost_audit`: a wrong
    ``compose`` cannot pass its own check), in each view a filter may read — (ε, δ) by basic
    composition (Dwork & Roth 2014, Thm 3.16), ρ by zCDP composition (Bun & Steinke 2016, Lemma
    1.7) — and must not exceed the ε and δ asked for."""
    problems = cost_audit.charge_problems(charged, mechanisms)
    if charged.epsilon > opts.epsilon * (1 + _ROUNDING) or charged.delta > opts.delta * (1 + _ROUNDING):
        problems.append(f"cost {charged} exceeds the request ε {opts.epsilon}, δ {opts.delta}")
    return problems
