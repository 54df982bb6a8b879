"""Each filter's rule written a second way, over the list of past costs (issue 25): the production
filters decide from a running tally only (:meth:`PrivacyFilter.tally`), and their history forms are
that rule applied to a tally of the history, so a test that compared the two would compare the code
with itself. These are the list forms the filters had before, written from the theorems with the
public pieces (``compose``, the odometers' list formulas, each filter's public parameters), and
tests/accounting/test_running_totals.py compares the tally with them, float for float.

Only admission's *verdict* is recomputed here; the refusal's words are the filter's own."""

from __future__ import annotations

import math
from collections.abc import Sequence

from dpch.accounting import odometers
from dpch.accounting.filters import (
    FLOAT_SLACK,
    AdvancedCompositionFilter,
    BasicCompositionFilter,
    ExPostFilter,
    MixedFilter,
    PrivacyFilter,
    PureEpsilonFilter,
    PureExPostFilter,
    ZCDPFilter,
    kinds,
)
from dpch.privacy.conversions import zcdp_to_dp_epsilon
from dpch.privacy.cost import ApproxDP, ExPost, PrivacyCost, compose


def _fits(value: float, limit: float) -> bool:
    return value <= limit * (1 + FLOAT_SLACK)


def spent(flt: PrivacyFilter, history: Sequence[PrivacyCost]) -> tuple[float, float, float | None]:
    """(ε, δ, ρ) of the filter's odometer over ``history`` (ρ None where the filter reports none)."""
    if isinstance(flt, MixedFilter):
        z = spent(flt.zcdp, [c for c in history if not c.ex_post])
        e = spent(flt.ex_post, [c for c in history if c.ex_post])
        return z[0] + e[0], z[1] + e[1], z[2]
    if isinstance(flt, ZCDPFilter):
        rho, delta = _zcdp_totals(flt, history)
        return zcdp_to_dp_epsilon(rho, flt.delta_conv, printed_theorem_6=flt.printed), delta, rho
    if isinstance(flt, AdvancedCompositionFilter):
        if not history:
            return 0.0, 0.0, None
        eps, deltas = _rounds(history)
        bound = odometers.odometer(_effective(flt, eps), flt.odometer_n, flt.delta_g)
        return bound, odometers.lemma_3_3_delta(eps, deltas) if flt.delta_share > 0 else 0.0, None
    if not history:
        return 0.0, 0.0, None
    if isinstance(flt, ExPostFilter):  # realized E_i composed (Rogers et al. 2023, Lemmas 5.1-5.2)
        total: ExPost = compose([c.realized_ex_post() for c in history])
        return total.epsilon, total.delta, None
    views = compose([c.approx_dp() for c in history])  # basic composition
    return views.epsilon, 0.0 if isinstance(flt, PureEpsilonFilter) else views.delta, None


def remaining(flt: PrivacyFilter, history: Sequence[PrivacyCost]) -> tuple[float, float, float | None]:
    if isinstance(flt, MixedFilter):
        z = remaining(flt.zcdp, [c for c in history if not c.ex_post])
        e = remaining(flt.ex_post, [c for c in history if c.ex_post])
        return max(z[0], e[0]), z[1] + e[1], z[2]
    if isinstance(flt, ZCDPFilter):
        rho, delta = _zcdp_totals(flt, history)
        left = max(0.0, flt.rho_budget - rho)
        return math.sqrt(2.0 * left), max(0.0, flt.delta_mech - delta), left
    if isinstance(flt, AdvancedCompositionFilter):
        eps, deltas = _rounds(history)
        eff = _effective(flt, eps)
        factor = 2.0 if flt.delta_share > 0 else 1.0
        if flt.k([*eff, 0.0]) > flt.budget.epsilon:
            return 0.0, 0.0, None
        lo, hi = 0.0, flt.budget.epsilon
        for _ in range(60):
            mid = (lo + hi) / 2.0
            lo, hi = (mid, hi) if flt.k([*eff, factor * mid]) <= flt.budget.epsilon else (lo, mid)
        left = max(0.0, flt.delta_g_prime - odometers.lemma_3_3_delta(eps, deltas)) if flt.delta_share else 0.0
        return lo, left, None
    eps, delta, _ = spent(flt, history)
    if isinstance(flt, PureEpsilonFilter):
        return max(0.0, flt.budget.epsilon - eps), 0.0, None
    return max(0.0, flt.budget.epsilon - eps), max(0.0, flt.budget.delta - delta), None


def admits(flt: PrivacyFilter, history: Sequence[PrivacyCost], request: PrivacyCost) -> bool:
    """Whether the filter's theorem admits ``request`` after ``history``."""
    if isinstance(flt, MixedFilter):
        side = flt.ex_post if request.ex_post else flt.zcdp
        return admits(side, [c for c in history if c.ex_post == request.ex_post], request)
    need = request.at_worst()
    if isinstance(flt, ZCDPFilter):
        rho, delta = _zcdp_totals(flt, history)
        need_rho, need_delta = flt.zcdp_view(request, admission=True)
        return _fits(rho + need_rho, flt.rho_budget) and _fits(delta + need_delta, flt.delta_mech)
    if isinstance(flt, AdvancedCompositionFilter):
        eps, deltas = _rounds(history)
        eps.append(need.epsilon)
        deltas.append(need.delta)
        if need.delta > 0 and flt.delta_share == 0:
            return False
        if flt.delta_share > 0 and odometers.lemma_3_3_delta(eps, deltas) > flt.delta_g_prime * (1 + FLOAT_SLACK):
            return False
        return flt.k(_effective(flt, eps)) <= flt.budget.epsilon * (1 + FLOAT_SLACK)
    if not flt.accepts & kinds(request):
        return False
    eps, delta, _ = spent(flt, history)
    if isinstance(flt, PureExPostFilter):  # Lebensold et al. 2024, Alg 2: strictly below the budget
        fits = eps + need.epsilon < flt.budget.epsilon
    else:
        fits = _fits(eps + need.epsilon, flt.budget.epsilon)
    assert isinstance(flt, BasicCompositionFilter)
    return fits and _fits(delta + need.delta, flt.budget.delta)


def _zcdp_totals(flt: ZCDPFilter, history: Sequence[PrivacyCost]) -> tuple[float, float]:
    if not history:
        return 0.0, 0.0
    total = compose([flt.view(c, admission=False) for c in history])  # Rogers et al. 2023, Lemma 2.4
    return total.rho, total.delta


def _rounds(history: Sequence[PrivacyCost]) -> tuple[list[float], list[float]]:
    costs: list[ApproxDP] = [c.approx_dp() for c in history]  # an ex-post release at its worst case
    return [c.epsilon for c in costs], [c.delta for c in costs]


def _effective(flt: AdvancedCompositionFilter, eps: list[float]) -> list[float]:
    return odometers.lemma_3_3_epsilons(eps) if flt.delta_share > 0 else eps
