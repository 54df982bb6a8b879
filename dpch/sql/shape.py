"""The shape of an emitted query: what decides whether it can run, with the values that cannot.

A probe (:func:`dpch.sql.rewrite.emit_probe_sqls`) runs the emitted tree on a synthetic row before
the charge, so that a query ClickHouse cannot run is refused for free (docs/design.md rule 5).
Whether ClickHouse can run a query depends on its structure, the types of its values, and the
values of the *constant arguments* it compiles (regex and LIKE patterns, rounding places, week
modes, units: the registry's ``constant`` entries, :mod:`dpch.sql.functions`). A number anywhere
else changes only the result, never whether the query runs — comparisons, arithmetic and every
registry function are total — so two queries that differ only there pass or fail their probes
together, and the probe cache is keyed by the shape: ``WHERE age > 40`` and ``WHERE age > 41``
probe once.

Only numbers are abstracted, each to its ClickHouse literal type (an integer to the narrowest
UInt/Int of its magnitude, anything else to Float64), so a value that changes the type still
changes the shape. Strings are kept: a string compared with a Date, DateTime or Enum column must
parse as one, so its value can decide whether the query runs.
"""

from __future__ import annotations

from sqlglot import exp
from sqlglot.dialects.clickhouse import ClickHouse
from sqlglot.generators.clickhouse import ClickHouseGenerator

from dpch.sql.functions import is_constant_argument

_WIDTHS = (8, 16, 32, 64, 128, 256)


def literal_type(text: str, negative: bool = False) -> str:
    """ClickHouse's type for a numeric literal's text (``negative``: it is under a minus sign)."""
    try:
        value = int(text)
    except ValueError:
        return "Float64"
    bits = value.bit_length() + (1 if negative else 0)
    width = next((w for w in _WIDTHS if bits <= w), 0)
    if not width:
        return "Float64"
    return f"{'Int' if negative else 'UInt'}{width}"


class _Shape(ClickHouse):
    """ClickHouse rendering with numbers outside constant arguments written as ``{number:Type}``
    (rendered without copying the tree; the text is a cache key, never run)."""

    class Generator(ClickHouseGenerator):
        def literal_sql(self, expression: exp.Literal) -> str:
            if expression.is_string or is_constant_argument(expression):
                return str(super().literal_sql(expression))
            negative = isinstance(expression.parent, exp.Neg)
            return f"{{number:{literal_type(expression.name, negative)}}}"


def probe_shape(tree: exp.Expr) -> str:
    """``tree`` rendered with every number outside a constant argument replaced by its type."""
    return str(tree.sql(dialect=_Shape))


__all__ = ["literal_type", "probe_shape"]
