"""The release store's table: released buckets, kept beside the ledger (issue 28, part 1).

One row per (analyst, shape, bucket) release: the bucket's released rows and intervals as JSON, whether
the bucket was final when released, and until when an open one may be re-served. Rows are only ever
appended; a read takes each bucket's newest row (a final one before any open one). The table holds
released values only — noisy statistics, their intervals and the public bucket keys — never a row of an
analyst's table, and :mod:`dpch.pipeline.bucket_store` reads it for the analyst who released them only.
"""

from __future__ import annotations

import json
import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, datetime
from decimal import Decimal
from typing import Any
from uuid import UUID

from dpch.store.engine import Engine

STORE_TABLE = "dpch_release_store"

_COLUMNS = ("analyst String, shape String, bucket String, final UInt8, boundary String, version UInt64,"
            " release_id String, rows String")

_created: weakref.WeakKeyDictionary[Engine, bool] = weakref.WeakKeyDictionary()
_lock = threading.Lock()
_last_version = 0


@dataclass(frozen=True)
class StoredBucket:
    """One bucket's release: its rows (each with its intervals), and whether it is final."""

    bucket: str
    rows: list[tuple[Any, ...]]
    intervals: list[list[tuple[float, float] | None]]
    final: bool
    #: for an open bucket, the first bucket that was not final when it was released (its release is
    #: re-served while that is still so, :func:`read`); for a final one, ""
    boundary: str
    release_id: str


def bucket_text(value: Any) -> str:
    """The store's key of a bucket value (its JSON form: a date and a time never collide)."""
    return json.dumps(_encode(value))


def _encode(value: Any) -> Any:
    if isinstance(value, datetime):
        return {"datetime": value.isoformat()}
    if isinstance(value, date):
        return {"date": value.isoformat()}
    if isinstance(value, Decimal):
        return {"decimal": str(value)}
    if isinstance(value, UUID):
        return {"uuid": str(value)}
    if isinstance(value, tuple | list):
        return {"tuple": [_encode(v) for v in value]}
    if isinstance(value, bytes):
        return {"bytes": value.hex()}
    return value


_DECODERS: dict[str, Callable[[str], Any]] = {"datetime": datetime.fromisoformat, "date": date.fromisoformat,
                                              "decimal": Decimal, "uuid": UUID, "bytes": bytes.fromhex}


def _decode(value: Any) -> Any:
    if isinstance(value, dict):
        (kind, inner), = value.items()
        if kind == "tuple":
            return tuple(_decode(v) for v in inner)
        return _DECODERS[kind](inner)
    return value


def _table(engine: Engine) -> None:
    with _lock:
        if _created.get(engine):
            return
        engine.create_table(STORE_TABLE, _COLUMNS, "ORDER BY (analyst, shape, bucket) COMMENT 'dpch: the release "
                            "store: each released bucket of a bucketed query, per analyst (append-only)'")
        _created[engine] = True


def _next_version() -> int:
    """Increasing in this process (nanoseconds since the epoch, or one more than the last)."""
    global _last_version
    with _lock:
        _last_version = max(_last_version + 1, time.time_ns())
        return _last_version


def read(engine: Engine, analyst: str, shape: str, buckets: list[str], boundary: str) -> dict[str, StoredBucket]:
    """The stored buckets among ``buckets`` that may be re-served now: each one's final release, else its
    newest open release made while ``boundary`` (the first bucket not final now) was already the first
    not final — i.e. no bucket has become final since."""
    _table(engine)
    if not buckets:
        return {}
    found = engine.query_rows(
        f"SELECT bucket, argMax(tuple(rows, final, boundary, release_id), (final, version)) "
        f"FROM {engine.table(STORE_TABLE)} WHERE analyst = {{a:String}} AND shape = {{s:String}} "
        f"AND bucket IN {{b:Array(String)}} AND (final = 1 OR boundary = {{now:String}}) GROUP BY bucket",
        {"a": analyst, "s": shape, "b": buckets, "now": boundary})
    stored = {}
    for bucket, (rows_json, final, first_open, release_id) in found:
        data = json.loads(rows_json)
        stored[bucket] = StoredBucket(
            bucket, [tuple(_decode(v) for v in r) for r in data["rows"]],
            [[(iv[0], iv[1]) if iv is not None else None for iv in ivs] for ivs in data["intervals"]],
            bool(final), first_open, release_id)
    return stored


def write(engine: Engine, analyst: str, shape: str, buckets: list[StoredBucket]) -> None:
    """Appends the buckets of one release (one INSERT: all or none)."""
    _table(engine)
    version = _next_version()
    engine.insert(STORE_TABLE, [
        [analyst, shape, b.bucket, int(b.final), b.boundary, version, b.release_id,
         json.dumps({"rows": [[_encode(v) for v in r] for r in b.rows],
                     "intervals": [[list(iv) if iv is not None else None for iv in ivs] for ivs in b.intervals]})]
        for b in buckets], ["analyst", "shape", "bucket", "final", "boundary", "version", "release_id", "rows"])


def size(engine: Engine) -> tuple[int, int]:
    """Rows and bytes on disk of the store (for its sizing, docs/serving.md): (0, 0) before its first write."""
    rows = engine.query_rows(
        "SELECT sum(rows), sum(bytes_on_disk) FROM system.parts WHERE database = {d:String} AND table = {t:String} "
        "AND active", {"d": engine.database, "t": STORE_TABLE})
    return int(rows[0][0] or 0), int(rows[0][1] or 0)


__all__ = ["STORE_TABLE", "StoredBucket", "bucket_text", "read", "size", "write"]
