"""Rewrite: a :class:`QueryPlan` → the ClickHouse SQL that computes its exact aggregates.

The emitted query reads only the columns the plan needs, applies the analyst's (validated)
WHERE, keeps only rows whose group keys are in the declared domains, caps each privacy unit
at k rows with ``LIMIT k BY unit`` (rows chosen deterministically: by unit, then by a hash
of the row), clamps summed values with ``least(greatest(x, lo), hi)``, and aggregates per
group. Nothing of the analyst's text reaches ClickHouse except through this function.
"""

from __future__ import annotations

from sqlglot import exp

from dpch.policy.model import base_type
from dpch.sql.analyze import QueryPlan
from dpch.sql.parse import DIALECT


def quote(name: str) -> str:
    return "`" + name.replace("\\", "\\\\").replace("`", "\\`") + "`"


def literal(value: object) -> str:
    """A ClickHouse literal for a declared key value (strings escaped by sqlglot)."""
    return exp.convert(value).sql(dialect=DIALECT)


def emit_sql(plan: QueryPlan, database: str, *, source: str | None = None) -> str:
    """The ClickHouse SQL computing ``plan``'s exact measures (keys k0.., measures m0..).

    ``source`` replaces the table (see :func:`emit_probe_sql`).
    """
    table = source or f"{quote(database)}.{quote(plan.table.table)}"
    columns = ", ".join(quote(c) for c in plan.needed_columns)
    conditions = []
    if plan.where is not None:
        conditions.append(f"({_where_sql(plan)})")
    for key in plan.keys:
        values = ", ".join(literal(v) for v in key.values)
        conditions.append(f"{quote(key.column)} IN ({values})")
    inner = f"SELECT {columns} FROM {table}"
    if conditions:
        inner += " WHERE " + " AND ".join(conditions)
    if not plan.table.unique_units:
        unit = quote(plan.table.privacy_unit or "")
        inner += f" ORDER BY {_row_order(plan, columns)} LIMIT {plan.table.contribution_cap} BY {unit}"
    select = [f"{quote(k.column)} AS k{i}" for i, k in enumerate(plan.keys)]
    select += [f"{m.sql} AS {m.name}" for m in plan.measures]
    sql = f"SELECT {', '.join(select)} FROM ({inner})"
    if plan.keys:
        sql += " GROUP BY " + ", ".join(f"k{i}" for i in range(len(plan.keys)))
    return sql


def _row_order(plan: QueryPlan, columns: str) -> str:
    """Which k rows of a unit are kept: deterministically, and cheaply where possible.

    A table stored ordered by its unit is read in its sorting-key order (ClickHouse streams
    LIMIT BY over it: 0.22 s vs 0.62 s with a hash sort on 10 M rows here); otherwise rows are
    ordered by unit, then by a hash of the row, which needs a full sort.
    """
    if plan.table.unit_ordered:
        return ", ".join(quote(c) for c in plan.table.sorting_key)
    return f"{quote(plan.table.privacy_unit or '')}, cityHash64({columns})"


def _where_sql(plan: QueryPlan) -> str:
    """The WHERE condition with column references unqualified (the subquery has one table)."""
    assert plan.where is not None
    where = plan.where.copy()
    for col in where.find_all(exp.Column):
        col.set("table", None)
        col.this.set("quoted", True)
    return where.sql(dialect=DIALECT)


def emit_probe_sql(plan: QueryPlan, database: str) -> str:
    """The plan's SQL over one synthetic row of non-NULL default values, no table data.

    Running it makes ClickHouse type-check and execute every expression of the query (an empty
    input or EXPLAIN skips functions over Nullable columns), so a query that cannot run is
    rejected before anything is charged, and the outcome cannot depend on the data.
    """
    columns = []
    for name in plan.needed_columns:
        full = plan.table.columns[name].type
        columns.append(
            f"CAST(defaultValueOfTypeName({literal(base_type(full))}), {literal(full)}) AS {quote(name)}"
        )
    return emit_sql(plan, database, source=f"(SELECT {', '.join(columns)})")
