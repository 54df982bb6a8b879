"""A table's active data parts, the identity of its data that a rows-per-unit verification records.

A MergeTree part never changes once written: an INSERT adds parts, a merge, mutation or DELETE
replaces parts by new ones with new names, and a part's checksum (``hash_of_all_files``) is a
hash of its files' contents. So the set of (name, checksum) of the active parts is the same
exactly when the data is the same part for part; any change to the data changes it (a merge
changes it too: the verification then goes stale although the rows did not change, which costs
speed, never privacy).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from dpch.store.engine import Engine

#: the active parts of one table, in name order
PARTS_SQL = ("SELECT name, hash_of_all_files FROM system.parts "
             "WHERE database = {db:String} AND table = {t:String} AND active ORDER BY name")


def active_parts(engine: Engine, table: str) -> tuple[tuple[str, str], ...]:
    """(name, checksum) of each active part of ``table`` in the engine's database, sorted."""
    rows = engine.query_rows(PARTS_SQL, {"db": engine.database, "t": table})
    return tuple(sorted((str(name), str(checksum)) for name, checksum in rows))


__all__ = ["PARTS_SQL", "active_parts"]
