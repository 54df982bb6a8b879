"""The privacy cost of one release, in the terms the accounting layer composes."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PrivacyCost:
    """What one release costs.

    ``epsilon``/``delta`` is the (ε, δ)-DP guarantee of the release (δ = 0 for pure DP).
    ``rho`` is its zCDP parameter where the mechanism has one (Gaussian: Δ2²/(2σ²)), so
    zCDP-based filters can compose it tightly; ``None`` when it has no zCDP view.
    ``ex_post`` marks a *realized* cost known only after the release (noise reduction,
    Gaussian Above Threshold): ``epsilon`` is then the ex-post ε of the outcome
    (002 Def 2.2, 000 Def 4.1) and ``delta`` its failure probability; a filter must have
    admitted the mechanism on its worst case (``worst_epsilon``/``worst_rho``) beforehand.
    """

    epsilon: float
    delta: float = 0.0
    rho: float | None = None
    ex_post: bool = False
    #: the most this mechanism could have cost, for the filter's admission check
    worst_epsilon: float | None = None
    worst_rho: float | None = None

    def __post_init__(self) -> None:
        if not (self.epsilon >= 0 and self.delta >= 0):
            raise ValueError("privacy cost must be non-negative")
        if self.rho is not None and self.rho < 0:
            raise ValueError("rho must be non-negative")

    def __add__(self, other: PrivacyCost) -> PrivacyCost:
        """Basic composition: ε and δ add (and ρ adds where both have one)."""
        rho = None if self.rho is None or other.rho is None else self.rho + other.rho
        return PrivacyCost(
            self.epsilon + other.epsilon,
            self.delta + other.delta,
            rho,
            ex_post=self.ex_post or other.ex_post,
        )

    @classmethod
    def zero(cls) -> PrivacyCost:
        return cls(0.0, 0.0, 0.0)
