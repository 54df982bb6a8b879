"""Metadata queries answered without touching private rows.

What a client sends on connect or while browsing a schema — ``SELECT version()``, ``SELECT 1``,
``system.settings``, ``system.databases/tables/columns``, ``DESCRIBE``, ``SHOW TABLES``,
``EXISTS`` — is answered from what the policy exposes. Each ``system.X`` table the query names
is replaced by a ``format(JSONEachRow, ...)`` table built here from public metadata (tables that
have a policy, their columns and annotations; no row counts or sizes), so ClickHouse evaluates
the client's WHERE/ORDER BY/LIMIT over those synthetic rows only. A query qualifies only if
every table it names is one of these system tables and every function is on an allowlist:
nothing else in it can read data.
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import cast

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

from dpch.errors import ParseError, PolicyError, QueryRejected
from dpch.server.catalog_tables import INFORMATION_SCHEMA, SCHEMAS, Catalog, rows
from dpch.server.errors import GatewayError
from dpch.server.formats import rows_source, with_settings
from dpch.sql.parse import DIALECT

#: functions an introspection query may call (besides operators and sqlglot's typed functions
#: below): none of them reads a table, a file, a dictionary or the network
_ANONYMOUS_OK = {n.lower() for n in {
    "version", "timezone", "timeZone", "servertimezone", "serverTimeZone", "currentdatabase", "currentuser",
    "user", "uptime", "now", "now64", "today", "yesterday", "totypename", "tostring", "touint8", "touint64",
    "toint32", "toint64", "tofloat64", "todate", "todatetime", "length", "lower", "upper", "concat",
    "splitbychar", "has", "empty", "notempty", "startswith", "endswith", "position",
    "match", "like", "ilike", "notlike", "ifnull", "coalesce", "if", "multiif", "count", "any", "max",
    "min", "groupArray", "grouparray", "replaceall", "replaceregexpall", "extract", "trim", "substring",
    "formatreadablesize", "concatassumeinjective", "toint16", "toint8", "touint16", "touint32",
    "isnull", "isnotnull", "assumenotnull", "tuple", "array", "arrayzip", "arrayenumerate",
}}
_TYPED_OK: tuple[type, ...] = (
    exp.CurrentVersion, exp.CurrentDatabase, exp.CurrentUser, exp.CurrentTimestamp, exp.CurrentDate,
    exp.Count, exp.Max, exp.Min, exp.If, exp.Coalesce, exp.Lower, exp.Upper, exp.Length, exp.Concat,
    exp.Substring, exp.Trim, exp.Cast, exp.TryCast, exp.Array, exp.Tuple, exp.RegexpLike, exp.StartsWith,
    exp.Case, exp.AnyValue, exp.Not, exp.Paren, exp.In, exp.Like, exp.ILike, exp.Is, exp.Between,
    exp.ArrayAgg, exp.Sum, exp.Round, exp.Abs, exp.ArrayContains, exp.StrPosition, exp.Split,
)


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


_SHOW_DATABASES = re.compile(r"^\s*SHOW\s+DATABASES(?:\s+(NOT\s+)?(I?LIKE)\s+('(?:[^'\\]|\\.)*'))?\s*;?\s*$",
                             re.IGNORECASE | re.DOTALL)
#: a database or table name as clients write it: bare, in backticks or in double quotes (ClickHouse
#: accepts both quotes; clickhouse-sqlalchemy and Grafana send double quotes)
_NAME = r'[`"]?([A-Za-z0-9_]+)[`"]?'
_SHOW_TABLES = re.compile(
    r"^\s*SHOW\s+(?:FULL\s+)?TABLES(?:\s+(?:FROM|IN)\s+" + _NAME + r")?"
    r"(?:\s+(NOT\s+)?(I?LIKE)\s+('(?:[^'\\]|\\.)*'))?\s*;?\s*$", re.IGNORECASE | re.DOTALL)
_DESCRIBE = re.compile(r"^\s*(?:DESCRIBE|DESC)\s+(?:TABLE\s+)?(?:" + _NAME + r"\.)?" + _NAME + r"\s*;?\s*$",
                       re.IGNORECASE | re.DOTALL)
_EXISTS = re.compile(
    r"^\s*EXISTS\s+(?:(?:TEMPORARY\s+)?TABLE\s+|DATABASE\s+|VIEW\s+|DICTIONARY\s+)?"
    r"(?:" + _NAME + r"\.)?" + _NAME + r"\s*;?\s*$", re.IGNORECASE | re.DOTALL)
_EXISTS_DB = re.compile(r"^\s*EXISTS\s+DATABASE\s+" + _NAME + r"\s*;?\s*$", re.IGNORECASE)
_SHOW_CREATE = re.compile(
    r"^\s*SHOW\s+(?:CREATE\s+(?:TEMPORARY\s+)?(?:TABLE\s+)?|TABLE\s+)(?:" + _NAME + r"\.)?" + _NAME + r"\s*;?\s*$",
    re.IGNORECASE | re.DOTALL)
#: statements that would change the database: dpch answers none (ClickHouse's READONLY, code 164)
_WRITE = re.compile(
    r"^(?:\s+|--[^\n]*(?:\n|$)|/\*.*?\*/)*(INSERT|CREATE|ALTER|DROP|TRUNCATE|RENAME|OPTIMIZE|DELETE|UPDATE|ATTACH|"
    r"DETACH|EXCHANGE|UNDROP|GRANT|REVOKE|KILL|SYSTEM|BACKUP|RESTORE|MOVE|REPLACE)\b(\s+(?:OR\s+REPLACE\s+)?"
    r"(?:TEMPORARY\s+)?(?:MATERIALIZED\s+|LIVE\s+|WINDOW\s+)?(?:VIEW|TABLE|DATABASE|DICTIONARY|FUNCTION|USER|ROLE))?",
    re.IGNORECASE | re.DOTALL)


def _match(pattern: re.Pattern[str], sql: str) -> re.Match[str] | None:
    """``pattern``'s match of ``sql`` if every name in it is quoted evenly (both sides by the same
    quote, or neither): ``_NAME`` alone would also take ``"visits`` or ``"visits```."""
    m = pattern.match(sql)
    if m is None:
        return None
    for g in range(1, (m.re.groups or 0) + 1):
        start, end = m.span(g)
        if start < 0:
            continue
        before = sql[start - 1] if start > 0 else ""
        after = sql[end] if end < len(sql) else ""
        quotes = {before, after} & {"`", '"'}
        if quotes and before != after:
            return None
    return m


