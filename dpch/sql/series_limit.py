"""Superset's series limit: a grouped query JOINed to a top-N query of its series keys (issue 28, part 2).

A time-series chart with a series limit sends (``superset/models/helpers.py``, ``get_sqla_query``: the
ClickHouse engine specs keep ``allows_joins`` and ``allows_subqueries`` true, so the JOIN form is used)::

    SELECT toStartOfDay(toDateTime(ts)) AS ts, country AS country, count(*) AS count
    FROM t JOIN (SELECT country AS country__, count(*) AS mme_inner__ FROM t WHERE …
                 GROUP BY country ORDER BY mme_inner__ DESC LIMIT 5) AS series_limit
      ON country = country__
    WHERE … GROUP BY country, toStartOfDay(toDateTime(ts)) ORDER BY count DESC LIMIT 10000

It is two questions: which N series are largest (the inner query, a top-N release), and the series of
those N (the outer query with its keys limited to the N chosen). :func:`find` splits the tree into
the two; :func:`restricted` is the outer query limited to the released keys — a ``key IN (…)`` list, which
narrows the key's domain to them (:mod:`dpch.sql.where_lists`), and, for several series columns, a
HAVING that keeps the chosen combinations. The keys are released values, so the second question is
chosen by post-processing the first: two releases, composed (:mod:`dpch.pipeline.series`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlglot import exp

from dpch.sql.nodes import conjunction, conjuncts, literal_node


@dataclass(frozen=True)
class SeriesLimit:
    """A series-limited query, split: the top-N query and the series query without the JOIN."""

    #: the inner query: its keys, ordered by a metric and limited to N rows
    top: exp.Select
    #: the outer query without the JOIN
    series: exp.Select
    #: each series key: the outer query's expression and the inner query's output column it equals
    pairs: tuple[tuple[exp.Expr, str], ...]

    @property
    def names(self) -> tuple[str, ...]:
        """The top-N query's output columns that hold the series keys, in :attr:`pairs`' order."""
        return tuple(name for _, name in self.pairs)


def _inner_column(node: exp.Expr, names: set[str], alias: str) -> str | None:
    """The inner query's output column ``node`` reads (``country__`` or ``series_limit.country__``)."""
    if isinstance(node, exp.Column) and node.name in names and node.table in ("", alias):
        return node.name
    return None


def find(select: exp.Select) -> SeriesLimit | None:
    """``select`` split into its top-N query and its series query, when it is a series limit (one inner
    JOIN of a grouped, ordered and limited subquery, ON equalities of outer expressions with its output
    columns); None for any other query, which the analysis reads (and refuses) as written."""
    joins = select.args.get("joins") or []
    if len(joins) != 1:
        return None
    join = joins[0]
    sub = join.this
    if not isinstance(sub, exp.Subquery) or not isinstance(sub.this, exp.Select):
        return None
    if join.side or (join.kind or "INNER").upper() != "INNER" or join.args.get("using"):
        return None
    top = sub.this
    if any(top.args.get(clause) is None for clause in ("group", "order", "limit")):
        return None
    names = {e.alias_or_name for e in top.expressions}
    pairs: list[tuple[exp.Expr, str]] = []
    for part in conjuncts(join.args.get("on")):
        if not isinstance(part, exp.EQ):
            return None
        for outer, inner in ((part.this, part.expression), (part.expression, part.this)):
            name = _inner_column(inner, names, sub.alias)
            reads_inner = any(_inner_column(c, names, sub.alias) for c in outer.find_all(exp.Column))
            if name is not None and not reads_inner:
                pairs.append((outer.copy(), name))
                break
        else:
            return None
    if not pairs:
        return None
    series = select.copy()
    series.set("joins", None)
    return SeriesLimit(top.copy(), series, tuple(pairs))


def restricted(limit: SeriesLimit, keys: Sequence[tuple[Any, ...]]) -> exp.Select:
    """The series query limited to ``keys`` (each a tuple of the series keys' released values, in
    :attr:`SeriesLimit.pairs`' order; at least one): ``key IN (values)`` for each key in WHERE, and for
    several keys the chosen combinations in HAVING (the lists alone would allow their cross product)."""
    if not keys:
        raise ValueError("a series limit needs at least one chosen key")
    series = limit.series.copy()
    conditions: list[exp.Expr] = []
    where = series.args.get("where")
    if where is not None:
        conditions.append(where.this)
    conditions += [exp.In(this=outer.copy(), expressions=[literal_node(v) for v in dict.fromkeys(k[i] for k in keys)])
                   for i, (outer, _) in enumerate(limit.pairs)]
    series.set("where", exp.Where(this=conjunction(conditions)))
    if len(limit.pairs) > 1:
        chosen = exp.or_(*(conjunction([exp.EQ(this=outer.copy(), expression=literal_node(v))
                                        for (outer, _), v in zip(limit.pairs, key, strict=True)])
                           for key in dict.fromkeys(keys)), copy=False)
        having = series.args.get("having")
        series.set("having", exp.Having(this=chosen if having is None else conjunction([having.this, chosen])))
    return series


__all__ = ["SeriesLimit", "find", "restricted"]
