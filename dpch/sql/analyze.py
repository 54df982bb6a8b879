"""Analyze: a parsed SELECT + the table's policy → a :class:`QueryPlan` with sensitivities.

Supported (the foundation's SQL surface; anything else is rejected with the construct named):

- one private table in FROM (optionally ``db.table`` for the session's database, with an alias);
- SELECT items: ``count(*)``/``count()``, ``count(col)``, ``sum(col)``, ``avg(col)`` on bounded
  numeric columns, and the GROUP BY key columns;
- WHERE over the table's columns with comparisons, AND/OR/NOT, IN lists, BETWEEN, LIKE,
  IS [NOT] NULL, arithmetic and an allowlist of scalar functions;
- GROUP BY public columns whose key domain is declared (``dp: public, values=[...]``);
- ORDER BY output columns and LIMIT/OFFSET, applied to the noisy result (post-processing).

Sensitivity (add/remove one privacy unit, each unit capped at k rows, ALGORITHMS.md part C):
a unit moves ``count`` by at most k in total over all groups, and ``sum`` of a column clamped
to [lo, hi] by at most k·max(|lo|, |hi|). Both bound the ℓ1 and the ℓ2 norm of the change of
the whole vector of groups, since ℓ2 ≤ ℓ1. ``avg`` is released as mid + S/C where S sums the
centred values x − mid (sensitivity k·(hi − lo)/2) and C counts them (sensitivity k).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from sqlglot import exp

from dpch.errors import MissingBoundsError, QueryRejected
from dpch.policy.model import ColumnPolicy, TablePolicy
from dpch.sql.parse import DIALECT, ParsedQuery

#: the largest number of groups a query may release (product of declared key domains)
MAX_GROUPS = 100_000

#: Select clauses dpch understands; any other one is named in the rejection
_CLAUSE_NAMES = {
    "with_": "WITH (common table expressions)",
    "joins": "JOIN",
    "having": "HAVING",
    "prewhere": "PREWHERE",
    "qualify": "QUALIFY",
    "windows": "WINDOW",
    "distinct": "SELECT DISTINCT",
    "sample": "SAMPLE",
    "kind": "this SELECT form",
    "into": "SELECT INTO",
    "locks": "locking clauses",
    "cluster": "CLUSTER BY",
    "distribute": "DISTRIBUTE BY",
    "sort": "SORT BY",
    "connect": "CONNECT BY",
    "match": "MATCH_RECOGNIZE",
    "laterals": "LATERAL",
    "pivots": "PIVOT",
    "operation_modifiers": "query modifiers",
    "exclude": "EXCLUDE",
}
_SUPPORTED_CLAUSES = {"expressions", "from_", "where", "group", "order", "limit", "offset", "settings"}

#: scalar functions allowed in WHERE: deterministic, total (never raise on a row's value: an
#: error that depends on one row would leak it, whatever the charge), and cheap. Conversions
#: that can fail (toInt64, CAST, integer modulo) are left out; their *OrNull forms are in.
ALLOWED_FUNCTIONS = frozenset(
    {
        "abs", "lower", "upper", "length", "lengthutf8", "empty", "notempty", "startswith",
        "endswith", "position", "positioncaseinsensitive", "substring", "concat", "trim",
        "round", "floor", "ceil", "least", "greatest", "tostring", "tofloat64ornull",
        "toint64ornull", "todateornull", "toyear", "tomonth", "todayofmonth", "todayofweek",
        "tohour",
        "tostartofmonth", "tostartofyear", "tostartofweek", "tostartofday", "isnull",
        "isnotnull", "coalesce", "ifnull", "if", "multiif", "match", "like", "ilike",
        "has", "in", "notin", "datetrunc", "date_trunc", "year", "month", "day", "sqrt", "exp",
        "ln", "log", "log2", "log10", "pow", "power", "sign",
    }
)

#: expression node types allowed in WHERE besides functions
_ALLOWED_NODES: tuple[type[exp.Expression], ...] = (
    exp.Column, exp.Identifier, exp.Literal, exp.Boolean, exp.Null, exp.Paren, exp.Tuple,
    exp.And, exp.Or, exp.Not, exp.Xor, exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE,
    exp.NullSafeEQ, exp.NullSafeNEQ, exp.In, exp.Between, exp.Like, exp.ILike, exp.Is,
    exp.Add, exp.Sub, exp.Mul, exp.Div, exp.Neg, exp.DataType,
    exp.Case, exp.If, exp.Var, exp.Interval, exp.Array,
)
_AGGREGATE_NAMES = {"count", "sum", "avg", "min", "max", "quantile", "median", "uniq", "any",
                    "stddevpop", "stddevsamp", "varpop", "varsamp", "grouparray", "argmax",
                    "argmin", "countif", "sumif", "avgif", "uniqexact", "anylast", "topk"}

MeasureKind = Literal["count", "sum"]
OutputKind = Literal["key", "count", "sum", "avg"]


@dataclass(frozen=True)
class Measure:
    """One noisy aggregate: a ClickHouse aggregate over the capped rows, per group.

    ``sensitivity`` bounds both the ℓ1 and ℓ2 norm of the change of the vector of this
    measure over all groups when one unit is added or removed. ``derivation`` says why.
    """

    name: str
    kind: MeasureKind
    sql: str
    sensitivity: float
    integer: bool
    derivation: str


@dataclass(frozen=True)
class GroupKey:
    """A GROUP BY key: a public column and its declared domain."""

    name: str
    column: str
    values: tuple[Any, ...]


@dataclass(frozen=True)
class OutputColumn:
    """A column of the result: a key, or a statistic computed from measures after noise."""

    name: str
    kind: OutputKind
    key_index: int | None = None
    measure: str | None = None
    count_measure: str | None = None
    bounds: tuple[float, float] | None = None


@dataclass(frozen=True)
class OrderItem:
    output_index: int
    descending: bool


@dataclass(frozen=True)
class QueryPlan:
    """Everything needed to emit SQL, calibrate noise, and post-process, with no data read."""

    query: ParsedQuery
    table: TablePolicy
    keys: tuple[GroupKey, ...]
    measures: tuple[Measure, ...]
    outputs: tuple[OutputColumn, ...]
    where: exp.Expression | None
    needed_columns: tuple[str, ...]
    order: tuple[OrderItem, ...] = ()
    limit: int | None = None
    offset: int = 0
    group_domain: tuple[tuple[Any, ...], ...] = field(default=((),))

    @property
    def columns(self) -> list[str]:
        return [o.name for o in self.outputs]


def analyze(parsed: ParsedQuery, table_policy: Callable[[str], TablePolicy], database: str) -> QueryPlan:
    """Checks ``parsed`` against the policy and derives every measure's sensitivity."""
    select = parsed.select
    for key, value in select.args.items():
        if value in (None, [], False) or key in _SUPPORTED_CLAUSES:
            continue
        name = _CLAUSE_NAMES.get(key, key.upper())
        raise QueryRejected(f"{name} is not supported", hint=_clause_hint(key))

    policy = _resolve_table(select, table_policy, database)
    alias = _table_alias(select)
    resolver = _ColumnResolver(policy, alias)
    where = select.args.get("where")
    where_expr = where.this if where is not None else None
    if where_expr is not None:
        _check_where(where_expr, resolver)

    keys = _group_keys(select, resolver)
    builder = _MeasureBuilder(policy)
    outputs: list[OutputColumn] = []
    for item in select.expressions:
        outputs.append(_output_column(item, keys, resolver, builder))
    if not any(o.kind != "key" for o in outputs):
        raise QueryRejected(
            "the query has no aggregate: dpch releases only noisy aggregates, never rows",
            hint="e.g. SELECT count(*) FROM table, or GROUP BY a public column with count(*)",
        )
    names = [o.name for o in outputs]
    if len(set(names)) != len(names):
        raise QueryRejected("two result columns have the same name", hint="give them distinct aliases")

    domain = tuple(itertools.product(*(k.values for k in keys))) if keys else ((),)
    if len(domain) > MAX_GROUPS:
        raise QueryRejected(
            f"GROUP BY would release {len(domain)} groups, more than the limit of {MAX_GROUPS}",
            hint="group by fewer columns",
        )
    needed = set(resolver.used)
    if policy.privacy_unit:
        needed.add(policy.privacy_unit)
    if policy.unit_ordered and not policy.unique_units:
        needed.update(policy.sorting_key)  # LIMIT BY follows the stored order (see rewrite)
    order = _order_items(select, outputs, keys)
    limit, offset = _limit(select)
    return QueryPlan(
        query=parsed,
        table=policy,
        keys=tuple(keys),
        measures=tuple(builder.measures.values()),
        outputs=tuple(outputs),
        where=where_expr,
        needed_columns=tuple(sorted(needed)),
        order=order,
        limit=limit,
        offset=offset,
        group_domain=domain,
    )


