"""The validated privacy policy of a table and its columns."""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from datetime import date
from typing import Any

from dpch.errors import PolicyError

#: written into COMMENTs by an older dpch's verification (a list of part names and checksums); read
#: and ignored: verifications now live in ``dpch_verified`` (:mod:`dpch.policy.verified`), and
#: ``dpch policy verify`` removes the item
LEGACY_VERIFIED = "verified_parts"
#: the largest contribution bound an owner may annotate (max_rows_per_unit, max_groups_per_unit,
#: max_rows_per_group) or an analyst ask for (dp_max_groups, dp_max_rows_per_group): far above any bound
#: whose noise can be calibrated, and small enough that G·c² stays a float (10^200 overflowed)
MAX_CONTRIBUTION_BOUND = 10**9

TABLE_KEYS = {"privacy_unit", "max_rows_per_unit", "unique_units", "max_groups_per_unit", "max_rows_per_group",
              "public", "split_cap",
              "cap_order", "final_after", LEGACY_VERIFIED}
#: which rows the cap keeps: ``random`` (the default: k rows per unit chosen at random per row, under a key
#: drawn for each release) or ``stored`` (the owner's explicit choice: each unit's first k rows in the
#: table's stored order — faster on a table sorted by its unit, and biased towards the rows stored first)
CAP_ORDERS = ("random", "stored")
COLUMN_KEYS = {"bounds", "public", "values"}

_WRAPPER = re.compile(r"^(?:Nullable|LowCardinality)\((.*)\)$")


def base_type(ch_type: str) -> str:
    """Strips Nullable(...) and LowCardinality(...) from a ClickHouse type name."""
    t = ch_type.strip()
    while (m := _WRAPPER.match(t)) is not None:
        t = m.group(1).strip()
    return t


def is_numeric_type(ch_type: str) -> bool:
    return base_type(ch_type).startswith(("Int", "UInt", "Float", "Decimal", "Bool"))


def is_date_type(ch_type: str) -> bool:
    return base_type(ch_type).startswith("Date")


def is_integer_type(ch_type: str) -> bool:
    return base_type(ch_type).startswith(("Int", "UInt", "Bool"))


@dataclass(frozen=True)
class ColumnPolicy:
    """What one column may reveal.

    ``bounds`` lets it be summed and averaged (values are clamped into it); ``public`` with
    ``values`` declares its key domain, so GROUP BY releases exactly those keys.
    """

    name: str
    type: str
    bounds: tuple[float, float] | None = None
    public: bool = False
    values: tuple[Any, ...] | None = None
    #: bounds of a Date/DateTime column (``bounds=["2026-01-01", "2026-12-31"]``): they give
    #: the key domain of date buckets such as toStartOfMonth
    date_bounds: tuple[date, date] | None = None

    @property
    def numeric(self) -> bool:
        return is_numeric_type(self.type)

    @property
    def integer(self) -> bool:
        return is_integer_type(self.type)

    def describe(self) -> str:
        parts = []
        if self.public:
            parts.append("public")
        if self.values is not None:
            parts.append(f"values={list(self.values)}")
        if self.bounds is not None:
            lo, hi = self.bounds
            parts.append(f"bounds=[{_fmt(lo)}, {_fmt(hi)}]")
        if self.date_bounds is not None:
            parts.append(f"bounds=[{self.date_bounds[0]}, {self.date_bounds[1]}]")
        return ", ".join(parts) or "private (count and filter only)"

    def annotation(self) -> str:
        """This column's policy as a ``dp:`` COMMENT ('' when it has none): what ``SHOW CREATE TABLE``
        shows when the policy comes from a TOML file. :func:`build_table_policy` of it gives this policy."""
        items = ["public"] if self.public else []
        if self.values is not None:
            items.append("values=" + json.dumps(list(self.values), ensure_ascii=False, default=str))
        if self.bounds is not None:
            items.append(f"bounds=[{_fmt(self.bounds[0])}, {_fmt(self.bounds[1])}]")
        if self.date_bounds is not None:
            items.append("bounds=" + json.dumps([str(d) for d in self.date_bounds]))
        return f"dp: {', '.join(items)}" if items else ""


