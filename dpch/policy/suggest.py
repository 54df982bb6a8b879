"""The owner's report for choosing the contribution bounds: how many rows and groups each unit has.

``dpch policy suggest TABLE [--by EXPR]`` (issue 27, item 3) reads the table's raw data, exactly, with
no noise: it is the data owner's tool, on the store itself (``Context.store`` refuses it through a
gateway), and no analyst-facing path calls it. It reports

- the distribution of rows per unit (quantiles and the largest), and for candidate caps k the share of
  rows the row cap would drop (Σ max(0, n_u − k) ÷ Σ n_u);
- with ``--by`` (a grouping expression, as an analyst would GROUP BY: ``toStartOfMonth(visit_date)``),
  the distribution of groups per unit and of rows per unit and group, and for candidate bounds (G, c)
  the share of rows the per-group bound would drop when each unit keeps its G largest groups (the most
  it can keep: dpch keeps G groups at random, so the share it drops is at least this) and c rows in each,
  with the ℓ2 of each bound beside it (k against √G·c rows: the noise scales with it).

The owner chooses k, G and c from it and writes them in the table's annotation (docs/annotating.md).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from dpch.errors import PolicyError
from dpch.store.quoting import quote_identifier

if TYPE_CHECKING:
    from dpch.policy.resolve import Policy
    from dpch.store.engine import Engine

#: candidate values the report lists (besides the table's own)
CAP_CANDIDATES = (1, 2, 3, 5, 10, 20, 50, 100)
PER_GROUP_CANDIDATES = (1, 2, 3, 5, 10)
QUANTILES = (0.5, 0.9, 0.99)


@dataclass(frozen=True)
class Suggestion:
    """The owner's report on one table (and grouping)."""

    table: str
    units: int
    rows: int
    rows_per_unit: tuple[float, ...]  # at QUANTILES, then the largest
    cap: int | None
    #: (k, share of rows dropped by the row cap)
    caps: tuple[tuple[int, float], ...]
    by: str | None = None
    groups_per_unit: tuple[float, ...] = ()
    rows_per_group: tuple[float, ...] = ()
    #: (G, c, share of rows dropped keeping each unit's G largest groups and c rows in each)
    per_group: tuple[tuple[int, int, float], ...] = ()

    def describe(self) -> str:
        """The report as text (``dpch policy suggest``)."""
        def dist(values: tuple[float, ...]) -> str:
            names = [f"p{round(q * 100)}" for q in QUANTILES] + ["max"]
            return ", ".join(f"{n} {v:g}" for n, v in zip(names, values, strict=True))

        lines = [f"{self.table}: {self.rows} rows of {self.units} units (exact counts: for the data owner only)",
                 f"rows per unit: {dist(self.rows_per_unit)}",
                 "row cap k → rows it drops (ℓ2 of one unit's rows: k):"]
        lines += [f"  k = {k:<4} drops {100 * share:5.1f}%" + ("   ← max_rows_per_unit now" if k == self.cap else "")
                  for k, share in self.caps]
        if self.by is not None:
            lines += [f"grouped by {self.by}:", f"  groups per unit: {dist(self.groups_per_unit)}",
                      f"  rows per unit and group: {dist(self.rows_per_group)}",
                      "  per-group bound G, c → rows it drops at least (ℓ2 √G·c):"]
            lines += [f"  G = {g:<4} c = {c:<3} drops ≥ {100 * share:5.1f}%   ℓ2 {(g ** 0.5) * c:.3g}"
                      for g, c, share in self.per_group]
            lines.append("  (dpch keeps G of a unit's groups at random; the share above keeps its G largest)")
        lines.append("Annotate the chosen values: max_rows_per_unit=k, max_groups_per_unit=G, max_rows_per_group=c.")
        return "\n".join(lines)


def suggest(engine: Engine, policy: Policy, table: str, by: str | None = None) -> Suggestion:
    """The report for ``table`` (a private table), grouped by the owner's SQL expression ``by``."""
    table_policy = policy.table(engine, table)
    if not table_policy.private or table_policy.unique_units:
        raise PolicyError(f"table {table}: only a private table with several rows per unit has bounds to choose",
                          hint="annotate it 'dp: privacy_unit=COL, max_rows_per_unit=K'")
    unit = quote_identifier(table_policy.unit_column)
    source = engine.table(table)
    levels = ", ".join(str(q) for q in QUANTILES)
    per_unit = f"SELECT {unit} AS u, count() AS n FROM {source} WHERE {unit} IS NOT NULL GROUP BY u"
    caps = sorted({*CAP_CANDIDATES, *([table_policy.max_rows_per_unit] if table_policy.max_rows_per_unit else [])})
    dropped = ", ".join(f"sum(greatest(n - {k}, 0))" for k in caps)
    row = engine.query_rows(f"SELECT count(), sum(n), quantilesExact({levels})(n), max(n), {dropped} "
                            f"FROM ({per_unit})")[0]
    units, rows = int(row[0]), int(row[1] or 0)
    if units == 0:
        raise PolicyError(f"table {table} has no rows with a unit", hint="suggest after loading it")
    suggestion = Suggestion(table=table, units=units, rows=rows,
                            rows_per_unit=(*(float(v) for v in row[2]), float(row[3])),
                            cap=table_policy.max_rows_per_unit,
                            caps=tuple((k, int(d) / rows) for k, d in zip(caps, row[4:], strict=True)))
    if by is None:
        return suggestion
    cells = f"SELECT {unit} AS u, ({by}) AS g, count() AS n FROM {source} WHERE {unit} IS NOT NULL GROUP BY u, g"
    # each unit's rows per group, largest first: read twice, once for the distributions and once for the
    # candidates' shares (their G range up to the largest number of groups the first read finds)
    per_unit_cells = f"SELECT u, arrayReverseSort(groupArray(n)) AS counts FROM ({cells}) GROUP BY u"
    stats = engine.query_rows(
        f"SELECT quantilesExact({levels})(length(counts)), max(length(counts)), "
        f"quantilesExactArray({levels})(counts), max(counts[1]) FROM ({per_unit_cells})")[0]
    most = int(stats[1])
    group_candidates = sorted({g for g in (1, 2, 3, 5, 10, 20, 50) if g < most} | {most})
    pairs = [(g, c) for g in group_candidates for c in PER_GROUP_CANDIDATES]
    # kept rows of each unit: its G largest groups, each cut to c rows, for every candidate at once
    kept = ", ".join(f"sum(arraySum(arrayMap(x -> least(x, {c}), arraySlice(counts, 1, {g}))))" for g, c in pairs)
    totals = engine.query_rows(f"SELECT {kept} FROM ({per_unit_cells})")[0]
    return replace(suggestion, by=by, groups_per_unit=(*(float(v) for v in stats[0]), float(most)),
                   rows_per_group=(*(float(v) for v in stats[2]), float(stats[3])),
                   per_group=tuple((g, c, 1 - int(k) / rows) for (g, c), k in zip(pairs, totals, strict=True)))


__all__ = ["Suggestion", "suggest"]