# -- FROM ----------------------------------------------------------------------------------------


def _resolve_table(select: exp.Select, table_policy: Callable[[str], TablePolicy], database: str) -> TablePolicy:
    from_ = select.args.get("from_")
    if from_ is None:
        raise QueryRejected("the query has no FROM clause", hint="name the private table to aggregate")
    source = from_.this
    if isinstance(source, exp.Final):
        raise QueryRejected("FINAL is not supported", hint="query the table without FINAL")
    if isinstance(source, exp.Subquery):
        raise QueryRejected("subqueries in FROM are not supported yet", hint="query the table directly")
    if not isinstance(source, exp.Table) or not isinstance(source.this, exp.Identifier):
        raise QueryRejected(
            "table functions (url, file, s3, remote, numbers, …) are not allowed",
            hint="query a table of the database that has a privacy policy",
        )
    for arg, value in source.args.items():
        if arg in ("this", "db", "alias") or value in (None, [], False):
            continue
        construct = {"final": "FINAL", "sample": "SAMPLE", "joins": "JOIN"}.get(arg, arg.upper())
        raise QueryRejected(f"{construct} on a table is not supported")
    db = source.args.get("db")
    if source.args.get("catalog") is not None:
        raise QueryRejected("catalog-qualified table names are not supported")
    if db is not None:
        db_name = db.name
        if db_name.lower() in ("system", "information_schema"):
            raise QueryRejected(
                f"{db_name} tables are not queryable through dpch",
                hint="use `dpch policy show` to see the tables and columns you can query",
            )
        if db_name != database:
            raise QueryRejected(
                f"table {db_name}.{source.name} is outside the database dpch serves ({database})",
                hint="connect to that database instead",
            )
    policy = table_policy(source.name)
    if not policy.private:
        if policy.public:
            raise QueryRejected(
                f"table {source.name} is a public table; dpch answers queries on private tables",
                hint="query public tables directly in ClickHouse, or join them to a private table",
            )
        raise QueryRejected(
            f"table {source.name} has no privacy policy",
            hint="the data owner must annotate it: COMMENT 'dp: privacy_unit=COL, max_rows_per_unit=K'",
        )
    return policy


