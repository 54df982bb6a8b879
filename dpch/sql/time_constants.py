"""Dates and times written as BI tools write them, folded to exact constants before the charge.

Grafana's ClickHouse plugin expands ``$__timeFilter(t)`` to ``t >= toDateTime(1700000000) AND t <=
toDateTime(1700086400)``, ``$__fromTime_ms`` to ``fromUnixTimestamp64Milli(…)`` and ``$__dateFilter``
to ``toDate('2026-01-01')`` (grafana/clickhouse-datasource, pkg/macros/macros.go); Superset's
ClickHouse engine spec writes ``toDateTime('2026-01-01 00:00:00')`` (superset/db_engine_specs/
clickhouse.py, ``convert_dttm``); dashboards write ``now() - INTERVAL 1 DAY`` and ``today()``.

Each maximal subtree built only from literals, intervals and the time functions below — no column,
no subquery — is the same on every row, so whether it evaluates, and to what, cannot depend on the
data. dpch asks ClickHouse to evaluate it once (``SELECT <expr>``, reading no table) and puts back
an exact canonical constant:

- a Date as ``toDate('YYYY-MM-DD')`` (Date32: ``toDate32``),
- a DateTime as ``toDateTime(<unix seconds>)`` (with its time zone argument if the type names one),
- a DateTime64 as ``fromUnixTimestamp64Nano(<unix nanoseconds>)``.

The totality registry (:mod:`dpch.sql.functions`) admits these forms with literal arguments only.
A constant ClickHouse cannot evaluate (``toDate('garbage')``) is refused here, before anything is
charged, whatever the data. ``now()``, ``today()`` and ``yesterday()`` change between calls: a plan
that folded one is marked volatile and is not cached (:class:`dpch.pipeline.plan.PlanCache`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sqlglot import exp

from dpch.errors import QueryRejected
from dpch.sql import functions
from dpch.sql.limits import check_time_constants
from dpch.sql.nodes import call, show
from dpch.sql.parse import DIALECT
from dpch.store.cancel import check_cancelled

#: runs a SELECT that reads no table and returns its rows (the engine's ``query_rows``)
ConstantQuery = Callable[[str], list[tuple[Any, ...]]]

#: functions whose value changes from one call to the next
VOLATILE = frozenset({"now", "now64", "today", "yesterday"})

#: node classes a constant time expression may contain besides the registry's constant functions
_PLAIN = (exp.Literal, exp.Neg, exp.Paren, exp.Interval, exp.Var, exp.Add, exp.Sub, exp.Null)


@dataclass(frozen=True)
class Folded:
    """What folding did to a query: whether it read the clock (the plan may not be reused)."""

    volatile: bool = False


def function_name(node: exp.Expr) -> str:
    """The lower-case name of an anonymous call ('' otherwise)."""
    return str(node.this).lower() if isinstance(node, exp.Anonymous) else ""


def _time_node(node: exp.Expr) -> bool:
    """A function the registry admits in date and time constants (:data:`dpch.sql.functions.Use.CONSTANT`):
    it builds or shifts a date or time from constants and reads no table, file or dictionary."""
    return functions.allowed_in(node, functions.Use.CONSTANT)


def is_time_constant(node: exp.Expr) -> bool:
    """Whether ``node`` is a constant date/time expression dpch folds: it calls at least one time
    function, and everything in it is a literal, an interval, ``+``/``-`` or such a function."""
    has_time = False
    for sub in node.walk():
        if _time_node(sub):
            has_time = True
        elif not isinstance(sub, _PLAIN):
            return False
    return has_time


def fold_time_constants(tree: exp.Expr, run: ConstantQuery | None) -> tuple[exp.Expr, Folded]:
    """A copy of ``tree`` with every maximal constant time expression replaced by its exact value.

    ``run`` evaluates one constant in ClickHouse; None (no database at hand) leaves a tree that has
    none unchanged and refuses one that has. At most :data:`dpch.sql.limits.MAX_TIME_CONSTANTS` are
    evaluated (each costs two round trips); a query that is cancelled (its client has gone, or has
    been answered) stops between two of them (:func:`dpch.store.cancel.check_cancelled`).
    """
    if not _maximal_constants(tree):
        return tree, Folded()
    root = tree.copy()
    volatile = False
    constants = _maximal_constants(root)
    check_time_constants(len(constants))
    for node in constants:
        if run is None:
            raise QueryRejected(f"{show(node)}: time constants need a database to evaluate them")
        check_cancelled()
        volatile = volatile or any(function_name(s) in VOLATILE or isinstance(s, exp.CurrentTimestamp | exp.CurrentDate)
                                   for s in node.walk())
        replacement = _evaluate(node, run)
        if node is root:
            root = replacement
        else:
            node.replace(replacement)
    return root, Folded(volatile=volatile)


def _maximal_constants(root: exp.Expr) -> list[exp.Expr]:
    """The maximal subtrees that :func:`is_time_constant` accepts, in one pass over the tree.

    Asking :func:`is_time_constant` of every node walks every subtree again: quadratic in the depth
    (a 68 KB chain of ``+ INTERVAL 1 DAY`` on a column cost more than 30 s). Here each node's two
    facts — only literals, intervals, ``+``/``-`` and time functions below it; a time function among
    them — are computed once from its children's, bottom up."""
    order = list(root.walk(bfs=True))  # parents before children; reversed, children come first
    plain: dict[int, bool] = {}
    timed: dict[int, bool] = {}
    for node in reversed(order):
        children = list(node.iter_expressions())
        own_time = _time_node(node)
        plain[id(node)] = (own_time or isinstance(node, _PLAIN)) and all(plain[id(c)] for c in children)
        timed[id(node)] = own_time or any(timed[id(c)] for c in children)
    found: list[exp.Expr] = []
    stack = [root]
    while stack:  # top down: the first constant met on each path is maximal
        node = stack.pop()
        if plain[id(node)] and timed[id(node)]:
            found.append(node)
            continue
        stack.extend(node.iter_expressions())
    return found


