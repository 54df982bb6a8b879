"""Stage 6, release: draw the noise of a charged plan on exact :class:`GroupData` and turn it
into result rows (post-processing only from here on).

The caller must have charged ``noise.cost`` durably first (docs/design.md rule 2); the audit calls
:func:`release_rows` on fixed exact inputs to redraw the noise many times."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from dpch.mechanisms.sampling import NoiseSource
from dpch.pipeline.calibrate import NoisePlan
from dpch.pipeline.execute import GroupData
from dpch.pipeline.postprocess import (
    build_rows,
    having_order_limit,
    pick_quantiles,
)
from dpch.sql.analyze import QueryPlan
from dpch.sql.settings import QueryOptions
from dpch.sql.statistics import stat_intervals, stat_values

Interval = tuple[float, float]
Rows = tuple[list[str], list[tuple[Any, ...]], list[list[Interval | None]]]


class Noise:
    """A session's noise source, one draw sequence at a time (the generator is not thread-safe)."""

    def __init__(self, seed: int | None = None) -> None:
        self.source = NoiseSource(seed)
        self._lock = threading.Lock()

    @contextmanager
    def drawing(self) -> Iterator[NoiseSource]:
        """The source, held for one release's draws."""
        with self._lock:
            yield self.source


def release_rows(plan: QueryPlan, opts: QueryOptions, noise: NoisePlan, data: GroupData,
                 source: NoiseSource) -> Rows:
    """Draws the noise for ``data`` and post-processes it into (columns, rows, intervals)."""
    keys, measures, histograms = data.keys, data.measures, data.histograms
    shared: dict[str, Any] = {}
    if noise.selection is not None:
        counts = noise.selection.noisy_counts(data.units, source)
        keep = noise.selection.keep(counts)
        keys = [k for k, kept in zip(keys, keep, strict=True) if kept]
        measures = {name: arr[keep] for name, arr in measures.items()}
        histograms = {name: [h for h, kept in zip(hs, keep, strict=True) if kept]
                      for name, hs in histograms.items()}
        if noise.shared is not None:  # the count of units is the answer: its selection noise is its noise
            shared[noise.shared] = counts[keep]
    noisy = {name: mech.release(measures[name], source) for name, mech in noise.additive.items()} | shared
    quantiles = {
        stat.name: pick_quantiles(stat, histograms[stat.measures[0]], noise, source)
        for stat in plan.stats.values() if stat.kind == "quantile"
    }
    values = {name: stat_values(stat, noisy, quantiles) for name, stat in plan.stats.items()}

    def intervals_for(out):  # type: ignore[no-untyped-def]
        level = 1.0 - (1.0 - opts.confidence) / max(1, len(set(out.stats)))
        ivs = {name: stat_intervals(plan.stats[name], noisy, noise.half_width, level) for name in set(out.stats)}
        return None if any(v is None for v in ivs.values()) else ivs

    rows, intervals = build_rows(plan.outputs, keys, values, intervals_for)
    rows, intervals = having_order_limit(plan, keys, values, rows, intervals)
    return plan.columns, rows, intervals
