"""FROM: tables, joins, subqueries and CTEs resolved into one :class:`Relation` of capped rows.

What a query may read, and the sensitivity rule for each:

- one private table: each unit contributes at most k rows (``LIMIT k BY unit``);
- ``JOIN`` a public table (no personal data): emitted as ``ANY`` join, so each source row meets
  at most one dimension row and the rows per unit stay ≤ k;
- ``JOIN`` a second private table **on the two privacy-unit columns**: each side is capped
  first (k1, k2 rows per unit), so the joined rows per unit are ≤ k1·k2; the tables' units
  must be the same people (the ON clause asserts it);
- a subquery or CTE that filters and projects one private source (no aggregation, DISTINCT,
  LIMIT or GROUP BY): it keeps one row per source row, so it is inlined (its WHERE joins
  the outer one; its expressions become derived columns with bounds by interval arithmetic).

The rows then reach the aggregates through one inner SELECT with columns ``c0, c1, …``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace

from sqlglot import exp

from dpch.engine import quote_identifier
from dpch.errors import DpchError, QueryRejected
from dpch.policy.model import ColumnPolicy, TablePolicy, base_type, is_integer_type
from dpch.sql.bounds import ColumnRef, Interval, ValueTranslator, condition_sql
from dpch.sql.parse import DIALECT

TableLookup = Callable[[str], TablePolicy]


quote = quote_identifier  # one quoting rule for every identifier dpch emits


@dataclass(frozen=True)
class SourceColumn:
    """A column visible to the query, with the SQL that reads it from the source rows."""

    name: str
    qualifiers: frozenset[str]
    base_sql: str
    type: str
    bounds: Interval | None
    integer: bool
    public: bool = False
    values: tuple | None = None
    is_unit: bool = False
    public_table: str | None = None
    date_bounds: tuple | None = None

    def ref(self, sql: str) -> ColumnRef:
        return ColumnRef(sql=sql, name=self.name, type=self.type, bounds=self.bounds, integer=self.integer,
                         is_unit=self.is_unit)


@dataclass
class Relation:
    """The rows an aggregate reads: columns, FROM SQL, filters, and the contribution cap."""

    columns: list[SourceColumn]
    from_sql: str
    unit_sql: str
    cap: int
    tables: list[TablePolicy]
    conditions: list[str] = field(default_factory=list)
    needs_cap: bool = True
    order_sql: str | None = None
    max_groups_per_unit: int | None = None
    unit_name: str = ""

    def resolve(self, col: exp.Column) -> SourceColumn:
        """Finds a column by name and optional qualifier; ambiguous or unknown names are errors."""
        if isinstance(col.this, exp.Star):
            raise QueryRejected("SELECT * releases rows; dpch releases only noisy aggregates",
                                hint="e.g. SELECT count(*) FROM table")
        name, qualifier = col.name, (col.table or "").lower()
        matches = [c for c in self.columns if c.name == name and (not qualifier or qualifier in c.qualifiers)]
        if not matches:
            matches = [c for c in self.columns if c.name.lower() == name.lower()
                       and (not qualifier or qualifier in c.qualifiers)]
        if not matches:
            shown = f"{col.table}.{name}" if col.table else name
            known = sorted({c.name for c in self.columns})
            raise QueryRejected(f"no column {shown!r} in the query's tables", hint=f"columns are {', '.join(known)}")
        if len(matches) > 1:
            raise QueryRejected(f"column {name!r} is ambiguous", hint="qualify it with the table name or alias")
        return matches[0]

    @property
    def dataset(self) -> str:
        return "+".join(self.datasets)

    @property
    def datasets(self) -> tuple[str, ...]:
        """The private tables read, each once (a self-join reads one dataset): each one's dataset
        budget admits and counts the release (DESIGN.md rule 8)."""
        return tuple(dict.fromkeys(t.table for t in self.tables if t.private))


class RelationBuilder:
    """Builds a :class:`Relation` from a SELECT's FROM, JOINs and WITH."""

    def __init__(self, lookup: TableLookup, database: str) -> None:
        self.lookup = lookup
        self.database = database
        self._aliases = 0

    def build(self, select: exp.Select, ctes: dict[str, exp.Select] | None = None) -> Relation:
        ctes = dict(ctes or {})
        with_ = select.args.get("with_")
        if with_ is not None:
            if with_.args.get("recursive"):
                raise QueryRejected("WITH RECURSIVE is not supported")
            for cte in with_.expressions:
                body = cte.this
                if not isinstance(body, exp.Select):
                    raise QueryRejected(f"CTE {cte.alias}: only a SELECT can be used in WITH")
                ctes[cte.alias] = body
        from_ = select.args.get("from_")
        if from_ is None:
            raise QueryRejected("the query has no FROM clause", hint="name the private table to aggregate")
        relation = self._source(from_.this, ctes)
        for join in select.args.get("joins") or []:
            relation = self._join(relation, join, ctes)
        return relation

    # -- sources -----------------------------------------------------------------------------------

    def _source(self, source: exp.Expression, ctes: dict[str, exp.Select]) -> Relation:
        if isinstance(source, exp.Final):
            raise QueryRejected("FINAL is not supported", hint="query the table without FINAL")
        if isinstance(source, exp.Subquery):
            if not isinstance(source.this, exp.Select):
                raise QueryRejected("only a SELECT can be used as a subquery in FROM")
            return self._derived(source.this, source.alias or None, ctes)
        if not isinstance(source, exp.Table) or not isinstance(source.this, exp.Identifier):
            raise QueryRejected("table functions (url, file, s3, remote, numbers, …) are not allowed",
                                hint="query a table of the database that has a privacy policy")
        for arg, value in source.args.items():
            if arg in ("this", "db", "alias") or value in (None, [], False):
                continue
            construct = {"final": "FINAL", "sample": "SAMPLE", "joins": "JOIN"}.get(arg, arg.upper())
            raise QueryRejected(f"{construct} on a table is not supported")
        if source.args.get("catalog") is not None:
            raise QueryRejected("catalog-qualified table names are not supported")
        db = source.args.get("db")
        if db is None and source.name in ctes:
            return self._derived(ctes[source.name], source.alias or source.name, ctes)
        if db is not None:
            if db.name.lower() in ("system", "information_schema"):
                raise QueryRejected(f"{db.name} tables are not queryable through dpch",
                                    hint="use `dpch policy show` to see the tables and columns you can query")
            if db.name != self.database:
                raise QueryRejected(f"table {db.name}.{source.name} is outside the database dpch serves "
                                    f"({self.database})", hint="connect to that database instead")
        try:
            policy = self.lookup(source.name)
        except DpchError:
            raise
        return self._table(policy, source.alias or None)

    def _alias(self) -> str:
        alias = f"t{self._aliases}"
        self._aliases += 1
        return alias

    def _table(self, policy: TablePolicy, alias: str | None) -> Relation:
        if not policy.private:
            if policy.public:
                raise QueryRejected(
                    f"table {policy.table} is a public table; dpch answers queries on private tables",
                    hint="query public tables directly in ClickHouse, or join them to a private table")
            raise QueryRejected(f"table {policy.table} has no privacy policy",
                                hint="the data owner must annotate it: COMMENT 'dp: privacy_unit=COL, "
                                "max_rows_per_unit=K'")
        inner = self._alias()
        qualifiers = frozenset({inner, (alias or policy.table).lower()})  # an alias hides the table name
        columns = [_column(policy, c, f"{inner}.{quote(c.name)}", qualifiers) for c in policy.columns.values()]
        unit_sql = f"{inner}.{quote(policy.privacy_unit or '')}"
        order = None
        if policy.unit_ordered and not policy.unique_units:
            order = ", ".join(f"{inner}.{quote(c)}" for c in policy.sorting_key)
        # NULL units: rows whose unit is NULL belong to no known person. Capped together they would
        # act as one "person" whose k kept rows an added NULL-unit row could replace (moving a sum by
        # 2·k·max|v| against a sensitivity of k·max|v|), so they are excluded from every private query
        conditions = [f"{unit_sql} IS NOT NULL"] if policy.nullable_unit else []
        return Relation(
            columns=columns,
            from_sql=f"{quote(self.database)}.{quote(policy.table)} AS {inner}",
            unit_sql=unit_sql,
            cap=policy.contribution_cap,
            tables=[policy],
            conditions=conditions,
            needs_cap=not policy.unique_units,
            order_sql=order,
            max_groups_per_unit=policy.max_groups_per_unit,
            unit_name=policy.privacy_unit or "",
        )

    def _derived(self, select: exp.Select, alias: str | None, ctes: dict[str, exp.Select]) -> Relation:
        """A subquery/CTE that keeps one row per source row, inlined into the outer query."""
        for key, value in select.args.items():
            if value in (None, [], False) or key in ("expressions", "from_", "where", "joins", "with_"):
                continue
            construct = {"group": "GROUP BY", "having": "HAVING", "limit": "LIMIT", "offset": "OFFSET",
                         "distinct": "DISTINCT", "order": "ORDER BY", "settings": "SETTINGS"}.get(key, key.upper())
            raise QueryRejected(
                f"{construct} inside a subquery or CTE is not supported",
                hint="subqueries may filter and project rows only (one output row per source row)")
        inner = self.build(select, ctes)
        if select.args.get("where") is not None:
            inner.conditions.append(condition_sql(select.args["where"].this, lambda c: _base_ref(inner, c)))
        qualifiers = frozenset({alias.lower()} if alias else set())
        columns: list[SourceColumn] = []
        for item in select.expressions:
            if isinstance(item, exp.Star) or (isinstance(item, exp.Column) and isinstance(item.this, exp.Star)):
                columns.extend(replace(c, qualifiers=qualifiers | c.qualifiers) for c in inner.columns)
                continue
            expr = item.unalias() if isinstance(item, exp.Alias) else item
            if expr.find(exp.AggFunc) is not None or isinstance(expr, exp.Window) or expr.find(exp.Window):
                raise QueryRejected("aggregates or window functions inside a subquery are not supported",
                                    hint="subqueries may filter and project rows only")
            name = item.alias if isinstance(item, exp.Alias) else expr.sql(DIALECT)
            if isinstance(expr, exp.Column):
                source = inner.resolve(expr)
                columns.append(replace(source, name=name, qualifiers=qualifiers))
                continue
            columns.append(_derived_column(inner, expr, name, qualifiers))
        names = [c.name for c in columns]
        if len(set(names)) != len(names):
            raise QueryRejected("a subquery has two columns with the same name", hint="give them distinct aliases")
        # the unit need not be projected: the cap is applied to the source rows, by the source unit
        inner.columns = columns
        return inner

    # -- joins -------------------------------------------------------------------------------------

    def _join(self, left: Relation, join: exp.Join, ctes: dict[str, exp.Select]) -> Relation:
        kind = (join.args.get("kind") or "").upper()
        side = (join.args.get("side") or "").upper()
        strictness = (join.args.get("strictness") or "").upper() if isinstance(join.args.get("strictness"), str) else ""
        if kind in ("CROSS", "OUTER", "SEMI", "ANTI", "ARRAY") or side in ("RIGHT", "FULL") or join.args.get("global"):
            construct = " ".join(p for p in (side, kind, "JOIN") if p)
            raise QueryRejected(f"{construct} is not supported",
                                hint="use [LEFT] JOIN with a public table, or JOIN two private tables on their units")
        del strictness
        target = join.this
        if not isinstance(target, exp.Table) or not isinstance(target.this, exp.Identifier) or target.args.get("db"):
            raise QueryRejected("joins are supported with tables of the database only (not subqueries)")
        if target.name in ctes:
            raise QueryRejected("joining a CTE is not supported", hint="join the table itself")
        policy = self.lookup(target.name)
        alias = target.alias or None
        on = join.args.get("on")
        using = join.args.get("using")
        if on is None and not using:
            raise QueryRejected("a JOIN needs an ON or USING condition")
        if policy.private:
            return self._private_join(left, policy, alias, on, using, side)
        if not policy.public:
            raise QueryRejected(f"table {policy.table} has no privacy policy",
                                hint="annotate it 'dp: public' (no personal data) or with a privacy unit")
        inner = self._alias()
        qualifiers = frozenset({inner, (alias or policy.table).lower()})
        right_columns = [
            replace(_column(policy, c, f"{inner}.{quote(c.name)}", qualifiers), public=True,
                    public_table=policy.table)
            for c in policy.columns.values()
        ]
        merged = Relation(columns=left.columns + right_columns, from_sql="", unit_sql=left.unit_sql,
                          cap=left.cap, tables=left.tables + [policy], conditions=left.conditions,
                          needs_cap=left.needs_cap, order_sql=None,
                          max_groups_per_unit=left.max_groups_per_unit, unit_name=left.unit_name)
        condition = self._join_condition(merged, on, using, left, right_columns)
        # ANY: each source row meets at most one dimension row, so rows per unit do not grow
        join_kind = "LEFT ANY JOIN" if side == "LEFT" else "INNER ANY JOIN"
        table = f"{quote(self.database)}.{quote(policy.table)}"
        merged.from_sql = f"{left.from_sql} {join_kind} {table} AS {inner} ON {condition}"
        return merged

    def _private_join(self, left: Relation, policy: TablePolicy, alias: str | None, on: exp.Expression | None,
                      using: list | None, side: str) -> Relation:
        if len([t for t in left.tables if t.private]) != 1 or not left.from_sql.count(" AS ") == 1:
            raise QueryRejected("only two private tables can be joined, directly (no subqueries)")
        right = self._table(policy, alias)
        left_unit = next(c for c in left.columns if c.is_unit)
        right_unit = next(c for c in right.columns if c.is_unit)
        ok = False
        if isinstance(on, exp.EQ) and all(isinstance(s, exp.Column) for s in (on.this, on.expression)):
            merged_cols = left.columns + right.columns
            probe = Relation(columns=merged_cols, from_sql="", unit_sql="", cap=0, tables=[])
            ends = {probe.resolve(on.this).base_sql, probe.resolve(on.expression).base_sql}
            ok = ends == {left_unit.base_sql, right_unit.base_sql}
        elif using and len(using) == 1 and left_unit.name == right_unit.name == using[0].name:
            ok = True
        if not ok:
            raise QueryRejected(
                "two private tables can be joined only on their privacy-unit columns "
                f"(ON {left_unit.name} = {right_unit.name})",
                hint="a join on other keys could let one person's rows multiply without bound")
        if side == "LEFT":
            raise QueryRejected("LEFT JOIN of two private tables is not supported", hint="use JOIN")
        # cap each side first: rows per unit after the join ≤ k1·k2
        left_inner = left.from_sql.split(" AS ")[-1]
        right_inner = right.from_sql.split(" AS ")[-1]
        left_sub = self._capped(left, left_inner)
        right_sub = self._capped(right, right_inner)
        columns = left.columns + right.columns
        return Relation(
            columns=columns,
            from_sql=f"{left_sub} AS {left_inner} INNER JOIN {right_sub} AS {right_inner} "
            f"ON {left_unit.base_sql} = {right_unit.base_sql}",
            unit_sql=left.unit_sql,
            cap=left.cap * right.cap,
            tables=left.tables + right.tables,
            conditions=left.conditions,
            needs_cap=False,
            max_groups_per_unit=_min_optional(left.max_groups_per_unit, right.max_groups_per_unit),
            unit_name=left.unit_name,
        )

    def _capped(self, relation: Relation, inner: str) -> str:
        table = relation.from_sql.split(" AS ")[0]
        unit = relation.unit_sql.split(".", 1)[1]
        if not relation.needs_cap:
            return f"(SELECT * FROM {table})"
        order = relation.order_sql.replace(f"{inner}.", "") if relation.order_sql else unit
        return f"(SELECT * FROM {table} ORDER BY {order} LIMIT {relation.cap} BY {unit})"

    def _join_condition(self, merged: Relation, on: exp.Expression | None, using: list | None,
                        left: Relation, right_columns: list[SourceColumn]) -> str:
        if on is not None:
            return condition_sql(on, lambda c: _base_ref(merged, c))
        parts = []
        for ident in using or []:
            name = ident.name
            lcol = [c for c in left.columns if c.name == name]
            rcol = [c for c in right_columns if c.name == name]
            if len(lcol) != 1 or len(rcol) != 1:
                raise QueryRejected(f"USING ({name}): the column must exist once on each side")
            parts.append(f"{lcol[0].base_sql} = {rcol[0].base_sql}")
        return " AND ".join(parts)