def translate_statement(sql: str, catalog: Catalog) -> exp.Select | None:
    """SHOW/DESCRIBE/EXISTS as the equivalent SELECT over system tables, built as a tree (the
    names and patterns the client gave become literals, never SQL text); None for others."""
    if m := _SHOW_DATABASES.match(sql):
        query = _template("SELECT name FROM system.databases ORDER BY name")
        return query.where(_like("name", m.group(1), m.group(2), m.group(3))) if m.group(3) else query
    if m := _match(_SHOW_TABLES, sql):
        db = m.group(1) or catalog.database
        query = _template("SELECT name FROM system.tables ORDER BY name").where(_equals("database", db))
        return query.where(_like("name", m.group(2), m.group(3), m.group(4))) if m.group(4) else query
    if m := _match(_DESCRIBE, sql):
        db, table = m.group(1) or catalog.database, m.group(2)
        _known_table(catalog, db, table)
        query = _template("SELECT name, type, default_kind AS default_type, default_expression, comment, "
                          "compression_codec AS codec_expression, '' AS ttl_expression FROM system.columns "
                          "ORDER BY position")
        return query.where(_equals("database", db)).where(_equals("table", table))
    if m := _match(_SHOW_CREATE, sql):
        db, table = m.group(1) or catalog.database, m.group(2)
        _known_table(catalog, db, table)
        query = _template("SELECT create_table_query AS statement FROM system.tables")
        return query.where(_equals("database", db)).where(_equals("name", table))
    if m := _match(_EXISTS_DB, sql):
        return _template("SELECT toUInt8(count() > 0) AS result FROM system.databases").where(
            _equals("name", m.group(1)))
    if m := _match(_EXISTS, sql):
        db, table = m.group(1) or catalog.database, m.group(2)
        query = _template("SELECT toUInt8(count() > 0) AS result FROM system.tables")
        return query.where(_equals("database", db)).where(_equals("name", table))
    return None


def _known_table(catalog: Catalog, db: str, table: str) -> None:
    if db not in catalog.databases or not any(t[0] == table for t in catalog.tables(db)):
        raise GatewayError(60, PolicyError.kind, f"Table {db}.{table} does not exist (or has no privacy policy)")


def read_only_refusal(sql: str) -> GatewayError | None:
    """The READONLY error (ClickHouse's code 164) for a statement that would write, else None.

    Decided from the statement's first keyword only, before anything is parsed or read."""
    m = _WRITE.match(sql)
    if m is None:
        return None
    what = " ".join((m.group(1) + (m.group(2) or "")).upper().split())
    advice = "send the SELECT itself"
    if what.endswith("VIEW"):
        advice += (" (ibis's con.sql() creates a view first: use the table API, e.g. con.table('visits'), "
                   "or send the query with a plain client)")
    return GatewayError(164, QueryRejected.kind,
                        f"dpch is read-only: {what} is not allowed (dpch answers SELECT queries with differentially "
                        f"private results and never changes the database); {advice}. Data and tables are "
                        "changed by the data owner in ClickHouse itself")


