"""Top-k (``SETTINGS dp_select = 'top'``): the k keys with the largest score, chosen by report noisy max.

    SELECT page, count() AS n FROM visits GROUP BY page ORDER BY n DESC LIMIT 5 SETTINGS dp_select = 'top'

The score is the one ORDER BY statistic (a count or a sum per key; ASC picks the smallest); the
candidates are the keys' declared domain (a data-independent set: partition selection is not
combined with it); k is the LIMIT. The selection is :mod:`dpch.mechanisms.top_k` — peeling
exponential mechanisms (Gumbel), or Gaussian report noisy max over scores clamped to the public
range ``[dp_score_min, dp_score_max]`` (Lebensold et al. 2024, Thm 8) when the query's mechanism is
Gaussian.

What is released: the k keys, in the order picked. Statistics in the SELECT list are *values asked
for*: they are released for the k keys only, by the ordinary additive mechanisms, with their own
share of ε (:data:`SELECTION_SHARE` goes to the selection, the rest to the values, basic
composition). A query that lists only the keys spends the whole ε on the selection.

Everything here is decided from the plan and the options, before the charge; refusals never
depend on data (docs/design.md rule 5). The release draws the selection's noise on the exact
scores of every key in the domain (a key without rows scores 0), so which keys exist in the data is
not revealed by anything but the noisy selection.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

from sqlglot import exp

from dpch.errors import CostCheckFailed, QueryRejected
from dpch.mechanisms.sampling import NoiseSource
from dpch.mechanisms.selection import GaussianReportNoisyMax
from dpch.mechanisms.top_k import PeelingTopK, gaussian_top_k, gumbel_top_k
from dpch.pipeline.calibrate import (
    NoisePlan,
    calibrate,
    composition_problems,
    counts_distinct_units,
    quantile_stats,
)
from dpch.pipeline.execute import GroupData
from dpch.pipeline.postprocess import build_rows, pick_quantiles
from dpch.pipeline.release import Rows, output_intervals
from dpch.pipeline.report import MeasureReport, measure_reports
from dpch.pipeline.report import notes as value_notes
from dpch.privacy.cost import PrivacyCost
from dpch.sql import outputs
from dpch.sql.aggregate_kinds import stat_values, statistic
from dpch.sql.aggregates import Measure, Stat
from dpch.sql.analyze import QueryPlan
from dpch.sql.settings import QueryOptions

#: the share of ε that selects the keys when the query also asks for values (the rest is split over
#: the values' mechanisms as in an ordinary query)
SELECTION_SHARE = 0.5


@dataclass(frozen=True)
class ShownValues:
    """The values a top-k query asks for: its plan restricted to the shown statistics
    (:func:`values_plan`), and their mechanisms at the values' share of ε."""

    plan: QueryPlan
    noise: NoisePlan


@dataclass(frozen=True)
class TopKNoise:
    """The mechanisms of a top-k query: the selection, and the values' own noise plan if values are asked."""

    top: PeelingTopK
    #: the score's statistic and measure, and whether larger is better (ORDER BY … DESC)
    score: Stat
    measure: Measure
    descending: bool
    #: the statistics the SELECT list shows and their mechanisms (None: keys only)
    values: ShownValues | None

    @property
    def mechanism(self) -> str:
        """The name the ledger, the release and EXPLAIN give the query's mechanism."""
        return f"top-k ({self.top.name})"

    @property
    def mechanisms(self) -> list[object]:
        """Every mechanism that will draw noise: the k rounds, then the values' own."""
        return [*self.top.rounds, *(self.values.noise.mechanisms if self.values is not None else [])]

    @property
    def parts(self) -> list[tuple[str, PrivacyCost]]:
        values = self.values.noise.parts if self.values is not None else []
        return [("top-k selection", self.top.cost), *values]

    @property
    def cost(self) -> PrivacyCost:
        """The charge: the composition of the selection's and the values' typed costs."""
        return PrivacyCost.composed([cost for _, cost in self.parts])


