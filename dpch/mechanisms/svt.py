"""The fully adaptive Gaussian sparse vector (Lebensold et al. 2024, Alg 2/4, Thm 11/19; docs/algorithms.md B9).

Gaussian Above Threshold instances run back to back under a pure ex-post filter:

    before an instance: HALT if spent + ε_max ≥ budget (ε_max from Thm 7 at that instance's δ_j)
    each ⊤ at position t (counting the ⊥s of that instance): spent += ε_post(t)  (Thm 17)

**Correction (B9):** Lebensold et al. 2024, Thm 11 as printed charges δ once, although the number of instances
depends on the outputs (counterexample in B9). We give every instance its own δ_j and halt
when Σ δ_j would exceed the δ budget (union bound). An instance still open when the
analyst stops is charged its ex-ante ε_max (the paper gives no ex-post value for ⊥^t).
Only ⊤/⊥ are released. The realised spend can exceed ε_max per instance (London: ε_post(100)
= 0.158 vs ε_max = 0.0796) — the admission check uses ε_max, as in the paper.
"""

from __future__ import annotations

from dpch.mechanisms.sampling import NoiseSource
from dpch.mechanisms.selection import AboveThresholdRun, GaussianAboveThreshold
from dpch.privacy.cost import ExPost, PrivacyCost


class BudgetExhausted(Exception):
    """The filter halted: no further instance fits the budget."""


class GaussianSparseVector:
    """Fully adaptive Gaussian SVT with a pure ex-post filter over ε and a union bound on δ."""

    def __init__(
        self,
        epsilon: float,
        delta: float,
        delta_per_instance: float,
        sigma_x: float,
        sensitivity: float,
        threshold: float,
        lower: float = 0.0,
        upper: float = 1.0,
        sigma_z: float | None = None,
    ) -> None:
        self.budget = float(epsilon)
        self.delta_budget = float(delta)
        self.instance = GaussianAboveThreshold(
            sigma_x=sigma_x,
            sigma_z=sigma_z if sigma_z is not None else 3**0.5 * sigma_x,
            threshold=threshold,
            sensitivity=sensitivity,
            lower=lower,
            upper=upper,
            delta=delta_per_instance,
        )
        self.spent = 0.0
        self.instances = 0
        self.halted = False
        self._run: AboveThresholdRun | None = None

    def _open(self, source: NoiseSource) -> AboveThresholdRun:
        eps_max = self.instance.epsilon_max
        delta_next = (self.instances + 1) * self.instance.delta
        # written as what admits, so a NaN budget (or δ budget) halts: `spent + ε_max ≥ NaN` is False and
        # never halted, an unlimited filter (Lebensold et al. 2024, Alg 2: HALT unless the instance fits)
        if not (self.spent + eps_max < self.budget and delta_next <= self.delta_budget):
            self.halted = True
            raise BudgetExhausted("the sparse-vector budget cannot cover another instance")
        self.instances += 1
        return self.instance.start(source)

    def test(self, value: float, source: NoiseSource) -> bool:
        """⊤ (True) or ⊥ (False) for the next query; raises BudgetExhausted once halted."""
        if self.halted:
            raise BudgetExhausted("the sparse-vector filter has halted")
        if self._run is None:
            self._run = self._open(source)
        top = self._run.test(value)
        if top:
            self.spent += self.instance.epsilon_post(self._run.count)
            self._run = None
        return top

    def close(self) -> None:
        """End the session: an open instance is charged its ex-ante ε_max."""
        if self._run is not None:
            self.spent += self.instance.epsilon_max
            self._run = None
        self.halted = True

    @property
    def cost(self) -> PrivacyCost:
        """Ex-post ε spent so far (plus ε_max for an open instance) and Σ δ_j."""
        open_charge = self.instance.epsilon_max if self._run is not None else 0.0
        return PrivacyCost.realized(ExPost(self.spent + open_charge, self.instances * self.instance.delta, self.budget))
