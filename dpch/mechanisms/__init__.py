"""Noise: the one place where dpch draws random numbers.

- :mod:`.sampling` — the noise source (OS-entropy seeded; fixed seeds only for tests).
- :mod:`.cost` — the privacy cost a release reports to the accounting layer.
- :mod:`.calibration` — noise scales from sensitivity and privacy targets, and interval half-widths.
- :mod:`.laplace`, :mod:`.gaussian` — the fixed-cost mechanisms used by ordinary queries.
"""

from dpch.mechanisms.cost import PrivacyCost
from dpch.mechanisms.gaussian import GaussianMechanism
from dpch.mechanisms.laplace import LaplaceMechanism
from dpch.mechanisms.sampling import NoiseSource

__all__ = ["GaussianMechanism", "LaplaceMechanism", "NoiseSource", "PrivacyCost"]
