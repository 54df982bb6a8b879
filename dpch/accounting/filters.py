"""Privacy filters: may the next release run, given what was already spent?

A filter decides from the requested (worst-case) cost of the next release and the costs of
past releases only, never from data (docs/design.md rule 1; privacy filters as in
Rogers et al. 2016, Def 3.1: the proposed round is included in the check).

One interface, :class:`PrivacyFilter`:

- ``decide(history, request)`` — admit a release whose cost is at most ``request``? For an
  ex-post release (``request.ex_post``) the request carries its worst case
  (``worst_epsilon`` / ``worst_rho``) and the filter admits on that.
- ``spent(history)`` — an odometer: a valid bound on what ``history`` has spent so far.
- ``remaining(history)`` — the largest pure-ε release (``epsilon``), the δ (and ρ) still free.

Each method has a running-total twin that costs O(1) in the length of the history:
``tally(history)`` builds a :class:`~dpch.accounting.tally.Tally` (the sums the filter decides
from, kept exactly), and ``decide_from`` / ``spent_from`` / ``remaining_from`` answer from it. The
history-based methods are the reference; tests check both give the same floats on random histories.

Each filter declares, as class attributes, what it accepts and how it charges: ``accepts`` (the
:class:`~dpch.privacy.cost.CostKind` s a request must be readable as, :func:`kinds`), ``composes``
(the kind its odometer sums in, by :func:`~dpch.privacy.cost.compose`), ``pure_only`` and
``charges_realized``. It reads each ledger record through one typed view (``view``): the record's
(ε, δ), its ρ-zCDP view (its own ρ or its (ε, δ) converted, Rogers et al. 2023, Lemma 2.3), or its
realized ex-post ε.

``history`` is the sequence of past releases' costs as the ledger counts them (a reservation
never settled counts at its worst case; see :mod:`.ledger`). Filters that cannot use a
realized ex-post cost count an ex-post release at its worst case
(:meth:`~dpch.privacy.cost.PrivacyCost.at_worst`): a mechanism whose privacy loss is bounded by
``worst`` in every outcome is ``worst``-DP ex ante.

Filters (``name``: theorem):

- ``basic`` — (ε, δ) basic composition, Rogers et al. 2016, Thm 3.4 with δ.
- ``pure`` — pure ε basic composition, Rogers et al. 2016, Thm 3.4 (δ > 0 releases refused).
- ``advanced`` — Rogers et al. 2016, Thm 5.1 advanced-composition filter (B3); (ε_i, δ_i) rounds by Lemma 3.3 (B5).
- ``zcdp`` — Rogers et al. 2023, Thm 2; (ε, δ)-DP releases enter as δ-approximate ε²/2-zCDP (Lemma 2.3).
- ``zcdp_bm`` — Rogers et al. 2023, Thm 6: zCDP releases and Brownian noise reduction under one ρ budget.
- ``ex_post`` — Rogers et al. 2023, Lemma 5.2, charging realized ex-post ε.
- ``pure_ex_post`` — Lebensold et al. 2024, Alg 2 / Thm 11 with the per-instance δ fix of docs/algorithms.md B9.
- ``mixed`` — Rogers et al. 2023, Thm 3: a ``zcdp`` filter and an ``ex_post`` filter, budget split in advance.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from dpch.accounting import odometers
from dpch.accounting.budget import Budget
from dpch.accounting.tally import SplitTally, Tally
from dpch.errors import ConfigError
from dpch.privacy.conversions import rho_max, zcdp_to_dp_epsilon
from dpch.privacy.cost import ZCDP, ApproxDP, CostKind, PrivacyCost, PureDP

#: relative slack for floating-point sums (ten charges of 0.1 must fit a budget of 1.0);
#: 1e-9·ε is far below any meaningful privacy difference
FLOAT_SLACK = 1e-9

DEFAULT_FILTER = "basic"


@dataclass(frozen=True)
class Decision:
    """A filter's answer: admitted or not, and the reason in words."""

    admitted: bool
    reason: str


ADMIT = Decision(True, "within budget")


