"""clickhouse-client's output formats for released rows: PrettyCompact, TabSeparated (TSV),
TabSeparatedWithNames (TSVWithNames), CSV, CSVWithNames and JSONEachRow.

Written here rather than by ClickHouse (as the gateway does, :mod:`dpch.server.formats`) because
the CLI also runs where no ClickHouse engine is at hand (through a gateway, ``dpch://``, or in
the slim image without chdb). The output is byte for byte what ClickHouse 26.x writes for the
same rows with default settings; tests/cli/test_output_formats.py compares it with chdb's own
output. Known differences: PrettyCompact prints every row (ClickHouse stops at 1000), strings
holding a newline stay on one line (ClickHouse wraps them with ↴), a tab counts as one column
(ClickHouse pads to its tab stops), and the "-- 1.23 million" tip
is left out for numbers of 10^66 or more; no ANSI colours are written.

Column types are inferred from the Python values (a released column is Int64, Float64, Bool,
String, Date or DateTime, Nullable when it holds a NULL), which is all a release holds.
"""

from __future__ import annotations

import datetime as dt
import decimal
import math
import unicodedata
from collections.abc import Callable, Sequence
from typing import Any

from dpch.sql.text_form import float_text  # ClickHouse's Float64 text, checked against its toString

#: the names clickhouse-client accepts, and the canonical format each one is
ALIASES = {
    "PrettyCompact": "PrettyCompact",
    "TabSeparated": "TabSeparated", "TSV": "TabSeparated",
    "TabSeparatedWithNames": "TabSeparatedWithNames", "TSVWithNames": "TabSeparatedWithNames",
    "CSV": "CSV", "CSVWithNames": "CSVWithNames",
    "JSONEachRow": "JSONEachRow",
}

# value kinds: how a column's values are written (a ClickHouse type family each)
INT, FLOAT, BOOL, STRING, DATE, DATETIME, DECIMAL = "int", "float", "bool", "string", "date", "datetime", "decimal"
_NUMERIC = {INT, FLOAT, DECIMAL, DATE, DATETIME}  # right-aligned in Pretty formats (numbers inside ClickHouse)
_INT64_MAX = 2**63 - 1


def column_kind(values: Sequence[Any]) -> str:
    """The kind of a column from its values: ints and floats together are floats; anything
    unknown is written as a string."""
    kinds = {_kind(v) for v in values if v is not None}
    if not kinds:
        return STRING
    if kinds <= {INT, FLOAT}:
        return FLOAT if FLOAT in kinds else INT
    return kinds.pop() if len(kinds) == 1 else STRING


def _kind(v: Any) -> str:
    if isinstance(v, bool):
        return BOOL
    if isinstance(v, int):
        return INT
    if isinstance(v, float):
        return FLOAT
    if isinstance(v, decimal.Decimal):
        return DECIMAL
    if isinstance(v, dt.datetime):
        return DATETIME
    if isinstance(v, dt.date):
        return DATE
    return STRING


def clickhouse_type(values: Sequence[Any]) -> str:
    """The ClickHouse type these values are written as (for tests and the structure of a table)."""
    kind = column_kind(values)
    base = {INT: "Int64", FLOAT: "Float64", BOOL: "Bool", STRING: "String", DATE: "Date",
            DATETIME: "DateTime('UTC')", DECIMAL: "Decimal(76, 38)"}[kind]
    if kind == INT and any(isinstance(v, int) and v > _INT64_MAX for v in values if v is not None):
        base = "UInt64"
    return f"Nullable({base})" if any(v is None for v in values) else base


def _decimal_text(d: decimal.Decimal) -> str:
    text = format(d, "f")
    return text.rstrip("0").rstrip(".") if "." in text else text


def value_text(v: Any, kind: str) -> str:
    """A non-NULL value as ClickHouse writes it unquoted (TSV, Pretty)."""
    if kind == BOOL:
        return "true" if v else "false"
    if kind == FLOAT:
        return float_text(float(v))
    if kind == DECIMAL:
        return _decimal_text(v)
    if kind == DATETIME:
        return v.strftime("%Y-%m-%d %H:%M:%S")
    if kind == DATE:
        return v.isoformat()
    return str(v)


_TSV_ESCAPES = {"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r", "\0": "\\0", "\b": "\\b", "\f": "\\f",
                "'": "\\'"}
_TSV_TABLE = str.maketrans(_TSV_ESCAPES)


def tsv_text(v: Any, kind: str) -> str:
    return "\\N" if v is None else value_text(v, kind).translate(_TSV_TABLE)


def csv_text(v: Any, kind: str) -> str:
    if v is None:
        return "\\N"
    text = value_text(v, kind)
    if kind in (STRING, DATE, DATETIME):
        return '"' + text.replace('"', '""') + '"'
    return text


_JSON_ESCAPES = {'"': '\\"', "\\": "\\\\", "/": "\\/", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r",
                 "\t": "\\t", "\u2028": "\\u2028", "\u2029": "\\u2029"}
_JSON_TABLE = str.maketrans({**{chr(c): f"\\u{c:04X}" for c in range(0x20)}, **_JSON_ESCAPES})


def json_string(text: str) -> str:
    """A JSON string as ClickHouse writes it (``/`` escaped, U+2028/9 escaped, UTF-8 kept)."""
    return '"' + text.translate(_JSON_TABLE) + '"'


def json_text(v: Any, kind: str) -> str:
    if v is None:
        return "null"
    if kind == FLOAT and not math.isfinite(float(v)):
        return "null"
    if kind in (INT, FLOAT, BOOL, DECIMAL):
        return value_text(v, kind)
    return json_string(value_text(v, kind))


