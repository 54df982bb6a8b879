"""Stage 5, execute: run dpch's emitted SQL and hold the exact inputs of every group.

:class:`GroupData` never leaves the process: the release stage adds noise to it and only noisy
values go further. Runs after admission, inside the accountant's tripwire, while the charge's ledger
row is being written (:meth:`~dpch.accounting.accountant.Accountant.begin_charge`): nothing it
returns or raises is acted on before that row is durable."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from dpch.mechanisms.sampling import NoiseSource
from dpch.sql.analyze import QueryPlan
from dpch.sql.cap import keyed
from dpch.store.engine import Engine


@dataclass
class GroupData:
    """Exact inputs of the released groups: keys, additive measures, histograms."""

    keys: list[tuple[Any, ...]]
    measures: dict[str, np.ndarray]
    histograms: dict[str, list[dict[int, int]]]
    #: distinct units per key (partition selection only)
    units: np.ndarray
    #: ``dp_report_dropped``: (Σ over units of kept rows ÷ rows, number of units), each of sensitivity 1
    bound_report: tuple[float, float] | None = None


def exact(engine: Engine, plan: QueryPlan, sql: str, key: tuple[int, int] | None = None) -> GroupData:
    """Runs the emitted ``sql`` with the release's cap ``key`` (which rows each unit keeps,
    :func:`dpch.sql.cap.row_order`); returns the exact inputs of every group. Without a key, a fresh
    one from OS entropy: each call is then a release of its own, with its own choice of rows."""
    if key is None:
        key = NoiseSource().cap_key()
    rows = engine.run_private(sql, keyed(sql, key))
    nkeys = len(plan.keys)
    additive = [m for m in plan.measures if m.kind != "histogram"]
    hists = [m for m in plan.measures if m.kind == "histogram"]
    columns = {m.name: nkeys + j for j, m in enumerate(plan.measures)}
    if plan.group_domain is not None:
        keys = [tuple(k) for k in plan.group_domain]
        index = {tuple(str(v) for v in k): i for i, k in enumerate(keys)}
        positions = []
        for row in rows:
            position = index.get(tuple(str(v) for v in row[:nkeys]))
            if position is not None:  # the SQL keeps declared keys only
                positions.append((position, row))
    else:
        keys = [tuple(row[:nkeys]) for row in rows]
        positions = list(enumerate(rows))
    measures = {m.name: np.zeros(len(keys)) for m in additive}
    histograms: dict[str, list[dict[int, int]]] = {m.name: [{} for _ in keys] for m in hists}
    units = np.zeros(len(keys))
    for position, row in positions:
        for m in additive:
            value = row[columns[m.name]]
            measures[m.name][position] = float(value) if value is not None else 0.0
        for m in hists:
            bins, counts = row[columns[m.name]]
            histograms[m.name][position] = dict(zip(bins, counts, strict=True))
        if plan.partition_selection:
            units[position] = float(row[-1])
    report = None
    if plan.report_dropped:
        # every row repeats the one scalar; no row: no unit passed the filters, and both are exactly 0
        kept, count = rows[0][nkeys + len(plan.measures)] if rows else (0.0, 0)
        report = (float(kept), float(count))
    return GroupData(keys=keys, measures=measures, histograms=histograms, units=units, bound_report=report)