def kinds(cost: PrivacyCost) -> frozenset[CostKind]:
    """The kinds ``cost`` can be read as: every release has an (ε, δ) and a zCDP view (its own ρ or
    its (ε, δ) converted); it is pure if its δ is 0, ex-post if its ε is realized."""
    out = {CostKind.APPROX, CostKind.ZCDP}
    if cost.delta == 0 and (cost.rho is None or cost.rho_delta == 0):
        out.add(CostKind.PURE)
    if cost.ex_post:
        out.add(CostKind.EX_POST)
    return frozenset(out)


def _within(value: float, limit: float) -> bool:
    return value <= limit * (1 + FLOAT_SLACK) + 1e-300


class PrivacyFilter(ABC):
    """Decides admission from past costs and the next request (never from data)."""

    name: ClassVar[str]
    theorem: ClassVar[str]
    #: only pure ε (δ = 0) releases make sense under this filter (noise reduction then uses Laplace)
    pure_only: ClassVar[bool] = False
    #: an ex-post release is charged its realized cost, not its worst case
    charges_realized: ClassVar[bool] = False
    #: the kinds of release this filter admits: a request must be readable as one of them (:func:`kinds`)
    accepts: ClassVar[frozenset[CostKind]] = frozenset(CostKind)
    #: the kind of cost the filter composes its history in (the terms of its odometer)
    composes: ClassVar[CostKind]

    def __init__(self, budget: Budget) -> None:
        self.budget = budget

    # Each filter's rule is written once, over a running tally of its history (:meth:`tally`, O(1) per
    # release, what admission uses); these history forms are that rule applied to the tally of ``history``.

    def spent(self, history: Sequence[PrivacyCost]) -> PrivacyCost:
        """An odometer: a valid bound on the privacy ``history`` has spent, in this filter's terms."""
        return self.spent_from(self.tally(history))

    def decide(self, history: Sequence[PrivacyCost], request: PrivacyCost) -> Decision:
        """Whether a release costing at most ``request`` may run after ``history``."""
        return self.decide_from(self.tally(history), request)

    def remaining(self, history: Sequence[PrivacyCost]) -> PrivacyCost:
        """Largest pure-ε request admissible now (``epsilon``) and the δ still free."""
        return self.remaining_from(self.tally(history))

    def _remaining_of(self, spent: PrivacyCost) -> PrivacyCost:
        return PrivacyCost.of(ApproxDP(
            max(0.0, self.budget.epsilon - spent.epsilon), max(0.0, self.budget.delta - spent.delta)
        ))

    # -- running totals: the same answers from a tally, O(1) in the history ------------------------

    @abstractmethod
    def tally(self, history: Sequence[PrivacyCost] = ()) -> Tally | SplitTally:
        """A running tally of ``history`` in this filter's terms (add/remove one release in O(1))."""

    @abstractmethod
    def spent_from(self, tally: Any) -> PrivacyCost:
        """The odometer of the history ``tally`` counts."""

    @abstractmethod
    def decide_from(self, tally: Any, request: PrivacyCost) -> Decision:
        """Whether a release costing at most ``request`` may run after the history ``tally`` counts."""

    def remaining_from(self, tally: Any) -> PrivacyCost:
        """The largest pure-ε request admissible after the history ``tally`` counts, and the δ still free."""
        return self._remaining_of(self.spent_from(tally))

    def _tally(self, width: int, history: Sequence[PrivacyCost]) -> Tally:
        t = Tally(self.features, width)
        t.extend(list(history))
        return t

    def features(self, cost: PrivacyCost) -> tuple[float, ...]:
        """One release's terms of the sums this filter decides from (see :meth:`tally`)."""
        raise NotImplementedError

    def guarantee(self) -> tuple[float, float]:
        """The (ε, δ)-DP guarantee of everything this filter admits."""
        return self.budget.epsilon, self.budget.delta

    def reserved_terms(self, counted: PrivacyCost) -> tuple[float, float, float]:
        """An open reservation in this filter's units, as the budget status shows it: (ε, δ, ρ) of the
        worst case ``counted`` (the ledger's count of the reservation), where ρ is what it takes from
        a ρ budget — 0 under filters that compose no ρ (their status has no ρ). The same view
        admission decides on, so what the status shows reserved is what admission counts."""
        need = counted.at_worst()
        return need.epsilon, need.delta, 0.0

    @property
    def counts_rho(self) -> bool:
        """Whether this filter's budget is (partly) a ρ budget, so its status reports ρ."""
        return self.composes is CostKind.ZCDP

    def describe(self) -> str:
        eps, delta = self.guarantee()
        return f"{self.name} ({self.theorem}): ({eps:g}, {delta:g})-DP overall"

    def refuse_kind(self, request: PrivacyCost) -> Decision | None:
        """A refusal if ``request`` is of no kind this filter :attr:`accepts`."""
        if self.accepts & kinds(request):
            return None
        wanted = " or ".join(sorted(k.value for k in self.accepts))
        extra = f"; this one needs δ {request.delta:g}" if request.delta > 0 else ""
        return Decision(False, f"the {self.name} filter admits only {wanted} releases{extra}")