def calibrate_top_k(plan: QueryPlan, opts: QueryOptions) -> TopKNoise:
    """Checks a ``dp_select = 'top'`` query and calibrates its selection and values; refuses in words
    (from the plan and options only) what it cannot run."""
    score, measure, descending, k = _score(plan, opts)
    d = len(plan.group_domain or ())
    released = values_plan(plan)
    eps_select = opts.epsilon * (SELECTION_SHARE if released is not None else 1.0)
    sensitivity = per_key_sensitivity(measure)
    if opts.resolved_mechanism == "gaussian":
        if opts.score_max is None:
            raise QueryRejected(
                "Gaussian top-k needs a public upper bound on every key's score: report noisy max clamps "
                "the scores to [dp_score_min, dp_score_max]",
                hint="add e.g. SETTINGS dp_score_max = 100000 (a bound known without looking at the data), "
                     "or use dp_mechanism = 'laplace' for the exponential-mechanism selection")
        lower, upper = opts.score_min, opts.score_max
        if not descending:  # the smallest scores are the largest negated ones
            lower, upper = -upper, -lower
        if not math.isfinite(upper - lower):  # each bound is finite (validated), their distance may not be
            raise QueryRejected(
                f"the score range [{opts.score_min:g}, {opts.score_max:g}] is too wide to calibrate: its width "
                "is not a finite number",
                hint="give dp_score_min and dp_score_max a range every key's score can reach, e.g. "
                     "dp_score_min = 0, dp_score_max = 1e9")
        if upper - lower < 2 * sensitivity:
            raise QueryRejected(
                f"dp_score_max − dp_score_min must be at least twice the score's sensitivity ({sensitivity:g})",
                hint="widen the range: it should cover every key's possible score")
        top = gaussian_top_k(eps_select, k, sensitivity, lower, upper, d)
    else:
        if released is None and opts.delta > 0:
            raise QueryRejected("the exponential-mechanism top-k is pure ε-DP and takes no dp_delta",
                                hint="drop dp_delta, or use dp_mechanism = 'gaussian' with dp_score_max")
        # counts only grow or only shrink, all together, when a unit is added or removed: monotone
        # scores halve the exponential mechanism's noise (McSherry & Talwar 2007; Dwork & Roth 2014, §3.4)
        top = gumbel_top_k(eps_select, k, sensitivity, d, monotonic=measure.kind in ("count", "distinct"))
    values = None
    if released is not None:
        values = ShownValues(released, calibrate(released, dataclasses.replace(
            opts, epsilon=opts.epsilon - eps_select, select="all")))
    noise = TopKNoise(top, score, measure, descending, values)
    check_top_k_cost(plan, opts, noise)
    return noise


def per_key_sensitivity(measure: Measure) -> float:
    """How much one unit can move any one key's score (ℓ∞), all keys at once: what report noisy max
    needs (Lebensold et al. 2024, Thm 8; Dwork & Roth 2014, Claim 3.9). A count of distinct units
    moves by at most 1 in each key a unit touches, however many keys that is — where releasing every
    count pays the ℓ1 sensitivity, one per key touched; every other score moves by at most its ℓ1
    sensitivity over all keys."""
    return min(1.0, measure.sensitivity) if counts_distinct_units(measure) else measure.sensitivity


def values_plan(plan: QueryPlan) -> QueryPlan | None:
    """``plan`` restricted to the statistics the SELECT list shows (None if it lists keys only): the
    ORDER BY score alone is not released, so it has no additive mechanism."""
    shown = {name for out in plan.outputs for name in out.stats}
    if not shown:
        return None
    stats = {name: stat for name, stat in plan.stats.items() if name in shown}
    needed = {m for stat in stats.values() for m in stat.measures}
    return dataclasses.replace(plan, stats=stats, measures=tuple(m for m in plan.measures if m.name in needed),
                               having=None, order=(), limit=None)


