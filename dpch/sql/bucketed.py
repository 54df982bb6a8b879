"""A grouped query over time buckets, split into its shape and its range (issue 28, part 1: the release store).

A dashboard panel asks the same question every refresh with a moving time range (Grafana expands
``$__timeFilter(ts)`` to ``ts >= toDateTime(1700000000) AND ts <= toDateTime(1700086400)``, the seconds
moving with "now"). Answered bucket by bucket, only the range changes between refreshes: the *shape* —
the query without its range on the bucketed column, its ORDER BY, LIMIT and OFFSET — stays the same, and
each bucket of it is one piece of data, released once (:mod:`dpch.pipeline.bucket_store`).

:func:`find` recognises such a query on its tree: one GROUP BY key is a floor of a time column t (a chain
of :func:`dpch.sql.time_buckets.floored_column`'s functions: ``toStartOfInterval``, ``toStartOfHour``,
``toMonday``, … each f with f(x) ≤ x and non-decreasing), shown in the select list, and the WHERE
clause's top-level AND limits t (or a floor of it, or the select alias of one) from below and from above
with constants. :func:`for_buckets` is the shape restricted to whole buckets, as comparisons of the column
itself (a floor's bucket is an interval of it): ``t >= first AND t < after`` for each run of buckets, ``after``
the start of the bucket after the run's last (:func:`end_probe` asks ClickHouse for it), the runs OR-ed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlglot import exp

from dpch.sql.aliases import resolve_where_aliases
from dpch.sql.nodes import cast_to, conjunction, conjuncts, literal_node
from dpch.sql.time_buckets import bucket_column, floored_column, where_ranges


@dataclass(frozen=True)
class Bucketed:
    """A grouped query over the buckets of one time column, split into shape and range."""

    #: the query without its range on :attr:`column`, ORDER BY, LIMIT and OFFSET
    shape: exp.Select
    #: the GROUP BY key that buckets the column (a floor chain over it)
    bucket: exp.Expr
    #: the time column the range limited
    column: str
    #: the select list's position of the bucket
    output: int
    #: the conditions of the range that were taken out, as written (shown in EXPLAIN)
    range: tuple[exp.Expr, ...]
    #: what the query does with the assembled rows: ORDER BY items (output position, descending, nulls
    #: first), LIMIT and OFFSET
    order: tuple[tuple[int, bool, bool], ...]
    limit: int | None
    offset: int


def _is_floor_chain(node: exp.Expr) -> exp.Column | None:
    """The column ``node`` buckets when it is a floor chain of at least one function over it."""
    if isinstance(node, exp.Column):
        return None
    chain = bucket_column(node)
    if chain is None or not chain.links:
        return None
    return floored_column(node)


def _unaliased(item: exp.Expr) -> exp.Expr:
    return item.this if isinstance(item, exp.Alias) else item


def _position(select: exp.Select, node: exp.Expr) -> int | None:
    """The select list's position ``node`` names: an alias, a 1-based number, or an equal expression."""
    items = select.expressions
    if isinstance(node, exp.Literal) and not node.is_string and node.this.isdigit():
        number = int(node.this)
        return number - 1 if 1 <= number <= len(items) else None
    if isinstance(node, exp.Column) and not node.table:
        for i, item in enumerate(items):
            if isinstance(item, exp.Alias) and item.alias == node.name:
                return i
    for i, item in enumerate(items):
        if _unaliased(item) == node:
            return i
    return None


def _int_clause(select: exp.Select, name: str) -> int | None | bool:
    """The number of a LIMIT or OFFSET clause, None when absent, False when not a plain number."""
    clause = select.args.get(name)
    if clause is None:
        return None
    value = clause.expression if isinstance(clause, exp.Limit | exp.Offset) else clause
    if isinstance(value, exp.Literal) and not value.is_string and value.this.isdigit():
        return int(value.this)
    return False


