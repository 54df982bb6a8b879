"""Rewrite: a :class:`QueryPlan` → the ClickHouse SQL that computes its exact measures.

Shape of the emitted query:

    WITH __rows AS (                      -- the capped rows
        SELECT <column> AS c0, …, <unit> AS __unit
        FROM <tables and joins> WHERE <filters, key domains>
        ORDER BY <stored order, or unit + row hash> LIMIT k BY <unit>)
    SELECT <key> AS k0, …, <measure> AS m0, …
    FROM __rows [WHERE (__unit, keys) IN <each unit's first G keys>]
    GROUP BY k0, …

Rows of a unit are kept deterministically: in the table's stored order when it is sorted by
the unit (ClickHouse then streams ``LIMIT BY``: 0.22 s vs 0.62 s with a hash sort on 10 M rows
here), else by unit and a hash of the row. Nothing of the analyst's text reaches ClickHouse
except through this module, built from validated trees.
"""

from __future__ import annotations

import sqlglot
from sqlglot import exp

from dpch.policy.model import TablePolicy, base_type
from dpch.sql.analyze import UNIT_COLUMN, QueryPlan
from dpch.sql.parse import DIALECT
from dpch.sql.relation import quote
from dpch.sql.rewrite_literals import literal

__all__ = ["emit_probe_sqls", "emit_sql", "emit_tree", "literal", "quote", "render"]

SELECTION_MEASURE = "units"


def _inner(plan: QueryPlan) -> str:
    relation = plan.relation
    columns = [f"{base} AS {quote(name)}" for name, base in plan.inner_columns]
    columns.append(f"{relation.unit_sql} AS {quote(UNIT_COLUMN)}")
    sql = f"SELECT {', '.join(columns)} FROM {relation.from_sql}"
    if plan.conditions:
        sql += " WHERE " + " AND ".join(f"({c})" for c in plan.conditions)
    if relation.needs_cap:
        if relation.order_sql:
            order = relation.order_sql
        else:
            hashed = ", ".join(quote(name) for name, _ in plan.inner_columns)
            order = f"{quote(UNIT_COLUMN)}" + (f", cityHash64({hashed})" if hashed else "")
        sql += f" ORDER BY {order} LIMIT {relation.cap} BY {quote(UNIT_COLUMN)}"
    return sql


def _assemble(plan: QueryPlan) -> str:
    """The emitted query as text assembled from the plan's validated parts (parsed once, below)."""
    rows = quote("__rows")
    select = [f"{k.sql} AS k{i}" for i, k in enumerate(plan.keys)]
    select += [f"{m.sql} AS {m.name}" for m in plan.measures]
    if plan.partition_selection:
        select.append(f"uniqExact({quote(UNIT_COLUMN)}) AS {SELECTION_MEASURE}")
    sql = f"WITH {rows} AS ({_inner(plan)}) SELECT {', '.join(select)} FROM {rows}"
    if plan.restrict_groups:
        keys = ", ".join(k.sql for k in plan.keys)
        unit = quote(UNIT_COLUMN)
        sql += (
            f" WHERE ({unit}, {keys}) IN (SELECT {unit}, {keys} FROM {rows} GROUP BY {unit}, {keys}"
            f" ORDER BY {unit}, cityHash64({keys}) LIMIT {plan.groups_per_unit} BY {unit})"
        )
    if plan.keys:
        sql += " GROUP BY " + ", ".join(f"k{i}" for i in range(len(plan.keys)))
    # a LEFT join's unmatched rows carry the column type's default, which the key domain counts on:
    # pinned, so a server profile with join_use_nulls = 1 cannot silently drop that group
    return sql + " SETTINGS join_use_nulls = 0"


def emit_tree(plan: QueryPlan) -> exp.Query:
    """The emitted query as one sqlglot tree: what runs and what the probe checks are both rendered
    from it (docs/design.md rule 4), so no text substitution can make them differ."""
    return sqlglot.parse_one(_assemble(plan), read=DIALECT)  # type: ignore[return-value]


def render(tree: exp.Expr) -> str:
    """The one way an emitted tree becomes SQL text."""
    return tree.sql(dialect=DIALECT)


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
        return node

    filtered = emit_tree(plan).transform(swap)
    unfiltered = filtered.copy().transform(_unfiltered)
    return render(_eager(filtered)), render(_eager(unfiltered))


def _unfiltered(node: exp.Expr) -> exp.Expr:
    if isinstance(node, exp.Select) and node.args.get("where") is not None:
        node.set("where", None)
    if isinstance(node, exp.Join):
        node.set("side", "LEFT")
        node.set("kind", "ASOF" if (node.args.get("kind") or "").upper() == "ASOF" else "ANY")
    return node


def _eager(tree: exp.Expr) -> exp.Expr:
    """``tree`` with short-circuit evaluation off: every branch runs on the probe's row."""
    settings = list(tree.args.get("settings") or [])
    settings.append(exp.EQ(this=exp.column("short_circuit_function_evaluation"),
                           expression=exp.Literal.string("disable")))
    tree.set("settings", settings)
    return tree


def _synthetic_row(table: TablePolicy) -> exp.Select:
    columns = ", ".join(
        f"CAST(defaultValueOfTypeName({literal(base_type(c.type))}), {literal(c.type)}) AS {quote(c.name)}"
        for c in table.columns.values()
    )
    return sqlglot.parse_one(f"SELECT {columns}", read=DIALECT)  # type: ignore[return-value]