def _base_ref(relation: Relation, col: exp.Column) -> ColumnRef:
    source = relation.resolve(col)
    return source.ref(source.base_sql)


def _column(policy: TablePolicy, col: ColumnPolicy, base_sql: str, qualifiers: frozenset[str]) -> SourceColumn:
    bounds = Interval(*col.bounds) if col.bounds is not None else None
    return SourceColumn(
        name=col.name, qualifiers=qualifiers, base_sql=base_sql, type=col.type, bounds=bounds,
        integer=is_integer_type(col.type), public=col.public, values=col.values,
        is_unit=col.name == policy.privacy_unit, date_bounds=col.date_bounds,
    )


def _derived_column(inner: Relation, expr: exp.Expression, name: str, qualifiers: frozenset[str]) -> SourceColumn:
    """A projected expression: bounded if it translates as a value, else usable in conditions only."""
    translator = ValueTranslator(lambda c: _base_ref(inner, c))
    try:
        value = translator.translate(expr, name)
        return SourceColumn(name=name, qualifiers=qualifiers, base_sql=f"({value.sql})", type="Float64",
                            bounds=value.interval, integer=value.integer)
    except QueryRejected:
        sql = condition_sql(expr, lambda c: _base_ref(inner, c))
        return SourceColumn(name=name, qualifiers=qualifiers, base_sql=f"({sql})", type="String",
                            bounds=None, integer=False)


def _min_optional(a: int | None, b: int | None) -> int | None:
    if a is None:
        return b
    if b is None:
        return a
    return min(a, b)


__all__ = ["Relation", "RelationBuilder", "SourceColumn", "base_type", "quote"]
