"""Intervals of reals and translated value expressions: what interval arithmetic works on.

A value expression inside an aggregate is translated into clamped SQL together with an interval
that provably holds its value on every row (the DPCH paper, Remark 1: a Lipschitz map of bounded
inputs has bounded output). :class:`Interval` is that interval, :class:`ValueExpr` the pair.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from sqlglot import exp

from dpch.errors import QueryRejected
from dpch.sql.nodes import show


@dataclass(frozen=True)
class Interval:
    """A closed interval [lo, hi] of reals (lo may equal hi)."""

    lo: float
    hi: float

    @property
    def magnitude(self) -> float:
        """max(|lo|, |hi|): the largest absolute value in the interval."""
        return max(abs(self.lo), abs(self.hi))

    @property
    def width(self) -> float:
        return self.hi - self.lo

    @property
    def mid(self) -> float:
        return (self.lo + self.hi) / 2.0

    def __add__(self, other: Interval) -> Interval:
        return Interval(self.lo + other.lo, self.hi + other.hi)

    def __sub__(self, other: Interval) -> Interval:
        return Interval(self.lo - other.hi, self.hi - other.lo)

    def __mul__(self, other: Interval) -> Interval:
        products = [a * b for a in (self.lo, self.hi) for b in (other.lo, other.hi)]
        return Interval(min(products), max(products))

    def union(self, other: Interval) -> Interval:
        return Interval(min(self.lo, other.lo), max(self.hi, other.hi))

    def contains_zero(self) -> bool:
        return self.lo <= 0.0 <= self.hi

    def check(self) -> Interval:
        if not (math.isfinite(self.lo) and math.isfinite(self.hi)):
            raise QueryRejected("an expression's bounds overflow", hint="use smaller constants or bounds")
        return self


BOOL = Interval(0.0, 1.0)


@dataclass(frozen=True)
class ValueExpr:
    """A translated row expression: clamped SQL tree, its bounds, and whether it is integer-valued."""

    node: exp.Expr
    interval: Interval
    integer: bool
    #: whether the value can be NULL (a Nullable column or a NULL literal inside)
    nullable: bool = False

    @property
    def sql(self) -> str:
        """The expression as dpch displays it."""
        return show(self.node)


__all__ = ["BOOL", "Interval", "ValueExpr"]
