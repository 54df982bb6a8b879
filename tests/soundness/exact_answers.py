"""Exact (noise-free) answers of dpch queries, and the same question asked of ClickHouse directly.

``exact_answer(session, sql)`` is what dpch would release with every noise draw equal to zero:
the emitted SQL's exact measures (``dpch.pipeline.execute.exact``, the exact inputs the audit and the
accuracy-first runner also read), each statistic computed from them with no noise (a quantile's
exact pick on its grid: the candidate of best rank utility), the result columns, then HAVING,
ORDER BY and LIMIT exactly as a release applies them. Only groups with rows are kept, because
ClickHouse returns no row for an empty group while dpch releases every key of a public domain.

``raw_rows(engine, database, sql)`` runs the analyst's own text in ClickHouse, with its table
names qualified by ``database`` and dpch's ``SETTINGS`` removed.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import date
from typing import Any

import numpy as np

import dpch
from dpch.pipeline import execute
from dpch.pipeline.execute import GroupData
from dpch.pipeline.postprocess import build_rows, post_order
from dpch.sql.aggregate_kinds import stat_values
from dpch.sql.aggregates import Stat
from dpch.sql.analyze import QueryPlan
from dpch.sql.rewrite import emit_sql
from tests.helpers import CAP_KEY, run_private_keyed

FIXTURE_TABLES = ("visits", "people", "regions")
_SETTINGS = re.compile(r"\s+SETTINGS\s+.*$", re.IGNORECASE | re.DOTALL)


def raw_sql(sql: str, database: str, tables: tuple[str, ...] = FIXTURE_TABLES) -> str:
    """The analyst's SQL as ClickHouse runs it directly: tables qualified, dpch settings removed."""
    names = "|".join(tables)
    text = _SETTINGS.sub("", sql)
    return re.sub(rf"\b(FROM|JOIN)\s+({names})\b", lambda m: f"{m.group(1)} `{database}`.{m.group(2)}", text,
                  flags=re.IGNORECASE)


def raw_rows(engine: Any, database: str, sql: str, tables: tuple[str, ...] = FIXTURE_TABLES) -> list[tuple]:
    """The analyst's SQL run directly in ClickHouse (see :func:`raw_sql`)."""
    return engine.query_rows(raw_sql(sql, database, tables))


@dataclass
class ExactAnswer:
    columns: list[str]
    rows: list[tuple]
    plan: QueryPlan
    #: the exact inputs of every candidate group (before partition selection)
    data: GroupData
    #: indices (into data.keys) of the groups that have rows
    nonempty: list[int]


def exact_statistic(stat: Stat, data: GroupData) -> np.ndarray:
    """A statistic's value in every group with zero noise; a quantile is the exact grid pick."""
    if stat.kind != "quantile":
        return stat_values(stat, data.measures, {})
    lo, step, points = stat.grid
    picks = np.empty(len(data.keys))
    for g, hist in enumerate(data.histograms[stat.measures[0]]):
        counts = np.zeros(points)
        for index, count in hist.items():
            counts[min(int(index), points - 1)] += count
        below = np.concatenate([[0.0], np.cumsum(counts)[:-1]])
        picks[g] = lo + step * int(np.argmax(-np.abs(below - stat.quantile * counts.sum())))
    return picks


def exact_answer(session: dpch.Session, sql: str) -> ExactAnswer:
    plan, _ = session.plan(sql)
    emitted = emit_sql(plan, session.engine.database)
    data = execute.exact(session.engine, plan, emitted, CAP_KEY)  # test-only: the exact inputs a release adds noise to
    nkeys = len(plan.keys)
    present = {tuple(str(v) for v in row[:nkeys]) for row in run_private_keyed(session.engine, emitted)}
    nonempty = [g for g, key in enumerate(data.keys) if tuple(str(v) for v in key) in present]
    keys = [data.keys[g] for g in nonempty]
    values = {name: exact_statistic(stat, data)[nonempty] for name, stat in plan.stats.items()}
    rows, _ = build_rows(plan.outputs, keys, values, lambda out: None)
    order = post_order(plan, keys, values)
    return ExactAnswer(plan.columns, [rows[g] for g in order], plan, data, nonempty)


def same_value(a: Any, b: Any, *, rel: float = 1e-9, abs_: float = 1e-9) -> bool:
    """Equal as ClickHouse shows them: numbers within ``rel``/``abs_``, everything else exactly."""
    if isinstance(a, bool | int | float) and isinstance(b, bool | int | float) and a is not None and b is not None:
        if math.isnan(float(a)) or math.isnan(float(b)):
            return math.isnan(float(a)) and math.isnan(float(b))
        return math.isclose(float(a), float(b), rel_tol=rel, abs_tol=abs_)
    if isinstance(a, date) and isinstance(b, date):
        return a == b
    return a == b


def row_key(row: tuple) -> tuple:
    """Sorts rows by their non-numeric cells, then their rounded numbers (multiset comparison)."""
    return tuple((0, round(float(v), 6), "") if isinstance(v, int | float) else (1, 0.0, str(v)) for v in row)


def mismatches(dpch_rows: list[tuple], raw: list[tuple], tolerances: list[float] | None = None) -> list[str]:
    """Differences between two multisets of rows (empty: the same answer)."""
    if len(dpch_rows) != len(raw):
        return [f"{len(dpch_rows)} rows from dpch, {len(raw)} from ClickHouse"]
    problems = []
    for mine, theirs in zip(sorted(dpch_rows, key=row_key), sorted(raw, key=row_key), strict=True):
        for i, (a, b) in enumerate(zip(mine, theirs, strict=True)):
            tol = (tolerances or [0.0] * len(mine))[i]
            ok = same_value(a, b, abs_=max(tol, 1e-9)) if tol else same_value(a, b)
            if not ok:
                problems.append(f"column {i}: dpch {a!r} vs ClickHouse {b!r} (rows {mine} / {theirs})")
    return problems


def assert_same_as_clickhouse(session: dpch.Session, sql: str, theirs: list[tuple]) -> None:
    """dpch's exact answer to ``sql`` (:func:`exact_answer`) is ClickHouse's rows ``theirs`` (asked
    directly) as a multiset and, where ``sql`` orders its rows, in the same order of first column."""
    answer = exact_answer(session, sql)
    problems = mismatches(answer.rows, theirs)
    assert not problems, f"{sql}: {problems}"
    if "ORDER BY" in sql:
        assert [r[0] for r in answer.rows] == [r[0] for r in theirs], "same order"