def _template(sql: str) -> exp.Select:
    """One of the constant queries above (dpch's own text, no client input), as a tree."""
    tree = sqlglot.parse_one(sql, read=DIALECT)
    assert isinstance(tree, exp.Select)
    return tree


def _equals(column: str, value: str) -> exp.Expression:
    return exp.column(column).eq(exp.Literal.string(value))


def _like(column: str, negated: str | None, operator: str, pattern: str) -> exp.Expression:
    """``column [NOT] LIKE|ILIKE 'pattern'``; ``pattern`` is the client's quoted literal."""
    try:
        literal = sqlglot.parse_one(pattern, read=DIALECT)
    except SqlglotError:
        literal = None
    if not (isinstance(literal, exp.Literal) and literal.is_string):
        raise GatewayError(62, ParseError.kind, "dpch: the LIKE pattern of SHOW must be one quoted string")
    kind = exp.ILike if operator.upper() == "ILIKE" else exp.Like
    node: exp.Expression = kind(this=exp.column(column), expression=literal)
    return exp.Not(this=node) if negated else node


def _is_metadata_statement(sql: str) -> bool:
    return bool(re.match(r"^\s*(SHOW|DESCRIBE|DESC|EXISTS)\b", sql, re.IGNORECASE))


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
    described = _describe_emulated(sql)
    if described is not None:
        return described
    tree: exp.Expression | None = translate_statement(sql, catalog)
    if tree is None and _is_metadata_statement(sql):
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


def _describe_emulated(sql: str) -> Introspection | None:
    """``DESCRIBE system.tables`` (or an information_schema table): the columns dpch serves in it."""
    m = _match(_DESCRIBE, sql)
    if m is None or m.group(1) is None:
        return None
    db, name = m.group(1), m.group(2)
    if db == "system" and name in SCHEMAS:
        key = name
    elif db.lower() == "information_schema" and name.lower() in INFORMATION_SCHEMA:
        key = INFORMATION_SCHEMA[name.lower()]
    else:
        return None
    columns = ["name", "type", "default_type", "default_expression", "comment", "codec_expression", "ttl_expression"]
    source = rows_source(columns, ["String"] * len(columns), [(c, t, "", "", "", "", "") for c, t in SCHEMAS[key]])
    return Introspection(tree=exp.select(*columns).from_(source), kind="introspection:describe")


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
        inside = next((i for i, cte in enumerate(ctes) if _within(table, cte)), None)
        if inside is None or inside > names.index(table.name):
            refs.append(table)
    return refs


def _within(node: exp.Expression, ancestor: exp.Expression) -> bool:
    parent = node.parent
    while parent is not None:
        if parent is ancestor:
            return True
        parent = parent.parent
    return False


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


#: constructs a metadata query may contain besides allowed functions (each is bounded by the
#: synthetic rows it reads); anything else is refused by name
_STRUCTURE_OK: tuple[type, ...] = (
    exp.Select, exp.Union, exp.From, exp.Where, exp.Group, exp.Having, exp.Order, exp.Ordered, exp.Limit,
    exp.Offset, exp.Distinct, exp.Column, exp.Identifier, exp.Literal, exp.Star, exp.Alias, exp.TableAlias,
    exp.Table, exp.Subquery, exp.With, exp.CTE, exp.Join, exp.Null, exp.Boolean, exp.DataType,
    exp.DataTypeParam, exp.Connector, exp.Binary, exp.Neg, exp.Not, exp.Paren, exp.Tuple, exp.Array,
    exp.Bracket, exp.Dot,
)
#: what a refused construct is called in the error (ClickHouse's words, never sqlglot's)
_CONSTRUCT_NAMES: dict[type, str] = {
    exp.Window: "a window function (OVER)", exp.Lambda: "a lambda function", exp.Interval: "INTERVAL",
    exp.Placeholder: "a query parameter", exp.Parameter: "a query parameter", exp.Var: "a bare keyword",
    exp.Values: "VALUES", exp.Lateral: "LATERAL", exp.Pivot: "PIVOT", exp.Into: "INTO",
}


def _in_table(node: exp.Expression) -> str | None:
    # ClickHouse reads `x IN name` as membership in the table `name`
    return "IN <table> is not allowed in a metadata query" if node.args.get("field") is not None else None


