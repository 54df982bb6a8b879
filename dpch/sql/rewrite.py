"""Rewrite: a :class:`QueryPlan` → the ClickHouse SQL that computes its exact measures.

Shape of the emitted query:

    WITH __rows AS (                      -- the capped rows
        SELECT <column> AS c0, …, <unit> AS __unit
        FROM <tables and joins> WHERE <filters, key domains>
        ORDER BY <unit>, <keyed hash of the row number> LIMIT k BY <unit>)
    SELECT <key> AS k0, …, <measure> AS m0, …
    FROM __rows [WHERE (__unit, tuple(keys)) IN <G groups of each unit, at random>]
    GROUP BY k0, …

The rows a unit keeps are chosen at random per row under a key drawn for each release, bound as
query parameters (:func:`.cap.row_order`; docs/design.md rule 10). Nothing of the analyst's text reaches ClickHouse
except through this module: the query is one tree assembled from the plan's trees (built by
:mod:`.nodes`, never parsed from text) and rendered once (docs/design.md rule 4).
"""

from __future__ import annotations

from sqlglot import exp

from dpch.policy.model import TablePolicy, base_type
from dpch.sql.analyze import UNIT_COLUMN, QueryPlan
from dpch.sql.cap import (
    CAP_KEY_PARAMETERS,
    PART_MARK,
    ROW_MARK,
    cap_key_placeholders,
    capped,
    capped_rows,
    count_by_unit,
    row_order,
    split_index_table,
    split_point,
    two_stage,
    verified_branches,
    verified_record,
)
from dpch.sql.nodes import (
    alias,
    call,
    cast_to,
    column,
    conjunction,
    ident,
    limit_by,
    ordered,
    pinned_settings,
    render,
    setting,
)
from dpch.sql.relation import quote
from dpch.sql.rewrite_literals import literal

__all__ = ["emit_probe_sqls", "emit_sql", "emit_tree", "literal", "quote", "render"]

SELECTION_MEASURE = "units"
ROWS = "__rows"
#: under the per-group bound: each unit's rows cut to c per group, and the column ordering them at random
KEPT = "__kept"
ORDER_COLUMN = "__order"
#: ``dp_report_dropped``: the column holding (Σ over units of kept rows ÷ rows, number of units), after the
#: measures (:func:`_bound_report`)
BOUND_REPORT = "__bound_report"


def _inner(plan: QueryPlan, *, cap: bool = True, fast: bool = True) -> exp.Query:
    """The capped rows: each unit's first k rows of the filtered source, columns c0… and the unit
    (``cap=False``: every filtered row, for :func:`.cap.count_by_unit`; ``fast=False``: always
    capped, in one stream — no split, no verified branch)."""
    relation = plan.relation
    assert relation.from_ is not None and relation.unit is not None
    columns = [alias(base, name) for name, base in plan.inner]
    columns.append(alias(relation.unit, UNIT_COLUMN))
    select = exp.Select(expressions=columns).from_(relation.from_.copy(), copy=False)
    if relation.joins:
        select.set("joins", [j.copy() for j in relation.joins])
    if plan.where:
        select.set("where", exp.Where(this=conjunction(list(plan.where))))
    if plan.per_group:
        # per group, the rows are cut by unit and group in the next step (:func:`_per_group_rows`): each row
        # carries its place in its unit's random order, drawn here where the row's identity is readable
        select.expressions.append(alias(row_order(relation.row_id), ORDER_COLUMN))
        return select
    if not (relation.needs_cap and cap):
        return select
    if fast and relation.verified is not None:
        # uncapped while the data is the verified data, capped otherwise (one scalar guard decides)
        return verified_branches(select, lambda rows: _capped(plan, rows, split=True), relation.verified)
    return _capped(plan, select, split=fast)


