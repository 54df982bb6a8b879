"""The accuracy target of one query, from its options (``SETTINGS dp_accuracy = …``).

- ``dp_accuracy = h``: every aggregate's ``dp_confidence`` interval is at most ±h (half-width h;
  an asymmetric interval, e.g. a clipped avg, counts its half-length (hi − lo)/2).
- ``dp_relative_error = α``: Rogers et al. 2023, §7's rule on the noisy value ŷ and its interval [lo, hi]:
  0 ∉ [lo, hi] and 1 − α < |hi/lo| ≤ 1 + α. With a symmetric interval ŷ ± h this is the paper's
  1 − α < |(ŷ + h)/(ŷ − h)| ≤ 1 + α and |ŷ| > h (the paper takes h = 1/ε, one standard deviation;
  dpch takes the half-width at ``dp_confidence``).
- Both may be given: the run stops when both hold.
- ``dp_max_epsilon = E``: the run never goes below the noise whose ex-post ε is E; if the target is
  not met by then, the answer is withheld and the worst case (what was reserved) is charged.
- ``dp_stop_rule``: ``'released'`` (default; the rule looks at noisy values only) or ``'exact'``
  (stop when the *true* error of every count/sum is ≤ ``dp_accuracy``: a rule on private data,
  run through ReducedAboveThreshold at twice the ex-post cost, Whitehouse et al. 2022, Cor 5.2).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from dpch.errors import QueryRejected

STOP_RULES = ("released", "exact")


def _positive(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and value > 0 and math.isfinite(value)


def validate_options(opts: Any) -> None:
    """Raises :class:`QueryRejected` for a bad accuracy-first option (called by QueryOptions.validated)."""
    if opts.accuracy is not None and not _positive(opts.accuracy):
        raise QueryRejected(f"dp_accuracy must be a positive number (a half-width), got {opts.accuracy!r}",
                            hint="e.g. SETTINGS dp_accuracy = 2.5, dp_confidence = 0.95")
    if opts.relative_error is not None and not (_positive(opts.relative_error) and opts.relative_error < 1):
        raise QueryRejected(f"dp_relative_error must be strictly between 0 and 1, got {opts.relative_error!r}",
                            hint="e.g. SETTINGS dp_relative_error = 0.1 for 10%")
    if opts.max_epsilon is not None and not _positive(opts.max_epsilon):
        raise QueryRejected(f"dp_max_epsilon must be a positive number, got {opts.max_epsilon!r}",
                            hint="e.g. SETTINGS dp_max_epsilon = 1")
    if opts.stop_rule not in STOP_RULES:
        raise QueryRejected(f"dp_stop_rule must be one of {', '.join(STOP_RULES)}, got {opts.stop_rule!r}",
                            hint="'released' stops on noisy values; 'exact' on the true error (costs double)")
    if opts.stop_rule == "exact" and opts.accuracy is None:
        raise QueryRejected("dp_stop_rule = 'exact' needs dp_accuracy (the true error to reach)",
                            hint="add e.g. dp_accuracy = 2.5")
    if opts.max_epsilon is not None and not opts.accuracy_first:
        raise QueryRejected("dp_max_epsilon caps an accuracy-first query: give dp_accuracy or dp_relative_error",
                            hint="for an ordinary query set dp_epsilon instead")


@dataclass(frozen=True)
class AccuracyTarget:
    """What an accuracy-first run must reach, and where it gives up."""

    accuracy: float | None = None
    relative_error: float | None = None
    confidence: float = 0.95
    max_epsilon: float | None = None
    stop_rule: str = "released"

    @classmethod
    def from_options(cls, opts: Any) -> AccuracyTarget:
        return cls(accuracy=opts.accuracy, relative_error=opts.relative_error, confidence=opts.confidence,
                   max_epsilon=opts.max_epsilon, stop_rule=opts.stop_rule)

    def describe(self) -> str:
        parts = []
        if self.accuracy is not None:
            parts.append(f"±{self.accuracy:g}")
        if self.relative_error is not None:
            parts.append(f"relative error ≤ {self.relative_error:.4g}")
        text = " and ".join(parts) + f" at {self.confidence:.4g} confidence"
        if self.stop_rule == "exact":
            text += " (true error, ReducedAboveThreshold)"
        return text