#: what the one ARRAY JOIN a metadata query may have can be built of: the JDBC driver's
#: getPrimaryKeys splits system.tables.primary_key (DatabaseMetaDataImpl, ClickHouse/clickhouse-java)
_SPLIT_NODES: tuple[type, ...] = (exp.Split, exp.Column, exp.Identifier, exp.Literal, exp.Alias, exp.Paren)
_SPLIT_FUNCTIONS = {"arrayzip", "arrayenumerate", "splitbychar", "splitbystring"}


def _array_join(node: exp.Expression) -> str | None:
    """An ARRAY JOIN multiplies rows: allowed once per query and only over the splits of a
    column's text (bounded by the synthetic metadata), never over literal arrays or subqueries."""
    if str(node.args.get("kind") or "").upper() != "ARRAY":
        return None
    joins = [j for j in node.root().find_all(exp.Join) if str(j.args.get("kind") or "").upper() == "ARRAY"]
    parts = list(node.this.walk()) if node.this is not None else []
    split_only = any(isinstance(p, exp.Column) for p in parts) and all(
        isinstance(p, _SPLIT_NODES) or (isinstance(p, exp.Anonymous) and str(p.this).lower() in _SPLIT_FUNCTIONS)
        for p in parts)
    if len(joins) == 1 and not node.args.get("on") and split_only:
        return None
    return ("ARRAY JOIN is not allowed in a metadata query (it multiplies rows) except once over "
            "splitByChar of a column; filter system.tables or system.columns with WHERE instead")


def _values(node: exp.Expression) -> str | None:
    """``VALUES ((...), ...)`` of constants (the JDBC driver's getTypeInfo joins one): its rows are
    the query's own text."""
    constant = (exp.Values, exp.Tuple, exp.Literal, exp.Boolean, exp.Null, exp.Neg, exp.TableAlias, exp.Identifier)
    if all(isinstance(p, constant) for p in node.walk()):
        return None
    return "VALUES is allowed in a metadata query only with constant rows"


def _table_function(node: exp.Expression) -> str | None:
    if isinstance(node.this, exp.Identifier):
        return None
    return (f"table function {_function_name(node.this)} is not allowed in a metadata query; "
            "read system.tables, system.columns, system.databases")


def _row_generator(node: exp.Expression) -> str | None:
    return "function arrayJoin is not allowed in a metadata query (it multiplies rows)"


def _anonymous(node: exp.Expression) -> str | None:
    name = str(node.this)
    if name.lower() == "arrayjoin":
        return _row_generator(node)
    return None if name.lower() in _ANONYMOUS_OK else f"function {name} is not allowed in a metadata query"


#: per node class, the rule that decides it (any other class: :func:`_allowlisted`)
_RULES: dict[type, Callable[[exp.Expression], str | None]] = {
    exp.In: _in_table,
    exp.Join: _array_join,
    exp.Table: _table_function,
    exp.Explode: _row_generator,
    exp.Anonymous: _anonymous,
    exp.Values: _values,
}


def _allowlisted(node: exp.Expression) -> str | None:
    """Functions must be on the typed allowlist, other constructs on the structural one."""
    if isinstance(node, exp.Func) and not isinstance(node, exp.Binary):
        return None if isinstance(node, _TYPED_OK) else \
            f"function {_function_name(node)} is not allowed in a metadata query"
    if isinstance(node, _STRUCTURE_OK):
        return None
    what = next((name for kind, name in _CONSTRUCT_NAMES.items() if isinstance(node, kind)), None)
    snippet = node.sql(dialect=DIALECT)[:60]
    return (f"{what or repr(snippet)} is not allowed in a metadata query "
            "(dpch answers simple SELECTs over system tables)")


def check_allowed(tree: exp.Expression) -> None:
    """Refuses anything outside the metadata allowlist: no row generators (ARRAY JOIN,
    arrayJoin), no table functions, no function that reads a table, a file or the network."""
    for node in tree.walk():
        rule = _RULES.get(type(node), _allowlisted)
        refusal = rule(cast(exp.Expression, node))  # sqlglot 30 types walk() as Expr
        if refusal is not None:
            raise GatewayError(497, QueryRejected.kind, "dpch: " + refusal)


def _function_name(node: exp.Expression) -> str:
    """A function's name as the client wrote it in ClickHouse SQL (``uniq``, not sqlglot's name)."""
    if isinstance(node, exp.Anonymous):
        return str(node.this)
    rendered = node.sql(dialect=DIALECT)
    return rendered.split("(", 1)[0].strip() or "this function"


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