def _table_alias(select: exp.Select) -> str | None:
    table = select.args["from_"].this
    return table.alias or None


class _ColumnResolver:
    """Resolves column references against the one table, recording which columns are used."""

    def __init__(self, policy: TablePolicy, alias: str | None) -> None:
        self.policy = policy
        self.qualifiers = {policy.table.lower()} | ({alias.lower()} if alias else set())
        self.used: set[str] = set()

    def column(self, col: exp.Column) -> ColumnPolicy:
        if col.args.get("db") is not None or col.args.get("catalog") is not None:
            raise QueryRejected(f"column {col.sql(DIALECT)}: qualify columns with the table name only")
        qualifier = col.table
        if qualifier and qualifier.lower() not in self.qualifiers:
            raise QueryRejected(f"column {col.sql(DIALECT)} refers to an unknown table {qualifier!r}")
        if isinstance(col.this, exp.Star):
            raise QueryRejected(
                "SELECT * releases rows; dpch releases only noisy aggregates",
                hint="e.g. SELECT count(*) FROM table",
            )
        try:
            policy = self.policy.column(col.name)
        except Exception:
            raise QueryRejected(
                f"table {self.policy.table} has no column {col.name!r}",
                hint=f"columns are {', '.join(self.policy.columns)}",
            ) from None
        self.used.add(policy.name)
        return policy


# -- WHERE ---------------------------------------------------------------------------------------


