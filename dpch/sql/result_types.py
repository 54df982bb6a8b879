"""ClickHouse types of a release's columns, shared by the DB-API cursor and the gateway."""

from __future__ import annotations

import math
from typing import Any

from sqlglot import exp

from dpch.sql import functions, outputs
from dpch.sql.aggregate_kinds import statistic
from dpch.sql.analyze import QueryPlan

#: ClickHouse's integer types a result column can have (a count, an integer sum, an integer cast)
INTEGER_TYPES = frozenset({"Int8", "Int16", "Int32", "Int64", "UInt8", "UInt16", "UInt32", "UInt64"})


def release_types(plan: QueryPlan) -> list[str]:
    """ClickHouse types of a release's columns: a key keeps its type; a column that is exactly a
    noisy count or integer sum is Int64 (its noise is integer-valued); a conversion
    (``CAST(avg(x) AS Int32)``, ``toFloat32(…)``) has the type it converts to, as in ClickHouse;
    anything else is Float64. (A kind of release whose columns are not these says so itself:
    :meth:`dpch.pipeline.kinds.ReleaseKind.column_types`.)"""
    measures = {m.name: m for m in plan.measures}
    types = []
    for out in plan.outputs:
        if out.is_key:
            assert out.key_index is not None
            types.append(plan.keys[out.key_index].type)
            continue
        refs = outputs.references(out.expr)
        stat = plan.stats.get(refs[0]) if len(refs) == 1 and isinstance(out.expr, exp.Var) else None
        if stat is not None and statistic(stat).additive and measures[stat.measures[0]].integer:
            types.append("Int64")
        else:
            types.append(functions.result_type(out.expr) or "Float64")
    return types


def typed_rows(rows: list[tuple[Any, ...]], types: list[str]) -> list[tuple[Any, ...]]:
    """Rows with integer columns as Python ints (noise on integer measures is integer-valued, and an
    integer cast's value is whole already)."""
    ints = [t in INTEGER_TYPES for t in types]
    return [tuple(int(round(v)) if i and isinstance(v, float) and math.isfinite(v) else v
                  for v, i in zip(row, ints, strict=True)) for row in rows]
