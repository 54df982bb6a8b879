"""``dpch.budget`` and ``dpch.releases``: the analyst's own budget and ledger, as SQL tables.

A BI user has no ``dpch budget`` command, only SQL. So the gateway answers

    SELECT * FROM dpch.budget
    SELECT time, mechanism, epsilon FROM dpch.releases WHERE status = 'charged' ORDER BY time DESC LIMIT 10

from the accounting API (:meth:`~dpch.accounting.Accountant.status` and the ledger history
:meth:`~dpch.accounting.Accountant.recent`) of the *requesting* gateway user's analyst, never
anyone else's: the rows are built here for that analyst only, and each ``dpch.X`` the query names
is replaced by a ``format(JSONEachRow, ...)`` table function holding them, so ClickHouse evaluates
the client's WHERE / ORDER BY / LIMIT / column list over those rows and nothing else (the same
technique, allowlist and limits as :mod:`.introspection`). Reading them is free: they hold what
the analyst asked for and was charged (costs, mechanisms, times, query fingerprints), never a
released value or a row of data.
"""

from __future__ import annotations

import math
import re
import sys
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, cast

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

from dpch.accounting.accountant import BudgetStatus
from dpch.accounting.ledger import LedgerEntry
from dpch.errors import QueryRejected
from dpch.server.catalog_tables import LEDGER_VIEWS
from dpch.server.errors import GatewayError
from dpch.server.formats import rows_source
from dpch.server.introspection import Introspection, check_allowed
from dpch.sql.parse import DIALECT

#: the database name the views live under
VIEW_DATABASE = "dpch"

#: view name → [(column, ClickHouse type)] (in :mod:`.catalog_tables`, which DESCRIBE also reads)
SCHEMAS = LEDGER_VIEWS

#: a text that cannot name a view is never parsed here (the DP path parses it anyway)
_MENTION = re.compile(r"\bdpch\b", re.IGNORECASE)


@dataclass(frozen=True)
class ViewQuery:
    """A client's query over the views, before the rows are known."""

    tree: exp.Query
    #: the views it reads
    views: tuple[str, ...]

    def bind(self, rows: Callable[[str], list[tuple[Any, ...]]]) -> Introspection:
        """The query with each view replaced by its ``rows(name)`` (a tree, rendered once later)."""
        tree = self.tree.copy()
        for table in list(tree.find_all(exp.Table)):
            name = _view_name(table)
            assert name is not None
            source = rows_source([c for c, _ in SCHEMAS[name]], [t for _, t in SCHEMAS[name]], rows(name))
            source.set("alias", table.args.get("alias") or exp.TableAlias(this=exp.to_identifier(name)))
            table.replace(source)
        return Introspection(tree=tree, kind="ledger:" + ",".join(self.views))


def find_views(sql: str, databases: Collection[str] = ()) -> ViewQuery | None:
    """The query if ``sql`` reads ``dpch.budget`` / ``dpch.releases``, else None (it is for another path).

    Raises :class:`GatewayError` for a query mixing a view with any other table, or using a
    construct outside the metadata allowlist (:func:`~dpch.server.introspection.check_allowed`).
    ``databases`` are those served: if one is called ``dpch``, its own tables keep their names."""
    if _MENTION.search(sql) is None:
        return None
    try:
        tree = cast(exp.Expression, sqlglot.parse_one(sql, read=DIALECT))
    except SqlglotError:
        return None  # the DP path reports the syntax error in dpch's words
    if not isinstance(tree, exp.Select | exp.Union):
        return None
    tables = list(tree.find_all(exp.Table))
    strict = VIEW_DATABASE not in databases
    views = [name for t in tables if (name := _view_name(t, strict)) is not None]
    if not views:
        return None
    if len(views) != len(tables):
        raise GatewayError(497, QueryRejected.kind,
                           "dpch: a query of dpch.budget or dpch.releases cannot read other tables; "
                           "query them on their own")
    check_view_query(tree)
    tree = tree.copy()
    tree.set("settings", None)
    tree.set("format", None)
    return ViewQuery(tree=tree, views=tuple(sorted(set(views))))