def find(select: exp.Select, columns: Sequence[str]) -> Bucketed | None:
    """``select`` split into shape and range (see the module), or None when it is not a grouped query over
    the buckets of one time column limited by a constant range. ``columns``: the names of the columns the
    query's tables have (a WHERE name that is none of them but a select alias reads the alias)."""
    select = select.copy()
    if any(select.args.get(c) for c in ("with_", "joins", "distinct", "qualify", "windows")):
        return None
    source = select.args.get("from_")
    if source is None or not isinstance(source.this, exp.Table):
        return None  # a wrapper or a subquery: not this shape
    group = select.args.get("group")
    if group is None or group.args.get("rollup") or group.args.get("cube") or group.args.get("totals"):
        return None
    resolve_where_aliases(select, columns)
    found: list[tuple[exp.Expr, exp.Column]] = []
    for item in group.expressions:
        position = _position(select, item)
        node = _unaliased(select.expressions[position]) if position is not None else item
        col = _is_floor_chain(node)
        if col is not None:
            found.append((node, col))
    if len(found) != 1:
        return None
    bucket, col = found[0]
    output = _position(select, bucket)
    if output is None:
        return None

    def same(c: exp.Column) -> str | None:
        return "t" if c.name == col.name and c.table == col.table else None

    kept: list[exp.Expr] = []
    taken: list[exp.Expr] = []
    where = select.args.get("where")
    for part in conjuncts(where.this if where is not None else None):
        (taken if where_ranges(part, same) else kept).append(part)
    limits = where_ranges(conjunction(taken), same).get("t") if taken else None
    if limits is None or not limits.lower or not limits.upper:
        return None
    order: list[tuple[int, bool, bool]] = []
    for item in (select.args["order"].expressions if select.args.get("order") else []):
        position = _position(select, item.this)
        if position is None:
            return None  # an order on something not shown: the assembled rows could not be sorted by it
        order.append((position, bool(item.args.get("desc")), bool(item.args.get("nulls_first"))))
    limit, offset = _int_clause(select, "limit"), _int_clause(select, "offset")
    if limit is False or offset is False:
        return None
    shape = select
    shape.set("where", exp.Where(this=conjunction(kept)) if kept else None)
    for clause in ("order", "limit", "offset"):
        shape.set(clause, None)
    return Bucketed(shape, bucket, col.name, output, tuple(taken), tuple(order),
                    limit if isinstance(limit, int) else None, offset if isinstance(offset, int) else 0)


#: the nominal length in seconds of the buckets of the floors the parser keeps by name (``toStartOfHour``,
#: ``toMonday``, ``toStartOfMonth`` … parse as truncations to a unit: :data:`_UNIT_SECONDS`). A month counts
#: 30 days, a year 365: :func:`end_probe` needs a length between one bucket's and the same plus the next
#: one's, and 1.5 × nominal is that for every unit
_NOMINAL = {"tostartoffiveminutes": 300, "tostartoftenminutes": 600, "tostartoffifteenminutes": 900,
            "tostartofweek": 7 * 86400, "todatetime": 1}
_UNIT_SECONDS = {"nanosecond": 1e-9, "microsecond": 1e-6, "millisecond": 1e-3, "second": 1, "minute": 60,
                 "hour": 3600, "day": 86400, "week": 7 * 86400, "month": 30 * 86400, "quarter": 91 * 86400,
                 "year": 365 * 86400}


def _link_seconds(link: exp.Expr) -> float | None:
    if isinstance(link, exp.TimestampTrunc | exp.DateTrunc):
        unit = link.args.get("unit")
        return _UNIT_SECONDS.get(str(unit.name if unit is not None else "").lower())
    name = str(link.this).lower() if isinstance(link, exp.Anonymous) else ""
    if name == "tostartofinterval" and len(link.expressions) > 1 and isinstance(link.expressions[1], exp.Interval):
        interval = link.expressions[1]
        count = interval.this.this if isinstance(interval.this, exp.Literal) else ""
        unit = str(interval.unit.name if interval.unit is not None else "").lower().rstrip("s")
        if str(count).isdigit() and unit in _UNIT_SECONDS:
            return int(count) * _UNIT_SECONDS[unit]
        return None
    return _NOMINAL.get(name)


