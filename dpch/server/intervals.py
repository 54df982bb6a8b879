"""``SETTINGS dp_intervals = 'columns'``: a release's confidence intervals as ordinary columns.

A BI tool draws error bars from columns, not from dpch's headers. With the setting, each noisy
column ``c`` is followed by ``c_lo`` and ``c_hi``, the bounds of its interval at the release's
confidence (``X-Dpch-Confidence``). Keys and columns computed from keys alone are exact and get
none; neither do quantiles, which have no interval (docs/serving.md). Which columns get bounds
follows from the query's plan alone, so a query's result columns never depend on the data.

The bounds are post-processing of the release (the same numbers :class:`~dpch.Release` carries in
``intervals``): they cost nothing and change nothing that was charged. They are ``Float64``: an
integer count's interval ``n ± half-width`` is not integer-valued.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from dpch.errors import QueryRejected
from dpch.sql.aggregate_kinds import statistic
from dpch.sql.analyze import QueryPlan

#: the type of every ``_lo``/``_hi`` column
BOUND_TYPE = "Float64"


def noisy_columns(plan: QueryPlan) -> tuple[bool, ...]:
    """Per output column of ``plan``: whether it is noisy and has an interval (EXPLAIN DP: none).

    Mirrors how the pipeline builds intervals (:func:`dpch.pipeline.postprocess.build_rows`): a
    column gets one unless it is a key, reads no statistic, or reads one without an interval."""
    if plan.query.explain:
        return (False,)
    return tuple(
        not out.is_key and bool(out.stats) and all(not statistic(plan.stats[s]).selected for s in out.stats)
        for out in plan.outputs
    )


def bound_names(column: str) -> tuple[str, str]:
    return f"{column}_lo", f"{column}_hi"


def check_names(columns: Sequence[str], noisy: Sequence[bool]) -> None:
    """Refuses (before anything is charged) a query whose bound columns would collide with its own."""
    taken = set(columns)
    for column, flag in zip(columns, noisy, strict=True):
        if not flag:
            continue
        for name in bound_names(column):
            if name in taken:
                raise QueryRejected(
                    f"dp_intervals = 'columns' would add a column {name}, but the query already has one",
                    hint="rename that column (AS ...), or leave dp_intervals unset for this query")
            taken.add(name)


def with_bounds(columns: Sequence[str], types: Sequence[str], rows: Sequence[Sequence[Any]],
                intervals: Sequence[Sequence[tuple[float, float] | None]],
                noisy: Sequence[bool]) -> tuple[list[str], list[str], list[tuple[Any, ...]]]:
    """``columns``/``types``/``rows`` with ``c_lo``, ``c_hi`` after each noisy column ``c``."""
    out_columns: list[str] = []
    out_types: list[str] = []
    for column, ch_type, flag in zip(columns, types, noisy, strict=True):
        out_columns.append(column)
        out_types.append(ch_type)
        if flag:
            out_columns.extend(bound_names(column))
            out_types.extend((BOUND_TYPE, BOUND_TYPE))
    out_rows = []
    for row, ivs in zip(rows, intervals, strict=True):
        values: list[Any] = []
        for value, iv, flag in zip(row, ivs, noisy, strict=True):
            values.append(value)
            if flag:
                # every noisy column has an interval in every row (the pipeline builds them per
                # column); NaN would only mark a broken invariant, never a value
                values.extend(iv if iv is not None else (math.nan, math.nan))
        out_rows.append(tuple(values))
    return out_columns, out_types, out_rows