def _check_where(node: exp.Expression, resolver: _ColumnResolver) -> None:
    for sub in node.walk():
        if isinstance(sub, exp.Select | exp.Subquery):
            raise QueryRejected("subqueries in WHERE are not supported", hint="filter with literal values")
        if isinstance(sub, exp.AggFunc) or _function_name(sub) in _AGGREGATE_NAMES:
            raise QueryRejected(
                "aggregate functions are not allowed in WHERE", hint="filter on columns, not aggregates"
            )
        if isinstance(sub, exp.Window):
            raise QueryRejected("window functions are not supported")
        if isinstance(sub, exp.Column):
            resolver.column(sub)
            continue
        if isinstance(sub, _ALLOWED_NODES):
            continue
        if isinstance(sub, exp.Func):
            name = _function_name(sub)
            if name not in ALLOWED_FUNCTIONS:
                raise QueryRejected(
                    f"function {name}() is not allowed in dpch queries",
                    hint="functions that can fail, sleep, or read outside the table are refused; "
                    "use comparisons and common scalar functions",
                )
            continue
        raise QueryRejected(f"{sub.key.upper()} expressions are not supported in WHERE")


def _function_name(node: exp.Expression) -> str:
    if isinstance(node, exp.Anonymous):
        return str(node.this).lower()
    if isinstance(node, exp.Func):
        return node.sql_name().lower()
    return ""


# -- GROUP BY ------------------------------------------------------------------------------------


def _group_keys(select: exp.Select, resolver: _ColumnResolver) -> list[GroupKey]:
    group = select.args.get("group")
    if group is None:
        return []
    for key in ("rollup", "cube", "grouping_sets", "totals"):
        if group.args.get(key):
            raise QueryRejected(f"GROUP BY {key.upper().replace('_', ' ')} is not supported")
    aliases = {item.alias: item.this for item in select.expressions if isinstance(item, exp.Alias)}
    keys: list[GroupKey] = []
    for expr in group.expressions:
        if isinstance(expr, exp.Literal) and not expr.is_string:
            position = int(expr.this)
            if not 1 <= position <= len(select.expressions):
                raise QueryRejected(f"GROUP BY {position} is out of range")
            expr = select.expressions[position - 1].unalias()
        elif isinstance(expr, exp.Column) and not expr.table and expr.name in aliases:
            if not _is_table_column(expr, resolver):
                expr = aliases[expr.name]
        if not isinstance(expr, exp.Column):
            raise QueryRejected(
                f"GROUP BY {expr.sql(DIALECT)}: only plain columns can be grouped by for now",
                hint="group by a public column with declared values",
            )
        col = resolver.column(expr)
        if not col.public:
            raise QueryRejected(
                f"GROUP BY {col.name}: the column is private, so its values cannot be released",
                hint="group by a public column; private keys need partition selection (not yet supported)",
            )
        if col.values is None:
            raise QueryRejected(
                f"GROUP BY {col.name}: the public column has no declared key domain",
                hint=f"the data owner declares it: COMMENT 'dp: public, values=[...]' on {col.name}",
            )
        if any(k.column == col.name for k in keys):
            raise QueryRejected(f"GROUP BY {col.name} is listed twice")
        keys.append(GroupKey(name=col.name, column=col.name, values=col.values))
    return keys


def _is_table_column(col: exp.Column, resolver: _ColumnResolver) -> bool:
    return col.name in resolver.policy.columns


# -- SELECT items --------------------------------------------------------------------------------


