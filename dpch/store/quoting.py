"""Quoting: ClickHouse identifiers and literals as SQL text, in one place.

dpch renders SQL text itself only for what it owns (DDL, metadata, the ledger's rows), never for an
analyst's SQL (docs/design.md rule 4). Every literal is rendered by the table :data:`RENDERERS`,
keyed by the ClickHouse type of the column it goes into, so a value can only be written as what its
column holds: a string is always a quoted, escaped literal, a Float64 always its exact decimal.

The ledger writes its rows as literal ``INSERT … VALUES (…), (…)`` text (:func:`insert_values`):
measured at about half the time of ``INSERT … SELECT {params}`` for one row, equally crash-safe,
and several releases' rows share one statement (group commit, :mod:`dpch.accounting.commit`).

Exactness (tested by round trips through chdb, tests/store/test_quoting.py):

- Float64 is written as ``repr``, the shortest decimal that reads back as the same double; NaN and
  ±inf are refused (a privacy cost is a finite number; ClickHouse's own ``nan``/``inf`` literals
  are not needed).
- Strings escape backslash and quote, and every control character as ``\\xHH``, so a literal is
  one line of printable text whatever it holds (NUL, newline, …); text that is not valid Unicode
  (a lone surrogate) is refused, since it has no UTF-8 form to send.
- DateTime64(6, 'UTC') takes an aware datetime (converted to UTC) or a naive one read as UTC (what
  clickhouse-connect returns for a UTC column), to the microsecond.
"""

from __future__ import annotations

import math
import numbers
import re
import uuid
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime
from typing import Any

#: control characters (C0 and DEL) are written as \xHH escapes
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def quote_identifier(name: str) -> str:
    """Backtick-quotes a ClickHouse identifier (database, table or column name)."""
    return "`" + name.replace("\\", "\\\\").replace("`", "\\`") + "`"


def quote_string(text: str) -> str:
    """A ClickHouse string literal (backslash escapes) for ``text``; raises ValueError for text
    with no UTF-8 form (a lone surrogate)."""
    if not isinstance(text, str):
        raise TypeError(f"a String literal needs str, not {type(text).__name__}")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("text that is not valid Unicode cannot be written to ClickHouse") from None
    escaped = text.replace("\\", "\\\\").replace("'", "\\'")
    return "'" + _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02X}", escaped) + "'"


def _float64(value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"a Float64 literal needs a number, not {type(value).__name__}")
    try:
        number = float(value)
    except OverflowError:
        raise ValueError(f"{value} is beyond the range of a Float64") from None
    if isinstance(value, numbers.Integral) and number != value:
        raise ValueError(f"the integer {value} is not exactly a Float64")
    if not math.isfinite(number):
        raise ValueError("a Float64 ledger value must be finite (NaN and infinities are refused)")
    return repr(number)  # the shortest decimal that parses back to the same double


def _nullable_float64(value: Any) -> str:
    return "NULL" if value is None else _float64(value)


def _uint8(value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 255:
        raise ValueError(f"a UInt8 literal needs an int in [0, 255], not {value!r}")
    return str(value)


def _uint64(value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 2**64:
        raise ValueError(f"a UInt64 literal needs an int in [0, 2^64), not {value!r}")
    return str(value)


def _bool(value: Any) -> str:
    if not isinstance(value, bool):
        raise TypeError(f"a Bool literal needs a bool, not {type(value).__name__}")
    return "true" if value else "false"


def _uuid(value: Any) -> str:
    # parsed, so only a UUID's canonical text is ever written
    return quote_string(str(value if isinstance(value, uuid.UUID) else uuid.UUID(str(value))))


def _datetime64_6_utc(value: Any) -> str:
    if not isinstance(value, datetime):
        raise TypeError(f"a DateTime64 literal needs a datetime, not {type(value).__name__}")
    if value.tzinfo is not None:
        value = value.astimezone(UTC)
    return quote_string(value.strftime("%Y-%m-%d %H:%M:%S.%f"))


def _array_string(value: Any) -> str:
    if isinstance(value, str) or not isinstance(value, (list, tuple)):
        raise TypeError(f"an Array(String) literal needs a list of str, not {type(value).__name__}")
    return "[" + ", ".join(quote_string(item) for item in value) + "]"


#: ClickHouse column type → renderer of a Python value as that type's literal
RENDERERS: dict[str, Callable[[Any], str]] = {
    "UUID": _uuid,
    "UInt8": _uint8,
    "UInt64": _uint64,
    "DateTime64(6, 'UTC')": _datetime64_6_utc,
    "String": quote_string,
    "LowCardinality(String)": quote_string,
    "Float64": _float64,
    "Nullable(Float64)": _nullable_float64,
    "Bool": _bool,
    "Array(String)": _array_string,
}


def literal(value: Any, type_name: str) -> str:
    """``value`` as a literal of the ClickHouse type ``type_name`` (one of :data:`RENDERERS`)."""
    return _renderer(type_name)(value)


def values_tuple(columns: Sequence[tuple[str, str]], row: Sequence[Any]) -> str:
    """One row of a VALUES clause, ``(…)``: ``row``'s values rendered as ``columns``' types, in order."""
    if len(row) != len(columns):
        raise ValueError(f"a row has {len(row)} values for {len(columns)} columns")
    return "(" + ", ".join(_renderer(type_name)(v) for (_, type_name), v in zip(columns, row, strict=True)) + ")"


def insert_statement(table: str, columns: Sequence[tuple[str, str]], tuples: Sequence[str], settings: str = "") -> str:
    """``INSERT INTO table (cols) [SETTINGS …] VALUES t1, t2, …`` from rows already rendered by
    :func:`values_tuple` (``settings``: dpch's own, e.g. :meth:`~dpch.store.engine.Engine.write_settings`)."""
    if not tuples:
        raise ValueError("an INSERT needs at least one row")
    names = ", ".join(quote_identifier(name) for name, _ in columns)
    clause = f" SETTINGS {settings}" if settings else ""
    return f"INSERT INTO {table} ({names}){clause} VALUES " + ", ".join(tuples)


def insert_values(table: str, columns: Sequence[tuple[str, str]], rows: Iterable[Sequence[Any]],
                  settings: str = "") -> str:
    """``INSERT INTO table (cols) VALUES (…), (…)``: ``table`` already qualified and quoted,
    ``columns`` (name, ClickHouse type) pairs, each row's values in that order. One statement:
    ClickHouse writes it as one part, all rows or none."""
    return insert_statement(table, columns, [values_tuple(columns, row) for row in rows], settings)


def _renderer(type_name: str) -> Callable[[Any], str]:
    render = RENDERERS.get(type_name)
    if render is None:
        raise ValueError(f"no literal renderer for ClickHouse type {type_name}")
    return render
