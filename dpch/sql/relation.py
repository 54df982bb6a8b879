"""FROM: tables, joins, subqueries and CTEs resolved into one :class:`Relation` of capped rows.

What a query may read, and the sensitivity rule for each:

- one private table: each unit contributes at most k rows (``LIMIT k BY unit``);
- ``JOIN`` a public table (no personal data): a many-to-one *lookup*. Each private row meets at
  most one row of the public table (its first match), so the rows per unit stay ≤ k even if the
  public table repeats a key. ``JOIN``/``INNER JOIN`` keeps the private rows that have a match
  (emitted as ``LEFT SEMI JOIN``; ClickHouse's ``INNER ANY JOIN`` would match each public row
  at most once, one-to-one), ``LEFT JOIN`` keeps every private row (``LEFT ANY JOIN``). On a
  public table whose join key is unique this is exactly what ClickHouse's ``JOIN`` computes.
  Join forms the analyst writes are honoured when they already keep each private row at most
  once (``LEFT ANY``, ``SEMI``, ``ANTI``, ``ASOF``) and refused otherwise (``ALL``, ``ANY
  INNER``, ``RIGHT``, ``FULL``, ``CROSS``, …), never silently replaced; the ON clause must equate
  an expression of the private side with one of the public table (not ``ON 1 = 1``);
- ``JOIN`` a second private table **on the two privacy-unit columns**: each side is capped
  first (k1, k2 rows per unit), so the joined rows per unit are ≤ k1·k2; the tables' units
  must be the same people (the ON clause asserts it, and is that one equality only: an inner
  join, written ``JOIN``, ``INNER JOIN`` or ``ALL JOIN``; other strictnesses are refused);
- a subquery or CTE that filters and projects one private source (no aggregation, DISTINCT,
  LIMIT or GROUP BY): it keeps one row per source row, so it is inlined (its WHERE joins
  the outer one; its expressions become derived columns with bounds by interval arithmetic).

The rows then reach the aggregates through one inner SELECT with columns ``c0, c1, …``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import date
from typing import Any

from sqlglot import exp

from dpch.errors import DpchError, QueryRejected
from dpch.policy.model import ColumnPolicy, TablePolicy, base_type, is_integer_type
from dpch.sql.aliases import check_shadowing
from dpch.sql.bounds import ColumnRef, Interval, ValueTranslator, condition, expression_type
from dpch.sql.cap import VerifiedTable, row_identity, row_order
from dpch.sql.expression_types import ExpressionTypes
from dpch.sql.nodes import column, limit_by, ordered, paren, show, subquery, table
from dpch.sql.parse import DIALECT
from dpch.store.quoting import quote_identifier

TableLookup = Callable[[str], TablePolicy]


quote = quote_identifier  # one quoting rule for every identifier dpch emits


@dataclass(frozen=True)
class SourceColumn:
    """A column visible to the query, with the tree that reads it from the source rows."""

    name: str
    qualifiers: frozenset[str]
    base: exp.Expr
    type: str
    bounds: Interval | None
    integer: bool
    public: bool = False
    values: tuple[Any, ...] | None = None
    is_unit: bool = False
    public_table: str | None = None
    date_bounds: tuple[date, date] | None = None
    #: visible only through a qualifier: the public side of ``USING (col)``, whose unqualified
    #: name means the private side's column, as in ClickHouse
    qualified_only: bool = False
    #: a column of a public table joined with LEFT (ANY/ANTI/ASOF): a private row without a match
    #: reads the type's default here (ClickHouse's join_use_nulls = 0), so a GROUP BY on it has
    #: one more group than the public table's values
    unmatched_default: bool = False

    @property
    def base_sql(self) -> str:
        """:attr:`base` as dpch displays it; also the column's identity (one source read once)."""
        return show(self.base)

    def ref(self, node: exp.Expr) -> ColumnRef:
        return ColumnRef(node=node, name=self.name, type=self.type, bounds=self.bounds, integer=self.integer,
                         is_unit=self.is_unit)