class _MeasureBuilder:
    """Creates measures, sharing identical ones (e.g. a count used by count(*) and avg)."""

    def __init__(self, policy: TablePolicy) -> None:
        self.policy = policy
        self.cap = policy.contribution_cap
        self.measures: dict[str, Measure] = {}

    def _add(self, kind: MeasureKind, sql: str, sensitivity: float, integer: bool, derivation: str) -> str:
        for measure in self.measures.values():
            if measure.sql == sql:
                return measure.name
        name = f"m{len(self.measures)}"
        self.measures[name] = Measure(name, kind, sql, sensitivity, integer, derivation)
        return name

    def count(self, column: ColumnPolicy | None) -> str:
        nullable = column is not None and column.type.startswith("Nullable")
        sql = f"count({_quote(column.name)})" if nullable else "count()"
        what = f"count({column.name})" if nullable else "count(*)"
        return self._add("count", sql, float(self.cap), True, f"{what}: one unit adds at most {self.cap} rows")

    def sum(self, column: ColumnPolicy, *, centred: bool) -> str:
        lo, hi = _bounds(column, "sum" if not centred else "avg")
        clamped = f"least(greatest({_quote(column.name)}, {_num(lo)}), {_num(hi)})"
        if centred:
            mid = (lo + hi) / 2.0
            sql = f"sum(toFloat64({clamped}) - {_num(mid)})"
            sens = self.cap * (hi - lo) / 2.0
            derivation = (
                f"sum({column.name} − {_num(mid)}) clamped to [{_num(lo)}, {_num(hi)}]: "
                f"{self.cap} rows × {_num((hi - lo) / 2.0)}"
            )
            return self._add("sum", sql, sens, False, derivation)
        integer = column.integer and float(lo).is_integer() and float(hi).is_integer()
        sql = f"sum({clamped})" if integer else f"sum(toFloat64({clamped}))"
        sens = self.cap * max(abs(lo), abs(hi))
        derivation = (
            f"sum({column.name}) clamped to [{_num(lo)}, {_num(hi)}]: "
            f"{self.cap} rows × max(|lo|, |hi|) = {self.cap} × {_num(max(abs(lo), abs(hi)))}"
        )
        return self._add("sum", sql, sens, integer, derivation)


def _output_column(item: exp.Expression, keys: list[GroupKey], resolver: _ColumnResolver,
                   builder: _MeasureBuilder) -> OutputColumn:
    expr = item.unalias() if isinstance(item, exp.Alias) else item
    name = item.alias if isinstance(item, exp.Alias) and item.alias else item.sql(DIALECT)
    if isinstance(expr, exp.Star):
        raise QueryRejected(
            "SELECT * releases rows; dpch releases only noisy aggregates",
            hint="e.g. SELECT count(*) FROM table",
        )
    if isinstance(expr, exp.Window):
        raise QueryRejected("window functions (OVER) are not supported")
    if isinstance(expr, exp.Column):
        col = resolver.column(expr)
        for index, key in enumerate(keys):
            if key.column == col.name:
                return OutputColumn(name=name, kind="key", key_index=index)
        raise QueryRejected(
            f"column {col.name} is selected but not aggregated or grouped by",
            hint=f"wrap it in an aggregate or GROUP BY {col.name} (public columns only)",
        )
    if isinstance(expr, exp.Count):
        arg = expr.this
        if isinstance(arg, exp.Distinct):
            raise QueryRejected(
                "COUNT(DISTINCT ...) is not supported yet", hint="use count(*) or count(column)"
            )
        if arg is None or isinstance(arg, exp.Star):
            return OutputColumn(name=name, kind="count", measure=builder.count(None))
        return OutputColumn(name=name, kind="count", measure=builder.count(_plain_column(arg, "count", resolver)))
    if isinstance(expr, exp.Sum):
        col = _plain_column(expr.this, "sum", resolver)
        return OutputColumn(name=name, kind="sum", measure=builder.sum(col, centred=False))
    if isinstance(expr, exp.Avg):
        col = _plain_column(expr.this, "avg", resolver)
        sum_name = builder.sum(col, centred=True)
        count_name = builder.count(col)
        return OutputColumn(name=name, kind="avg", measure=sum_name, count_measure=count_name,
                            bounds=col.bounds)
    fname = _function_name(expr)
    if fname in _AGGREGATE_NAMES or isinstance(expr, exp.AggFunc):
        raise QueryRejected(
            f"aggregate {fname or expr.key}() is not supported yet",
            hint="supported aggregates: count(*), count(col), sum(col), avg(col)",
        )
    if expr.find(exp.AggFunc) is not None:
        raise QueryRejected(
            f"expressions over aggregates ({expr.sql(DIALECT)}) are not supported yet",
            hint="select the aggregate itself and compute on the released value",
        )
    raise QueryRejected(
        f"select item {expr.sql(DIALECT)} is not an aggregate or a GROUP BY key",
        hint="dpch releases noisy aggregates: count, sum, avg, grouped by public columns",
    )


