"""Refuse, before the charge, any noise the calibration or the exact samplers cannot represent.

docs/design.md rule 6: calibration that cannot be represented is refused before the charge. The
samplers (:mod:`.exact`, :mod:`.grid`) raise on parameters they cannot handle — an integer
noise scale or σ² of 2^50 or more, a grid finer than 2^49 (Laplace) or 2^23 (Gaussian) noise
units — and an ε or δ can be so small that a scale overflows to infinity. Raised at
release time, that error would come *after* the charge. The mechanisms therefore call these
checks when they are built (:func:`dpch.pipeline.calibrate.calibrate` builds them before admission):
each check computes the very parameters the release will use, without drawing noise, and
turns any failure into a :class:`~dpch.errors.QueryRejected` that names the setting.

The checks read only ε, δ, the sensitivity and the number of coordinates — public quantities
(docs/design.md rule 1): whether a query is refused never depends on data.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from dpch.errors import QueryRejected
from dpch.mechanisms.exact import rational_at_least
from dpch.mechanisms.grid import GaussianGrid, LaplaceGrid

#: the largest integer noise scale (or σ²) the exact samplers take (:func:`.exact.rational_at_least`)
MAX_INTEGER_SCALE = 2.0**50
#: the smallest integer Laplace scale: below it the rational scale's denominator overflows int64
MIN_INTEGER_SCALE = 2.0**-40
#: the smallest σ of the exact discrete Gaussian sampler: its acceptance rate falls like
#: e^{−1/(2σ²)} (σ = 0.15 does not finish), so a smaller calibrated σ is raised to this one
MIN_INTEGER_SIGMA = 0.5

_EPSILON_HINT = "dp_epsilon is a positive finite number, split evenly over the query's noisy measures; e.g. 0.1 to 10"
_DELTA_HINT = "dp_delta is in (0, 1), e.g. 1e-6"


def check_epsilon(epsilon: float) -> None:
    """ε must be a positive finite number (``inf`` would mean no noise at all)."""
    if isinstance(epsilon, bool) or not (isinstance(epsilon, int | float) and 0 < epsilon < math.inf):
        raise QueryRejected(f"dp_epsilon must be a positive finite number, got {epsilon!r}", hint=_EPSILON_HINT)


def check_delta(delta: float) -> None:
    """The Gaussian mechanism's δ must be in (0, 1)."""
    if isinstance(delta, bool) or not (isinstance(delta, int | float) and 0 < delta < 1):
        raise QueryRejected(f"dp_delta must be strictly between 0 and 1 for the Gaussian mechanism, got {delta!r}",
                            hint=_DELTA_HINT)


def _too_small(what: str, epsilon: float, detail: str, hint: str) -> QueryRejected:
    return QueryRejected(
        f"{what} cannot be calibrated at ε {epsilon:.3g} (this measure's share of dp_epsilon): {detail}",
        hint=hint,
    )


def check_laplace(epsilon: float, sensitivity: float, integer: bool, dimension: int) -> None:
    """The Laplace noise of scale Δ1/ε on ``dimension`` coordinates can be sampled exactly."""
    check_epsilon(epsilon)
    # Lemma 2.1 calibrates to |f(x) − f(x')| ≤ Δ1, so Δ1 ≥ 0: a Δ1 of −5e-324 passed the grid's checks
    # (its width came from frexp of −0.0), and a NaN or negative one is a planner bug to refuse in words
    if not sensitivity >= 0:
        raise QueryRejected(f"the Laplace noise needs a sensitivity ≥ 0, got {sensitivity!r}",
                            hint="this is a bug in dpch's sensitivity analysis; please report the query")
    if sensitivity == 0:
        return
    scale = sensitivity / epsilon
    if integer:
        if not scale < MAX_INTEGER_SCALE:  # also catches an infinite scale
            raise _too_small(
                "the Laplace noise", epsilon,
                f"its integer scale Δ1/ε = {scale:.3g} is not below 2^50 ≈ {MAX_INTEGER_SCALE:.3g}",
                f"use a per-measure ε above {sensitivity / MAX_INTEGER_SCALE:.3g} (raise dp_epsilon), "
                "or tighter bounds or a smaller max_rows_per_unit")
        if not scale >= MIN_INTEGER_SCALE:
            raise QueryRejected(
                f"dp_epsilon is too large to calibrate: a measure of sensitivity {sensitivity:g} at ε {epsilon:.3g} "
                f"would get a noise scale {scale:.3g} below 2^-40",
                hint="ε above a few dozen gives no privacy anyway; ask for e.g. dp_epsilon = 10")
        _representable(lambda: rational_at_least(scale), "the Laplace noise", epsilon)
        return
    _representable(lambda: LaplaceGrid.for_release(sensitivity, epsilon, max(1, dimension)),
                   "the Laplace noise", epsilon,
                   hint=f"use a per-measure ε of at least {max(1, dimension) * 2.0**-35:.3g} for "
                        f"{max(1, dimension)} coordinate(s) (raise dp_epsilon), or fewer groups")


