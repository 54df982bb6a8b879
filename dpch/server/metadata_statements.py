"""Metadata statements as ClickHouse clients write them: SHOW DATABASES/TABLES, SHOW CREATE TABLE,
DESCRIBE, EXISTS — each translated into the equivalent SELECT over the emulated system tables, as a
sqlglot tree (the names and patterns the client gave become literals, never SQL text) — and the
statements that would write, refused as ClickHouse's READONLY error before anything is parsed.
"""

from __future__ import annotations

import re

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

from dpch.errors import ParseError, PolicyError, QueryRejected
from dpch.server.catalog_tables import INFORMATION_SCHEMA, LEDGER_VIEWS, SCHEMAS, Catalog
from dpch.server.errors import GatewayError
from dpch.server.formats import rows_source
from dpch.sql.parse import DIALECT

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


def is_metadata_statement(sql: str) -> bool:
    """Whether ``sql`` is a SHOW, DESCRIBE or EXISTS statement (supported or not)."""
    return bool(re.match(r"^\s*(SHOW|DESCRIBE|DESC|EXISTS)\b", sql, re.IGNORECASE))


def show_ledger_views(sql: str, catalog: Catalog) -> exp.Select | None:
    """``SHOW TABLES FROM dpch``: the ledger views (:mod:`.ledger_views`), unless a served database
    is itself called ``dpch``."""
    m = _match(_SHOW_TABLES, sql)
    if m is None or (m.group(1) or "").lower() != "dpch" or m.group(1) in catalog.databases:
        return None
    views = exp.select("name").from_(rows_source(["name"], ["String"], [(v,) for v in LEDGER_VIEWS]))
    return views.where(_like("name", m.group(2), m.group(3), m.group(4))) if m.group(4) else views


def describe_emulated(sql: str) -> exp.Select | None:
    """``DESCRIBE system.tables`` (or an information_schema table): the columns dpch serves in it."""
    m = _match(_DESCRIBE, sql)
    if m is None or m.group(1) is None:
        return None
    db, name = m.group(1), m.group(2)
    if db == "system" and name in SCHEMAS:
        schema = SCHEMAS[name]
    elif db.lower() == "information_schema" and name.lower() in INFORMATION_SCHEMA:
        schema = SCHEMAS[INFORMATION_SCHEMA[name.lower()]]
    elif db.lower() == "dpch" and name.lower() in LEDGER_VIEWS:  # the analyst's own budget and releases
        schema = LEDGER_VIEWS[name.lower()]
    else:
        return None
    columns = ["name", "type", "default_type", "default_expression", "comment", "codec_expression", "ttl_expression"]
    source = rows_source(columns, ["String"] * len(columns), [(c, t, "", "", "", "", "") for c, t in schema])
    return exp.select(*columns).from_(source)
