"""The per-unit contribution cap as emitted SQL: which rows each unit keeps, and how it runs fast.

**Which rows.** The cap keeps k rows of each unit chosen uniformly at random, per row, afresh for
each release (docs/design.md rule 10): ``ORDER BY <unit>, sipHash64Keyed(<key>, <row number>) LIMIT
k BY <unit>`` (:func:`row_order`). The row number is the row's position in the table as the query
reads it (``_part_starting_offset + _part_offset``, and the shard on a Distributed table,
:func:`row_identity`): distinct for every row, whatever its values, so equal rows do not tie. The
key is 128 bits drawn for the release (:meth:`dpch.mechanisms.sampling.NoiseSource.cap_key`) and
bound as two query parameters (:data:`CAP_KEY_PARAMETERS`): it is in no SQL text dpch shows, logs or
stores; EXPLAIN shows the placeholders. SipHash is a pseudo-random function, so under a key nobody
sees the order of a unit's rows is a uniformly random permutation, independent across units
(docs/algorithms.md, "Which rows the cap keeps"). Before issue 27 the cap kept the first k rows in
the table's stored order (usually time: every time series bent downwards) or by a hash of the
selected values (equal values tied, so a unit kept all of one value or none).

The cap keeps them with ``ORDER BY … LIMIT k BY <unit>``. ClickHouse runs
``LIMIT BY`` after merging its sorted read streams into one, so on a large table the cap runs on
one core. Two rewrites keep exactly the same rows and run on more:

- **Split by unit range** (:func:`capped_rows`), where the owner declared ``split_cap`` (it costs a
  few ms on small tables, and dpch cannot choose by size without the SQL depending on the data):
  on a table stored ordered by its unit, the rows
  are cut in two at a unit value read from the table's primary index (the middle mark), and each
  half is capped on its own in one branch of a ``UNION ALL``; ClickHouse runs the branches in
  parallel, each reading only its half of the granules. Every unit lies wholly in one branch
  (``u < p`` and ``NOT (u < p)`` are complements for any non-NULL ``u`` and ``p``; NULL units are
  already excluded or not allowed here), so each unit keeps the same k rows under the same key:
  the split point decides only the speed, never the answer, and it is computed inside the query
  (nothing of the data is written in the SQL dpch shows). Splitting by a *hash* of the unit keeps
  the same rows too, but each branch then reads the whole table: measured ~2× slower than one
  stream on 20 M rows here, so the range split is used.
- **COUNT as Σ least(rows, k)** (:func:`count_by_unit`): an ungrouped ``count()`` of the capped
  rows equals the sum over units of ``least(count(), k)`` of the filtered rows, which a plain
  (parallel) GROUP BY computes without ordering anything.

And one form that reads fewer: on a table whose rows per unit the owner verified
(:func:`verified_branches`), the rows are read uncapped while the data is exactly the verified data
and capped otherwise, a guard inside the query choosing; the value is the capped one either way.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from sqlglot import exp

from dpch.policy.parts import MAX_PARTS
from dpch.policy.verified import VERIFIED_TABLE
from dpch.sql.nodes import alias, call, column, conjunction, limit_by, ordered

#: marks of the primary index read to choose the split point; ``groupArray(N)`` keeps at most N
#: values and never raises (a plain ``groupArray`` raises past its element limit: the emitted SQL
#: must be total, docs/design.md rule 5). Past N marks the split is merely less even.
SPLIT_MARKS = 65536

#: alias of the primary index in :func:`split_point`
INDEX_ALIAS = "__index"

#: name of the per-unit row count in :func:`count_by_unit`
UNIT_ROWS = "__n"


#: the query parameters holding the two 64-bit halves of a release's cap key (:func:`row_order`)
CAP_KEY_PARAMETERS = ("dpch_cap_key0", "dpch_cap_key1")

#: marks a virtual column of :func:`row_identity` (the probe's synthetic row has none: it reads 0)
ROW_MARK = "dpch_row"


def row_identity(engine: str, qualifier: str | None) -> list[exp.Expr] | None:
    """The expressions that tell a row from every other row the query reads, whatever its values:
    on a MergeTree-family table its row number, ``_part_starting_offset + _part_offset`` (the part's
    first row in the parts the query reads, which no filter changes, plus the row's offset in its
    part); on a Distributed table that and ``_shard_num`` (each shard numbers its own rows). None for
    an engine without these virtual columns (Memory, Log, …): the cap then orders by ``rand64()``."""
    def virtual(name: str) -> exp.Column:
        node = exp.Column(this=exp.Identifier(this=name, quoted=False),
                          table=exp.Identifier(this=qualifier, quoted=False) if qualifier else None)
        node.meta[ROW_MARK] = True
        return node

    row = exp.Add(this=virtual("_part_starting_offset"), expression=virtual("_part_offset"))
    if engine == "Distributed":
        return [virtual("_shard_num"), row]
    if engine.endswith("MergeTree") or not engine:  # not engine: a policy built without its table
        return [row]
    return None


def cap_key_placeholders() -> exp.Tuple:
    """``({dpch_cap_key0: UInt64}, {dpch_cap_key1: UInt64})``: the key as bound query parameters."""
    uint64 = exp.DataType(this=exp.DataType.Type.UBIGINT, nullable=False)  # not Nullable(UInt64): the key is no NULL
    return exp.Tuple(expressions=[exp.Placeholder(this=exp.var(name), kind=uint64.copy())
                                  for name in CAP_KEY_PARAMETERS])


def cap_parameters(key: tuple[int, int]) -> dict[str, int]:
    """The query parameters binding ``key`` to :func:`cap_key_placeholders`."""
    return dict(zip(CAP_KEY_PARAMETERS, key, strict=True))


def keyed(sql: str, key: tuple[int, int]) -> dict[str, int]:
    """The cap parameters ``sql`` uses (none when it emits no random cap): a query given a parameter it
    does not name would be formatted client-side by clickhouse-connect, ``%`` and all."""
    return {name: value for name, value in cap_parameters(key).items() if "{" + name + ":" in sql}


def row_order(identity: list[exp.Expr] | None) -> exp.Expr:
    """The order of a unit's rows the cap keeps the first k of: ``sipHash64Keyed(<key>, <row>)``
    (a keyed pseudo-random function of the row's identity), or ``rand64()`` without an identity."""
    if identity is None:
        return call("rand64")
    return call("sipHash64Keyed", cap_key_placeholders(), *identity)


def split_point(database: str, table: str, unit: str) -> exp.Subquery:
    """``(SELECT <middle unit value of the primary index> FROM mergeTreeIndex(db, table))``.

    One row always (an aggregate without GROUP BY); on an empty table the type's default value.
    """
    # qualified by the index's alias: an unqualified name missing from the index would resolve to the
    # outer query's column (ClickHouse 26 runs correlated subqueries) instead of failing
    units = exp.ParameterizedAgg(this="groupArray", expressions=[exp.Literal.number(SPLIT_MARKS)],
                                 params=[column(unit, INDEX_ALIAS)])
    middle = exp.Add(this=call("intDiv", call("length", units), exp.Literal.number(2)),
                     expression=exp.Literal.number(1))
    value = call("arrayElement", call("arraySort", units), middle)
    index = exp.Table(this=exp.Anonymous(this="mergeTreeIndex", expressions=[exp.Literal.string(database),
                                                                             exp.Literal.string(table)]),
                      alias=exp.TableAlias(this=exp.Identifier(this=INDEX_ALIAS, quoted=False)))
    return exp.Subquery(this=exp.Select(expressions=[value]).from_(index, copy=False))


@dataclass(frozen=True)
class VerifiedTable:
    """A table whose rows per unit the owner verified, as the query reads it (``qualifier``: its alias)."""

    database: str
    table: str
    unit: str
    cap: int
    qualifier: str


#: marks the ``_part`` virtual column of :func:`verified_branches` (the probe's synthetic row has none)
PART_MARK = "dpch_part"


#: name of the scalar holding :func:`verified_record` in the emitted query's WITH
VERIFIED = "__verified"


def verified_branches(select: exp.Select, capped: Callable[[exp.Select], exp.Query],
                      verified: VerifiedTable) -> exp.Union:
    """The rows of a table whose rows per unit the owner verified, in two branches one scalar guard G
    selects: ``(SELECT … WHERE G AND indexHint(has(<recorded part names>, _part))) UNION ALL
    capped(SELECT … WHERE NOT G)``, with G and the names read from the query's WITH scalar
    :data:`VERIFIED` (:func:`verified_record`, evaluated once per query).

    G is true when the table's active parts are now exactly the parts of its latest verification of
    at most ``cap`` rows per ``unit`` (``dpch_verified``). Why the released value is always the capped
    aggregate of the data the query reads, so that its sensitivity is the cap's whatever G's value:

    - G true: the parts are the verified ones, so every unit has at most ``cap`` rows and the uncapped
      rows of branch 1 are exactly the capped rows; branch 2 reads nothing (its WHERE is constant
      false: ClickHouse evaluates the scalar before planning and reads no part for it).
    - G false: branch 1 reads nothing; branch 2 is the cap.
    - a write between G's evaluation and the read (an INSERT: new parts, whose names no record
      holds): branch 1 reads only parts named in the record (``indexHint``: pruned by name, not
      filtered per row), each unit at most ``cap`` rows; the value is the capped aggregate of the
      data as verified, i.e. as it was when G was evaluated. A merge in that window leaves fewer of
      the named parts to read (fewer rows, each unit still at most ``cap``).

    Neither the part list nor any checksum is in the SQL: both are read from ``dpch_verified`` inside
    the query (the list identifies the data, :mod:`dpch.policy.parts`). Totality (docs/design.md
    rule 5): the functions added here read metadata and constants, except ``has(<names>, _part)``,
    a membership test of a String in an Array(String): none can raise on any row. The probe swaps
    ``_part`` (:data:`PART_MARK`) for ``''``; ``system.parts`` and ``dpch_verified`` hold no row of
    the analyst's tables, so the probe reads them as they are.
    """
    part = exp.Column(this=exp.Identifier(this="_part", quoted=False),
                      table=exp.Identifier(this=verified.qualifier, quoted=False))
    part.meta[PART_MARK] = True
    record = exp.column(VERIFIED)
    guard = call("tupleElement", record, exp.Literal.number(1))
    # indexHint: ClickHouse prunes the parts by the condition (index analysis) without evaluating it on
    # every row — as a row filter it cost 45% of the read on 20 M rows here. That the pruning happens
    # is tested (tests/policy/test_verified_rows.py), so a ClickHouse that stopped doing it fails the suite
    names = call("indexHint", call("has", call("tupleElement", record, exp.Literal.number(2)), part))
    uncapped = _where(select.copy(), exp.And(this=guard.copy(), expression=names))
    rest = capped(_where(select.copy(), exp.Not(this=exp.Paren(this=guard))))
    second = rest if isinstance(rest, exp.Union) else exp.Subquery(this=rest)
    return exp.Union(this=exp.Subquery(this=uncapped), expression=second, distinct=False)


def verified_record(verified: VerifiedTable) -> exp.CTE:
    """``WITH (SELECT (G, names) FROM dpch_verified WHERE table = … AND unit = … AND max_rows <= cap)
    AS __verified``, where G is ``notEmpty(argMax(parts, time)) AND argMax(parts, time) = (<active
    parts now>)`` and names the latest record's part names: one row always (an aggregate without
    GROUP BY), never NULL; without a record ``(0, [])`` (``''`` is never a table's part list)."""
    recorded = call("argMax", exp.column("parts"), exp.column("time"))
    now = current_parts(verified.database, verified.table)
    guard = exp.And(this=call("notEmpty", recorded), expression=exp.EQ(this=recorded.copy(), expression=now))
    names = call("argMax", exp.column("names"), exp.column("time"))
    select = exp.Select(expressions=[exp.Tuple(expressions=[guard, names])]).from_(
        exp.Table(this=exp.to_identifier(VERIFIED_TABLE), db=exp.to_identifier(verified.database)), copy=False)
    # a record of the same unit column and a bound no larger than today's: a verification of another
    # column, or of a larger bound than the cap now says, proves nothing about today's cap
    select.set("where", exp.Where(this=conjunction([
        exp.EQ(this=exp.column("table"), expression=exp.Literal.string(verified.table)),
        exp.EQ(this=exp.column("unit"), expression=exp.Literal.string(verified.unit)),
        exp.LTE(this=exp.column("max_rows"), expression=exp.Literal.number(verified.cap))])))
    return exp.CTE(this=exp.Subquery(this=select), alias=exp.TableAlias(this=exp.to_identifier(VERIFIED)),
                   scalar=True)


def current_parts(database: str, table: str) -> exp.Subquery:
    """The table's active parts now, as :data:`dpch.policy.parts.PARTS_SQL` lists them (same expression)."""
    limit = exp.Literal.number(MAX_PARTS)
    items = exp.ParameterizedAgg(this="groupArray", expressions=[limit.copy()], params=[call(
        "concat", exp.column("name"), exp.Literal.string(":"), exp.column("hash_of_all_files"))])
    listed = call("arrayStringConcat", call("arraySort", items), exp.Literal.string(","))
    value = exp.If(this=exp.LTE(this=call("count"), expression=limit), true=listed, false=exp.Literal.string(""))
    where = conjunction([exp.EQ(this=exp.column("database"), expression=exp.Literal.string(database)),
                         exp.EQ(this=exp.column("table"), expression=exp.Literal.string(table)),
                         exp.column("active")])
    active = exp.Select(expressions=[value]).from_(exp.Table(this=exp.to_identifier("parts"),
                                                             db=exp.to_identifier("system")), copy=False)
    active.set("where", exp.Where(this=where))
    return exp.Subquery(this=active)


def split_index_table(node: exp.Expr) -> tuple[str, str] | None:
    """(database, table) when ``node`` is the ``mergeTreeIndex(db, table)`` source of a
    :func:`split_point` (the probe swaps it for its synthetic row), else None."""
    if not (isinstance(node, exp.Table) and isinstance(node.this, exp.Anonymous)
            and node.this.name == "mergeTreeIndex"):
        return None
    database, table = node.this.expressions
    return database.name, table.name


def capped(select: exp.Select, order: list[exp.Expr], cap: int, unit: exp.Expr) -> exp.Select:
    """``select`` with its rows cut to each unit's first ``cap`` rows in ``order`` (in place)."""
    select.set("order", exp.Order(expressions=[ordered(o) for o in order]))
    select.set("limit", limit_by(cap, unit))
    return select


def capped_rows(select: exp.Select, order: list[exp.Expr], cap: int, unit: exp.Expr,
                split_unit: exp.Expr, point: exp.Subquery) -> exp.Union:
    """``select`` capped per unit in two branches of a UNION ALL, split at ``point`` by
    ``split_unit`` (the unit as the source rows read it)."""
    below = exp.LT(this=split_unit.copy(), expression=point.copy())
    branches = [_where(select.copy(), below), _where(select.copy(), exp.Not(this=exp.Paren(this=below.copy())))]
    # each branch in parentheses: its ORDER BY and LIMIT BY visibly belong to it, not to the union
    first, second = (exp.Subquery(this=capped(b, order, cap, unit)) for b in branches)
    return exp.Union(this=first, expression=second, distinct=False)


#: the per-unit array of kept rows and one of its rows, in :func:`two_stage`
KEPT_ROWS, KEPT_ROW = "__kept", "__row"


def two_stage(select: exp.Select, order: exp.Expr, cap: int, unit_alias: str,
              by: Sequence[exp.Expr] = ()) -> exp.Select:
    """``select``'s rows (columns aliased c0…, and the unit as ``unit_alias``) cut to each unit's ``cap`` rows
    first in ``order``, as a two-stage aggregate (issue 26, part 3) rather than a sort:

        SELECT tupleElement(__row, 2) AS c0, …, unit_alias FROM (
            SELECT <unit> AS unit_alias, groupArraySorted(cap)(tuple(<order>, <c0>, …)) AS __kept
            FROM … WHERE … GROUP BY unit_alias) ARRAY JOIN __kept AS __row

    ``groupArraySorted(k)`` keeps the k smallest tuples, which (``order`` first, distinct per row) are
    the rows ``ORDER BY unit, order LIMIT k BY unit`` keeps: the same capped rows. Its state is
    mergeable, so on a Distributed table each shard sends at most k rows per unit (its partial state)
    and the initiator merges per-unit states, where the sorted form ships every row to the initiator and
    caps them there on one core. On one server it is slower than the streamed sort
    (docs/benchmarks.md), so it is emitted for Distributed tables only. Totality: ``tuple``,
    ``tupleElement`` of a constant index, ``groupArraySorted`` with a constant bound and ``ARRAY JOIN``
    raise on no row.

    ``by``: expressions over the columns' aliases (a GROUP BY's keys) that split each unit's rows
    further, ``cap`` rows of each unit *in each* — the rows ``ORDER BY unit, by…, order LIMIT cap BY unit,
    by…`` keeps (the per-group bound's cut). They are grouped on as the columns they alias (the aliases
    are gone from the first stage's select list); NULL keys form one group, as in ``LIMIT BY``."""
    columns = [e for e in select.expressions if e.alias_or_name != unit_alias]
    unit = next(e for e in select.expressions if e.alias_or_name == unit_alias)
    bases = {e.alias: e.this for e in select.expressions if isinstance(e, exp.Alias)}

    def resolved(node: exp.Expr) -> exp.Expr:
        return node.copy().transform(
            lambda n: bases[n.name].copy() if isinstance(n, exp.Column) and not n.table and n.name in bases else n,
            copy=False)
    kept = exp.ParameterizedAgg(this="groupArraySorted", expressions=[exp.Literal.number(cap)],
                                params=[call("tuple", order.copy(), *(c.this.copy() if isinstance(c, exp.Alias)
                                                                      else c.copy() for c in columns))])
    inner = select.copy()
    inner.set("expressions", [unit.copy(), alias(kept, KEPT_ROWS)])
    inner.set("group", exp.Group(expressions=[column(unit_alias), *(resolved(b) for b in by)]))
    outer = exp.Select(expressions=[
        *(alias(call("tupleElement", column(KEPT_ROW), exp.Literal.number(i + 2)), c.alias_or_name)
          for i, c in enumerate(columns)), column(unit_alias)])
    outer = outer.from_(exp.Subquery(this=inner), copy=False)
    outer.set("joins", [exp.Join(this=exp.Alias(this=column(KEPT_ROWS), alias=exp.to_identifier(KEPT_ROW)),
                                 kind="ARRAY")])
    return outer


def count_by_unit(rows: exp.Expr, unit: exp.Expr, cap: int, name: str) -> exp.Select:
    """``SELECT sum(least(__n, cap)) AS name FROM (SELECT count() AS __n FROM rows GROUP BY unit)``."""
    per_unit = exp.Select(expressions=[alias(call("count"), UNIT_ROWS)])
    per_unit = per_unit.from_(rows.copy(), copy=False)
    per_unit.set("group", exp.Group(expressions=[unit.copy()]))
    total = call("sum", call("least", column(UNIT_ROWS), exp.Literal.number(cap)))
    return exp.Select(expressions=[alias(total, name, quoted=False)]).from_(exp.Subquery(this=per_unit), copy=False)


def _where(select: exp.Select, condition: exp.Expr) -> exp.Select:
    where = select.args.get("where")
    node = condition if where is None else exp.And(this=where.this, expression=exp.Paren(this=condition))
    select.set("where", exp.Where(this=node))
    return select


__all__ = ["CAP_KEY_PARAMETERS", "PART_MARK", "ROW_MARK", "cap_key_placeholders", "cap_parameters", "keyed",
           "row_identity", "row_order", "SPLIT_MARKS", "UNIT_ROWS", "capped", "capped_rows", "count_by_unit",
           "KEPT_ROW", "KEPT_ROWS", "two_stage",
           "current_parts",
           "split_index_table", "split_point", "VERIFIED", "VerifiedTable", "verified_branches", "verified_record"]
