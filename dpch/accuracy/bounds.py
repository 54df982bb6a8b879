"""Per-coordinate half-widths of a noise-reduction iterate, in units of the normalized noise.

At a *fixed* time a Brownian iterate's noise is N(0, t) per coordinate and a Laplace one's
Lap(b), so the usual half-widths z·√t and b·ln(1/β) hold. But when the stopping time depends on
the noisy values (a relative-error rule, an avg's interval that depends on its noisy count), the
iterate at the stop is *selected*, and a fixed-time interval can under-cover. dpch then uses
bounds that hold at every time simultaneously, hence at any stopping time:

- Brownian: time inversion W(s) = s·B(1/s) is a standard Brownian motion in s = 1/t, and Robbins'
  normal mixture (mixing λ ~ N(0, 1/r)) gives the martingale √(r/(s+r))·exp(W²/(2(s+r))); by
  Ville's inequality P(∃ s: |W(s)| ≥ √((s+r)(2 log(1/β) + log((s+r)/r)))) ≤ β. So
  |B_t| ≤ t·√((1/t + r)(2 log(1/β) + log((1/t + r)/r))) for all t, with probability 1 − β.
  (The same mixture gives the privacy boundary ψ^M of Whitehouse et al. 2022, Thm 3.6.) r is fixed in advance.
- Laplace noise reduction: a union bound over the K grid scales, b·ln(K/β).

Every bound adds the rounding of released values to the public grid (√t·2^-20 or b·2^-20,
:func:`dpch.mechanisms.lnr.snap`).
"""

from __future__ import annotations

import math

from dpch.mechanisms.normal import ndtri

ROUNDING = 2.0**-20


def gaussian_fixed(t: float, level: float) -> float:
    """Half-width of N(0, t) at ``level`` (two-sided), plus grid rounding."""
    return float(ndtri(1.0 - (1.0 - level) / 2.0)) * math.sqrt(t) + math.sqrt(t) * ROUNDING


def mixture_radius(s: float, r: float, beta: float) -> float:
    """Robbins' two-sided normal-mixture boundary for a standard BM W at time s (level 1 − β)."""
    return math.sqrt((s + r) * (2.0 * math.log(1.0 / beta) + math.log((s + r) / r)))


def gaussian_uniform(t: float, level: float, r: float) -> float:
    """|B_t| bound valid at all t at once (time inversion + normal mixture), plus rounding."""
    s = 1.0 / t
    return mixture_radius(s, r, 1.0 - level) / s + math.sqrt(t) * ROUNDING


def best_mixture_r(s_ref: float, level: float) -> float:
    """The r that makes the uniform bound tightest at s = s_ref (chosen before any data is read)."""
    # start-up: scipy.optimize takes 0.1–0.5 s to import; load it when a root or minimum is first needed
    from scipy.optimize import minimize_scalar

    beta = 1.0 - level

    def width(log_r: float) -> float:
        return mixture_radius(s_ref, math.exp(log_r), beta)

    res = minimize_scalar(width, bounds=(math.log(s_ref) - 12, math.log(s_ref) + 12), method="bounded")
    return math.exp(float(res.x))


def laplace_fixed(scale: float, level: float) -> float:
    """Half-width of Lap(b) at ``level``: b·ln(1/β), plus rounding."""
    return scale * math.log(1.0 / (1.0 - level)) + scale * ROUNDING


def laplace_uniform(scale: float, level: float, points: int) -> float:
    """Union bound over the ``points`` scales of a Laplace noise-reduction grid: b·ln(K/β)."""
    return scale * math.log(points / (1.0 - level)) + scale * ROUNDING
