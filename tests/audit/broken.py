"""Deliberately broken variants of the audit runner, for negative controls. Tests only: each
overrides one of the runner's seams (calibration or emitted SQL) while the *claimed* cost still
comes from the production path, exactly as a bug in dpch would look to an analyst."""

from __future__ import annotations

import re

from dpch.audit.runner import AuditRunner
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


class NoClamping(AuditRunner):
    """The emitted SQL sums raw values: least(greatest(x, lo), hi) → x."""

    def emit(self, plan, database):
        sql = super().emit(plan, database)
        unclamped = re.sub(r"least\(greatest\(ifNotFinite\(toFloat64\((`[^`]+`)\), [^)]+\), [^)]+\), [^)]+\)",
                           r"\1", sql)
        unclamped = re.sub(r"least\(greatest\((`[^`]+`), [^)]+\), [^)]+\)", r"\1", unclamped)
        assert unclamped != sql, "the query has no clamp to remove"
        return unclamped


class NoContributionCap(AuditRunner):
    """The emitted SQL keeps every row of a unit: LIMIT k BY unit is dropped."""

    def emit(self, plan, database):
        sql = super().emit(plan, database)
        uncapped = re.sub(r" LIMIT \d+ BY `[^`]+`", "", sql)
        assert uncapped != sql, "the query has no contribution cap to remove"
        return uncapped


class AccuracyFirstLessNoise(AuditRunner):
    """An accuracy-first release drawn from a point 16 times less noisy (in variance) than the one
    charged: a noise-reduction path that releases past its stop."""

    def noise_reduction_scale(self, afplan, step):
        return super().noise_reduction_scale(afplan, step) / 16
