"""ClickHouse's own types of row expressions, and the families the function registry checks them against.

A function may accept a type at analysis and still raise on a row's value: ``toDayOfWeek`` of a
String parses it and raises on text that is not a date, ``x + INTERVAL 1 DAY`` does the same, and a
DateTime64 column compared with an Int64 column converts every row and raises on overflow. Which
arguments are safe therefore depends on their types, and only ClickHouse knows them exactly (a
function's result type follows ClickHouse's rules for its overloads, Nullable and LowCardinality).
So dpch asks ClickHouse: each expression is rewritten with every column replaced by a
non-constant value of the column's type (``materialize(CAST(defaultValueOfTypeName(T), T))``,
non-constant so that ClickHouse resolves it as it resolves a real column: a constant would take
other paths, such as parsing a constant string once) and put in one ``DESCRIBE (SELECT …)``, which
resolves the query and computes its header without reading any table. A query ClickHouse cannot
type (no common type of String and Date, a time zone that must be constant) fails there, before
anything is charged, whatever the data (docs/design.md rule 5).

The registry (:mod:`.functions`) states per argument which :class:`Family` of types it accepts;
:func:`families` maps a ClickHouse type to its families.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Sequence

from sqlglot import exp

from dpch.errors import QueryRejected
from dpch.sql.nodes import alias, call, cast_to, pinned_settings, render

#: runs one DESCRIBE statement (reading no table) and returns (name, type) per result column; raises
#: :class:`QueryRejected` in words when ClickHouse cannot type the query
Describe = Callable[[str], list[tuple[str, str]]]


class Family(enum.Flag):
    """Kinds of ClickHouse types, as the registry's arguments accept them."""

    NUMBER = enum.auto()  # Int*, UInt*, Float*, Decimal*, Bool
    INTEGER = enum.auto()  # Int*, UInt*, Bool
    STRING = enum.auto()  # String, FixedString
    DATE = enum.auto()  # Date, Date32, DateTime, DateTime64
    TIME = enum.auto()  # DateTime, DateTime64: a time of day
    INTERVAL = enum.auto()  # IntervalDay, …
    OTHER = enum.auto()  # Enum, UUID, IP addresses, arrays, tuples, maps, …
    ANY = NUMBER | INTEGER | STRING | DATE | TIME | INTERVAL | OTHER


#: how each family is named in messages and in the docs' table
FAMILY_WORDS = {
    Family.NUMBER: "a number", Family.INTEGER: "a whole number", Family.STRING: "a string",
    Family.DATE: "a date or time", Family.TIME: "a date with a time of day (DateTime or DateTime64)",
    Family.INTERVAL: "an INTERVAL", Family.OTHER: "a value",
}


def describe_family(family: Family) -> str:
    """``family`` in words, e.g. 'a number or a string'."""
    if family == Family.ANY:
        return "any value"
    if Family.INTEGER in family and Family.NUMBER not in family:
        parts = [FAMILY_WORDS[Family.INTEGER]]
    else:
        parts = []
    for member in (Family.NUMBER, Family.STRING, Family.DATE, Family.INTERVAL, Family.OTHER):
        if member in family:
            parts.append(FAMILY_WORDS[member])
    if Family.TIME in family and Family.DATE not in family:
        parts.append(FAMILY_WORDS[Family.TIME])
    return " or ".join(parts)


def unwrap(type_: str) -> str:
    """``type_`` without Nullable(…) and LowCardinality(…) around it."""
    inner = type_.strip()
    while True:
        for wrapper in ("Nullable(", "LowCardinality("):
            if inner.startswith(wrapper) and inner.endswith(")"):
                inner = inner[len(wrapper):-1].strip()
                break
        else:
            return inner


def families(type_: str) -> Family:
    """The families a value of ClickHouse type ``type_`` belongs to (NULL, ``Nothing``, to all)."""
    base = unwrap(type_)
    if base == "Nothing":
        return Family.ANY
    if base.startswith("Interval"):  # before Int…: IntervalDay is not an integer
        return Family.INTERVAL
    if base == "Bool" or base.startswith(("Int", "UInt")):
        return Family.NUMBER | Family.INTEGER
    if base.startswith(("Float", "Decimal", "BFloat16")):
        return Family.NUMBER
    if base == "String" or base.startswith("FixedString("):
        return Family.STRING
    if base in ("Date", "Date32"):
        return Family.DATE
    if base.startswith("DateTime"):
        return Family.DATE | Family.TIME
    return Family.OTHER


def is_datetime64(type_: str) -> bool:
    return unwrap(type_).startswith("DateTime64")


def is_nullable(type_: str) -> bool:
    return type_.replace("LowCardinality(", "").startswith("Nullable(")


def placeholder(type_: str) -> exp.Expr:
    """A non-constant value of ``type_`` (its default), for typing an expression without a table."""
    return call("materialize", cast_to(call("defaultValueOfTypeName", exp.Literal.string(type_)), type_))


class ExpressionTypes:
    """Types row expressions with ClickHouse (one ``DESCRIBE`` per batch, remembered by its text).

    ``describe`` is None where no database is at hand: then only what :func:`static_type` can tell
    is known, and :meth:`types` refuses a query that needs more.
    """

    #: batches remembered (the texts are the typed expressions, so the memory is per query shape)
    MEMORY = 4096

    def __init__(self, describe: Describe | None) -> None:
        self.describe = describe
        self._known: dict[str, str] = {}

    def types(self, nodes: Sequence[exp.Expr]) -> list[str]:
        """ClickHouse's type of each of ``nodes``: expressions whose columns have been replaced by
        :func:`placeholder` values (so they read no table)."""
        texts = [render(n) for n in nodes]
        missing = list(dict.fromkeys(t for t in texts if t not in self._known))
        if missing:
            if self.describe is None:
                raise QueryRejected("this query needs the database to check its types",
                                    hint="run it through a session connected to ClickHouse")
            select = exp.Select(expressions=[alias(n, f"_{i}") for i, n in enumerate(
                [nodes[texts.index(t)] for t in missing])])
            select.set("settings", pinned_settings())  # the settings the emitted query runs under
            found = self.describe(render(exp.Describe(this=exp.Subquery(this=select))))
            if len(self._known) > self.MEMORY:
                self._known.clear()
            for text, (_, type_) in zip(missing, found, strict=True):
                self._known[text] = type_
        return [self._known[t] for t in texts]


def static_type(node: exp.Expr) -> str | None:
    """The ClickHouse type of a literal, known without asking (None: ask ClickHouse)."""
    while isinstance(node, exp.Paren):
        node = node.this
    if isinstance(node, exp.Null):
        return "Nullable(Nothing)"
    if isinstance(node, exp.Boolean):
        return "Bool"
    if isinstance(node, exp.Literal):
        if node.is_string:
            return "String"
        return "Float64" if not node.this.lstrip("-").isdigit() else None  # integers: ClickHouse's width
    return None


def is_constant_expression(node: exp.Expr) -> bool:
    """No column anywhere inside: ClickHouse evaluates it once, at analysis, whatever the rows."""
    return node.find(exp.Column) is None


__all__ = ["Describe", "ExpressionTypes", "FAMILY_WORDS", "Family", "describe_family", "families",
           "is_constant_expression", "is_datetime64", "is_nullable", "placeholder", "static_type", "unwrap"]
