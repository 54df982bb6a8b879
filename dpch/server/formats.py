"""Output formats of the ClickHouse HTTP interface, serialised by ClickHouse itself.

Rows that dpch released (or public metadata it built) are fed back through the engine with
``SELECT * FROM format(JSONEachRow, 'structure', 'rows') FORMAT X``, so every format is byte
for byte what ClickHouse would send (docs/design.md measured ≈ 2–3 ms). No hand-written encoders.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from typing import Any

from sqlglot import exp

from dpch.sql.parse import DIALECT
from dpch.store.engine import Engine
from dpch.store.quoting import quote_identifier, quote_string

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


def rows_source(columns: Sequence[str], types: Sequence[str], rows: Sequence[Sequence[Any]]) -> exp.Table:
    """A ``format(JSONEachRow, ...)`` table function holding ``rows``, as a sqlglot tree for FROM
    (rendered once with the rest of the query: its literals can never mix with other SQL text).
    A name that ``columns`` repeats is held once (see :func:`select_rows`)."""
    columns, types, rows = _distinct_names(columns, types, rows)
    data = "\n".join(
        json.dumps({c: _json_value(v) for c, v in zip(columns, row, strict=True)}, ensure_ascii=False)
        for row in rows
    )
    function = exp.Anonymous(this="format", expressions=[
        exp.column("JSONEachRow"), exp.Literal.string(structure(columns, types)), exp.Literal.string(data)])
    return exp.Table(this=function)


def _distinct_names(columns: Sequence[str], types: Sequence[str], rows: Sequence[Sequence[Any]]
                    ) -> tuple[list[str], list[str], list[tuple[Any, ...]]]:
    """``columns`` with each name once. A release repeats a name only for one expression repeated
    (:mod:`dpch.sql.analyze` refuses two expressions under one name, as ClickHouse does), so the
    repeated columns hold equal values; anything else is a bug, refused rather than dropped."""
    first: dict[str, int] = {}
    for j, name in enumerate(columns):
        first.setdefault(name, j)
    if len(first) == len(columns):
        return list(columns), list(types), [tuple(r) for r in rows]
    keep = list(first.values())
    for row in rows:
        for j, name in enumerate(columns):
            if _json_value(row[j]) != _json_value(row[first[name]]):
                raise ValueError(f"two result columns named {name} hold different values")
    return ([columns[j] for j in keep], [types[j] for j in keep],
            [tuple(row[j] for j in keep) for row in rows])


def with_settings(tree: exp.Query, settings: dict[str, str]) -> exp.Query:
    """``tree`` with ``SETTINGS name = 'value', ...`` (a UNION is wrapped first, so the settings
    apply to the whole query and not to its last SELECT)."""
    if not settings:
        return tree
    if not isinstance(tree, exp.Select):
        tree = exp.select("*").from_(tree.subquery("_dpch_union"))
    tree.set("settings", [exp.EQ(this=exp.column(k), expression=exp.Literal.string(v)) for k, v in settings.items()])
    return tree


def select_rows(columns: Sequence[str], types: Sequence[str], rows: Sequence[Sequence[Any]],
                settings: dict[str, str]) -> str:
    """``SELECT * FROM format(JSONEachRow, ...) SETTINGS ...`` over ``rows``, rendered once.

    Columns may share a name as in ClickHouse (``SELECT count(), count()``): the query lists them
    by name, ``SELECT n, n``, over a source that holds the name once."""
    names: list[exp.Expr] = [exp.Star()]
    if len(set(columns)) != len(columns):
        names = [exp.column(exp.to_identifier(c, quoted=True)) for c in columns]
    query = exp.select(*names).from_(rows_source(columns, types, rows))
    return with_settings(query, {"input_format_parallel_parsing": "0", **settings}).sql(dialect=DIALECT)


def serialize(engine: Engine, fmt: str, columns: Sequence[str], types: Sequence[str],
              rows: Sequence[Sequence[Any]]) -> bytes:
    """``rows`` in ClickHouse format ``fmt``, as ClickHouse itself writes them."""
    return engine.raw_query(select_rows(columns, types, rows, {}), fmt)