class BasicCompositionFilter(PrivacyFilter):
    """Basic composition (Rogers et al. 2016, Thm 3.4, with δ): admit while Σε ≤ ε_budget and Σδ ≤ δ_budget.

    Valid for adaptively chosen (ε_i, δ_i): the guarantee is (ε_budget, δ_budget)-DP. Ex-post
    releases count at their worst case.
    """

    name = "basic"
    theorem = "Rogers et al. 2016, Thm 3.4, basic composition"
    composes = CostKind.APPROX

    def view(self, cost: PrivacyCost) -> ApproxDP:
        """One release in this filter's terms: its (ε, δ), an ex-post release at its worst case."""
        return cost.approx_dp()

    def features(self, cost: PrivacyCost) -> tuple[float, ...]:
        v = self.view(cost)  # Σ of these is compose() of the views: basic composition
        return v.epsilon, v.delta

    def tally(self, history: Sequence[PrivacyCost] = ()) -> Tally:
        return self._tally(2, history)

    def spent_from(self, tally: Any) -> PrivacyCost:
        return PrivacyCost.of(ApproxDP(tally.total(0), tally.total(1)))

    def _epsilon_fits(self, spent_eps: float, need: float) -> bool:
        return _within(spent_eps + need, self.budget.epsilon)

    def decide_from(self, tally: Any, request: PrivacyCost) -> Decision:
        refused = self.refuse_kind(request)
        if refused is not None:
            return refused
        return self._decide_spent(self.spent_from(tally), request)

    def _decide_spent(self, spent: PrivacyCost, request: PrivacyCost) -> Decision:
        need = request.at_worst()
        eps_left = max(0.0, self.budget.epsilon - spent.epsilon)
        delta_left = max(0.0, self.budget.delta - spent.delta)
        if not self._epsilon_fits(spent.epsilon, need.epsilon):
            worst = "at worst " if request.ex_post else ""
            return Decision(
                False,
                f"the query needs {worst}ε {need.epsilon:g} but only ε {eps_left:.6g} of "
                f"{self.budget.epsilon:g} is left",
            )
        if not _within(spent.delta + need.delta, self.budget.delta):
            return Decision(
                False,
                f"the query needs δ {need.delta:g} but only δ {delta_left:.3g} of {self.budget.delta:g} is left",
            )
        return ADMIT


class PureEpsilonFilter(BasicCompositionFilter):
    """Pure ε basic composition (Rogers et al. 2016, Thm 3.4): Σε ≤ ε_budget; releases with δ > 0 are refused."""

    name = "pure"
    theorem = "Rogers et al. 2016, Thm 3.4, pure ε"
    pure_only = True
    accepts = frozenset({CostKind.PURE})
    composes = CostKind.PURE

    def features(self, cost: PrivacyCost) -> tuple[float, ...]:
        return (self.view(cost).epsilon,)

    def tally(self, history: Sequence[PrivacyCost] = ()) -> Tally:
        return self._tally(1, history)

    def spent_from(self, tally: Any) -> PrivacyCost:
        return PrivacyCost.of(PureDP(tally.total(0)))

    def guarantee(self) -> tuple[float, float]:
        return self.budget.epsilon, 0.0

    def _remaining_of(self, spent: PrivacyCost) -> PrivacyCost:
        return PrivacyCost.of(PureDP(max(0.0, self.budget.epsilon - spent.epsilon)))