def _capped(plan: QueryPlan, select: exp.Select, *, split: bool) -> exp.Query:
    """``select``'s rows cut to k of each unit's rows, chosen at random per row under the release's key
    (:func:`.cap.row_order`): split over two unit ranges where the owner declared ``split_cap`` (and
    ``split``), else in one stream."""
    relation = plan.relation
    assert relation.unit is not None
    unit = column(UNIT_COLUMN)
    # by the unit as the table stores it first: on a table sorted by its unit ClickHouse reads in that
    # order and sorts each unit's rows by the key alone
    stored = bool(relation.order) and relation.tables[0].cap_order == "stored"
    keyed = row_order(relation.row_id)
    # the owner's explicit choice (stored): each unit's first k rows as stored
    order = relation.order if stored else [relation.unit.copy(), keyed]
    if split and relation.tables[0].distributed and not stored:
        # on shards: each sends its per-unit partial states of at most k rows, not every row
        return two_stage(select, keyed, relation.cap, UNIT_COLUMN)
    source = _split_source(plan)
    if split and source is not None:
        # stored ordered by the unit: two branches over the two halves of the unit range
        return capped_rows(select, order, relation.cap, unit, relation.unit, split_point(*source, relation.unit_name))
    return capped(select, order, relation.cap, unit)


def _split_source(plan: QueryPlan) -> tuple[str, str] | None:
    """(database, table) when the owner declared ``split_cap`` on the one table the capped rows come
    from and it can be split: the cap then runs over two unit ranges of it. Opt-in, never chosen by
    the table's size (that choice would depend on the data, and show in the SQL): splitting costs a
    few ms on small tables (docs/annotating.md)."""
    if not _splittable(plan) or not plan.relation.tables[0].split_cap:
        return None
    source = plan.relation.source
    assert source is not None
    return source[0], source[1]


def _splittable(plan: QueryPlan) -> bool:
    """Whether the capped rows come from one table stored ordered by its (non-Nullable) unit, which
    also leads its primary index (the split point is read from the index)."""
    relation = plan.relation
    table = relation.tables[0]
    return bool(relation.order) and relation.source is not None and not table.nullable_unit and table.unit_indexed


def _counts_by_unit(plan: QueryPlan) -> bool:
    """Whether the query is one ungrouped ``count()`` of capped rows that must otherwise be sorted:
    then Σ least(rows, k) per unit. On a table ordered by its unit the split cap is faster (100 M
    rows here: 0.77 s per unit vs 0.67 s one stream), on another 3.3× slower (10 M rows: 1.39 s
    sorted cap vs 0.43 s per unit; docs/benchmarks.md)."""
    if plan.keys or plan.partition_selection or plan.restrict_groups or not plan.relation.needs_cap \
            or plan.report_dropped:
        return False
    # stored ordered by the unit, the cap streams (split or not); verified, branch 1 counts plainly
    if _splittable(plan) or plan.relation.verified is not None:
        return False
    if len(plan.measures) != 1:
        return False
    node = plan.measures[0].node
    return isinstance(node, exp.Count) and not node.args.get("distinct") and \
        (node.this is None or isinstance(node.this, exp.Star)) and not node.expressions


def _count_by_unit(plan: QueryPlan, rows: exp.Table) -> exp.Select:
    """The one ungrouped count() as Σ least(rows, k) per unit over the uncapped rows (same value)."""
    select = count_by_unit(rows, column(UNIT_COLUMN), plan.relation.cap, plan.measures[0].name)
    select.set("with_", exp.With(expressions=[exp.CTE(this=_inner(plan, cap=False),
                                                      alias=exp.TableAlias(this=ident(ROWS)))]))
    return select


