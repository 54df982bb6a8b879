"""Metadata queries answered without touching private rows.

What a client sends on connect or while browsing a schema — ``SELECT version()``, ``SELECT 1``,
``system.settings``, ``system.databases/tables/columns/functions``, ``information_schema.*``,
``DESCRIBE``, ``SHOW TABLES``, ``SHOW CREATE TABLE``, ``EXISTS`` — is answered from what the policy
exposes. Each system or information_schema table the query names
is replaced by a ``format(JSONEachRow, ...)`` table built here from public metadata (tables that
have a policy, their columns and annotations; no row counts or sizes), so ClickHouse evaluates
the client's WHERE/ORDER BY/LIMIT over those synthetic rows only. A query qualifies only if
every table it names is one of these system tables and every function is on an allowlist:
nothing else in it can read data (the allowlist: :mod:`.metadata_allowlist`; SHOW, DESCRIBE,
EXISTS and the refusal of writes: :mod:`.metadata_statements`; the tables: :mod:`.catalog_tables`).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import cast

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

from dpch.errors import QueryRejected
from dpch.server.catalog_tables import INFORMATION_SCHEMA, SCHEMAS, Catalog, rows
from dpch.server.errors import GatewayError
from dpch.server.formats import rows_source, with_settings
from dpch.server.metadata_allowlist import check_allowed
from dpch.server.metadata_statements import (
    describe_emulated,
    is_metadata_statement,
    read_only_refusal,
    show_ledger_views,
    translate_statement,
)
from dpch.sql.nodes import is_within
from dpch.sql.parse import DIALECT

#: rows a metadata query may read and return; the synthetic system tables hold one row per table
#: or column a policy exposes, far below these
METADATA_MAX_ROWS = 1_000_000
METADATA_MAX_RESULT_ROWS = 100_000


def metadata_limits(timeout: float) -> dict[str, str]:
    """Query settings with which ClickHouse itself stops a metadata query that runs too long or
    reads or returns too many rows (an error, never a truncated answer)."""
    return {
        "max_execution_time": f"{timeout:g}", "timeout_overflow_mode": "throw",
        "max_rows_to_read": str(METADATA_MAX_ROWS), "read_overflow_mode": "throw",
        "max_result_rows": str(METADATA_MAX_RESULT_ROWS), "result_overflow_mode": "throw",
        "max_rows_in_join": str(METADATA_MAX_ROWS), "join_overflow_mode": "throw",
    }


@dataclass(frozen=True)
class Introspection:
    """An introspection query rewritten to run over synthetic metadata rows only (a sqlglot
    tree: :func:`render` adds the limits and renders it once)."""

    tree: exp.Query
    kind: str


#: texts recently found to be for the DP path (most recent last); see :func:`introspect`
_DP_TEXTS: OrderedDict[str, None] = OrderedDict()
_DP_TEXTS_SIZE = 1024
_DP_TEXTS_LOCK = threading.Lock()


def introspect(sql: str, catalog: Catalog) -> Introspection | None:
    """The rewritten query if ``sql`` is an introspection query, None if it is for the DP path.

    Raises :class:`GatewayError` for a metadata statement the gateway does not support, a
    query mixing system tables with anything else, or a construct outside the allowlist.

    Whether a text is for the DP path depends on the text alone (its statement kind and the
    tables it names, never the catalog), so a text seen to be one is remembered and not parsed
    again (a dashboard's panels repeat theirs; parsing cost ~1 ms a request).
    """
    with _DP_TEXTS_LOCK:
        if sql in _DP_TEXTS:
            _DP_TEXTS.move_to_end(sql)
            return None
    found = _introspect(sql, catalog)
    if found is None:
        with _DP_TEXTS_LOCK:
            _DP_TEXTS[sql] = None
            while len(_DP_TEXTS) > _DP_TEXTS_SIZE:
                _DP_TEXTS.popitem(last=False)
    return found


def _introspect(sql: str, catalog: Catalog) -> Introspection | None:
    refusal = read_only_refusal(sql)
    if refusal is not None:
        raise refusal
    described = describe_emulated(sql)
    if described is not None:
        return Introspection(tree=described, kind="introspection:describe")
    views = show_ledger_views(sql, catalog)
    if views is not None:
        return Introspection(tree=views, kind="introspection:show")
    tree: exp.Expression | None = translate_statement(sql, catalog)
    if tree is None and is_metadata_statement(sql):
        raise GatewayError(48, QueryRejected.kind, "dpch serves SHOW DATABASES, SHOW TABLES, SHOW CREATE TABLE, "
                                                   "DESCRIBE and EXISTS; this metadata statement is not supported")
    if tree is None:
        try:
            tree = cast(exp.Expression, sqlglot.parse_one(sql, read=DIALECT))  # sqlglot 30 types it Expr
        except SqlglotError:
            return None  # the DP path reports the syntax error in dpch's words
    if not isinstance(tree, exp.Select | exp.Union):
        return None
    tables = _sources(tree)
    system = [t for t in tables if _system_name(t) is not None]
    if not tables:
        over_ctes = any(True for _ in tree.find_all(exp.CTE))
        if tree.args.get("from_") is not None and not isinstance(tree, exp.Union) and not over_ctes:
            return None
    elif not system:
        return None
    elif len(system) != len(tables):
        raise GatewayError(
            497, QueryRejected.kind, "dpch: a query cannot mix system tables with other tables or table functions")
    check_allowed(tree)
    tree = tree.copy()
    _rename_ctes(tree)
    tree.set("settings", None)
    tree.set("format", None)
    _substitute_context(tree, catalog)
    # Each system table becomes a table function over synthetic rows *in the tree*: the query is
    # rendered once, so no text of ours can land inside the client's literals (or theirs in ours).
    aliases: dict[tuple[str, str], str] = {}
    for table in _sources(tree):
        name = _system_name(table)
        assert name is not None
        source = _system_table(name, catalog)
        alias = table.args.get("alias") or exp.TableAlias(this=exp.to_identifier(table.name))
        aliases.setdefault((table.text("db").lower(), table.name.lower()), alias.name)
        source.set("alias", alias)
        table.replace(source)
    _requalify(tree, aliases)
    kinds = sorted({_system_name(t) or "" for t in tables}) or ["constant"]
    return Introspection(tree=tree, kind="introspection:" + ",".join(kinds))


def render(found: Introspection, settings: dict[str, str]) -> str:
    """The introspection query with ``settings`` (limits, output settings), rendered once."""
    return with_settings(found.tree.copy(), settings).sql(dialect=DIALECT)


def _sources(tree: exp.Expression) -> list[exp.Table]:
    """The tables and table functions a query reads, without its references to its own CTEs
    (Metabase asks ``WITH s AS (SELECT version() ...) SELECT ... FROM s``)."""
    refs = {id(t) for t in _cte_refs(tree)}
    return [t for t in tree.find_all(exp.Table) if id(t) not in refs]


def _cte_refs(tree: exp.Expression) -> list[exp.Table]:
    """References that ClickHouse resolves to one of the query's top-level CTEs: those in the main
    query or in a *later* CTE's body. In a CTE's own body (or an earlier one's) the name means the
    table of that name — ``WITH x AS (SELECT * FROM x)`` reads table x — so such a reference is a
    table here too (measured on chdb). Any doubt (a UNION, a name defined twice): no CTE at all."""
    with_ = tree.args.get("with_")
    if not isinstance(tree, exp.Select) or not isinstance(with_, exp.With):
        return []
    ctes = list(with_.expressions)
    names = [c.alias_or_name for c in ctes]
    if len(set(names)) != len(names):
        return []
    refs = []
    for table in tree.find_all(exp.Table):
        if table.text("db") or table.text("catalog") or not isinstance(table.this, exp.Identifier) \
                or table.name not in names:
            continue
        inside = next((i for i, cte in enumerate(ctes) if is_within(table, cte)), None)
        if inside is None or inside > names.index(table.name):
            refs.append(table)
    return refs



def _rename_ctes(tree: exp.Expression) -> None:
    """Gives each top-level CTE a name of dpch's (``_dpch_cte_N``) and points the references
    :func:`_cte_refs` found at it: should ClickHouse resolve a name otherwise than that analysis
    says, it finds no such table and fails — it can never read a table of the CTE's name."""
    refs = _cte_refs(tree)
    with_ = tree.args.get("with_")
    if not refs or not isinstance(with_, exp.With):
        return
    renamed = {cte.alias_or_name: f"_dpch_cte_{i}" for i, cte in enumerate(with_.expressions)}
    for table in refs:
        if table.args.get("alias") is None:
            table.set("alias", exp.TableAlias(this=exp.to_identifier(table.name)))  # keeps s.col working
        table.set("this", exp.to_identifier(renamed[table.name]))
    for cte in with_.expressions:
        cte.set("alias", exp.TableAlias(this=exp.to_identifier(renamed[cte.alias_or_name])))


def _system_name(table: exp.Table) -> str | None:
    """The :data:`SCHEMAS` key of a system or information_schema table, None for other tables;
    an unknown one is refused by name (ClickHouse's own error would quote the rewritten query)."""
    if not isinstance(table.this, exp.Identifier):
        return None
    db = table.text("db")
    if db == "system":
        name = table.name if table.name in SCHEMAS and "." not in table.name else None
    elif db.lower() == "information_schema":  # ClickHouse has it in lower and UPPER case
        name = INFORMATION_SCHEMA.get(table.name.lower())
    else:
        return None
    if name is None:
        served = [f"system.{n}" for n in SCHEMAS if "." not in n] + list(INFORMATION_SCHEMA.values())
        raise GatewayError(60, QueryRejected.kind,
                           f"dpch: {db}.{table.name} is not served (dpch shows public metadata only: no parts, "
                           f"sizes, row counts or logs); it serves {', '.join(sorted(served))}")
    return name


def _requalify(tree: exp.Expression, aliases: dict[tuple[str, str], str]) -> None:
    """``system.tables.name`` as JDBC writes it (even when the table has an alias) → ``alias.name``:
    the table it named is now a table function under that alias."""
    for column in list(tree.find_all(exp.Column)):
        db = column.text("db").lower()
        if not db:
            continue
        alias = aliases.get((db, column.table.lower()))
        if alias is not None:
            column.set("db", None)
            column.set("table", exp.to_identifier(alias))


def _substitute_context(tree: exp.Expression, catalog: Catalog) -> None:
    """currentDatabase()/currentUser() name the gateway's database and the client's user."""
    for walked in list(tree.walk()):
        node = cast(exp.Expression, walked)  # sqlglot 30 types walk() as Expr
        name = str(node.this).lower() if isinstance(node, exp.Anonymous) else ""
        top_level = isinstance(node.parent, exp.Select) and node.arg_key == "expressions"
        if isinstance(node, exp.CurrentDatabase) or name == "currentdatabase":
            replacement: exp.Expression = exp.Literal.string(catalog.database)
        elif isinstance(node, exp.CurrentUser) or name in ("currentuser", "user"):
            replacement = exp.Literal.string(catalog.user)
        elif isinstance(node, exp.CurrentVersion) and top_level:
            replacement = node.copy()  # sqlglot writes it VERSION(): only its column name changes
        else:
            continue
        if top_level:
            # ClickHouse names an unaliased result column by the call as written
            replacement = cast(exp.Expression, exp.alias_(replacement, _call_text(node), quoted=True))
        node.replace(replacement)


def _call_text(node: exp.Expression) -> str:
    """``currentDatabase()`` as ClickHouse names the column of a call without arguments."""
    if isinstance(node, exp.Anonymous):
        return f"{node.this}()"
    names: dict[type, str] = {exp.CurrentDatabase: "currentDatabase()", exp.CurrentUser: "currentUser()",
                              exp.CurrentVersion: "version()"}
    return names.get(type(node), node.sql(dialect=DIALECT))


def _system_table(name: str, catalog: Catalog) -> exp.Table:
    columns = [c for c, _ in SCHEMAS[name]]
    types = [t for _, t in SCHEMAS[name]]
    return rows_source(columns, types, rows(name, catalog))