class ExPostFilter(BasicCompositionFilter):
    """The ex-post filter of Rogers et al. 2023, Lemma 5.2: admit a release only if its ex-post ε cannot exceed,
    in any outcome, ε − Σ_{i<n} E_i(y_i); charge the *realized* E_n afterwards; Σδ_i ≤ δ.

    A fixed-cost (ε_i, δ_i)-DP release is counted as E_i = ε_i, δ_i. Not because it is (ε_i, δ_i)-ex-post
    private — a Gaussian's own loss exceeds ε_i with probability ≈ 16·δ_i at (1, 1e-5) — but because,
    for each pair of neighbours, it is a post-processing of the randomized response R_{ε_i,δ_i}
    (Kairouz, Oh & Viswanath 2015; Murtagh & Vadhan 2016, Lemma 3.2), whose loss exceeds ε_i only on an
    event of probability δ_i: Lemma 5.2 holds for the transcript augmented with R's outputs, and the
    real one is its post-processing (docs/filters-and-ledger.md, "Fixed-cost releases beside ex-post ones").
    """

    name = "ex_post"
    theorem = "Rogers et al. 2023, Lemma 5.2, ex-post filter"
    charges_realized = True
    composes = CostKind.EX_POST

    def features(self, cost: PrivacyCost) -> tuple[float, ...]:
        # realized E_i (a reservation: its worst case), composed by Rogers et al. 2023, Lemma 5.1: the odometer
        # is the realized Σ E_i and Σ δ_i (Lemma 5.2), not the worst cases ex_post_to_approx reads
        r = cost.realized_ex_post()
        return r.epsilon, r.delta


class PureExPostFilter(ExPostFilter):
    """The pure ex-post DP filter of Lebensold et al. 2024, Alg 2 (Thm 11), with the per-instance δ of
    docs/algorithms.md B9.

    HALT before instance t if spent + ε_max,t ≥ ε (the check uses ε_max; the realized ε_post is
    charged, and may exceed ε_max), or if Σ δ_t would exceed δ (union bound over instances:
    Thm 11's single δ is not valid, B9's counterexample). A fixed-cost (ε, δ)-DP release counts as an
    instance with ε_max = ε_post = ε and δ_t = δ, by the simulation argument of :class:`ExPostFilter`.
    """

    name = "pure_ex_post"
    theorem = "Lebensold et al. 2024, Alg 2 with per-instance δ (docs/algorithms.md B9)"
    pure_only = True

    def _epsilon_fits(self, spent_eps: float, need: float) -> bool:
        return spent_eps + need < self.budget.epsilon


