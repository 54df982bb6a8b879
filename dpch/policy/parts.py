"""A table's active data parts, the identity of its data that a rows-per-unit verification records.

A MergeTree part never changes once written: an INSERT adds parts, a merge, mutation or DELETE
replaces parts by new ones with new names, and a part's checksum (``hash_of_all_files``) is a
hash of its files' contents. So the list of ``name:checksum`` of the active parts is the same
exactly when the data is the same part for part; any change to the data changes it (a merge
changes it too: the verification then goes stale although the rows did not change, which costs
speed, never privacy).

The list is computed by ClickHouse, with the same expression at verification
(:data:`PARTS_SQL`) and inside every emitted query (:func:`dpch.sql.cap.current_parts`), so the
two compare as strings. It identifies the data: it is kept in the dpch-owned table
:mod:`.verified` and never shown (not in a COMMENT, not in the emitted SQL).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from dpch.store.engine import Engine

#: parts listed at most: ``groupArray(N)`` never raises (a plain ``groupArray`` can, past its element
#: limit: the emitted SQL must be total, docs/design.md rule 5). A table with more active parts reads
#: as "no list" (''), which never equals a record: the cap applies
MAX_PARTS = 100000

#: ``name:checksum`` of each active part of one table, sorted, comma-separated ('' for none or too many)
PARTS_SQL = ("SELECT if(count() <= {max:UInt32}, arrayStringConcat(arraySort(groupArray({max:UInt32})("
             "concat(name, ':', hash_of_all_files))), ','), '') FROM system.parts "
             "WHERE database = {db:String} AND table = {t:String} AND active")


def current_parts(engine: Engine, table: str) -> str:
    """The active parts of ``table`` in the engine's database as :data:`PARTS_SQL` lists them."""
    rows = engine.query_rows(PARTS_SQL.replace("{max:UInt32}", str(MAX_PARTS)), {"db": engine.database, "t": table})
    return str(rows[0][0])


def part_names(parts: str) -> list[str]:
    """The part names of a :func:`current_parts` list."""
    return [item.split(":", 1)[0] for item in parts.split(",") if item]


__all__ = ["MAX_PARTS", "PARTS_SQL", "current_parts", "part_names"]