@dataclass(frozen=True)
class TablePolicy:
    """The policy of one table.

    A private table names its ``privacy_unit`` and caps each unit's rows at
    ``max_rows_per_unit`` (``unique_units`` says the table holds at most one row per unit, so
    the cap needs no enforcement). A table annotated ``public`` holds no personal data
    (e.g. a dimension table) and can be joined freely.
    """

    table: str
    columns: dict[str, ColumnPolicy]
    privacy_unit: str | None = None
    max_rows_per_unit: int | None = None
    unique_units: bool = False
    max_groups_per_unit: int | None = None
    #: the owner's per-group bound c (``max_rows_per_group``): a grouped query may bound each unit to G
    #: groups and c rows in each instead of k rows in all (:mod:`dpch.sql.contribution`), where that gives
    #: less noise
    max_rows_per_group: int | None = None
    public: bool = False
    sources: tuple[str, ...] = field(default=())
    #: the table's ClickHouse sorting key, when it is plain columns
    sorting_key: tuple[str, ...] = field(default=())
    #: the table's primary key (a prefix of the sorting key), when it is plain columns
    primary_key: tuple[str, ...] = field(default=())
    #: the owner's opt-in to the split cap (``split_cap``): on a table stored ordered by its unit the
    #: cap runs in two parallel branches (:func:`dpch.sql.cap.capped_rows`) — faster on large tables,
    #: a few ms slower on small ones, the same rows always
    split_cap: bool = False
    #: which rows the cap keeps (:data:`CAP_ORDERS`): ``stored`` only where the owner wrote ``cap_order=stored``
    cap_order: str = "random"
    #: seconds after a time bucket's end when its data is complete (``final_after``): a query over the table's
    #: time buckets is answered from the release store, each final bucket released once
    #: (:mod:`dpch.pipeline.bucket_store`); None: every query is released as written
    final_after: int | None = None
    #: whether ``dpch_verified`` holds a verification that no unit has more than
    #: ``max_rows_per_unit`` rows (:func:`dpch.policy.verify.verify_rows_per_unit`)
    verified: bool = False
    #: whether the table's engine is Distributed (system.tables): its rows lie on several shards, where
    #: the split cap's index and a verification's data parts do not exist (:func:`refuse_on_shards`)
    distributed: bool = False
    #: the table's engine (system.tables), e.g. ``MergeTree``; empty for a policy built without its table.
    #: It decides how the cap tells rows apart (:func:`dpch.sql.cap.row_identity`)
    engine: str = ""
    #: whether the table's data is still the verified data, read when the policy was looked up (for
    #: ``dpch policy show`` only: the emitted query checks it again itself, :func:`dpch.sql.cap.verified_guard`)
    verified_current: bool = False

    @property
    def private(self) -> bool:
        return self.privacy_unit is not None

    @property
    def unit_column(self) -> str:
        """The privacy unit column of a private table (a public table has none: PolicyError)."""
        if self.privacy_unit is None:
            raise PolicyError(f"table {self.table!r} is public: it has no privacy unit",
                              hint="only a private table (dp: privacy_unit=...) has one")
        return self.privacy_unit

    @property
    def unit_ordered(self) -> bool:
        """Whether the table is stored ordered by its privacy unit first (fast LIMIT BY)."""
        return bool(self.sorting_key) and self.sorting_key[0] == self.privacy_unit

    @property
    def rows_verified(self) -> bool:
        """Whether the emitted query reads the table in the two guarded branches of a verified table
        (uncapped while the data is the verified data, capped otherwise: :func:`dpch.sql.cap.verified_guard`).
        Whether the record is still current does not matter here: the query checks it as it runs."""
        return self.verified and not self.unique_units

    @property
    def unit_indexed(self) -> bool:
        """Whether the primary index starts with the privacy unit (the cap's split point is read
        from it: :func:`dpch.sql.cap.split_point`)."""
        return self.unit_ordered and bool(self.primary_key) and self.primary_key[0] == self.privacy_unit

    @property
    def contribution_cap(self) -> int:
        """Rows one unit may contribute: 1 for unique-unit tables, else max_rows_per_unit."""
        if self.unique_units:
            return 1
        assert self.max_rows_per_unit is not None
        return self.max_rows_per_unit

    def refuse_on_shards(self) -> None:
        """Refuses, in words, the cap's single-store forms on a Distributed table: ``split_cap`` reads the
        split point from one MergeTree's primary index, and a rows-per-unit verification records one
        MergeTree's data parts; a Distributed table has neither (each shard has its own). Called when a
        query is planned, so nothing is charged."""
        if not self.distributed:
            return
        if self.split_cap:
            raise PolicyError(
                f"table {self.table} is a Distributed table: its split_cap cannot be used (the split point "
                "is read from one table's primary index, and a Distributed table's rows lie on several shards)",
                hint=f"remove split_cap from {self.table}'s dp: annotation; the cap then runs in one stream")
        if self.verified:
            raise PolicyError(
                f"table {self.table} is a Distributed table: its rows-per-unit verification cannot be used "
                "(it records one table's data parts, and a Distributed table's rows lie on several shards)",
                hint=f"delete {self.table}'s rows from dpch_verified; the cap then applies as usual")

    def column(self, name: str) -> ColumnPolicy:
        col = self.columns.get(name)
        if col is None:
            lowered = {c.lower(): c for c in self.columns}
            if name.lower() in lowered:
                return self.columns[lowered[name.lower()]]
            raise PolicyError(f"table {self.table} has no column {name!r}")
        return col

    @property
    def nullable_unit(self) -> bool:
        """Whether the privacy-unit column's type admits NULL (such rows are excluded from queries)."""
        column = self.columns.get(self.privacy_unit or "")
        return column is not None and column.type.replace("LowCardinality(", "").startswith("Nullable(")

    def describe(self) -> str:
        """A human-readable summary, as `dpch policy show` prints it."""
        lines = [f"table {self.table}"]
        if self.public:
            lines.append("  public table (no personal data)")
        elif self.private:
            lines.append(f"  privacy unit: {self.privacy_unit}")
            if self.nullable_unit:
                lines.append(f"  the unit column is Nullable: rows whose {self.privacy_unit} is NULL belong to no "
                             "known person and are left out of every private query")
            if self.unique_units:
                lines.append("  one row per unit (no contribution cap needed)")
            else:
                lines.append(f"  max rows per unit: {self.max_rows_per_unit}")
            if self.verified:
                state = "current: the cap is skipped" if self.verified_current else \
                    "stale: the data changed since, the cap applies until it is verified again"
                lines.append(f"  rows per unit verified ({state})")
            if self.split_cap:
                lines.append("  split cap: the cap runs in two parallel branches" if self.unit_indexed and
                             not self.nullable_unit else "  split cap declared, but the table is not stored "
                             "ordered by its (non-Nullable) unit first in the primary key: the cap runs in one stream")
            if not self.unique_units:
                lines.append("  cap keeps: each unit's first k rows in the stored order (cap_order=stored: biased "
                             "towards the rows stored first)" if self.cap_order == "stored" else
                             "  cap keeps: k rows per unit chosen at random per row, afresh for each release")
            if self.final_after is not None:
                lines.append(f"  time buckets final {self.final_after} s after their end: queries over them are "
                             "answered from the release store, each final bucket released once")
            if self.max_groups_per_unit is not None:
                lines.append(f"  max groups per unit: {self.max_groups_per_unit}")
            if self.max_rows_per_group is not None:
                lines.append(f"  max rows per group: {self.max_rows_per_group} (a grouped query may bound each "
                             "unit per group instead, where that needs less noise)")
        if self.sources:
            lines.append(f"  from: {', '.join(self.sources)}")
        width = max((len(c) for c in self.columns), default=0)
        for col in self.columns.values():
            role = "privacy unit" if col.name == self.privacy_unit else col.describe()
            lines.append(f"  {col.name.ljust(width)}  {col.type:<24} {role}")
        return "\n".join(lines)

    def annotation(self) -> str:
        """The table's policy as a ``dp:`` COMMENT ('' when it has none); see :meth:`ColumnPolicy.annotation`."""
        items = ["public"] if self.public else []
        if self.privacy_unit is not None:
            items.append(f"privacy_unit={self.privacy_unit}")
        if self.max_rows_per_unit is not None:
            items.append(f"max_rows_per_unit={self.max_rows_per_unit}")
        if self.unique_units:
            items.append("unique_units")
        if self.max_groups_per_unit is not None:
            items.append(f"max_groups_per_unit={self.max_groups_per_unit}")
        if self.max_rows_per_group is not None:
            items.append(f"max_rows_per_group={self.max_rows_per_group}")
        if self.split_cap:
            items.append("split_cap")
        if self.cap_order != "random":
            items.append(f"cap_order={self.cap_order}")
        if self.final_after is not None:
            items.append(f"final_after={self.final_after}")
        return f"dp: {', '.join(items)}" if items else ""

    def as_dict(self) -> dict[str, Any]:
        return {
            "table": self.table,
            "public": self.public,
            "privacy_unit": self.privacy_unit,
            "max_rows_per_unit": self.max_rows_per_unit,
            "unique_units": self.unique_units,
            "nullable_unit": self.nullable_unit,
            "max_groups_per_unit": self.max_groups_per_unit,
            "max_rows_per_group": self.max_rows_per_group,
            "split_cap": self.split_cap,
            "cap_order": self.cap_order,
            "final_after": self.final_after,
            # current/stale only: the record itself (its parts' checksums) is never shown
            "rows_verified": ("current" if self.verified_current else "stale") if self.verified else None,
            "columns": {
                c.name: {
                    "type": c.type,
                    "bounds": list(c.bounds) if c.bounds else
                    ([str(d) for d in c.date_bounds] if c.date_bounds else None),
                    "public": c.public,
                    "values": list(c.values) if c.values is not None else None,
                }
                for c in self.columns.values()
            },
        }


