"""Analyze: a parsed SELECT + the tables' policies → a :class:`QueryPlan` with sensitivities.

The plan is everything needed to emit SQL, calibrate noise and post-process, computed without
reading any data. The pieces live in their own modules:

- :mod:`.relation` — FROM, JOIN, subqueries and CTEs, and the per-unit contribution cap;
- :mod:`.bounds` — row expressions, their bounds by interval arithmetic, clamped SQL;
- :mod:`.aggregates` — aggregates → noisy measures (with sensitivity) and statistics;
- :mod:`.grouping` — GROUP BY keys and where their domain comes from;
- :mod:`.outputs` — result columns, HAVING and ORDER BY as post-processing of noisy values.

A GROUP BY or ``SELECT DISTINCT`` without any aggregate is a *key release* (:attr:`QueryPlan.key_release`):
keys with a data-independent domain are released as that domain, free (:attr:`QueryPlan.free`); private
keys only through partition selection.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, cast

from sqlglot import exp

from dpch.errors import QueryRejected
from dpch.policy.model import TablePolicy
from dpch.sql import aggregate_kinds, outputs
from dpch.sql.aggregates import AggregateBuilder, Measure, Stat, is_aggregate
from dpch.sql.aliases import check_shadowing, resolve_where_aliases
from dpch.sql.bounds import ColumnRef, ValueTranslator, condition
from dpch.sql.contribution import ContributionBound
from dpch.sql.expression_types import Describe, ExpressionTypes
from dpch.sql.functions import display_name
from dpch.sql.grouping import MAX_GROUPS, GroupKey, KeyBuilder, PublicDomain, check_domain_size
from dpch.sql.nodes import column, show
from dpch.sql.parse import DIALECT, ParsedQuery
from dpch.sql.relation import Relation, RelationBuilder, SourceColumn, TableLookup
from dpch.sql.time_buckets import where_ranges
from dpch.sql.time_constants import ConstantQuery, fold_time_constants
from dpch.sql.where_lists import where_lists
from dpch.sql.wrappers import unwrap

_SUPPORTED_CLAUSES = {"expressions", "from_", "where", "group", "order", "limit", "offset", "settings", "joins",
                      "with_", "having", "distinct"}
_CLAUSE_NAMES = {
    "prewhere": "PREWHERE", "qualify": "QUALIFY", "windows": "WINDOW",
    "sample": "SAMPLE", "kind": "this SELECT form", "into": "SELECT INTO", "locks": "locking clauses",
    "cluster": "CLUSTER BY", "distribute": "DISTRIBUTE BY", "sort": "SORT BY", "connect": "CONNECT BY",
    "match": "MATCH_RECOGNIZE", "laterals": "LATERAL", "pivots": "PIVOT", "operation_modifiers": "query modifiers",
    "exclude": "EXCLUDE",
}
_HINTS = {"prewhere": "use WHERE"}

UNIT_COLUMN = "__unit"


@dataclass(frozen=True)
class OutputColumn:
    """A result column: a GROUP BY key, or an expression over noisy statistics."""

    name: str
    expr: exp.Expr
    key_index: int | None
    stats: tuple[str, ...]

    @property
    def is_key(self) -> bool:
        return self.key_index is not None


@dataclass(frozen=True)
class QueryPlan:
    """A validated query with every noisy measure's sensitivity; no data read."""

    query: ParsedQuery
    relation: Relation
    keys: tuple[GroupKey, ...]
    measures: tuple[Measure, ...]
    stats: dict[str, Stat]
    outputs: tuple[OutputColumn, ...]
    #: the inner SELECT's columns: (name c0…, tree over the source rows)
    inner: tuple[tuple[str, exp.Expr], ...]
    #: the inner SELECT's WHERE conjuncts (filters, key domains), over the source rows
    where: tuple[exp.Expr, ...]
    having: exp.Expr | None = None
    order: tuple[tuple[exp.Expr, bool], ...] = ()
    limit: int | None = None
    offset: int = 0
    groups_per_unit: int = 1
    restrict_groups: bool = False
    group_domain: tuple[tuple[Any, ...], ...] | None = field(default=((),))
    #: folded now()/today(): the plan holds the clock's value and must not be reused
    volatile: bool = False
    #: the contribution bound the measures are calibrated to and the SQL enforces (:mod:`.contribution`);
    #: None: the row cap of :attr:`cap` rows
    bound: ContributionBound | None = None
    #: the emitted query also computes what the bound kept of each unit's rows (``dp_report_dropped``:
    #: :data:`dpch.sql.rewrite.BOUND_REPORT`, released by :mod:`dpch.pipeline.bound_report`)
    report_dropped: bool = False

    @property
    def per_group(self) -> bool:
        """Whether each unit is bounded per group (G groups, c rows in each) rather than by the row cap."""
        return self.bound is not None and self.bound.kind == "groups"

    @property
    def inner_columns(self) -> tuple[tuple[str, str], ...]:
        """:attr:`inner` as dpch displays it (name, SQL)."""
        return tuple((name, show(base)) for name, base in self.inner)

    @property
    def conditions(self) -> tuple[str, ...]:
        """:attr:`where` as dpch displays it."""
        return tuple(show(c) for c in self.where)

    @property
    def columns(self) -> list[str]:
        return [o.name for o in self.outputs]

    @property
    def table(self) -> TablePolicy:
        """The (first) private table the query reads."""
        return next(t for t in self.relation.tables if t.private)

    @property
    def partition_selection(self) -> bool:
        return self.group_domain is None

    @property
    def cap(self) -> int:
        return self.relation.cap

    @property
    def key_release(self) -> bool:
        """A GROUP BY or ``SELECT DISTINCT`` with no aggregate anywhere (SELECT, HAVING, ORDER BY):
        the release is the set of keys, nothing else."""
        return bool(self.keys) and not self.stats and not self.measures

    @property
    def free(self) -> bool:
        """A key release whose every key has a data-independent domain (declared ``values``, a joined
        public table, bounded buckets, time buckets): its answer is that domain, a function of the
        policy and the query text only, so it reads nothing private and costs nothing."""
        return self.key_release and self.group_domain is not None