def _score(plan: QueryPlan, opts: QueryOptions) -> tuple[Stat, Measure, bool, int]:
    example = "e.g. SELECT page, count() AS n FROM visits GROUP BY page ORDER BY n DESC LIMIT 5"
    if not plan.keys or plan.key_release and not plan.order:
        raise QueryRejected("dp_select = 'top' picks keys of a GROUP BY by an aggregate in ORDER BY",
                            hint=example)
    if plan.partition_selection:
        private = ", ".join(k.label for k in plan.keys if k.values is None)
        raise QueryRejected(
            f"dp_select = 'top' picks among declared keys, and {private} has no declared domain",
            hint="group by a column with declared values (dp: values=...) or a public table's column; "
                 "or drop dp_select to release the keys partition selection finds")
    if opts.accuracy_first:
        raise QueryRejected("dp_accuracy and dp_relative_error do not apply to dp_select = 'top'",
                            hint="drop them: the selection runs at dp_epsilon")
    if plan.having is not None:
        raise QueryRejected("HAVING is not supported with dp_select = 'top'",
                            hint="drop HAVING; the k keys are the ones with the largest scores")
    if plan.offset:
        raise QueryRejected("OFFSET is not supported with dp_select = 'top'", hint="use LIMIT k alone")
    if len(plan.order) != 1:
        raise QueryRejected("dp_select = 'top' needs exactly one ORDER BY score", hint=example)
    expr, descending = plan.order[0]
    refs = outputs.references(expr)
    stat = plan.stats.get(refs[0]) if isinstance(expr, exp.Var) and len(refs) == 1 else None
    measures = {m.name: m for m in plan.measures}
    if stat is None or not statistic(stat).additive or len(stat.measures) != 1:
        raise QueryRejected("the ORDER BY score of dp_select = 'top' must be one count or sum per key",
                            hint="e.g. ORDER BY count() DESC, or ORDER BY sum(spend) DESC")
    d = len(plan.group_domain or ())
    if plan.limit is None or not 1 <= plan.limit < d:
        raise QueryRejected(
            f"dp_select = 'top' needs LIMIT k with 1 ≤ k < {d}, the number of keys",
            hint="e.g. LIMIT 5; to release every key's value drop dp_select" if d > 1 else
                 "top-k needs at least two keys to choose from")
    return stat, measures[stat.measures[0]], descending, plan.limit


def check_top_k_cost(plan: QueryPlan, opts: QueryOptions, noise: TopKNoise) -> None:
    """The cost self-check (docs/design.md rule 7) of a top-k query, before the charge: k rounds over
    d, d − 1, … keys; the values' plan holds exactly the shown statistics (its own mechanisms are
    checked by :func:`~dpch.pipeline.calibrate.check_cost`); the charge is the composition of every
    round's and every value mechanism's typed cost and within the request."""
    problems = []
    d = len(plan.group_domain or ())
    top = noise.top
    if top.k != plan.limit or top.d != d or len(top.rounds) != top.k:
        problems.append(f"{len(top.rounds)} selection rounds over {top.d} keys ≠ LIMIT {plan.limit} of {d} keys")
    for r, selector in enumerate(top.rounds):
        if getattr(selector, "d", d - r) != d - r:
            problems.append(f"round {r + 1} runs over {getattr(selector, 'd', None)} keys, not {d - r}")
    shown = {name for out in plan.outputs for name in out.stats}
    released = set(noise.values.plan.stats) if noise.values is not None else set()
    if released != shown:
        problems.append(f"released statistics {sorted(released)} ≠ shown {sorted(shown)}")
    problems += composition_problems(noise.cost, noise.mechanisms, opts)
    if problems:
        raise CostCheckFailed("; ".join(problems))


def release_top_k(plan: QueryPlan, opts: QueryOptions, noise: TopKNoise, data: GroupData,
                  source: NoiseSource) -> Rows:
    """Selects k keys on the exact scores of every declared key, then releases the shown statistics
    of those keys (rows in the order picked). The caller has charged ``noise.cost`` durably."""
    return picked_rows(plan, opts, noise, data, pick_keys(noise, data, source), source)


def pick_keys(noise: TopKNoise, data: GroupData, source: NoiseSource) -> list[int]:
    """The selection: the indexes (into ``data.keys``) of the k keys picked, in the order picked."""
    scores = data.measures[noise.measure.name]
    return noise.top.select(scores if noise.descending else -scores, source)