def build_table_policy(
    table: str,
    column_types: dict[str, str],
    table_spec: dict[str, Any],
    column_specs: dict[str, dict[str, Any]],
    sources: tuple[str, ...] = (),
    sorting_key: tuple[str, ...] = (),
    primary_key: tuple[str, ...] = (),
) -> TablePolicy:
    """Validates raw annotation/TOML settings against the table's real columns."""
    unknown = set(table_spec) - TABLE_KEYS
    if unknown:
        raise PolicyError(
            f"table {table}: unknown policy key(s) {sorted(unknown)}",
            hint=f"table keys are {sorted(TABLE_KEYS)}",
        )
    for col in column_specs:
        if col not in column_types:
            raise PolicyError(
                f"table {table}: the policy names column {col!r}, which the table does not have",
                hint=f"columns are {sorted(column_types)}",
            )
    columns = {
        name: _column_policy(table, name, ch_type, column_specs.get(name, {}))
        for name, ch_type in column_types.items()
    }

    public = _flag(table_spec.get("public", False), f"table {table}: public")
    unit = table_spec.get("privacy_unit")
    if public and unit:
        raise PolicyError(f"table {table} is annotated both public and with a privacy_unit")
    if unit is not None:
        if not isinstance(unit, str) or unit not in column_types:
            raise PolicyError(
                f"table {table}: privacy_unit {unit!r} is not a column of the table",
                hint=f"columns are {sorted(column_types)}",
            )
    unique = _flag(table_spec.get("unique_units", False), f"table {table}: unique_units")
    cap = table_spec.get("max_rows_per_unit")
    if cap is not None:
        cap = _positive_int(cap, f"table {table}: max_rows_per_unit")
    groups = table_spec.get("max_groups_per_unit")
    if groups is not None:
        groups = _positive_int(groups, f"table {table}: max_groups_per_unit")
    per_group = table_spec.get("max_rows_per_group")
    if per_group is not None:
        per_group = _positive_int(per_group, f"table {table}: max_rows_per_group")
        if unit is None or unique:
            raise PolicyError(f"table {table}: max_rows_per_group needs a privacy_unit with several rows per unit",
                              hint="leave it out: a table with one row per unit (or none) has nothing to bound "
                                   "per group")
    if unit is not None and cap is None and not unique:
        raise PolicyError(
            f"table {table} names privacy_unit={unit} but no max_rows_per_unit",
            hint="add max_rows_per_unit=K to the table comment (or unique_units if each unit "
            "has one row); without a cap one unit's influence is unbounded",
        )
    split = _flag(table_spec.get("split_cap", False), f"table {table}: split_cap")
    if split and unit is None:
        raise PolicyError(f"table {table}: split_cap needs a privacy_unit (it splits the contribution cap)")
    order = table_spec.get("cap_order", "random")
    if order not in CAP_ORDERS:
        raise PolicyError(f"table {table}: cap_order must be one of {', '.join(CAP_ORDERS)}, not {order!r}")
    if order == "stored" and (unit is None or not sorting_key or sorting_key[0] != unit):
        raise PolicyError(
            f"table {table}: cap_order=stored needs a table stored ORDER BY its privacy_unit first",
            hint="without it the stored order is not a per-unit order; leave cap_order out (random rows)")
    final_after = table_spec.get("final_after")
    if final_after is not None:
        if isinstance(final_after, bool) or not isinstance(final_after, int) or final_after < 0:
            raise PolicyError(f"table {table}: final_after must be a whole number of seconds (0 or more), "
                              f"not {final_after!r}", hint="e.g. final_after=3600: a bucket is final an hour "
                              "after it ends")
        if unit is None:
            raise PolicyError(f"table {table}: final_after needs a privacy_unit (a public table's answers are "
                              "exact and need no store)")
    if unit is None and (cap is not None or unique):
        raise PolicyError(
            f"table {table} sets a contribution cap but names no privacy_unit",
            hint="add privacy_unit=COLUMN to the table comment",
        )
    return TablePolicy(
        table=table,
        columns=columns,
        privacy_unit=unit,
        max_rows_per_unit=cap,
        unique_units=unique,
        max_groups_per_unit=groups,
        max_rows_per_group=per_group,
        public=public,
        sources=sources,
        split_cap=split,
        cap_order=order,
        final_after=final_after,
        sorting_key=tuple(k for k in sorting_key if k in column_types)
        if all(k in column_types for k in sorting_key)
        else (),
        primary_key=tuple(primary_key) if all(k in column_types for k in primary_key) else (),
    )