def analyze(parsed: ParsedQuery, lookup: Callable[[str], TablePolicy], database: str,
            public_domain: PublicDomain | None = None, constants: ConstantQuery | None = None,
            describe: Describe | None = None, per_group: tuple[int | None, int | None] | None = None) -> QueryPlan:
    """Checks ``parsed`` against the policies and derives every measure's sensitivity.

    ``per_group`` asks for the per-group contribution bound (:mod:`.contribution`) instead of the row
    cap: (G, c) as the analyst set them, each None for the owner's annotation or the key domain's size;
    a query it cannot apply to is refused, saying why.

    ``constants`` runs SELECTs that read no table: it evaluates date and time constants
    (:mod:`.time_constants`) and lists time buckets' domains (:mod:`.time_buckets`). ``describe`` asks
    ClickHouse the types of row expressions (:mod:`.expression_types`), which the registry's rules
    are checked against; without it only literals' and columns' types are known."""
    # the plan works on the folded tree; its query keeps the text as written, whose fingerprint names
    # the release in the ledger and the gateway's cache (a panel on now() is one query, not one a second)
    # an outer SELECT that only post-processes one aggregate is that aggregate (ibis, Metabase: issue 28)
    select, folded = fold_time_constants(unwrap(parsed.select), constants)
    plan = _Analyzer(parsed, lookup, database, public_domain or _no_public_domain, constants,
                     cast(exp.Select, select), ExpressionTypes(describe), per_group).plan()
    return dataclasses.replace(plan, volatile=True) if folded.volatile else plan


def _no_public_domain(table: str, column: str) -> tuple[Any, ...]:
    raise QueryRejected(f"GROUP BY {column}: the values of public table {table} are not available here")


