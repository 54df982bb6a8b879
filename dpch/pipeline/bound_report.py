"""``SETTINGS dp_report_dropped = 1``: a noisy share of each unit's rows the contribution bound dropped
(issue 27, item 3), released with the answer and charged as part of it.

What is released. Of the rows that pass the query's filters, unit u has n_u and the bound keeps k_u
(the row cap's k rows, or the per-group bound's c rows in each of G groups, chosen at random under the
release's key). Two sums over the units, computed exactly by the emitted query
(:func:`dpch.sql.rewrite.BOUND_REPORT`):

    K = Σ_u k_u / n_u   (the units' mass the bound kept)        U = number of units

Each moves by at most 1 when one unit is added or removed (its term k_u/n_u is in [0, 1], and the
bound chooses each unit's rows from that unit's own rows alone), so each takes a Laplace mechanism of
sensitivity 1 (Dwork & Roth 2014, Thm 3.6) at half of the report's ε. The dropped share is the
post-processing 1 − K̃/Ũ, clipped to [0, 1]: the average share of a unit's rows the bound dropped
(every unit counts once, however many rows it has: a row count's share would have no bounded
sensitivity, since one unit can add any number of rows).

The report's ε is :data:`REPORT_SHARE` of the query's: the answer's measures split the rest, so the
query costs what it asked for, and the cost check sees the two mechanisms like any other part.
Its interval: each of K̃ and Ũ within its half-width at 1 − β/2 (a union bound), and the ratio's
extremes over that box.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dpch.mechanisms.laplace import LaplaceMechanism
from dpch.mechanisms.sampling import NoiseSource

#: the share of the query's ε the report takes (the measures split the rest)
REPORT_SHARE = 0.1

#: the report's two mechanisms, by the name its parts carry in EXPLAIN and the cost check
KEPT_MASS, UNITS = "dropped report: kept mass", "dropped report: units"


@dataclass(frozen=True)
class DroppedShare:
    """What the bound dropped: the average share of a unit's rows, noisy, with its interval."""

    share: float
    interval: tuple[float, float]
    confidence: float
    epsilon: float

    def describe(self) -> str:
        lo, hi = self.interval
        return (f"the contribution bound dropped {self.share:.1%} of a unit's rows on average (noisy; "
                f"{self.confidence:.0%} interval {lo:.1%} to {hi:.1%}; ε {self.epsilon:.3g} of the query's)")


def mechanisms(epsilon: float) -> dict[str, LaplaceMechanism]:
    """The report's two Laplace mechanisms for a query of ε ``epsilon`` (each sensitivity 1, half of the
    report's :data:`REPORT_SHARE` of ``epsilon``)."""
    each = epsilon * REPORT_SHARE / 2.0
    return {KEPT_MASS: LaplaceMechanism(each, 1.0, integer=False, dimension=1),
            UNITS: LaplaceMechanism(each, 1.0, integer=True, dimension=1)}


def release(noise: dict[str, LaplaceMechanism], exact: tuple[float, float], source: NoiseSource,
            confidence: float) -> DroppedShare:
    """The noisy dropped share from the exact (K, U), after the charge is durable."""
    kept = float(noise[KEPT_MASS].release(np.array([exact[0]]), source)[0])
    units = float(noise[UNITS].release(np.array([exact[1]]), source)[0])
    level = 1.0 - (1.0 - confidence) / 2.0
    share, interval = shown(kept, units, noise[KEPT_MASS].half_width(level), noise[UNITS].half_width(level))
    epsilon = sum(m.cost.epsilon for m in noise.values())
    return DroppedShare(share, interval, confidence, epsilon)


def shown(kept: float, units: float, hk: float, hu: float) -> tuple[float, tuple[float, float]]:
    """The dropped share 1 − K̃/Ũ clipped to [0, 1], and its interval over the box [K̃ ± hk] × [Ũ ± hu]
    (post-processing of the two noisy counts: no data, no cost)."""
    share = 1.0 - min(1.0, max(0.0, kept / units)) if units >= 1.0 else 0.0
    if units - hu <= 0:
        return share, (0.0, 1.0)
    # 1 − K/U over the box: K/U is smallest at (K − hk)/(U + hu), largest at (K + hk)/(U − hu)
    low_kept = max(0.0, min(1.0, (kept - hk) / (units + hu)))
    high_kept = max(0.0, min(1.0, (kept + hk) / (units - hu)))
    return share, (1.0 - high_kept, 1.0 - low_kept)


__all__ = ["KEPT_MASS", "REPORT_SHARE", "UNITS", "DroppedShare", "mechanisms", "release", "shown"]
