"""Output formats of the ClickHouse HTTP interface, serialised by ClickHouse itself.

Rows that dpch released (or public metadata it built) are fed back through the engine with
``SELECT * FROM format(JSONEachRow, 'structure', 'rows') FORMAT X``, so every format is byte
for byte what ClickHouse would send (DESIGN.md measured ≈ 2–3 ms). No hand-written encoders.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from typing import Any

from dpch.engine import Engine, quote_identifier, quote_string

#: canonical name of each accepted format (ClickHouse format names are case-sensitive)
_CANONICAL = {
    "TabSeparated": "TabSeparated", "TSV": "TabSeparated",
    "TabSeparatedWithNames": "TabSeparatedWithNames", "TSVWithNames": "TabSeparatedWithNames",
    "TabSeparatedWithNamesAndTypes": "TabSeparatedWithNamesAndTypes",
    "TSVWithNamesAndTypes": "TabSeparatedWithNamesAndTypes",
    "TabSeparatedRaw": "TabSeparatedRaw", "TSVRaw": "TabSeparatedRaw",
    "CSV": "CSV", "CSVWithNames": "CSVWithNames", "CSVWithNamesAndTypes": "CSVWithNamesAndTypes",
    "JSON": "JSON", "JSONCompact": "JSONCompact", "JSONEachRow": "JSONEachRow",
    "JSONCompactEachRow": "JSONCompactEachRow", "JSONStrings": "JSONStrings",
    "Native": "Native", "RowBinary": "RowBinary", "RowBinaryWithNamesAndTypes": "RowBinaryWithNamesAndTypes",
    "Arrow": "Arrow", "ArrowStream": "ArrowStream", "Parquet": "Parquet",
    "Pretty": "Pretty", "PrettyCompact": "PrettyCompact", "Vertical": "Vertical", "Null": "Null",
}

_CONTENT_TYPES = {
    "TabSeparated": "text/tab-separated-values; charset=UTF-8",
    "CSV": "text/csv; charset=UTF-8",
    "JSON": "application/json; charset=UTF-8",
    "Pretty": "text/plain; charset=UTF-8",
    "Vertical": "text/plain; charset=UTF-8",
}

FORMATS = tuple(sorted(set(_CANONICAL.values())))

_FORMAT_CLAUSE = re.compile(
    r"\s+FORMAT\s+([A-Za-z][A-Za-z0-9_]*)\s*(SETTINGS\s+.*?)?\s*;?\s*$", re.IGNORECASE | re.DOTALL
)


def canonical_format(name: str) -> str | None:
    """The accepted format called ``name`` (exact ClickHouse spelling), or None."""
    return _CANONICAL.get(name)


def content_type(fmt: str, *, with_header: bool = False) -> str:
    for prefix, ctype in _CONTENT_TYPES.items():
        if fmt.startswith(prefix):
            if prefix == "CSV":
                return f"{ctype}; header={'present' if 'WithNames' in fmt else 'absent'}"
            return ctype
    return "application/octet-stream"


def split_format(sql: str) -> tuple[str, str | None]:
    """Splits a trailing ``FORMAT X [SETTINGS ...]`` clause off ``sql`` (keeping the settings)."""
    match = _FORMAT_CLAUSE.search(sql)
    if match is None:
        return sql, None
    rest = sql[: match.start()]
    if match.group(2):
        rest = f"{rest} {match.group(2)}"
    return rest, match.group(1)


string_literal = quote_string


def structure(columns: Sequence[str], types: Sequence[str]) -> str:
    return ", ".join(f"{quote_identifier(c)} {t}" for c, t in zip(columns, types, strict=True))


def _json_value(v: Any) -> Any:
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if v is None or isinstance(v, bool | int | float | str):
        return v
    if isinstance(v, list | tuple):
        return [_json_value(x) for x in v]
    return str(v)


def rows_table(columns: Sequence[str], types: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A ``format(JSONEachRow, ...)`` table function holding ``rows`` (for use in FROM)."""
    data = "\n".join(
        json.dumps({c: _json_value(v) for c, v in zip(columns, row, strict=True)}, ensure_ascii=False)
        for row in rows
    )
    return f"format(JSONEachRow, {string_literal(structure(columns, types))}, {string_literal(data)})"


def serialize(engine: Engine, fmt: str, columns: Sequence[str], types: Sequence[str],
              rows: Sequence[Sequence[Any]]) -> bytes:
    """``rows`` in ClickHouse format ``fmt``, as ClickHouse itself writes them."""
    sql = f"SELECT * FROM {rows_table(columns, types, rows)} SETTINGS input_format_parallel_parsing = 0"
    return engine.raw_query(sql, fmt)