def _tsv(columns: Sequence[str], rows: Sequence[Sequence[Any]], kinds: list[str], names: bool) -> str:
    lines = ["\t".join(c.translate(_TSV_TABLE) for c in columns)] if names else []
    lines += ["\t".join(tsv_text(v, k) for v, k in zip(row, kinds, strict=True)) for row in rows]
    return "".join(line + "\n" for line in lines)


def _csv(columns: Sequence[str], rows: Sequence[Sequence[Any]], kinds: list[str], names: bool) -> str:
    lines = [",".join(csv_text(c, STRING) for c in columns)] if names else []
    lines += [",".join(csv_text(v, k) for v, k in zip(row, kinds, strict=True)) for row in rows]
    return "".join(line + "\n" for line in lines)


def _json_each_row(columns: Sequence[str], rows: Sequence[Sequence[Any]], kinds: list[str]) -> str:
    keys = [json_string(c) for c in columns]
    return "".join(
        "{" + ",".join(f"{key}:{json_text(v, k)}" for key, v, k in zip(keys, row, kinds, strict=True)) + "}\n"
        for row in rows)


def display_width(text: str) -> int:
    """Terminal columns of ``text``: East Asian wide characters take two, combining marks none."""
    width = 0
    for ch in text:
        if unicodedata.combining(ch):
            continue
        width += 2 if unicodedata.east_asian_width(ch) in ("W", "F") else 1
    return width


_QUANTITY_UNITS = ["", " thousand", " million", " billion", " trillion", " quadrillion", " quintillion",
                   " sextillion", " septillion", " octillion", " nonillion", " decillion", " undecillion",
                   " duodecillion", " tredecillion", " quattuordecillion", " quindecillion", " sexdecillion",
                   " septendecillion", " octodecillion", " novemdecillion", " vigintillion"]


def readable_quantity(x: float) -> str | None:
    """ClickHouse's formatReadableQuantity (``1.23 million``), or None past its last unit."""
    i = 0
    while (x >= 1000 or x <= -1000) and i + 1 < len(_QUANTITY_UNITS):
        x /= 1000
        i += 1
    if abs(x) >= 1000:
        return None
    return f"{x:.2f}{_QUANTITY_UNITS[i]}"


def _number_tip(v: Any, kind: str) -> str:
    """ClickHouse's hint after a lone large number (``output_format_pretty_single_large_number_tip_threshold``)."""
    if v is None or kind not in (INT, FLOAT) or not math.isfinite(v) or abs(v) <= 1_000_000:
        return ""
    if kind == INT and v > _INT64_MAX:  # ClickHouse shows no tip for UInt64 values past Int64
        return ""
    readable = readable_quantity(float(v))
    return f" -- {readable}" if readable is not None else ""


def _pretty_compact(columns: Sequence[str], rows: Sequence[Sequence[Any]], kinds: list[str]) -> str:
    cells = [["ᴺᵁᴸᴸ" if v is None else value_text(v, k) for v, k in zip(row, kinds, strict=True)] for row in rows]
    widths = [max([display_width(c)] + [display_width(r[j]) for r in cells]) for j, c in enumerate(columns)]
    right = [k in _NUMERIC for k in kinds]

    def pad(text: str, j: int) -> str:
        fill = " " * (widths[j] - display_width(text))
        return fill + text if right[j] else text + fill

    def border(left: str, mid: str, end: str) -> str:
        titles = []
        for j, name in enumerate(columns):
            fill = "─" * (widths[j] - display_width(name))
            titles.append(f"─{fill}{name}─" if right[j] else f"─{name}{fill}─")
        return left + mid.join(titles) + end

    number_width = len(str(len(rows)))
    indent = " " * (number_width + 2)
    tips = len(columns) == 1
    lines = [indent + border("┌", "┬", "┐")]
    for i, row in enumerate(cells, start=1):
        tip = _number_tip(rows[i - 1][0], kinds[0]) if tips else ""
        lines.append(f"{i}.".rjust(number_width + 1) + " │" + "│".join(f" {pad(c, j)} " for j, c in enumerate(row))
                     + "│" + tip)
    if len(rows) >= 50:  # output_format_pretty_display_footer_column_names(_min_rows)
        lines.append(indent + border("└", "┴", "┘"))
    else:
        lines.append(indent + "└" + "┴".join("─" * (w + 2) for w in widths) + "┘")
    return "".join(line + "\n" for line in lines)


_WRITERS: dict[str, Callable[[Sequence[str], Sequence[Sequence[Any]], list[str]], str]] = {
    "PrettyCompact": _pretty_compact,
    "TabSeparated": lambda c, r, k: _tsv(c, r, k, names=False),
    "TabSeparatedWithNames": lambda c, r, k: _tsv(c, r, k, names=True),
    "CSV": lambda c, r, k: _csv(c, r, k, names=False),
    "CSVWithNames": lambda c, r, k: _csv(c, r, k, names=True),
    "JSONEachRow": _json_each_row,
}


def write(fmt: str, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """``rows`` in the ClickHouse format ``fmt`` (a name or alias from :data:`ALIASES`); an empty
    result writes nothing (as ClickHouse does), except the names line of a ``WithNames`` format."""
    canonical = ALIASES[fmt]
    kinds = [column_kind([row[j] for row in rows]) for j in range(len(columns))]
    if not rows and canonical in ("PrettyCompact", "JSONEachRow", "TabSeparated", "CSV"):
        return ""
    return _WRITERS[canonical](columns, rows, kinds)
