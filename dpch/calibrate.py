"""Calibration: one mechanism per noisy part of a plan, and the query's exact total cost.

A query's ε is split evenly over its noisy parts — each additive measure, each quantile's
exponential mechanism, and partition selection when a GROUP BY key is private — and the
split is reported. δ goes to the Gaussian measures and to partition selection (evenly);
a pure-ε (Laplace) query with partition selection spends all of its δ on the selection.
Nothing costs more than the ε and δ asked for (basic composition of the parts).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from dpch.errors import QueryRejected
from dpch.mechanisms.cost import PrivacyCost
from dpch.mechanisms.exponential import ExponentialMechanism
from dpch.mechanisms.gaussian import GaussianMechanism
from dpch.mechanisms.laplace import LaplaceMechanism
from dpch.mechanisms.partition_selection import LaplacePartitionSelection
from dpch.sql.analyze import QueryPlan
from dpch.sql.settings import QueryOptions

Additive = LaplaceMechanism | GaussianMechanism


@dataclass
class NoisePlan:
    """The mechanisms of one query and what they cost together."""

    additive: dict[str, Additive] = field(default_factory=dict)
    selectors: dict[str, ExponentialMechanism] = field(default_factory=dict)
    selection: LaplacePartitionSelection | None = None
    mechanism: str = "laplace"

    @property
    def parts(self) -> list[tuple[str, PrivacyCost]]:
        parts = [(name, m.cost) for name, m in self.additive.items()]
        parts += [(name, PrivacyCost(m.epsilon, 0.0)) for name, m in self.selectors.items()]
        if self.selection is not None:
            parts.append(("partition selection", self.selection.cost))
        return parts

    @property
    def cost(self) -> PrivacyCost:
        total = PrivacyCost(0.0, 0.0)
        for _, cost in self.parts:
            total = PrivacyCost(total.epsilon + cost.epsilon, total.delta + cost.delta)
        return total


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
    additive = [m for m in plan.measures if m.kind != "histogram"]
    histograms = [m for m in plan.measures if m.kind == "histogram"]
    parts = len(additive) + len(histograms) + (1 if selection else 0)
    eps = opts.epsilon / parts
    delta_parts = (len(additive) if mechanism == "gaussian" else 0) + (1 if selection else 0)
    delta = opts.delta / delta_parts if delta_parts else 0.0
    dimension = len(plan.group_domain) if plan.group_domain is not None else 2
    noise = NoisePlan(mechanism=mechanism)
    for m in additive:
        if mechanism == "gaussian":
            noise.additive[m.name] = GaussianMechanism(eps, delta, m.l2_sensitivity, integer=m.integer,
                                                       dimension=dimension)
        else:
            noise.additive[m.name] = LaplaceMechanism(eps, m.sensitivity, integer=m.integer)
    for m in histograms:
        # the rank utility moves by at most k over all groups together, so one ε covers them all
        noise.selectors[m.name] = ExponentialMechanism(eps, m.sensitivity)
    if selection:
        noise.selection = LaplacePartitionSelection(eps, delta, plan.groups_per_unit)
    return noise