class AdvancedCompositionFilter(PrivacyFilter):
    """The advanced-composition privacy filter of Rogers et al. 2016, Thm 5.1 (docs/algorithms.md B3), adaptive.

    HALT if K(ε_1..ε_n, proposed included) > εg, with x = εg²/(28.04 log(1/δg)) fixed in advance.
    ``approx_delta_share`` = 0 (default): δg is the whole δ budget and only pure ε-DP releases
    are admitted. ``approx_delta_share`` = s > 0: Lemma 3.3 (B5) with δg' = s·δ for the rounds'
    δ_i (HALT if Σ 2δ_i/(ε_i e^{ε_i}) > δg') and δg = (1 − s)·δ; every ε_i is then doubled.
    ``spent`` is the odometer min(Σ ε_i, Thm 6.5 with public ``odometer_n``) at δg (B4).
    """

    name = "advanced"
    theorem = "Rogers et al. 2016, Thm 5.1 advanced-composition filter"
    pure_only = True
    #: pure ε_i rounds; (ε_i, δ_i) rounds only with ``approx_delta_share`` > 0 (checked in :meth:`decide`)
    composes = CostKind.PURE

    def __init__(self, budget: Budget, *, approx_delta_share: float = 0.0, odometer_n: float = 1e6) -> None:
        super().__init__(budget)
        if not 0.0 <= approx_delta_share < 1.0:
            raise ConfigError(f"approx_delta_share must be in [0, 1), got {approx_delta_share!r}")
        self.delta_share = float(approx_delta_share)
        self.delta_g = budget.delta * (1.0 - self.delta_share)
        self.delta_g_prime = budget.delta * self.delta_share
        if not 0.0 < self.delta_g < 1.0 / math.e:
            raise ConfigError(
                f"the advanced filter needs δg in (0, 1/e); the budget gives δg = {self.delta_g:g}",
                hint="the data owner sets a budget δ > 0, e.g. `dpch budget set --delta 1e-6`",
            )
        self.odometer_n = float(odometer_n)
        self.x = odometers.filter_x(budget.epsilon, self.delta_g)

    def k(self, epsilons: Sequence[float]) -> float:
        """Thm 5.1's K of the rounds' effective (possibly doubled) ε's, from the list (the tally's form is
        :func:`.odometers.filter_k_of_sums`)."""
        return odometers.filter_k(list(epsilons), self.budget.epsilon, self.delta_g)

    # running totals: Σ eff_i, Σ eff_i², Σ eff_i(e^{eff_i}−1)/2 over the effective ε's, and Σ of
    # Lemma 3.3's 2δ_i/(ε_i e^{ε_i}) — exactly the fsums filter_k, the odometer and lemma_3_3_delta take

    def _eff(self, epsilon: float) -> float:
        return 2.0 * epsilon if self.delta_share > 0 else epsilon

    def features(self, cost: PrivacyCost) -> tuple[float, ...]:
        c = cost.approx_dp()  # an ex-post release at its worst case
        eff = self._eff(c.epsilon)
        return eff, eff * eff, odometers.drift_term(eff), odometers.lemma_3_3_term(c.epsilon, c.delta)

    def tally(self, history: Sequence[PrivacyCost] = ()) -> Tally:
        return self._tally(4, history)

    def _k_from(self, tally: Any, eff: float) -> float:
        """K of the tallied rounds plus one round of effective ε ``eff``."""
        return odometers.filter_k_of_sums(tally.total(1, eff * eff), tally.total(2, odometers.drift_term(eff)),
                                          self.budget.epsilon, self.delta_g)

    def decide_from(self, tally: Any, request: PrivacyCost) -> Decision:
        need = request.at_worst()
        if need.delta > 0 and self.delta_share == 0:
            return Decision(False, "the advanced filter is configured for pure ε releases (δ = 0); this one "
                            f"needs δ {need.delta:g} (set approx_delta_share to admit them by Lemma 3.3)")
        if self.delta_share > 0 and (tally.total(3, odometers.lemma_3_3_term(need.epsilon, need.delta))
                                     > self.delta_g_prime * (1 + FLOAT_SLACK)):
            return Decision(False, f"the query's δ {need.delta:g} does not fit the δ left for (ε, δ) releases "
                            "(Rogers et al. 2016, Lemma 3.3)")
        k = self._k_from(tally, self._eff(need.epsilon))
        if k > self.budget.epsilon * (1 + FLOAT_SLACK):
            left = self.remaining_from(tally).epsilon
            return Decision(False, f"the query needs ε {need.epsilon:g} but the advanced-composition bound "
                            f"would reach {k:.6g} > {self.budget.epsilon:g} (largest admissible now: ε {left:.6g})")
        return ADMIT

    def spent_from(self, tally: Any) -> PrivacyCost:
        if not tally.count:
            return PrivacyCost.of(ApproxDP(0.0, 0.0))
        bound = min(tally.total(0), odometers.odometer_thm_6_5_of_sums(
            tally.total(1), tally.total(2), self.odometer_n, self.delta_g))
        used_delta = tally.total(3) if self.delta_share > 0 else 0.0
        return PrivacyCost.of(ApproxDP(bound, used_delta))

    def remaining_from(self, tally: Any) -> PrivacyCost:
        factor = 2.0 if self.delta_share > 0 else 1.0
        lo, hi = 0.0, self.budget.epsilon
        if self._k_from(tally, 0.0) > self.budget.epsilon:
            return PrivacyCost.of(ApproxDP(0.0, 0.0))
        for _ in range(60):
            mid = (lo + hi) / 2.0
            if self._k_from(tally, factor * mid) <= self.budget.epsilon:
                lo = mid
            else:
                hi = mid
        delta_left = max(0.0, self.delta_g_prime - tally.total(3)) if self.delta_share else 0.0
        return PrivacyCost.of(ApproxDP(lo, delta_left))