#: time functions a chart of the ledger needs ("ε spent per day"), beyond the metadata allowlist;
#: like it, none reads a table, a file or the network
_TIME_FUNCTIONS = {name.lower() for name in (
    "toStartOfMinute", "toStartOfFiveMinutes", "toStartOfFifteenMinutes", "toStartOfHour", "toStartOfDay",
    "toStartOfWeek", "toStartOfMonth", "toStartOfQuarter", "toStartOfYear", "toStartOfInterval", "toMonday",
    "toYYYYMM", "toYYYYMMDD", "toUnixTimestamp",
)}
#: the same, as sqlglot parses some of them (and INTERVAL n unit, for time ranges)
_TIME_NODES: tuple[type, ...] = (exp.TimestampTrunc, exp.Interval)


def _time_node(node: exp.Expression) -> bool:
    if isinstance(node, exp.Anonymous):
        return str(node.this).lower() in _TIME_FUNCTIONS
    return isinstance(node, _TIME_NODES)


def check_view_query(tree: exp.Expression) -> None:
    """The metadata allowlist (:func:`~dpch.server.introspection.check_allowed`), plus time
    bucketing and INTERVAL: those nodes are checked as the tuple of their arguments (a unit
    keyword dropped), so whatever they take must itself be allowed."""
    probe = tree.copy()
    for node in [n for n in probe.walk() if _time_node(cast(exp.Expression, n))]:
        args = [a for a in node.iter_expressions() if not isinstance(a, exp.Var)]
        node.replace(exp.Tuple(expressions=args))
    check_allowed(probe)


def _view_name(table: exp.Table, strict: bool = False) -> str | None:
    """The view ``table`` names, or None; ``strict``: any other ``dpch.X`` is an error."""
    db = table.args.get("db")
    if not isinstance(table.this, exp.Identifier) or db is None or db.name.lower() != VIEW_DATABASE:
        return None
    name = table.name.lower()
    if name not in SCHEMAS and not strict:
        return None
    if name not in SCHEMAS:
        raise GatewayError(60, QueryRejected.kind,
                           f"Table dpch.{table.name} does not exist: dpch serves dpch.budget and dpch.releases")
    return name


# -- rows ---------------------------------------------------------------------------------------


def budget_warning(status: BudgetStatus, share: float) -> str:
    """A warning when less than ``share`` of the ε budget remains, else ''. ASCII only: it is also
    an HTTP header (X-Dpch-Budget-Warning)."""
    total, left = status.budget.epsilon, status.remaining.epsilon
    if not (share > 0 and total > 0 and math.isfinite(total)) or not left / total < share:
        return ""
    scope = f"dataset {status.dataset}" if status.dataset else f"analyst {status.analyst}"
    return (f"{scope} has epsilon {left:.6g} of {total:.6g} left ({left / total:.1%}), below the warning "
            f"share of {share:.0%}; ask the data owner for more budget or refresh dashboards less often")


def budget_rows(status: BudgetStatus, share: float) -> list[tuple[Any, ...]]:
    """``dpch.budget``: the analyst-wide status, then each dataset budget's."""
    locked = int(status.locked is not None)
    return [_budget_row(s, share, locked) for s in (status, *status.datasets)]


def _budget_row(s: BudgetStatus, share: float, locked: int) -> tuple[Any, ...]:
    return (s.analyst, s.dataset, s.filter, s.budget.epsilon, s.budget.delta,
            s.spent.epsilon, s.spent.delta, s.reserved.epsilon, s.reserved.delta,
            s.remaining.epsilon, s.remaining.delta, s.spent.epsilon, s.remaining.epsilon,
            s.releases, locked, s.guarantee, budget_warning(s, share))


def release_rows(entries: Sequence[LedgerEntry]) -> list[tuple[Any, ...]]:
    """``dpch.releases``: each release at its latest ledger row (costs and status; no values)."""
    return [(e.release_id, _utc(e.time), e.analyst, e.query_hash,
             e.mechanism, e.filter, e.status, e.cost.epsilon, e.cost.delta, e.cost.rho, e.worst.epsilon,
             int(e.cost.ex_post), list(e.scopes)) for e in entries]


def _utc(time: datetime) -> str:
    """``time`` as DateTime64(6, 'UTC') text (a naive time from the ledger is already UTC)."""
    aware = time if time.tzinfo is not None else time.replace(tzinfo=UTC)
    return aware.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S.%f")


#: ``Accountant.recent`` limit that means "the whole history" (ClickHouse's metadata limits still
#: refuse, rather than truncate, a history too long to read)
ALL = sys.maxsize
