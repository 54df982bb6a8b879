"""``dpch_verified``: the owner's rows-per-unit verifications, one row per verification.

A row says: on the parts listed in ``parts`` (:mod:`.parts`), no unit of ``table`` (by the column
``unit``) has more than ``max_rows`` rows. The emitted query reads the latest row that fits the
table's current policy (:func:`dpch.sql.cap.verified_guard`); dpch reads it when it looks the
policy up, to say whether the record is current. The part list identifies the data (its checksums
are hashes of the files), so it lives here, in a table dpch owns, and never in the table's COMMENT
(shown to analysts) or in the SQL dpch shows. Analysts cannot query it: it has no ``dp:`` policy.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from dpch.policy.parts import MAX_PARTS, PARTS_SQL
from dpch.store.quoting import insert_values

if TYPE_CHECKING:
    from dpch.store.engine import Engine

VERIFIED_TABLE = "dpch_verified"


@dataclass(frozen=True)
class Verification:
    """Whether a table has a record that fits its policy, and whether its data is still the verified data."""

    recorded: bool
    current: bool


def ensure_table(engine: Engine) -> None:
    """Creates ``dpch_verified`` in the engine's database if it does not exist."""
    engine.create_table(
        VERIFIED_TABLE,
        "table String, unit String, max_rows UInt64, parts String, names Array(String), time DateTime64(6, 'UTC')",
        "ORDER BY (table, time)"
        " COMMENT 'dpch: rows-per-unit verifications (written by dpch policy verify; never edit by hand)'")


def record(engine: Engine, table: str, unit: str, max_rows: int, parts: str, names: list[str]) -> None:
    """Appends one verification (durable when the INSERT returns)."""
    ensure_table(engine)
    columns = [("table", "String"), ("unit", "String"), ("max_rows", "UInt64"), ("parts", "String"),
               ("names", "Array(String)"), ("time", "DateTime64(6, 'UTC')")]
    engine.command(insert_values(engine.table(VERIFIED_TABLE), columns,
                                 [(table, unit, max_rows, parts, names, _now())], engine.write_settings()))


def lookup(engine: Engine, table: str, unit: str, max_rows: int) -> Verification:
    """The state of ``table``'s latest verification of at most ``max_rows`` rows per ``unit``:
    the condition the emitted query checks, read once for ``dpch policy show``."""
    if not engine.table_exists(VERIFIED_TABLE):
        return Verification(recorded=False, current=False)
    parts = PARTS_SQL.replace("{max:UInt32}", str(MAX_PARTS))
    rows = engine.query_rows(
        f"SELECT count() > 0, argMax(parts, time) = ({parts}) FROM {engine.table(VERIFIED_TABLE)} "
        "WHERE table = {t:String} AND unit = {u:String} AND max_rows <= {k:UInt64}",
        {"db": engine.database, "t": table, "u": unit, "k": max_rows})
    recorded, current = (bool(v) for v in rows[0])
    return Verification(recorded=recorded, current=recorded and current)


def _now() -> datetime:
    return datetime.now(UTC)


__all__ = ["VERIFIED_TABLE", "Verification", "ensure_table", "lookup", "record"]