class ZCDPFilter(PrivacyFilter):
    """The zCDP filter of Rogers et al. 2023, Thm 2 (docs/algorithms.md A4).

    Admit the next release only if, with it, ρ_cum ≤ ρ_max(ε, δ'') — i.e.
    ρ_cum + 2√(ρ_cum log(1/δ'')) ≤ ε — and δ_cum ≤ δ_mech. Guarantee: (ε, δ_mech + δ'')-DP.
    The budget's δ is split in advance: δ'' = ``conversion_delta_share``·δ, δ_mech the rest.
    A release with a zCDP parameter (Gaussian, exponential mechanism) enters as (ρ, 0); any
    other (ε, δ)-DP release as δ-approximate ε²/2-zCDP (Rogers et al. 2023, Lemma 2.3). Ex-post releases count
    at their worst case (a Brownian run at its finest grid point).
    """

    name = "zcdp"
    theorem = "Rogers et al. 2023, Thm 2, zCDP filter"
    composes = CostKind.ZCDP
    #: whether realized Brownian costs are charged (Thm 6) rather than worst cases
    brownian: ClassVar[bool] = False
    default_printed: ClassVar[bool] = False

    def __init__(self, budget: Budget, *, conversion_delta_share: float = 0.5,
                 printed_theorem_6: bool | None = None) -> None:
        super().__init__(budget)
        if not 0.0 < conversion_delta_share <= 1.0:
            raise ConfigError(f"conversion_delta_share must be in (0, 1], got {conversion_delta_share!r}")
        self.delta_conv = budget.delta * conversion_delta_share
        self.delta_mech = budget.delta - self.delta_conv
        if not 0.0 < self.delta_conv < 1.0:
            raise ConfigError(f"the {self.name} filter needs a budget δ > 0 for the zCDP → DP conversion",
                              hint="the data owner sets a budget δ > 0, e.g. `dpch budget set --delta 1e-6`")
        if printed_theorem_6 is not None and not isinstance(printed_theorem_6, bool):
            # not bool(): an owner's JSON option "false" is a non-empty string, which bool() makes True
            raise ConfigError(f"printed_theorem_6 must be true or false, got {printed_theorem_6!r}")
        self.printed = self.default_printed if printed_theorem_6 is None else printed_theorem_6
        self.rho_budget = self.rho_limit(budget.epsilon, self.delta_conv, printed=self.printed)

    @staticmethod
    def rho_limit(epsilon: float, delta_conv: float, *, printed: bool) -> float:
        """The ρ budget: the largest ρ the conversion maps into ε (Rogers et al. 2023, Thm 2; Thm 6 printed form
        ρ + 2√(2ρ log(1/δ'')) when ``printed``, the proof's ρ + 2√(ρ log(1/δ'')) otherwise)."""
        return rho_max(epsilon, delta_conv, printed_theorem_6=printed)

    def view(self, cost: PrivacyCost, *, admission: bool) -> ZCDP:
        """One release as δ-approximate ρ-zCDP: its own ρ (with its δ), or its (ε, δ) converted
        (Rogers et al. 2023, Lemma 2.3); an ex-post release at its worst case, except that a charged
        Brownian run counts its realized ρ under Thm 6."""
        if cost.ex_post and cost.rho is not None and self.brownian:
            rho = cost.worst_rho if admission and cost.worst_rho is not None else cost.rho
            return ZCDP(rho, 0.0)  # Thm 6: a BM round has δ_n = 0
        return cost.at_worst().zcdp()

    def zcdp_view(self, cost: PrivacyCost, *, admission: bool) -> tuple[float, float]:
        """(ρ, δ) of one release (:meth:`view` as a pair)."""
        v = self.view(cost, admission=admission)
        return v.rho, v.delta

    def reserved_terms(self, counted: PrivacyCost) -> tuple[float, float, float]:
        """The reservation's worst ε, and the (ρ, δ) admission counts for it (:meth:`view` at admission):
        its own ρ, or its (ε, δ) converted to ε²/2 (a watch's reservation has no ρ of its own)."""
        rho, delta = self.zcdp_view(counted, admission=True)
        return counted.at_worst().epsilon, delta, rho

    def totals(self, history: Sequence[PrivacyCost]) -> tuple[float, float]:
        """(Σρ, Σδ) of ``history``: zCDP composition (Rogers et al. 2023, Lemma 2.4), as the tally sums it."""
        t = self.tally(history)
        return t.total(0), t.total(1)

    def _decide_totals(self, rho: float, delta: float, request: PrivacyCost) -> Decision:
        need_rho, need_delta = self.zcdp_view(request, admission=True)
        if not _within(rho + need_rho, self.rho_budget):
            left = max(0.0, self.rho_budget - rho)
            return Decision(False, f"the query needs ρ {need_rho:.6g} (zCDP) but only ρ {left:.6g} of "
                            f"{self.rho_budget:.6g} is left (ε {self.budget.epsilon:g} overall)")
        if not _within(delta + need_delta, self.delta_mech):
            left = max(0.0, self.delta_mech - delta)
            return Decision(False, f"the query needs δ {need_delta:g} but only δ {left:.3g} is left for releases")
        return ADMIT

    def _spent_totals(self, rho: float, delta: float) -> PrivacyCost:
        eps = zcdp_to_dp_epsilon(rho, self.delta_conv, printed_theorem_6=self.printed)
        return PrivacyCost.of(ApproxDP(eps, delta), ZCDP(rho))

    def _remaining_totals(self, rho: float, delta: float) -> PrivacyCost:
        left = max(0.0, self.rho_budget - rho)
        return PrivacyCost.of(ApproxDP(math.sqrt(2.0 * left), max(0.0, self.delta_mech - delta)), ZCDP(left))

    # running totals: (Σρ, Σδ) of the releases' zCDP views

    def features(self, cost: PrivacyCost) -> tuple[float, ...]:
        return self.zcdp_view(cost, admission=False)

    def tally(self, history: Sequence[PrivacyCost] = ()) -> Tally:
        return self._tally(2, history)

    def decide_from(self, tally: Any, request: PrivacyCost) -> Decision:
        return self._decide_totals(tally.total(0), tally.total(1), request)

    def spent_from(self, tally: Any) -> PrivacyCost:
        return self._spent_totals(tally.total(0), tally.total(1))

    def remaining_from(self, tally: Any) -> PrivacyCost:
        return self._remaining_totals(tally.total(0), tally.total(1))