def _aggregate(plan: QueryPlan, rows: exp.Table, *, fast: bool) -> exp.Select:
    """Keys and measures over the capped rows."""
    select_list: list[exp.Expr] = [alias(k.node, f"k{i}", quoted=False) for i, k in enumerate(plan.keys)]
    select_list += [alias(m.node, m.name, quoted=False) for m in plan.measures]
    if plan.partition_selection:
        select_list.append(alias(call("uniqExact", column(UNIT_COLUMN)), SELECTION_MEASURE, quoted=False))
    inner = _inner(plan, fast=fast)
    if plan.per_group and fast and plan.relation.tables[0].distributed:
        # on shards: each sends, per unit and group, a partial state of at most c rows, not every row
        assert isinstance(inner, exp.Select)
        ctes = [exp.CTE(this=_per_group_two_stage(plan, inner), alias=exp.TableAlias(this=ident(KEPT)))]
        rows = exp.Table(this=ident(KEPT))
    else:
        ctes = [exp.CTE(this=inner, alias=exp.TableAlias(this=ident(ROWS)))]
        if plan.per_group:
            ctes.append(exp.CTE(this=_per_group_rows(plan, rows), alias=exp.TableAlias(this=ident(KEPT))))
            rows = exp.Table(this=ident(KEPT))
    if plan.report_dropped:  # after the measures, before partition selection's count of units
        select_list.insert(len(plan.keys) + len(plan.measures), alias(_bound_report(plan, rows), BOUND_REPORT,
                                                                      quoted=False))
    pairs = _group_pairs(plan, rows) if plan.restrict_groups and fast else None
    if pairs is not None:  # one read of the kept rows: each unit's G groups, as partial states, merged per group
        merged = [_combined(m.node, "Merge", [exp.column(m.name)]) for m in plan.measures]
        select_list = [*(exp.column(f"k{i}") for i in range(len(plan.keys))),
                       *(alias(node, m.name, quoted=False)
                         for node, m in zip(merged, plan.measures, strict=True) if node is not None),
                       *select_list[len(plan.keys) + len(plan.measures):]]
        if plan.partition_selection:  # each (unit, group) pair is one row: a group's units are its rows
            select_list[-1] = alias(call("count"), SELECTION_MEASURE, quoted=False)
        select = exp.Select(expressions=select_list).from_(pairs, copy=False)
    else:
        select = exp.Select(expressions=select_list).from_(rows, copy=False)
    if fast and plan.relation.verified is not None:
        ctes.insert(0, verified_record(plan.relation.verified))  # one scalar, read by both branches
    select.set("with_", exp.With(expressions=ctes))
    if plan.restrict_groups and pairs is None:
        select.set("where", exp.Where(this=_kept_groups(plan, rows)))
    if plan.keys:
        select.set("group", exp.Group(expressions=[exp.column(f"k{i}") for i in range(len(plan.keys))]))
    return select


def _bound_report(plan: QueryPlan, rows: exp.Table) -> exp.Subquery:
    """``dp_report_dropped``'s exact inputs, one scalar (every group row repeats it):

        (SELECT tuple(sum(__k / __n), count()) FROM
           (SELECT __unit, count() AS __n FROM <filtered rows, uncapped> GROUP BY __unit) AS __all
           LEFT JOIN (SELECT __unit, count() AS __k FROM <kept rows> GROUP BY __unit) AS __kept_units
           USING (__unit))

    Σ_u k_u/n_u, the units' mass the bound kept (n_u a unit's rows that pass the filters, k_u those it
    keeps), and U, the number of units: each moves by at most 1 when one unit is added or removed (its
    term is in [0, 1]; no other unit's term changes, since a unit's kept rows are a function of its own
    rows and the release's key). The kept rows are the ones the measures read (``rows``, with the
    per-group bound's choice of groups), under the same key. A unit the bound dropped entirely is
    missing on the right: ``join_use_nulls = 0`` (pinned) gives it k = 0. When the measures' result
    has no row, no unit passed the filters, and both numbers are 0 (:func:`dpch.pipeline.execute.exact`)."""
    unit = column(UNIT_COLUMN)
    every = exp.Select(expressions=[unit.copy(), alias(call("count"), "__n", quoted=False)])
    every = every.from_(exp.Subquery(this=_inner(plan, cap=False)), copy=False)
    every.set("group", exp.Group(expressions=[unit.copy()]))
    kept = exp.Select(expressions=[unit.copy(), alias(call("count"), "__k", quoted=False)])
    kept = kept.from_(rows.copy(), copy=False)
    if plan.restrict_groups:
        kept.set("where", exp.Where(this=_kept_groups(plan, rows)))
    kept.set("group", exp.Group(expressions=[unit.copy()]))
    report = exp.Select(expressions=[call("tuple", call("sum", exp.Div(this=column("__k"), expression=column("__n"))),
                                          call("count"))])
    report = report.from_(exp.Subquery(this=every, alias=exp.TableAlias(this=ident("__all"))), copy=False)
    report.set("joins", [exp.Join(this=exp.Subquery(this=kept, alias=exp.TableAlias(this=ident("__kept_units"))),
                                  side="LEFT", using=[ident(UNIT_COLUMN)])])
    return exp.Subquery(this=report)