def _evaluate(node: exp.Expr, run: ConstantQuery) -> exp.Expr:
    # rendered as written (DIALECT keeps toStartOfYear, which sqlglot's own ClickHouse rendering turns
    # into dateTrunc, a different function on Date32): the constant is what ClickHouse makes of the text
    text = node.sql(dialect=DIALECT)
    shown = show(node)
    try:
        kind, value = run(f"SELECT toTypeName(({text})), toString(({text}))")[0]
    except Exception:  # a constant: its failure depends on the text alone, never on the data
        raise QueryRejected(f"{shown} is not a valid date or time",
                            hint="write dates as toDate('2026-01-31') and times as toDateTime('2026-01-31 "
                                 "12:00:00') or toDateTime(<unix seconds>)") from None
    kind = str(kind)
    if kind.startswith("Nullable("):
        raise QueryRejected(f"{shown} can be NULL, which compares with nothing",
                            hint="use a function that always returns a date or time, e.g. parseDateTimeBestEffort")
    if kind in ("Date", "Date32"):
        return call("toDate" if kind == "Date" else "toDate32", exp.Literal.string(str(value)))
    if not kind.startswith("DateTime"):
        raise QueryRejected(f"{shown} is a {kind}, not a date or time",
                            hint="compare date and time columns with dates and times")
    try:
        nanos = int(run(f"SELECT toString(toUnixTimestamp64Nano(toDateTime64(({text}), 9)))")[0][0])
    except Exception:
        raise QueryRejected(f"{shown} is outside the range dpch can compare exactly (1900 to 2262)") from None
    if kind.startswith("DateTime64"):
        return call("fromUnixTimestamp64Nano", exp.Literal.number(nanos))
    zone = kind[len("DateTime("):-1].strip("'") if kind.startswith("DateTime(") else None
    seconds = exp.Literal.number(nanos // 1_000_000_000)
    return call("toDateTime", seconds, exp.Literal.string(zone)) if zone else call("toDateTime", seconds)


__all__ = ["ConstantQuery", "Folded", "VOLATILE", "fold_time_constants", "is_time_constant"]