def picked_rows(plan: QueryPlan, opts: QueryOptions, noise: TopKNoise, data: GroupData, picked: list[int],
                source: NoiseSource) -> Rows:
    """The rows of the ``picked`` keys, in that order: their keys and, where the SELECT list asks, their
    statistics with fresh noise (the values' own mechanisms) and intervals."""
    keys = [data.keys[i] for i in picked]
    values: dict[str, Any] = {}
    intervals_for: Any = lambda out: None  # noqa: E731 - keys only: no interval
    if noise.values is not None:
        vplan, vnoise = noise.values.plan, noise.values.noise
        noisy = {name: mech.release(data.measures[name][picked], source) for name, mech in vnoise.additive.items()}
        quantiles = {stat.name: pick_quantiles(stat, [data.histograms[stat.measures[0]][i] for i in picked],
                                               vnoise, source) for stat in quantile_stats(vplan)}
        values = {name: stat_values(stat, noisy, quantiles) for name, stat in vplan.stats.items()}
        intervals_for = output_intervals(vplan, opts, vnoise, noisy)
    rows, intervals = build_rows(plan.outputs, keys, values, intervals_for)
    return plan.columns, rows, intervals


def top_k_reports(plan: QueryPlan, opts: QueryOptions, noise: TopKNoise) -> list[MeasureReport]:
    """The selection's report, then the values' (as an ordinary query's)."""
    top, m = noise.top, noise.measure
    first = top.rounds[0]
    if isinstance(first, GaussianReportNoisyMax):
        scale = first.sigma
    else:  # the Gumbel's scale in score units: (2 or 1)·Δ/ε of one round
        scale = (1.0 if first.monotonic else 2.0) * first.sensitivity / first.epsilon
    sensitivity = first.sensitivity  # the per-key bound the rounds were calibrated with
    derivation = m.derivation if sensitivity == m.sensitivity else \
        "one unit moves each key's count of distinct units by at most 1 (ℓ∞), however many keys it touches"
    report = MeasureReport(
        name="top-k", expression=f"{noise.score.label} per key, {'largest' if noise.descending else 'smallest'} "
                                 f"{top.k} of {top.d}",
        sensitivity=sensitivity, derivation=derivation, mechanism=top.name, epsilon=top.epsilon, delta=0.0,
        noise_scale=float(scale), half_width=top.score_gap(opts.confidence))
    values = measure_reports(noise.values.plan, opts, noise.values.noise) if noise.values is not None else []
    return [report, *values]


def top_k_notes(plan: QueryPlan, opts: QueryOptions, noise: TopKNoise) -> list[str]:
    """What the reader should know: the rounds and their composition, the score accuracy, the cost
    split, and what releasing every key's noisy score at the same ε would give instead."""
    top = noise.top
    out = [f"top {top.k} of {top.d} keys by {top.name}: {top.k} rounds, each picking one key among those "
           f"left (peeling), ε {top.epsilon:.4g} in all (basic composition); rows come in the order picked",
           f"with {opts.confidence:.0%} confidence each picked key's {noise.score.label} is within "
           f"{top.score_gap(opts.confidence):.4g} of the best one left in its round"]
    if top.gaussian:
        out.append(f"scores clamped to [{opts.score_min:g}, {opts.score_max:g}] (dp_score_min, dp_score_max) "
                   "before noise: keys above the range tie")
    if noise.values is not None:
        out.append(f"ε split: selection {top.epsilon:.4g}, values {noise.values.noise.cost.epsilon:.4g}; "
                   "the values are fresh noisy values of the picked keys only")
        out += value_notes(noise.values.plan, noise.values.noise, opts)
    alternative = _all_keys_half_width(plan, opts, noise)
    if alternative is not None:
        out.append(f"alternative: without dp_select the same ε {opts.epsilon:g} releases all {top.d} keys' noisy "
                   f"{noise.score.label}, each ± {alternative:.4g}; sorting them is free")
    return out


def _all_keys_half_width(plan: QueryPlan, opts: QueryOptions, noise: TopKNoise) -> float | None:
    """± of every key's noisy score if the whole ε released them all (None where that cannot run)."""
    score_plan = dataclasses.replace(plan, stats={noise.score.name: noise.score}, measures=(noise.measure,),
                                     having=None, order=(), limit=None)
    try:
        all_keys = calibrate(score_plan, dataclasses.replace(opts, select="all"))
    except QueryRejected:
        return None
    return float(all_keys.additive[noise.measure.name].half_width(opts.confidence))