def _per_group_rows(plan: QueryPlan, rows: exp.Table) -> exp.Select:
    """``SELECT * FROM rows ORDER BY unit, keys, __order LIMIT c BY unit, keys``: at most c rows of each
    unit in each group, chosen at random per row under the release's key (the per-group bound of
    :mod:`.contribution`; which G groups a unit keeps is :func:`_kept_groups`'s). NULL keys form one group
    in ``LIMIT BY``, as in ``GROUP BY``."""
    assert plan.bound is not None
    unit = column(UNIT_COLUMN)
    keys = [k.node.copy() for k in plan.keys]
    select = exp.Select(expressions=[exp.Star()]).from_(rows.copy(), copy=False)
    select.set("order", exp.Order(expressions=[ordered(o) for o in [unit.copy(), *keys, column(ORDER_COLUMN)]]))
    select.set("limit", limit_by(plan.bound.rows_per_group, unit, *(k.copy() for k in keys)))
    return select


def _per_group_two_stage(plan: QueryPlan, select: exp.Select) -> exp.Select:
    """:func:`_per_group_rows`'s rows as a two-stage aggregate (:func:`.cap.two_stage` grouped by unit and
    keys, ``groupArraySorted(c)`` of the rows in their keyed order), for a Distributed table: the first
    stage runs on each shard over the filtered source (``select``, :func:`_inner`'s, changed in place),
    so the initiator merges per-(unit, group) states of at most c rows instead of receiving every row
    (issue 26, part 3)."""
    assert plan.bound is not None
    order = next(e for e in select.expressions if e.alias_or_name == ORDER_COLUMN)
    select.set("expressions", [e for e in select.expressions if e is not order])
    return two_stage(select, order.this, plan.bound.rows_per_group, UNIT_COLUMN, by=[k.node for k in plan.keys])


def _kept_groups(plan: QueryPlan, rows: exp.Table) -> exp.In:
    """``(unit, tuple(keys)) IN (SELECT unit, tuple(keys) FROM rows GROUP BY … ORDER BY unit,
    sipHash64Keyed(<key>, unit, tuple(keys)) LIMIT G BY unit)``: each unit's G groups, chosen uniformly at
    random among the groups of its kept rows under the release's cap key (issue 27, item 2).

    Why each part: the unit is in the hash, so units choose independently (a hash of the keys alone made
    every unit prefer the same G groups: those groups kept everything and the others nothing); the key is
    the release's, so the choice is fresh per release and fixed within it (its measures, an
    accuracy-first run); the keys are wrapped in ``tuple()``, where ClickHouse compares NULL equal to
    NULL (a bare NULL key never matched ``IN``, so a NULL group lost every row, with
    ``transform_null_in`` pinned to 0). Which G groups are kept never changes how many: the sensitivity
    is the same whatever the order, as for the rows (docs/algorithms.md C3a)."""
    unit = column(UNIT_COLUMN)
    group = call("tuple", *(k.node.copy() for k in plan.keys))
    first = exp.Select(expressions=[unit.copy(), group.copy()]).from_(rows.copy(), copy=False)
    first.set("group", exp.Group(expressions=[unit.copy(), group.copy()]))
    order = call("sipHash64Keyed", cap_key_placeholders(), unit.copy(), group.copy())
    first.set("order", exp.Order(expressions=[ordered(unit.copy()), ordered(order)]))
    first.set("limit", limit_by(plan.groups_per_unit, unit))
    return exp.In(this=exp.Tuple(expressions=[unit.copy(), group]), query=exp.Subquery(this=first))


