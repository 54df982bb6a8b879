"""Select aliases that reuse a column's name: read them as ClickHouse does, or refuse.

In ClickHouse (``prefer_column_name_to_alias = 0``, the default) a select alias wins over a
column of the same name *everywhere* in its SELECT: in WHERE, GROUP BY, HAVING, ORDER BY, JOIN
ON and inside other aggregates (``SELECT sum(spend) AS spend … HAVING spend > 3`` filters on
the sum; ``SELECT age * 2 AS age … WHERE age > 50`` filters on ``age * 2``). Only the alias's
own definition and a qualified name (``v.age``) read the column.

Names are compared case-insensitively here, because dpch resolves a column name that way when no
exact match exists: ``AGE`` could mean the column ``age`` to dpch and the alias ``AGE`` to
ClickHouse, so it counts as shadowing too.

dpch reads a bare GROUP BY item and a HAVING/ORDER BY reference outside an aggregate as the
alias (:mod:`.analyze`), as ClickHouse does. Any other unqualified use of such a name is
refused as ambiguous (:func:`check_shadowing`), so the query never gets a third meaning.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from sqlglot import exp

from dpch.errors import QueryRejected
from dpch.sql.aggregates import is_aggregate
from dpch.sql.nodes import is_within
from dpch.sql.parse import DIALECT

#: clauses of a SELECT whose column references belong to that SELECT (not to a subquery in FROM)
_OWN_CLAUSES = ("expressions", "where", "group", "having", "order", "joins")


def shadowing_aliases(select: exp.Select, columns: Iterable[str]) -> dict[str, exp.Alias]:
    """Select items whose alias is also the name of a column of the query's tables.

    ``t.x AS x`` is left out: there the alias and the column are the same value.
    """
    names = {name.lower() for name in columns}
    result: dict[str, exp.Alias] = {}
    for item in select.expressions:
        if isinstance(item, exp.Alias) and item.alias.lower() in names:
            if isinstance(item.this, exp.Column) and item.this.name.lower() == item.alias.lower():
                continue
            result[item.alias.lower()] = item
    return result


def check_shadowing(select: exp.Select, columns: Iterable[str]) -> None:
    """Refuses an unqualified use of a shadowed column name that dpch would not read as the alias."""
    shadows = shadowing_aliases(select, columns)
    if not shadows:
        return
    as_alias: set[int] = set()  # ids of the Column nodes dpch reads as the alias, like ClickHouse
    group = select.args.get("group")
    for item in group.expressions if group is not None else []:
        if isinstance(item, exp.Column):
            as_alias.add(id(item))
    for clause in ("having", "order"):
        node = select.args.get(clause)
        if node is None:
            continue
        for col in node.find_all(exp.Column):
            if not _inside_aggregate(col, node):
                as_alias.add(id(col))
    for col in _own_columns(select):
        alias = shadows.get(col.name.lower())
        if col.table or alias is None or (id(col) in as_alias and col.name == alias.alias):
            continue
        if is_within(col, alias):
            continue  # its own definition reads the column, in ClickHouse too
        raise QueryRejected(
            f"{col.name} is both a column and the alias of {alias.this.sql(DIALECT)} in this query: ClickHouse "
            f"would read {col.name} here as that alias",
            hint=f"give the alias another name (e.g. AS {col.name}_2), or qualify the column (table.{col.name})")


def resolve_where_aliases(select: exp.Select, columns: Iterable[str]) -> dict[str, exp.Expr]:
    """Reads a WHERE reference to a select alias as ClickHouse does: ``SELECT toStartOfDay(ts) AS time …
    WHERE time >= …`` filters on ``toStartOfDay(ts)`` (Grafana's query builder writes its time filter on its
    SELECT alias). Each unqualified name in the SELECT's own WHERE that names no column of the query's
    tables but an alias of the select list becomes a copy of the aliased expression (in place), which the
    analysis then checks like any other condition: an alias of an aggregate is refused there as an
    aggregate in WHERE, as ClickHouse refuses it. A name that is a column stays the column
    (:func:`check_shadowing` refuses an alias that shadows one). Returns the aliases read so, by name, so
    that a refusal of the condition can say which alias it came from."""
    where = select.args.get("where")
    resolved: dict[str, exp.Expr] = {}
    if where is None:
        return resolved
    names = {name.lower() for name in columns}
    aliases = {item.alias: item.this for item in select.expressions if isinstance(item, exp.Alias)}
    for col in list(where.find_all(exp.Column)):
        if col.table or col.name.lower() in names or col.name not in aliases:
            continue
        if col.find_ancestor(exp.Select, exp.Subquery) is not select:
            continue  # a subquery's own name
        definition = aliases[col.name]
        resolved[col.name] = definition
        if col is where.this:
            where.set("this", definition.copy())
        else:
            col.replace(exp.Paren(this=definition.copy()))
    return resolved


def _own_columns(select: exp.Select) -> Iterator[exp.Column]:
    for clause in _OWN_CLAUSES:
        value = select.args.get(clause)
        for node in value if isinstance(value, list) else [value]:
            if isinstance(node, exp.Join):
                node = node.args.get("on")
            if not isinstance(node, exp.Expression):
                continue
            for col in node.find_all(exp.Column):
                if col.find_ancestor(exp.Select, exp.Subquery) is select or isinstance(node, exp.Column):
                    yield col


def _inside_aggregate(node: exp.Expr, top: exp.Expr) -> bool:
    parent = node.parent
    while parent is not None and parent is not top:
        if is_aggregate(parent):
            return True
        parent = parent.parent
    return False



__all__ = ["check_shadowing", "resolve_where_aliases", "shadowing_aliases"]
