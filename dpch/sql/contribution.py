"""Contribution bounds: how many rows one privacy unit may add to a query, and where.

Two bounds, each enforced by the emitted SQL (:mod:`.rewrite`) and each giving the sensitivities the
measures are calibrated with (:mod:`.aggregates`):

- the **row cap** (every query): each unit keeps k of its rows in all (``max_rows_per_unit``),
  chosen at random per row (docs/algorithms.md C3a). Over the groups of a GROUP BY, one unit adds at
  most k rows in all, possibly all to one group: ℓ1 = k and ℓ2 = k rows.
- the **per-group bound** (a GROUP BY, issue 27 item 2): each unit keeps at most G groups
  (``max_groups_per_unit`` or the key domain's size; ``SETTINGS dp_max_groups``), chosen at random
  per unit, and at most c rows in each (``max_rows_per_group``; ``SETTINGS dp_max_rows_per_group``),
  chosen at random per row. One unit adds at most c rows to each of at most G groups: ℓ1 = G·c,
  ℓ2 = √G·c and ℓ∞ = c rows (the L0/L∞ bound of Wilson et al. 2020, "Differentially private SQL
  with bounded user contribution", §3, and of PipelineDP's ``max_partitions_contributed`` and
  ``max_contributions_per_partition``).

A measure whose one row moves it by at most m (a count: 1; a sum of values in [lo, hi]:
max(|lo|, |hi|)) then has ℓ1 sensitivity m × :attr:`ContributionBound.l1_rows` and ℓ2 sensitivity
m × :attr:`ContributionBound.l2_rows`. The derivation of ℓ2: a unit's rows per group form a vector
with entries in [0, c] summing to at most R (R = k, c = k under the row cap; R = G·c under the
per-group bound); its Euclidean norm is largest with the rows packed c to a group, ⌊R/c⌋·c² +
(R mod c)², which is k² and G·c² (docs/algorithms.md, "Per-group contribution bounds").

:func:`choose` picks between them for one query from the plan and the options alone, never from the
data: the per-group bound where it lowers the noise of some measure and raises none, under the norm
the query's mechanism uses (ℓ2 for Gaussian noise, ℓ1 for Laplace), and where it does not raise the
keys one unit touches under partition selection. Which rows and groups are kept is random either
way; what the bound drops cannot be weighed without reading the data, so the choice does not try.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

BoundKind = Literal["rows", "groups"]
#: ``SETTINGS dp_bound``: ``auto`` (:func:`choose`), ``rows`` (the row cap), ``groups`` (per group)
BOUND_MODES = ("auto", "rows", "groups")


@dataclass(frozen=True)
class ContributionBound:
    """Rows one unit may add: ``rows`` in all, at most ``rows_per_group`` in one group, in at most
    ``groups`` groups."""

    kind: BoundKind
    rows: int
    groups: int
    rows_per_group: int

    @classmethod
    def row_cap(cls, k: int, groups: int) -> ContributionBound:
        """k rows per unit in all (at most ``groups`` groups, all k of them possibly in one)."""
        return cls("rows", k, groups, k)

    @classmethod
    def per_group(cls, groups: int, rows_per_group: int) -> ContributionBound:
        """At most ``rows_per_group`` rows in each of at most ``groups`` groups."""
        return cls("groups", groups * rows_per_group, groups, rows_per_group)

    @property
    def l1_rows(self) -> int:
        """ℓ1 over groups of the rows one unit adds."""
        return self.rows

    @property
    def l2_rows(self) -> float:
        """ℓ2 over groups of the rows one unit adds: packed ``rows_per_group`` to a group."""
        full, rest = divmod(self.rows, self.rows_per_group)
        return math.sqrt(full * self.rows_per_group**2 + rest**2)

    @property
    def rows_text(self) -> str:
        """The bound in the words of a measure's derivation: "k rows" or "c rows in each of G groups"."""
        if self.kind == "rows":
            return f"{self.rows} rows"
        return f"{self.rows_per_group} rows in each of {self.groups} groups"

    def describe(self) -> str:
        """What EXPLAIN and a release say about the bound: which rows and groups each unit keeps."""
        if self.kind == "rows":
            return f"row cap, {self.rows} rows per unit chosen at random for each release"
        return (f"per group, at most {self.groups} groups per unit and {self.rows_per_group} rows in each, "
                f"chosen at random for each release (ℓ1 {self.l1_rows}, ℓ2 {self.l2_rows:.4g} rows)")


def better(per_group: list[tuple[float, float]], row_cap: list[tuple[float, float]], mechanism: str,
           groups: tuple[int, int] | None = None) -> bool:
    """Whether measures of sensitivities ``per_group`` ((ℓ1, ℓ2) each, in the order of ``row_cap``'s)
    get less noise than under the row cap: none more and one less, in the norm of ``mechanism``
    (Gaussian: ℓ2, Laplace: ℓ1). ``groups``: (per-group G, row-cap G) under partition selection, whose
    threshold grows with the keys one unit touches: the per-group bound must not raise it."""
    index = 1 if mechanism == "gaussian" else 0
    if len(per_group) != len(row_cap) or not row_cap:
        return False
    if groups is not None and groups[0] > groups[1]:
        return False
    pairs = [(new[index], old[index]) for new, old in zip(per_group, row_cap, strict=True)]
    return all(new <= old for new, old in pairs) and any(new < old for new, old in pairs)


__all__ = ["BOUND_MODES", "BoundKind", "ContributionBound", "better"]
