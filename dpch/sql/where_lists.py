"""The constant lists WHERE limits a column to: ``col IN ('a', 'b')`` and ``col = 'a'`` (issue 28).

A grouped query that filters its key to listed values (``WHERE occupation IN ('nurse', 'cook') GROUP BY
occupation``, and Superset's series limit, answered by listing the keys the top-N release chose) asks
for those groups only. The list is a constant of the query, so it is public: a key's domain may be
narrowed to it (the declared values that are listed; for a key with no public domain, the list itself,
which needs no partition selection). Both are independent of the data, so releasing every listed group,
empty or not, is the usual release of a public domain: thresholding is what a key set read from the data
needs (Wilson et al. 2020, §3), and this one is fixed by the query's text. The rows of other values are
removed by the WHERE itself (and by the key's own ``IN`` filter), so a unit's rows reach listed groups
only, and the sensitivity counts those.

Only limits every row must meet are read: the conjuncts of WHERE's top-level AND (a list under OR or NOT
limits nothing), with string or integer literals (the values a String or integer key shows as they are
written; a float, a Decimal or a date would be shown converted, so those keys keep their domain).
"""

from __future__ import annotations

from collections.abc import Callable

from sqlglot import exp

from dpch.sql.nodes import conjuncts

#: a listed value: a string, or an integer
Listed = str | int


def literal_value(node: exp.Expr) -> Listed | None:
    """A string literal's text or an integer literal's value (``-3`` included); None for anything else."""
    negative = isinstance(node, exp.Neg)
    if negative:
        node = node.this
    if not isinstance(node, exp.Literal):
        return None
    if node.is_string:
        return None if negative else str(node.this)
    text = str(node.this)
    if not text.isdigit():
        return None  # a float, an exponent, a hexadecimal: not listed
    return -int(text) if negative else int(text)


def _listed(values: list[exp.Expr]) -> tuple[Listed, ...] | None:
    found = [literal_value(v) for v in values]
    if any(v is None for v in found):
        return None
    return tuple(dict.fromkeys(v for v in found if v is not None))


def where_lists(where: exp.Expr | None, identity: Callable[[exp.Column], str | None]) -> dict[str, tuple[Listed, ...]]:
    """The values each column is limited to by ``where``'s top-level AND, keyed by ``identity(column)``; a
    column limited twice keeps the values both allow (in the first list's order)."""
    found: dict[str, tuple[Listed, ...]] = {}

    def add(side: exp.Expr, values: tuple[Listed, ...] | None) -> None:
        while isinstance(side, exp.Paren):
            side = side.this
        if values is None or not isinstance(side, exp.Column):
            return
        key = identity(side)
        if key is None:
            return
        before = found.get(key)
        found[key] = values if before is None else tuple(v for v in before if v in values)

    for part in conjuncts(where):
        if isinstance(part, exp.In) and not part.args.get("query") and not part.args.get("unnest"):
            add(part.this, _listed(list(part.expressions)))
        elif isinstance(part, exp.EQ):
            add(part.this, _listed([part.expression]))
            add(part.expression, _listed([part.this]))
    return found


__all__ = ["Listed", "literal_value", "where_lists"]
