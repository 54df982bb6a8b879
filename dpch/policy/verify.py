"""The owner verifies that no unit has more than ``max_rows_per_unit`` rows, so the cap can be skipped.

:func:`verify_rows_per_unit` counts each unit's rows in the table's current parts and, when none
exceeds the bound, records those parts (:mod:`.parts`) in the dpch-owned table ``dpch_verified``
(:mod:`.verified`) — never in the table's COMMENT, which analysts see. Every query on the table
then reads its rows in two branches, exactly one of which reads anything
(:func:`dpch.sql.cap.verified_guard`): uncapped while the table's active parts are exactly the
recorded ones, capped otherwise. Any INSERT, mutation, DELETE or merge changes the parts, and the
cap applies again until the owner verifies anew (``dpch policy verify TABLE``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from dpch.errors import PolicyError
from dpch.policy import verified
from dpch.policy.annotations import is_annotation, parse_annotation, without_item
from dpch.policy.parts import current_parts, part_names
from dpch.store.quoting import quote_identifier, quote_string

if TYPE_CHECKING:
    from dpch.policy.resolve import Policy
    from dpch.store.engine import Engine


@dataclass(frozen=True)
class VerifiedRows:
    """What one verification checked: the table, its unit column, the bound, and the data's size."""

    table: str
    unit: str
    bound: int
    parts: int
    rows: int
    units: int

    def describe(self) -> str:
        """The owner's report (``dpch policy verify``)."""
        return (f"checked {self.rows} rows of {self.units} units ({self.unit}) in {self.parts} data part(s) of "
                f"{self.table}: no unit has more than max_rows_per_unit = {self.bound} rows.\n"
                "Queries on the table skip the contribution cap while its data stays exactly as verified. "
                "Any later write (INSERT, ALTER UPDATE/DELETE, DELETE, a merge or OPTIMIZE) brings the cap "
                f"back until you run `dpch policy verify {self.table}` again.")


def verify_rows_per_unit(engine: Engine, policy: Policy, table: str) -> VerifiedRows:
    """Checks ``table``'s rows per unit against its ``max_rows_per_unit`` and records its parts.

    Raises PolicyError, recording nothing (and removing no earlier record), when some unit has
    more rows than the bound, the table has no data, its data changed while it was counted, or
    it is not a private table with ``max_rows_per_unit``. Run ``OPTIMIZE TABLE … FINAL`` first:
    a background merge after the verification would make it stale at once. A ``verified_parts``
    item left in the COMMENT by an older dpch (it published the parts' checksums) is removed.
    """
    table_policy = policy.table(engine, table)
    if not table_policy.private or table_policy.max_rows_per_unit is None or table_policy.unique_units:
        raise PolicyError(f"table {table}: only a private table with max_rows_per_unit can be verified",
                          hint="annotate it 'dp: privacy_unit=COL, max_rows_per_unit=K'")
    if table_policy.distributed:
        raise PolicyError(f"table {table} is a Distributed table: its rows per unit cannot be verified (a "
                          "verification records one table's data parts; each shard has its own)",
                          hint="queries on it are capped as usual; nothing was recorded")
    parts = current_parts(engine, table)
    names = part_names(parts)
    if not names:
        raise PolicyError(f"table {table} has no data to verify (or too many data parts)",
                          hint="verify after loading it, and after OPTIMIZE TABLE … FINAL")
    unit = quote_identifier(table_policy.unit_column)
    # counted on exactly the parts to be recorded: a part written meanwhile is not counted (and makes
    # the record stale anyway); NULL units are in no private query
    rows = engine.query_rows(
        f"SELECT max(c), sum(c), count() FROM (SELECT count() AS c FROM {engine.table(table)} "
        f"WHERE _part IN {{names:Array(String)}} AND {unit} IS NOT NULL GROUP BY {unit})", {"names": names})
    most, total, units = (int(v or 0) for v in rows[0])
    bound = table_policy.max_rows_per_unit
    if most > bound:
        raise PolicyError(f"table {table}: some unit has more than max_rows_per_unit = {bound} rows; the cap stays",
                          hint="raise max_rows_per_unit, or keep the cap (nothing was recorded)")
    if current_parts(engine, table) != parts:
        raise PolicyError(f"table {table} changed while it was verified; nothing was recorded",
                          hint="verify again once the writes (or merges) have finished")
    verified.record(engine, table, table_policy.unit_column, bound, parts, names)
    _forget_published_parts(engine, table)
    policy.reload()
    return VerifiedRows(table=table, unit=table_policy.unit_column, bound=bound, parts=len(names), rows=total,
                        units=units)


def _forget_published_parts(engine: Engine, table: str) -> None:
    """Removes the ``verified_parts`` item an older dpch wrote into the COMMENT (it held checksums)."""
    comment = engine.table_comment(table)
    if is_annotation(comment) and "verified_parts" in parse_annotation(comment, where=f"table {table}"):
        engine.command(f"ALTER TABLE {engine.table(table)} MODIFY COMMENT "
                       f"{quote_string(without_item(comment, 'verified_parts'))}")


__all__ = ["VerifiedRows", "verify_rows_per_unit"]