def _column_policy(table: str, name: str, ch_type: str, spec: dict[str, Any]) -> ColumnPolicy:
    where = f"column {table}.{name}"
    unknown = set(spec) - COLUMN_KEYS
    if unknown:
        raise PolicyError(
            f"{where}: unknown policy key(s) {sorted(unknown)}",
            hint=f"column keys are {sorted(COLUMN_KEYS)}",
        )
    bounds = None
    date_bounds = None
    if "bounds" in spec and is_date_type(ch_type):
        raw = spec["bounds"]
        try:
            lo_d, hi_d = (date.fromisoformat(str(v)[:10]) for v in raw)
        except (TypeError, ValueError):
            raise PolicyError(f"{where}: bounds of a date column must be two ISO dates, e.g. "
                              '["2026-01-01", "2026-12-31"]') from None
        if lo_d > hi_d:
            raise PolicyError(f"{where}: bounds [{lo_d}, {hi_d}] have lo > hi")
        date_bounds = (lo_d, hi_d)
    elif "bounds" in spec:
        raw = spec["bounds"]
        if (
            not isinstance(raw, list | tuple)
            or len(raw) != 2
            or not all(isinstance(v, int | float) and not isinstance(v, bool) for v in raw)
        ):
            raise PolicyError(f"{where}: bounds must be [lo, hi] with two numbers")
        lo, hi = float(raw[0]), float(raw[1])
        if not (math.isfinite(lo) and math.isfinite(hi)):
            raise PolicyError(f"{where}: bounds must be finite")
        if lo > hi:
            raise PolicyError(f"{where}: bounds [{_fmt(lo)}, {_fmt(hi)}] have lo > hi")
        if not is_numeric_type(ch_type):
            raise PolicyError(f"{where}: bounds need a numeric column, but its type is {ch_type}")
        bounds = (lo, hi)
    values = None
    if "values" in spec:
        raw = spec["values"]
        if not isinstance(raw, list) or not raw:
            raise PolicyError(f"{where}: values must be a non-empty list")
        if len(set(map(repr, raw))) != len(raw):
            raise PolicyError(f"{where}: values has duplicates")
        values = tuple(raw)
    public = _flag(spec.get("public", values is not None), f"{where}: public")
    if values is not None and not public:
        raise PolicyError(f"{where}: values are only meaningful on a public column")
    return ColumnPolicy(name=name, type=ch_type, bounds=bounds, public=public, values=values,
                        date_bounds=date_bounds)


def _flag(value: Any, where: str) -> bool:
    if not isinstance(value, bool):
        raise PolicyError(f"{where} must be true or false")
    return value


def _positive_int(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise PolicyError(f"{where} must be a positive whole number, got {value!r}")
    if value > MAX_CONTRIBUTION_BOUND:
        # a bound this large gives noise as large (it scales the sensitivity), and 10^400 reached the ℓ2
        # arithmetic as an OverflowError; the analyst's dp_max_groups/dp_max_rows_per_group stop at the same
        raise PolicyError(f"{where} must be at most 10^9, got {value}",
                          hint="a contribution bound scales the noise: choose one near what most units have "
                               "(dpch policy suggest TABLE shows it)")
    return value


def _fmt(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else repr(x)