#: alias of :func:`_group_pairs`'s subquery
PAIRS = "__pairs"
#: the aggregates dpch's measures are built of whose -State merged by -Merge is exactly the aggregate of all
#: the rows (sums of counts and of values, union of distinct sets, sums of histogram maps)
MERGEABLE = frozenset({"sum", "count", "uniqExact", "sumMapIf"})


def _combined(node: exp.Expr, combinator: str, args: list[exp.Expr] | None = None) -> exp.Expr | None:
    """The aggregate call ``node`` with a combinator (``sum(x)`` → ``sumState(x)``, or ``sumMerge(<args>)``),
    or None when ``node`` is not one aggregate call dpch built under a name it knows."""
    if isinstance(node, exp.Anonymous):
        name = str(node.this)
    elif isinstance(node, exp.Func) and node.meta.get("clickhouse_name"):
        name = str(node.meta["clickhouse_name"])
    else:
        return None
    if name not in MERGEABLE:
        return None
    given = [a.copy() for a in node.iter_expressions()] if args is None else args
    return exp.Anonymous(this=f"{name}{combinator}", expressions=given)


def _group_pairs(plan: QueryPlan, rows: exp.Table) -> exp.Subquery | None:
    """The rows of each unit's G groups as one row per (unit, group): the keys and each measure's partial
    state (``sumState(…)``, ``uniqExactState(…)``: ClickHouse's -State combinator) over the unit's rows in
    that group, ``GROUP BY unit, keys``, ``ORDER BY unit, sipHash64Keyed(<key>, unit, tuple(keys)) LIMIT G BY
    unit``. The outer query merges the states per group (-Merge). The same groups as
    :func:`_kept_groups` (the same order, over the same rows), so the same values, from one read of the kept
    rows instead of two and a set of (unit, group) tuples (issue 29). None when a measure is not one
    aggregate call (the IN form then applies)."""
    states = [_combined(m.node, "State") for m in plan.measures]
    if any(state is None for state in states):
        return None
    unit = column(UNIT_COLUMN)
    keys = [k.node.copy() for k in plan.keys]
    select = exp.Select(expressions=[unit.copy(), *(alias(k.copy(), f"k{i}", quoted=False) for i, k in enumerate(keys)),
                                     *(alias(state, m.name, quoted=False)
                                       for state, m in zip(states, plan.measures, strict=True) if state is not None)])
    select = select.from_(rows.copy(), copy=False)
    select.set("group", exp.Group(expressions=[unit.copy(), *(k.copy() for k in keys)]))
    order = call("sipHash64Keyed", cap_key_placeholders(), unit.copy(), call("tuple", *(k.copy() for k in keys)))
    select.set("order", exp.Order(expressions=[ordered(unit.copy()), ordered(order)]))
    select.set("limit", limit_by(plan.groups_per_unit, unit.copy()))
    return exp.Subquery(this=select, alias=exp.TableAlias(this=ident(PAIRS)))


def emit_tree(plan: QueryPlan, *, fast_cap: bool = True) -> exp.Query:
    """The emitted query as one sqlglot tree, built from the plan's trees (nothing parsed): what runs
    and what the probe checks are both rendered from it (docs/design.md rule 4).

    ``fast_cap=False`` emits the cap as one ``ORDER BY … LIMIT k BY`` stream, without the rewrites
    of :mod:`.cap` (split ranges, COUNT by unit, a verified table's guarded branches) and each unit's G
    groups as an ``IN`` set over a second read of the rows instead of :func:`_group_pairs`: the same exact
    values, slower; the always-capped reference the tests and the benchmark compare the rewrites with.
    """
    rows = exp.Table(this=ident(ROWS))
    if fast_cap and _counts_by_unit(plan):
        select = _count_by_unit(plan, rows)
    else:
        select = _aggregate(plan, rows, fast=fast_cap)
    # pinned whatever the server profile says (nodes.pinned_settings says why each)
    select.set("settings", pinned_settings())
    return select