class _Analyzer:
    def __init__(self, parsed: ParsedQuery, lookup: TableLookup, database: str, public_domain: PublicDomain,
                 constants: ConstantQuery | None = None, select: exp.Select | None = None,
                 types: ExpressionTypes | None = None,
                 per_group: tuple[int | None, int | None] | None = None) -> None:
        self.parsed = parsed
        self.per_group = per_group
        self.types = types or ExpressionTypes(None)
        self.constants = constants
        self.select = select if select is not None else parsed.select
        self.database = database
        self.lookup = lookup
        self.public_domain = public_domain
        self.inner: dict[str, tuple[str, exp.Expr]] = {}  # shown base SQL → (inner column name, base)

    # -- the inner SELECT's columns ------------------------------------------------------------------

    def outer(self, source: SourceColumn) -> exp.Expr:
        """The column under which the capped rows expose ``source`` (c0, c1, … in the inner SELECT)."""
        key = source.base_sql
        if key not in self.inner:
            self.inner[key] = (f"c{len(self.inner)}", source.base)
        return column(self.inner[key][0])

    def outer_ref(self, col: exp.Column) -> ColumnRef:
        source = self.relation.resolve(col)
        return source.ref(self.outer(source))

    # -- the plan ------------------------------------------------------------------------------------

    def plan(self) -> QueryPlan:
        select = self.select
        for key, value in select.args.items():
            if value in (None, [], False) or key in _SUPPORTED_CLAUSES:
                continue
            raise QueryRejected(f"{_CLAUSE_NAMES.get(key, key.upper())} is not supported", hint=_HINTS.get(key))
        if select.find(exp.Window) is not None:
            raise QueryRejected("window functions (OVER) are not supported")
        self.relation = RelationBuilder(self.lookup, self.database, self.types).build(select)
        check_shadowing(select, (c.name for c in self.relation.columns))
        aliases_read = resolve_where_aliases(select, (c.name for c in self.relation.columns))
        conditions = list(self.relation.conditions)
        where = select.args.get("where")
        if where is not None:
            try:
                conditions.append(condition(where.this, lambda c: self._base_ref(c), self.types))
            except QueryRejected as exc:
                # the refusal names a function an alias brought into WHERE: say which alias it came from
                named = {name: node for name, node in aliases_read.items()
                         if any(display_name(f) in exc.message for f in node.find_all(exp.Func))}
                if not named:
                    raise
                read = ", ".join(f"{name} as {show(node)}" for name, node in named.items())
                raise QueryRejected(f"{exc.message} (WHERE reads the select alias {read}, as ClickHouse does)",
                                    hint=exc.hint) from None

        group_exprs = self._group_expressions()
        ranges = where_ranges(where.this if where is not None else None, self._identity)
        lists = where_lists(where.this if where is not None else None, self._identity)
        key_builder = KeyBuilder(self.relation, self.outer, self.public_domain, self.constants, ranges, self.types,
                                 lists)
        keys = [key_builder.key(e) for e in group_exprs]
        partition = any(k.values is None for k in keys)
        domain_size = None if partition else check_domain_size(keys)
        cap = self.relation.cap
        # keys one unit can touch: at most its k rows; max_groups_per_unit is enforced (and so
        # counted) only under partition selection, where the emitted SQL keeps each unit's first G keys
        if partition:
            groups_per_unit = min(cap, self.relation.max_groups_per_unit or cap)
        else:
            groups_per_unit = min(cap, domain_size or 1)
        bound = ContributionBound.row_cap(cap, groups_per_unit)
        if self.per_group is not None:
            bound = self._per_group_bound(keys, domain_size)
            groups_per_unit = bound.groups
        self.keys = keys
        self.group_exprs = group_exprs
        self.builder = AggregateBuilder(
            ValueTranslator(self.outer_ref, self.types),
            lambda node: condition(node, self.outer_ref, self.types),
            lambda node: isinstance(node, exp.Column) and self.relation.resolve(node).is_unit,
            cap,
            column(UNIT_COLUMN),
            groups_per_unit if keys else None,
            bound,
        )

        outputs_: list[OutputColumn] = []
        for item in select.expressions:
            outputs_.append(self._output(item))
        _check_names(select.expressions, outputs_)
        self.outputs = outputs_

        # HAVING and ORDER BY over keys only are post-processing of the released keys; with an
        # aggregate they make the query an ordinary noisy release (the keys it shows are chosen by
        # noisy values, which are charged like any other)
        having = None
        if select.args.get("having") is not None:
            having = self._post(select.args["having"].this, "HAVING", aliases=True)
        order = self._order()
        if select.args.get("distinct") and self.builder.stats:  # as in ClickHouse: DISTINCT does not group
            raise QueryRejected("SELECT DISTINCT with an aggregate is not supported",
                                hint="use GROUP BY: SELECT region FROM t GROUP BY region ORDER BY count() DESC")
        if not keys and not self.builder.stats:
            raise QueryRejected(
                "the query has no aggregate: dpch releases only noisy aggregates and keys, never rows",
                hint="e.g. SELECT count(*) FROM table, or SELECT DISTINCT a public column to list its values")
        limit, offset = _limit(select)
        if keys and not partition:
            domain = tuple(itertools.product(*(k.values or () for k in keys)))  # no partition: all set
        elif keys:
            domain = None
        else:
            domain = ((),)
        for group_key in keys:
            if group_key.inner_filter and not partition:
                conditions.append(group_key.inner_filter)
        return QueryPlan(
            query=self.parsed,
            relation=self.relation,
            keys=tuple(keys),
            measures=tuple(self.builder.measures.values()),
            stats=dict(self.builder.stats),
            outputs=tuple(outputs_),
            inner=tuple(self.inner.values()),
            where=tuple(conditions),
            having=having,
            order=order,
            limit=limit,
            offset=offset,
            groups_per_unit=groups_per_unit,
            # under the row cap a unit's k rows touch at most k keys; per group, only the restriction bounds them
            restrict_groups=(partition and groups_per_unit < cap) if bound.kind == "rows"
            else domain_size is None or groups_per_unit < domain_size,
            group_domain=domain,
            bound=bound,
        )

    def _per_group_bound(self, keys: list[GroupKey], domain_size: int | None) -> ContributionBound:
        """The per-group bound this query asked for (``self.per_group``: the analyst's G and c, each None
        for the owner's), or a refusal saying why it cannot apply (:mod:`.contribution`)."""
        relation = self.relation
        asked_groups, asked_rows = self.per_group or (None, None)
        if not keys:
            raise QueryRejected("a per-group bound needs a GROUP BY", hint="drop dp_bound = 'groups'")
        if not relation.needs_cap or relation.unit is None:
            raise QueryRejected("a per-group bound needs one private table with several rows per unit (not a "
                                "join of private tables, nor a table with one row per unit)",
                                hint="drop dp_bound = 'groups' (and dp_max_groups, dp_max_rows_per_group)")
        owner_groups, owner_rows = relation.max_groups_per_unit, relation.max_rows_per_group
        rows = asked_rows if owner_rows is None else min(asked_rows or owner_rows, owner_rows)
        if rows is None:
            raise QueryRejected("a per-group bound needs the rows a unit may add to one group",
                                hint="add SETTINGS dp_max_rows_per_group = C, or ask the owner to annotate "
                                     "max_rows_per_group on the table")
        limits = [g for g in (asked_groups, owner_groups, domain_size) if g is not None]
        if not limits:
            raise QueryRejected("a per-group bound needs the groups a unit may touch",
                                hint="add SETTINGS dp_max_groups = G, or ask the owner to annotate "
                                     "max_groups_per_unit on the table")
        return ContributionBound.per_group(min(limits), rows)

    def _identity(self, col: exp.Column) -> str | None:
        """Which source column ``col`` reads (None if it names none: the error comes elsewhere)."""
        try:
            return self.relation.resolve(col).base_sql
        except QueryRejected:
            return None

    def _base_ref(self, col: exp.Column) -> ColumnRef:
        source = self.relation.resolve(col)
        return source.ref(source.base)

    def _group_expressions(self) -> list[exp.Expr]:
        if self.select.args.get("distinct"):
            return self._distinct_expressions()
        group = self.select.args.get("group")
        if group is None:
            return []
        for key in ("rollup", "cube", "grouping_sets", "totals"):
            if group.args.get(key):
                raise QueryRejected(f"GROUP BY {key.upper().replace('_', ' ')} is not supported")
        aliases = {item.alias: item.this for item in self.select.expressions if isinstance(item, exp.Alias)}
        result: list[exp.Expr] = []
        for expr in group.expressions:
            if isinstance(expr, exp.Literal) and not expr.is_string:
                position = int(expr.this)
                if not 1 <= position <= len(self.select.expressions):
                    raise QueryRejected(f"GROUP BY {position} is out of range")
                expr = self.select.expressions[position - 1].unalias()
            elif isinstance(expr, exp.Column) and not expr.table and expr.name in aliases:
                expr = aliases[expr.name]  # the alias wins over a column of the same name, as in ClickHouse
            if is_aggregate(expr) or expr.find(exp.AggFunc) is not None:
                raise QueryRejected("GROUP BY an aggregate is not possible")
            if any(_same(expr, other, self.relation) for other in result):
                raise QueryRejected(f"GROUP BY {expr.sql(DIALECT)} is listed twice")
            result.append(expr)
        return result

    def _distinct_expressions(self) -> list[exp.Expr]:
        """``SELECT DISTINCT a, b`` lists the keys of ``GROUP BY a, b`` (a key release); with GROUP BY
        or an aggregate DISTINCT would de-duplicate noisy rows, which dpch does not do."""
        distinct = self.select.args["distinct"]
        if distinct.args.get("on") is not None:
            raise QueryRejected("SELECT DISTINCT ON is not supported", hint="use SELECT DISTINCT or GROUP BY")
        if self.select.args.get("group") is not None:
            raise QueryRejected("SELECT DISTINCT together with GROUP BY is not supported",
                                hint="drop DISTINCT: the rows of a GROUP BY already have distinct keys")
        result: list[exp.Expr] = []
        for item in self.select.expressions:
            expr = item.unalias() if isinstance(item, exp.Alias) else item
            if isinstance(expr, exp.Star) or (isinstance(expr, exp.Column) and isinstance(expr.this, exp.Star)):
                raise QueryRejected("SELECT DISTINCT * releases rows; dpch releases keys of named columns only",
                                    hint="name the columns: SELECT DISTINCT region FROM table")
            if is_aggregate(expr) or expr.find(exp.AggFunc) is not None:
                raise QueryRejected("SELECT DISTINCT with an aggregate is not supported",
                                    hint="drop DISTINCT, or list keys with GROUP BY and no aggregate")
            if not any(_same(expr, other, self.relation) for other in result):
                result.append(expr)  # SELECT DISTINCT a, a: one key shown twice
        return result

    def _key_index(self, node: exp.Expr) -> int | None:
        for i, expr in enumerate(self.group_exprs):
            if _same(node, expr, self.relation):
                return i
        return None

    def _output(self, item: exp.Expr) -> OutputColumn:
        expr = item.unalias() if isinstance(item, exp.Alias) else item
        name = item.alias if isinstance(item, exp.Alias) and item.alias else item.sql(DIALECT)
        if isinstance(expr, exp.Star) or (isinstance(expr, exp.Column) and isinstance(expr.this, exp.Star)):
            raise QueryRejected("SELECT * releases rows; dpch releases only noisy aggregates",
                                hint="e.g. SELECT count(*) FROM table")
        index = self._key_index(expr)
        if index is not None:
            return OutputColumn(name, outputs.placeholder(f"k{index}"), index, ())
        transformed = self._post(expr, name, aliases=False)
        if outputs.has_text(transformed):
            raise QueryRejected(f"{name}: a String cast of a released value or key is supported in ORDER BY and "
                                "HAVING, not as a result column", hint="select the value, and format it in the client")
        return OutputColumn(name, transformed, None, tuple(r for r in outputs.references(transformed)
                                                           if r.startswith("s")))

    def _post(self, expr: exp.Expr, what: str, *, aliases: bool) -> exp.Expr:
        """Replaces aggregates by statistics and keys by key references; checks what remains."""
        by_alias: dict[str, exp.Expr] = {o.name: o.expr for o in getattr(self, "outputs", [])} if aliases else {}

        def visit(node: exp.Expr) -> exp.Expr:
            if isinstance(node, exp.Filter):
                raise QueryRejected(f"{what}: an aggregate's FILTER (WHERE …) clause is not supported",
                                    hint="use the -If form: countIf(condition), sumIf(value, condition), "
                                         "avgIf(value, condition)")
            if is_aggregate(node):
                for inner in node.find_all(exp.AggFunc):
                    if inner is not node:
                        raise QueryRejected(f"{what}: aggregates cannot be nested")
                return outputs.placeholder(aggregate_kinds.register(self.builder, node))
            if isinstance(node, exp.Select | exp.Subquery):
                raise QueryRejected(f"{what}: subqueries are not supported")
            if isinstance(node, exp.Column) and not node.table and node.name in by_alias:
                return by_alias[node.name].copy()  # the alias wins over a column or key, as in ClickHouse
            index = self._key_index(node) if isinstance(node, exp.Column | exp.Func) else None
            if index is not None:
                return outputs.placeholder(f"k{index}")
            if isinstance(node, exp.Column):
                source = self.relation.resolve(node)
                raise QueryRejected(
                    f"column {source.name} is used but not aggregated or grouped by",
                    hint=f"wrap it in an aggregate, or GROUP BY {source.name}")
            return node

        transformed = expr.copy().transform(visit)
        outputs.check(transformed, what)
        kinds = {f"k{i}": outputs.kind_of_type(k.type) for i, k in enumerate(self.keys)}
        labels = {f"k{i}": k.label for i, k in enumerate(self.keys)}
        return outputs.check_types(transformed, kinds, what, condition=what == "HAVING", labels=labels)

    def _order(self) -> tuple[tuple[exp.Expr, bool], ...]:
        order = self.select.args.get("order")
        if order is None:
            return ()
        items = []
        for ordered in order.expressions:
            target = ordered.this
            if ordered.args.get("with_fill"):
                raise QueryRejected("ORDER BY ... WITH FILL is not supported")
            if isinstance(target, exp.Literal) and not target.is_string:
                index = int(target.this) - 1
                if not 0 <= index < len(self.outputs):
                    raise QueryRejected(f"ORDER BY {target.this} is out of range")
                expr = self.outputs[index].expr
            else:
                expr = self._post(target, f"ORDER BY {target.sql(DIALECT)}", aliases=True)
            items.append((expr, bool(ordered.args.get("desc"))))
        return tuple(items)


