"""The owner verifies that no unit has more than ``max_rows_per_unit`` rows, so the cap can be skipped.

:func:`verify_rows_per_unit` counts each unit's rows in the table's current parts and, when none
exceeds the bound, records those parts (name and checksum, :mod:`.parts`) in the table COMMENT as
``verified_parts``. A query skips the ``LIMIT k BY`` cap only while the table's active parts are
exactly the recorded ones: checked when the policy is looked up (every query) and again inside
the emitted query, which reads only the recorded parts (:func:`dpch.sql.cap.verified_rows`). Any
INSERT, mutation, DELETE or merge changes the parts, and the cap applies again until the owner
verifies anew.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dpch.errors import PolicyError
from dpch.policy.annotations import with_item
from dpch.policy.parts import active_parts

if TYPE_CHECKING:
    from dpch.policy.resolve import Policy
    from dpch.store.engine import Engine


def verify_rows_per_unit(engine: Engine, policy: Policy, table: str) -> tuple[tuple[str, str], ...]:
    """Checks ``table``'s rows per unit against its ``max_rows_per_unit`` and records its parts.

    Returns the recorded parts. Raises PolicyError, recording nothing (and removing no earlier
    record), when some unit has more rows than the bound, the table has no parts, or it is not a
    private table with ``max_rows_per_unit``. Run ``OPTIMIZE TABLE … FINAL`` first: a background
    merge after the verification would make it stale at once.
    """
    from dpch.store.engine import quote_identifier, quote_string

    table_policy = policy.table(engine, table)
    if not table_policy.private or table_policy.max_rows_per_unit is None or table_policy.unique_units:
        raise PolicyError(f"table {table}: only a private table with max_rows_per_unit can be verified",
                          hint="annotate it 'dp: privacy_unit=COL, max_rows_per_unit=K'")
    parts = active_parts(engine, table)
    if not parts:
        raise PolicyError(f"table {table} has no data to verify", hint="verify after loading it")
    unit = quote_identifier(table_policy.unit_column)
    names = ", ".join(quote_string(name) for name, _ in parts)
    # counted on exactly the parts to be recorded: a part written meanwhile is not counted, and it
    # makes the record stale anyway (NULL units are in no private query)
    rows = engine.query_rows(f"SELECT max(c) FROM (SELECT count() AS c FROM {engine.table(table)} "
                             f"WHERE _part IN ({names}) AND {unit} IS NOT NULL GROUP BY {unit})")
    most = int(rows[0][0] or 0)
    if most > table_policy.max_rows_per_unit:
        raise PolicyError(f"table {table}: some unit has more than max_rows_per_unit = "
                          f"{table_policy.max_rows_per_unit} rows; the cap stays",
                          hint="raise max_rows_per_unit, or keep the cap (nothing was recorded)")
    comment = with_item(engine.table_comment(table), "verified_parts", [list(p) for p in parts])
    engine.command(f"ALTER TABLE {engine.table(table)} MODIFY COMMENT {quote_string(comment)}")
    policy.reload()
    return parts


__all__ = ["verify_rows_per_unit"]
