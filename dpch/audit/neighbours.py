"""Neighbouring datasets for an audit: D and D′ that differ in one privacy unit.

Both are real tables in scratch databases of the same ClickHouse store (the table keeps its
name, DDL and ``dp:`` annotations, so the analyst's SQL runs unchanged on either side):

- ``add`` (default): D is a copy of the table; D′ is D plus one *new* unit chosen to be the
  worst case for the query: its rows copy a row that passes the query's WHERE and lies in the
  targeted (first matching) group, so every row lands in one group; every summed or averaged
  column is set *beyond* its declared bounds on the side of max(|lo|, |hi|), so the clamp
  decides the shift (a column a quantile reads: on the side that moves its rank utility most,
  :func:`quantile_sides`); and the unit has twice the contribution cap in rows, so the cap decides
  the count. With the policy enforced, the exact aggregates move by exactly the derived
  sensitivity (the runner reports the realized shift); without it they move further.
- ``remove``: D′ is D without the existing unit that has the most rows passing the WHERE.

Joins (:func:`_join_neighbours`): every table the query reads is copied to both sides; the
unit is added to (or removed from) *every private table* at once — adding one person means
their rows in ``visits`` and their row in ``people`` — with a template taken from a joined row
that passes the WHERE, so the unit's rows meet in the join. Public tables are the same on both
sides. GROUP BY a private column (partition selection) needs nothing special: the unit's rows
land in a key that exists, which moves its count of distinct units by one.

Add/remove neighbours are symmetric (docs/design.md, DPCH paper Def 1), so either direction audits
the same guarantee. The scratch databases are dropped by :meth:`NeighbourPair.drop`.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass
from typing import Any, Literal

from dpch.errors import QueryRejected
from dpch.mechanisms.sampling import NoiseSource
from dpch.policy.model import base_type
from dpch.sql.aggregate_kinds import statistic
from dpch.sql.analyze import QueryPlan
from dpch.sql.cap import keyed
from dpch.sql.rewrite_literals import literal
from dpch.store.engine import Engine
from dpch.store.quoting import quote_identifier

Direction = Literal["add", "remove"]

_INT_RANGES = {
    "UInt8": (0, 2**8 - 1), "UInt16": (0, 2**16 - 1), "UInt32": (0, 2**32 - 1), "UInt64": (0, 2**64 - 1),
    "Int8": (-(2**7), 2**7 - 1), "Int16": (-(2**15), 2**15 - 1), "Int32": (-(2**31), 2**31 - 1),
    "Int64": (-(2**63), 2**63 - 1),
}


@dataclass(frozen=True)
class NeighbourPair:
    """Where D and D′ live, and which unit tells them apart."""

    table: str
    d_database: str
    dprime_database: str
    direction: Direction
    unit: Any
    rows: int
    description: str

    def drop(self, engine: Engine) -> None:
        """Drops both scratch databases (the audit's ledger with them)."""
        for db in (self.d_database, self.dprime_database):
            engine.command(f"DROP DATABASE IF EXISTS {quote_identifier(db)}")


def build_neighbours(
    engine: Engine,
    plan: QueryPlan,
    *,
    direction: Direction = "add",
    scratch: str | None = None,
    rows_factor: int = 2,
) -> NeighbourPair:
    """Builds D and D′ for ``plan`` (the analyzed query) from its table in ``engine``'s database.

    ``scratch`` names the pair (databases ``{scratch}_d`` and ``{scratch}_dprime``); ``rows_factor``
    is how many times the contribution cap the added unit's rows exceed it (≥ 1).
    """
    if direction not in ("add", "remove"):
        raise QueryRejected(f"unknown neighbour direction {direction!r}", hint="use 'add' or 'remove'")
    if len(plan.relation.tables) > 1:
        return _join_neighbours(engine, plan, direction, scratch, rows_factor)
    policy = plan.table
    unit = policy.privacy_unit
    assert unit is not None  # analyze() accepts private tables only
    scratch = scratch or f"dpch_audit_{uuid.uuid4().hex[:10]}"
    pair_dbs = (f"{scratch}_d", f"{scratch}_dprime")
    source = f"{quote_identifier(engine.database)}.{quote_identifier(policy.table)}"
    ddl = engine.query_rows(f"SHOW CREATE TABLE {source}")[0][0]
    condition = _condition_sql(plan)
    try:
        for db in pair_dbs:
            engine.command(f"DROP DATABASE IF EXISTS {quote_identifier(db)}")
            engine.command(f"CREATE DATABASE {quote_identifier(db)}")
            target = f"{quote_identifier(db)}.{quote_identifier(policy.table)}"
            engine.command(re.sub(r"^CREATE TABLE \S+", f"CREATE TABLE {target}", ddl, count=1))
        d_table = f"{quote_identifier(pair_dbs[0])}.{quote_identifier(policy.table)}"
        dp_table = f"{quote_identifier(pair_dbs[1])}.{quote_identifier(policy.table)}"
        engine.command(f"INSERT INTO {d_table} SELECT * FROM {source}")
        _copy_rows(engine, d_table, dp_table, policy.engine)  # D′ starts as D, row for row
        if direction == "remove":
            chosen = engine.query_rows(
                f"SELECT {quote_identifier(unit)}, count() AS n FROM {source} WHERE {condition} "
                f"GROUP BY {quote_identifier(unit)} ORDER BY n DESC, {quote_identifier(unit)} LIMIT 1"
            )
            if not chosen:
                raise QueryRejected(
                    "no privacy unit has rows that pass the query's WHERE, so none can be removed",
                    hint="audit with direction 'add' instead",
                )
            victim, count = chosen[0]
            _remove_unit(engine, dp_table, unit, victim, policy.engine)
            description = (f"D′ = D minus unit {unit}={victim}, which has {count} rows passing the query's filter "
                           f"(cap {policy.contribution_cap})")
            return NeighbourPair(policy.table, *pair_dbs, "remove", victim, int(count), description)

        row, columns, where_holds = _worst_case_row(engine, plan, source, condition, pair_dbs[1])
        rows = 1 if policy.unique_units else policy.contribution_cap * max(1, rows_factor)
        _insert(engine, pair_dbs[1], policy.table, [row] * rows, columns)
        new_unit = row[columns.index(unit)]
        changed = [c for c in columns if c in _measured_columns(plan)]
        description = (
            f"D′ = D plus unit {unit}={new_unit} with {rows} rows (cap {policy.contribution_cap})"
            + (f", {', '.join(changed)} beyond the bounds" if changed else "")
            + ("" if where_holds else "; WARNING: no row satisfies the query's filter, the unit may not count")
        )
        return NeighbourPair(policy.table, *pair_dbs, "add", new_unit, rows, description)
    except Exception:
        for db in pair_dbs:
            engine.command(f"DROP DATABASE IF EXISTS {quote_identifier(db)}")
        raise


def _insert(engine: Engine, database: str, table: str, rows: list[tuple], columns: list[str]) -> None:
    with Engine(engine.dsn, database=database) as scratch:  # embedded: shares the open store
        scratch.insert(table, rows, columns)


def _table_sql(plan: QueryPlan, sql: str) -> str:
    """Plan SQL over the one source table (alias ``t0``) rewritten over the table itself."""
    return sql.replace(f"{_alias(plan)}.", "")


def _alias(plan: QueryPlan) -> str:
    return plan.relation.from_sql.rsplit(" AS ", 1)[-1]


def _condition_sql(plan: QueryPlan) -> str:
    """The query's WHERE and its group-domain conditions, as ClickHouse SQL over the table."""
    return " AND ".join(f"({_table_sql(plan, c)})" for c in plan.conditions) or "1"


def _columns_of_measure(plan: QueryPlan, sql: str) -> set[str]:
    """The table's columns a measure's SQL reads."""
    names = set()
    for inner, base in plan.inner_columns:
        if f"`{inner}`" in sql:
            column = _table_sql(plan, base).strip("`")
            if column in plan.table.columns:
                names.add(column)
    return names


def _measured_columns(plan: QueryPlan) -> set[str]:
    """Columns whose values a measure sums (their bounds are what clamping enforces)."""
    return {c for m in plan.measures if m.kind in ("sum", "histogram") for c in _columns_of_measure(plan, m.sql)}


Side = Literal["low", "high"] | None


def quantile_sides(plan: QueryPlan) -> dict[str, Side]:
    """For each column a quantile reads, the end of its bounds the added unit's rows go to.

    k rows at the top end move every candidate's rank utility −|#{x ≤ c} − q·n| by q·k, at the bottom
    by (1 − q)·k: the exponential mechanism's loss is at most ε·max(q, 1 − q) (under add/remove, for its
    2Δ normalisation), reached on the side of the larger share. So a quantile below the median is
    audited with rows at the bottom, one above it with rows at the top (with several quantiles of one
    column, the side of the most extreme)."""
    measures = {m.name: m for m in plan.measures}
    levels: dict[str, list[float]] = {}
    for stat in plan.stats.values():
        if statistic(stat).selected:
            for column in _columns_of_measure(plan, measures[stat.measures[0]].sql):
                levels.setdefault(column, []).append(stat.quantile)
    return {c: "low" if 1.0 - min(qs) > max(qs) else "high" for c, qs in levels.items()}


def _extreme(value_type: str, bounds: tuple[float, float], side: Side = None) -> list[Any]:
    """Candidate worst-case values, most extreme first: beyond the bound on ``side`` (default: the bound
    of largest magnitude, the side that moves a sum most), then the bound itself (if the WHERE excludes
    the first)."""
    lo, hi = bounds
    width = hi - lo if hi > lo else 1.0
    high = abs(hi) >= abs(lo) if side is None else side == "high"
    beyond = hi + width if high else lo - width
    at = hi if high else lo
    kind = base_type(value_type)
    if kind in _INT_RANGES:
        lo_t, hi_t = _INT_RANGES[kind]
        return [int(min(max(round(beyond), lo_t), hi_t)), int(at)]
    return [float(beyond), float(at)]


def _worst_case_row(
    engine: Engine, plan: QueryPlan, source: str, condition: str, stage_db: str
) -> tuple[tuple, list[str], bool]:
    """A row for the new unit: a template passing the WHERE, measured columns pushed past their bounds."""
    policy = plan.table
    unit = policy.privacy_unit
    assert unit is not None
    columns = [c.name for c in engine.columns(policy.table)]
    select = ", ".join(quote_identifier(c) for c in columns)
    template = engine.query_rows(f"SELECT {select} FROM {source} WHERE {condition} LIMIT 1")
    found = bool(template)
    if not found:
        template = engine.query_rows(f"SELECT {select} FROM {source} LIMIT 1")
    if not template:
        raise QueryRejected(f"table {policy.table} is empty: there is nothing to audit",
                            hint="load data first (dpch load)")
    base = list(template[0])
    unit_type = base_type(policy.columns[unit].type)
    new_unit: Any
    if unit_type in _INT_RANGES:
        top = engine.query_rows(f"SELECT max({quote_identifier(unit)}) FROM {source}")[0][0]
        new_unit = int(top) + 1
    else:
        new_unit = f"dpch-audit-{uuid.uuid4().hex[:8]}"
    base[columns.index(unit)] = new_unit
    measured = sorted(_measured_columns(plan))
    if not measured or not found:
        return tuple(base), columns, found
    # try the most extreme variant first; keep the first one the WHERE still accepts
    sides = quantile_sides(plan)
    options = {c: _extreme(policy.columns[c].type, policy.columns[c].bounds or (0.0, 0.0), sides.get(c))
               for c in measured}
    variants = []
    for level in range(2):
        row = list(base)
        for c in measured:
            row[columns.index(c)] = options[c][level]
        variants.append(tuple(row))
    variants.append(tuple(base))
    stage = "dpch_audit_stage"
    engine.command(
        f"CREATE TABLE {quote_identifier(stage_db)}.{quote_identifier(stage)} "
        f"AS {source} ENGINE = Memory"
    )
    try:
        marked = [tuple(v) for v in variants]
        for i, v in enumerate(marked):
            _insert(engine, stage_db, stage, [v], columns)
            passes = engine.query_rows(
                f"SELECT count() FROM {quote_identifier(stage_db)}.{quote_identifier(stage)} WHERE {condition}"
            )[0][0]
            engine.command(f"TRUNCATE TABLE {quote_identifier(stage_db)}.{quote_identifier(stage)}")
            if passes:
                return marked[i], columns, True
    finally:
        engine.command(f"DROP TABLE IF EXISTS {quote_identifier(stage_db)}.{quote_identifier(stage)}")
    return tuple(base), columns, True


def _keyed_rows(engine: Engine, sql: str) -> list[tuple[Any, ...]]:
    """Rows of ``sql`` over a FROM of capped subqueries (a private join's): bound to a fresh cap key.
    Which rows the caps keep does not matter here (a unit's joined row count, one template row)."""
    return engine.query_rows(sql, keyed(sql, NoiseSource().cap_key()))


def _copy_rows(engine: Engine, d_table: str, dp_table: str, table_engine: str) -> None:
    """D′'s rows as D's, *row for row*: a MergeTree's parts are attached from D (the same parts, the same
    row numbers), so that under one cap key every unit both share keeps the same rows in both (the cap
    orders a unit's rows by a keyed hash of their row numbers, docs/algorithms.md C3a: the audit observes
    the release given its key, on neighbours coupled as the privacy argument couples them). Another
    engine is copied by INSERT … SELECT."""
    if table_engine.endswith("MergeTree") or not table_engine:
        engine.command(f"ALTER TABLE {dp_table} ATTACH PARTITION ALL FROM {d_table}")
    else:
        engine.command(f"INSERT INTO {dp_table} SELECT * FROM {d_table}")


def _remove_unit(engine: Engine, table: str, unit: str, victim: Any, table_engine: str) -> None:
    """Removes ``victim``'s rows from ``table``: a lightweight DELETE on a MergeTree (it masks the rows;
    every other row keeps its row number), else by rewriting the table without them."""
    if table_engine.endswith("MergeTree") or not table_engine:
        engine.command(f"DELETE FROM {table} WHERE {quote_identifier(unit)} = {literal(victim)}")
    else:
        engine.command(f"ALTER TABLE {table} DELETE WHERE {quote_identifier(unit)} = {literal(victim)}")


_ALIASED_COLUMN = re.compile(r"^(t\d+)\.`([^`]+)`$")


def _join_neighbours(
    engine: Engine, plan: QueryPlan, direction: Direction, scratch: str | None, rows_factor: int
) -> NeighbourPair:
    """D and D′ for a query over joined tables (public lookups and private⋈private on units).

    The relation's FROM names table i as alias ``t{i}`` (in :attr:`Relation.tables` order); the
    query's conditions are written over those aliases, so they run unchanged over the copies.
    """
    relation = plan.relation
    scratch = scratch or f"dpch_audit_{uuid.uuid4().hex[:10]}"
    pair_dbs = (f"{scratch}_d", f"{scratch}_dprime")
    source_db = engine.database
    private = [(i, t) for i, t in enumerate(relation.tables) if t.private]
    condition = " AND ".join(f"({c})" for c in plan.conditions) or "1"

    def from_in(db: str) -> str:
        return relation.from_sql.replace(f"{quote_identifier(source_db)}.", f"{quote_identifier(db)}.")

    def table_in(db: str, name: str) -> str:
        return f"{quote_identifier(db)}.{quote_identifier(name)}"

    try:
        for db in pair_dbs:
            engine.command(f"DROP DATABASE IF EXISTS {quote_identifier(db)}")
            engine.command(f"CREATE DATABASE {quote_identifier(db)}")
            for t in relation.tables:
                ddl = engine.query_rows(f"SHOW CREATE TABLE {table_in(source_db, t.table)}")[0][0]
                engine.command(re.sub(r"^CREATE TABLE \S+", f"CREATE TABLE {table_in(db, t.table)}", ddl, count=1))
        for t in relation.tables:
            engine.command(f"INSERT INTO {table_in(pair_dbs[0], t.table)} SELECT * FROM {table_in(source_db, t.table)}")
        public = [t for t in relation.tables if not t.private]
        for t in public:
            engine.command(f"INSERT INTO {table_in(pair_dbs[1], t.table)} SELECT * FROM {table_in(source_db, t.table)}")
        names = ", ".join(t.table for _, t in private)
        if direction == "remove":
            chosen = _keyed_rows(
                engine, f"SELECT {relation.unit_sql} AS u, count() AS n FROM {from_in(source_db)} WHERE {condition} "
                f"GROUP BY u ORDER BY n DESC, u LIMIT 1")
            if not chosen:
                raise QueryRejected("no privacy unit has joined rows that pass the query's WHERE, so none can be "
                                    "removed", hint="audit with direction 'add' instead")
            victim, count = chosen[0]
            for _, t in private:
                _copy_rows(engine, table_in(pair_dbs[0], t.table), table_in(pair_dbs[1], t.table), t.engine)
                _remove_unit(engine, table_in(pair_dbs[1], t.table), t.unit_column, victim, t.engine)
            return NeighbourPair(plan.table.table, *pair_dbs, "remove", victim, int(count),
                                 f"D′ = D minus unit {victim} from {names}, which has {count} joined rows passing "
                                 "the query's filter")
        for _, t in private:
            _copy_rows(engine, table_in(pair_dbs[0], t.table), table_in(pair_dbs[1], t.table), t.engine)
        return _add_joined_unit(engine, plan, private, pair_dbs, from_in, condition, rows_factor, names)
    except Exception:
        for db in pair_dbs:
            engine.command(f"DROP DATABASE IF EXISTS {quote_identifier(db)}")
        raise


def _add_joined_unit(engine: Engine, plan: QueryPlan, private: list, pair_dbs: tuple[str, str], from_in: Any,
                     condition: str, rows_factor: int, names: str) -> NeighbourPair:
    """Adds one new unit to every private table of D′: rows copied from a joined row passing the
    WHERE, measured columns beyond their bounds where the WHERE still holds."""
    relation = plan.relation
    layout = [(i, t, [c.name for c in engine.columns(t.table)]) for i, t in private]
    select = ", ".join(f"t{i}.{quote_identifier(c)}" for i, _, cols in layout for c in cols)
    template = _keyed_rows(engine, f"SELECT {select} FROM {from_in(engine.database)} WHERE {condition} LIMIT 1")
    if not template:
        raise QueryRejected("no joined row passes the query's filter: the added unit could not count",
                            hint="audit a query whose filter some row of the data satisfies")
    flat = list(template[0])
    rows_of: dict[int, list] = {}
    for i, _, cols in layout:
        rows_of[i], flat = flat[:len(cols)], flat[len(cols):]
    unit_types = {base_type(t.columns[t.privacy_unit].type) for _, t in private}
    if unit_types <= set(_INT_RANGES):
        top = max(engine.query_rows(f"SELECT max({quote_identifier(t.privacy_unit)}) FROM "
                                    f"{quote_identifier(engine.database)}.{quote_identifier(t.table)}")[0][0]
                  for _, t in private)
        new_unit: Any = int(top) + 1
    else:
        new_unit = f"dpch-audit-{uuid.uuid4().hex[:8]}"
    for i, t, cols in layout:
        rows_of[i][cols.index(t.privacy_unit)] = new_unit
    measured: list[tuple[int, str]] = []
    kinds = {m.name: m.kind for m in plan.measures}
    for inner, base in plan.inner_columns:
        match = _ALIASED_COLUMN.match(base)
        if not match or not any(k in ("sum", "histogram") and f"`{inner}`" in m.sql
                                for m in plan.measures for k in [kinds[m.name]]):
            continue
        i = int(match.group(1)[1:])
        if i in rows_of and relation.tables[i].columns.get(match.group(2)) is not None \
                and relation.tables[i].columns[match.group(2)].bounds:
            measured.append((i, match.group(2)))
    variants = []
    for level in range(2 if measured else 0):
        variant = {i: list(r) for i, r in rows_of.items()}
        for i, column in measured:
            measured_column = relation.tables[i].columns[column]
            bounds = measured_column.bounds
            assert bounds is not None  # only columns with bounds are measured (above)
            variant[i][_columns_of(layout, i).index(column)] = _extreme(measured_column.type, bounds)[level]
        variants.append(variant)
    variants.append(rows_of)
    check = (f"SELECT count() FROM {from_in(pair_dbs[1])} WHERE {condition} "
             f"AND {relation.unit_sql} = {literal(new_unit)}")
    for attempt, variant in enumerate(variants):
        counts = {}
        for i, t, cols in layout:
            counts[t.table] = 1 if t.unique_units else t.contribution_cap * max(1, rows_factor)
            _insert(engine, pair_dbs[1], t.table, [tuple(variant[i])] * counts[t.table], cols)
        if _keyed_rows(engine, check)[0][0] or attempt == len(variants) - 1:
            break
        for _, t, _ in layout:
            engine.command(f"DELETE FROM {quote_identifier(pair_dbs[1])}.{quote_identifier(t.table)} "
                           f"WHERE {quote_identifier(t.privacy_unit)} = {literal(new_unit)}")
    changed = [c for _, c in measured] if attempt < len(variants) - 1 else []
    description = (f"D′ = D plus unit {new_unit} in {names} ("
                   + ", ".join(f"{n} rows in {tab}" for tab, n in counts.items()) + ")"
                   + (f", {', '.join(changed)} beyond the bounds" if changed else ""))
    return NeighbourPair(plan.table.table, *pair_dbs, "add", new_unit, max(counts.values()), description)


def _columns_of(layout: list, i: int) -> list[str]:
    """The column names of private table ``i`` in ``layout``."""
    return next(cols for j, _, cols in layout if j == i)