class UnifiedZCDPFilter(ZCDPFilter):
    """The unified zCDP + Brownian filter of Rogers et al. 2023, Thm 6 (docs/algorithms.md A4), one ρ budget.

    Before round n: ρ_n + Δ2²/(2 t_n^{(k_n)}) ≤ ρ − Σ_{i<n} (ρ_i + Δ2²/(2 t_i^{(T_i)})): a Brownian
    run is admitted on its finest grid point (``worst_rho``) and charged its realized Δ2²/(2T)
    (``rho``). Guarantee by default the *printed* (ρ + 2√(2ρ log(1/δ'')), δ + δ'')-DP; the
    proof's conversion is ``printed_theorem_6=False`` (the conflict noted in docs/algorithms.md A4).
    """

    name = "zcdp_bm"
    theorem = "Rogers et al. 2023, Thm 6, unified zCDP + Brownian filter"
    charges_realized = True
    brownian = True
    default_printed = True


class MixedFilter(PrivacyFilter):
    """The mixed filter of Rogers et al. 2023, Thm 3 (concurrent composition), with the split fixed in advance.

    A :class:`ZCDPFilter` with (``split``·ε, ``split``·δ) runs fixed-cost releases and an
    :class:`ExPostFilter` with ((1−``split``)·ε, (1−``split``)·δ) runs ex-post releases; each
    release goes to the side its kind names (a fact of the request, so the routing is a pure
    function of the ledger). Guarantee: (ε, δ)-DP, the sum of the two sides'.
    """

    name = "mixed"
    theorem = "Rogers et al. 2023, Thm 3, mixed zCDP + ex-post filter"
    charges_realized = True
    #: fixed-cost releases compose in ρ on the zCDP side, ex-post ones in realized ε on the other
    composes = CostKind.ZCDP

    def __init__(self, budget: Budget, *, split: float = 0.5, conversion_delta_share: float = 0.5) -> None:
        super().__init__(budget)
        if not 0.0 < split < 1.0:
            raise ConfigError(f"split must be in (0, 1), got {split!r}")
        self.zcdp = ZCDPFilter(Budget(budget.epsilon * split, budget.delta * split),
                               conversion_delta_share=conversion_delta_share)
        self.ex_post = ExPostFilter(Budget(budget.epsilon * (1 - split), budget.delta * (1 - split)))

    @staticmethod
    def _amount(epsilon: float, delta: float, zcdp_side: PrivacyCost) -> PrivacyCost:
        """An amount of both sides: their (ε, δ), and the ρ of the zCDP side (the ex-post side has none)."""
        rho = zcdp_side.rho
        return PrivacyCost.of(ApproxDP(epsilon, delta), None if rho is None else ZCDP(rho))

    def reserved_terms(self, counted: PrivacyCost) -> tuple[float, float, float]:
        """The side the reservation is routed to says its units: ε on the ex-post side (no ρ), ρ on the zCDP side."""
        return (self.ex_post if counted.ex_post else self.zcdp).reserved_terms(counted)

    # one tally per side, each release routed by its kind (SplitTally: an ex-post release to the ex-post side)

    def tally(self, history: Sequence[PrivacyCost] = ()) -> SplitTally:
        t = SplitTally(self.zcdp.tally(), self.ex_post.tally())
        t.extend(list(history))
        return t

    def decide_from(self, tally: Any, request: PrivacyCost) -> Decision:
        if request.ex_post:
            d = self.ex_post.decide_from(tally.post, request)
            return d if d.admitted else Decision(False, f"ex-post side: {d.reason}")
        d = self.zcdp.decide_from(tally.fixed, request)
        return d if d.admitted else Decision(False, f"zCDP side: {d.reason}")

    def spent_from(self, tally: Any) -> PrivacyCost:
        z, e = self.zcdp.spent_from(tally.fixed), self.ex_post.spent_from(tally.post)
        return self._amount(z.epsilon + e.epsilon, z.delta + e.delta, z)

    def remaining_from(self, tally: Any) -> PrivacyCost:
        z, e = self.zcdp.remaining_from(tally.fixed), self.ex_post.remaining_from(tally.post)
        return self._amount(max(z.epsilon, e.epsilon), z.delta + e.delta, z)


FILTERS: dict[str, type[PrivacyFilter]] = {
    cls.name: cls
    for cls in (BasicCompositionFilter, PureEpsilonFilter, AdvancedCompositionFilter, ZCDPFilter,
                UnifiedZCDPFilter, ExPostFilter, PureExPostFilter, MixedFilter)
}


def make_filter(name: str, budget: Budget, options: dict[str, Any] | None = None) -> PrivacyFilter:
    """Builds the filter called ``name`` on ``budget``; unknown names or options are a ConfigError."""
    cls = FILTERS.get(name)
    if cls is None:
        raise ConfigError(f"unknown privacy filter {name!r}", hint=f"choose one of {', '.join(FILTERS)}")
    try:
        return cls(budget, **(options or {}))
    except TypeError as exc:
        raise ConfigError(f"bad options for the {name} filter: {exc}",
                          hint="see the filter's docstring in dpch/accounting/filters.py") from None
