"""A query that only post-processes one aggregate, as the one aggregate it is (issue 28, part 2).

BI tools wrap an aggregate in an outer SELECT that filters, orders, limits or computes on its output
columns — ibis's ``t.group_by(...).aggregate(...).order_by(...)`` sends ``SELECT * FROM (<aggregate>)
ORDER BY …``; Metabase's nested questions ``SELECT source.x … FROM (<aggregate>) AS source LIMIT 2000``.
Such an outer query reads nothing but the released rows of the inner one: it is post-processing, and
the same as the inner aggregate with

- the outer select list in place of the inner one (each output name read as the inner expression it
  names; ``*`` keeps the inner list),
- the outer WHERE as a HAVING (a condition on output columns, which HAVING is), AND-ed with the inner's,
- the outer ORDER BY, LIMIT and OFFSET as the aggregate's.

:func:`unwrap` is that rewrite, a function on the tree, applied before the analysis, so everything after
(bounds, calibration, the release and its one charge, EXPLAIN) sees one aggregate. A wrapper that does
anything else — joins, its own GROUP BY or aggregates, DISTINCT, a LIMIT inside with an ORDER BY, WHERE or
LIMIT outside (the inner LIMIT would pick rows before the outer order) — is left as it is, and the analysis
refuses it as before.
"""

from __future__ import annotations

from sqlglot import exp

from dpch.sql.aggregates import is_aggregate

#: clauses the outer SELECT may have for :func:`unwrap` to read it as post-processing
_OUTER_CLAUSES = {"expressions", "from_", "where", "order", "limit", "offset"}
#: the inner SELECT's clauses a wrapper's ORDER BY, WHERE or LIMIT must not follow
_ROW_PICKING = ("limit", "offset")


def _inner_select(outer: exp.Select) -> tuple[exp.Select, str | None] | None:
    """The aggregate ``outer`` reads from, and its alias, when ``outer`` is a wrapper of one."""
    if any(value not in (None, [], False) for key, value in outer.args.items() if key not in _OUTER_CLAUSES):
        return None
    source = outer.args.get("from_")
    if source is None or not isinstance(source.this, exp.Subquery):
        return None
    inner = source.this.this
    if not isinstance(inner, exp.Select) or inner.args.get("with_") is not None:
        return None
    if inner.args.get("group") is None and not any(is_aggregate(n) for n in inner.find_all(exp.Func)):
        return None  # not an aggregate: a row-level subquery, which the analysis reads as rows
    return inner, source.this.alias or None


def unwrap(outer: exp.Select) -> exp.Select:
    """``outer`` as the one aggregate it post-processes (see the module), or ``outer`` unchanged."""
    found = _inner_select(outer)
    if found is None:
        return outer
    inner, alias = found
    if any(is_aggregate(n) for clause in ("expressions", "where", "order") for node in _nodes(outer, clause)
           for n in node.find_all(exp.Func)):
        return outer  # aggregates over the aggregate's rows (a count of groups): another query, not a wrapper
    picks_rows = any(inner.args.get(clause) is not None for clause in _ROW_PICKING)
    if picks_rows and any(outer.args.get(c) is not None for c in ("where", "order", "limit", "offset")):
        return outer
    outputs = {item.alias_or_name: item.this if isinstance(item, exp.Alias) else item
               for item in inner.expressions}

    def resolved(node: exp.Expr) -> exp.Expr | None:
        """``node`` with each reference to an output column replaced by its inner expression (None: a
        reference to anything else, which only the analysis of the wrapper as written can explain)."""
        failed = False

        def swap(n: exp.Expr) -> exp.Expr:
            nonlocal failed
            if isinstance(n, exp.Column):
                if (n.table and n.table != alias) or n.name not in outputs:
                    failed = True
                    return n
                return exp.Paren(this=outputs[n.name].copy())
            return n

        result = node.copy().transform(swap, copy=False)
        return None if failed else result

    items: list[exp.Expr] = []
    for item in outer.expressions:
        if isinstance(item, exp.Star) or (isinstance(item, exp.Column) and isinstance(item.this, exp.Star)):
            items += [e.copy() for e in inner.expressions]
            continue
        expression = item.this if isinstance(item, exp.Alias) else item
        new = resolved(expression)
        if new is None:
            return outer
        name = item.alias_or_name
        items.append(exp.Alias(this=_unparen(new), alias=exp.to_identifier(name)))
    result = inner.copy()
    # the inner GROUP BY, HAVING and ORDER BY may name the inner select's aliases, which the outer list
    # replaces: read them as the expressions they name, as ClickHouse does (an alias wins over a column of the
    # same name); a key that is an alias alone becomes its expression alone, as the select list would name it
    aliased = {item.alias: item.this for item in inner.expressions if isinstance(item, exp.Alias)}

    def named(n: exp.Expr) -> exp.Expr:
        if isinstance(n, exp.Column) and not n.table and n.name in aliased:
            return exp.Paren(this=aliased[n.name].copy())
        return n

    for clause in ("group", "having", "order"):
        node = result.args.get(clause)
        if node is not None:
            node.transform(named, copy=False)
    group = result.args.get("group")
    if group is not None:
        group.set("expressions", [_unparen(key) for key in group.expressions])
    result.set("expressions", items)
    where = outer.args.get("where")
    if where is not None:
        condition = resolved(where.this)
        if condition is None:
            return outer
        having = result.args.get("having")
        combined = condition if having is None else exp.And(this=exp.Paren(this=having.this),
                                                            expression=exp.Paren(this=condition))
        result.set("having", exp.Having(this=combined))
    order = outer.args.get("order")
    if order is not None:
        orders = []
        for ordered in order.expressions:
            key = resolved(ordered.this)
            if key is None:
                return outer
            copy = ordered.copy()
            copy.set("this", _unparen(key))
            orders.append(copy)
        result.set("order", exp.Order(expressions=orders))
    for clause in ("limit", "offset"):
        if outer.args.get(clause) is not None:
            result.set(clause, outer.args[clause].copy())
    return result


def _nodes(select: exp.Select, clause: str) -> list[exp.Expr]:
    value = select.args.get(clause)
    return value if isinstance(value, list) else [value] if isinstance(value, exp.Expr) else []


def _unparen(node: exp.Expr) -> exp.Expr:
    return node.this if isinstance(node, exp.Paren) else node


__all__ = ["unwrap"]
