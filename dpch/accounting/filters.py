"""Privacy filters: may the next release run, given what was already spent?

A filter decides from the requested (worst-case) cost of the next release and the costs of
past releases only, never from data (DESIGN.md rule 1; privacy filters as in Rogers et al.,
seed privacy-odometers-and-filters.txt, Def 3.1: the proposed round is included in the check).
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass

from dpch.accounting.budget import Budget
from dpch.mechanisms.cost import PrivacyCost

#: relative slack for floating-point sums (ten charges of 0.1 must fit a budget of 1.0);
#: 1e-9·ε is far below any meaningful privacy difference
FLOAT_SLACK = 1e-9


@dataclass(frozen=True)
class Decision:
    """A filter's answer: admitted or not, and the reason in words."""

    admitted: bool
    reason: str


class PrivacyFilter(ABC):
    """Decides admission from past costs and the next request."""

    name: str

    def __init__(self, budget: Budget) -> None:
        self.budget = budget

    @abstractmethod
    def spent(self, history: Sequence[PrivacyCost]) -> PrivacyCost:
        """The privacy spent by ``history`` in this filter's terms."""

    @abstractmethod
    def decide(self, history: Sequence[PrivacyCost], request: PrivacyCost) -> Decision:
        """Whether a release costing at most ``request`` may run after ``history``."""

    def remaining(self, history: Sequence[PrivacyCost]) -> PrivacyCost:
        spent = self.spent(history)
        return PrivacyCost(
            max(0.0, self.budget.epsilon - spent.epsilon), max(0.0, self.budget.delta - spent.delta)
        )


class BasicCompositionFilter(PrivacyFilter):
    """Basic composition (seed 001 Thm 3.4, with δ): admit while Σε ≤ ε_budget and Σδ ≤ δ_budget.

    Valid for adaptively chosen (ε_i, δ_i): the guarantee is (ε_budget, δ_budget)-DP.
    """

    name = "basic"

    def spent(self, history: Sequence[PrivacyCost]) -> PrivacyCost:
        return PrivacyCost(math.fsum(c.epsilon for c in history), math.fsum(c.delta for c in history))

    def decide(self, history: Sequence[PrivacyCost], request: PrivacyCost) -> Decision:
        spent = self.spent(history)
        eps_after = spent.epsilon + request.epsilon
        delta_after = spent.delta + request.delta
        eps_left = max(0.0, self.budget.epsilon - spent.epsilon)
        delta_left = max(0.0, self.budget.delta - spent.delta)
        if eps_after > self.budget.epsilon * (1 + FLOAT_SLACK):
            return Decision(
                False,
                f"the query needs ε {request.epsilon:g} but only ε {eps_left:.6g} of "
                f"{self.budget.epsilon:g} is left",
            )
        if delta_after > self.budget.delta * (1 + FLOAT_SLACK):
            return Decision(
                False,
                f"the query needs δ {request.delta:g} but only δ {delta_left:.3g} of "
                f"{self.budget.delta:g} is left",
            )
        return Decision(True, "within budget")