def emit_sql(plan: QueryPlan, database: str) -> str:
    """The ClickHouse SQL computing ``plan``'s exact measures (keys k0…, measures m0…).

    With partition selection the result also has ``units``: distinct units per key.
    """
    del database  # table names in the plan are already qualified
    return render(emit_tree(plan))


def emit_probe_sqls(plan: QueryPlan, database: str) -> tuple[str, str]:
    """The probes of ``plan``: its emitted tree over one synthetic row of non-NULL defaults per table,
    reading no data, run before the charge so that a query that cannot run is rejected for free and
    the outcome cannot depend on the data (an empty input or EXPLAIN skips functions over Nullable
    columns, so the probe executes rather than explains).

    Each is a tree rewrite of the emitted query — table nodes become one-row subqueries; a string
    literal that happens to spell a table's name is left alone — with short-circuit evaluation off,
    so every branch of if/multiIf/AND/OR runs on the row:

    1. *filtered*: the query as it will run, so conditions and join keys execute on the row;
    2. *unfiltered*: WHERE clauses dropped and joins made LEFT, so the row reaches every key and
       aggregate even when a key domain or a join would filter it out (a type error that appears only
       when a real row reaches an aggregate would otherwise fail after the charge, and only when
       some row matched: a membership oracle the neighbour fuzzer found).
    """
    synthetic = {table.table: _synthetic_row(table) for table in plan.relation.tables}

    def swap(node: exp.Expr) -> exp.Expr:
        if isinstance(node, exp.Table) and node.args.get("db") is not None and node.db == database \
                and node.name in synthetic:
            return exp.Subquery(this=synthetic[node.name].copy(), alias=node.args.get("alias"))
        if isinstance(node, exp.Column) and node.meta.get(PART_MARK):
            return exp.Literal.string("")  # the synthetic row is in no part
        if isinstance(node, exp.Column) and node.meta.get(ROW_MARK):
            return cast_to(exp.Literal.number(0), "UInt64")  # nor has a row number or shard
        if isinstance(node, exp.Placeholder) and node.name in CAP_KEY_PARAMETERS:
            return cast_to(exp.Literal.number(0), "UInt64")  # any key: the probe reads no row of the data
        index = split_index_table(node)
        if index is not None and index[0] == database and index[1] in synthetic:
            # the cap's split point reads the table's primary index: the probe reads the row instead
            return exp.Subquery(this=synthetic[index[1]].copy(), alias=node.args.get("alias"))
        return node

    filtered = emit_tree(plan).transform(swap, copy=False)  # a fresh tree: rewritten in place
    unfiltered = filtered.copy().transform(_unfiltered, copy=False)
    return render(_eager(filtered)), render(_eager(unfiltered))


def _unfiltered(node: exp.Expr) -> exp.Expr:
    if isinstance(node, exp.Select) and node.args.get("where") is not None:
        node.set("where", None)
    if isinstance(node, exp.Join) and (node.args.get("kind") or "").upper() != "ARRAY":  # the cap's, not a join
        node.set("side", "LEFT")
        node.set("kind", "ASOF" if (node.args.get("kind") or "").upper() == "ASOF" else "ANY")
    return node


def _eager(tree: exp.Expr) -> exp.Expr:
    """``tree`` with short-circuit evaluation off: every branch runs on the probe's row."""
    settings = list(tree.args.get("settings") or [])
    settings.append(setting("short_circuit_function_evaluation", exp.Literal.string("disable")))
    tree.set("settings", settings)
    return tree


def _synthetic_row(table: TablePolicy) -> exp.Select:
    """One row of each column's default value, *not constant* (``materialize``): ClickHouse resolves a
    constant differently from a column (it parses a constant string compared with a Date once, where a
    String column has no common type with Date and is refused), so a constant row would pass probes
    that the real table fails after the charge (issue 24)."""
    columns = [alias(call("materialize", cast_to(call("defaultValueOfTypeName", exp.Literal.string(base_type(c.type))),
                                                 c.type)), c.name)
               for c in table.columns.values()]
    return exp.Select(expressions=columns)
