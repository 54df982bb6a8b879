"""What a metadata query may contain: the functions and constructs allowed over the synthetic
system tables. None of them reads a table, a file, a dictionary or the network, and the ones that
multiply rows are refused (or bounded: one ARRAY JOIN over a column's splits, VALUES of constants).
Each refusal names the construct in ClickHouse's words.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import cast

from sqlglot import exp

from dpch.errors import QueryRejected
from dpch.server.errors import GatewayError
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
