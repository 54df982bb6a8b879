"""Deliberately broken variants of the audit runner, for negative controls. Tests only: each
overrides one of the runner's seams (calibration or emitted SQL) while the *claimed* cost still
comes from the production path, exactly as a bug in dpch would look to an analyst."""

from __future__ import annotations

import re

from dpch.audit.runner import AuditRunner
from dpch.mechanisms.exponential import ExponentialMechanism
from dpch.mechanisms.gaussian import GaussianMechanism
from dpch.mechanisms.laplace import LaplaceMechanism


class HalvedSensitivity(AuditRunner):
    """Noise calibrated to half the derived sensitivity."""

    def calibrate(self, plan, opts):
        out = {}
        for name, mech in super().calibrate(plan, opts).items():
            if isinstance(mech, LaplaceMechanism):
                out[name] = LaplaceMechanism(mech.epsilon, mech.sensitivity / 2, integer=mech.integer)
            else:
                out[name] = GaussianMechanism(mech.epsilon, mech.delta, mech.sensitivity / 2,
                                              integer=mech.integer, dimension=mech.dimension)
        return out


class GaussianSigmaForTwiceEpsilon(AuditRunner):
    """Gaussian σ from the wrong formula: calibrated for 2ε (same δ, same sensitivity)."""

    def calibrate(self, plan, opts):
        return {name: GaussianMechanism(2 * m.epsilon, m.delta, m.sensitivity, integer=m.integer,
                                        dimension=m.dimension)
                for name, m in super().calibrate(plan, opts).items()}


#: a quoted identifier in emitted SQL (rendered by sqlglot: "c0"; older renderings: `c0`)
_IDENT = r"""(?:"[^"]+"|`[^`]+`)"""


class NoClamping(AuditRunner):
    """The emitted SQL sums raw values: least(greatest(x, lo), hi) → x."""

    def emit(self, plan, database):
        sql = super().emit(plan, database)
        unclamped = re.sub(rf"least\(greatest\(ifNotFinite\(toFloat64\(({_IDENT})\), [^)]+\), [^)]+\), [^)]+\)",
                           r"\1", sql)
        unclamped = re.sub(rf"least\(greatest\(({_IDENT}), [^)]+\), [^)]+\)", r"\1", unclamped)
        assert unclamped != sql, "the query has no clamp to remove"
        return unclamped


class NoContributionCap(AuditRunner):
    """The emitted SQL keeps every row of a unit: LIMIT k BY unit is dropped (in every branch of a
    split cap), and a count computed per unit as least(rows, k) counts all rows."""

    def emit(self, plan, database):
        sql = super().emit(plan, database)
        uncapped = re.sub(rf" LIMIT \d+ BY {_IDENT}", "", sql)
        uncapped = re.sub(r'least\("__n", \d+\)', '"__n"', uncapped)
        assert uncapped != sql, "the query has no contribution cap to remove"
        return uncapped


class QuantilesAtFullEpsilon(AuditRunner):
    """Every quantile's exponential mechanism runs at the query's whole ε instead of its share:
    the bug of issue 12 (defect 3), where several quantiles of one column were charged as one."""

    def noise_plan(self, plan, opts):
        noise = super().noise_plan(plan, opts)
        noise.selectors = {name: ExponentialMechanism(opts.epsilon, m.sensitivity, m.monotonic)
                           for name, m in noise.selectors.items()}
        return noise


class AccuracyFirstLessNoise(AuditRunner):
    """An accuracy-first release drawn from a point 16 times less noisy (in variance) than the one
    charged: a noise-reduction path that releases past its stop."""

    def noise_reduction_scale(self, afplan, step):
        return super().noise_reduction_scale(afplan, step) / 16