def _check_names(items: list[exp.Expr], outputs_: list[OutputColumn]) -> None:
    """Two result columns may share a name where ClickHouse allows it: both the same expression
    (``SELECT count(*), count(*)``, or ``count() AS n, count() AS n``), hence the same value. Two
    different expressions under one alias are refused, as ClickHouse refuses them."""
    seen: dict[str, str] = {}
    for item, out in zip(items, outputs_, strict=True):
        expr = item.unalias() if isinstance(item, exp.Alias) else item
        text = expr.sql(DIALECT)
        if seen.setdefault(out.name, text) != text:
            raise QueryRejected(f"two different result columns are both named {out.name}",
                                hint="give them distinct aliases")


def _same(a: exp.Expr, b: exp.Expr, relation: Relation) -> bool:
    if isinstance(a, exp.Column) and isinstance(b, exp.Column):
        try:
            return relation.resolve(a).base_sql == relation.resolve(b).base_sql
        except QueryRejected:
            return False
    return a.sql(DIALECT) == b.sql(DIALECT)


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


def _non_negative_int(node: exp.Expr | None, what: str) -> int:
    if isinstance(node, exp.Literal) and not node.is_string and node.this.isdigit():
        return int(node.this)
    raise QueryRejected(f"{what} must be a whole number literal")


__all__ = ["MAX_GROUPS", "OutputColumn", "QueryPlan", "analyze"]
