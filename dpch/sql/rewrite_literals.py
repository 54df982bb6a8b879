"""SQL literals for values dpch itself places in emitted SQL (declared keys, bounds)."""

from __future__ import annotations

from datetime import date, datetime

from sqlglot import exp

from dpch.sql.parse import DIALECT


def literal(value: object) -> str:
    """A ClickHouse literal for a declared key value (strings escaped by sqlglot)."""
    if isinstance(value, datetime | date):
        return exp.convert(value.isoformat(sep=" ") if isinstance(value, datetime) else value.isoformat()).sql(
            dialect=DIALECT)
    return exp.convert(value).sql(dialect=DIALECT)
