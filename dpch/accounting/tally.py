"""Running sums over a ledger history, so admission and status cost the same at any history.

Every filter decides from sums over past releases of per-release terms (Σε, Σδ, Σρ, Σε²,
Σ ε(e^ε−1)/2, Lemma 3.3's δ terms, …). A :class:`Tally` keeps those sums and changes them in
O(1) when one release is added, or removed (a reservation settled, voided or failed replaces its
counted cost: the old cost is removed, the new one added).

Exactness: each sum is an :class:`ExactSum`, Shewchuk's non-overlapping partials (the state
``math.fsum`` keeps internally). The partials represent the sum of every term added so far
*exactly*, in any order and with removals, and :meth:`ExactSum.value` rounds them once with
``math.fsum``, so a tally's total is bit-for-bit ``math.fsum`` of the history's terms: the same
float the history-based reference (:func:`dpch.privacy.cost.compose`) computes. No extra slack is
needed; the filters keep their documented ``FLOAT_SLACK`` for the comparison with the budget only.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from dpch.privacy.cost import PrivacyCost


class ExactSum:
    """A running float sum exact to the last bit (``math.fsum`` of all terms added, minus removed).

    Infinite terms (Lemma 3.3's ε = 0 < δ round) are counted apart, so removing one is exact too.
    The number of partials is bounded by the float exponent range, in practice a handful.
    """

    __slots__ = ("_infinite", "_partials")

    def __init__(self) -> None:
        self._partials: list[float] = []
        self._infinite = 0

    def add(self, x: float, sign: int = 1) -> None:
        """Adds ``x`` (``sign`` = −1: removes a term added before)."""
        if math.isinf(x):
            self._infinite += sign
            return
        self.extend([-x if sign < 0 else x])

    def extend(self, terms: list[float]) -> None:
        """Adds every term of ``terms`` (the rebuild from a history: one tight loop, no call per term).

        Shewchuk's grow-expansion (the Python recipe behind math.fsum): hi + lo == x + y exactly."""
        partials = self._partials
        for x in terms:
            if math.isinf(x):
                self._infinite += 1
                continue
            i = 0
            for y in partials:
                if abs(x) < abs(y):
                    x, y = y, x
                hi = x + y
                lo = y - (hi - x)
                if lo:
                    partials[i] = lo
                    i += 1
                x = hi
            partials[i:] = [x]

    def copy(self) -> ExactSum:
        """An independent sum with the same value."""
        other = ExactSum()
        other._partials = list(self._partials)
        other._infinite = self._infinite
        return other

    def to_data(self) -> list[Any]:
        """The exact state as plain data: ``[partials, infinite count]`` (floats survive JSON exactly:
        ``json`` writes the shortest repr that reads back as the same double)."""
        return [list(self._partials), self._infinite]

    @classmethod
    def from_data(cls, data: list[Any]) -> ExactSum:
        """The sum :meth:`to_data` wrote, bit for bit."""
        out = cls()
        out._partials = [float(x) for x in data[0]]
        out._infinite = int(data[1])
        return out

    def value(self, *extra: float) -> float:
        """The correctly rounded sum, with ``extra`` terms (a proposed release) added."""
        if self._infinite > 0 or any(math.isinf(e) for e in extra):
            return math.inf
        return math.fsum([*self._partials, *extra])


class Tally:
    """A filter's running sums over a history: ``features(cost)`` gives one release's terms."""

    def __init__(self, features: Callable[[PrivacyCost], Sequence[float]], width: int) -> None:
        self.features = features
        self.sums = tuple(ExactSum() for _ in range(width))
        #: releases counted (added minus removed)
        self.count = 0

    def add(self, cost: PrivacyCost, sign: int = 1) -> None:
        """Counts one release at ``cost`` (``sign`` = −1: stops counting it)."""
        for total, term in zip(self.sums, self.features(cost), strict=True):
            total.add(term, sign)
        self.count += sign

    def remove(self, cost: PrivacyCost) -> None:
        """Stops counting a release added at ``cost``."""
        self.add(cost, -1)

    def extend(self, costs: list[PrivacyCost]) -> None:
        """Counts every release of ``costs`` (equal to adding them one by one)."""
        rows = [self.features(c) for c in costs]
        for j, total in enumerate(self.sums):
            total.extend([r[j] for r in rows])
        self.count += len(rows)

    def copy(self) -> Tally:
        """An independent tally of the same history."""
        other = Tally(self.features, 0)
        other.sums = tuple(t.copy() for t in self.sums)
        other.count = self.count
        return other

    def total(self, i: int, *extra: float) -> float:
        """Sum ``i`` (with ``extra`` terms)."""
        return self.sums[i].value(*extra)

    def to_data(self) -> dict[str, Any]:
        """The exact sums and count as plain data (the shared admission state keeps tallies in Keeper)."""
        return {"sums": [t.to_data() for t in self.sums], "count": self.count}

    def load(self, data: dict[str, Any]) -> Tally:
        """Replaces this (fresh) tally's sums and count with what :meth:`to_data` wrote; returns it."""
        if len(data["sums"]) != len(self.sums):
            raise ValueError(f"a tally of {len(data['sums'])} sums cannot be read as one of {len(self.sums)}")
        self.sums = tuple(ExactSum.from_data(d) for d in data["sums"])
        self.count = int(data["count"])
        return self


class SplitTally:
    """Two tallies, fixed-cost releases in ``fixed`` and ex-post ones in ``post`` (the mixed filter's
    two sides; the routing is a fact of the cost)."""

    def __init__(self, fixed: Tally, post: Tally) -> None:
        self.fixed = fixed
        self.post = post

    @property
    def count(self) -> int:
        return self.fixed.count + self.post.count

    def add(self, cost: PrivacyCost, sign: int = 1) -> None:
        (self.post if cost.ex_post else self.fixed).add(cost, sign)

    def copy(self) -> SplitTally:
        return SplitTally(self.fixed.copy(), self.post.copy())

    def extend(self, costs: list[PrivacyCost]) -> None:
        self.fixed.extend([c for c in costs if not c.ex_post])
        self.post.extend([c for c in costs if c.ex_post])

    def remove(self, cost: PrivacyCost) -> None:
        self.add(cost, -1)

    def to_data(self) -> dict[str, Any]:
        return {"fixed": self.fixed.to_data(), "post": self.post.to_data()}

    def load(self, data: dict[str, Any]) -> SplitTally:
        self.fixed.load(data["fixed"])
        self.post.load(data["post"])
        return self