def gaussian_sigma(compute: Callable[[], float], epsilon: float, delta: float) -> float:
    """σ from ``compute()``, or a clear refusal if the calibration overflows or fails."""
    check_epsilon(epsilon)
    check_delta(delta)
    try:
        sigma = compute()
    except (ValueError, OverflowError, ArithmeticError, RuntimeError) as exc:
        raise _too_small("the Gaussian noise", epsilon, f"the calibration of σ fails ({type(exc).__name__})",
                         "use a larger dp_epsilon or dp_delta") from None
    if not (sigma >= 0 and math.isfinite(sigma)):
        raise _too_small("the Gaussian noise", epsilon, f"σ = {sigma!r} is not a finite number",
                         "use a larger dp_epsilon or dp_delta")
    return sigma


def integer_sigma(sigma: float, epsilon: float, delta: float, sensitivity: float) -> float:
    """σ raised to :data:`MIN_INTEGER_SIGMA` for the exact discrete Gaussian sampler.

    More noise than calibrated: the release's ρ = Δ2²/(2σ²) only falls (CKS Theorem 4), and
    (ε, δ) is re-checked with CKS Theorem 7 at the raised σ (refused if it would not hold).
    """
    if sigma >= MIN_INTEGER_SIGMA or sensitivity <= 0:
        return sigma
    from dpch.mechanisms.discrete import discrete_gaussian_delta

    if discrete_gaussian_delta(epsilon, MIN_INTEGER_SIGMA, math.ceil(sensitivity - 1e-12)) > delta:
        raise QueryRejected(
            f"dp_epsilon is too large for the exact integer Gaussian sampler: σ would be {sigma:.3g}, "
            f"below the {MIN_INTEGER_SIGMA} it can sample",
            hint="use a smaller dp_epsilon, or dp_mechanism = 'laplace'")
    return MIN_INTEGER_SIGMA


def check_gaussian(epsilon: float, delta: float, sensitivity: float, sigma: float, integer: bool,
                   dimension: int) -> None:
    """The Gaussian noise of standard deviation σ on ``dimension`` coordinates can be sampled exactly."""
    if sensitivity == 0 or sigma == 0:
        return
    if integer:
        if not sigma * sigma < MAX_INTEGER_SCALE:
            raise _too_small(
                "the Gaussian noise", epsilon,
                f"its integer variance σ² = {sigma * sigma:.3g} is not below 2^50 ≈ {MAX_INTEGER_SCALE:.3g}",
                "use a larger dp_epsilon or dp_delta, or tighter bounds")
        _representable(lambda: rational_at_least(sigma * sigma), "the Gaussian noise", epsilon)
        return
    _representable(lambda: GaussianGrid.for_release(sensitivity, epsilon, delta, sigma, max(1, dimension)),
                   "the Gaussian noise", epsilon,
                   hint=f"σ/Δ2 = {sigma / sensitivity:.3g} must stay below about "
                        f"{2.0**14 / math.sqrt(max(1, dimension)):.3g} for {max(1, dimension)} coordinate(s): "
                        "use a larger dp_epsilon or dp_delta, or fewer groups")


def _representable(build: Callable[[], object], what: str, epsilon: float,
                   hint: str = "use a larger dp_epsilon, or tighter bounds") -> None:
    try:
        build()
    except (ValueError, OverflowError, ArithmeticError) as exc:
        raise _too_small(what, epsilon, f"the exact sampler cannot take it ({exc})", hint) from None


__all__ = ["MAX_INTEGER_SCALE", "check_delta", "check_epsilon", "check_gaussian", "check_laplace", "gaussian_sigma",
           "integer_sigma"]