def _plain_column(arg: exp.Expression | None, func: str, resolver: _ColumnResolver) -> ColumnPolicy:
    if isinstance(arg, exp.Distinct):
        raise QueryRejected(f"{func.upper()}(DISTINCT ...) is not supported")
    if not isinstance(arg, exp.Column):
        shown = arg.sql(DIALECT) if arg is not None else ""
        raise QueryRejected(
            f"{func}({shown}): aggregates take a plain column for now",
            hint=f"write {func}(column); expressions inside aggregates are not yet supported",
        )
    col = resolver.column(arg)
    if col.name == resolver.policy.privacy_unit and func != "count":
        raise QueryRejected(f"{func}() of the privacy unit column is not meaningful")
    return col


def _bounds(col: ColumnPolicy, func: str) -> tuple[float, float]:
    if not col.numeric:
        raise QueryRejected(f"{func}({col.name}): the column is not numeric (type {col.type})")
    if col.bounds is None:
        raise MissingBoundsError(
            f"{func}({col.name}) needs bounds on {col.name}, and it has none",
            hint=f"the data owner adds them: ALTER TABLE ... COMMENT COLUMN {col.name} "
            f"'dp: bounds=[lo, hi]' (or in the policy TOML)",
        )
    return col.bounds


# -- ORDER BY / LIMIT (post-processing on noisy values) ------------------------------------------


def _order_items(select: exp.Select, outputs: list[OutputColumn], keys: list[GroupKey]) -> tuple[OrderItem, ...]:
    order = select.args.get("order")
    if order is None:
        return ()
    items = []
    texts = {item.unalias().sql(DIALECT): i for i, item in enumerate(select.expressions)}
    names = {o.name: i for i, o in enumerate(outputs)}
    for ordered in order.expressions:
        target = ordered.this
        if isinstance(target, exp.Literal) and not target.is_string:
            index = int(target.this) - 1
            if not 0 <= index < len(outputs):
                raise QueryRejected(f"ORDER BY {target.this} is out of range")
        elif isinstance(target, exp.Column) and not target.table and target.name in names:
            index = names[target.name]
        elif target.sql(DIALECT) in texts:
            index = texts[target.sql(DIALECT)]
        else:
            raise QueryRejected(
                f"ORDER BY {target.sql(DIALECT)}: can only order by a result column",
                hint="order by an alias or position of the SELECT list (sorting happens after noise)",
            )
        if ordered.args.get("with_fill"):
            raise QueryRejected("ORDER BY ... WITH FILL is not supported")
        items.append(OrderItem(index, bool(ordered.args.get("desc"))))
    return tuple(items)


def _limit(select: exp.Select) -> tuple[int | None, int]:
    limit = select.args.get("limit")
    offset_node = select.args.get("offset")
    value = None
    if limit is not None:
        if limit.args.get("expressions"):
            raise QueryRejected("LIMIT BY is not supported", hint="use LIMIT n")
        value = _non_negative_int(limit.expression, "LIMIT")
        if limit.args.get("offset") is not None:
            offset_node = limit.args["offset"]
    offset = 0
    if offset_node is not None:
        offset = _non_negative_int(getattr(offset_node, "expression", offset_node), "OFFSET")
    return value, offset


def _non_negative_int(node: exp.Expression | None, what: str) -> int:
    if isinstance(node, exp.Literal) and not node.is_string and node.this.isdigit():
        return int(node.this)
    raise QueryRejected(f"{what} must be a whole number literal")


def _clause_hint(key: str) -> str | None:
    return {
        "joins": "query one private table; joins come in a later version",
        "having": "filter the released rows client-side; HAVING comes in a later version",
        "with_": "inline the subquery's filter into WHERE",
        "distinct": "use GROUP BY on a public column",
        "prewhere": "use WHERE",
    }.get(key)


def _quote(name: str) -> str:
    return "`" + name.replace("`", "\\`") + "`"


def _num(x: float) -> str:
    return repr(int(x)) if float(x).is_integer() and abs(x) < 2**53 else repr(float(x))