@dataclass
class Relation:
    """The rows an aggregate reads: columns, FROM tree, filters, and the contribution cap."""

    columns: list[SourceColumn]
    #: the first source of FROM (a table or a capped subquery, with its alias)
    from_: exp.Expr | None
    unit: exp.Expr | None
    cap: int
    tables: list[TablePolicy]
    conditions: list[exp.Expr] = field(default_factory=list)
    #: the joins after :attr:`from_`
    joins: list[exp.Join] = field(default_factory=list)
    needs_cap: bool = True
    max_groups_per_unit: int | None = None
    #: the owner's per-group bound c (``max_rows_per_group``) of the one private table, for the
    #: per-group contribution bound (:mod:`.contribution`); None once private tables are joined
    max_rows_per_group: int | None = None
    unit_name: str = ""
    #: one base table read directly: its database, name and inner alias (None once joined), so a
    #: private join can wrap it in its capped subquery
    source: tuple[str, str, str] | None = None
    #: the stored order of that table, as column names (for the capped subquery)
    order_columns: tuple[str, ...] = ()
    #: one table whose rows per unit the owner verified: its rows are read in the two guarded branches
    #: of :func:`.cap.verified_branches` (uncapped while the data is the verified data, else capped)
    verified: VerifiedTable | None = None
    #: what tells the private table's rows apart as the relation reads them (:func:`.cap.row_identity`;
    #: None: no row identity, the cap orders by ``rand64()``)
    row_id: list[exp.Expr] | None = None

    @property
    def order(self) -> list[exp.Expr]:
        """The stored order as the relation's rows read it (empty once joined, or when unordered)."""
        if self.source is None:
            return []
        return [column(c, self.source[2]) for c in self.order_columns]

    @property
    def from_sql(self) -> str:
        """FROM and its joins as dpch displays them."""
        assert self.from_ is not None
        return " ".join([show(self.from_), *(show(j) for j in self.joins)])

    @property
    def unit_sql(self) -> str:
        assert self.unit is not None
        return show(self.unit)

    def resolve(self, col: exp.Column) -> SourceColumn:
        """Finds a column by name and optional qualifier; ambiguous or unknown names are errors."""
        if isinstance(col.this, exp.Star):
            raise QueryRejected("SELECT * releases rows; dpch releases only noisy aggregates",
                                hint="e.g. SELECT count(*) FROM table")
        name, qualifier = col.name, (col.table or "").lower()
        visible = [c for c in self.columns
                   if ((qualifier in c.qualifiers) if qualifier else not c.qualified_only)]
        matches = [c for c in visible if c.name == name]
        if not matches:
            matches = [c for c in visible if c.name.lower() == name.lower()]
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
        budget admits and counts the release (docs/design.md rule 8)."""
        return tuple(dict.fromkeys(t.table for t in self.tables if t.private))


class RelationBuilder:
    """Builds a :class:`Relation` from a SELECT's FROM, JOINs and WITH."""

    def __init__(self, lookup: TableLookup, database: str, types: ExpressionTypes | None = None) -> None:
        self.lookup = lookup
        self.database = database
        #: ClickHouse's types of row expressions (the registry's rules are checked against them)
        self.types = types
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

    def _source(self, source: exp.Expr, ctes: dict[str, exp.Select]) -> Relation:
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
                                    hint="SHOW TABLES lists the tables you can query, DESCRIBE TABLE t their "
                                         "columns and annotations (or `dpch policy show`)")
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
        policy.refuse_on_shards()  # split_cap or a verification on a Distributed table: refused, uncharged
        inner = self._alias()
        qualifiers = frozenset({inner, (alias or policy.table).lower()})  # an alias hides the table name
        columns = [_column(policy, c, column(c.name, inner), qualifiers) for c in policy.columns.values()]
        unit = column(policy.privacy_unit or "", inner)
        order_columns: tuple[str, ...] = ()
        if policy.unit_ordered and not policy.unique_units:
            order_columns = tuple(policy.sorting_key)
        verified = VerifiedTable(self.database, policy.table, policy.unit_column, policy.contribution_cap, inner) \
            if policy.rows_verified else None
        # NULL units: rows whose unit is NULL belong to no known person. Capped together they would
        # act as one "person" whose k kept rows an added NULL-unit row could replace (moving a sum by
        # 2·k·max|v| against a sensitivity of k·max|v|), so they are excluded from every private query
        conditions: list[exp.Expr] = [exp.Not(this=exp.Is(this=unit.copy(), expression=exp.Null()))] \
            if policy.nullable_unit else []
        return Relation(
            columns=columns,
            from_=table(self.database, policy.table, inner),
            source=(self.database, policy.table, inner),
            order_columns=order_columns,
            unit=unit,
            cap=policy.contribution_cap,
            tables=[policy],
            conditions=conditions,
            needs_cap=not policy.unique_units,
            max_groups_per_unit=policy.max_groups_per_unit,
            max_rows_per_group=policy.max_rows_per_group,
            unit_name=policy.privacy_unit or "",
            verified=verified,
            row_id=row_identity(policy.engine, inner),
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
        check_shadowing(select, (c.name for c in inner.columns))
        if select.args.get("where") is not None:
            inner.conditions.append(condition(select.args["where"].this, lambda c: _base_ref(inner, c), self.types))
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
            columns.append(_derived_column(inner, expr, name, qualifiers, self.types))
        names = [c.name for c in columns]
        if len(set(names)) != len(names):
            raise QueryRejected("a subquery has two columns with the same name", hint="give them distinct aliases")
        # the unit need not be projected: the cap is applied to the source rows, by the source unit
        inner.columns = columns
        return inner

    # -- joins -------------------------------------------------------------------------------------

    def _join(self, left: Relation, join: exp.Join, ctes: dict[str, exp.Select]) -> Relation:
        for arg, value in join.args.items():
            if arg not in _JOIN_ARGS and value not in (None, [], False, ""):
                raise QueryRejected(f"this JOIN form ({join.sql(DIALECT).split(' ON ')[0]}) is not supported",
                                    hint="use [LEFT] JOIN with a public table, or JOIN two private tables on "
                                    "their units")
        words = _join_words(join)
        target = join.this
        if not isinstance(target, exp.Table) or not isinstance(target.this, exp.Identifier) or target.args.get("db"):
            raise QueryRejected("joins are supported with tables of the database only (not subqueries)")
        if target.name in ctes:
            raise QueryRejected("joining a CTE is not supported", hint="join the table itself")
        for word in _REFUSED_JOIN_ORDER:
            if word in words:
                raise QueryRejected(f"{_join_name(words)} is not supported", hint=_REFUSED_JOIN[word])
        policy = self.lookup(target.name)
        alias = target.alias or None
        on = join.args.get("on")
        using = join.args.get("using")
        if on is None and not using:
            raise QueryRejected("a JOIN needs an ON or USING condition")
        if policy.private:
            return self._private_join(left, policy, alias, on, using, words)
        if not policy.public:
            raise QueryRejected(f"table {policy.table} has no privacy policy",
                                hint="annotate it 'dp: public' (no personal data) or with a privacy unit")
        emitted = _PUBLIC_JOINS.get(words)
        if emitted is None:
            reason = next((_REFUSED_JOIN[w] for w in ("ALL", "ANY", "OUTER") if w in words), _LOOKUP_HINT)
            raise QueryRejected(f"{_join_name(words)} with a public table is not supported", hint=reason)
        inner = self._alias()
        qualifiers = frozenset({inner, (alias or policy.table).lower()})
        using_names = {ident.name for ident in using or []}
        unmatched = emitted in _KEEPS_UNMATCHED
        right_columns = [
            replace(_column(policy, c, column(c.name, inner), qualifiers), public=True,
                    public_table=policy.table, qualified_only=c.name in using_names, unmatched_default=unmatched)
            for c in policy.columns.values()
        ]
        merged = Relation(columns=left.columns + right_columns, from_=left.from_, unit=left.unit,
                          cap=left.cap, tables=left.tables + [policy], conditions=left.conditions,
                          joins=list(left.joins), needs_cap=left.needs_cap,
                          max_groups_per_unit=left.max_groups_per_unit,
                          max_rows_per_group=left.max_rows_per_group, unit_name=left.unit_name,
                          verified=left.verified, row_id=left.row_id)
        if on is not None:
            _check_lookup_condition(merged, on, {c.base_sql for c in right_columns}, asof="ASOF" in words)
        elif "ASOF" in words:
            raise QueryRejected("ASOF JOIN ... USING is not supported", hint="write ASOF JOIN ... ON with the "
                                "key equalities and one inequality")
        on_tree = self._join_condition(merged, on, using, left, right_columns)
        side, kind = emitted
        merged.joins.append(exp.Join(this=table(self.database, policy.table, inner), side=side, kind=kind,
                                     on=on_tree))
        return merged

    def _private_join(self, left: Relation, policy: TablePolicy, alias: str | None, on: exp.Expr | None,
                      using: list[exp.Expr] | None, words: frozenset[str]) -> Relation:
        if len([t for t in left.tables if t.private]) != 1 or left.source is None:
            raise QueryRejected("only two private tables can be joined, directly (no subqueries)")
        if "LEFT" in words:
            raise QueryRejected("LEFT JOIN of two private tables is not supported", hint="use JOIN")
        if not words <= {"INNER", "ALL"}:
            # ANY INNER matches one-to-one, SEMI/ANTI/ASOF keep other rows than the k1·k2 the cap counts
            raise QueryRejected(f"{_join_name(words)} of two private tables is not supported",
                                hint="use JOIN (an inner join on the two privacy-unit columns)")
        right = self._table(policy, alias)
        left_unit = next((c for c in left.columns if c.is_unit), None)
        right_unit = next(c for c in right.columns if c.is_unit)
        if left_unit is None:
            raise QueryRejected("two private tables can be joined only on their privacy-unit columns, and the "
                                "subquery does not select its unit column", hint="select the unit column too")
        ok = False
        if isinstance(on, exp.EQ) and all(isinstance(s, exp.Column) for s in (on.this, on.expression)):
            merged_cols = left.columns + right.columns
            probe = Relation(columns=merged_cols, from_=None, unit=None, cap=0, tables=[])
            ends = {probe.resolve(on.this).base_sql, probe.resolve(on.expression).base_sql}
            ok = ends == {left_unit.base_sql, right_unit.base_sql}
        elif on is None and using and len(using) == 1 and left_unit.name == right_unit.name == using[0].name:
            ok = True
        if not ok:
            raise QueryRejected(
                "two private tables can be joined only on their privacy-unit columns "
                f"(ON {left_unit.name} = {right_unit.name})",
                hint="a join on other keys could let one person's rows multiply without bound")
        # cap each side first: rows per unit after the join ≤ k1·k2
        assert left.source is not None and right.source is not None
        left_inner, right_inner = left.source[2], right.source[2]
        left_sub, right_sub = self._capped(left), self._capped(right)
        columns = left.columns + [replace(c, qualified_only=True) if using and c is right_unit else c
                                  for c in right.columns]
        on_units = exp.EQ(this=left_unit.base.copy(), expression=right_unit.base.copy())
        return Relation(
            columns=columns,
            from_=subquery(left_sub, left_inner),
            joins=[exp.Join(this=subquery(right_sub, right_inner), kind="INNER", on=on_units)],
            unit=left.unit,
            cap=left.cap * right.cap,
            tables=left.tables + right.tables,
            conditions=left.conditions,
            needs_cap=False,
            max_groups_per_unit=_min_optional(left.max_groups_per_unit, right.max_groups_per_unit),
            unit_name=left.unit_name,
        )

    def _capped(self, relation: Relation) -> exp.Select:
        """The relation's one table with each unit cut to k of its rows, chosen at random per row under
        the release's key (:func:`.cap.row_order`)."""
        assert relation.source is not None
        database, name, _ = relation.source
        select = exp.Select(expressions=[exp.Star()]).from_(table(database, name), copy=False)
        # a verified table is capped here all the same (the guarded branches are for one table's rows)
        if not relation.needs_cap:
            return select
        unit = column(relation.unit_name)
        order = [unit, row_order(row_identity(relation.tables[0].engine, None))]
        if relation.order_columns and relation.tables[0].cap_order == "stored":
            order = [column(c) for c in relation.order_columns]  # the owner's choice: first k as stored
        select.set("order", exp.Order(expressions=[ordered(o) for o in order]))
        select.set("limit", limit_by(relation.cap, unit))
        return select

    def _join_condition(self, merged: Relation, on: exp.Expr | None, using: list[exp.Expr] | None,
                        left: Relation, right_columns: list[SourceColumn]) -> exp.Expr:
        if on is not None:
            return condition(on, lambda c: _base_ref(merged, c), self.types)
        parts: list[exp.Expr] = []
        for ident in using or []:
            name = ident.name
            lcol = [c for c in left.columns if c.name == name]
            rcol = [c for c in right_columns if c.name == name]
            if len(lcol) != 1 or len(rcol) != 1:
                raise QueryRejected(f"USING ({name}): the column must exist once on each side")
            parts.append(exp.EQ(this=lcol[0].base.copy(), expression=rcol[0].base.copy()))
        result = parts[0]
        for part in parts[1:]:
            result = exp.And(this=result, expression=part)
        return result


#: the arguments of a JOIN node dpch understands (anything else, e.g. GLOBAL, is refused)
_JOIN_ARGS = {"this", "on", "using", "side", "kind", "pivots"}

#: how each join form the analyst may write with a public table is emitted. Every emitted form
#: keeps each private row at most once (ClickHouse 26, checked in tests/sql/test_joins.py), so the
#: rows per unit stay ≤ k whatever the public table holds; plain JOIN/LEFT JOIN become lookups.
_SEMI, _ANY, _ANTI = ("LEFT", "SEMI"), ("LEFT", "ANY"), ("LEFT", "ANTI")
_ASOF, _LEFT_ASOF = (None, "ASOF"), ("LEFT", "ASOF")
#: (side, kind) of the emitted JOIN node: LEFT SEMI, LEFT ANY, LEFT ANTI, ASOF, LEFT ASOF
_PUBLIC_JOINS: dict[frozenset[str], tuple[str | None, str]] = {
    frozenset(): _SEMI,
    frozenset({"INNER"}): _SEMI,
    frozenset({"LEFT"}): _ANY,
    frozenset({"LEFT", "OUTER"}): _ANY,
    frozenset({"LEFT", "ANY"}): _ANY,
    frozenset({"SEMI"}): _SEMI,
    frozenset({"LEFT", "SEMI"}): _SEMI,
    frozenset({"ANTI"}): _ANTI,
    frozenset({"LEFT", "ANTI"}): _ANTI,
    frozenset({"ASOF"}): _ASOF,
    frozenset({"INNER", "ASOF"}): _ASOF,
    frozenset({"LEFT", "ASOF"}): _LEFT_ASOF,
}

#: emitted forms that keep a private row without a match (its public columns read their defaults)
_KEEPS_UNMATCHED = frozenset({_ANY, _ANTI, _LEFT_ASOF})

_LOOKUP_HINT = "write JOIN or LEFT JOIN: dpch joins a public table as a lookup, each private row meeting at most " \
               "one of its rows"

#: join forms refused for every table, by a word of the form (checked in this order), with the reason
_REFUSED_JOIN: dict[str, str] = {
    "RIGHT": "a right or full join adds rows that belong to no person; use [LEFT] JOIN",
    "FULL": "a right or full join adds rows that belong to no person; use [LEFT] JOIN",
    "CROSS": "a cross join repeats every row of one side for each row of the other; " + _LOOKUP_HINT,
    "PASTE": "a paste join pairs rows by position; " + _LOOKUP_HINT,
    "ARRAY": "ARRAY JOIN repeats a row once per array element",
    "OUTER": "use LEFT JOIN",
    "ALL": "ALL repeats a private row once per matching row of the other table; " + _LOOKUP_HINT,
    "ANY": "ClickHouse's ANY INNER JOIN matches each row of the other table at most once (one-to-one), so one "
           "person's rows could displace another's; " + _LOOKUP_HINT + " (or LEFT ANY JOIN)",
}
_REFUSED_JOIN_ORDER = ("RIGHT", "FULL", "CROSS", "PASTE", "ARRAY")


def _join_words(join: exp.Join) -> frozenset[str]:
    """The join's form as a set of words (sqlglot splits e.g. ``INNER ANY`` across side and kind)."""
    return frozenset(str(join.args.get(arg) or "").upper() for arg in ("side", "kind")) - {""}


def _join_name(words: frozenset[str]) -> str:
    order = ("LEFT", "RIGHT", "FULL", "INNER", "OUTER", "CROSS", "ALL", "ANY", "SEMI", "ANTI", "ASOF", "PASTE",
             "ARRAY")
    return " ".join([w for w in order if w in words] + ["JOIN"])


def _check_lookup_condition(merged: Relation, on: exp.Expr, right: set[str], *, asof: bool) -> None:
    """The ON of a public join equates an expression of the private side with one of the public table.

    Without such an equality (``ON 1 = 1``, only inequalities, OR at the top) a ClickHouse join
    repeats each private row once per public row, which a lookup cannot honour: refused.
    """
    conjuncts: list[exp.Expr] = []
    stack = [on]
    while stack:
        node = stack.pop()
        while isinstance(node, exp.Paren):
            node = node.this
        if isinstance(node, exp.And):
            stack.extend((node.this, node.expression))
        else:
            conjuncts.append(node)

    def sides(node: exp.Expr) -> set[str]:
        return {"public" if merged.resolve(c).base_sql in right else "private" for c in node.find_all(exp.Column)}

    def across(node: exp.Expr) -> bool:
        return {frozenset(sides(node.this)), frozenset(sides(node.expression))} == {frozenset({"public"}),
                                                                                    frozenset({"private"})}

    equalities = [c for c in conjuncts if isinstance(c, exp.EQ) and across(c)]
    if not equalities:
        raise QueryRejected(
            "a JOIN with a public table needs an ON equality between a column of each table "
            "(e.g. ON v.region = r.region)",
            hint="without one every private row would meet every public row; " + _LOOKUP_HINT)
    if asof:
        inequalities = [c for c in conjuncts if isinstance(c, exp.GT | exp.GTE | exp.LT | exp.LTE) and across(c)]
        if len(inequalities) != 1:
            raise QueryRejected("ASOF JOIN needs key equalities and exactly one inequality between the tables in ON",
                                hint="e.g. ON v.region = r.region AND v.visit_date >= r.valid_from")


def _base_ref(relation: Relation, col: exp.Column) -> ColumnRef:
    source = relation.resolve(col)
    return source.ref(source.base)


def _column(policy: TablePolicy, col: ColumnPolicy, base: exp.Expr, qualifiers: frozenset[str]) -> SourceColumn:
    bounds = Interval(*col.bounds) if col.bounds is not None else None
    return SourceColumn(
        name=col.name, qualifiers=qualifiers, base=base, type=col.type, bounds=bounds,
        integer=is_integer_type(col.type), public=col.public, values=col.values,
        is_unit=col.name == policy.privacy_unit, date_bounds=col.date_bounds,
    )


def _derived_column(inner: Relation, expr: exp.Expr, name: str, qualifiers: frozenset[str],
                    types: ExpressionTypes | None) -> SourceColumn:
    """A projected expression: bounded if it translates as a value, else usable in conditions only,
    with the type ClickHouse gives it (the registry's rules on later uses are checked against it)."""
    translator = ValueTranslator(lambda c: _base_ref(inner, c), types)
    try:
        value = translator.translate(expr, name)
        return SourceColumn(name=name, qualifiers=qualifiers, base=paren(value.node), type="Float64",
                            bounds=value.interval, integer=value.integer)
    except QueryRejected:
        tree = condition(expr, lambda c: _base_ref(inner, c), types)
        return SourceColumn(name=name, qualifiers=qualifiers, base=paren(tree),
                            type=expression_type(expr, lambda c: _base_ref(inner, c), types),
                            bounds=None, integer=False)


def _min_optional(a: int | None, b: int | None) -> int | None:
    if a is None:
        return b
    if b is None:
        return a
    return min(a, b)


__all__ = ["Relation", "RelationBuilder", "SourceColumn", "base_type", "quote"]
