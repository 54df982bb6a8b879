"""Noise: the one place where dpch draws random numbers.

- :mod:`.sampling` — the noise source (OS-entropy seeded; fixed seeds only for tests) and the
  choice of sampler for each kind of release.
- :mod:`.exact` — exact discrete Laplace / discrete Gaussian samplers (CKS 2020).
- :mod:`.discrete` — privacy (CKS Thm 7) and tails of the discrete distributions.
- :mod:`.grid` — real-valued releases on a 2^k grid (Mironov 2012 defence).
- :mod:`.cost` — the privacy cost a release reports to the accounting layer.
- :mod:`.calibration` — noise scales from sensitivity and privacy targets, and interval half-widths.
- :mod:`.zcdp` — zCDP ↔ (ε, δ) conversions and ρ_max for the filters (docs/algorithms.md A4).
- :mod:`.laplace`, :mod:`.gaussian` — the fixed-cost mechanisms used by ordinary queries.
- :mod:`.lnr`, :mod:`.brownian`, :mod:`.boundaries` — noise reduction (A1, A2).
- :mod:`.rat` — ReducedAboveThreshold (A3).
- :mod:`.selection`, :mod:`.selection_bounds`, :mod:`.svt` — Report Noisy Max, Above
  Threshold and the fully adaptive Gaussian sparse vector (004; B7–B9).
- :mod:`.exponential` — the exponential mechanism (Gumbel-max) and private quantiles.
"""

from dpch.mechanisms.boundaries import LinearBoundary, MixtureBoundary
from dpch.mechanisms.brownian import BrownianMechanism
from dpch.mechanisms.exponential import ExponentialMechanism, private_quantile
from dpch.mechanisms.gaussian import GaussianMechanism
from dpch.mechanisms.laplace import LaplaceMechanism
from dpch.mechanisms.lnr import LaplaceNoiseReduction, LaplacePath
from dpch.mechanisms.rat import ReducedAboveThreshold
from dpch.mechanisms.sampling import NoiseSource
from dpch.mechanisms.selection import (
    GaussianAboveThreshold,
    GaussianReportNoisyMax,
    LaplaceAboveThreshold,
    LaplaceReportNoisyMax,
)
from dpch.mechanisms.svt import BudgetExhausted, GaussianSparseVector
from dpch.mechanisms.zcdp import rho_max, zcdp_to_dp_epsilon
from dpch.privacy.cost import PrivacyCost

__all__ = [
    "BrownianMechanism",
    "BudgetExhausted",
    "ExponentialMechanism",
    "GaussianAboveThreshold",
    "GaussianMechanism",
    "GaussianReportNoisyMax",
    "GaussianSparseVector",
    "LaplaceAboveThreshold",
    "LaplaceMechanism",
    "LaplaceNoiseReduction",
    "LaplacePath",
    "LaplaceReportNoisyMax",
    "LinearBoundary",
    "MixtureBoundary",
    "NoiseSource",
    "PrivacyCost",
    "ReducedAboveThreshold",
    "rho_max",
    "zcdp_to_dp_epsilon",
    "private_quantile",
]