def nominal_seconds(bucketed: Bucketed) -> float | None:
    """The nominal length of the query's buckets in seconds (its longest link's), None when unknown."""
    chain = bucket_column(bucketed.bucket)
    lengths = [_link_seconds(link) for link in chain.links] if chain is not None else [None]
    if not lengths or any(n is None for n in lengths):
        return None
    return max(n for n in lengths if n is not None)


def at(bucketed: Bucketed, value: exp.Expr) -> exp.Expr:
    """The query's bucket expression evaluated on ``value`` instead of its column."""
    expr = bucketed.bucket.copy()
    for col in list(expr.find_all(exp.Column)):
        if col.name == bucketed.column:
            if col is expr:
                return value.copy()
            col.replace(value.copy())
    return expr


def column_literal(value: Any) -> exp.Expr:
    """A bucket boundary as a constant the column compares with: a date as its text (dates have no time
    zone), a time as the instant, ``fromUnixTimestamp64Nano(n)`` — clickhouse-connect gives a time without a
    zone as UTC (also for a column with its own zone) and one with a zone as that instant."""
    if isinstance(value, datetime):
        instant = value if value.tzinfo is not None else value.replace(tzinfo=UTC)
        delta = instant - datetime(1970, 1, 1, tzinfo=UTC)
        nanos = (delta.days * 86400 + delta.seconds) * 1_000_000_000 + delta.microseconds * 1000
        return exp.Anonymous(this="fromUnixTimestamp64Nano", expressions=[exp.Literal.number(nanos)])
    return literal_node(value)  # a date: its ISO text


def end_probe(bucketed: Bucketed, value: Any, column_type: str) -> exp.Select | None:
    """``SELECT e, ok``: e the start of the bucket after the bucket ``value`` (the bucket of ``value`` plus 1.5
    nominal lengths), ok whether e is a bucket start after ``value`` (else the store is not used). None when
    the buckets' length is not known."""
    nominal = nominal_seconds(bucketed)
    if nominal is None:
        return None
    typed = cast_to(column_literal(value), column_type)
    # a DateTime64 (addMilliseconds takes no Date), in the column's zone (toDateTime64 keeps it)
    precise = exp.Anonymous(this="toDateTime64", expressions=[typed, exp.Literal.number(3)])
    later = exp.Anonymous(this="addMilliseconds", expressions=[precise, exp.Literal.number(round(1500 * nominal))])
    end = at(bucketed, later)
    back = cast_to(exp.column("__end"), column_type)
    ok = exp.And(this=exp.EQ(this=at(bucketed, back), expression=exp.column("__end")),
                 expression=exp.GT(this=exp.column("__end"), expression=at(bucketed, typed)))
    inner = exp.Select(expressions=[exp.alias_(end, "__end")])
    return exp.Select(expressions=[exp.column("__end"), ok]).from_(exp.Subquery(this=inner), copy=False)


def for_buckets(bucketed: Bucketed, runs: Sequence[tuple[Any, Any]]) -> exp.Select:
    """The shape restricted to whole buckets: each run ``(first bucket, start of the bucket after the last)``
    is ``t >= first AND t < after`` on the column (the buckets of a floor f are intervals of it), the runs
    OR-ed under the range from the first run's start to the last run's end (which narrows the key domain)."""
    shape = bucketed.shape.copy()
    col = floored_column(bucketed.bucket)
    assert col is not None  # find() took the bucket as a floor of a column

    def within(first: Any, after: Any) -> list[exp.Expr]:
        return [exp.GTE(this=col.copy(), expression=column_literal(first)),
                exp.LT(this=col.copy(), expression=column_literal(after))]

    conditions = within(runs[0][0], runs[-1][1])
    if len(runs) > 1:
        either: exp.Expr = exp.Paren(this=conjunction(within(*runs[0])))
        for run in runs[1:]:
            either = exp.Or(this=either, expression=exp.Paren(this=conjunction(within(*run))))
        conditions.append(exp.Paren(this=either))
    where = shape.args.get("where")
    parts = ([where.this] if where is not None else []) + conditions
    shape.set("where", exp.Where(this=conjunction(parts)))
    return shape


__all__ = ["Bucketed", "at", "column_literal", "end_probe", "find", "for_buckets", "nominal_seconds"]
